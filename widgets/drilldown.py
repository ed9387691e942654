"""Detail on demand for very large graphs: click an aggregate, see its ops.

- :class:`HeatmapView`: the placement heatmap (compute per device along the graph's depth, one
  panel per plan); clicking a cell draws that layer slice op by op below it (its induced
  sub-DAG, coloured by device, the clicked device's ops ringed).
- :class:`ClusterView`: a fixed clustering (e.g. Celeritas's fused clusters) drawn one node
  per cluster; clicking a cluster draws its member ops in the right-hand panel.

Both open on their heaviest aggregate, so the detail is never empty, and keep the state in
traits (:attr:`HeatmapView.cell`, :attr:`ClusterView.selected_cluster`) that code can set too.

Examples
--------
>>> import workbench as wb
>>> g, c = wb.samples.cnn(200, seed=0), wb.Cluster.preset("2xV100-pcie")
>>> plans = {m: wb.solve(g, c, method=m) for m in ("single", "round_robin")}
>>> view = HeatmapView(g, plans, c, bins=20)
>>> view.cell = ("round_robin", 5, "gpu1")
>>> meta = view.detail.layout.meta
>>> meta["figure"], meta["ops"] == len(heatmap_ops(g, 5, bins=20))
('slice', True)
>>> clusters = ClusterView(g, {v: i // 10 for i, v in enumerate(g.ops)})
>>> clusters.selected_cluster = "3"
>>> list(clusters.figure.data[-1].customdata) == g.ops[30:40]
True
"""

from __future__ import annotations

import html as _html

import ipywidgets as W
import numpy as np
import plotly.graph_objects as go
import traitlets

from .figurewidget import FigureWidget
from .figures.aggregate import heatmap_ops, layer_bins, placement_heatmap, slice_figure
from .figures.coarsen import coarse_figure
from .fit import CellFit
from .views import FILL_CSS, fill, replace_figure

__all__ = ["HeatmapView", "ClusterView"]


class HeatmapView(W.VBox):
    """Placement heatmap with a drill-down: click a cell to see its ops.

    Parameters
    ----------
    graph : OpGraph
    plans : dict
        Name -> Plan (as for :func:`~widgets.figures.placement_heatmap`).
    cluster : Cluster
    bins : int
        Layer bins of the heatmap.
    max_ops : int
        At most this many ops in the detail figure.

    Attributes
    ----------
    cell : tuple
        ``(plan name, layer bin, device)`` shown in :attr:`detail`; set it (or click) to
        drill down.
    """

    cell = traitlets.Tuple(help="(plan, layer bin, device) of the slice shown below")

    def __init__(self, graph, plans: dict, cluster, *, bins: int = 120, max_ops: int = 1500):
        super().__init__()
        if not plans:
            raise ValueError("HeatmapView needs at least one plan")
        self.graph, self.plans, self.cluster = graph, dict(plans), cluster
        self.bins, self.max_ops = int(bins), int(max_ops)
        self.figure = fill(FigureWidget(placement_heatmap(graph, self.plans, cluster,
                                                             bins=bins)))
        self.figure.add_class("wb-heatmap")
        for t in self.figure.data:
            t.on_click(self._on_click)
        self.info = W.HTML()
        self.info.add_class("wb-slice-info")
        self.detail = None  # built from the first drawing (the heaviest cell)
        first = next(iter(self.plans))
        z = np.nan_to_num(np.asarray(self.figure.data[0].z, dtype=float))
        i, j = np.unravel_index(int(np.argmax(z)), z.shape)
        self.cell = (first, int(j), str(self.figure.data[0].y[i]))
        self.children = [W.HTML(FILL_CSS), CellFit(), self.figure, self.info, self.detail]

    @traitlets.validate("cell")
    def _check_cell(self, proposal):
        m, b, dev = proposal["value"]
        if m not in self.plans:
            raise traitlets.TraitError(f"no plan {m!r}; plans: {', '.join(self.plans)}")
        if dev is not None and dev not in self.cluster.names:
            raise traitlets.TraitError(f"no device {dev!r} in cluster {self.cluster.name!r}")
        return (m, int(b), dev)

    @traitlets.observe("cell")
    def _on_cell(self, change) -> None:
        m, b, dev = change["new"]
        plan = self.plans[m]
        g = plan.graph
        ops = heatmap_ops(g, b, bins=self.bins)
        on_dev = [v for v in ops if plan.placement.get(v) == dev]
        _, lo, hi = layer_bins(g, self.bins)
        title = (f"{m}: layers {lo[b]}-{hi[b]}, {len(ops)} ops ({len(on_dev)} on {dev}, "
                 "ringed)")
        new = slice_figure(g, ops, plan=plan, cluster=self.cluster, highlight=on_dev,
                           max_ops=self.max_ops, title=title)
        if self.detail is None:
            self.detail = fill(FigureWidget(new))
            self.detail.add_class("wb-slice")
        else:
            replace_figure(self.detail, new)
        meta = new.layout.meta
        self.info.value = (f"<b>{_html.escape(m)}</b>, layers {lo[b]}-{hi[b]} on "
                           f"{_html.escape(str(dev))}: drawn op by op below "
                           f"({meta['enter']} edges enter the slice, {meta['leave']} leave)"
                           + (f"; first {self.max_ops} ops only" if meta["truncated"] else "")
                           + ". Click another cell to drill down there.")

    def _on_click(self, trace, points, state) -> None:
        if not points.xs:
            return
        lo = list(np.asarray(trace.x).tolist())
        x = points.xs[0]
        if x not in lo:
            return
        self.cell = (trace.name, lo.index(x), str(points.ys[0]))


class ClusterView(W.VBox):
    """A fixed clustering of a large graph, one node per cluster; click one to draw its ops.

    Parameters
    ----------
    graph : OpGraph
        The fine graph.
    mapping : dict
        Op -> cluster id (e.g. ``dict(zip(g.ops, fused.cluster_of))`` of Celeritas's fusion).
    plan, cluster :
        As for :func:`~widgets.figures.coarse_figure` (clusters coloured by device).
    title : str, optional
    """

    selected_cluster = traitlets.Unicode("", help="id (as text) of the cluster drawn op by op")

    def __init__(self, graph, mapping: dict, *, plan=None, cluster=None,
                 title: str | None = None):
        super().__init__()
        self.graph, self.mapping, self.plan, self.cluster = graph, dict(mapping), plan, cluster
        self.title = title
        self._ids = {str(i): i for i in dict.fromkeys(self.mapping.get(v, v)
                                                      for v in graph.ops)}
        self.figure = fill(FigureWidget(self._draw(None)))
        self.figure.add_class("wb-coarse")
        self.figure.data[self._clusters_trace()].on_click(self._on_click)
        self.selected_cluster = str(self.figure.layout.meta["selected"])
        self.children = [W.HTML(FILL_CSS), CellFit(), self.figure]

    def _draw(self, selected) -> go.Figure:
        return coarse_figure(self.graph, self.mapping, plan=self.plan, cluster=self.cluster,
                             selected=selected, title=self.title)

    def _clusters_trace(self) -> int:
        return next(i for i, t in enumerate(self.figure.data) if t.name == "clusters")

    @traitlets.validate("selected_cluster")
    def _check(self, proposal):
        if proposal["value"] not in self._ids:
            raise traitlets.TraitError(f"no cluster {proposal['value']!r} "
                                       f"({len(self._ids)} clusters)")
        return proposal["value"]

    @traitlets.observe("selected_cluster")
    def _on_selected(self, change) -> None:
        if self.figure.layout.meta.get("selected") != change["new"]:
            replace_figure(self.figure, self._draw(self._ids[change["new"]]))

    def _on_click(self, trace, points, state) -> None:
        if points.point_inds:
            self.selected_cluster = str(trace.customdata[points.point_inds[0]])
