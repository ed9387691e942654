"""The operator DAG as a layered plotly figure.

Nodes are coloured by device (from a plan or schedule), by op kind, by op type or by coarsening
cluster; the critical path (the realised one of a schedule, else the static one) is drawn in red;
hovering a node shows its name, type, kind, costs and device. Large graphs use WebGL traces.

Traces always come in this order, so views can update them in place: ``edges``,
``critical path edges``, ``ops``, ``critical path``, ``selected``, then one empty trace per
legend entry.

Examples
--------
>>> from workbench import samples, Cluster, Plan
>>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
>>> p = Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"})
>>> fig = dag_figure(g, cluster=c, plan=p)
>>> [t.name for t in fig.data][:5]
['edges', 'critical path edges', 'ops', 'critical path', 'selected']
>>> list(fig.data[3].customdata)
['a', 'b', 'd']
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import plotly.graph_objects as go

from ._common import CRITICAL, UNPLACED, color_cycle, device_colors, expect, fmt_bytes, fmt_ms, \
    op_times_or_min
from .layout import auto_wrap, layered_layout, wrap_layers

__all__ = ["COLOR_BY", "WEBGL_THRESHOLD", "dag_colors", "dag_figure", "dag_hover", "dag_layout",
           "static_critical_path"]

COLOR_BY = ("device", "kind", "op_type", "cluster")
WEBGL_THRESHOLD = 1500
"""Graphs with more ops than this are drawn with WebGL (``Scattergl``) traces."""

_KIND_COLORS = {"fwd": "#1f77b4", "bwd": "#ff7f0e", "update": "#2ca02c", "other": "#7f7f7f"}
_N_ROLES = 5


def static_critical_path(graph, cluster=None) -> list[str]:
    """The static critical path: mean costs over ``cluster`` with mean link times, or, without
    a cluster, the fastest device kind and free communication.

    >>> from workbench import samples
    >>> static_critical_path(samples.diamond())
    ['a', 'b', 'd']
    """
    from workbench.analysis import Levels, critical_path, tlevel, upward_rank

    if graph.n_ops == 0:
        return []
    if cluster is not None:
        return critical_path(graph, cluster)
    w = op_times_or_min(graph)
    c = np.zeros(graph.n_edges)
    return critical_path(graph, lv=Levels(w, c, tlevel(graph, w, c), upward_rank(graph, w, c)))


def check_plan_of(graph, plan=None, schedule=None) -> None:
    """Raise PlanError unless ``plan`` was made for ``graph`` (the same ops and edges, the
    graph :func:`workbench.solve` was given when the method transformed it, or a slice of its
    graph: every op placed) and ``schedule``, given with it, simulates it: a plan of another
    graph drew its ops unplaced, silently.

    >>> import workbench as wb
    >>> g, h = wb.samples.diamond(), wb.samples.load_sample("pesto_fig2")
    >>> check_plan_of(g, wb.Plan(h, {v: "gpu0" for v in h.ops}, method="other"))
    Traceback (most recent call last):
    ...
    workbench.errors.PlanError: plan 'other' was made for graph 'pesto_fig2' (7 ops), not for graph 'diamond' (4 ops): 4 of its ops are not placed by it
    """
    from workbench.errors import PlanError
    from workbench.plan import check_schedule

    if plan is None:
        return
    if plan.graph is graph or plan.graph.fingerprint == graph.fingerprint or \
            plan.problem == graph.fingerprint:
        missing = 0
    else:  # a slice of the plan's graph (a drill-down) is drawn with it: every op placed
        missing = sum(v not in plan.placement for v in graph.ops)
    if missing:
        raise PlanError(f"plan {plan.method!r} was made for graph {plan.graph.name!r} "
                        f"({plan.graph.n_ops} ops), not for graph {graph.name!r} "
                        f"({graph.n_ops} ops): {missing} of its ops are not placed by it")
    if schedule is not None:
        check_schedule(plan, schedule)


def _device_names(graph, plan=None, schedule=None) -> list | None:
    if schedule is not None:
        names = schedule.cluster.names
        devs = [names[i] for i in schedule.device.tolist()]
        if schedule.graph is graph:
            return devs
        # a schedule of a transformed graph (split, coarsened): match ops by name
        by_name = dict(zip(schedule.graph.ops, devs))
        return [by_name.get(v) for v in graph.ops]
    if plan is not None:
        return [plan.placement.get(v) for v in graph.ops]
    return None


def dag_layout(graph, *, wrap: int | bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Coordinates of every op: the layered layout, folded into bands when the graph is much
    deeper than wide (``wrap``: layers per band, True/None = automatic, False = never).

    >>> from workbench import samples
    >>> x, y = dag_layout(samples.diamond())
    >>> x.tolist()
    [0.0, 1.0, 1.0, 2.0]
    """
    expect(graph, "graph", "the DAG view's graph")
    gc = graph.c
    x, y, layer = layered_layout(graph.n_ops, gc.src, gc.dst)
    if wrap is False or graph.n_ops == 0:
        return x, y
    per_band = auto_wrap(y, layer) if wrap in (None, True) else int(wrap)
    return wrap_layers(x, y, layer, per_band)


def dag_colors(graph, *, color_by: str = "device", plan=None, schedule=None, cluster=None,
               clusters: dict | None = None) -> tuple[list, dict]:
    """Per-op colours and the legend (label -> colour) for ``color_by``.

    >>> from workbench import samples
    >>> cols, legend = dag_colors(samples.diamond(), color_by="kind")
    >>> legend
    {'fwd': '#1f77b4'}
    """
    if color_by not in COLOR_BY:
        raise ValueError(f"color_by must be one of {', '.join(COLOR_BY)}, got {color_by!r}")
    ops = graph.ops
    if color_by == "device":
        devs = _device_names(graph, plan, schedule)
        if devs is None:
            return [UNPLACED] * len(ops), {"unplaced": UNPLACED}
        if cluster is not None:
            order = list(cluster.names)
        elif schedule is not None:
            order = list(schedule.cluster.names)
        else:
            order = sorted({d for d in devs if d is not None})
        cmap = device_colors(order)
        used = set(devs)
        legend = {d: cmap[d] for d in order if d in used}
        if None in used:
            legend["unplaced"] = UNPLACED
        return [cmap.get(d, UNPLACED) if d is not None else UNPLACED for d in devs], legend
    if color_by == "kind":
        kinds = [graph.nx.nodes[v]["kind"] for v in ops]
        legend = {k: _KIND_COLORS[k] for k in _KIND_COLORS if k in set(kinds)}
        return [_KIND_COLORS.get(k, UNPLACED) for k in kinds], legend
    if color_by == "op_type":
        types = [graph.nx.nodes[v]["op_type"] or "?" for v in ops]
        uniq = list(dict.fromkeys(types))
        cmap = {t: color_cycle(i) for i, t in enumerate(uniq)}
        return [cmap[t] for t in types], cmap
    if clusters is None:
        raise ValueError("color_by='cluster' needs clusters= (a mapping op -> cluster id)")
    ids = [clusters.get(v) for v in ops]
    uniq = list(dict.fromkeys(i for i in ids if i is not None))
    cmap = {u: color_cycle(k) for k, u in enumerate(uniq)}
    legend = {f"cluster {u}": cmap[u] for u in uniq[:20]}
    return [cmap.get(i, UNPLACED) for i in ids], legend


def dag_hover(graph, devices: list | None = None, clusters: dict | None = None) -> list[str]:
    """Hover text of every op: name, type, kind, compute per device kind, memory, device."""
    nodes = graph.nx.nodes
    out = []
    for i, v in enumerate(graph.ops):
        a = nodes[v]
        comp = ", ".join(f"{k} {fmt_ms(t)}" for k, t in a["compute"].items())
        s = (f"<b>{v}</b><br>type: {a['op_type'] or '?'} ({a['kind']})<br>compute: {comp}"
             f"<br>memory: {fmt_bytes(a['memory'])}")
        if devices is not None:
            s += f"<br>device: {devices[i]}"
        if clusters is not None and v in clusters:
            s += f"<br>cluster: {clusters[v]}"
        out.append(s)
    return out


def _segments(x: np.ndarray, y: np.ndarray, src: np.ndarray, dst: np.ndarray):
    """Edge polylines with NaN separators: (x0, x1, nan, ...)."""
    m = len(src)
    ex = np.full(3 * m, np.nan)
    ey = np.full(3 * m, np.nan)
    ex[0::3], ex[1::3] = x[src], x[dst]
    ey[0::3], ey[1::3] = y[src], y[dst]
    return ex, ey


def dag_figure(graph, *, cluster=None, plan=None, schedule=None, color_by: str = "device",
               clusters: dict | None = None, critical_path: bool | Iterable[str] = True,
               selected: Iterable[str] = (), webgl: bool | None = None,
               layout: tuple | None = None, wrap: int | bool | None = None,
               title: str | None = None, height: int | None = None,
               fig: go.Figure | None = None) -> go.Figure:
    """Draw ``graph`` as a layered DAG.

    Parameters
    ----------
    graph : OpGraph
    cluster : Cluster, optional
        Orders the device colours and gives the costs of the static critical path.
    plan : Plan, optional
        Colours ops by device (``color_by="device"``).
    schedule : Schedule, optional
        Like ``plan``; also gives the realised critical path.
    color_by : {"device", "kind", "op_type", "cluster"}
    clusters : dict, optional
        Op -> cluster id, for ``color_by="cluster"`` (e.g. a coarsening map).
    critical_path : bool or list of op names
        True: the realised path of ``schedule`` or else the static one; False: none.
    selected : iterable of op names
        Ops ringed in the ``selected`` trace.
    webgl : bool, optional
        Use ``Scattergl``; by default when the graph has more than :data:`WEBGL_THRESHOLD` ops.
    layout : (x, y) arrays, optional
        Precomputed coordinates (see :func:`dag_layout`).
    wrap : int or bool, optional
        Fold a deep graph into bands of this many layers (default: automatic).
    fig : Figure, optional
        Cleared and drawn into (e.g. a ``FigureWidget``).

    Returns
    -------
    plotly.graph_objects.Figure

    Raises
    ------
    PlanError
        ``plan`` is a plan of another graph, or ``schedule`` is not a simulation of ``plan``
        (:func:`check_plan_of`).
    """
    expect(graph, "graph", "dag_figure's graph")
    expect(plan, "plan", "dag_figure's plan", optional=True)
    expect(schedule, "schedule", "dag_figure's schedule", optional=True)
    expect(cluster, "cluster", "dag_figure's cluster", optional=True)
    check_plan_of(graph, plan, schedule)
    n = graph.n_ops
    gc = graph.c
    if webgl is None:
        webgl = n > WEBGL_THRESHOLD
    Sc = go.Scattergl if webgl else go.Scatter
    if layout is None:
        x, y = dag_layout(graph, wrap=wrap)
    else:
        x, y = (np.asarray(a, dtype=float) for a in layout[:2])
    if critical_path is True:
        crit = (schedule.critical_ops() if schedule is not None
                else static_critical_path(graph, cluster))
    elif not critical_path:
        crit = []
    else:
        crit = [str(v) for v in critical_path]
    crit_idx = np.array([graph.index[v] for v in crit if v in graph.index], dtype=np.int64)
    colors, legend = dag_colors(graph, color_by=color_by, plan=plan, schedule=schedule,
                                cluster=cluster, clusters=clusters)
    devices = _device_names(graph, plan, schedule)
    hover = dag_hover(graph, devices, clusters)
    w = op_times_or_min(graph, cluster)
    # markers shrink with the number of layers so that deep graphs do not overlap
    n_layers = int(np.unique(x).size) if n else 1
    smax = float(np.clip(1000.0 / max(1, n_layers), 5.0, 18.0))
    if n > WEBGL_THRESHOLD:
        size = np.full(n, min(5.0, smax))
    else:
        wmax = float(w.max()) if n and w.max() > 0 else 1.0
        size = 0.4 * smax + 0.6 * smax * np.sqrt(np.clip(w, 0, None) / wmax)

    fig = go.Figure() if fig is None else fig
    fig.data = []
    ex, ey = _segments(x, y, gc.src, gc.dst)
    # critical edges: consecutive path members joined by an edge
    if len(crit_idx) > 1:
        cs, cd = crit_idx[:-1], crit_idx[1:]
    else:
        cs = cd = np.zeros(0, dtype=np.int64)
    cx, cy = _segments(x, y, cs, cd)
    names = np.array(graph.ops, dtype=object)
    traces = [
        Sc(x=ex, y=ey, mode="lines", name="edges", hoverinfo="skip", showlegend=False,
           line=dict(color="rgba(120,120,120,0.45)", width=0.8 if webgl else 1.0)),
        Sc(x=cx, y=cy, mode="lines", name="critical path edges", hoverinfo="skip",
           showlegend=False, line=dict(color=CRITICAL, width=3)),
        Sc(x=x, y=y, mode="markers", name="ops", text=hover, customdata=names,
           hovertemplate="%{text}<extra></extra>", showlegend=False,
           marker=dict(color=colors, size=size, line=dict(color="white", width=0.5))),
        Sc(x=x[crit_idx], y=y[crit_idx], mode="markers", name="critical path",
           customdata=names[crit_idx], hoverinfo="skip",
           marker=dict(color="rgba(0,0,0,0)", size=size[crit_idx] + 4,
                       line=dict(color=CRITICAL, width=1.5))),
        _selected_trace(graph, x, y, selected, Sc),
    ]
    for label, col in legend.items():
        traces.append(Sc(x=[None], y=[None], mode="markers", name=str(label),
                         marker=dict(color=col, size=10), legendgroup="colors"))
    fig.add_traces(traces)
    if title is None:
        what = {"device": "placement" if devices is not None else "unplaced",
                "kind": "op kind", "op_type": "op type", "cluster": "cluster"}[color_by]
        title = f"{graph.name}: {n} ops, {graph.n_edges} edges, coloured by {what}"
    fig.update_layout(
        title=dict(text=title, x=0.01), template="plotly_white", autosize=True, hovermode="closest",
        height=height or (460 if n <= 300 else 560), margin=dict(l=10, r=10, t=45, b=10),
        xaxis=dict(visible=False), yaxis=dict(visible=False), dragmode="pan",
        legend=dict(title=dict(text=color_by)), meta={"figure": "dag", "graph": graph.name,
                                                      "color_by": color_by})
    return fig


def _selected_trace(graph, x, y, selected, Sc):
    idx = np.array([graph.index[v] for v in selected if v in graph.index], dtype=np.int64)
    return Sc(x=x[idx], y=y[idx], mode="markers", name="selected", hoverinfo="skip",
              customdata=np.array(graph.ops, dtype=object)[idx],
              marker=dict(color="rgba(0,0,0,0)", size=22, symbol="circle",
                          line=dict(color="#111111", width=3)))
