"""Shared helpers of the figure functions: palettes, device colours, hover formatting."""

from __future__ import annotations

import numpy as np

from workbench.comparison import fmt_bytes  # the core's formatter, used by the views too

__all__ = ["KIND_NAMES", "PALETTE", "color_cycle", "device_colors", "expect", "fmt_bytes",
           "fmt_ms", "op_times_or_min"]

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#bcbd22", "#7f7f7f", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#c49c94",
           "#f7b6d2", "#9edae5")
"""Qualitative palette (red is kept for critical paths and bottlenecks)."""

CRITICAL = "#d62728"
UNPLACED = "#b0b0b0"
KIND_NAMES = ("fwd", "bwd", "update", "other")


def expect(obj, kind: str, what: str, *, optional: bool = False) -> None:
    """Refuse ``obj`` unless it is a workbench ``kind`` (``"graph"``, ``"plan"``,
    ``"schedule"`` or ``"cluster"``; None too with ``optional``): a view handed the wrong object
    says so instead of an AttributeError from deep inside plotly code (issue 41).

    >>> expect(None, "schedule", "gantt_figure's schedule")
    Traceback (most recent call last):
    ...
    workbench.errors.PlanError: gantt_figure's schedule must be a Schedule (workbench.simulate(plan, cluster)), got NoneType
    """
    from workbench.cluster import Cluster
    from workbench.errors import PlanError
    from workbench.graph import OpGraph
    from workbench.plan import Plan, Schedule

    cls, hint = {"graph": (OpGraph, "an OpGraph"), "plan": (Plan, "a Plan"),
                 "schedule": (Schedule, "a Schedule (workbench.simulate(plan, cluster))"),
                 "cluster": (Cluster, "a Cluster")}[kind]
    if (obj is None and optional) or isinstance(obj, cls):
        return
    raise PlanError(f"{what} must be {hint}, got {type(obj).__name__}")


def color_cycle(i: int) -> str:
    """Colour number ``i`` of :data:`PALETTE`, cycling.

    >>> color_cycle(0), color_cycle(len(PALETTE))
    ('#1f77b4', '#1f77b4')
    """
    return PALETTE[int(i) % len(PALETTE)]


def device_colors(names) -> dict:
    """Device name -> colour, in the given order.

    >>> device_colors(["gpu0", "gpu1"])
    {'gpu0': '#1f77b4', 'gpu1': '#ff7f0e'}
    """
    return {str(d): color_cycle(i) for i, d in enumerate(names)}


def fmt_ms(x: float) -> str:
    """Milliseconds with a sensible number of digits.

    >>> fmt_ms(1234.5), fmt_ms(0.01234)
    ('1234.5 ms', '0.0123 ms')
    """
    x = float(x)
    if not np.isfinite(x):
        return "inf"
    if abs(x) >= 100:
        return f"{x:.1f} ms"
    return f"{x:.3g} ms"


def op_times_or_min(graph, cluster=None) -> np.ndarray:
    """Per-op time used for sizes and the static critical path: the mean over the cluster's
    devices that can run it when a cluster is given, else the fastest device kind."""
    if cluster is not None:
        from workbench.analysis import node_weights

        return node_weights(graph, cluster, "mean")
    t = graph.c.min_compute()
    return np.where(np.isfinite(t), t, 0.0)

