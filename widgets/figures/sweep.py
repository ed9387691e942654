"""Figures of sweep results (:func:`workbench.sweep.load`): performance profiles, a win/tie/loss
heat map and the objective against a swept parameter, one line per method.

Examples
--------
>>> import pandas as pd
>>> df = pd.DataFrame({"workload": ["g1", "g1", "g2", "g2"], "method": ["a", "b"] * 2,
...                    "status": ["heuristic"] * 4, "makespan_ms": [1.0, 2.0, 3.0, 3.0]})
>>> fig = profile_figure(df)
>>> [t.name for t in fig.data], [float(v) for v in fig.data[1].y]
(['a', 'b'], [0.5, 1.0])
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ._common import color_cycle

__all__ = ["parameter_figure", "profile_figure", "wtl_figure"]

_LABEL = {"makespan_ms": "makespan (ms)", "max_load_ms": "time per sample (ms)"}


def _reset(fig):
    fig = fig if fig is not None else go.Figure()
    fig.data = ()
    return fig


def profile_figure(df, objective: str = "makespan_ms", *, taus=None, log_x: bool = False,
                   fig: go.Figure | None = None) -> go.Figure:
    """Dolan-More performance profile: fraction of problems within tau of the best, per method.

    Parameters
    ----------
    df : pandas.DataFrame
        Sweep results (columns ``method``, ``status``, the objective and the problem keys).
    objective : str
        ``makespan_ms`` or ``max_load_ms``.
    taus : sequence of float, optional
        Factors to evaluate (default: every observed ratio, so the steps are exact).
    log_x : bool
        Log scale for tau.
    """
    from workbench.sweep import objective_matrix, performance_profile

    prof = performance_profile(df, objective, taus=taus)
    n = len(objective_matrix(df, objective))
    fig = _reset(fig)
    with fig.batch_update():
        for k, (m, g) in enumerate(prof.groupby("method", sort=False)):
            color = color_cycle(k)
            fig.add_trace(go.Scatter(x=g["tau"], y=g["fraction"], name=str(m), mode="lines",
                                     line={"shape": "hv", "color": color, "width": 2}))
        fig.update_layout(title=f"Performance profile over {n} problems ({objective})",
                          xaxis_title="tau (ratio to the best method)",
                          yaxis_title="fraction of problems within tau",
                          yaxis_range=[0, 1.02], template="plotly_white")
        fig.update_xaxes(type="log" if log_x else "linear")
    return fig


def wtl_figure(df, objective: str = "makespan_ms", *, rtol: float = 1e-6,
               fig: go.Figure | None = None) -> go.Figure:
    """Heat map of wins minus losses of each row method against each column method, with the
    ``wins/ties/losses`` counts written in the cells."""
    from workbench.sweep import win_tie_loss, wtl_table

    t = win_tie_loss(df, objective, rtol=rtol)
    names = list(wtl_table(df, objective, rtol=rtol).index)
    idx = {m: i for i, m in enumerate(names)}
    z = np.full((len(names), len(names)), np.nan)
    text = np.full((len(names), len(names)), "", dtype=object)
    for r in t.itertuples():
        i, j = idx[r.method], idx[r.opponent]
        z[i, j] = r.wins - r.losses
        text[i, j] = f"{r.wins}/{r.ties}/{r.losses}"
    lim = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 1.0
    fig = _reset(fig)
    with fig.batch_update():
        fig.add_trace(go.Heatmap(z=z, x=names, y=names, text=text, texttemplate="%{text}",
                                 colorscale="RdBu", zmid=0, zmin=-lim, zmax=lim,
                                 colorbar={"title": "wins - losses"},
                                 hovertemplate="%{y} vs %{x}: %{text}<extra></extra>"))
        fig.update_layout(title=f"Wins/ties/losses of the row method ({objective})",
                          yaxis_autorange="reversed", template="plotly_white")
    return fig


def parameter_figure(df, x: str = "bandwidth_scale", objective: str = "makespan_ms", *,
                     normalize: bool = False, log_x: bool | None = None,
                     fig: go.Figure | None = None) -> go.Figure:
    """Mean objective against a swept parameter (``bandwidth_scale``, ``n_devices``, ...), one
    line per method; ``normalize`` plots the ratio to the best method of each problem."""
    from workbench.sweep import by_parameter

    t = by_parameter(df, x, objective, normalize=normalize)
    if log_x is None:
        xs = t[x].to_numpy(dtype=float)
        log_x = bool(len(xs) and xs.min() > 0 and xs.max() / xs.min() >= 20)
    fig = _reset(fig)
    with fig.batch_update():
        for k, (m, g) in enumerate(t.groupby("method", sort=False)):
            color = color_cycle(k)
            fig.add_trace(go.Scatter(x=g[x], y=g[objective], name=str(m), mode="lines+markers",
                                     line={"color": color}))
        ylab = _LABEL.get(objective, objective)
        fig.update_layout(title=f"{ylab} vs {x}" + (" (ratio to the best)" if normalize else ""),
                          xaxis_title=x, yaxis_title=("ratio to best " if normalize else "mean ")
                          + ylab, template="plotly_white")
        fig.update_xaxes(type="log" if log_x else "linear")
    return fig
