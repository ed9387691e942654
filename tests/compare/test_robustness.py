"""Robust rankings (issue 26): the replay is the judge on nominal costs, the noise models do
what they say, and the statistics add up."""

from __future__ import annotations

import math
import sys
import warnings

import numpy as np
import pytest

import workbench as wb
from workbench.errors import PlanError, SolverError
from workbench.simulate import device_loads
from workbench.testing.contract import MILP_METHODS, contract_methods, make_case, run_method
from workbench.workloads import layered

rb = sys.modules["workbench.robustness"]  # wb.robustness is the function


# ---------------------------------------------------------------------- the replay is the judge
@pytest.mark.parametrize("seed", list(range(24)) + [46, 62])
def test_replay_equals_simulate_on_the_contract_battery(seed):
    """Every method's plan on the contract battery, with and without congestion: the replay
    on nominal costs gives every op's and transfer's end exactly (build_replay checks it and
    raises otherwise); the makespan and the max-load are the judge's."""
    case = make_case(seed)
    n = 0
    for m in contract_methods():
        if m in MILP_METHODS and seed % 6:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = run_method(case, m, time_limit=1.0)
        if out.plan is None:
            continue
        for congestion in (True, False):
            rep = rb.build_replay(out.plan, case.cluster, congestion=congestion)
            one = np.ones((1, rep.n_channels))
            f = np.ones((1, rep.n_ops))
            assert rep.makespans(f, one, one)[0] == wb.simulate(
                out.plan, case.cluster, congestion=congestion).makespan
            np.testing.assert_allclose(rep.max_loads(f, one, one)[0],
                                       device_loads(out.plan, case.cluster).max(), rtol=1e-9)
            n += 1
    assert n > 0


def test_replay_with_a_broken_order_is_caught():
    g, c = wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie")
    plan = wb.solve(g, c, method="heft")
    s = wb.simulate(plan, c)
    s.end = s.end + 1.0  # a schedule that is not what the plan gives
    with pytest.raises(PlanError, match="does not reproduce the judge: op"):
        rb.build_replay(plan, c, schedule=s)


def _perturbed_judge(plan, cluster, draws, s):
    """The judge on draw ``s``'s problem (compute per op, links together)."""
    g2, c2 = rb.perturbed_problem(plan.graph, cluster, draws, s)
    p2 = wb.Plan(g2, plan.placement, method=plan.method,
                 order=wb.simulate(plan, cluster, congestion=False).device_order())
    return wb.simulate(p2, c2, congestion=False, order="plan").makespan, \
        device_loads(p2, c2).max()


@pytest.mark.parametrize("method", ["heft", "m_topo", "round_robin"])
@pytest.mark.parametrize("mode", ["direct", "host"])
def test_replay_under_noise_equals_the_judge_on_the_perturbed_problem(method, mode):
    """With the order fixed and without congestion the judge itself is a longest path: on
    each draw's problem (op compute scaled per op and kind, links by one factor) it gives the
    replay's makespan and max-load."""
    g = layered(60, seed=3)
    c = wb.Cluster.preset("4xV100-nvlink")
    if mode == "host":
        c = wb.Cluster(c.devices, mode="host", name="host4")
    plan = wb.solve(g, c, method=method)
    rep = rb.build_replay(plan, c, congestion=False)
    nz = rb.resolve_noise({"compute": 0.3, "kind": 0.2, "bandwidth": 0.3, "latency": 0.3,
                           "correlated": False})
    nz_links = dict(nz, correlated=True)  # links together, as perturbed_problem scales them
    d_ops = rb.draw_costs([g], rep.n_channels, nz, 5, 1)
    d_links = rb.draw_costs([g], rep.n_channels, nz_links, 5, 1)
    draws = rb.Draws(d_ops.names, d_ops.kinds, d_ops.compute, d_links.lat, d_links.bw)
    f = draws.op_factors(rep)
    ms = rep.makespans(f, draws.lat, draws.bw)
    ml = rep.max_loads(f, draws.lat, draws.bw)
    assert np.ptp(ms) > 0
    for s in range(5):
        want_ms, want_ml = _perturbed_judge(plan, c, draws, s)
        assert ms[s] == pytest.approx(want_ms, rel=1e-12)
        assert ml[s] == pytest.approx(want_ml, rel=1e-12)


# ---------------------------------------------------------------------- rankings
@pytest.fixture(scope="module")
def cmp():
    g = layered(80, seed=6)
    c = wb.Cluster.preset("4xV100-nvlink")
    return wb.compare(g, c, methods=["single", "round_robin", "m_topo", "heft", "dpos"],
                      progress=False, time_limit=5)


def test_compare_keep_gives_the_table_and_plans(cmp):
    assert list(cmp.table["method"]) == ["single", "round_robin", "m_topo", "heft", "dpos"]
    assert set(cmp.plans) == set(cmp.table["method"])
    assert cmp.cluster.name == "4xV100-nvlink"


def test_zero_noise_gives_the_nominal_ranking(cmp):
    r = wb.robustness(cmp, noise={"compute": 0.0}, samples=30)
    t = r.table.set_index("method")
    nominal = cmp.table.set_index("method")["makespan_ms"]
    for m in t.index:
        assert t.loc[m, "p5_ms"] == t.loc[m, "p95_ms"] == pytest.approx(nominal[m], rel=1e-6)
    assert r.winner == nominal.idxmin()
    assert t.loc[r.winner, "p_best"] == 1.0 and r.p_winner == 1.0
    assert t["p_best"].sum() == pytest.approx(1.0)
    assert (t["expected_rank"] == t["nominal_rank"]).all()
    assert (t["p_nominal_rank"] == 1.0).all()
    assert np.all(r.kendall_tau == 1.0)
    assert r.verdict.startswith(f"{r.winner} wins robustly")


def test_noise_spreads_and_probabilities_add_up(cmp):
    r = wb.robustness(cmp, noise="profiled", samples=200, seed=3)
    t = r.table
    assert t["p_best"].sum() == pytest.approx(1.0)
    assert t["expected_rank"].sum() == pytest.approx(sum(range(1, len(t) + 1)))
    assert (t["p5_ms"] <= t["p50_ms"]).all() and (t["p50_ms"] <= t["p95_ms"]).all()
    assert (t["p95_ms"] > t["p5_ms"]).all()
    assert r.makespans.shape == (200, len(t))
    pw = r.pairwise.set_index(["a", "b"])["a_beats_b"]
    for a, b in pw.index:
        assert pw[(a, b)] + pw[(b, a)] == pytest.approx(1.0)
    assert ((r.pairwise["lo"] <= r.pairwise["a_beats_b"])
            & (r.pairwise["a_beats_b"] <= r.pairwise["hi"])).all()
    # the roofline's errors are wider than the profiles' spread
    wide = wb.robustness(cmp, noise="roofline", samples=200, seed=3).table.set_index("method")
    narrow = t.set_index("method")
    assert ((wide["p95_ms"] - wide["p5_ms"]) > (narrow["p95_ms"] - narrow["p5_ms"])).all()
    again = wb.robustness(cmp, noise="profiled", samples=200, seed=3)
    assert again.makespans.equals(r.makespans)  # deterministic per seed


def test_ties_are_split_fairly():
    g, c = wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie")
    p = wb.solve(g, c, method="heft")
    r = wb.robustness({"a": p, "b": p}, c, noise="profiled", samples=50)
    t = r.table.set_index("method")
    assert t.loc["a", "p_best"] == t.loc["b", "p_best"] == 0.5
    assert t.loc["a", "expected_rank"] == 1.5
    assert r.pairwise["a_beats_b"].tolist() == [0.5, 0.5]
    assert "not distinguishable" in r.verdict


def test_correlated_compute_noise_scales_a_single_device_plan():
    """All ops of a kind scaled together: a one-device plan's makespan is the nominal times
    that draw's factor, and two such plans keep their ratio in every draw."""
    g, c = layered(40, seed=2), wb.Cluster.preset("2xV100-pcie")
    single = wb.solve(g, c, method="single")
    other = wb.Plan(g, {v: "gpu1" for v in g.ops}, method="other",
                    order={"gpu1": list(g.ops), "gpu0": []})
    r = wb.robustness({"single": single, "other": other}, c,
                      noise={"compute": 0.2, "correlated": True}, samples=40)
    ms = r.makespans
    nominal = wb.simulate(single, c).makespan
    d = rb.draw_costs([g], 4, rb.resolve_noise({"compute": 0.2, "correlated": True}), 40, 0)
    factor = d.compute[:, 0, d.kinds["gpu"]]
    np.testing.assert_allclose(ms["single"], nominal * factor, rtol=1e-12)
    np.testing.assert_allclose(ms["single"] / ms["other"],
                               nominal / wb.simulate(other, c).makespan, rtol=1e-12)


def test_recorded_profile_spread_is_used():
    g = wb.samples.diamond().map_ops(
        lambda v, a: {**a, "compute_std": {"gpu": 0.5 * a["compute"]["gpu"]}} if v == "b" else a)
    names = {v: i for i, v in enumerate(g.ops)}
    kinds = {k: i for i, k in enumerate(g.c.kinds)}
    sig = rb._spread_sigma([g], names, kinds, 0.1, True)
    assert sig[names["b"], kinds["gpu"]] == pytest.approx(math.log(1.5))
    assert sig[names["a"], kinds["gpu"]] == pytest.approx(math.log(1.1))
    assert rb._spread_sigma([g], names, kinds, 0.1, False)[names["b"], kinds["gpu"]] == \
        pytest.approx(math.log(1.1))


def test_resolve_reports_how_often_a_choice_changes(cmp):
    r = wb.robustness(cmp, noise={"compute": 0.0}, samples=10, resolve=True,
                      resolve_samples=2)
    t = r.table.set_index("method")
    assert (t["resolve_changed"] == 0.0).all()  # same problem, same deterministic answer
    r = wb.robustness(cmp, noise={"compute": 0.5}, samples=10, resolve=True,
                      resolve_samples=3)
    t = r.table.set_index("method")
    assert t.loc["single", "resolve_changed"] == 0.0
    assert ((t["resolve_changed"] >= 0) & (t["resolve_changed"] <= 1)).all()
    assert t["resolve_changed"].max() > 0  # list schedulers follow the costs


def test_max_load_objective_ranks_by_max_load(cmp):
    r = wb.robustness(cmp, noise={"compute": 0.0}, samples=5, objective="max_load")
    nominal = cmp.table.set_index("method")["max_load_ms"]
    assert r.winner == nominal.idxmin()
    assert r.table["max_load_nominal_ms"].is_monotonic_increasing


@pytest.mark.parametrize("kw, msg", [
    ({"noise": {"cpu": 0.1}}, "unknown noise key 'cpu'"),
    ({"noise": {"compute": -1}}, r"noise\['compute'\] must be a finite spread"),
    ({"noise": {"compute": math.nan}}, r"noise\['compute'\]"),
    ({"noise": {"correlated": "yes"}}, r"noise\['correlated'\] must be True or False"),
    ({"noise": "gaussian"}, "unknown noise model 'gaussian'"),
    ({"samples": 0}, "samples must be a positive integer"),
    ({"objective": "latency"}, "objective must be"),
    ({"threshold": 2}, "threshold must be in"),
])
def test_bad_input_is_named(cmp, kw, msg):
    with pytest.raises(SolverError, match=msg):
        wb.robustness(cmp, **kw)


def test_plans_without_a_cluster_or_problem_are_refused(cmp):
    with pytest.raises(SolverError, match="need cluster="):
        wb.robustness(cmp.plans)
    with pytest.raises(SolverError, match="resolve=True needs compare"):
        wb.robustness(cmp.plans, cmp.cluster, resolve=True)
    with pytest.raises(SolverError, match="pass compare"):
        wb.robustness([1, 2], cmp.cluster)
    with pytest.raises(SolverError, match="pass compare"):  # one form each: no (table, plans)
        wb.robustness((cmp.table, cmp.plans), cmp.cluster)


# ---------------------------------------------------------------------- views
def test_robust_figure_and_compare_bars_show_the_draws(cmp):
    from widgets.figures import compare_figure, robust_figure

    r = wb.robustness(cmp, noise="roofline", samples=100)
    fig = robust_figure(r)
    t = r.table
    rng = fig.data[0]
    assert list(rng.y) == t["method"].tolist()
    np.testing.assert_allclose(np.asarray(rng.x) + np.asarray(rng.error_x.array), t["p95_ms"])
    np.testing.assert_allclose(np.asarray(rng.x) - np.asarray(rng.error_x.arrayminus),
                               t["p5_ms"])
    assert fig.layout.title.text == r.verdict
    assert sum(fig.layout.meta["p_best"].values()) == pytest.approx(1.0)
    bars = compare_figure(cmp.table, plans=cmp.plans, graph=cmp.graph, cluster=cmp.cluster,
                          robust=r)
    mk = bars.data[0]
    rows = t.set_index("method")
    for m, x, minus, plus, hover in zip(mk.y, mk.x, mk.error_x.arrayminus, mk.error_x.array,
                                        mk.customdata):
        assert x - minus == pytest.approx(rows.loc[m, "p5_ms"], rel=1e-5)
        assert x + plus == pytest.approx(rows.loc[m, "p95_ms"], rel=1e-5)
        assert f"P(best) {100 * rows.loc[m, 'p_best']:.0f} %" in hover
    assert bars.data[2].error_x.array is not None  # max load too
    assert compare_figure(cmp.table).data[0].error_x.array is None  # nothing without draws


def test_report_has_a_trust_section(tmp_path, cmp):
    from widgets.report import write_report

    r = wb.robustness(cmp, samples=50)
    html = write_report(tmp_path / "r.html", cmp.graph, cmp.cluster, cmp.table, cmp.plans,
                        robust=r).read_text()
    assert "Can I trust the winner?" in html and r.verdict in html
    assert "id=\"robustness\"" in html or "id='robustness'" in html
    plain = write_report(tmp_path / "p.html", cmp.graph, cmp.cluster, cmp.table,
                         cmp.plans).read_text()
    assert "Can I trust the winner?" not in plain


def test_board_replays_its_plans_under_noise(tmp_path):
    from widgets.board import CompareBoard

    g = layered(60, seed=6)
    board = CompareBoard(graphs={"layered": g}, presets=["4xV100-nvlink"],
                         methods=["round_robin", "heft", "dpos"], time_limit=5)
    board.run()
    assert board.robust is not None and board.robust.samples == 200
    assert set(board.robust.table["method"]) == {"round_robin", "heft", "dpos"}
    assert "Can I trust the winner?" in board.robust_view.value
    assert board._robust_box.children[0].layout.meta["figure"] == "robustness"
    assert board.bars.data[0].error_x.array is not None
    assert "Can I trust the winner?" in board.export_report(tmp_path / "b.html").read_text()
    board.robust_check.value = False
    board.run()
    assert board.robust is None and board._robust_box.children == ()
    assert board.bars.data[0].error_x.array is None


def test_family_noise_scales_each_op_type_together():
    g = layered(40, seed=2)
    types = {v: g.nx.nodes[v].get("op_type") for v in g.ops}
    assert len(set(types.values())) > 1
    d = rb.draw_costs([g], 4, rb.resolve_noise({"family": 0.3}), 20, 0)
    k = d.kinds["gpu"]
    by_type: dict = {}
    for v, t in types.items():
        by_type.setdefault(t, []).append(d.names[v])
    for cols in by_type.values():  # one factor per family, different across families
        assert np.all(d.compute[:, cols, k] == d.compute[:, cols[:1], k])
    firsts = [cols[0] for cols in by_type.values()]
    assert np.ptp(d.compute[:, firsts, k], axis=1).max() > 0
    assert np.all(rb.draw_costs([g], 4, rb.resolve_noise({"compute": 0.0}), 5, 0).compute == 1)
