"""ipywidgets compositions without a browser: in-place updates, linked selection, the board."""

from __future__ import annotations

import types

import pandas as pd
import pytest

import workbench as wb
from widgets import (CoarsenView, CompareBoard, DagView, GanttView, PipelineView,
                     link_selection)
from widgets.figures import memory_figure
from widgets.figures._common import device_colors
from widgets.fit import CellFit
from widgets.views import replace_figure


def _trace(fig, name):
    return next(t for t in fig.data if t.name == name)


@pytest.fixture(scope="module")
def problem():
    g = wb.samples.transformer(80, seed=0)
    c = wb.Cluster.preset("4xV100-nvlink")
    plan = wb.solve(g, c, method="m_topo")
    return g, c, plan, wb.simulate(plan, c)


def test_dag_view_recolours_in_place(problem):
    g, c, plan, _ = problem
    view = DagView(g, cluster=c, plan=plan)
    fw = view.figure
    ops = _trace(fw, "ops")
    assert list(ops.marker.color) == [device_colors(c.names)[plan.placement[v]] for v in g.ops]
    view.color_picker.value = "op_type"
    assert view.figure is fw and _trace(fw, "ops") is ops  # same widget, same trace object
    types_ = [g.op(v)["op_type"] for v in g.ops]
    cols = list(ops.marker.color)
    assert len(set(cols)) == len(set(types_))
    assert fw.layout.meta["color_by"] == "op_type"
    assert {t.name for t in fw.data if t.legendgroup == "colors"} == set(types_)
    assert fw.layout.title.text.endswith("coloured by op type")  # the title follows
    view.color_picker.value = "kind"
    assert fw.layout.title.text.endswith("coloured by op kind")


def test_linked_selection_both_ways(problem):
    g, c, plan, s = problem
    dag, gantt = DagView(g, cluster=c, plan=plan), GanttView(s)
    link = link_selection(dag, gantt)
    op = s.critical_ops()[2]
    dag.selected = op
    assert gantt.selected == op
    sel = _trace(gantt.figure, "selected")
    assert list(sel.customdata) == [op]
    assert float(sel.base[0]) == pytest.approx(s.start[g.index[op]])
    # a click on a Gantt bar selects in both views
    bars = _trace(gantt.figure, "fwd ops")
    gantt._on_click(bars, types.SimpleNamespace(point_inds=[4]), None)
    assert dag.selected == bars.customdata[4]
    assert list(_trace(dag.figure, "selected").customdata) == [bars.customdata[4]]
    assert dag.op_box.value == bars.customdata[4]
    # a click on a DAG node
    dag._on_click(None, types.SimpleNamespace(point_inds=[7]), None)
    assert gantt.selected == g.ops[7]
    link.unlink()
    dag.selected = g.ops[1]
    assert gantt.selected == g.ops[7]
    gantt.idle_box.value = False
    assert _trace(gantt.figure, "idle").visible is False
    # the critical-path outline lies on top of its bars: a click on it selects the op
    crit = _trace(gantt.figure, "critical path")
    k = next(i for i, v in enumerate(crit.customdata) if v in g.index)
    gantt._on_click(crit, types.SimpleNamespace(point_inds=[k]), None)
    assert gantt.selected == crit.customdata[k]


def test_gantt_view_show_redraws_in_place(problem):
    g, c, plan, s = problem
    view = GanttView(s)
    fw = view.figure
    other = wb.simulate(wb.solve(g, c, method="round_robin"), c)
    view.show(other)
    assert view.figure is fw
    assert fw.layout.meta["makespan"] == pytest.approx(other.makespan)


def test_coarsen_view_slider_redraws_in_place(problem):
    g, c, plan, _ = problem
    calls = []

    def chunks(graph, target):
        calls.append(target)
        size = -(-graph.n_ops // target)
        return {v: i // size for i, v in enumerate(graph.ops)}

    view = CoarsenView(g, cluster=c, plan=plan, coarsen=chunks, target=10)
    fw = view.figure
    first = [id(t) for t in fw.data]
    assert len(_trace(fw, "clusters").x) == 10
    view.slider.value = 20
    assert calls == [10, 20]
    assert view.figure is fw and [id(t) for t in fw.data] == first  # traces updated, not new
    assert len(_trace(fw, "clusters").x) == 20
    assert "20</b> clusters" in view.info.value
    view._on_click(_trace(fw, "clusters"), types.SimpleNamespace(point_inds=[3]), None)
    assert view.selected_cluster == "3"
    assert fw.layout.meta["selected"] == "3"


def test_coarsen_view_with_the_pesto_coarsening(problem):
    pytest.importorskip("workbench.transforms.coarsen")
    g, c, plan, _ = problem
    view = CoarsenView(g, cluster=c, target=12)
    assert len(_trace(view.figure, "clusters").x) <= 12
    assert view.result.coarse.n_ops == len(_trace(view.figure, "clusters").x)


def test_pipeline_view_switches_plans(problem):
    g, c, plan, _ = problem
    plans = {"m_topo": plan, "round_robin": wb.solve(g, c, method="round_robin")}
    view = PipelineView(plans, c)
    fw = view.figure
    assert fw.layout.meta["method"] == "m_topo"
    view.picker.value = "round_robin"
    assert view.figure is fw and fw.layout.meta["method"] == "round_robin"
    assert "gpu3" in view.table.value
    with pytest.raises(ValueError):
        PipelineView({}, c)


def test_replace_figure_swaps_when_trace_types_differ(problem):
    import plotly.graph_objects as go

    fw = go.FigureWidget(go.Figure(go.Scatter(x=[1], y=[2], name="a")))
    replace_figure(fw, go.Figure([go.Bar(x=[1], y=[2], name="b"), go.Bar(x=[1], y=[3])]))
    assert [t.type for t in fw.data] == ["bar", "bar"]


def test_compare_board_runs_and_switches_gantts():
    graphs = {"transformer": lambda: wb.samples.transformer(60, seed=0),
              "diamond": wb.samples.diamond()}
    board = CompareBoard(graphs, presets=["2xV100-pcie", "4xV100-nvlink"],
                         methods=["single", "round_robin", "m_topo"], time_limit=5,
                         preset="4xV100-nvlink")
    seen = []
    df = board.run(progress=lambda done, total, m: seen.append((done, total, m)))
    assert seen == [(1, 3, "single"), (2, 3, "round_robin"), (3, 3, "m_topo")]
    assert board.progress.value == board.progress.max == 3
    assert df["method"].tolist() == ["single", "round_robin", "m_topo"]
    assert "3 of 3 methods ran" in board.status.value
    assert "<table" in board.table_view.value
    assert board.bars.layout.meta["figure"] == "compare"
    assert list(_trace(board.bars, "makespan").y) == df.sort_values(
        "makespan_ms", kind="stable")["method"].tolist()
    best = df.sort_values("makespan_ms").iloc[0]["method"]
    assert f"{best} wins makespan" in board.verdict_view.value
    assert "critical path" in board.verdict_view.value
    # the table uses the figures' colours and is sorted by makespan
    from widgets.figures import method_color

    html = board.table_view.value
    assert method_color(best) in html and html.index(best) < html.index(
        df.sort_values("makespan_ms").iloc[-1]["method"])
    assert board.gantt_a.figure.layout.meta["method"] == best
    board.gantt_b_picker.value = "single"
    assert board.gantt_b.figure.layout.meta["method"] == "single"
    assert board.gantt_b.figure.layout.meta["makespan"] == pytest.approx(
        df.set_index("method").loc["single", "makespan_ms"])
    # both Gantts on one time axis, that of the slower plan
    slow = max(board.schedules[m].makespan for m in (best, "single"))
    for fw in (board.gantt_a.figure, board.gantt_b.figure):
        assert fw.layout.xaxis.range[1] == pytest.approx(slow * 1.02)
    # a pick redraws Gantt and memory in place (each new FigureWidget ships plotly.js again):
    # m_topo -> round_robin, both on the 4 GPUs (the same memory traces)
    fig_a, mem_a = board.gantt_a.figure, board.gantt_a.memory
    board.gantt_a_picker.value = "round_robin"
    assert board.gantt_a.figure is fig_a and board.gantt_a.memory is mem_a
    assert board.gantt_a.box.children == (fig_a, mem_a)
    fresh = memory_figure(board.schedules["round_robin"], xmax=board.gantt_a.xmax)
    assert mem_a.layout.meta["method"] == "round_robin" and fresh.data
    assert [(t.name, list(t.x), list(t.y)) for t in mem_a.data] == [
        (t.name, list(t.x), list(t.y)) for t in fresh.data]
    # another graph and cluster
    board.graph_picker.value = "diamond"
    board.preset_picker.value = "2xV100-pcie"
    board.method_picker.value = ("single",)
    df2 = board.run()
    assert board.graph.name == "diamond" and len(df2) == 1
    assert board.gantt_b.figure.layout.meta["method"] == "single"
    board.method_picker.value = ()
    assert board.run() is None and "no method" in board.status.value
    with pytest.raises(ValueError, match="run a comparison first"):
        CompareBoard(graphs).export_csv()


def test_default_board_opens_on_a_hard_pair_with_methods_that_serve_it():
    from widgets.board import build_problem
    from workbench.compare import default_methods

    board = CompareBoard(time_limit=1)
    assert board.graph_picker.value == "layered300-4xV100 (hard suite)"
    assert board.preset_picker.value == "4xV100-nvlink"
    ticked = board.method_picker.value
    # dp refuses direct links between 4 GPUs; single cannot hold the memory-capped model
    assert len(ticked) >= 5 and "dp" not in ticked and "single" not in ticked
    assert all(wb.SOLVERS[m].objective == "makespan" for m in ticked)
    df = board.run()
    assert (df["status"] != "error").all() and "failed" not in board.status.value
    assert df["makespan_ms"].max() > 1.5 * df["makespan_ms"].min()  # the methods differ
    # the workload's memory pressure came with it: no device holds the whole model
    assert max(d.memory for d in board.cluster.devices) < board.graph.total_memory()
    # a workload brings its preset along; the core says which methods suit the pair
    board.graph_picker.value = "layered300-2xV100 (hard suite)"
    assert board.preset_picker.value == "2xV100-pcie"
    g, c = build_problem(board._graphs[board.graph_picker.value], board.preset_picker.value)
    assert c.name == "2xV100-pcie" and max(d.memory for d in c.devices) < g.total_memory()
    assert default_methods(g, c, candidates=["single", "dp", "dpl", "heft"],
                           objective="max_load") == ["dp", "dpl"]
    assert default_methods(g, c, candidates=["nope", "expert", "heft", "single"]) == ["heft"]


def test_compare_board_exports(tmp_path):
    import json

    board = CompareBoard({"t": lambda: wb.samples.transformer(40, seed=0)},
                         presets=["2xV100-pcie"], methods=["single", "m_topo"], time_limit=5)
    df = board.run()
    board.export_dir.value = str(tmp_path)
    csv = board.export_csv()
    assert pd.read_csv(csv)["method"].tolist() == df["method"].tolist()
    plan = wb.io.load_plan(board.export_plan("m_topo"))
    assert plan.placement == board.plans["m_topo"].placement
    trace = json.loads(board.export_trace("m_topo").read_text())
    assert len([e for e in trace["traceEvents"] if e.get("ph") == "X"]) >= 40
    board._export_clicked("report")
    assert "wrote" in board.export_status.value
    assert (tmp_path / "transformer-2xV100-pcie.html").exists() or list(tmp_path.glob("*.html"))
    with pytest.raises(ValueError, match="no plan for method"):
        board.export_plan("dpos")
    with pytest.raises(ValueError, match="unknown methods"):
        CompareBoard(methods=["nope"])


def test_whatif_panel_resolves_on_every_slider_and_sweeps():
    from widgets import WhatIfPanel

    g = wb.samples.inception(60, seed=0)
    panel = WhatIfPanel(g, wb.Cluster.preset("2xV100-pcie"), methods=["m_topo", "heft"])
    assert panel.cluster.link("gpu0", "gpu1").bandwidth == pytest.approx(10e6)
    before = panel.table.set_index("method")["makespan_ms"]
    panel.bandwidth.value = 0.1  # a 100x slower link
    after = panel.table.set_index("method")["makespan_ms"]
    assert panel.cluster.link("gpu0", "gpu1").bandwidth == pytest.approx(0.1e6, rel=1e-6)
    assert (after >= before - 1e-9).all() and (after > before).any()
    panel.devices.value = 4
    assert panel.gantts.layout.meta["figure"] == "gantt_multiples"
    assert len(panel.schedules["heft"].cluster.names) == 4
    four = panel.table.set_index("method")["makespan_ms"]
    panel.speed.value = 2.0
    faster = panel.table.set_index("method")["makespan_ms"]
    assert faster["heft"] < four["heft"]
    frac = panel.table["peak_mem_frac"].max()
    panel.memory.value = 0.01  # about 10 MiB per device
    assert panel.cluster.devices[0].memory == pytest.approx(0.01 * 2**30)
    assert panel.table["peak_mem_frac"].max() > 100 * frac
    assert "solved in" in panel.status.value
    panel.memory.value = 16
    df = panel.sweep("bandwidth", values=[0.5, 5, 50])
    assert set(df["bandwidth"]) == {0.5, 5, 50} and set(df["method"]) == {"m_topo", "heft"}
    fig = panel.sweep_figure
    assert [t.name for t in fig.data] == ["m_topo", "heft"] and fig.layout.xaxis.type == "log"
    heft = df[df["method"] == "heft"].sort_values("bandwidth")["makespan_ms"].to_numpy()
    assert heft[0] >= heft[-1]  # slower links never help here
    with pytest.raises(ValueError, match="unknown sweep"):
        panel.sweep("colour")
    with pytest.raises(ValueError, match="unknown methods"):
        WhatIfPanel(g, methods=["nope"])


def test_figure_widgets_fill_their_cell(problem):
    g, c, plan, s = problem
    views = [DagView(g, cluster=c, plan=plan), GanttView(s),
             CoarsenView(g, cluster=c, coarsen=lambda gg, t: {v: i % t for i, v in
                                                             enumerate(gg.ops)})]
    for view in views:
        fw = view.figure
        assert fw._config.get("responsive") is True and "wb-fill" in fw._dom_classes
        # the invisible CellFit refits figures drawn before their box reached the page
        assert sum(isinstance(ch, CellFit) for ch in view.children) == 1
    board = CompareBoard(graphs={"g": g}, methods=["single"])
    assert isinstance(board.children[1], CellFit)
    assert "wb-fill" in board.bars._dom_classes


def test_heatmap_and_cluster_views_drill_down_on_click():
    from plotly.callbacks import Points

    from widgets import ClusterView, HeatmapView
    from widgets.figures import heatmap_ops

    g, c = wb.samples.lstm_grid(600, layers=3, seed=0), wb.Cluster.preset("4xV100-nvlink")
    plans = {m: wb.solve(g, c, method=m) for m in ("m_topo", "round_robin")}
    view = HeatmapView(g, plans, c, bins=30)
    assert view.detail.layout.meta["figure"] == "slice"  # opens on the heaviest cell
    assert "wb-heatmap" in view.figure._dom_classes and "wb-slice" in view.detail._dom_classes
    # a click on round_robin's panel, bin 7, gpu2: that slice op by op, gpu2's ops ringed
    tr = next(t for t in view.figure.data if t.name == "round_robin")
    x7 = list(tr.x)[7]
    tr._dispatch_on_click(Points(point_inds=[[2, 7]], xs=[x7], ys=["gpu2"],
                                 trace_name="round_robin", trace_index=1), None)
    assert view.cell == ("round_robin", 7, "gpu2")
    ops = heatmap_ops(g, 7, bins=30)
    on2 = [v for v in ops if plans["round_robin"].placement[v] == "gpu2"]
    names = [v for t in view.detail.data if t.name == "ops" for v in t.customdata]
    ringed = [v for t in view.detail.data if t.name == "selected" for v in t.customdata]
    assert sorted(names) == sorted(ops) and sorted(ringed) == sorted(on2) and on2
    assert "round_robin" in view.info.value and "gpu2" in view.info.value
    with pytest.raises(Exception, match="no device"):
        view.cell = ("m_topo", 0, "tpu9")
    # the fused-cluster view: a click on a cluster draws its member ops
    mapping = {v: i // 40 for i, v in enumerate(g.ops)}
    cv = ClusterView(g, mapping, plan=plans["m_topo"], cluster=c)
    trace = next(t for t in cv.figure.data if t.name == "clusters")
    k = list(trace.customdata).index("5")
    trace._dispatch_on_click(Points(point_inds=[k], xs=[0], ys=[0], trace_name="clusters",
                                    trace_index=1), None)
    assert cv.selected_cluster == "5" and cv.figure.layout.meta["selected"] == "5"
    members = next(t for t in cv.figure.data if t.name == "members")
    assert list(members.customdata) == g.ops[200:240]


# ------------------------------------------- views draw the comparison, the board runs nothing
def _forbid(monkeypatch, *, solvers: bool = False):
    """Make re-simulating a plan (and, with ``solvers``, running any solver) raise in views;
    ``workbench.compare`` keeps its own bindings, so comparisons can still be made."""
    import sys

    def boom(*a, **k):
        raise AssertionError("a view simulated or solved")

    monkeypatch.setattr(sys.modules["workbench.simulate"], "simulate", boom)
    monkeypatch.setattr(wb, "simulate", boom)
    if solvers:
        import workbench.solvers
        import workbench.solvers.registry

        for mod in (workbench.solvers.registry, workbench.solvers, wb):
            monkeypatch.setattr(mod, "solve", boom)


def test_compare_board_constructs_without_running_anything(monkeypatch):
    from widgets.board import QUICK_METHODS

    _forbid(monkeypatch, solvers=True)
    board = CompareBoard(time_limit=1)  # the default, memory-capped hard pair
    ticked = board.method_picker.value
    assert set(ticked) <= set(QUICK_METHODS) and "single" not in ticked and "dp" not in ticked
    assert all(wb.SOLVERS[m].objective == "makespan" for m in ticked)
    small = CompareBoard({"t": "transformer:60"}, presets=["2xV100-pcie"])
    assert "single" in small.method_picker.value  # one device holds this one
    assert small.table is None and small.comparison is None


def test_board_and_report_draw_exactly_the_comparisons_schedules(monkeypatch, tmp_path):
    import widgets.figures
    from widgets.report import write_report
    from workbench.workloads import resolve

    g, c = resolve("transformer:60")[0], wb.Cluster.preset("2xV100-pcie")
    cmp = wb.compare(g, c, methods=["heft", "dpos", "m_topo"], progress=False, order="fifo",
                     congestion=False, time_limit=5)
    default = {m: wb.simulate(p, c).makespan for m, p in cmp.plans.items()}
    assert any(abs(default[m] - cmp.schedules[m].makespan) > 1e-6 for m in default)
    _forbid(monkeypatch)
    board = CompareBoard({"t": "transformer:60"}, presets=["2xV100-pcie"], methods=["heft"])
    board.show(cmp)
    for which, picker in (("a", board.gantt_a_picker), ("b", board.gantt_b_picker)):
        for m in cmp.schedules:
            picker.value = m
            view = board.gantt_a if which == "a" else board.gantt_b
            assert view.schedule is cmp.schedules[m]
            assert view.figure.layout.meta["makespan"] == pytest.approx(
                cmp.schedules[m].makespan)
    assert board.schedules is cmp.schedules and board.table is cmp.table
    assert "wins makespan" in board.verdict_view.value
    drawn = {}
    real = widgets.figures.gantt_multiples

    def spy(schedules, **kw):
        drawn.update(schedules)
        return real(schedules, **kw)

    monkeypatch.setattr(widgets.figures, "gantt_multiples", spy)
    out = write_report(tmp_path / "r.html", g, c, cmp, title="fifo, no congestion")
    assert drawn and all(drawn[m] is cmp.schedules[m] for m in cmp.schedules)
    html = out.read_text()
    assert "Verdict" in html and "judged with order fifo, congestion off" in html
    board.export_dir.value = str(tmp_path)
    assert board.export_report().exists()  # the board's report: the same schedules


def test_board_run_and_whatif_do_not_simulate_again(monkeypatch):
    from widgets import WhatIfPanel

    _forbid(monkeypatch)
    board = CompareBoard({"t": "transformer:40", "msr": "msr:op_bert3_inference"},
                         presets=["2xV100-pcie"], methods=["m_topo", "heft"], time_limit=5)
    board.robust_check.value = False
    df = board.run()
    assert df["method"].tolist() == ["m_topo", "heft"] and board.graph.n_ops == 40
    assert board.gantt_a.schedule is board.comparison.schedules[board.gantt_a_picker.value]
    d = board.show_diff("m_topo", "heft")  # the diff too draws the comparison's schedules
    assert d.schedule_a is board.comparison.schedules["m_topo"]
    board.graph_picker.value = "msr"  # a resolve() name with its own cluster
    board.run()
    assert board.graph.n_ops == 235 and board.cluster.mode == "host"
    panel = WhatIfPanel(wb.samples.inception(40, seed=0), wb.Cluster.preset("2xV100-pcie"),
                        methods=["m_topo", "heft"])
    panel.devices.value = 3
    assert panel.schedules is panel.comparison.schedules
    assert len(panel.schedules["heft"].cluster.names) == 3
    assert panel.table is panel.comparison.table


def test_figure_widgets_import_plotly_js_once_per_page(problem):
    """Every view's figure is a :class:`widgets.figurewidget.FigureWidget`: a small ``_esm``
    that imports plotly's widget bundle (sent as a trait) once per page, not plotly's own
    ``_esm`` (the 5 MB bundle, evaluated again by the browser for every figure)."""
    import plotly.graph_objects as go

    from widgets.figurewidget import FigureWidget, _bundle

    g, c, plan, s = problem
    figures = [DagView(g, cluster=c, plan=plan).figure, GanttView(s).figure,
               CompareBoard(graphs={"g": g}, methods=["single"]).bars]
    for fw in figures:
        state = fw.get_state()
        assert isinstance(fw, FigureWidget) and isinstance(fw, go.FigureWidget)
        assert len(state["_esm"]) < 2000 and "import(url)" in state["_esm"]
        assert state["_plotly_bundle"] == _bundle() and len(_bundle()) > 10**6
        assert state["_plotly_key"] == figures[0].get_state()["_plotly_key"]
    assert "export{" in _bundle() and "initialize" in _bundle()  # plotly's widget module
