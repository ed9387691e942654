"""Can I trust the winner? The makespan of every method under cost noise and its chance to be
the best, from :func:`workbench.robustness`.

Left: per method (best nominal first) the p5-p95 range of the makespan over the draws as an
error bar around the median (diamond), the nominal makespan as a black tick. Right: P(best) per
method (ties split evenly), with the verdict threshold as a dashed line. The title is the
verdict. Same colour per method as every other view.

Traces: ``makespan p5-p95``, ``nominal``, ``P(best)``.

Examples
--------
>>> import workbench as wb
>>> cmp = wb.compare(wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie"),
...                  methods=["single", "m_topo"], progress=False)
>>> fig = robust_figure(wb.robustness(cmp, samples=50))
>>> [t.name for t in fig.data], fig.layout.meta["figure"]
(['makespan p5-p95', 'nominal', 'P(best)'], 'robustness')
>>> fig.layout.meta["winner"], fig.layout.meta["p_best"]["m_topo"]
('m_topo', 1.0)
"""

from __future__ import annotations

import html as _html

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .methods import method_colors

__all__ = ["robust_errors", "robust_figure", "robust_html"]


def robust_errors(robust, methods) -> dict:
    """``{"makespan_ms": (minus, plus), "max_load_ms": (minus, plus)}``: the p5-p95 range of
    each of ``methods`` around its nominal value (NaN for a method without draws), as
    :func:`~widgets.figures.compare_figure` draws it on its bars.

    >>> import pandas as pd
    >>> t = pd.DataFrame({"method": ["a"], "nominal_ms": [10.0], "p5_ms": [9.0],
    ...                   "p95_ms": [12.0], "max_load_nominal_ms": [5.0],
    ...                   "max_load_p5_ms": [5.0], "max_load_p95_ms": [6.0]})
    >>> e = robust_errors(t, ["a", "b"])
    >>> e["makespan_ms"][0].tolist(), float(e["makespan_ms"][1][0])
    ([1.0, nan], 2.0)
    """
    t = getattr(robust, "table", robust).set_index("method")
    out = {}
    for col, pre in (("makespan_ms", ""), ("max_load_ms", "max_load_")):
        nom, lo, hi = (np.array([float(t.loc[m, f"{pre}{k}"]) if m in t.index else np.nan
                                 for m in methods]) for k in ("nominal_ms", "p5_ms", "p95_ms"))
        out[col] = (np.maximum(nom - lo, 0.0), np.maximum(hi - nom, 0.0))
    return out


def robust_figure(robust, *, title: str | None = None, height: int | None = None,
                  fig: go.Figure | None = None) -> go.Figure:
    """Makespan ranges and P(best) per method of a :class:`workbench.robustness.Robustness`."""
    t = robust.table
    methods = t["method"].astype(str).tolist()
    colors = method_colors(methods)
    new = make_subplots(rows=1, cols=2, column_widths=[0.66, 0.34], horizontal_spacing=0.12,
                        subplot_titles=((f"makespan under noise (ms): median, p5-p95, "
                                         f"| nominal ({robust.samples} draws)"), "P(best)"))
    if fig is None:
        fig = new
    else:
        fig.data = []
        fig.layout = new.layout
    p50, p5, p95 = (t[c].to_numpy(float) for c in ("p50_ms", "p5_ms", "p95_ms"))
    hover = [f"<b>{m}</b><br>nominal {n:.4g} ms<br>median {b:.4g} ms<br>p5-p95 {lo:.4g}-"
             f"{hi:.4g} ms<br>P(best) {100 * pb:.1f} %<br>expected rank {r:.2f}"
             for m, n, b, lo, hi, pb, r in zip(methods, t["nominal_ms"], p50, p5, p95,
                                                t["p_best"], t["expected_rank"])]
    fig.add_trace(go.Scatter(
        name="makespan p5-p95", x=p50, y=methods, mode="markers", showlegend=False,
        marker=dict(symbol="diamond", size=11, color=[colors[m] for m in methods]),
        error_x=dict(type="data", symmetric=False, array=p95 - p50, arrayminus=p50 - p5,
                     thickness=3, width=8, color="#555555"),
        customdata=hover, hovertemplate="%{customdata}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(
        name="nominal", x=t["nominal_ms"], y=methods, mode="markers", showlegend=True,
        marker=dict(symbol="line-ns-open", size=20, color="#111111",
                    line=dict(width=3, color="#111111")),
        hovertemplate="<b>%{y}</b>: nominal %{x:.4g} ms<extra></extra>"), row=1, col=1)
    pb = t["p_best"].to_numpy(float)
    fig.add_trace(go.Bar(
        name="P(best)", x=pb, y=methods, orientation="h", showlegend=False,
        marker=dict(color=[colors[m] for m in methods]),
        text=[f"{100 * p:.0f} %" for p in pb], textposition="auto",
        hovertemplate="<b>%{y}</b>: P(best) %{x:.1%}<extra></extra>"), row=1, col=2)
    thr = float(getattr(robust, "threshold", 0.8))
    fig.add_vline(x=thr, line=dict(dash="dash", color="#888888", width=1), row=1, col=2)
    fig.update_xaxes(range=[0, 1.02], tickformat=".0%", row=1, col=2)
    for col in (1, 2):
        fig.update_yaxes(categoryorder="array", categoryarray=methods, autorange="reversed",
                         row=1, col=col)
    fig.update_layout(
        title=dict(text=title or robust.verdict, x=0.01, y=0.98, yanchor="top",
                   font=dict(size=14)),
        template="plotly_white", autosize=True,
        height=height or max(280, 120 + 30 * len(methods)),
        margin=dict(l=10, r=10, t=80, b=40),
        legend=dict(orientation="h", y=-0.12, yanchor="top", x=0),
        meta={"figure": "robustness", "methods": methods, "winner": robust.winner,
              "p_best": dict(zip(methods, pb.tolist())), "verdict": robust.verdict,
              "colors": colors})
    return fig


def robust_html(robust) -> str:
    """The verdict and the noise model as a short HTML panel.

    >>> from types import SimpleNamespace
    >>> r = SimpleNamespace(verdict="heft wins robustly: the best in 97 % of draws",
    ...                     p_winner=0.97, samples=200, objective="makespan",
    ...                     noise={"preset": "profiled", "compute": 0.1})
    >>> "wb-robust" in robust_html(r) and "profiled" in robust_html(r)
    True
    """
    ok = robust.p_winner >= float(getattr(robust, "threshold", 0.8))
    col = "#2ca02c" if ok else "#d62728"
    nz = robust.noise
    name = nz.get("preset") or "custom"
    spread = ", ".join(f"{k} {100 * v:.0f} %" for k, v in nz.items()
                       if k not in ("preset", "correlated") and isinstance(v, float) and v)
    return (f"<div class='wb-robust' style='border-left:4px solid {col};padding:2px 10px;"
            f"margin:6px 0'><b>Can I trust the winner?</b> {_html.escape(robust.verdict)}"
            f"<br><span style='color:#666;font-size:.9em'>{robust.samples} draws of the "
            f"costs, noise model <b>{_html.escape(name)}</b> ({_html.escape(spread or 'none')}"
            f"{', correlated' if nz.get('correlated') else ''}); every plan replayed with its "
            f"placement and order fixed; ranked by {_html.escape(robust.objective)}.</span>"
            f"</div>")
