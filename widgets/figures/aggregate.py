"""Aggregated views of very large graphs: a placement heatmap.

A 20,000-op DAG drawn op by op is a blob. The heatmap bins the ops by their layer (longest-path
depth from the sources, the x of the layered drawing) and shows, per device, how much compute
of each slice of the graph it runs: a plan that fills devices one after another draws a
staircase, one that spreads parallel branches draws overlapping bands. Hover gives the ops and
compute of a cell; zooming (drag a box) narrows the layers shown.

Examples
--------
>>> import workbench as wb
>>> g, c = wb.samples.cnn(200, seed=0), wb.Cluster.preset("2xV100-pcie")
>>> plans = {m: wb.solve(g, c, method=m) for m in ("single", "round_robin")}
>>> fig = placement_heatmap(g, plans, c, bins=20)
>>> [t.name for t in fig.data], fig.layout.meta["bins"] <= 20
(['single', 'round_robin'], True)
>>> import numpy as np
>>> bool(np.isclose(np.nansum(fig.data[0].z), fig.layout.meta["total_ms"]))
True
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ._common import op_times_or_min
from .layout import layered_layout

__all__ = ["placement_heatmap"]


def placement_heatmap(graph, plans: dict, cluster, *, bins: int = 120,
                      title: str | None = None, fig: go.Figure | None = None) -> go.Figure:
    """Compute (ms) per device and layer bin, one panel per plan, on one shared layer axis.

    Parameters
    ----------
    graph : OpGraph
    plans : dict
        Name -> Plan of ``graph`` (plans of a changed graph are drawn on their own graph's
        layers).
    cluster : Cluster
    bins : int
        At most this many layer bins.
    """
    from plotly.subplots import make_subplots

    if not plans:
        raise ValueError("placement_heatmap needs at least one plan")
    names = list(cluster.names)
    new = make_subplots(rows=len(plans), cols=1, shared_xaxes=True,
                        vertical_spacing=min(0.08, 0.25 / len(plans)),
                        subplot_titles=[str(m) for m in plans])
    if fig is None:
        fig = new
    else:
        fig.data = []
        fig.layout = new.layout
    nb = 1
    total = 0.0
    for r, (m, plan) in enumerate(plans.items(), start=1):
        g = plan.graph
        _, _, layer = layered_layout(g.n_ops, g.c.src, g.c.dst)
        nlay = int(layer.max()) + 1 if g.n_ops else 1
        nb = max(1, min(int(bins), nlay))
        b = (layer * nb // nlay).astype(np.int64)
        dev = np.array([names.index(plan.placement[v]) for v in g.ops], dtype=np.int64)
        w = op_times_or_min(g, cluster)
        z = np.zeros((len(names), nb))
        cnt = np.zeros((len(names), nb), dtype=np.int64)
        np.add.at(z, (dev, b), w)
        np.add.at(cnt, (dev, b), 1)
        if r == 1:
            total = float(z.sum())
        lo = (np.arange(nb) * nlay) // nb
        hi = ((np.arange(nb) + 1) * nlay) // nb - 1
        text = [[f"{names[i]}, layers {lo[j]}-{hi[j]}: {cnt[i, j]} ops, {z[i, j]:.3g} ms"
                 for j in range(nb)] for i in range(len(names))]
        fig.add_trace(go.Heatmap(
            name=str(m), z=np.where(cnt > 0, z, np.nan), x=lo, y=names, text=text,
            hovertemplate="%{text}<extra>" + str(m) + "</extra>", colorscale="Blues",
            showscale=r == 1, colorbar=dict(title="ms", len=0.6)), row=r, col=1)
        fig.update_yaxes(autorange="reversed", row=r, col=1)
    fig.update_xaxes(title="layer (longest path from the sources)", row=len(plans), col=1)
    fig.update_layout(
        title=dict(text=title or f"{graph.name}: compute per device along the graph's depth",
                   x=0.01), template="plotly_white", autosize=True,
        height=80 + len(plans) * (40 + 26 * len(names)), margin=dict(l=10, r=10, t=70, b=40),
        meta={"figure": "placement_heatmap", "bins": nb, "total_ms": total})
    return fig
