"""The fidelity ladder: how well each rung (a judge with some changes) predicts measured steps
-- relative errors, pairwise order agreement, the best plan -- and the spreads it is read
against.
"""

from __future__ import annotations

import math
import statistics

import numpy as np

from ..errors import RuntimeBridgeError

__all__ = ["ladder_stats", "measured_spread", "plan_key", "step_spread", "tick_share", "twin_pairs"]


def step_spread(samples) -> float:
    """Half the interquartile range of a plan's timed steps (ms): robust to a preempted step."""
    q = np.percentile(np.asarray(samples, dtype=float), [25, 75]) if len(samples) else [0, 0]
    return float(q[1] - q[0]) / 2


def measured_spread(measured, name: str) -> float:
    """The spread (:func:`step_spread`) of a measurement given as a
    :class:`~workbench.runtime.runner.Measurement`; 0 for a bare number."""
    samples = getattr(measured.get(name), "samples", None)
    return step_spread(samples) if samples else 0.0


def tick_share(samples, *, tick_ms: float = 4.0, tol_ms: float = 0.3) -> float:
    """The share of timed steps within ``tol_ms`` of a non-zero multiple of the scheduler's tick
    (``tick_ms``: 4 ms at ``CONFIG_HZ=250``): on a loaded machine a step whose caller slept waits
    for a tick, so such steps cluster there. Meaningful for a plan whose undisturbed step is
    not itself near a multiple of the tick.

    >>> tick_share([1.8, 1.9, 4.1, 7.9, 12.05, 2.6])
    0.5
    >>> tick_share([])
    nan
    """
    if tick_ms <= 0 or tol_ms < 0:
        raise RuntimeBridgeError(f"tick_share: need tick_ms > 0 and tol_ms >= 0, got "
                                 f"{tick_ms}, {tol_ms}")
    x = np.asarray(samples, dtype=float)
    if not len(x):
        return math.nan
    k = np.round(x / tick_ms)
    return float(np.mean((k >= 1) & (np.abs(x - k * tick_ms) <= tol_ms)))


def plan_key(plan) -> tuple:
    """What makes two plans the same plan: the placement and each device's order (hashable).

    >>> from workbench import samples, Plan
    >>> g = samples.diamond()
    >>> a = Plan(g, {"a": "cpu0", "b": "cpu0", "c": "cpu1", "d": "cpu0"})
    >>> plan_key(a) == plan_key(Plan(g, dict(a.placement)))
    True
    >>> plan_key(a) == plan_key(Plan(g, dict(a.placement), order={"cpu0": ["a", "c", "b", "d"]}))
    False
    """
    order = plan.order or {}
    return (tuple(sorted(plan.placement.items())),
            tuple(sorted((d, tuple(ops)) for d, ops in order.items())))


def twin_pairs(rows) -> list:
    """The pairs of rows (dicts with ``model`` and optional ``key``, :func:`plan_key`) that are
    one plan of one model: returned by two methods, timed in two sessions.

    >>> twin_pairs([{"model": "m", "plan": "a", "key": 1}, {"model": "m", "plan": "b", "key": 1},
    ...             {"model": "m", "plan": "c"}, {"model": "m", "plan": "d"}])[0][1]["plan"]
    'b'
    """
    return [(a, b) for i, a in enumerate(rows) for b in rows[i + 1:] if _same_plan(a, b)]


def _same_plan(a: dict, b: dict) -> bool:
    return (a["model"] == b["model"] and a.get("key") is not None
            and a.get("key") == b.get("key"))


def ladder_stats(rows, rungs) -> dict:
    """Per rung: median and worst relative error, pairwise order agreement with the measurement
    (all pairs of plans of one model, and the pairs whose measured medians differ by more than
    the sum of their spreads), and on how many models the rung's predicted best plan is within
    the measured spread of the measured best.

    ``rows``: dicts with ``model``, ``plan``, ``measured`` (median ms), ``spread`` (ms, e.g.
    half the interquartile range of the steps) and one predicted ms per rung name; optional
    ``key`` (:func:`plan_key`). Two rows of one model with the same key are one plan that two
    methods returned, timed in two sessions: no model can order a plan against itself, so the
    pair is not counted among the pairs but as ``twins`` (and ``twins_beyond`` where its two
    sessions differ by more than their spreads: a measure of how far sessions of one plan
    drift apart).

    >>> rows = [{"model": "m", "plan": "a", "measured": 10.0, "spread": 0.5, "r": 11.0},
    ...         {"model": "m", "plan": "b", "measured": 20.0, "spread": 0.5, "r": 19.0},
    ...         {"model": "m", "plan": "c", "measured": 10.2, "spread": 0.5, "r": 9.0}]
    >>> s = ladder_stats(rows, ["r"])["r"]
    >>> round(s["median"], 3), s["pairs"], s["agree"], s["pairs_beyond"], s["agree_beyond"]
    (0.1, 3, 2, 2, 2)
    >>> s["best_ok"], s["models"]
    (1, 1)
    >>> twins = [{**r, "key": k} for r, k in zip(rows, ("x", "y", "y"))]   # b and c: one plan
    >>> s = ladder_stats(twins, ["r"])["r"]
    >>> s["pairs"], s["pairs_beyond"], s["agree_beyond"], s["twins"], s["twins_beyond"]
    (2, 1, 1, 1, 1)
    """
    out = {}
    models: dict = {}
    for r in rows:
        models.setdefault(r["model"], []).append(r)
    for rung in rungs:
        errs = [(abs(r[rung] - r["measured"]) / r["measured"], r["model"], r["plan"])
                for r in rows if np.isfinite(r.get(rung, math.nan))]
        st = {"median": statistics.median(e for e, _, _ in errs) if errs else math.nan,
              "worst": max(errs) if errs else (math.nan, "", ""), "pairs": 0, "agree": 0,
              "pairs_beyond": 0, "agree_beyond": 0, "best_ok": 0, "models": 0, "twins": 0,
              "twins_beyond": 0}
        for rs in models.values():
            for i, a in enumerate(rs):
                for b in rs[i + 1:]:
                    beyond = abs(a["measured"] - b["measured"]) > a["spread"] + b["spread"]
                    if _same_plan(a, b):
                        st["twins"] += 1
                        st["twins_beyond"] += beyond
                        continue
                    same = (a[rung] - b[rung]) * (a["measured"] - b["measured"]) > 0
                    st["pairs"] += 1
                    st["agree"] += same
                    if beyond:
                        st["pairs_beyond"] += 1
                        st["agree_beyond"] += same
            if rs:
                pb = min(rs, key=lambda r: r[rung])
                mb = min(rs, key=lambda r: r["measured"])
                st["models"] += 1
                st["best_ok"] += pb["measured"] - mb["measured"] <= pb["spread"] + mb["spread"]
        out[rung] = st
    return out
