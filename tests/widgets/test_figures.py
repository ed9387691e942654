"""Figure functions without a browser: traces, colours, critical-path membership, lanes."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

import workbench as wb
from workbench.testing.timing import Stopwatch
from workbench.judge.bounds import max_load_lower_bound
from widgets.figures import (coarse_figure, coarse_graph, compare_figure, dag_figure,
                             gantt_figure, gantt_lanes, idle_gaps, layered_layout,
                             pipeline_figure, stage_table)
from widgets.figures._common import device_colors
from widgets.figures.dag import WEBGL_THRESHOLD, static_critical_path
from widgets.report import write_report


def _trace(fig, name):
    found = [t for t in fig.data if t.name == name]
    assert found, f"no trace {name!r} in {[t.name for t in fig.data]}"
    return found[0]


@pytest.fixture(scope="module")
def problem():
    g = wb.samples.inception(120, seed=3)
    c = wb.Cluster.preset("4xV100-nvlink")
    plan = wb.solve(g, c, method="m_topo")
    return g, c, plan, wb.simulate(plan, c)


@pytest.fixture(scope="module")
def training():
    g = wb.samples.to_training(wb.samples.transformer(40, seed=0))
    c = wb.Cluster.preset("2xV100-pcie")
    plan = wb.solve(g, c, method="round_robin")
    return g, c, plan, wb.simulate(plan, c)


# ---------------------------------------------------------------- layout
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_layout_layers_follow_edges_and_positions_are_distinct(seed):
    g = wb.samples.random_dag(80, seed=seed)
    x, y, layer = layered_layout(g.n_ops, g.c.src, g.c.dst)
    assert np.all(layer[g.c.dst] > layer[g.c.src])
    assert np.all(x == layer)
    pairs = set(zip(layer.tolist(), y.tolist()))
    assert len(pairs) == g.n_ops  # no two ops drawn on top of each other
    for lv in np.unique(layer):  # each layer centred on y = 0
        assert abs(y[layer == lv].mean()) < 1e-9


def test_layout_is_longest_path_layering():
    # a -> b -> c and a -> c: c must sit two layers after a
    _, _, layer = layered_layout(3, np.array([0, 1, 0]), np.array([1, 2, 2]))
    assert layer.tolist() == [0, 1, 2]


def test_layout_of_unsorted_indices_and_cycles_does_not_fail():
    x, y, layer = layered_layout(3, np.array([2, 1]), np.array([1, 0]))
    assert layer.tolist() == [2, 1, 0]
    x, y, layer = layered_layout(2, np.array([0, 1]), np.array([1, 0]))  # a cycle
    assert len(x) == 2


# ---------------------------------------------------------------- DAG
def test_dag_colours_ops_by_their_device(problem):
    g, c, plan, _ = problem
    fig = dag_figure(g, cluster=c, plan=plan)
    ops = _trace(fig, "ops")
    cmap = device_colors(c.names)
    assert list(ops.customdata) == g.ops
    assert list(ops.marker.color) == [cmap[plan.placement[v]] for v in g.ops]
    legend = [t.name for t in fig.data if t.legendgroup == "colors"]
    assert legend == [d for d in c.names if d in plan.devices_used()]
    assert "device: " + plan.placement[g.ops[5]] in ops.text[5]
    assert g.ops[5] in ops.text[5]


def test_dag_critical_path_is_the_realised_one_with_a_schedule(problem):
    g, c, plan, s = problem
    fig = dag_figure(g, cluster=c, schedule=s)
    crit = _trace(fig, "critical path")
    assert list(crit.customdata) == s.critical_ops()
    # the critical edges join consecutive path members
    edges = _trace(fig, "critical path edges")
    assert np.count_nonzero(~np.isnan(np.asarray(edges.x, dtype=float))) == \
        2 * (len(s.critical_ops()) - 1)


def test_dag_static_critical_path_matches_analysis(problem):
    g, c, _, _ = problem
    fig = dag_figure(g, cluster=c, color_by="kind")
    assert list(_trace(fig, "critical path").customdata) == \
        wb.analysis.critical_path(g, c)
    assert static_critical_path(wb.samples.diamond()) == ["a", "b", "d"]
    assert len(_trace(dag_figure(g, critical_path=False), "critical path").customdata) == 0


def test_dag_colour_by_cluster_and_kind(training):
    g, c, _, _ = training
    fig = dag_figure(g, color_by="kind")
    cols = list(_trace(fig, "ops").marker.color)
    kinds = [g.op(v)["kind"] for v in g.ops]
    assert {k for k in kinds} == {"fwd", "bwd"}
    assert len({col for col, k in zip(cols, kinds) if k == "fwd"}) == 1
    assert {col for col, k in zip(cols, kinds) if k == "fwd"} != \
        {col for col, k in zip(cols, kinds) if k == "bwd"}
    mapping = {v: i // 10 for i, v in enumerate(g.ops)}
    fig = dag_figure(g, color_by="cluster", clusters=mapping)
    cols = list(_trace(fig, "ops").marker.color)
    assert cols[0] == cols[9] != cols[10]
    with pytest.raises(ValueError, match="clusters="):
        dag_figure(g, color_by="cluster")
    with pytest.raises(ValueError, match="color_by must be one of"):
        dag_figure(g, color_by="nope")


def test_dag_selected_trace(problem):
    g, c, plan, _ = problem
    fig = dag_figure(g, plan=plan, selected=[g.ops[3], "not-an-op"])
    assert list(_trace(fig, "selected").customdata) == [g.ops[3]]


def test_dag_of_a_transformed_graph_schedule_matches_by_name(problem):
    g, c, plan, _ = problem
    sub = wb.Plan(g, plan.placement)
    s = wb.simulate(sub, c)
    fig = dag_figure(g, schedule=s, cluster=c)
    assert list(_trace(fig, "ops").marker.color) == \
        [device_colors(c.names)[plan.placement[v]] for v in g.ops]


@pytest.mark.slow
def test_large_dag_uses_webgl_and_is_fast():
    g = wb.samples.transformer(20000, seed=0)
    c = wb.Cluster.preset("8xA100-nvlink")
    plan = wb.Plan(g, {v: c.names[i % 8] for i, v in enumerate(g.ops)})
    with Stopwatch() as sw:
        fig = dag_figure(g, cluster=c, plan=plan)
    assert g.n_ops > WEBGL_THRESHOLD
    assert {t.type for t in fig.data} == {"scattergl"}
    assert len(_trace(fig, "ops").x) == 20000
    # target 3 s; the bound is loose and load-scaled because CI machines are shared
    assert sw.within(9.0), f"20,000-op DAG took {sw}"
    small = dag_figure(wb.samples.diamond())
    assert {t.type for t in small.data} == {"scatter"}


# ---------------------------------------------------------------- Gantt
def test_gantt_lanes_are_devices_then_used_links(problem):
    g, c, _, s = problem
    fig = gantt_figure(s)
    lanes = gantt_lanes(s)
    used_links = sorted({s.link_name(k) for k in range(s.n_transfers)})
    assert lanes == c.names + used_links
    assert list(fig.layout.yaxis.categoryarray) == list(reversed(lanes))
    bars = _trace(fig, "fwd ops")
    assert len(bars.y) == g.n_ops
    assert sorted(bars.customdata) == sorted(g.ops)
    assert len(_trace(fig, "transfers").y) == s.n_transfers
    assert set(_trace(fig, "transfers").y) == set(used_links)


def test_gantt_idle_gaps_complement_busy_time(problem):
    _, c, _, s = problem
    gaps = idle_gaps(s)
    for d_i, d in enumerate(c.names):
        busy = float((s.end - s.start)[s.device == d_i].sum())
        idle = sum(b - a for dd, a, b in gaps if dd == d)
        assert busy + idle == pytest.approx(s.makespan, rel=1e-9, abs=1e-9)
    fig = gantt_figure(s)
    assert len(_trace(fig, "idle").x) == len(gaps)


def test_gantt_outlines_the_realised_critical_path(problem):
    _, _, _, s = problem
    crit = _trace(gantt_figure(s), "critical path")
    assert len(crit.y) == len(s.critical_path)
    ops_on_path = [x for x in crit.customdata if not str(x).endswith("(transfer)")]
    assert ops_on_path == s.critical_ops()
    ends = np.asarray(crit.base, dtype=float) + np.asarray(crit.x, dtype=float)
    assert ends.max() == pytest.approx(s.makespan)


def test_gantt_training_shading_and_host_mode(training):
    g, c, plan, s = training
    fig = gantt_figure(s)
    assert _trace(fig, "fwd ops").marker.pattern.shape in ("", None)
    assert _trace(fig, "bwd ops").marker.pattern.shape == "/"
    assert len(_trace(fig, "bwd ops").y) == sum(g.op(v)["kind"] == "bwd" for v in g.ops)
    host = wb.Cluster.from_dict({**c.to_dict(), "mode": "host"})
    sh = wb.simulate(plan, host)
    lanes = gantt_lanes(sh)
    assert any(ln.endswith("->host") for ln in lanes)
    assert any(ln.startswith("host->") for ln in lanes)


def test_gantt_selected_and_empty_device_lane():
    g, c = wb.samples.diamond(), wb.Cluster.preset("4xV100-nvlink")
    s = wb.simulate(wb.Plan(g, {v: "gpu0" for v in g.ops}), c)
    fig = gantt_figure(s, selected=["b"])
    assert list(_trace(fig, "selected").customdata) == ["b"]
    assert gantt_lanes(s) == c.names  # no transfers, idle devices still have a lane
    assert gantt_lanes(s, all_devices=False) == ["gpu0"]


# ---------------------------------------------------------------- coarsening
def test_coarse_graph_contracts_without_self_loops(problem):
    g, c, plan, _ = problem
    mapping = {v: i // 7 for i, v in enumerate(g.ops)}
    cg = coarse_graph(g, mapping)
    assert cg["sizes"].sum() == g.n_ops
    assert len(cg["ids"]) == len(set(mapping.values()))
    assert np.all(cg["src"] != cg["dst"])
    assert cg["bytes"].sum() <= g.c.bytes.sum() + 1e-6
    assert cg["compute"].sum() == pytest.approx(g.c.min_compute().sum())


def test_coarse_figure_with_a_real_coarsening(problem):
    coarsen = pytest.importorskip("workbench.transforms.coarsen").coarsen
    g, c, plan, _ = problem
    res = coarsen(g, 15, cluster=c)
    fig = coarse_figure(g, res, plan=plan, cluster=c)
    clusters = _trace(fig, "clusters")
    assert len(clusters.x) == res.coarse.n_ops
    heaviest = int(np.argmax(coarse_graph(g, res, cluster=c)["compute"]))
    members = list(_trace(fig, "members").customdata)
    assert sorted(members) == sorted(res.members[heaviest])
    # each cluster's colour is the device of most of its members
    cmap = device_colors(c.names)
    first = res.members[0]
    devs = [plan.placement[v] for v in first]
    assert clusters.marker.color[0] == cmap[max(set(devs), key=devs.count)]


def test_coarse_figure_selection_and_bad_mapping(problem):
    g, _, _, _ = problem
    mapping = {v: "A" if i < 10 else "B" for i, v in enumerate(g.ops)}
    fig = coarse_figure(g, mapping, selected="A")
    assert list(_trace(fig, "members").customdata) == g.ops[:10]
    assert fig.layout.meta["selected"] == "A"
    with pytest.raises(TypeError, match="mapping"):
        coarse_figure(g, [1, 2, 3])


# ---------------------------------------------------------------- pipeline
def test_pipeline_marks_the_bottleneck(training):
    g, c, plan, _ = training
    fig = pipeline_figure(plan, c)
    loads = wb.device_loads(plan, c)
    bott = c.names[int(np.argmax(loads))]
    assert fig.layout.meta["bottleneck"] == bott
    assert fig.layout.meta["max_load_ms"] == pytest.approx(loads.max())
    assert bott in _trace(fig, "bottleneck").x[0]
    df = stage_table(plan, c)
    stacked = df[["fwd_ms", "bwd_ms", "update_ms", "other_ms", "comm_ms"]].sum(axis=1)
    assert np.allclose(stacked, df["load_ms"])
    assert np.allclose(sorted(df["load_ms"]), sorted(loads[loads > 0]))
    lb = max_load_lower_bound(g, c)
    assert list(_trace(fig, "lower bound").y) == [lb] * len(df)


def test_pipeline_stages_are_in_graph_order():
    g = wb.samples.transformer(60, seed=0)
    c = wb.Cluster.preset("4xV100-nvlink")
    # a contiguous split in reverse device order: stage 0 must still be the first slice
    plan = wb.Plan(g, {v: c.names[3 - min(3, 4 * i // g.n_ops)] for i, v in enumerate(g.ops)})
    assert stage_table(plan, c)["device"].tolist() == ["gpu3", "gpu2", "gpu1", "gpu0"]


# ---------------------------------------------------------------- compare
def _compare_frame():
    g = wb.samples.transformer(80, seed=0)
    c = wb.Cluster.preset("2xV100-pcie")
    df = wb.compare(g, c, methods=["single", "round_robin", "m_topo"], progress=False).table
    df.loc[len(df)] = {**df.iloc[0].to_dict(), "method": "broken", "status": "error",
                       "error": "boom"}
    return df


def test_compare_figure_sorted_bars_own_bounds_and_log_axis():
    df = _compare_frame()
    fig = compare_figure(df)
    mk = _trace(fig, "makespan")
    ok = df[df["status"] != "error"]
    assert list(mk.y) == ok.sort_values("makespan_ms", kind="stable")["method"].tolist()
    assert np.all(np.diff(np.asarray(mk.x, float)) >= 0)  # best first
    ml = _trace(fig, "max load")
    assert list(ml.y) == ok.sort_values("max_load_ms", kind="stable")["method"].tolist()
    lb = _trace(fig, "makespan lower bound")
    byname = ok.set_index("method")
    assert list(lb.y) == list(mk.y)  # one bound tick per row, on its own row
    assert np.allclose(lb.x, byname.loc[list(mk.y), "makespan_lb"])
    assert fig.layout.xaxis3.type == "log"
    assert fig.layout.meta["failed"] == ["broken"]
    assert "broken" in fig.layout.title.text
    with pytest.raises(ValueError, match="method"):
        compare_figure(pd.DataFrame({"x": [1]}))


def test_compare_figure_per_method_bounds_and_markers():
    # os_dpos-like row: its own (lower) bound on its changed graph; heft-like row infeasible
    df = pd.DataFrame({
        "method": ["dpos", "os_dpos", "heft", "pesto"],
        "status": ["heuristic", "heuristic", "heuristic", "time_limit"],
        "makespan_ms": [125.4, 98.9, 90.0, 130.0], "max_load_ms": [40.0, 38.0, 30.0, 41.0],
        "makespan_lb": [124.9, 71.8, 124.9, 124.9], "max_load_lb": [30.0, 29.0, 30.0, 30.0],
        "feasible": [True, True, False, True], "solve_s": [0.1, 1.0, 0.1, 10.0]})
    fig = compare_figure(df)
    mk = _trace(fig, "makespan")
    # the infeasible row sinks below every feasible one, whatever its makespan
    assert list(mk.y) == ["os_dpos", "dpos", "pesto", "heft"]
    lb = _trace(fig, "makespan lower bound")
    assert dict(zip(lb.y, lb.x)) == {"os_dpos": 71.8, "dpos": 124.9, "pesto": 124.9,
                                     "heft": 124.9}
    assert "+37.7 %" in mk.text[0]  # gap to its own bound, not to the largest one
    flags = fig.layout.meta["flags"]
    assert flags == {"dpos": [], "os_dpos": ["changed_graph"], "heft": ["infeasible"],
                     "pesto": ["time_limit"]}
    assert list(mk.marker.pattern.shape) == ["", "", "/", "x"]
    assert mk.marker.opacity[-1] < 1
    ticks = dict(zip(fig.layout.yaxis.tickvals, fig.layout.yaxis.ticktext))
    assert ticks["heft"] == "heft ⚠" and ticks["os_dpos"] == "os_dpos ◆"
    assert "⚠" in mk.text[-1]
    legend = [t.name for t in fig.data if t.legendgroup == "flags"]
    assert any("infeasible" in n for n in legend) and any("time limit" in n for n in legend)
    assert any("changed graph" in n for n in legend)


def test_method_colours_are_stable_and_distinct_across_views():
    from widgets.figures.methods import METHOD_PALETTE, method_color, method_colors

    names = list(wb.SOLVERS)
    cols = [method_color(m) for m in names]
    assert len(set(cols)) == min(len(names), len(METHOD_PALETTE))  # no repeats
    assert "#d62728" not in cols  # red stays the critical path's
    df = _compare_frame()
    a = compare_figure(df)
    b = compare_figure(df.iloc[::-1].reset_index(drop=True))
    for fig in (a, b):
        mk = _trace(fig, "makespan")
        assert list(mk.marker.color) == [method_color(m) for m in mk.y]
    assert a.layout.meta["colors"] == b.layout.meta["colors"] == method_colors(
        ["single", "round_robin", "m_topo"])
    assert method_color("not_registered") == method_color("not_registered")


def test_verdict_names_winners_and_explains_the_critical_path():
    from workbench.comparison import verdict
    from workbench.diff import critical_breakdown

    g, c = wb.samples.transformer(80, seed=0), wb.Cluster.preset("2xV100-pcie")
    cmp = wb.compare(g, c, methods=["single", "round_robin", "m_topo"], progress=False)
    df, plans = cmp.table, cmp.plans
    v = {x["objective"]: x for x in verdict(df, plans=plans, cluster=c, graph=g)}
    best = df.sort_values("makespan_ms").iloc[0]
    assert v["makespan"]["winner"] == best["method"]
    assert v["makespan"]["value"] == pytest.approx(best["makespan_ms"])
    assert "critical path" in v["makespan"]["why"] and "moves" in v["makespan"]["why"]
    assert v["max_load"]["winner"] == df.sort_values("max_load_ms").iloc[0]["method"]
    for m, p in plans.items():
        b = critical_breakdown(wb.simulate(p, c))
        assert b["compute_ms"] + b["transfer_ms"] + b["idle_ms"] == pytest.approx(b["makespan"])
    # an infeasible row never wins
    df2 = df.copy()
    df2.loc[df2["method"] == best["method"], "feasible"] = False
    assert verdict(df2)[0]["winner"] != best["method"]


def test_figures_draw_into_a_given_figure(problem):
    g, c, plan, s = problem
    fig = go.Figure()
    out = gantt_figure(s, fig=dag_figure(g, plan=plan, fig=fig))
    assert out is fig and fig.layout.meta["figure"] == "gantt"
    assert all(t.type == "bar" for t in fig.data)


# ---------------------------------------------------------------- report
def test_report_is_self_contained_and_atomic(tmp_path, problem):
    g, c, _, _ = problem
    methods = ["single", "round_robin", "m_topo"]
    df = wb.compare(g, c, methods=methods, progress=False)
    plans = df.plans
    out = write_report(tmp_path / "sub" / "r.html", graph=g, cluster=c, table=df, plans=plans,
                       title="A <b>title</b>")
    html = out.read_text()
    import plotly

    assert "<script src" not in html.lower()  # nothing fetched at view time
    assert "http://" not in html.split("<body>")[1]
    assert plotly.offline.get_plotlyjs()[:200] in html
    assert "A &lt;b&gt;title&lt;/b&gt;" in html
    assert html.count('id="gantts"') == 1 and "gantt-pick" not in html
    assert "Verdict" in html and "wins makespan" in html
    assert "<th>gap</th>" in html and "bound (ms)" in html  # units in the headers
    for m in methods:
        assert m in html
    assert sorted(p.name for p in out.parent.iterdir()) == ["r.html"]
    assert out.stat().st_mode & 0o044  # readable by others, not left private by mkstemp


def test_report_leaves_out_heavy_drawings(tmp_path):
    g, c = wb.samples.transformer(120, seed=0), wb.Cluster.preset("2xV100-pcie")
    plans = {"m_topo": wb.solve(g, c, method="m_topo")}
    out = write_report(tmp_path / "r.html", g, c, None, plans, max_dag_ops=50,
                       max_gantt_bars=50)
    html = out.read_text()
    assert "its drawing is left out" in html and "Gantt chart is left out" in html
    assert 'id="dag"' not in html and 'id="gantt' not in html


def test_report_picker_when_many_plans_and_footnoted_errors(tmp_path, problem):
    g, c, _, _ = problem
    methods = ["single", "round_robin", "m_topo", "heft"]
    cmp = wb.compare(g, c, methods=methods, progress=False)
    df, plans = cmp.table, cmp.plans
    df.loc[len(df)] = {**df.iloc[0].to_dict(), "method": "broken", "status": "error",
                       "error": "a long message " * 20}
    html = write_report(tmp_path / "r.html", g, c, df, plans, max_gantts=2).read_text()
    assert "id='gantt-pick'" in html and html.count("class='wb-one'") == len(methods)
    assert "2 more not drawn" in html
    table = html.split("<table")[1].split("</table>")[0]
    assert "a long message" not in table and "<sup>1</sup>" in table  # footnote, not a cell
    assert "a long message" in html.split("</table>")[1]


# ---------------------------------------------------------------- shared time axis
def test_gantts_share_one_time_axis_and_show_utilisation(problem):
    from widgets.figures import gantt_multiples, utilisation

    g, c, plan, s = problem
    other = wb.simulate(wb.solve(g, c, method="single"), c)
    fig = gantt_multiples({"m_topo": s, "single": other})
    slow = max(s.makespan, other.makespan)
    assert fig.layout.meta["order"][0] == min(("m_topo", s.makespan), ("single", other.makespan),
                                              key=lambda x: x[1])[0]
    assert fig.layout.xaxis.range[1] == pytest.approx(slow * 1.02)
    assert fig.layout.xaxis.matches == "x2"  # one axis for every panel
    # a lone Gantt given the other's makespan draws the same axis
    a = gantt_figure(s, xmax=slow)
    assert a.layout.xaxis.range[1] == pytest.approx(slow * 1.02)
    u = utilisation(s)
    busy = sum(float((s.end - s.start)[s.device == i].sum()) for i in range(len(c.names)))
    assert sum(u.values()) * s.makespan == pytest.approx(busy)
    assert any(t.endswith(f"{100 * u['gpu0']:.0f} %") for t in a.layout.yaxis.ticktext)


# ---------------------------------------------------------------- large graphs
def test_placement_heatmap_bins_compute_by_device_and_depth():
    from widgets.figures import placement_heatmap

    g, c = wb.samples.lstm_grid(400, layers=4, seed=0), wb.Cluster.preset("4xV100-nvlink")
    one = wb.Plan(g, {v: "gpu2" for v in g.ops})
    fig = placement_heatmap(g, {"one": one, "m_topo": wb.solve(g, c, method="m_topo")}, c,
                            bins=30)
    z = np.asarray(fig.data[0].z, dtype=float)
    assert z.shape == (4, fig.layout.meta["bins"]) and fig.layout.meta["bins"] <= 30
    assert np.isnan(z[[0, 1, 3]]).all() and np.isfinite(z[2]).any()  # only gpu2 works
    from widgets.figures._common import op_times_or_min

    assert np.nansum(z) == pytest.approx(op_times_or_min(g, c).sum())
    assert np.nansum(np.asarray(fig.data[1].z, dtype=float)) == pytest.approx(np.nansum(z))
    with pytest.raises(ValueError, match="at least one plan"):
        placement_heatmap(g, {}, c)


def test_changed_graph_rows_are_judged_on_their_own_graph():
    from workbench.judge.bounds import lower_bounds

    g, c = wb.samples.transformer(80, seed=0), wb.Cluster.preset("4xV100-nvlink")
    cmp = wb.compare(g, c, methods=["m_topo", "os_dpos"], progress=False)
    df, plans = cmp.table, cmp.plans
    fig = compare_figure(df, plans=plans, graph=g, cluster=c)
    assert fig.layout.meta["flags"]["os_dpos"] == ["changed_graph"]
    lb = dict(zip(_trace(fig, "makespan lower bound").y, _trace(fig, "makespan lower bound").x))
    assert lb["os_dpos"] == pytest.approx(lower_bounds(plans["os_dpos"].graph, c)["makespan_ms"])
    assert lb["m_topo"] == pytest.approx(df.set_index("method").loc["m_topo", "makespan_lb"])
    from widgets.tables import results_table_html

    html = results_table_html(df, plans=plans, graph=g, cluster=c)
    row = next(r for r in html.split("<tr") if "os_dpos" in r)
    assert f"{lb['os_dpos']:.3g}" in row or f"{lb['os_dpos']:.1f}" in row


def test_fidelity_figure_shows_its_comment_on_the_rankings():
    import pandas as pd

    from widgets.figures.fidelity import fidelity_figure

    def shown(fig):
        return [a.text for a in fig.layout.annotations if a.name == "comment"]

    close = pd.DataFrame({"method": ["single", "dpos"], "makespan_ms": [10.0, 8.0],
                          "measured_ms": [9.0, 9.5]})
    fig = fidelity_figure(close)
    assert shown(fig) == [fig.layout.meta["comment"]]
    assert "Simulation picks dpos, measurement single" in shown(fig)[0]
    assert "within the noise" in shown(fig)[0]
    far = close.assign(measured_ms=[20.0, 9.0])  # 122 % apart: not noise, the simulator errs
    assert "misjudges" in shown(fidelity_figure(far.assign(makespan_ms=[8.0, 10.0])))[0]
    same = close.assign(measured_ms=[12.0, 9.0])
    assert shown(fidelity_figure(same)) == ["Simulation and measurement agree: dpos is the "
                                            "fastest plan."]


def test_heatmap_cells_list_their_ops_and_slices_draw_them():
    from widgets.figures import heatmap_ops, placement_heatmap, slice_figure

    g, c = wb.samples.lstm_grid(400, layers=2, seed=1), wb.Cluster.preset("2xV100-pcie")
    plan = wb.solve(g, c, method="round_robin")
    fig = placement_heatmap(g, {"rr": plan}, c, bins=25)
    nb = fig.layout.meta["bins"]
    cells = [heatmap_ops(g, b, bins=25) for b in range(nb)]
    assert sorted(v for ops in cells for v in ops) == sorted(g.ops)  # bins partition the ops
    # the hover of every cell counts exactly the ops heatmap_ops lists for it
    for i, dev in enumerate(c.names):
        for b in (0, nb // 2, nb - 1):
            n = len(heatmap_ops(g, b, bins=25, plan=plan, device=dev))
            assert f": {n} ops," in fig.data[0].text[i][b]
    ops = cells[nb // 2]
    s = slice_figure(g, ops, plan=plan, cluster=c, highlight=ops[:2])
    inside = set(ops)
    enter = sum(1 for u, v in g.edges() if v in inside and u not in inside)
    assert s.layout.meta["ops"] == len(ops) and s.layout.meta["enter"] == enter > 0
    assert sorted(next(t for t in s.data if t.name == "selected").customdata) == sorted(ops[:2])
    small = slice_figure(g, g.ops, max_ops=50)
    assert small.layout.meta["truncated"] and small.layout.meta["ops"] == 50
    assert "first 50 of 400" in small.layout.title.text
    with pytest.raises(ValueError, match="out of range"):
        heatmap_ops(g, nb, bins=25)


def test_diff_figure_legend_sits_under_the_time_axis_clear_of_the_panel_titles(problem):
    """Issue 26: the diff's legend sat above the first panel, over that plan's title."""
    from widgets.figures.diff import diff_figure

    g, c, plan, _s = problem
    d = wb.diff(wb.solve(g, c, method="heft"), plan, c)
    fig = diff_figure(d)
    leg, titles = fig.layout.legend, [a for a in fig.layout.annotations if "makespan" in a.text]
    assert len(titles) == 2  # one title per plan, above its panel (paper y >= 0)
    assert all(a.yref == "paper" and a.y > 0 for a in titles)
    # the legend: anchored at the figure's foot, inside the bottom margin, under the axis
    assert (leg.yref, leg.y, leg.yanchor, leg.orientation) == ("container", 0.0, "bottom", "h")
    assert fig.layout.margin.b >= 80 and fig.layout.height >= 80 + fig.layout.margin.t
    assert sum(t.name == "moved ops" and t.showlegend is not False for t in fig.data) == 1
