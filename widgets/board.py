"""The comparison board: choose a graph, a cluster preset, methods and a time limit, run them
(with a progress bar) through :func:`workbench.compare`, and see the verdict (who wins each
objective and why), the table, the comparison bars and the Gantt charts of any two methods side
by side on one time axis; export the table (CSV), a plan (JSON), its Perfetto trace and the
HTML report.

Every view uses the same colour per method (:func:`widgets.figures.method_color`).

The board runs nothing by itself except through the public API (``workbench.compare``, which
solves and simulates); every figure is a view of the :class:`~workbench.comparison.Comparison`
it returns (its schedules and bounds: nothing is simulated again, so the Gantt charts show
exactly what the table measured). Constructing the board runs nothing: the methods it ticks
come from the registry's metadata (:func:`workbench.compare.default_methods`, the core's
answer to which methods suit a problem).

Examples
--------
>>> import workbench as wb
>>> board = CompareBoard(graphs={"diamond": wb.samples.diamond()}, presets=["2xV100-pcie"],
...                      methods=["single", "round_robin"], time_limit=5)
>>> df = board.run()
>>> df["method"].tolist(), board.progress.value
(['single', 'round_robin'], 2)
>>> board.gantt_a.figure.layout.meta["method"], board.gantt_b.figure.layout.meta["method"]
('round_robin', 'single')
>>> board.gantt_a.figure.layout.xaxis.range == board.gantt_b.figure.layout.xaxis.range
True
>>> "round_robin wins makespan" in board.verdict_view.value
True
"""

from __future__ import annotations

import html as _html
from pathlib import Path
from typing import Callable

import ipywidgets as W
import plotly.graph_objects as go

from workbench.errors import GraphError, PlanError, SolverError

from .figurewidget import FigureWidget
from .figures.compare import compare_figure
from .fit import CellFit
from .figures.gantt import gantt_figure
from .figures.memory import memory_figure
from .figures.robust import robust_figure, robust_html
from .strategies import (STRATEGY_CSS, breakdown_figure, is_training, ranked_methods,
                         row_figures, strategy_table_html)
from .tables import TABLE_CSS, results_table_html
from .verdict import verdict_html
from .views import FILL_CSS as VIEW_CSS
from .views import fill, replace_figure

FILL_CSS = VIEW_CSS.replace("</style>", TABLE_CSS + STRATEGY_CSS + "</style>")
"""CSS of the board: figures take their cell's width; the results table."""

__all__ = ["CompareBoard", "default_graphs", "build_problem", "verdict_html", "QUICK_METHODS",
           "FILL_CSS"]

QUICK_METHODS = ("single", "round_robin", "m_topo", "heft", "dpos", "m_etf", "celeritas",
                 "pesto", "dp", "megatron", "tarnawski", "ddp", "zero")
"""Candidates ticked by default: those of them that suit the opening problem
(:func:`workbench.compare.default_methods` with ``objective="makespan"``; on an LLM training
problem the strategy methods, :mod:`workbench.compare_training`)."""


def board_presets() -> list:
    """The cluster presets the board offers: :data:`workbench.cluster.PRESETS` and the
    8-GPU nodes of :data:`workbench.cluster.TRAINING_PRESETS` (where an LLM's strategies are
    compared; the 64- and 512-GPU ones stay out of the op-placement list).

    >>> [p for p in board_presets() if p.startswith("8xA100-")]
    ['8xA100-nvlink', '8xA100-80g', '8xA100-40g']
    """
    from workbench.cluster import PRESETS, TRAINING_PRESETS

    return [*PRESETS, *(k for k in TRAINING_PRESETS if k.startswith("8x"))]

def default_graphs() -> dict:
    """Name -> graph source offered by the board: the layered pairs of the hard suite
    (:func:`workbench.workloads.hard_suite`, a :class:`~workbench.workloads.Workload` each: its
    memory pressure and preset come with it) first, then bundled samples by the names
    :func:`workbench.workloads.resolve` takes (and the training step of a transformer, which
    no name describes, as a factory), last an LLM training step (``gpt:1.3b``: on a GPU-node
    preset its strategies are compared, :mod:`workbench.compare_training`).

    >>> names = list(default_graphs())
    >>> names[0]
    'layered300-4xV100 (hard suite)'
    """
    from workbench import samples
    from workbench.workloads import hard_suite

    out = {f"{w.name} (hard suite)": w for w in hard_suite() if w.name.startswith("layered")}
    out.update({
        "transformer (200 ops)": "transformer:200",
        "inception (200 ops)": "inception:200",
        "cnn (150 ops)": "cnn:150",
        "lstm grid (200 ops)": "lstm:200",
        "transformer training (2 x 150 ops)": lambda: samples.to_training(
            samples.transformer(150, seed=0)),
        "pesto fig. 2 (7 ops)": "pesto_fig2",
        "diamond (4 ops)": "diamond",
        "GPT 1.3B training step (strategies)": "gpt:1.3b",
    })
    return out


def build_problem(source, preset: str):
    """``(graph, cluster)`` of a board entry on a cluster preset.

    ``source`` is a workload name as :func:`workbench.workloads.resolve` takes it (a graph,
    MSR, plan or ``.onnx`` file, a sample ``NAME[:N_OPS]``, ``msr:NAME``, ``suite:NAME``, a
    PyTorch model name: one that brings its own cluster is run on it, the preset applies to
    the others), an OpGraph, a zero-argument factory of one, or a
    :class:`~workbench.workloads.Workload`, whose device costs and memory pressure are applied
    to the chosen preset (its own preset gives exactly its pair).

    >>> g, c = build_problem("transformer:50", "2xV100-pcie")
    >>> g.n_ops, c.name
    (50, '2xV100-pcie')
    >>> build_problem("msr:op_bert3_inference", "2xV100-pcie")[1].mode
    'host'
    """
    import dataclasses

    import workbench as wb
    from workbench.workloads import Workload, resolve

    if isinstance(source, Workload):
        return dataclasses.replace(source, cluster=preset).build()
    if isinstance(source, str):
        g, own = resolve(source)
        return g, own if own is not None else wb.Cluster.preset(preset)
    g = source() if callable(source) else source
    return g, wb.Cluster.preset(preset)


def _empty_figure(text: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=dict(text=text, x=0.01), template="plotly_white", height=260,
                      xaxis=dict(visible=False), yaxis=dict(visible=False),
                      meta={"figure": "empty"})
    return fig


def _check_board_args(graphs, presets, preset, time_limit) -> None:
    """What :class:`CompareBoard` is given, named when wrong (issue 41: a list of graphs, a
    graph that is a number, a time limit the text box would clamp, an unknown preset that fell
    back to the first one silently).

    >>> _check_board_args(None, None, None, 0.0)
    Traceback (most recent call last):
    ...
    workbench.errors.SolverError: CompareBoard: time_limit must be a number of seconds in [0.1, 3600], got 0.0
    """
    import math

    from workbench.graph import OpGraph
    from workbench.workloads import Workload

    if graphs is not None:
        if not isinstance(graphs, dict):
            raise GraphError(f"CompareBoard: graphs must be a dict name -> graph (an OpGraph, a "
                             f"Workload or a spec such as 'transformer:60'), got "
                             f"{type(graphs).__name__}")
        bad = [k for k, v in graphs.items()
               if not (isinstance(v, (OpGraph, Workload, str)) or callable(v))]
        if bad:
            raise GraphError(f"CompareBoard: graph(s) {bad} are neither an OpGraph, a Workload, "
                             f"a spec string nor a function making a graph")
    names = list(presets or board_presets())
    if preset is not None and preset not in names:
        raise SolverError(f"CompareBoard: preset {preset!r} is not one of {', '.join(names)}")
    if (isinstance(time_limit, bool) or not isinstance(time_limit, (int, float))
            or not math.isfinite(time_limit) or not 0.1 <= time_limit <= 3600):
        raise SolverError(f"CompareBoard: time_limit must be a number of seconds in [0.1, "
                          f"3600], got {time_limit!r}")


def _opening_methods(first, preset: str) -> list:
    """The quick methods that suit the opening problem, found without running anything.

    A workload capped by the live memory model (its footprint is a judged single-device run)
    is not built: under that model no device holds it exactly when its pressure exceeds 1.
    """
    from workbench.compare import ONE_DEVICE, default_methods
    from workbench.workloads import Workload

    if (isinstance(first, Workload) and first.memory_pressure
            and first.memory_model == "live"):
        out = default_methods(candidates=QUICK_METHODS, objective="makespan")
        return [m for m in out if m not in ONE_DEVICE] if first.memory_pressure > 1 else out
    return default_methods(*build_problem(first, preset), candidates=QUICK_METHODS,
                           objective="makespan")


class CompareBoard(W.VBox):
    """Side-by-side comparison of placement methods.

    Parameters
    ----------
    graphs : dict, optional
        Name -> workload name (as :func:`workbench.workloads.resolve` takes it), OpGraph,
        zero-argument factory or :class:`~workbench.workloads.Workload` (default
        :func:`default_graphs`, which opens on the hard pair ``layered300-4xV100``); see
        :func:`build_problem`.
    presets : list of str, optional
        Cluster presets offered (default: :func:`board_presets`).
    methods : list of str, optional
        Methods ticked at start (default: those of :data:`QUICK_METHODS` that suit the first
        graph on the initial preset, see :func:`workbench.compare.default_methods`: no method
        is run).
    time_limit : float
        Seconds per method.
    preset : str, optional
        Initial cluster preset (default: the first graph's own when it is a workload, else
        ``4xV100-nvlink``).

    Attributes
    ----------
    table : pandas.DataFrame or None
        The last comparison's table.
    plans, schedules : dict
        Method -> Plan / Schedule of the last run (the comparison's own, not simulated again).
    comparison : workbench.comparison.Comparison or None
        The last run as :func:`workbench.compare` returns it.
    robust : workbench.robustness.Robustness or None
        The last run's plans replayed under cost noise (when the ``robustness`` box is
        ticked): p5-p95 error bars and P(best) on the bars, its verdict and figure.
    """

    def __init__(self, graphs: dict | None = None, *, presets: list | None = None,
                 methods: list | None = None, time_limit: float = 5.0,
                 preset: str | None = None):
        super().__init__()
        import workbench as wb
        from workbench.solvers.hybrid import STRATEGY_METHODS
        from workbench.workloads import Workload

        _check_board_args(graphs, presets, preset, time_limit)
        self._graphs = dict(graphs or default_graphs())
        presets = list(presets or board_presets())
        first = next(iter(self._graphs.values()))
        if preset is None:
            preset = first.cluster if isinstance(first, Workload) else "4xV100-nvlink"
        preset = preset if preset in presets else presets[0]
        avail = [m for m, info in wb.SOLVERS.items() if not info.needs] + list(STRATEGY_METHODS)
        if methods is None:  # the quick ones that suit the opening problem (none is run)
            methods = _opening_methods(first, preset)
        else:
            unknown = [m for m in methods if m not in avail]
            if isinstance(methods, str) or unknown:
                what = methods if isinstance(methods, str) else ", ".join(map(str, unknown))
                raise PlanError(f"CompareBoard: unknown methods {what} (a list of names); the "
                                f"board runs {', '.join(avail)}")
        self.table = None
        self.comparison = None
        self.robust = None
        self.plans: dict = {}
        self.schedules: dict = {}
        self.graph = None
        self.cluster = None
        lay = W.Layout(width="330px")
        self.graph_picker = W.Dropdown(options=list(self._graphs), description="graph",
                                       layout=lay)
        self.preset_picker = W.Dropdown(options=presets, description="cluster", layout=lay,
                                        value=preset)
        self.graph_picker.observe(self._on_graph, "value")
        self.method_picker = W.SelectMultiple(options=avail, value=tuple(methods),
                                              description="methods", rows=min(8, len(avail)),
                                              layout=W.Layout(width="330px"))
        self.time_box = W.BoundedFloatText(value=time_limit, min=0.1, max=3600, step=1,
                                           description="time limit (s)",
                                           style={"description_width": "initial"},
                                           layout=W.Layout(width="200px"))
        self.batch_box = W.BoundedIntText(value=0, min=0, max=10**7, step=8,
                                          description="global batch (0: auto)",
                                          style={"description_width": "initial"},
                                          layout=W.Layout(width="200px"))
        self.batch_box.add_class("wb-global-batch")
        self.robust_check = W.Checkbox(value=True, description="robustness (200 draws)",
                                       indent=False, layout=W.Layout(width="200px"))
        self.noise_picker = W.Dropdown(options=["profiled", "roofline"], value="profiled",
                                       description="noise", layout=W.Layout(width="200px"))
        self.robust_check.add_class("wb-robust-check")
        self.robust_view = W.HTML()
        self.robust_view.add_class("wb-robust-verdict")
        self._robust_box = W.VBox([], layout=W.Layout(width="100%"))
        self.run_button = W.Button(description="Run", button_style="primary", icon="play")
        self.run_button.add_class("wb-run")
        self.progress = W.IntProgress(value=0, min=0, max=1, description="",
                                      layout=W.Layout(width="260px"))
        self.status = W.HTML("choose methods and press <b>Run</b>")
        self.status.add_class("wb-status")
        self.verdict_view = W.HTML()
        self.verdict_view.add_class("wb-verdict")
        self.table_view = W.HTML()
        self.bars = _figure_widget(_empty_figure("press Run to compare"), "wb-compare")
        self._bars_box = W.VBox([self.bars], layout=W.Layout(width="100%"))
        self.gantt_a_picker = W.Dropdown(options=[], description="Gantt A")
        self.gantt_b_picker = W.Dropdown(options=[], description="Gantt B")
        self.gantt_a_picker.add_class("wb-gantt-a-picker")
        self.gantt_b_picker.add_class("wb-gantt-b-picker")
        self.gantt_a = _EmptyGantt("wb-gantt-a")
        self.gantt_b = _EmptyGantt("wb-gantt-b")
        self._gantt_box = W.HBox([W.VBox([self.gantt_a_picker, self.gantt_a.box]),
                                  W.VBox([self.gantt_b_picker, self.gantt_b.box])],
                                 layout=W.Layout(width="100%"))
        for box in self._gantt_box.children:
            box.add_class("wb-half")
        self.diff_button = W.Button(description="explain A vs B", icon="exchange",
                                    layout=W.Layout(width="auto"))
        self.diff_button.add_class("wb-diff-button")
        self.diff_button.on_click(lambda _b: self.show_diff())
        self.diff_view = W.HTML()
        self.diff_view.add_class("wb-diff")
        self._diff_box = W.VBox([], layout=W.Layout(width="100%"))
        self.export_dir = W.Text(value="reports/board", description="export to",
                                 layout=W.Layout(width="300px"))
        self.export_buttons = {
            k: W.Button(description=d, icon="download", layout=W.Layout(width="auto"))
            for k, d in (("csv", "table CSV"), ("plan", "plan A JSON"),
                         ("trace", "trace A (Perfetto)"), ("report", "HTML report"))}
        for k, b in self.export_buttons.items():
            b.add_class(f"wb-export-{k}")
            b.on_click(lambda _b, k=k: self._export_clicked(k))
        self.export_status = W.HTML()
        self.export_status.add_class("wb-export-status")
        self.run_button.on_click(lambda _b: self.run())
        self.gantt_a_picker.observe(lambda ch: self._show("a", ch["new"]), "value")
        self.gantt_b_picker.observe(lambda ch: self._show("b", ch["new"]), "value")
        controls = W.HBox([W.VBox([self.graph_picker, self.preset_picker, self.time_box]),
                           W.VBox([self.robust_check, self.noise_picker, self.batch_box]),
                           self.method_picker,
                           W.VBox([self.run_button, self.progress, self.status])])
        exports = W.HBox([self.export_dir, *self.export_buttons.values(), self.export_status])
        self.children = [W.HTML(FILL_CSS), CellFit(), controls, self.verdict_view,
                         self.table_view, self._bars_box, self.robust_view, self._robust_box,
                         self._gantt_box, self.diff_button, self.diff_view, self._diff_box,
                         exports]

    def _on_graph(self, change) -> None:
        """A hard-suite workload brings its own cluster preset along; an LLM training step
        moves to a GPU-node preset and ticks the strategy methods."""
        from workbench.solvers.hybrid import STRATEGY_METHODS
        from workbench.transforms.parallel import PRESET_GPUS
        from workbench.workloads import Workload

        src = self._graphs[change["new"]]
        if isinstance(src, Workload) and src.cluster in self.preset_picker.options:
            self.preset_picker.value = src.cluster
        if isinstance(src, str) and src.startswith(("gpt:", "llama:")):
            if self.preset_picker.value not in PRESET_GPUS:
                gpus = [p for p in self.preset_picker.options if p in PRESET_GPUS]
                if gpus:
                    self.preset_picker.value = gpus[0]
            self.method_picker.value = tuple(m for m in STRATEGY_METHODS
                                             if m in self.method_picker.options)

    def run(self, progress: Callable | None = None):
        """Compare the chosen methods; update table, bars and Gantts; return the table."""
        import workbench as wb

        methods = list(self.method_picker.value)
        if not methods:
            self.status.value = "<span style='color:#d62728'>no method chosen</span>"
            return None
        self.run_button.disabled = True
        self.run_button.icon = "spinner"
        self.run_button.description = "Running"
        try:
            self.graph, self.cluster = build_problem(self._graphs[self.graph_picker.value],
                                                     self.preset_picker.value)
            self.progress.max, self.progress.value = len(methods), 0
            self.status.value = f"running {_html.escape(methods[0])} ..."

            def tick(done, total, method):
                self.progress.value = done
                nxt = methods[done] if done < total else None
                self.status.value = (f"{_html.escape(method)} done; running "
                                     f"{_html.escape(nxt)} ..." if nxt
                                     else f"{total} methods done")
                if progress is not None:
                    progress(done, total, method)

            from workbench.compare_training import training_problem

            training = training_problem(self.graph, self.cluster) is not None
            cmp = wb.compare(self.graph, self.cluster, methods=methods,
                             time_limit=float(self.time_box.value), progress=tick,
                             global_batch=(int(self.batch_box.value) or None) if training
                             else None)
            robust, self._robust_error = None, ""
            if self.robust_check.value and cmp.plans and not training:
                self.status.value = "replaying the plans under cost noise ..."
                try:
                    robust = wb.robustness(cmp, noise=self.noise_picker.value, samples=200)
                except Exception as e:  # shown in the board; the comparison still stands
                    self._robust_error = f"robustness failed: {type(e).__name__}: {e}"
            self.show(cmp, robust=robust)
            return cmp.table
        finally:
            self.run_button.disabled = False
            self.run_button.icon = "play"
            self.run_button.description = "Run"

    def show(self, comparison, *, robust=None) -> None:
        """Draw ``comparison`` (what :func:`workbench.compare` returns, made here by
        :meth:`run` or elsewhere with any settings, e.g. ``order="fifo"``): its table, verdict,
        bars and its own schedules in the Gantt charts (nothing is simulated again, so they are
        those the table's numbers come from). ``robust``: its :func:`workbench.robustness`.

        >>> import workbench as wb
        >>> cmp = wb.compare(wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie"),
        ...                  methods=["single", "m_topo"], progress=False, congestion=False)
        >>> board = CompareBoard({"diamond": "diamond"}, methods=["single"])
        >>> board.show(cmp)
        >>> board.gantt_a.schedule is cmp.schedules["m_topo"]
        True
        """
        self.comparison, self.table, self.plans = comparison, comparison.table, comparison.plans
        self.schedules = comparison.schedules  # what the table measured: not re-simulated
        self.graph, self.cluster, self.robust = comparison.graph, comparison.cluster, robust
        self._draw()

    def _draw(self) -> None:
        df, cmp = self.table, self.comparison
        if is_training(cmp):
            return self._draw_training()
        self.table_view.value = results_table_html(cmp)
        self.verdict_view.value = verdict_html(cmp.verdict())
        # a new widget in the box, not an in-place swap of trace types: a swap made before
        # the board is displayed left some figures blank in JupyterLab
        self.bars = _figure_widget(compare_figure(
            cmp, title=f"{self.graph.name} on {self.cluster.name}", robust=self.robust),
            "wb-compare")
        self._bars_box.children = [self.bars]
        if any(p.stats.get("progress") for p in self.plans.values()):
            from .figures.progress import progress_figure

            self._robust_box.children = [_figure_widget(progress_figure(self.comparison),
                                                        "wb-progress")]
        else:
            self._robust_box.children = []
        if self.robust is not None:
            self.robust_view.value = robust_html(self.robust)
            self._robust_box.children = (_figure_widget(robust_figure(self.robust), "wb-robust"),
                                         *self._robust_box.children)
        else:
            self.robust_view.value = (f"<span style='color:#d62728'>"
                                      f"{_html.escape(self._robust_error)}</span>"
                                      if self._robust_error else "")
        ok = df[df["method"].isin(list(self.schedules))]
        ranked = ok.sort_values("makespan_ms", kind="stable")["method"].tolist()
        ga = ranked[0] if ranked else None
        gb = ranked[-1] if len(ranked) > 1 else ga
        self._muted = True
        try:
            for picker, value in ((self.gantt_a_picker, ga), (self.gantt_b_picker, gb)):
                picker.options = ranked
                picker.value = value
        finally:
            self._muted = False
        self._show("a", ga)
        self._show("b", gb)
        failed = df[df["status"] == "error"]
        msg = f"{len(df) - len(failed)} of {len(df)} methods ran"
        if len(failed):
            msg += ("; failed: " + ", ".join(f"{m} ({e})" for m, e in
                                             zip(failed["method"], failed["error"])))
        self.status.value = _html.escape(msg)  # op names and error texts are the user's

    _muted = False
    _robust_error = ""

    def _draw_training(self) -> None:
        """A training comparison: the strategies side by side, the breakdown of every row,
        and in slots A and B the pipeline Gantt and memory over time of the picked rows
        (default: the fastest and the slowest)."""
        cmp, df = self.comparison, self.table
        self.table_view.value = strategy_table_html(cmp) + "".join(
            f"<p class='note'>left out {_html.escape(m)}: {_html.escape(w)}</p>"
            for m, w in cmp.left_out.items())
        self.verdict_view.value = verdict_html(cmp.verdict())
        self.bars = _figure_widget(breakdown_figure(cmp) if cmp.training else
                                   _empty_figure("no strategy method ran"), "wb-compare")
        self._bars_box.children = [self.bars]
        self._robust_box.children = []
        self.robust_view.value = ("<span class='note'>robustness: not for training "
                                  "strategies yet</span>" if self.robust_check.value else "")
        ranked = ranked_methods(cmp) if cmp.training else []
        ga = ranked[0] if ranked else None
        gb = ranked[-1] if len(ranked) > 1 else ga
        self._muted = True
        try:
            for picker, value in ((self.gantt_a_picker, ga), (self.gantt_b_picker, gb)):
                picker.options = ranked
                picker.value = value
        finally:
            self._muted = False
        self._show("a", ga)
        self._show("b", gb)
        bad = int((~df["feasible"].astype(bool)).sum()) if len(df) else 0
        self.status.value = _html.escape(
            f"{len(df)} strategies judged ({bad} out of memory)"
            + (f"; left out: {', '.join(cmp.left_out)}" if cmp.left_out else ""))

    def _show(self, which: str, method) -> None:
        training = self.comparison.training if self.comparison is not None else {}
        if not self._muted and method in training:
            view = self.gantt_a if which == "a" else self.gantt_b
            shown = [v for v in (self.gantt_a_picker.value, self.gantt_b_picker.value, method)
                     if v in training]
            xmax = max(training[m].step_ms for m in shown)
            view.show_training(self.comparison, method, xmax=xmax)
            other = self.gantt_b if which == "a" else self.gantt_a
            if other.method in training and other.xmax != xmax:
                other.show_training(self.comparison, other.method, xmax=xmax)
            return
        if self._muted or method is None or method not in self.schedules:
            return
        view = self.gantt_a if which == "a" else self.gantt_b
        shown = [v for v in (self.gantt_a_picker.value, self.gantt_b_picker.value, method)
                 if v in self.schedules]
        xmax = max(float(self.schedules[m].makespan) for m in shown)
        view.show(self.schedules[method], xmax=xmax)
        other = self.gantt_b if which == "a" else self.gantt_a
        if other.xmax is not None and other.xmax != xmax and other.schedule is not None:
            other.show(other.schedule, xmax=xmax)  # keep one time axis for both

    def show_diff(self, a: str | None = None, b: str | None = None):
        """Explain plan ``a`` against plan ``b`` (default: Gantt A's and B's methods) with
        :func:`workbench.diff`: moves, busy time, link bytes and critical paths in words, both
        Gantt charts on one axis with the moved ops outlined, and B's DAG (up to 2,000 ops) with
        them ringed. Returns the ``PlanDiff``."""
        import workbench as wb

        from .figures.diff import diff_dag_figure, diff_figure, diff_html

        a, b = self._method(a), self._method(b or self.gantt_b_picker.value)
        cmp = self.comparison  # the diff judges both plans as the comparison did
        if is_training(cmp):  # two judged strategies: fields, step parts, peak memory
            from workbench.diff import training_diff

            d = training_diff(cmp.training[a], cmp.training[b])
            self.diff_view.value = (f"<b>{_html.escape(a)}</b> (a) against "
                                    f"<b>{_html.escape(b)}</b> (b)"
                                    + d.to_html(classes="results", float_format="{:.4g}".format))
            self._diff_box.children = [_figure_widget(breakdown_figure(cmp, [a, b]),
                                                      "wb-diff-breakdown")]
            return d
        sched = cmp.schedules
        d = wb.diff(self.plans[a], self.plans[b], self.cluster, names=(a, b),
                    congestion=cmp.congestion, order=cmp.order,
                    schedules=(sched[a], sched[b]) if a in sched and b in sched else None)
        self.diff_view.value = diff_html(d)
        figs = [_figure_widget(diff_figure(d), "wb-diff-gantt")]
        if self.plans[b].graph.n_ops <= 2000:  # B's DAG, moved ops ringed (light enough)
            figs.append(_figure_widget(diff_dag_figure(d, self.plans[b], self.cluster),
                                       "wb-diff-dag"))
        self._diff_box.children = figs
        return d

    # ------------------------------------------------------------ exports
    def _out(self, name: str) -> Path:
        return Path(self.export_dir.value or ".") / name

    def export_csv(self, path=None) -> Path:
        """Write the table as CSV (all columns); returns the path."""
        from workbench.io import write_atomic

        self._need_run()
        path = Path(path) if path else self._out(f"{self._stem()}.csv")
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, self.table.to_csv(index=False))
        return path

    def export_plan(self, method: str | None = None, path=None) -> Path:
        """Write a plan (default: Gantt A's) as the workbench's plan JSON, graph embedded."""
        from workbench.io import save_plan

        m = self._method(method)
        path = Path(path) if path else self._out(f"{self._stem()}-{m}.plan.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        save_plan(self.plans[m], path, embed_graph=True)
        return path

    def export_trace(self, method: str | None = None, path=None) -> Path:
        """Write a schedule (default: Gantt A's) as Chrome-trace/Perfetto JSON."""
        from workbench.io import save_chrome_trace

        m = self._method(method)
        if m not in self.schedules:
            raise ValueError(f"{m} has no op-level schedule to trace (a training strategy: "
                             f"its pipeline Gantt is in the board and the HTML report)")
        path = Path(path) if path else self._out(f"{self._stem()}-{m}.trace.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        save_chrome_trace(self.schedules[m], path)
        return path

    def export_report(self, path=None) -> Path:
        """Write the self-contained HTML report of the last run."""
        from .report import write_report

        self._need_run()
        path = Path(path) if path else self._out(f"{self._stem()}.html")
        return write_report(path, self.graph, self.cluster, self.comparison,
                            title=f"{self.graph.name} on {self.cluster.name}",
                            robust=self.robust)

    def _stem(self) -> str:
        import re

        return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{self.graph.name}-{self.cluster.name}")

    def _need_run(self) -> None:
        if self.table is None:
            raise ValueError("nothing to export: run a comparison first")

    def _method(self, method) -> str:
        self._need_run()
        m = method or self.gantt_a_picker.value
        if m not in self.plans:
            raise ValueError(f"no plan for method {m!r}; plans: {', '.join(self.plans)}")
        return m

    def _export_clicked(self, what: str) -> None:
        fn = {"csv": self.export_csv, "plan": self.export_plan, "trace": self.export_trace,
              "report": self.export_report}[what]
        self.export_status.value = "&#8987; writing ..."
        try:
            p = fn()
        except Exception as e:  # shown in the board, not raised into the widget callback
            self.export_status.value = (f"<span style='color:#d62728'>"
                                        f"{_html.escape(str(e))}</span>")
            return
        self.export_status.value = f"wrote <code>{_html.escape(str(p))}</code>"


class _EmptyGantt:
    """A Gantt slot that becomes a real :class:`GanttView` figure on first use, with the
    plan's memory over time under it (live, static sum and capacity per device).

    Until then it holds a line of HTML, not an empty ``FigureWidget``: each ``FigureWidget``
    ships plotly.js (5 MB) to the browser, which compiles it again for every instance
    (0.3-0.7 s of the browser's CPU), shown or not. A new pick redraws both figures in place.

    >>> slot = _EmptyGantt("wb-gantt-a")
    >>> slot.figure is None and "run a comparison first" in slot.box.children[0].value
    True
    """

    def __init__(self, dom_class: str):
        self._classes = ("wb-gantt", dom_class)
        self.figure = None
        self.memory = None
        self.box = W.VBox([W.HTML(_EMPTY_GANTT)], layout=W.Layout(width="100%"))
        self.schedule = None
        self.xmax = None
        self.method = None

    def show_training(self, cmp, method: str, xmax: float | None = None) -> None:
        """The pipeline Gantt and memory over time of ``method``'s judged strategy in a
        training comparison (:func:`widgets.strategies.row_figures`), on ``xmax`` ms."""
        self.schedule, self.xmax, self.method = None, xmax, method
        gantt, mem = row_figures(cmp, method)
        for f in (gantt, mem):
            if xmax is not None:
                f.update_xaxes(range=[0, xmax * 1.01])
        self.figure = _figure_widget(gantt, *self._classes, "wb-training-gantt")
        self.memory = _figure_widget(mem, "wb-memory", "wb-training-memory")
        self.box.children = [self.figure, self.memory]

    def show(self, schedule, xmax: float | None = None) -> None:
        self.schedule, self.xmax, self.method = schedule, xmax, None
        new = gantt_figure(schedule, height=None, xmax=xmax)
        if _shows(self.figure, "gantt"):
            replace_figure(self.figure, new)  # same trace types: updated in place
        else:
            self.figure = _figure_widget(new, *self._classes)
        mem = memory_figure(schedule, xmax=xmax)
        if (_shows(self.memory, "memory") and "wb-training-memory" not in self.memory._dom_classes
                and [t.type for t in self.memory.data] == [t.type for t in mem.data]):
            # the same devices (one trace each): redrawn in place
            replace_figure(self.memory, mem)
        else:
            self.memory = _figure_widget(mem, "wb-memory")
        self.box.children = [self.figure, self.memory]


_EMPTY_GANTT = ("<div style='height:260px;padding:10px 12px;color:#2a3f5f;font-size:17px'>"
                "Gantt: run a comparison first</div>")


def _shows(fw, figure: str) -> bool:
    """Whether ``fw`` is a FigureWidget drawing a ``figure`` (its ``layout.meta``)."""
    return fw is not None and bool(fw.layout.meta) and fw.layout.meta.get("figure") == figure


def _figure_widget(fig, *classes) -> go.FigureWidget:
    fw = fill(FigureWidget(fig))
    for c in classes:
        fw.add_class(c)
    return fw
