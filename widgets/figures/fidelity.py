"""Predicted (simulated) against measured step time, one marker per plan in its method's
colour, with the diagonal (perfect prediction) and a band of +-``band`` relative error, the
ranking each side gives and, above the plot, a comment on any disagreement
(:func:`fidelity_comment`).

Input is the Comparison of ``workbench.compare(..., measure=True)``, or its table (columns
``method``, ``makespan_ms``, ``measured_ms`` and optionally ``measured_std_ms``).

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

__all__ = ["fidelity_figure", "fidelity_comment"]


def fidelity_figure(df, *, band: float = 0.15, title: str | None = None,
                    fig: go.Figure | None = None) -> go.Figure:
    """Scatter of simulated (x) against measured (y) step time (see the module docstring)."""
    from workbench.comparison import parts

    df = parts(df)[0]
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
    comment = fidelity_comment(d, best_sim, best_meas, band=band)
    fig.add_annotation(text=comment, xref="paper", yref="paper", x=0, y=1.0, xanchor="left",
                       yanchor="bottom", showarrow=False, align="left",
                       font=dict(size=12, color="#333333"), name="comment")
    fig.update_layout(title=dict(text=title, x=0.01), template="plotly_white", autosize=True,
                      height=480, margin=dict(l=10, r=10, t=96, b=40),
                      xaxis=dict(title="simulated (ms)", range=[lo, hi], constrain="domain"),
                      yaxis=dict(title="measured (ms)", range=[lo, hi], scaleanchor="x",
                                 constrain="domain"),
                      legend=dict(orientation="v", x=1.02, y=1),
                      meta={"figure": "fidelity", "best_simulated": best_sim,
                            "best_measured": best_meas, "comment": comment})
    return fig


def fidelity_comment(df, best_sim, best_meas, *, band: float = 0.15) -> str:
    """One or two lines saying whether simulation and measurement pick the same plan, and if
    not, why the disagreement is (or is not) within the noise: the spread of the measured step
    times against the median prediction error.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"method": ["a", "b"], "makespan_ms": [10.0, 8.0],
    ...                    "measured_ms": [9.0, 9.5]})
    >>> fidelity_comment(df, "b", "a")  # doctest: +NORMALIZE_WHITESPACE
    'Simulation picks b, measurement a: the measured step times lie within 6 % of each
    other,<br>less than the median prediction error (13 %), so the two rankings differ within
    the noise.'
    """
    if best_sim is None:
        return "No plan was both simulated and measured."
    if best_sim == best_meas:
        return f"Simulation and measurement agree: {best_sim} is the fastest plan."
    meas = df["measured_ms"].to_numpy(float)
    sim = df["makespan_ms"].to_numpy(float)
    spread = float(meas.max() / meas.min() - 1)
    err = float(np.median(np.abs(sim - meas) / meas))
    head = (f"Simulation picks {best_sim}, measurement {best_meas}: the measured step times lie "
            f"within {100 * spread:.0f} % of each other,<br>")
    if spread <= max(err, band):
        return head + (f"less than the median prediction error ({100 * err:.0f} %), so the two "
                       "rankings differ within the noise.")
    return head + (f"more than the median prediction error ({100 * err:.0f} %): the simulator "
                   "misjudges these plans (check the link calibration).")
