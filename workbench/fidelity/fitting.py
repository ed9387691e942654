"""Fits of the calibrated judge's figures to measurements: a link's line, a bisection onto a
measured step, the slowdown of ops that run while other devices compute.

Every function here reads numbers that :mod:`workbench.runtime` measured (samples, traces,
step times) and returns fitted figures; none runs a program.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import numpy as np

from ..cluster import Link
from ..errors import RuntimeBridgeError
from .extras import busy_overlap

__all__ = ["contention_factor", "fit_link", "fit_overhead", "overlap_slope"]


def fit_link(nbytes: Sequence[float], ms: Sequence[float]) -> Link:
    """Least-squares fit of ``ms = latency + nbytes / bandwidth`` with its R^2.

    >>> lk = fit_link([0, 1e6, 2e6, 3e6], [0.1, 1.1, 2.1, 3.1])
    >>> round(lk.latency, 3), round(lk.bandwidth), round(lk.r2, 3)
    (0.1, 1000000, 1.0)
    >>> fit_link([1e3, 1e6], [0.2, 0.1]).bandwidth
    inf
    """
    x = np.asarray(nbytes, dtype=float)
    y = np.asarray(ms, dtype=float)
    if len(x) < 2 or len(x) != len(y):
        raise RuntimeBridgeError("fit_link needs at least two (bytes, ms) samples of equal length")
    A = np.vstack([np.ones_like(x), x]).T
    (a, b), *_ = np.linalg.lstsq(A, y, rcond=None)
    if b <= 0:
        lat = max(0.0, float(y.mean()))
        pred = np.full_like(y, lat)
        bw = math.inf
    else:
        lat = max(0.0, float(a))
        pred = lat + b * x
        bw = 1.0 / float(b)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    ss_res = float(((y - pred) ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)
    return Link(latency=lat, bandwidth=bw, r2=float(r2))


def contention_factor(busy: dict, alone: dict, *, min_ms: float = 0.01) -> float:
    """Median over ops of (time in ``busy``) / (time in ``alone``), at least 1: two traces (node
    -> (device, start, end)) of the same ops, e.g. a multi-device probe and a single-device
    run. Ops shorter than ``min_ms`` alone are left out (their times are mostly the tracer's);
    a median of ratios, not a ratio of sums, so one preempted op does not set the factor.

    >>> contention_factor({"a": ("d", 0, 1.5), "b": ("d", 2, 5.0), "c": ("d", 5, 95.0)},
    ...                   {"a": ("d", 0, 1.0), "b": ("d", 1, 3.0), "c": ("d", 3, 4.0)})
    1.5
    """
    ratios = [(busy[v][2] - busy[v][1]) / (alone[v][2] - alone[v][1]) for v in busy
              if v in alone and alone[v][2] - alone[v][1] >= min_ms]
    return max(1.0, float(statistics.median(ratios))) if ratios else 1.0


def overlap_slope(busy: dict, alone: dict, *, min_ms: float = 0.01,
                  min_overlap: float = 0.5) -> float:
    """The ``overlap`` model change's slope ``s``: an op that runs while another device computes
    for a fraction ``x`` of its time takes ``1 + s * x`` times its single-device time. From two
    traces (node -> (device, start, end)) of the same ops: a multi-device probe and a
    single-device run; ``s`` is the median over the probe's ops with overlap at least
    ``min_overlap`` (and at least ``min_ms`` alone) of ``(ratio - 1) / overlap``, at least 0.

    >>> busy = {"a": ("d0", 0.0, 2.0), "b": ("d1", 0.0, 2.0), "c": ("d0", 2.0, 3.0)}
    >>> alone = {"a": ("d0", 0.0, 1.6), "b": ("d0", 1.6, 3.2), "c": ("d0", 3.2, 4.2)}
    >>> round(overlap_slope(busy, alone), 3)
    0.25
    """
    names = [v for v in busy if v in alone and alone[v][2] - alone[v][1] >= min_ms]
    if not names:
        return 0.0
    devs = {d: i for i, d in enumerate(sorted({busy[v][0] for v in busy}))}
    allv = list(busy)
    ov = busy_overlap([devs[busy[v][0]] for v in allv], [busy[v][1] for v in allv],
                      [busy[v][2] for v in allv])
    ov = dict(zip(allv, ov))
    vals = [((busy[v][2] - busy[v][1]) / (alone[v][2] - alone[v][1]) - 1.0) / ov[v]
            for v in names if ov[v] >= min_overlap]
    return max(0.0, float(statistics.median(vals))) if vals else 0.0


def fit_overhead(predict, measured_ms: float, max_ms: float) -> float:
    """The smallest receive overhead ``o`` (bisection) with ``predict(o) >= measured_ms``."""
    lo, hi = 0.0, 1e-3
    if predict(lo) >= measured_ms:
        return 0.0
    while predict(hi) < measured_ms and hi < max_ms:
        lo, hi = hi, min(2 * hi, max_ms)
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        if predict(mid) < measured_ms:
            lo = mid
        else:
            hi = mid
    return hi

