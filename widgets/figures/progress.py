"""Quality against solver time: each CP-SAT/MILP method's incumbent and proven bound as they
changed (``plan.stats["progress"]``, see :mod:`workbench.solvers.progress`), each heuristic as
a point at its solve time and judged makespan, and the best lower bound of the problem as a
line; time on a log axis.

Only methods whose engine models the whole problem (registered ``exact``: ``pesto_ilp``, the
IPs, ``dp``) are drawn as traces, and their bound only where it bounds every plan
(``stats["bound_valid"]``, default true); a method whose engine runs on sub-problems (Pesto's
windows on a coarsened graph) reports the sub-problems' figures in its ``progress``, which are
not makespans of the whole graph: it is drawn as a point like the heuristics.

The incumbent is the engine's model objective (its predicted makespan), the points are the
judge's makespans: for a method the two can differ (the model's rounding, congestion it does
not model); the last incumbent is drawn against the method's judged makespan as a hollow
marker at its end.

Traces: per method with progress ``<method> incumbent`` and ``<method> bound``; ``heuristics``
(one marker each); ``judged`` (hollow markers of the traced methods); ``lower bound``.

Examples
--------
>>> import workbench as wb
>>> from workbench.workloads import layered
>>> g, c = layered(20, seed=1), wb.Cluster.preset("2xV100-pcie")
>>> cmp = wb.compare(g, c, methods=["heft", "pesto_ilp"], progress=False, keep=True,
...                  time_limit=2)
>>> fig = progress_figure(cmp)
>>> [t.name for t in fig.data]
['pesto_ilp incumbent', 'pesto_ilp bound', 'judged', 'heuristics', 'lower bound']
>>> fig.layout.xaxis.type
'log'
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from .methods import method_color

__all__ = ["progress_figure", "progress_steps"]


def progress_steps(events: list, end_s: float | None = None) -> dict:
    """``{"s", "objective", "bound"}`` arrays of a progress list as step functions (each
    value held until the next event; known values only), extended to ``end_s``.

    >>> st = progress_steps([{"s": 1.0, "objective": None, "bound": 2.0},
    ...                      {"s": 2.0, "objective": 9.0, "bound": 3.0}], end_s=4.0)
    >>> st["s"].tolist(), st["objective"].tolist(), st["bound"].tolist()
    ([1.0, 2.0, 4.0], [nan, 9.0, 9.0], [2.0, 3.0, 3.0])
    """
    s = [float(e["s"]) for e in events]
    obj, bnd = [], []
    last_o = last_b = math.nan
    for e in events:
        last_o = e["objective"] if e.get("objective") is not None else last_o
        last_b = e["bound"] if e.get("bound") is not None else last_b
        obj.append(last_o)
        bnd.append(last_b)
    if end_s is not None and s and end_s > s[-1]:
        s.append(float(end_s))
        obj.append(obj[-1])
        bnd.append(bnd[-1])
    return {"s": np.array(s), "objective": np.array(obj, dtype=float),
            "bound": np.array(bnd, dtype=float)}


def progress_figure(comparison, *, title: str | None = None, height: int | None = None,
                    fig: go.Figure | None = None) -> go.Figure:
    """Incumbent and bound against time per traced method, heuristics as points, the
    problem's best lower bound as a line (from ``compare(..., keep=True)``)."""
    from workbench.solvers import SOLVERS

    table, plans = comparison.table, comparison.plans
    ok = table[(table["status"] != "error") & (table["objective"] == "makespan")]
    fig = go.Figure() if fig is None else fig
    fig.data = []
    traced, points = [], []
    t_max = 1e-3
    for _, r in ok.iterrows():
        m = r["method"]
        p = plans.get(m)
        if p is None:
            continue
        t_max = max(t_max, float(r["solve_s"]))
        ev = p.stats.get("progress") or []
        info = SOLVERS.get(m)
        if ev and info is not None and info.exact:
            traced.append((m, progress_steps(ev, end_s=float(r["solve_s"])),
                           float(r["makespan_ms"]), float(r["solve_s"])))
        else:
            points.append((m, float(r["solve_s"]), float(r["makespan_ms"])))
    for m, st, _judged, _s in traced:
        col = method_color(m)
        if not plans[m].stats.get("bound_valid", True):
            st = {**st, "bound": np.full(len(st["s"]), np.nan)}
        fig.add_trace(go.Scatter(name=f"{m} incumbent", x=st["s"], y=st["objective"],
                                 mode="lines+markers", line=dict(shape="hv", color=col, width=2),
                                 marker=dict(size=5, color=col),
                                 hovertemplate=f"<b>{m}</b> incumbent %{{y:.4g}} ms at "
                                               f"%{{x:.3g}} s<extra></extra>"))
        fig.add_trace(go.Scatter(name=f"{m} bound", x=st["s"], y=st["bound"], mode="lines",
                                 line=dict(shape="hv", color=col, width=1.5, dash="dot"),
                                 hovertemplate=f"<b>{m}</b> proven bound %{{y:.4g}} ms at "
                                               f"%{{x:.3g}} s<extra></extra>"))
    if traced:
        fig.add_trace(go.Scatter(
            name="judged", x=[s for *_x, s in traced], y=[j for _m, _st, j, _s in traced],
            mode="markers", marker=dict(symbol="circle-open", size=12, line=dict(width=2),
                                        color=[method_color(m) for m, *_x in traced]),
            text=[m for m, *_x in traced],
            hovertemplate="<b>%{text}</b>: judged makespan %{y:.4g} ms<extra></extra>"))
    fig.add_trace(go.Scatter(
        name="heuristics", x=[max(s, 1e-4) for _m, s, _v in points], y=[v for *_x, v in points],
        mode="markers+text", text=[m for m, *_x in points], textposition="top center",
        marker=dict(size=11, color=[method_color(m) for m, *_x in points], symbol="diamond"),
        hovertemplate="<b>%{text}</b>: %{y:.4g} ms in %{x:.3g} s<extra></extra>"))
    lb = float(table["makespan_lb"].iloc[0]) if len(table) else math.nan
    fig.add_trace(go.Scatter(name="lower bound", x=[1e-4, t_max * 1.5], y=[lb, lb],
                             mode="lines", line=dict(color="#111111", width=1.5, dash="dash"),
                             hovertemplate=f"best lower bound {lb:.4g} ms<extra></extra>"))
    fig.update_xaxes(type="log", title="solver time (s, log)")
    fig.update_yaxes(title="makespan (ms)")
    fig.update_layout(
        title=dict(text=title or "quality against solver time: incumbents, bounds and "
                   "heuristics", x=0.01),
        template="plotly_white", autosize=True, height=height or 420,
        margin=dict(l=10, r=10, t=60, b=40),
        legend=dict(orientation="h", y=-0.18, yanchor="top", x=0),
        meta={"figure": "progress", "traced": [m for m, *_x in traced],
              "heuristics": [m for m, *_x in points], "lower_bound": lb})
    return fig
