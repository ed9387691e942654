"""Predicted against measured: one plan's simulated and traced timelines on one time axis, and
its residual table sorted by contribution to the step-time error.

Input is a :class:`workbench.fidelity.trace_residuals.Residuals` (from
:func:`workbench.fidelity.trace_residuals.residuals`). Top panel: a lane pair per device,
``cpu0 predicted`` above ``cpu0 measured``, ops as bars coloured by device, the measured
critical path outlined in red. Bottom panel: the error groups (op type, link, waiting, path
shift, session) as horizontal bars of their residual, largest first.

Examples
--------
>>> from workbench import samples, Plan, Cluster, simulate
>>> from workbench.runtime.runner import Measurement
>>> from workbench.fidelity.trace_residuals import residuals
>>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
>>> p = Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"})
>>> s = simulate(p, c)
>>> tr = {v: (p.placement[v], s.start[i], s.end[i] * 1.1) for i, v in enumerate(g.ops)}
>>> r = residuals(p, Measurement("x", samples=[s.makespan * 1.2], trace=tr), schedule=s)
>>> fig = residual_figure(r)
>>> [t.name for t in fig.data]
['predicted', 'measured', 'measured critical path', 'residual']
>>> fig.layout.meta["figure"], fig.layout.meta["largest"]
('residuals', 'compute: d')
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ._common import CRITICAL, device_colors, fmt_ms

__all__ = ["residual_figure"]


def _bars(ops, lanes: dict, colors: dict, which: str, name: str, **marker) -> go.Bar:
    start, end = ops[f"{which}_start_ms"].to_numpy(float), ops[f"{which}_end_ms"].to_numpy(float)
    ok = np.isfinite(start) & np.isfinite(end)
    d = ops[ok]
    dur = np.maximum(end[ok] - start[ok], 1e-9)
    return go.Bar(name=name, orientation="h", base=start[ok], x=dur,
                  y=[lanes[(dev, which)] for dev in d["device"]],
                  marker=dict(color=[colors[dev] for dev in d["device"]], **marker),
                  customdata=np.stack([d["op"], d["type"], d["pred_ms"], d["meas_ms"]], axis=1)
                  if len(d) else None,
                  hovertemplate="<b>%{customdata[0]}</b> (%{customdata[1]})<br>predicted "
                                "%{customdata[2]:.4f} ms<br>measured %{customdata[3]:.4f} ms"
                                "<extra>" + name + "</extra>")


def residual_figure(res, *, top: int = 12, title: str | None = None,
                    fig: go.Figure | None = None) -> go.Figure:
    """Predicted vs measured Gantt and the residual table of ``res`` (module docstring)."""
    if not hasattr(res, "ops") or not hasattr(res, "groups"):
        raise ValueError(f"residual_figure needs a Residuals object (from "
                         f"workbench.fidelity.trace_residuals.residuals), got {type(res).__name__}")
    ops = res.ops
    devices = sorted(set(ops["device"]))
    colors = device_colors(devices)
    lanes = {}
    for d in devices:
        lanes[(d, "pred")] = f"{d} predicted"
        lanes[(d, "meas")] = f"{d} measured"
    groups = res.groups.head(top).iloc[::-1]
    fig = fig if fig is not None else go.Figure()
    fig.data = []
    sub = make_subplots(rows=2, cols=1, row_heights=[0.6, 0.4], vertical_spacing=0.12,
                        subplot_titles=("timeline (one time axis)",
                                        "error parts, largest first (ms)"), figure=fig)
    sub.add_trace(_bars(ops, lanes, colors, "pred", "predicted", opacity=0.55), row=1, col=1)
    sub.add_trace(_bars(ops, lanes, colors, "meas", "measured"), row=1, col=1)
    crit = ops[ops["critical"]]
    sub.add_trace(_bars(crit, lanes, {d: "rgba(0,0,0,0)" for d in devices}, "meas",
                        "measured critical path", line=dict(color=CRITICAL, width=1.5)),
                  row=1, col=1)
    sub.add_trace(go.Bar(name="residual", orientation="h", x=groups["residual_ms"],
                         y=groups["group"],
                         marker=dict(color=np.where(groups["residual_ms"] > 0, CRITICAL,
                                                    "#1f77b4")),
                         customdata=np.stack([groups["measured_ms"], groups["predicted_ms"],
                                              100 * groups["share"]], axis=1)
                         if len(groups) else None,
                         hovertemplate="<b>%{y}</b><br>measured %{customdata[0]:.3f} ms<br>"
                                       "predicted %{customdata[1]:.3f} ms<br>share of the error "
                                       "%{customdata[2]:.0f} %<extra></extra>"), row=2, col=1)
    order = [lanes[(d, w)] for d in devices for w in ("pred", "meas")]
    fig.update_yaxes(categoryorder="array", categoryarray=order[::-1], row=1, col=1)
    fig.update_xaxes(title_text="ms from the step's first op", row=1, col=1)
    fig.update_xaxes(title_text="measured - predicted (ms)", row=2, col=1)
    if title is None:
        title = (f"{res.method}: predicted {fmt_ms(res.predicted_ms)}, measured "
                 f"{fmt_ms(res.measured_ms)} ({100 * res.rel_error:+.1f} %)")
    largest = str(res.groups.iloc[0]["group"]) if len(res.groups) else None
    fig.update_layout(title=dict(text=title, x=0.01), template="plotly_white", barmode="overlay",
                      height=620, margin=dict(l=10, r=10, t=70, b=40), showlegend=True,
                      meta={"figure": "residuals", "largest": largest,
                            "error_ms": res.error_ms})
    return fig
