#!/usr/bin/env python3
"""The benches' percentile (vmcelab.stats): nearest rank, never
interpolated, so the figures quoted keep their meaning."""
import os
import statistics
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "run", "lib"))

from vmcelab.stats import percentile  # noqa: E402


class Percentile(unittest.TestCase):
    def test_nearest_rank_not_interpolated(self):
        # interpolation would say 2.5 and 3.97: values nobody measured
        self.assertEqual(percentile([4, 1, 3, 2], 50), 2)
        self.assertEqual(percentile([1, 2, 3, 4], 99), 4)
        self.assertNotEqual(percentile([1, 2, 3, 4], 50), statistics.median([1, 2, 3, 4]))

    def test_ranks(self):
        values = list(range(1, 201))  # the tail bench's 200 events
        self.assertEqual(percentile(values, 99), 198)
        self.assertEqual(percentile(values, 50), 100)
        self.assertEqual(percentile(values, 100), 200)
        self.assertEqual(percentile(values, 0.1), 1)

    def test_whole_ranks_are_not_rounded_up(self):
        # the 99th of 100 and the 297th of 300, not the next one up
        self.assertEqual(percentile(range(1, 101), 99), 99)
        self.assertEqual(percentile(range(1, 301), 99), 297)
        # 0.29 * 100 is 28.999999999999996 in floating point
        self.assertEqual(percentile(range(1, 101), 29), 29)
        self.assertEqual(percentile(range(1, 10**5 + 1), 99), 99000)

    def test_small_and_empty(self):
        self.assertIsNone(percentile([], 99))
        self.assertEqual(percentile([7], 50), 7)
        self.assertEqual(percentile([7], 99), 7)
        self.assertEqual(percentile([5, 9], 50), 5)
        self.assertEqual(percentile([5, 9], 51), 9)

    def test_any_iterable_unsorted(self):
        self.assertEqual(percentile((x for x in [30, 10, 20]), 67), 30)
        self.assertEqual(percentile([0.3, 0.1, 0.2], 34), 0.2)


if __name__ == "__main__":
    unittest.main()
