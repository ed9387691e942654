"""Plans explained side by side (issue 26, part 3): workbench.diff and its views."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.errors import PlanError
from workbench.workloads import layered


@pytest.fixture(scope="module")
def pair():
    g = layered(80, seed=6)
    c = wb.Cluster.preset("4xV100-nvlink")
    return g, c, wb.solve(g, c, method="heft"), wb.solve(g, c, method="round_robin")


def test_moved_ops_and_moves_by_pair(pair):
    g, c, a, b = pair
    d = wb.diff(a, b, c)
    want = {v for v in g.ops if a.placement[v] != b.placement[v]}
    assert set(d.moved["op"]) == want and len(want) > 0
    t = c.op_times(g)
    for _, r in d.moved.iterrows():
        assert (r["from"], r["to"]) == (a.placement[r["op"]], b.placement[r["op"]])
        assert r["compute_a_ms"] == t[g.index[r["op"]], c.index[r["from"]]]
        assert r["compute_b_ms"] == t[g.index[r["op"]], c.index[r["to"]]]
    assert d.moved["compute_a_ms"].is_monotonic_decreasing
    assert d.moves["ops"].sum() == len(want)
    assert d.moves["compute_a_ms"].sum() == pytest.approx(d.moved["compute_a_ms"].sum())
    for _, r in d.moves.iterrows():
        sub = d.moved[(d.moved["from"] == r["from"]) & (d.moved["to"] == r["to"])]
        assert len(sub) == r["ops"]


def test_busy_time_links_and_critical_paths(pair):
    _g, c, a, b = pair
    d = wb.diff(a, b, c)
    sa, sb = wb.simulate(a, c), wb.simulate(b, c)
    busy = d.busy.set_index("device")
    for s, col in ((sa, "busy_a_ms"), (sb, "busy_b_ms")):
        for i, name in enumerate(c.names):
            on = s.device == i
            assert busy.loc[name, col] == pytest.approx(float((s.end - s.start)[on].sum()))
    assert (busy["delta_ms"] == busy["busy_b_ms"] - busy["busy_a_ms"]).all()
    links = d.links.set_index("link")
    for k, v in sa.link_bytes.items():
        assert links.loc[k, "bytes_a"] == v
    for k, v in sb.link_bytes.items():
        assert links.loc[k, "bytes_b"] == v
    for _, r in d.breakdown.iterrows():
        assert r["compute_ms"] + r["transfer_ms"] + r["idle_ms"] == pytest.approx(
            r["makespan_ms"])
    assert d.breakdown["makespan_ms"].tolist() == [sa.makespan, sb.makespan]
    ca, cb = set(sa.critical_ops()), set(sb.critical_ops())
    assert set(d.critical["only_a"]) == ca - cb and set(d.critical["only_b"]) == cb - ca
    text = d.summary()
    assert f"{len(d.moved)} ops moved" in text and "heft" in text and "round_robin" in text


def test_a_plan_against_itself_moves_nothing(pair):
    _g, c, a, _ = pair
    d = wb.diff(a, a, c)
    assert len(d.moved) == 0 and len(d.moves) == 0
    assert (d.busy["delta_ms"] == 0).all() and (d.links["delta"] == 0).all()
    assert d.critical["only_a"] == d.critical["only_b"] == []
    assert (d.name_a, d.name_b) == ("heft (A)", "heft (B)")
    assert "no op moved" in d.summary()


def test_ops_of_one_graph_only_and_bad_input():
    c = wb.Cluster.preset("2xV100-pcie")
    g = wb.samples.diamond()
    g2 = wb.OpGraph.from_ops(
        [(v, g.op(v)) for v in g.ops] + [("e", {"compute": {"gpu": 1.0}})],
        [(u, v, g.nx.edges[u, v]) for u, v in g.nx.edges] + [("d", "e", {})])
    a = wb.Plan(g, {v: "gpu0" for v in g.ops})
    b = wb.Plan(g2, {**{v: "gpu0" for v in g.ops}, "e": "gpu1"})
    d = wb.diff(a, b, c)
    assert d.only_in_b == ["e"] and d.only_in_a == [] and len(d.moved) == 0
    other = wb.OpGraph.from_ops([("x", {"compute": {"gpu": 1.0}})])
    with pytest.raises(PlanError, match="share no op"):
        wb.diff(a, wb.Plan(other, {"x": "gpu0"}), c)
    with pytest.raises(PlanError, match="plan_b must be a Plan"):
        wb.diff(a, {"a": "gpu0"}, c)


def test_critical_breakdown_has_one_name_in_the_core():
    import widgets.figures
    import widgets.figures.methods
    from workbench.diff import critical_breakdown

    assert callable(critical_breakdown)
    assert not hasattr(widgets.figures, "critical_breakdown")
    assert not hasattr(widgets.figures.methods, "critical_breakdown")


def test_diff_figure_outlines_the_moved_ops_on_one_axis(pair):
    from widgets.figures.diff import diff_dag_figure, diff_figure, diff_html

    _g, c, a, b = pair
    d = wb.diff(a, b, c)
    fig = diff_figure(d)
    moved = [t for t in fig.data if t.name == "moved ops"]
    assert len(moved) == 2
    for t in moved:
        assert sorted(t.customdata) == sorted(d.moved["op"])
    assert fig.layout.xaxis.matches == "x2"  # one time axis
    assert fig.layout.meta["xmax"] == max(d.schedule_a.makespan, d.schedule_b.makespan)
    dag = diff_dag_figure(d, b, c)
    sel = next(t for t in dag.data if t.name == "selected")
    assert len(sel.x) == len(d.moved)
    html = diff_html(d)
    assert "moves by device pair" in html and "busy time per device" in html


def test_board_explains_gantt_a_against_gantt_b():
    from widgets.board import CompareBoard

    board = CompareBoard(graphs={"layered": layered(60, seed=6)}, presets=["4xV100-nvlink"],
                         methods=["round_robin", "heft"], time_limit=5)
    board.robust_check.value = False
    board.run()
    d = board.show_diff()
    assert (d.name_a, d.name_b) == (board.gantt_a_picker.value, board.gantt_b_picker.value)
    assert "ops moved" in board.diff_view.value
    assert board._diff_box.children[0].layout.meta["figure"] == "diff"
    sel = next(t for t in board._diff_box.children[1].data if t.name == "selected")
    assert len(sel.x) == len(d.moved)
    np.testing.assert_array_equal(d.schedule_a.end, board.schedules[d.name_a].end)


def test_given_schedules_are_used_and_must_match_their_plans():
    g, c = layered(40, seed=2), wb.Cluster.preset("4xV100-nvlink")
    a, b = wb.solve(g, c, method="heft"), wb.solve(g, c, method="m_topo")
    sa = wb.simulate(a, c, order="fifo")
    sb = wb.simulate(b, c, order="fifo")
    d = wb.diff(a, b, c, schedules=(sa, sb))
    assert d.schedule_a is sa and d.schedule_b is sb
    other = wb.samples.diamond()
    so = wb.simulate(wb.solve(other, c, method="heft"), c)
    with pytest.raises(wb.PlanError, match=r"schedules\[1\] is not a simulation of plan "
                                           r"'m_topo': it simulates graph 'diamond'"):
        wb.diff(a, b, c, schedules=(sa, so))
