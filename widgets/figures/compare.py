"""Comparison of methods on one problem: both objectives with their lower bounds, and the
solve time on a log axis. Input is the DataFrame of :func:`workbench.compare`.

Traces: ``makespan``, ``makespan lower bound``, ``max load``, ``max-load lower bound``,
``solve time``. Rows whose ``status`` is ``error`` are left out of the bars and named in the
title.

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
>>> fig.layout.xaxis3.type
'log'
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ._common import CRITICAL, color_cycle

__all__ = ["compare_figure"]

_STATUS_OPACITY = {"optimal": 1.0, "feasible": 0.85, "time_limit": 0.7, "heuristic": 0.85,
                   "infeasible": 0.35}


def _col(df, name, default=np.nan):
    return df[name].to_numpy(dtype=float) if name in df else np.full(len(df), default)


def compare_figure(df, *, title: str | None = None, height: int | None = None,
                   fig: go.Figure | None = None) -> go.Figure:
    """Horizontal bars per method for makespan, max load and solve time.

    Parameters
    ----------
    df : pandas.DataFrame
        Columns ``method``, ``makespan_ms``, ``max_load_ms`` and optionally ``status``,
        ``makespan_lb``, ``max_load_lb``, ``solve_s``, ``makespan_gap``, ``max_load_gap``.
    fig : Figure, optional
        Cleared and drawn into (its subplot grid is replaced).
    """
    if "method" not in df or "makespan_ms" not in df or "max_load_ms" not in df:
        raise ValueError("compare_figure needs columns method, makespan_ms and max_load_ms "
                         f"(got {', '.join(map(str, df.columns))})")
    status = (df["status"].astype(str).to_numpy() if "status" in df
              else np.full(len(df), "heuristic"))
    ok = status != "error"
    failed = df["method"][~ok].astype(str).tolist()
    d = df[ok].reset_index(drop=True)
    st = status[ok]
    methods = d["method"].astype(str).tolist()
    colors = [color_cycle(i) for i in range(len(methods))]
    opac = [_STATUS_OPACITY.get(s, 0.85) for s in st]
    mk, ml = _col(d, "makespan_ms"), _col(d, "max_load_ms")
    solve = np.maximum(_col(d, "solve_s", 0.0), 1e-4)
    hover_status = [f"{m}: {s}" for m, s in zip(methods, st)]
    new = make_subplots(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.03,
                        subplot_titles=("makespan (ms)", "max load per sample (ms)",
                                        "solve time (s, log)"))
    if fig is None:
        fig = new
    else:
        fig.data = []
        fig.layout = new.layout
    for col, (name, vals, lbname) in enumerate((("makespan", mk, "makespan_lb"),
                                                ("max load", ml, "max_load_lb")), start=1):
        gapname = "makespan_gap" if col == 1 else "max_load_gap"
        gaps = _col(d, gapname)
        text = [f"{v:.4g}" + (f" (+{100 * g_:.0f}%)" if np.isfinite(g_) else "")
                for v, g_ in zip(vals, gaps)]
        fig.add_trace(go.Bar(name=name, y=methods, x=vals, orientation="h", text=text,
                             textposition="auto", customdata=hover_status,
                             marker=dict(color=colors, opacity=opac),
                             hovertemplate="%{customdata}<br>" + name
                                           + " %{x:.4g} ms<extra></extra>",
                             showlegend=False), row=1, col=col)
        lb = _col(d, lbname)
        lbv = float(np.nanmax(lb)) if np.isfinite(lb).any() else np.nan
        lbtitle = "makespan lower bound" if col == 1 else "max-load lower bound"
        fig.add_trace(go.Scatter(name=lbtitle, x=[lbv, lbv],
                                 y=[methods[0], methods[-1]] if methods else [],
                                 mode="lines+markers", marker=dict(symbol="line-ns", size=14,
                                                                   line=dict(width=2,
                                                                             color=CRITICAL)),
                                 line=dict(color=CRITICAL, dash="dash", width=2),
                                 hovertemplate=f"lower bound {lbv:.4g} ms<extra></extra>",
                                 showlegend=col == 1), row=1, col=col)
    fig.add_trace(go.Bar(name="solve time", y=methods, x=solve, orientation="h",
                         marker=dict(color=colors, opacity=opac), showlegend=False,
                         customdata=hover_status,
                         hovertemplate="%{customdata}<br>%{x:.3g} s<extra></extra>"),
                  row=1, col=3)
    fig.update_xaxes(type="log", dtick=1, row=1, col=3)
    fig.update_yaxes(autorange="reversed", range=None)
    if title is None:
        title = "methods compared" + (f" (failed: {', '.join(failed)})" if failed else "")
    fig.update_layout(title=dict(text=title, x=0.01), template="plotly_white",
                      height=height or max(260, 90 + 34 * len(methods)),
                      margin=dict(l=10, r=10, t=70, b=30), legend=dict(orientation="h",
                                                                       y=-0.15),
                      meta={"figure": "compare", "methods": methods, "failed": failed})
    return fig
