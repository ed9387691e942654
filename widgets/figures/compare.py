"""Comparison of methods on one problem: both objectives, each against the method's own lower
bound, and the solve time on a log axis. Input is the DataFrame of :func:`workbench.compare`.

What keeps it truthful:

- one colour per method, the same in every view (:func:`~widgets.figures.methods.method_color`);
- each panel is sorted by its own objective, best first; rows that cannot win (infeasible)
  sink below the feasible ones;
- each row shows its **own** lower bound (a tick) and its gap to it in %: a method that solved
  a changed graph (split, coarsened) has another bound than the rest, and is flagged;
- infeasible (⚠, cross-hatched), time-limited (◷, striped) and changed-graph (◆) rows carry
  their symbol in the axis label, the bar text and the legend; failed rows are named in the
  title.

Traces: ``makespan``, ``makespan lower bound``, ``max load``, ``max-load lower bound``,
``solve time``, then one legend entry per flag present (``legendgroup="flags"``).

Examples
--------
>>> import pandas as pd
>>> df = pd.DataFrame({"method": ["a", "b"], "status": ["heuristic", "optimal"],
...                    "makespan_ms": [10.0, 8.0], "max_load_ms": [6.0, 5.0],
...                    "makespan_lb": [7.0, 7.0], "max_load_lb": [4.0, 4.0],
...                    "solve_s": [0.001, 2.0]})
>>> fig = compare_figure(df)
>>> [t.name for t in fig.data]
['makespan', 'makespan lower bound', 'max load', 'max-load lower bound', 'solve time']
>>> list(fig.data[0].y), fig.layout.xaxis3.type
(['b', 'a'], 'log')
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.comparison import own_bounds, parts, row_flags
from workbench.errors import PlanError

from .methods import FLAGS, flag_label, method_colors

__all__ = ["compare_figure", "ranked"]

_PATTERN = {"infeasible": "x", "time_limit": "/"}


def _col(df, name, default=np.nan):
    return df[name].to_numpy(dtype=float) if name in df else np.full(len(df), default)


def ranked(df, col: str, flags: dict) -> list[int]:
    """Row positions of ``df`` sorted by ``col``: feasible rows first, NaN last (stable).

    >>> import pandas as pd
    >>> df = pd.DataFrame({"method": ["a", "b", "c"], "x": [3.0, 1.0, 2.0]})
    >>> ranked(df, "x", {"a": [], "b": ["infeasible"], "c": []})
    [2, 0, 1]
    """
    vals = _col(df, col)
    meth = df["method"].astype(str).tolist()
    key = [(("infeasible" in flags.get(m, [])), not np.isfinite(v),
            v if np.isfinite(v) else 0.0, i) for i, (m, v) in enumerate(zip(meth, vals))]
    return [k[-1] for k in sorted(key)]


def _check_robust(robust, df, plans: dict | None) -> None:
    """``robust`` must be the robustness of this comparison: of its plans when they are known
    (:meth:`~workbench.robustness.Robustness.check_plans`), else of its methods with the same
    nominal makespans; another comparison's error bars would be drawn as this one's."""
    from workbench.errors import SolverError

    if plans and getattr(robust, "plan_keys", None):
        robust.check_plans(plans, "compare_figure: robust")
        return
    ms = dict(zip(df["method"].astype(str), df["makespan_ms"].astype(float)))
    for m, nominal in zip(robust.table["method"], robust.table["nominal_ms"]):
        if m not in ms or not np.isclose(ms[m], nominal, rtol=1e-6, atol=1e-5):
            raise SolverError(f"compare_figure: robust is not of this comparison: its method "
                              f"{m!r} " + ("is not in the table" if m not in ms else
                                           f"has nominal makespan {nominal:.6g} ms, the table "
                                           f"{ms[m]:.6g} ms"))


def compare_figure(df, *, plans: dict | None = None, graph=None, cluster=None,
                   title: str | None = None,
                   height: int | None = None, fig: go.Figure | None = None,
                   robust=None) -> go.Figure:
    """Horizontal bars per method for makespan, max load and solve time.

    Parameters
    ----------
    df : Comparison or pandas.DataFrame
        What :func:`workbench.compare` returns (its plans, graph and cluster are used), or a
        table with columns ``method``, ``makespan_ms``, ``max_load_ms`` and optionally ``status``,
        ``feasible``, ``makespan_lb``, ``max_load_lb``, ``solve_s``, ``makespan_gap``,
        ``max_load_gap``, ``graph_changed``.
    plans : dict, optional
        Method -> Plan; with ``graph`` it tells which methods solved a changed graph.
    graph : OpGraph, optional
        The graph the comparison was asked for.
    cluster : Cluster, optional
        With ``plans``: the bound of a method that changed the graph is computed on its own
        graph (see :func:`~workbench.comparison.own_bounds`).
    fig : Figure, optional
        Cleared and drawn into (its subplot grid is replaced).
    robust : Robustness, optional
        :func:`workbench.robustness` of these plans: p5-p95 error bars on the makespan and
        max-load bars; the range and P(best) in the hover text.

    Raises
    ------
    SolverError
        ``robust`` is the robustness of other plans (another comparison).
    """
    df, plans, graph, cluster, _s = parts(df, plans=plans, graph=graph, cluster=cluster)
    if df is None:  # issue 41: a TypeError from the column check
        raise PlanError("compare_figure draws a Comparison from compare(...) or its table, "
                        "got None")
    if "method" not in df or "makespan_ms" not in df or "max_load_ms" not in df:
        raise ValueError("compare_figure needs columns method, makespan_ms and max_load_ms "
                         f"(got {', '.join(map(str, df.columns))})")
    if robust is not None:
        _check_robust(robust, df, plans)
    flags = row_flags(df, plans=plans, graph=graph)
    status = (df["status"].astype(str).to_numpy() if "status" in df
              else np.full(len(df), "heuristic"))
    ok = status != "error"
    failed = df["method"][~ok].astype(str).tolist()
    d = df[ok].reset_index(drop=True)
    st = status[ok]
    methods = d["method"].astype(str).tolist()
    colors = method_colors(methods)
    labels = {m: m + (" " + flag_label(flags[m]) if flags[m] else "") for m in methods}
    new = make_subplots(rows=1, cols=3, shared_yaxes=False, horizontal_spacing=0.11,
                        subplot_titles=("makespan (ms) · | bound",
                                        "max load (ms) · | bound",
                                        "solve time (s, log)"))
    if fig is None:
        fig = new
    else:
        fig.data = []
        fig.layout = new.layout
    bounds = own_bounds(d, plans=plans, graph=graph, cluster=cluster)
    orders = {}
    for col, (name, vcol, lbcol, gapcol, lbname) in enumerate((
            ("makespan", "makespan_ms", "makespan_lb", "makespan_gap", "makespan lower bound"),
            ("max load", "max_load_ms", "max_load_lb", "max_load_gap",
             "max-load lower bound")), start=1):
        pos = ranked(d, vcol, flags)
        orders[vcol] = [methods[i] for i in pos]
        vals, lb = _col(d, vcol)[pos], np.asarray(bounds[vcol], dtype=float)[pos]
        # each row's gap to its own bound (0 when the bound is reached; NaN without one)
        gaps = np.where(lb > 0, np.maximum(vals / np.where(lb > 0, lb, 1) - 1, 0.0), np.nan)
        gaps = np.where(gaps < 1e-9, 0.0, gaps)
        ms = orders[vcol]
        err = None
        if robust is not None:  # p5-p95 of the draws around the nominal value
            from .robust import robust_errors

            minus, plus = robust_errors(robust, ms)[vcol]
            err = dict(type="data", symmetric=False, array=plus, arrayminus=minus,
                       thickness=2, width=5, color="#333333")
        pbest = ({} if robust is None or col != 1 else
                 dict(zip(robust.table["method"], robust.table["p_best"])))
        text, hover = [], []
        for m, v, g_, b in zip(ms, vals, gaps, lb):
            f = flags[m]
            gtxt = f"+{100 * g_:.1f} %" if np.isfinite(g_) else ""
            t = f"{v:.4g} ms" + (f"  {gtxt}" if gtxt else "")
            if f:
                t += "  " + flag_label(f)
            text.append(t)
            hover.append(f"<b>{m}</b> ({st[methods.index(m)]})<br>{name} {v:.4g} ms<br>"
                         f"own lower bound {b:.4g} ms" + (f", gap {gtxt}" if gtxt else "")
                         + "".join(f"<br>{FLAGS[x][0]} {FLAGS[x][1]}" for x in f)
                         + (f"<br>under noise p5-p95 {v - err['arrayminus'][len(hover)]:.4g}"
                            f"-{v + err['array'][len(hover)]:.4g} ms" if err else "")
                         + (f", P(best) {100 * pbest[m]:.0f} %" if m in pbest else ""))
        fig.add_trace(go.Bar(
            name=name, y=ms, x=vals, orientation="h", text=text, textposition="inside",
            insidetextanchor="start", constraintext="none",
            customdata=hover, hovertemplate="%{customdata}<extra></extra>", showlegend=False,
            error_x=err,
            marker=dict(color=[colors[m] for m in ms],
                        opacity=[0.45 if "infeasible" in flags[m] else 1.0 for m in ms],
                        pattern=dict(shape=[next((_PATTERN[x] for x in flags[m]
                                                  if x in _PATTERN), "") for m in ms],
                                     fgcolor="#333333", size=7, solidity=0.25))),
            row=1, col=col)
        fig.add_trace(go.Scatter(
            name=lbname, x=lb, y=ms,
            mode="markers", legendgroup="bound", showlegend=col == 1,
            marker=dict(symbol="line-ns-open", size=22, color="#111111",
                        line=dict(width=3, color="#111111")),
            customdata=[f"<b>{m}</b>: {lbname} {b:.4g} ms" for m, b in zip(ms, lb)],
            hovertemplate="%{customdata}<extra></extra>"), row=1, col=col)
        fig.update_yaxes(categoryorder="array", categoryarray=ms, autorange="reversed",
                         tickvals=ms, ticktext=[labels[m] for m in ms], row=1, col=col)
    pos = [methods.index(m) for m in orders["makespan_ms"]]
    solve = np.maximum(_col(d, "solve_s", 0.0), 1e-4)[pos]
    ms = orders["makespan_ms"]
    fig.add_trace(go.Bar(name="solve time", y=ms, x=solve, orientation="h",
                         marker=dict(color=[colors[m] for m in ms]), showlegend=False,
                         text=[f"{s:.3g} s" for s in solve], textposition="auto",
                         hovertemplate="<b>%{y}</b>: %{x:.3g} s<extra></extra>"),
                  row=1, col=3)
    fig.update_yaxes(categoryorder="array", categoryarray=ms, autorange="reversed",
                     tickvals=ms, ticktext=[labels[m] for m in ms], row=1, col=3)
    present = [x for x in FLAGS if any(x in flags[m] for m in methods)]
    for x in present:
        fig.add_trace(go.Scatter(
            name=f"{FLAGS[x][0]} {FLAGS[x][1]}", x=[None], y=[None], mode="markers",
            legendgroup="flags", showlegend=True,
            marker=dict(symbol="square", size=12, color="#bbbbbb",
                        line=dict(color="#333333", width=1))))
    fig.update_xaxes(type="log", dtick=1, row=1, col=3)
    if title is None:
        title = "methods compared"
    if failed:
        title += f" (failed: {', '.join(failed)})"
    fig.update_layout(title=dict(text=title, x=0.01, y=0.98, yanchor="top"),
                      template="plotly_white", autosize=True,
                      height=height or max(300, 130 + 30 * len(methods)),
                      margin=dict(l=10, r=10, t=80, b=40), bargap=0.25,
                      legend=dict(orientation="h", y=-0.12, yanchor="top", x=0),
                      meta={"figure": "compare", "methods": methods, "failed": failed,
                            "colors": colors, "flags": flags, "order": orders})
    return fig
