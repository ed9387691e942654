"""Aggregated views of very large graphs: a placement heatmap, and the op-level detail of one
of its slices.

A 20,000-op DAG drawn op by op is a blob. The heatmap bins the ops by their layer (longest-path
depth from the sources, the x of the layered drawing) and shows, per device, how much compute
of each slice of the graph it runs: a plan that fills devices one after another draws a
staircase, one that spreads parallel branches draws overlapping bands. Hover gives the ops and
compute of a cell; zooming (drag a box) narrows the layers shown. Detail on demand:
:func:`heatmap_ops` lists the ops of a cell (a layer bin, optionally one device) and
:func:`slice_figure` draws them op by op as the induced sub-DAG (what
:class:`widgets.drilldown.HeatmapView` shows when a cell is clicked).

Examples
--------
>>> import workbench as wb
>>> g, c = wb.samples.cnn(200, seed=0), wb.Cluster.preset("2xV100-pcie")
>>> plans = {m: wb.solve(g, c, method=m) for m in ("single", "round_robin")}
>>> fig = placement_heatmap(g, plans, c, bins=20)
>>> [t.name for t in fig.data], fig.layout.meta["bins"] <= 20
(['single', 'round_robin'], True)
>>> import numpy as np
>>> bool(np.isclose(np.nansum(np.array(fig.data[0].z, dtype=float)), fig.layout.meta["total_ms"]))
True
>>> ops = heatmap_ops(g, 3, bins=20)
>>> detail = slice_figure(g, ops, plan=plans["round_robin"], cluster=c)
>>> detail.layout.meta["figure"], detail.layout.meta["ops"] == len(ops) > 0
('slice', True)
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ._common import op_times_or_min
from .dag import check_plan_of
from .layout import layered_layout

__all__ = ["placement_heatmap", "layer_bins", "heatmap_ops", "induced_subgraph",
           "slice_figure"]


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
    for plan in plans.values():  # each drawn on its own graph: but made for this one
        check_plan_of(graph, plan)
    for r, (m, plan) in enumerate(plans.items(), start=1):
        g = plan.graph
        b, lo, hi = layer_bins(g, bins)
        nb = len(lo)
        dev = np.array([names.index(plan.placement[v]) for v in g.ops], dtype=np.int64)
        w = op_times_or_min(g, cluster)
        z = np.zeros((len(names), nb))
        cnt = np.zeros((len(names), nb), dtype=np.int64)
        np.add.at(z, (dev, b), w)
        np.add.at(cnt, (dev, b), 1)
        if r == 1:
            total = float(z.sum())
        text = [[f"{names[i]}, layers {lo[j]}-{hi[j]}: {cnt[i, j]} ops, {z[i, j]:.3g} ms"
                 for j in range(nb)] for i in range(len(names))]
        fig.add_trace(go.Heatmap(
            # empty cells as None, not NaN: a FigureWidget's messages must be valid JSON
            name=str(m), z=[[float(z[i, j]) if cnt[i, j] else None for j in range(nb)]
                            for i in range(len(names))], x=lo, y=names, text=text,
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


def layer_bins(graph, bins: int = 120) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each op's layer bin, and the first and last layer of every bin.

    >>> from workbench import samples
    >>> b, lo, hi = layer_bins(samples.diamond(), bins=2)
    >>> b.tolist(), lo.tolist(), hi.tolist()
    ([0, 0, 0, 1], [0, 1], [0, 2])
    """
    _, _, layer = layered_layout(graph.n_ops, graph.c.src, graph.c.dst)
    nlay = int(layer.max()) + 1 if graph.n_ops else 1
    nb = max(1, min(int(bins), nlay))
    b = (np.asarray(layer, dtype=np.int64) * nb // nlay).astype(np.int64)
    lo = (np.arange(nb) * nlay) // nb
    hi = ((np.arange(nb) + 1) * nlay) // nb - 1
    return b, lo, hi


def heatmap_ops(graph, layer_bin: int, *, bins: int = 120, plan=None,
                device: str | None = None) -> list[str]:
    """The ops of one heatmap cell: layer bin ``layer_bin`` of :func:`layer_bins`, and with
    ``plan`` and ``device`` only those the plan put on ``device``.

    >>> from workbench import samples
    >>> heatmap_ops(samples.diamond(), 1, bins=2)
    ['d']
    """
    b, lo, _ = layer_bins(graph, bins)
    if not 0 <= int(layer_bin) < len(lo):
        raise ValueError(f"layer bin {layer_bin} out of range: graph {graph.name!r} has "
                         f"{len(lo)} bins")
    ops = [v for v, k in zip(graph.ops, b.tolist()) if k == int(layer_bin)]
    if device is not None:
        if plan is None:
            raise ValueError("heatmap_ops: device= needs plan=")
        ops = [v for v in ops if plan.placement.get(v) == device]
    return ops


def induced_subgraph(graph, ops):
    """The sub-DAG of ``graph`` on ``ops`` (their attributes and the edges between them).

    >>> from workbench import samples
    >>> sub = induced_subgraph(samples.diamond(), ["a", "b", "d"])
    >>> sub.ops, sub.edges()
    (['a', 'b', 'd'], [('a', 'b'), ('b', 'd')])
    """
    from workbench.graph import OpGraph

    keep = set(ops)
    missing = [v for v in keep if v not in graph.index]
    if missing:
        raise ValueError(f"ops not in graph {graph.name!r}: {', '.join(sorted(missing)[:5])}")
    order = [v for v in graph.ops if v in keep]
    edges = [(u, v, graph.edge(u, v)) for u, v in graph.edges() if u in keep and v in keep]
    return OpGraph.from_ops([(v, graph.op(v)) for v in order], edges,
                            name=f"{graph.name} (slice)")


def slice_figure(graph, ops, *, plan=None, cluster=None, highlight=(), title: str | None = None,
                 max_ops: int = 1500, fig: go.Figure | None = None) -> go.Figure:
    """The ops ``ops`` of ``graph`` drawn op by op (their induced sub-DAG), coloured by the
    device ``plan`` gave them; ``highlight`` ops are ringed. At most ``max_ops`` ops are drawn
    (the first in topological order; the title says so); the title counts the edges that
    enter and leave the slice.
    """
    from .dag import dag_figure

    ops = list(dict.fromkeys(ops))
    keep = set(ops)
    order = [v for v in graph.ops if v in keep]
    cut = len(order) > max_ops
    order = order[:max_ops]
    sub = induced_subgraph(graph, order)
    inside = set(order)
    enter = sum(1 for u, v in graph.edges() if v in inside and u not in inside)
    leave = sum(1 for u, v in graph.edges() if u in inside and v not in inside)
    if title is None:
        title = (f"{len(order)} ops" + (f" (first {max_ops} of {len(ops)})" if cut else "")
                 + f" op by op; {enter} edges enter, {leave} leave")
    fig = dag_figure(sub, cluster=cluster, plan=plan, critical_path=False,
                     selected=[v for v in highlight if v in inside], title=title,
                     height=420, fig=fig)
    fig.layout.meta = {**dict(fig.layout.meta or {}), "figure": "slice", "ops": len(order),
                       "truncated": cut, "enter": enter, "leave": leave}
    return fig
