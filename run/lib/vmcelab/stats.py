"""Percentiles of measured figures, one way for every bench (run/bench,
run/libvirt/bench, scale.py, storm.py).

A percentile here is the nearest rank: the smallest measured value with at
least p% of the values at or below it. It is never interpolated, so a p99
is a latency that really happened, and it is what the benches have always
quoted (their copies differed only at the edges: run/bench's rounded half
to even, so p99 of 100 values was the largest rather than the 99th, and
storm.py took the next rank up). A median is statistics.median's: the
middle value, or the mean of the two middle ones.
"""
import math


def percentile(values, p):
    """The @p-th percentile (0 < @p <= 100) of @values by nearest rank, or
    None when there are none"""
    s = sorted(values)
    if not s:
        return None
    # p * n / 100 rounded first so that a whole rank made inexact by
    # floating point (0.29 * 100) is not taken for the next one up
    rank = math.ceil(round(p * len(s) / 100, 9))
    return s[min(len(s), max(1, rank)) - 1]
