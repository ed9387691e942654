"""The comparison board: choose a graph, a cluster preset, methods and a time limit, run them
(with a progress bar) through :func:`workbench.compare`, and see the table, the comparison bars
and the Gantt charts of any two methods side by side.

The board runs nothing by itself except through the public API (``workbench.compare``, which
solves and simulates); every figure is a view of what it returns.

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
"""

from __future__ import annotations

from typing import Callable

import ipywidgets as W
import plotly.graph_objects as go

from .figures.compare import compare_figure
from .figures.gantt import gantt_figure
from .views import replace_figure

__all__ = ["CompareBoard", "default_graphs", "QUICK_METHODS"]

QUICK_METHODS = ("single", "round_robin", "m_topo", "heft", "dpos", "m_etf", "celeritas",
                 "pesto", "dp")
"""Methods ticked by default when they are registered (quick on the default graphs)."""


def default_graphs() -> dict:
    """Name -> zero-argument factory of the bundled graphs offered by the board."""
    from workbench import samples

    return {
        "transformer (200 ops)": lambda: samples.transformer(200, seed=0),
        "inception (200 ops)": lambda: samples.inception(200, seed=0),
        "cnn (150 ops)": lambda: samples.cnn(150, seed=0),
        "lstm grid (200 ops)": lambda: samples.lstm_grid(200, seed=0),
        "transformer training (2 x 150 ops)": lambda: samples.to_training(
            samples.transformer(150, seed=0)),
        "pesto fig. 2 (7 ops)": samples.pesto_fig2,
        "diamond (4 ops)": samples.diamond,
    }


def _empty_figure(text: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=dict(text=text, x=0.01), template="plotly_white", height=260,
                      xaxis=dict(visible=False), yaxis=dict(visible=False),
                      meta={"figure": "empty"})
    return fig


class CompareBoard(W.VBox):
    """Side-by-side comparison of placement methods.

    Parameters
    ----------
    graphs : dict, optional
        Name -> OpGraph or zero-argument factory (default :func:`default_graphs`).
    presets : list of str, optional
        Cluster presets offered (default: all of :data:`workbench.cluster.PRESETS`).
    methods : list of str, optional
        Methods ticked at start (default: the registered ones of :data:`QUICK_METHODS`).
    time_limit : float
        Seconds per method.
    preset : str
        Initial cluster preset.

    Attributes
    ----------
    table : pandas.DataFrame or None
        The last result of :func:`workbench.compare`.
    plans, schedules : dict
        Method -> Plan / simulated Schedule of the last run.
    """

    def __init__(self, graphs: dict | None = None, *, presets: list | None = None,
                 methods: list | None = None, time_limit: float = 10.0,
                 preset: str = "4xV100-nvlink"):
        super().__init__()
        import workbench as wb
        from workbench.cluster import PRESETS

        self._graphs = dict(graphs or default_graphs())
        presets = list(presets or PRESETS)
        avail = [m for m, info in wb.SOLVERS.items() if not info.needs]
        if methods is None:
            methods = [m for m in QUICK_METHODS if m in avail]
        else:
            unknown = [m for m in methods if m not in wb.SOLVERS]
            if unknown:
                raise ValueError(f"unknown methods {', '.join(unknown)}; registered: "
                                 f"{', '.join(wb.SOLVERS)}")
        self.table = None
        self.plans: dict = {}
        self.schedules: dict = {}
        self.graph = None
        self.cluster = None
        lay = W.Layout(width="330px")
        self.graph_picker = W.Dropdown(options=list(self._graphs), description="graph",
                                       layout=lay)
        self.preset_picker = W.Dropdown(options=presets, description="cluster", layout=lay,
                                        value=preset if preset in presets else presets[0])
        self.method_picker = W.SelectMultiple(options=avail, value=tuple(methods),
                                              description="methods", rows=min(8, len(avail)),
                                              layout=W.Layout(width="330px"))
        self.time_box = W.BoundedFloatText(value=time_limit, min=0.1, max=3600, step=1,
                                           description="time limit (s)",
                                           style={"description_width": "initial"},
                                           layout=W.Layout(width="200px"))
        self.run_button = W.Button(description="Run", button_style="primary", icon="play")
        self.run_button.add_class("wb-run")
        self.progress = W.IntProgress(value=0, min=0, max=1, description="",
                                      layout=W.Layout(width="260px"))
        self.status = W.HTML("choose methods and press <b>Run</b>")
        self.status.add_class("wb-status")
        self.table_view = W.HTML()
        self.bars = go.FigureWidget(_empty_figure("press Run to compare"))
        self.bars.add_class("wb-compare")
        self.gantt_a_picker = W.Dropdown(options=[], description="Gantt A")
        self.gantt_b_picker = W.Dropdown(options=[], description="Gantt B")
        self.gantt_a_picker.add_class("wb-gantt-a-picker")
        self.gantt_b_picker.add_class("wb-gantt-b-picker")
        self.gantt_a = _EmptyGantt("wb-gantt-a")
        self.gantt_b = _EmptyGantt("wb-gantt-b")
        self._gantt_box = W.HBox([W.VBox([self.gantt_a_picker, self.gantt_a.figure],
                                         layout=W.Layout(width="50%")),
                                  W.VBox([self.gantt_b_picker, self.gantt_b.figure],
                                         layout=W.Layout(width="50%"))])
        self.run_button.on_click(lambda _b: self.run())
        self.gantt_a_picker.observe(lambda ch: self._show("a", ch["new"]), "value")
        self.gantt_b_picker.observe(lambda ch: self._show("b", ch["new"]), "value")
        controls = W.HBox([W.VBox([self.graph_picker, self.preset_picker, self.time_box]),
                           self.method_picker,
                           W.VBox([self.run_button, self.progress, self.status])])
        self.children = [controls, self.table_view, self.bars, self._gantt_box]

    def _make_graph(self):
        g = self._graphs[self.graph_picker.value]
        return g() if callable(g) else g

    def run(self, progress: Callable | None = None):
        """Compare the chosen methods; update table, bars and Gantts; return the table."""
        import workbench as wb

        methods = list(self.method_picker.value)
        if not methods:
            self.status.value = "<span style='color:#d62728'>no method chosen</span>"
            return None
        self.run_button.disabled = True
        try:
            self.graph = self._make_graph()
            self.cluster = wb.Cluster.preset(self.preset_picker.value)
            self.progress.max, self.progress.value = len(methods), 0
            self.status.value = f"running {methods[0]} ..."

            def tick(done, total, method):
                self.progress.value = done
                nxt = methods[done] if done < total else None
                self.status.value = (f"{method} done; running {nxt} ..." if nxt
                                     else f"{total} methods done")
                if progress is not None:
                    progress(done, total, method)

            df, plans = wb.compare(self.graph, self.cluster, methods=methods,
                                   time_limit=float(self.time_box.value), progress=tick,
                                   return_plans=True)
            self.table, self.plans = df, plans
            self.schedules = {m: wb.simulate(p, self.cluster) for m, p in plans.items()}
            self._draw()
            return df
        finally:
            self.run_button.disabled = False

    def _draw(self) -> None:
        df = self.table
        cols = [c for c in ("method", "status", "makespan_ms", "max_load_ms", "makespan_gap",
                            "max_load_gap", "comm_ms", "peak_mem_frac", "devices_used",
                            "solve_s", "error") if c in df]
        self.table_view.value = df[cols].to_html(index=False, border=0, na_rep="",
                                                 float_format=lambda x: f"{x:.4g}")
        replace_figure(self.bars, compare_figure(
            df, title=f"{self.graph.name} on {self.cluster.name}"))
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
        self.status.value = msg

    _muted = False

    def _show(self, which: str, method) -> None:
        if self._muted or method is None or method not in self.schedules:
            return
        view = self.gantt_a if which == "a" else self.gantt_b
        view.show(self.schedules[method])


class _EmptyGantt:
    """A Gantt slot that becomes a real :class:`GanttView` figure on first use."""

    def __init__(self, dom_class: str):
        self.figure = go.FigureWidget(_empty_figure("Gantt: run a comparison first"))
        self.figure.add_class("wb-gantt")
        self.figure.add_class(dom_class)

    def show(self, schedule) -> None:
        replace_figure(self.figure, gantt_figure(schedule, height=None))
