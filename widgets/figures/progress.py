"""Quality against solver time: every method that recorded its progress
(``plan.stats["progress"]``, see :mod:`workbench.solvers.progress`) as its incumbent (and, where
it proved one, its bound) against time, each heuristic as a point at its solve time and judged
value, and the problem's best lower bound as a line; time on a log axis shared by the panels.

One panel per objective, stacked on one time axis: **makespan** (``ms`` per step; the
makespan methods, and the latency methods, whose single-sample latency is a step time too) and,
when a max-load method was compared, **max load** (``ms`` per sample, the pipelined methods:
``local_search``, ``dp``, the IPs, ``dpl``, ``pipedream``, ``metis``). Two panels rather than a
second y axis on one: the two objectives measure different things (a step against a pipeline's
time per sample) and differ by up to the number of devices, so on one plot one set of lines
is flattened against the axis, and a second y axis makes every line read against the wrong
scale half the time. A method is drawn in the panel of its own objective only.

A method is drawn as a **trace** when it recorded progress: exact engines (``pesto_ilp``, the
IPs), Pesto's CP-SAT engine on a coarsened graph (its first coarse solve and its window rounds,
each a CP-SAT run whose objective is the model's makespan of the *whole* graph) and
``local_search`` (its search max load at each improvement). The incumbent is the best model
objective recorded so far over all of the method's engine runs (the method keeps its best
plan); the bound is drawn only where it bounds the method's model of the whole problem
(``stats["bound_valid"]``, default: the method is registered ``exact``): a coarse or window
model's bound, or a heuristic's (none), is not drawn. The IPs' bound is that of the splits
their program allows (contiguous ones for ``ip_contig``), so it can lie above the panel's
lower bound, which holds for every plan. Every engine records in ms (the IPs' and Pesto's
MILPs, written in units of a reference time, are scaled where they are recorded). A method whose runs recorded no incumbent and no bound that may be drawn
(Pesto's coarse MILP before its first solution, say) is a point like the heuristics.

The incumbent is the engine's model objective, the points are the judge's values: for a method
the two can differ (the model's rounding, congestion it does not model); each traced
method's judged value is drawn as a hollow marker at its solve time. Each panel's y range
covers these, the lower bound and the proven bounds from 0.9 x the lower bound up: a weaker
bound (CP-SAT's first, often 0) is drawn but lies below the range until one zooms out.

Traces, per panel in order (makespan first): ``<method> incumbent`` and ``<method> bound``
per traced method, ``judged`` (hollow markers of the traced methods), ``heuristics`` (one marker
each), ``lower bound``; in the max-load panel the last three are named ``judged (max load)``,
``heuristics (max load)`` and ``lower bound (max load)``.

Examples
--------
>>> import workbench as wb
>>> from workbench.workloads import layered
>>> g, c = layered(20, seed=1), wb.Cluster.preset("2xV100-pcie")
>>> cmp = wb.compare(g, c, methods=["heft", "pesto_ilp", "local_search"], progress=False,
...                  time_limit=2)
>>> fig = progress_figure(cmp)
>>> [t.name for t in fig.data]  # doctest: +NORMALIZE_WHITESPACE
['pesto_ilp incumbent', 'pesto_ilp bound', 'judged', 'heuristics', 'lower bound',
 'local_search incumbent', 'local_search bound', 'judged (max load)',
 'heuristics (max load)', 'lower bound (max load)']
>>> fig.layout.meta["panels"], fig.layout.xaxis.type, fig.layout.xaxis2.type
(['makespan', 'max_load'], 'log', 'log')
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.errors import PlanError

from .methods import method_color

__all__ = ["PANELS", "progress_figure", "progress_in_ms", "progress_steps"]

PANELS = {"makespan": ("makespan_ms", "makespan (ms)", ""),
          "max_load": ("max_load_ms", "max load (ms per sample)", " (max load)")}
"""Panel -> (the table's column of judged values, y-axis title, suffix of its shared names)."""

_PANEL_OF = {"makespan": "makespan", "latency": "makespan", "max_load": "max_load"}
_T_MIN = 1e-4  # seconds: the left end of the log axis (a zero time has no place on it)


def progress_steps(events: list, end_s: float | None = None) -> dict:
    """``{"s", "objective", "bound"}`` arrays of a progress list as step functions: at each
    event the best objective (lowest) and bound (highest) recorded so far over all of the
    method's engine runs (NaN until known), the last values extended to ``end_s``.

    >>> st = progress_steps([{"s": 1.0, "objective": None, "bound": 2.0},
    ...                      {"s": 2.0, "objective": 9.0, "bound": 3.0},
    ...                      {"s": 3.0, "objective": 9.5, "bound": 1.0}], end_s=4.0)
    >>> st["s"].tolist(), st["objective"].tolist(), st["bound"].tolist()
    ([1.0, 2.0, 3.0, 4.0], [nan, 9.0, 9.0, 9.0], [2.0, 3.0, 3.0, 3.0])
    """
    s = [float(e["s"]) for e in events]
    obj, bnd = [], []
    best_o = best_b = math.nan
    for e in events:
        o, b = e.get("objective"), e.get("bound")
        if o is not None and not (o >= best_o):  # NaN-safe: the first known value is kept
            best_o = float(o)
        if b is not None and not (b <= best_b):
            best_b = float(b)
        obj.append(best_o)
        bnd.append(best_b)
    if end_s is not None and s and end_s > s[-1]:
        s.append(float(end_s))
        obj.append(obj[-1])
        bnd.append(bnd[-1])
    return {"s": np.array(s), "objective": np.array(obj, dtype=float),
            "bound": np.array(bnd, dtype=float)}


def progress_in_ms(plan, objective: str = "makespan") -> list | None:
    """``plan.stats["progress"]`` (incumbents and bounds in ms: every engine records in ms,
    :func:`workbench.solvers.milp.solve_milp` scales models written in other units), or None
    when there is none. ``objective`` is kept for callers; the units no longer depend on it.

    >>> from workbench import Plan, samples
    >>> p = Plan(samples.diamond(), {}, stats={"progress": [
    ...     {"s": 0.1, "objective": 10.0, "bound": 5.0, "engine": "highs", "call": 0}]})
    >>> [(e["objective"], e["bound"]) for e in progress_in_ms(p, "max_load")]
    [(10.0, 5.0)]
    >>> progress_in_ms(Plan(samples.diamond(), {}), "makespan") is None
    True
    """
    events = (getattr(plan, "stats", None) or {}).get("progress") or []
    return list(events) if events else None


def _classify(comparison) -> dict:
    """Panel -> ``{"traced": [(method, steps, judged, solve_s)], "points": [...]}``."""
    from workbench.solvers import SOLVERS

    table, plans = comparison.table, comparison.plans
    panels: dict = {}
    for _, r in table[table["status"] != "error"].iterrows():
        m = r["method"]
        p, info = plans.get(m), SOLVERS.get(m)
        panel = _PANEL_OF.get(r.get("objective", "makespan"), "makespan")
        value = float(r[PANELS[panel][0]])
        if p is None or not math.isfinite(value):
            continue
        solve_s = max(float(r["solve_s"]), _T_MIN)
        slot = panels.setdefault(panel, {"traced": [], "points": []})
        ev = progress_in_ms(p, r.get("objective", "makespan"))
        st = None if not ev else progress_steps(ev, end_s=solve_s)
        if st is not None and not p.stats.get("bound_valid", info is not None and info.exact):
            st["bound"] = np.full(len(st["s"]), np.nan)
        if st is None or np.isnan(st["objective"]).all() and np.isnan(st["bound"]).all():
            slot["points"].append((m, solve_s, value))  # nothing to draw over time
            continue
        st["s"] = np.maximum(st["s"], _T_MIN)
        slot["traced"].append((m, st, value, solve_s))
    return {k: panels[k] for k in PANELS if k in panels} or {"makespan": {"traced": [],
                                                                          "points": []}}


def _y_range(slot: dict, lb: float) -> list | None:
    """The panel's y range: every incumbent, judged value and point, the lower bound, and
    the proven bounds at or above 0.9 x the lower bound (a weaker one, such as the 0 a
    CP-SAT run reports before its first propagation, says less than the dashed line and
    would squash the panel; it stays on the plot's data, shown by zooming out)."""
    vals = [v for _m, _s, v in slot["points"]] + [j for _m, _st, j, _s in slot["traced"]]
    for _m, st, _j, _s in slot["traced"]:
        vals += st["objective"][np.isfinite(st["objective"])].tolist()
        b = st["bound"][np.isfinite(st["bound"])]
        vals += (b[b >= 0.9 * lb] if math.isfinite(lb) else b).tolist()
    vals += [lb] if math.isfinite(lb) else []
    if not vals:
        return None
    lo, hi = min(vals), max(vals)
    pad = max(hi - lo, 0.02 * abs(hi), 1e-9)
    return [lo - 0.08 * pad, hi + 0.15 * pad]  # room above for the heuristics' names


def _draw_panel(fig, row: int, panel: str, slot: dict, lb: float, t_max: float) -> None:
    """The traces of one panel (see the module docstring) into ``fig``'s row ``row``."""
    _col, _title, sfx = PANELS[panel]
    traced, points = slot["traced"], slot["points"]
    for m, st, _judged, _s in traced:
        col = method_color(m)
        fig.add_trace(go.Scatter(name=f"{m} incumbent", x=st["s"], y=st["objective"],
                                 mode="lines+markers", line=dict(shape="hv", color=col, width=2),
                                 marker=dict(size=5, color=col),
                                 hovertemplate=f"<b>{m}</b> incumbent %{{y:.4g}} ms at "
                                               f"%{{x:.3g}} s<extra></extra>"), row=row, col=1)
        fig.add_trace(go.Scatter(name=f"{m} bound", x=st["s"], y=st["bound"], mode="lines",
                                 line=dict(shape="hv", color=col, width=1.5, dash="dot"),
                                 hovertemplate=f"<b>{m}</b> proven bound %{{y:.4g}} ms at "
                                               f"%{{x:.3g}} s<extra></extra>"), row=row, col=1)
    if traced:
        fig.add_trace(go.Scatter(
            name=f"judged{sfx}", x=[s for *_x, s in traced], y=[j for _m, _st, j, _s in traced],
            mode="markers", marker=dict(symbol="circle-open", size=12, line=dict(width=2),
                                        color=[method_color(m) for m, *_x in traced]),
            text=[m for m, *_x in traced],
            hovertemplate="<b>%{text}</b>: judged %{y:.4g} ms<extra></extra>"), row=row, col=1)
    fig.add_trace(go.Scatter(
        name=f"heuristics{sfx}", x=[s for _m, s, _v in points], y=[v for *_x, v in points],
        mode="markers+text", text=[m for m, *_x in points], textposition="top center",
        marker=dict(size=11, color=[method_color(m) for m, *_x in points], symbol="diamond"),
        hovertemplate="<b>%{text}</b>: %{y:.4g} ms in %{x:.3g} s<extra></extra>"),
        row=row, col=1)
    fig.add_trace(go.Scatter(name=f"lower bound{sfx}", x=[_T_MIN, t_max * 1.5], y=[lb, lb],
                             mode="lines", line=dict(color="#111111", width=1.5, dash="dash"),
                             hovertemplate=f"best lower bound {lb:.4g} ms<extra></extra>"),
                  row=row, col=1)


def progress_figure(comparison, *, title: str | None = None, height: int | None = None,
                    fig: go.Figure | None = None) -> go.Figure:
    """Incumbent and bound against time per method that recorded progress, heuristics as
    points, the problem's best lower bound as a line, one panel per objective (from
    a :class:`~workbench.comparison.Comparison` from ``compare``, or anything with its
    ``table`` and ``plans``).

    >>> progress_figure(None)
    Traceback (most recent call last):
    ...
    workbench.errors.PlanError: progress_figure draws a Comparison from compare(...) (or an object with its table and plans), got NoneType
    """
    import pandas as pd

    if not (isinstance(getattr(comparison, "table", None), pd.DataFrame)
            and isinstance(getattr(comparison, "plans", None), dict)):
        hint = (": a DataFrame is its table only; pass the Comparison itself"
                if isinstance(comparison, pd.DataFrame) else "")
        raise PlanError(f"progress_figure draws a Comparison from compare(...) (or an object "
                        f"with its table and plans), got {type(comparison).__name__}{hint}")
    table = comparison.table
    panels = _classify(comparison)
    t_max = max([_T_MIN * 10] + [s for sl in panels.values() for *_x, s in sl["traced"]]
                + [s for sl in panels.values() for _m, s, _v in sl["points"]])
    names = list(panels)
    if fig is not None:
        fig.data = []
    fig = make_subplots(rows=len(names), cols=1, shared_xaxes=True, vertical_spacing=0.1,
                        figure=fig)
    for row, panel in enumerate(names, start=1):
        lb_col = PANELS[panel][0].replace("_ms", "_lb")
        lb = float(table[lb_col].iloc[0]) if len(table) and lb_col in table else math.nan
        _draw_panel(fig, row, panel, panels[panel], lb, t_max)
        fig.update_yaxes(title=PANELS[panel][1], range=_y_range(panels[panel], lb),
                         row=row, col=1)
        fig.update_xaxes(type="log", row=row, col=1)
    fig.update_xaxes(title="solver time (s, log)", row=len(names), col=1)
    traced = [m for p in names for m, *_x in panels[p]["traced"]]
    lb = float(table["makespan_lb"].iloc[0]) if len(table) else math.nan
    fig.update_layout(
        title=dict(text=title or "quality against solver time: incumbents, bounds and "
                   "heuristics", x=0.01),
        template="plotly_white", autosize=True,
        height=height or (420 if len(names) == 1 else 640),
        margin=dict(l=10, r=10, t=60, b=40),
        legend=dict(orientation="h", y=-0.12 if len(names) > 1 else -0.18, yanchor="top", x=0),
        meta={"figure": "progress", "panels": names, "traced": traced,
              "heuristics": [m for p in names for m, *_x in panels[p]["points"]],
              "lower_bound": lb,
              "lower_bounds": {p: float(table[PANELS[p][0].replace("_ms", "_lb")].iloc[0])
                               if len(table) else math.nan for p in names}})
    return fig
