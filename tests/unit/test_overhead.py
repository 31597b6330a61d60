#!/usr/bin/env python3
"""vmcelab.overhead's statistics: the median's interval and the verdict
(run/bench --overhead, run/hostlab --overhead)"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "run", "lib"))
from vmcelab import overhead  # noqa: E402


class MedianInterval(unittest.TestCase):
    def test_nine_pairs_give_the_second_and_eighth(self):
        # P(Bin(9, 1/2) <= 1) = 10/512: [x2, x8] holds the median 96.1% of the time
        low, high, conf = overhead.median_interval([9, 1, 8, 2, 7, 3, 6, 4, 5])
        self.assertEqual((low, high), (2, 8))
        self.assertAlmostEqual(conf, 1 - 20 / 512)

    def test_too_few_for_95_is_min_max_with_its_confidence(self):
        low, high, conf = overhead.median_interval([1.02, 0.97, 1.0])
        self.assertEqual((low, high), (0.97, 1.02))
        self.assertAlmostEqual(conf, 0.75)

    def test_one_value(self):
        self.assertEqual(overhead.median_interval([0.99])[:2], (0.99, 0.99))

    def test_nothing(self):
        self.assertIsNone(overhead.median_interval([]))

    def test_order_does_not_matter(self):
        xs = [1.1, 0.8, 0.95, 1.3, 0.7, 1.0, 1.05, 0.9, 1.2, 0.85, 1.15]
        self.assertEqual(overhead.median_interval(xs), overhead.median_interval(sorted(xs)))


class Verdict(unittest.TestCase):
    def row(self, low, high, bound):
        return {"ratio_interval": [low, high, 0.961], "bound": bound}

    def test_interval_above_is_met(self):
        self.assertTrue(overhead.verdict(self.row(0.995, 1.01, 0.5))[0])

    def test_interval_below_fails_whatever_the_bound(self):
        met, why = overhead.verdict(self.row(0.9, 0.98, 0.99999))
        self.assertFalse(met)
        self.assertIn("below", why)

    def test_wide_interval_goes_to_the_bound(self):
        met, why = overhead.verdict(self.row(0.6, 1.4, 0.9999))
        self.assertTrue(met)
        self.assertIn("bound", why)

    def test_too_few_pairs_cannot_decide_directly(self):
        met, why = overhead.verdict({"ratio_interval": [0.7, 0.94, 0.5], "bound": 0.9999})
        self.assertTrue(met)
        self.assertIn("only 50% confidence", why)
        self.assertIsNone(overhead.verdict({"ratio_interval": [1.0, 1.1, 0.75], "bound": 0.9})[0])

    def test_wide_interval_and_a_low_bound_is_no_verdict(self):
        met, why = overhead.verdict(self.row(0.6, 1.4, 0.98))
        self.assertIsNone(met)
        self.assertIn("spans", why)


if __name__ == "__main__":
    unittest.main()
