"""A pipelined split: one stage per device with its forward / backward / communication load.

The load of a device is the Tarnawski accounting of :func:`workbench.device_loads` (compute of
its ops plus the transfers it sends and receives); the time per sample of the pipeline is the
largest load, the *bottleneck*, outlined in red. Stages are ordered by the mean topological
position of their ops, so a contiguous split reads left to right.

Traces: ``fwd``, ``bwd``, ``update``, ``other`` (compute by op kind, stacked), ``communication``,
``bottleneck``, ``lower bound``.

Examples
--------
>>> from workbench import samples, Cluster, Plan
>>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
>>> p = Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"})
>>> fig = pipeline_figure(p, c)
>>> fig.layout.meta["bottleneck"], round(fig.layout.meta["max_load_ms"], 2)
('gpu0', 6.04)
>>> stage_table(p, c)["device"].tolist()
['gpu0', 'gpu1']
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ._common import CRITICAL, KIND_NAMES, fmt_ms

__all__ = ["pipeline_figure", "stage_table"]

_KIND_COLORS = {"fwd": "#1f77b4", "bwd": "#ff7f0e", "update": "#2ca02c", "other": "#9467bd"}


def stage_table(plan, cluster):
    """One row per device used, in stage order: device, ops, compute per kind, comm, load."""
    import pandas as pd
    from workbench import device_loads

    g = plan.graph
    dev = plan.device_array(cluster)
    times = cluster.op_times(g)[np.arange(g.n_ops), dev]
    loads = device_loads(plan, cluster)
    nd = len(cluster.names)
    rows = []
    pos = np.arange(g.n_ops, dtype=float)
    for d in range(nd):
        on = dev == d
        if not on.any():
            continue
        row = {"device": cluster.names[d], "ops": int(on.sum()),
               "first_op": g.ops[int(np.flatnonzero(on)[0])],
               "mean_position": float(pos[on].mean())}
        comp = 0.0
        for k_i, k in enumerate(KIND_NAMES):
            x = float(times[on & (g.c.op_kind == k_i)].sum())
            row[f"{k}_ms"] = x
            comp += x
        row["comm_ms"] = max(0.0, float(loads[d]) - comp)
        row["load_ms"] = float(loads[d])
        rows.append(row)
    df = pd.DataFrame(rows)
    if len(df):
        df = df.sort_values("mean_position", kind="stable").reset_index(drop=True)
        df.insert(0, "stage", range(len(df)))
    return df


def pipeline_figure(plan, cluster, *, lower_bound: float | None = None,
                    title: str | None = None, height: int | None = None,
                    fig: go.Figure | None = None) -> go.Figure:
    """Stacked load bars per stage with the bottleneck marked.

    Parameters
    ----------
    plan : Plan
    cluster : Cluster
    lower_bound : float, optional
        Max-load lower bound drawn as a dashed line (default: :mod:`workbench.judge.bounds`).
    fig : Figure, optional
        Cleared and drawn into.
    """
    from workbench.judge.bounds import max_load_lower_bound

    df = stage_table(plan, cluster)
    labels = [f"stage {s}<br>{d}" for s, d in zip(df["stage"], df["device"])]
    traces = []
    for k in KIND_NAMES:
        col = f"{k}_ms"
        if k not in ("fwd",) and not (df[col] > 0).any():
            continue
        traces.append(go.Bar(name=k, x=labels, y=df[col], marker_color=_KIND_COLORS[k],
                             customdata=df["ops"],
                             hovertemplate=f"{k} compute %{{y:.4g}} ms"
                                           "<br>%{customdata} ops<extra>%{x}</extra>"))
    traces.append(go.Bar(name="communication", x=labels, y=df["comm_ms"],
                         marker=dict(color="#bbbbbb", pattern=dict(shape="/")),
                         hovertemplate="communication %{y:.4g} ms<extra>%{x}</extra>"))
    b = int(df["load_ms"].to_numpy().argmax()) if len(df) else 0
    ml = float(df["load_ms"].max()) if len(df) else 0.0
    traces.append(go.Bar(name="bottleneck", x=labels[b:b + 1], y=[ml], base=[0],
                         marker=dict(color="rgba(0,0,0,0)", line=dict(color=CRITICAL, width=3)),
                         hovertemplate="bottleneck: %{y:.4g} ms per sample<extra>%{x}</extra>"))
    lb = max_load_lower_bound(plan.graph, cluster) if lower_bound is None else lower_bound
    traces.append(go.Scatter(name="lower bound", x=labels, y=[lb] * len(labels), mode="lines",
                             line=dict(color="black", dash="dash"),
                             hovertemplate=f"max-load lower bound {fmt_ms(lb)}<extra></extra>"))
    fig = go.Figure() if fig is None else fig
    fig.data = []
    fig.add_traces(traces)
    bott = df["device"].iloc[b] if len(df) else None
    if title is None:
        title = (f"{plan.method}: {len(df)} stages, time per sample {fmt_ms(ml)}"
                 f" (bottleneck {bott})")
    fig.update_layout(
        title=dict(text=title, x=0.01), template="plotly_white", autosize=True, barmode="relative",
        height=height or 380, margin=dict(l=10, r=10, t=45, b=40),
        yaxis=dict(title="load per sample (ms)"), legend=dict(orientation="h", y=-0.2),
        annotations=([dict(x=labels[b], y=ml, text="bottleneck", showarrow=True, arrowhead=2,
                           ax=0, ay=-30, font=dict(color=CRITICAL))] if len(df) else []),
        meta={"figure": "pipeline", "method": plan.method, "bottleneck": bott,
              "max_load_ms": ml, "lower_bound_ms": float(lb)})
    return fig
