"""Coarsened graphs: clusters of ops drawn as one node each, sized by compute and coloured by
placement, plus the members of a selected cluster.

A coarsening is given as a mapping op -> cluster id (what a coarsening transform produces,
e.g. Pesto's); :func:`coarse_graph` contracts the graph with numpy.

Traces: ``coarse edges``, ``clusters``, ``selected cluster`` (left), ``member edges``,
``members`` (right).

Examples
--------
>>> from workbench import samples
>>> g = samples.diamond()
>>> cg = coarse_graph(g, {"a": 0, "b": 0, "c": 1, "d": 2})
>>> cg["sizes"].tolist(), cg["src"].tolist(), cg["dst"].tolist()
([2, 1, 1], [0, 0, 1], [1, 2, 2])
>>> fig = coarse_figure(g, {"a": 0, "b": 0, "c": 1, "d": 2}, selected=0)
>>> [t.name for t in fig.data]
['coarse edges', 'clusters', 'selected cluster', 'member edges', 'members']
>>> list(fig.data[4].customdata)
['a', 'b']
"""

from __future__ import annotations

from collections import Counter
from typing import Hashable

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ._common import UNPLACED, color_cycle, device_colors, fmt_bytes, fmt_ms, op_times_or_min
from .dag import _segments
from .layout import layered_layout

__all__ = ["coarse_graph", "coarse_figure", "members_figure"]


def coarse_graph(graph, mapping: dict, *, cluster=None) -> dict:
    """Contract ``graph`` by ``mapping`` (op -> cluster id; unmapped ops stay alone).

    Returns a dict of numpy arrays: ``ids`` (cluster ids, ordered by their first op),
    ``group`` (cluster index of every op), ``sizes``, ``compute`` (summed mean/fastest time),
    ``memory``, and the inter-cluster edges ``src``, ``dst``, ``bytes``.
    """
    mapping = _as_mapping(mapping)
    ops = graph.ops
    gid = {}
    group = np.empty(graph.n_ops, dtype=np.int64)
    for i, v in enumerate(ops):
        key = mapping.get(v, ("op", v))
        if key not in gid:
            gid[key] = len(gid)
        group[i] = gid[key]
    G = len(gid)
    w = op_times_or_min(graph, cluster)
    gc = graph.c
    gs, gd = group[gc.src], group[gc.dst]
    cross = gs != gd
    key = gs[cross] * max(G, 1) + gd[cross]
    uk, inv = np.unique(key, return_inverse=True)
    return {
        "ids": list(gid), "group": group, "sizes": np.bincount(group, minlength=G),
        "compute": np.bincount(group, weights=w, minlength=G),
        "memory": np.bincount(group, weights=gc.memory, minlength=G),
        "src": uk // max(G, 1), "dst": uk % max(G, 1),
        "bytes": np.bincount(inv, weights=gc.bytes[cross], minlength=len(uk)),
    }


def _as_mapping(mapping) -> dict:
    """Accept a dict op -> id or a coarsening result with a ``vertex_of`` mapping."""
    m = getattr(mapping, "vertex_of", mapping)
    if not hasattr(m, "get"):
        raise TypeError("mapping must be a dict op -> cluster id or a Coarsening "
                        f"(with .vertex_of), got {type(mapping).__name__}")
    return m


def _majority_device(cg: dict, graph, plan) -> list:
    if plan is None:
        return [None] * len(cg["ids"])
    counts = [Counter() for _ in cg["ids"]]
    for i, v in enumerate(graph.ops):
        counts[cg["group"][i]][plan.placement.get(v)] += 1
    return [c.most_common(1)[0][0] if c else None for c in counts]


def members_figure(graph, mapping: dict, selected: Hashable, **kw) -> go.Figure:
    """The members of cluster ``selected`` drawn alone (a :func:`coarse_figure` panel)."""
    return coarse_figure(graph, mapping, selected=selected, **kw)


def coarse_figure(graph, mapping: dict, *, plan=None, cluster=None,
                  selected: Hashable | None = None, title: str | None = None,
                  height: int | None = None, fig: go.Figure | None = None) -> go.Figure:
    """The coarse graph (left) and the ops of the ``selected`` cluster (right).

    Parameters
    ----------
    graph : OpGraph
        The original (fine) graph.
    mapping : dict or Coarsening
        Op -> cluster id, or the result of :func:`workbench.transforms.coarsen.coarsen`.
    plan : Plan, optional
        A plan of the fine graph; a cluster is coloured by the device of most of its ops
        (without a plan every cluster gets its own colour).
    cluster : Cluster, optional
        Costs (mean over devices) and device colour order.
    selected : cluster id, optional
        Default: the heaviest cluster.
    fig : Figure, optional
        Cleared and drawn into; the trace count is fixed, so a ``FigureWidget`` can be
        updated trace by trace.
    """
    cg = coarse_graph(graph, mapping, cluster=cluster)
    G = len(cg["ids"])
    x, y, _ = layered_layout(G, cg["src"], cg["dst"])
    devs = _majority_device(cg, graph, plan)
    order = list(cluster.names) if cluster is not None else sorted({d for d in devs if d})
    cmap = device_colors(order)
    if plan is not None:
        colors = [cmap.get(d, UNPLACED) if d else UNPLACED for d in devs]
    else:  # no placement: tell the clusters apart
        colors = [color_cycle(k) for k in range(G)]
    comp = cg["compute"]
    cmax = float(comp.max()) if G and comp.max() > 0 else 1.0
    # the largest marker fits the spacing of layers (x) and of ops within a layer (y)
    n_layers = int(np.unique(x).size) if G else 1
    widest = int(np.unique(x, return_counts=True)[1].max()) if G else 1
    smax = float(min(40.0, 560.0 / max(1, n_layers), 300.0 / max(1, widest)))
    smax = max(smax, 10.0)
    size = 0.25 * smax + 0.75 * smax * np.sqrt(np.clip(comp, 0, None) / cmax)
    ids = cg["ids"]
    hover = [f"<b>cluster {ids[k]}</b><br>{int(cg['sizes'][k])} ops, compute {fmt_ms(comp[k])}"
             f"<br>memory {fmt_bytes(cg['memory'][k])}" + (f"<br>device {devs[k]}"
                                                          if devs[k] else "")
             for k in range(G)]
    if selected is None and G:
        sel = int(np.argmax(comp))
    else:
        sel = ids.index(selected) if selected in ids else None
    ex, ey = _segments(x, y, cg["src"], cg["dst"])
    # members of the selected cluster: induced sub-DAG
    if sel is not None:
        mem = np.flatnonzero(cg["group"] == sel)
    else:
        mem = np.zeros(0, dtype=np.int64)
    gc = graph.c
    local = -np.ones(graph.n_ops, dtype=np.int64)
    local[mem] = np.arange(len(mem))
    inside = (local[gc.src] >= 0) & (local[gc.dst] >= 0)
    ms, md = local[gc.src[inside]], local[gc.dst[inside]]
    mx, my, _ = layered_layout(len(mem), ms, md)
    mex, mey = _segments(mx, my, ms, md)
    names = np.array(graph.ops, dtype=object)
    wop = op_times_or_min(graph, cluster)
    mhover = [f"<b>{names[i]}</b><br>{graph.nx.nodes[names[i]]['op_type'] or '?'}"
              f"<br>compute {fmt_ms(wop[i])}" for i in mem]
    mcol = ([cmap.get(plan.placement.get(names[i]), UNPLACED) for i in mem]
            if plan is not None else [colors[sel]] * len(mem))
    new = make_subplots(rows=1, cols=2, column_widths=[0.62, 0.38], horizontal_spacing=0.04,
                        subplot_titles=(f"{G} clusters (size ∝ compute)",
                                        f"members of cluster {ids[sel]} ({len(mem)} ops)"
                                        if sel is not None else "members"))
    if fig is None:
        fig = new
    else:
        fig.data = []
        fig.layout = new.layout
    gids = np.array([str(i) for i in ids], dtype=object)
    fig.add_trace(go.Scatter(x=ex, y=ey, mode="lines", name="coarse edges", hoverinfo="skip",
                             line=dict(color="rgba(120,120,120,0.5)", width=1)), row=1, col=1)
    fig.add_trace(go.Scatter(x=x, y=y, mode="markers", name="clusters", text=hover,
                             customdata=gids, hovertemplate="%{text}<extra></extra>",
                             marker=dict(size=size, color=colors, line=dict(color="white",
                                                                           width=1))),
                  row=1, col=1)
    si = [sel] if sel is not None else []
    fig.add_trace(go.Scatter(x=x[si], y=y[si], mode="markers", name="selected cluster",
                             hoverinfo="skip", customdata=gids[si],
                             marker=dict(size=size[si] + 8, color="rgba(0,0,0,0)",
                                         line=dict(color="#111111", width=3))), row=1, col=1)
    fig.add_trace(go.Scatter(x=mex, y=mey, mode="lines", name="member edges",
                             hoverinfo="skip", line=dict(color="rgba(120,120,120,0.6)",
                                                         width=1)), row=1, col=2)
    fig.add_trace(go.Scatter(x=mx, y=my, mode="markers", name="members", text=mhover,
                             customdata=names[mem], hovertemplate="%{text}<extra></extra>",
                             marker=dict(size=9, color=mcol)), row=1, col=2)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    if title is None:
        title = f"{graph.name}: {graph.n_ops} ops coarsened to {G} clusters"
    fig.update_layout(title=dict(text=title, x=0.01), template="plotly_white", autosize=True,
                      showlegend=False, height=height or 440, hovermode="closest",
                      margin=dict(l=10, r=10, t=70, b=10),
                      meta={"figure": "coarse", "clusters": G,
                            "selected": str(ids[sel]) if sel is not None else None})
    return fig
