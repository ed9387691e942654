"""Predicted (simulated) against measured step time, one marker per plan in its method's
colour, with the diagonal (perfect prediction) and a band of +-``band`` relative error, and the
ranking each side gives.

Input is the DataFrame of ``workbench.compare(..., measure=True)`` (columns ``method``,
``makespan_ms``, ``measured_ms`` and optionally ``measured_std_ms``).

Examples
--------
>>> import pandas as pd
>>> df = pd.DataFrame({"method": ["single", "dpos"], "makespan_ms": [10.0, 8.0],
...                    "measured_ms": [9.0, 9.5], "measured_std_ms": [0.2, 0.3]})
>>> fig = fidelity_figure(df)
>>> [t.name for t in fig.data][:2]
['perfect prediction', '±15 %']
>>> fig.layout.meta["best_simulated"], fig.layout.meta["best_measured"]
('dpos', 'single')
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .methods import method_color

__all__ = ["fidelity_figure"]


def fidelity_figure(df, *, band: float = 0.15, title: str | None = None,
                    fig: go.Figure | None = None) -> go.Figure:
    """Scatter of simulated (x) against measured (y) step time (see the module docstring)."""
    need = {"method", "makespan_ms", "measured_ms"}
    if not need <= set(df.columns):
        raise ValueError(f"fidelity_figure needs columns {', '.join(sorted(need))} (missing "
                         f"{', '.join(sorted(need - set(df.columns)))})")
    d = df[np.isfinite(df["measured_ms"].astype(float))
           & np.isfinite(df["makespan_ms"].astype(float))]
    x, y = d["makespan_ms"].to_numpy(float), d["measured_ms"].to_numpy(float)
    lo = float(min(x.min(), y.min())) * 0.9 if len(d) else 0.0
    hi = float(max(x.max(), y.max())) * 1.1 if len(d) else 1.0
    fig = go.Figure() if fig is None else fig
    fig.data = []
    fig.add_trace(go.Scatter(name="perfect prediction", x=[lo, hi], y=[lo, hi], mode="lines",
                             line=dict(color="#555555", dash="dash", width=1)))
    fig.add_trace(go.Scatter(name=f"±{100 * band:.0f} %", x=[lo, hi, hi, lo],
                             y=[lo * (1 - band), hi * (1 - band), hi * (1 + band),
                                lo * (1 + band)],
                             fill="toself", mode="lines", line=dict(width=0),
                             fillcolor="rgba(120,120,120,0.12)", hoverinfo="skip"))
    err = d["measured_std_ms"].to_numpy(float) if "measured_std_ms" in d else None
    for i, m in enumerate(d["method"].astype(str)):
        fig.add_trace(go.Scatter(
            name=m, x=[x[i]], y=[y[i]], mode="markers+text", text=[m],
            textposition="top center", marker=dict(size=12, color=method_color(m)),
            error_y=dict(type="data", array=[err[i]], visible=True) if err is not None
            else None,
            hovertemplate=(f"<b>{m}</b><br>simulated %{{x:.3g}} ms<br>measured %{{y:.3g}} ms"
                           f"<br>error {100 * abs(x[i] - y[i]) / y[i]:.1f} %<extra></extra>")))
    best_sim = str(d["method"].iloc[int(np.argmin(x))]) if len(d) else None
    best_meas = str(d["method"].iloc[int(np.argmin(y))]) if len(d) else None
    if title is None:
        title = (f"predicted vs measured step time: best simulated {best_sim}, best measured "
                 f"{best_meas}")
    fig.update_layout(title=dict(text=title, x=0.01), template="plotly_white", autosize=True,
                      height=460, margin=dict(l=10, r=10, t=60, b=40),
                      xaxis=dict(title="simulated (ms)", range=[lo, hi]),
                      yaxis=dict(title="measured (ms)", range=[lo, hi], scaleanchor="x"),
                      legend=dict(orientation="v", x=1.02, y=1),
                      meta={"figure": "fidelity", "best_simulated": best_sim,
                            "best_measured": best_meas})
    return fig
