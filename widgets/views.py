"""Interactive views: ipywidgets compositions of plotly ``FigureWidget`` s and controls.

Each view is an ``ipywidgets.VBox`` (display it as the last expression of a cell) with its
figure in ``.figure``; state lives in a few traits and updates redraw in place with
``FigureWidget.batch_update()``. Views only show model objects: the one exception is
:class:`CoarsenView`, which calls the public coarsening transform when its slider moves.

Examples
--------
>>> import workbench as wb
>>> g, c = wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie")
>>> p = wb.solve(g, c, method="round_robin")
>>> dag, gantt = DagView(g, cluster=c, plan=p), GanttView(wb.simulate(p, c))
>>> link = link_selection(dag, gantt)
>>> dag.selected = "c"
>>> list(gantt.figure.data[-1].customdata)
['c']
"""

from __future__ import annotations

import html as _html

from typing import Callable

import ipywidgets as W
import numpy as np
import plotly.graph_objects as go
import traitlets

from workbench.errors import GraphError

from .figurewidget import FigureWidget
from .figures.coarsen import coarse_figure
from .figures.dag import COLOR_BY, dag_colors, dag_figure, dag_layout
from .figures.gantt import gantt_figure
from .figures.pipeline import pipeline_figure, stage_table
from .fit import CellFit

__all__ = ["DagView", "GanttView", "CoarsenView", "PipelineView", "link_selection",
           "replace_figure", "FILL_CSS", "fill"]

FILL_CSS = ("<style>.wb-fill{width:100% !important;min-width:0;max-width:100%}"
            ".wb-half{width:50%;min-width:0;flex:1 1 0}</style>")
"""CSS that lets figures take their cell's width (plotly then sizes to its container)."""


def fill(fw):
    """Make a ``FigureWidget`` take the full width of its cell: plotly.js's ``responsive``
    config (the plot follows its container) and the ``wb-fill`` class of :data:`FILL_CSS`."""
    fw.add_class("wb-fill")
    fw._config = {**(fw._config or {}), "responsive": True, "displaylogo": False}
    return fw


def _trace_index(fig, name: str) -> int:
    for i, t in enumerate(fig.data):
        if t.name == name:
            return i
    raise KeyError(f"figure has no trace named {name!r}")


def replace_figure(fw: go.FigureWidget, new: go.Figure) -> None:
    """Redraw ``fw`` as ``new`` in place: traces updated one by one inside ``batch_update``
    when their count and types match, else swapped; the layout is replaced."""
    same = (len(fw.data) == len(new.data)
            and all(a.type == b.type for a, b in zip(fw.data, new.data)))
    if same:
        with fw.batch_update():
            for old, t in zip(fw.data, new.data):
                js = t.to_plotly_json()
                js.pop("type", None)
                js.pop("uid", None)
                # properties the new trace does not set must not survive from the old one
                for k in ("text", "customdata", "base", "hovertemplate", "hoverinfo"):
                    if k in old._valid_props:
                        js.setdefault(k, None)
                old.update(js, overwrite=True)
            fw.layout = new.layout
    else:
        with fw.batch_update():
            fw.layout = new.layout
        fw.data = []
        fw.add_traces(list(new.data))


class _Selectable(W.VBox):
    selected = traitlets.Unicode("", help="name of the selected op ('' = none)")


class DagView(_Selectable):
    """The operator DAG with a colour-by chooser and op selection.

    Clicking a node (or typing its name) sets :attr:`selected`; :func:`link_selection` ties it
    to a :class:`GanttView`.

    Parameters
    ----------
    graph : OpGraph
    cluster, plan, schedule, clusters :
        As for :func:`~widgets.figures.dag_figure`.
    color_by : str
    """

    def __init__(self, graph, *, cluster=None, plan=None, schedule=None,
                 clusters: dict | None = None, color_by: str | None = None, **fig_kw):
        super().__init__()
        self.graph, self.cluster, self.plan, self.schedule = graph, cluster, plan, schedule
        self.clusters = clusters
        if color_by is None:
            color_by = "device" if (plan is not None or schedule is not None) else "kind"
        self._xy = dag_layout(graph, wrap=fig_kw.pop("wrap", None))
        self.figure = FigureWidget(dag_figure(graph, cluster=cluster, plan=plan,
                                                 schedule=schedule, clusters=clusters,
                                                 color_by=color_by, layout=self._xy, **fig_kw))
        fill(self.figure).add_class("wb-dag")
        opts = [c for c in COLOR_BY if c != "cluster" or clusters is not None]
        self.color_picker = W.Dropdown(options=opts, value=color_by, description="colour by",
                                       layout=W.Layout(width="220px"))
        self.color_picker.add_class("wb-color-by")
        self.op_box = W.Combobox(placeholder="op name", description="select",
                                 options=graph.ops if graph.n_ops <= 5000 else [],
                                 ensure_option=False, layout=W.Layout(width="320px"))
        self.color_picker.observe(self._on_color, "value")
        self.op_box.observe(self._on_box, "value")
        self.figure.data[_trace_index(self.figure, "ops")].on_click(self._on_click)
        self.children = [W.HTML(FILL_CSS), CellFit(), W.HBox([self.color_picker, self.op_box]),
                         self.figure]

    @property
    def color_by(self) -> str:
        return self.color_picker.value

    def _on_click(self, trace, points, state) -> None:
        if points.point_inds:
            self.selected = self.graph.ops[points.point_inds[0]]

    def _on_box(self, change) -> None:
        if change["new"] in self.graph.index:
            self.selected = change["new"]

    @traitlets.observe("selected")
    def _on_selected(self, change) -> None:
        v = change["new"]
        sel = [v] if v in self.graph.index else []
        idx = np.array([self.graph.index[x] for x in sel], dtype=np.int64)
        x, y = self._xy
        t = self.figure.data[_trace_index(self.figure, "selected")]
        with self.figure.batch_update():
            t.x, t.y, t.customdata = x[idx], y[idx], np.array(sel, dtype=object)
        if v and self.op_box.value != v:
            self.op_box.value = v

    def _on_color(self, change) -> None:
        colors, legend = dag_colors(self.graph, color_by=change["new"], plan=self.plan,
                                    schedule=self.schedule, cluster=self.cluster,
                                    clusters=self.clusters)
        fw = self.figure
        Sc = type(fw.data[0])
        with fw.batch_update():
            fw.data[_trace_index(fw, "ops")].marker.color = colors
            fw.layout.legend.title.text = change["new"]
            fw.layout.meta = {**(fw.layout.meta or {}), "color_by": change["new"]}
            title = fw.layout.title.text or ""
            if " coloured by " in title:  # the default title names the colouring: follow it
                what = {"device": "placement", "kind": "op kind", "op_type": "op type",
                        "cluster": "cluster"}.get(change["new"], change["new"])
                fw.layout.title.text = title.rsplit(" coloured by ", 1)[0] + f" coloured by {what}"
        keep = [t for t in fw.data if t.legendgroup != "colors"]
        fw.data = keep
        fw.add_traces([Sc(x=[None], y=[None], mode="markers", name=str(k),
                          marker=dict(color=col, size=10), legendgroup="colors")
                       for k, col in legend.items()])


class GanttView(_Selectable):
    """Gantt chart of a schedule; clicking an op bar sets :attr:`selected`, which outlines it.

    Parameters
    ----------
    schedule : Schedule
    """

    def __init__(self, schedule, **fig_kw):
        super().__init__()
        self.schedule = schedule
        self._fig_kw = fig_kw
        self.figure = FigureWidget(gantt_figure(schedule, **fig_kw))
        fill(self.figure).add_class("wb-gantt")
        self.idle_box = W.Checkbox(value=True, description="show idle gaps", indent=False)
        self.idle_box.add_class("wb-idle")
        self.idle_box.observe(self._on_idle, "value")
        self._hook_clicks()
        self.children = [W.HTML(FILL_CSS), CellFit(), self.idle_box, self.figure]

    def _hook_clicks(self) -> None:
        # the critical-path outline and the selection outline lie on top of the op bars and
        # take their clicks: they select the op they outline too
        for t in self.figure.data:
            if t.name.endswith(" ops") or t.name in ("critical path", "selected"):
                t.on_click(self._on_click)

    def _on_click(self, trace, points, state) -> None:
        if points.point_inds:
            v = str(trace.customdata[points.point_inds[0]])
            if v in self.schedule.graph.index:  # transfers on the critical path select nothing
                self.selected = v

    def _on_idle(self, change) -> None:
        with self.figure.batch_update():
            self.figure.data[_trace_index(self.figure, "idle")].visible = bool(change["new"])

    @traitlets.observe("selected")
    def _on_selected(self, change) -> None:
        s = self.schedule
        v = change["new"]
        idx = np.array([s.graph.index[v]] if v in s.graph.index else [], dtype=np.int64)
        names = np.array(s.cluster.names, dtype=object)
        t = self.figure.data[_trace_index(self.figure, "selected")]
        with self.figure.batch_update():
            t.y = names[s.device[idx]]
            t.base = s.start[idx]
            t.x = np.maximum(s.end[idx] - s.start[idx], 1e-9)
            t.customdata = np.array([v] if len(idx) else [], dtype=object)

    def show(self, schedule) -> None:
        """Redraw in place for another schedule (the selection is kept)."""
        self.schedule = schedule
        replace_figure(self.figure, gantt_figure(schedule, **self._fig_kw))
        self._hook_clicks()
        self._on_selected({"new": self.selected})


def link_selection(a: _Selectable, b: _Selectable) -> traitlets.link:
    """Keep the ``selected`` op of two views in sync (both ways); returns the link
    (call ``.unlink()`` to undo)."""
    return traitlets.link((a, "selected"), (b, "selected"))


class CoarsenView(W.VBox):
    """A coarsening with a target-size slider, redrawn in place.

    Parameters
    ----------
    graph : OpGraph
    cluster : Cluster, optional
    plan : Plan, optional
        A plan of ``graph`` that colours the clusters.
    coarsen : callable, optional
        ``coarsen(graph, target) -> mapping`` (a dict op -> id or a result with
        ``vertex_of``). Default: :func:`workbench.transforms.coarsen.coarsen` with ``cluster``.
    target : int, optional
        Initial target size (default: about a tenth of the graph, at least 4).
    min_target, max_target : int, optional
        Slider range.
    """

    target = traitlets.Int(0)
    selected_cluster = traitlets.Unicode("")

    def __init__(self, graph, *, cluster=None, plan=None, coarsen: Callable | None = None,
                 target: int | None = None, min_target: int | None = None,
                 max_target: int | None = None):
        super().__init__()
        self.graph, self.cluster, self.plan = graph, cluster, plan
        if coarsen is None:
            try:
                from workbench.transforms.coarsen import coarsen as _pesto
            except ImportError as e:
                raise ImportError("CoarsenView needs workbench.transforms.coarsen (not "
                                  "available) or an explicit coarsen= callable") from e

            def coarsen(g, t, _c=cluster):
                return _pesto(g, t, cluster=_c)
        self._coarsen = coarsen
        for key, v in (("target", target), ("min_target", min_target),
                       ("max_target", max_target)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer))
                                  or v < 1):
                raise GraphError(f"CoarsenView: {key} must be an integer >= 1, got {v!r}")
        n = graph.n_ops
        lo = max(1, min_target or min(4, n))
        hi = max(lo, max_target or n)
        start = target if target is not None else max(lo, min(hi, max(4, n // 10)))
        self.slider = W.IntSlider(value=start, min=lo, max=hi, step=1, description="target",
                                  continuous_update=False, layout=W.Layout(width="420px"))
        self.slider.add_class("wb-coarse-target")
        self.info = W.HTML()
        self.mapping = None
        self.result = None
        self.figure = None  # built from the first drawing, so it opens at its cell's width
        self.slider.observe(lambda ch: setattr(self, "target", int(ch["new"])), "value")
        self.target = int(start)
        self.children = [W.HTML(FILL_CSS), CellFit(), W.HBox([self.slider, self.info]),
                         self.figure]

    @traitlets.observe("target")
    def _on_target(self, change) -> None:
        if self.slider.value != change["new"]:
            self.slider.value = change["new"]
        self.result = self._coarsen(self.graph, int(change["new"]))
        self.mapping = getattr(self.result, "vertex_of", self.result)
        self.selected_cluster = ""
        self._redraw()

    @traitlets.observe("selected_cluster")
    def _on_cluster(self, change) -> None:
        if self.mapping is not None:
            self._redraw()

    def _redraw(self) -> None:
        ids = list(dict.fromkeys(self.mapping.get(v, v) for v in self.graph.ops))
        sel = next((i for i in ids if str(i) == self.selected_cluster), None)
        new = coarse_figure(self.graph, self.mapping, plan=self.plan, cluster=self.cluster,
                            selected=sel)
        if self.figure is None:
            self.figure = FigureWidget(new)
            fill(self.figure).add_class("wb-coarse")
            self.figure.data[_trace_index(self.figure, "clusters")].on_click(self._on_click)
        else:
            replace_figure(self.figure, new)
        self.info.value = (f"&nbsp;{self.graph.n_ops} ops &rarr; <b>{len(ids)}</b> clusters"
                           + (f" (stopped: {_html.escape(str(self.result.stopped))})"
                              if hasattr(self.result, "stopped") else ""))

    def _on_click(self, trace, points, state) -> None:
        if points.point_inds:
            self.selected_cluster = str(trace.customdata[points.point_inds[0]])


class PipelineView(W.VBox):
    """Pipelined splits of several plans: a plan chooser, the stage load bars (bottleneck in
    red) and the stage table.

    Parameters
    ----------
    plans : dict
        Name -> Plan (all for the same cluster).
    cluster : Cluster
    """

    def __init__(self, plans: dict, cluster):
        super().__init__()
        if not plans:
            raise ValueError("PipelineView needs at least one plan")
        self.plans, self.cluster = dict(plans), cluster
        first = next(iter(self.plans))
        self.picker = W.Dropdown(options=list(self.plans), value=first, description="plan")
        self.picker.add_class("wb-pipeline-picker")
        self.figure = FigureWidget(pipeline_figure(self.plans[first], cluster))
        fill(self.figure).add_class("wb-pipeline")
        self.table = W.HTML(self._table_html(first))
        self.picker.observe(self._on_pick, "value")
        self.children = [W.HTML(FILL_CSS), CellFit(), self.picker, self.figure, self.table]

    def _table_html(self, name: str) -> str:
        df = stage_table(self.plans[name], self.cluster).drop(columns=["mean_position"])
        return df.to_html(index=False, float_format=lambda x: f"{x:.4g}", border=0)

    def _on_pick(self, change) -> None:
        replace_figure(self.figure, pipeline_figure(self.plans[change["new"]], self.cluster))
        self.table.value = self._table_html(change["new"])
