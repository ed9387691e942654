"""Tests of the list schedulers (heft, etf, m_etf, m_sct, dpos, os_dpos)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workbench import Cluster, Device, Link, OpGraph, samples, simulate, solve
from workbench.analysis import critical_path, levels
from workbench.errors import InfeasibleError
from workbench.solvers import get
from workbench.solvers.list.scheduling import ListCore, favourite_children

METHODS = ["heft", "etf", "m_etf", "m_sct", "dpos", "os_dpos"]


def _host_cluster() -> Cluster:
    devs = [Device("gpu0"), Device("gpu1"), Device("gpu2"), Device("cpu0", kind="cpu")]
    return Cluster(devs, mode="host", host_link=Link(0.02, 5e6), name="host3+1")


GRAPHS = {
    "pesto_fig2": samples.pesto_fig2,
    "diamond": samples.diamond,
    "two_branch": samples.two_branch,
    "cnn": lambda: samples.cnn(60, seed=1),
    "inception": lambda: samples.inception(60, seed=2),
    "transformer": lambda: samples.transformer(60, seed=3),
    "lstm": lambda: samples.lstm_grid(60, seed=4),
    "random_coloc": lambda: samples.random_dag(40, seed=5, colocate_fraction=0.3),
    "training": lambda: samples.to_training(samples.transformer(30, seed=6)),
    "fixed_comm": lambda: OpGraph.from_ops(
        [(v, {"compute": {"gpu": t, "cpu": 3 * t}}) for v, t in
         [("a", 1.0), ("b", 2.5), ("c", 0.0), ("d", 1.5), ("e", 0.0)]],
        [("a", "b", {"bytes": 1e6}), ("a", "c", {"comm": 0.7}), ("b", "d", {"bytes": 4e6}),
         ("c", "d", {"bytes": 0.0}), ("c", "e", {"comm": 0.1}), ("d", "e", {"bytes": 2e6})]),
}
CLUSTERS = {
    "2xV100-pcie": lambda: Cluster.preset("2xV100-pcie"),
    "4xV100-nvlink": lambda: Cluster.preset("4xV100-nvlink"),
    "host": _host_cluster,
    "2x4xV100": lambda: Cluster.preset("2x4xV100"),
}


@pytest.mark.parametrize("cname", list(CLUSTERS))
@pytest.mark.parametrize("gname", list(GRAPHS))
@pytest.mark.parametrize("method", METHODS)
def test_predicted_makespan_is_simulated_exactly(method, gname, cname):
    if method == "os_dpos" and cname == "2x4xV100" and gname not in ("diamond", "fixed_comm"):
        pytest.skip("covered on the other clusters (time budget)")
    g, c = GRAPHS[gname](), CLUSTERS[cname]()
    plan = solve(g, c, method=method)
    plan.validate(c)
    assert plan.order is not None
    sim = simulate(plan, c, congestion=False, order="plan").makespan
    pred = plan.predicted["makespan_ms"]
    assert sim == pytest.approx(pred, rel=1e-9, abs=1e-12)
    # colocation honoured
    for members in plan.graph.colocation_groups.values():
        assert len({plan.placement[v] for v in members}) == 1


@pytest.mark.parametrize("method", METHODS)
def test_registered_as_list_family(method):
    info = get(method)
    assert info.family == "list" and info.orders and info.objective == "makespan"


def test_insertion_fills_idle_slot():
    # x (long) on gpu0; z can only start after y; a cheap independent op fits before z
    ops = [("x", {"compute": {"gpu": 5.0}}), ("y", {"compute": {"gpu": 1.0}}),
           ("z", {"compute": {"gpu": 1.0}}), ("w", {"compute": {"gpu": 1.0}})]
    g = OpGraph.from_ops(ops, [("x", "z", {"bytes": 0})])
    c = Cluster([Device("gpu0")])
    core = ListCore(g, c)
    for i, st in ((0, 0.0), (2, 5.0)):
        core.commit(i, 0, *core.earliest_start(0, st, core.times[i][0]))
    s, pos = core.earliest_start(0, 0.0, 1.0)
    assert (s, pos) == (6.0, 2)  # no idle time: x runs 0..5, z 5..6
    s, pos = core.earliest_start(0, 6.0, 1.0, insertion=False)
    assert s == 6.0 and pos == 2
    core2 = ListCore(g, c)
    core2.commit(2, 0, *core2.earliest_start(0, 5.0, 1.0))
    s, pos = core2.earliest_start(0, 1.0, 2.0)   # gap [0, 5) holds a 2 ms op from t=1
    assert (s, pos) == (1.0, 0)
    s, pos = core2.earliest_start(0, 4.5, 1.0)   # does not fit before 5: after z
    assert (s, pos) == (6.0, 1)


def test_zero_duration_op_goes_after_its_predecessor():
    ops = [("a", {"compute": {"gpu": 0.0}}), ("b", {"compute": {"gpu": 0.0}}),
           ("c", {"compute": {"gpu": 2.0}})]
    g = OpGraph.from_ops(ops, [("a", "b"), ("b", "c")])
    c = Cluster([Device("gpu0"), Device("gpu1")])
    for m in ("heft", "dpos"):
        plan = solve(g, c, method=m)
        assert simulate(plan, c, congestion=False, order="plan").makespan == 2.0


def test_heft_hand_computed_diamond():
    g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
    plan = solve(g, c, method="heft")
    # a, b on gpu0 (0-1, 1-3); c on gpu1 at 1 + 1.02 = 2.02 -> 4.02; d on gpu1 at 4.02 -> 5.02
    assert plan.placement == {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu1"}
    assert plan.predicted["makespan_ms"] == pytest.approx(5.02)


def test_heft_uses_mean_rank_and_dpos_max_rank():
    g, c = samples.random_dag(30, seed=1), _host_cluster()
    lv_mean, lv_max = levels(g, c, agg="mean"), levels(g, c, agg="max")
    assert not np.allclose(lv_mean.blevel, lv_max.blevel)
    p = solve(g, c, method="dpos")
    assert p.info["critical_path"] == critical_path(g, c, lv=lv_max)


def test_dpos_critical_path_on_one_device_when_memory_allows():
    g, c = samples.pesto_fig2(), Cluster.preset("4xV100-nvlink")
    p = solve(g, c, method="dpos")
    cp = p.info["critical_path"]
    assert len({p.placement[v] for v in cp}) == 1
    assert p.info["cp_devices"] == [p.placement[cp[0]]]


def test_dpos_new_critical_path_device_when_full():
    # a chain of 6 heavy-memory ops: each device holds 2 of them
    ops = [(f"o{k}", {"compute": {"gpu": 1.0}, "memory": 4e9}) for k in range(6)]
    g = OpGraph.from_ops(ops, [(f"o{k}", f"o{k + 1}", {"bytes": 1e6}) for k in range(5)])
    c = Cluster.preset("4xV100-nvlink").with_memory(9e9)
    p = solve(g, c, method="dpos")
    assert len(p.info["cp_devices"]) == 3
    used = [sum(1 for v in g.ops if p.placement[v] == d) for d in c.names]
    assert max(used) == 2
    # devices prefer the fastest (by average) for the critical path
    fast = Cluster([Device("slow", speed=1.0, memory=9e9), Device("fast", speed=2.0, memory=9e9),
                    Device("mid", speed=1.5, memory=9e9)])
    p2 = solve(g, fast, method="dpos")
    assert p2.info["cp_devices"] == ["fast", "mid", "slow"]


@pytest.mark.parametrize("method", ["m_etf", "m_sct", "dpos", "os_dpos"])
def test_memory_respected_or_infeasible_error(method):
    g = samples.transformer(60, seed=0)
    total = g.total_memory()
    c = Cluster.preset("4xV100-nvlink").with_memory(total * 0.4)
    plan = solve(g, c, method=method)
    used = {d: 0.0 for d in c.names}
    for v in plan.graph.ops:
        used[plan.placement[v]] += plan.graph.op(v)["memory"]
    assert all(u <= total * 0.4 * (1 + 1e-9) for u in used.values())
    with pytest.raises(InfeasibleError, match=r"short by"):
        solve(g, c.with_memory(total * 0.2), method=method)


def test_infeasible_error_names_op():
    g = samples.diamond().map_ops(lambda v, a: {**a, "memory": 9e9 if v == "c" else 1e9})
    c = Cluster.preset("2xV100-pcie").with_memory(5e9)
    for m in ("m_etf", "m_sct", "dpos"):
        with pytest.raises(InfeasibleError, match=r"op 'c' needs .*short by"):
            solve(g, c, method=m)


def test_memory_oblivious_methods_say_infeasible():
    g = samples.transformer(60, seed=0)
    c = Cluster.preset("2xV100-pcie").with_memory(g.total_memory() * 0.3)
    for m in ("heft", "etf"):
        assert solve(g, c, method=m).status == "infeasible"


def test_op_no_device_can_run():
    g = OpGraph.from_ops([("a", {"compute": {"tpu": 1.0}})])
    for m in METHODS:
        with pytest.raises(InfeasibleError, match="'a' can run on none"):
            solve(g, Cluster.preset("2xV100-pcie"), method=m)


def test_cpu_only_ops_go_to_cpu():
    g = samples.random_dag(30, seed=2, cpu_only_fraction=0.3)
    c = _host_cluster()
    for m in METHODS:
        p = solve(g, c, method=m)
        for v in g.ops:
            if "gpu" not in g.op(v)["compute"]:
                assert p.placement[v] == "cpu0"


def test_favourite_children_lp():
    g, c = samples.pesto_fig2(), Cluster.preset("2xV100-pcie")
    fav, w = favourite_children(g, c)
    names = g.c.names
    pairs = {names[i]: names[j] for i, j in enumerate(fav) if j >= 0}
    for u, v in pairs.items():
        assert v in g.successors(u)
    # each child has at most one favourite parent
    assert len(set(pairs.values())) == len(pairs)
    # the relaxed makespan: chain A-F-G-E (8 ms) with free favourite edges, the other chain
    # (A-B-C-D-E with two paid transfers, 7.04 ms) fits under it
    assert w == pytest.approx(8.0)
    assert len(pairs) >= 3


def test_m_sct_waits_for_favourite_child():
    # u -> v (big tensor, favourite) and an independent op x ready at the same time: SCT keeps
    # the device for v instead of moving v away
    ops = [("u", {"compute": {"gpu": 1.0}}), ("v", {"compute": {"gpu": 1.0}}),
           ("x", {"compute": {"gpu": 0.5}}), ("s", {"compute": {"gpu": 0.5}})]
    g = OpGraph.from_ops(ops, [("u", "v", {"bytes": 5e7}), ("s", "x", {"bytes": 0.0})])
    c = Cluster.preset("2xV100-pcie")
    p = solve(g, c, method="m_sct")
    assert p.placement["u"] == p.placement["v"]
    assert p.info["favourites"] >= 1
    assert simulate(p, c, congestion=False, order="plan").makespan == p.predicted["makespan_ms"]


def test_etf_starts_earliest_pair():
    # two independent ops, two devices: both start at 0
    ops = [("a", {"compute": {"gpu": 2.0}}), ("b", {"compute": {"gpu": 3.0}})]
    g = OpGraph.from_ops(ops)
    p = solve(g, Cluster.preset("2xV100-pcie"), method="etf")
    assert p.predicted["makespan_ms"] == 3.0
    assert p.placement["a"] != p.placement["b"]


def test_list_schedulers_beat_or_match_single_device_on_parallel_graph():
    g = samples.inception(120, seed=0)
    c = Cluster.preset("4xV100-nvlink")
    single = simulate(solve(g, c, method="single"), c).makespan
    for m in ("heft", "m_etf", "m_sct", "dpos"):
        assert simulate(solve(g, c, method=m), c).makespan < single


def test_deterministic():
    g, c = samples.random_dag(40, seed=9, colocate_fraction=0.2), _host_cluster()
    for m in METHODS:
        a, b = solve(g, c, method=m), solve(g, c, method=m)
        assert a.placement == b.placement and a.order == b.order


def test_os_dpos_splits_improve_and_show_in_plan():
    g = samples.two_branch().map_ops(lambda v, a: {**a, "splits": {"batch": 8}})
    c = Cluster.preset("4xV100-nvlink")
    base = solve(g, c, method="dpos").predicted["makespan_ms"]
    p = solve(g, c, method="os_dpos", data_parallel=False)
    assert p.info["splits"] and p.info["data_parallel"] == 1
    assert p.predicted["makespan_ms"] < base
    op, dim, n = p.info["splits"][0]
    assert dim == "batch" and 2 <= n <= 4
    assert f"{op}/split0" in p.graph
    assert simulate(p, c, congestion=False, order="plan").makespan == pytest.approx(
        p.predicted["makespan_ms"], rel=1e-9)


def test_os_dpos_data_parallel_start():
    g = samples.to_training(samples.cnn(30, seed=0), update=True)
    c = Cluster.preset("2xV100-pcie")
    p = solve(g, c, method="os_dpos", data_parallel=True, max_split_ops=1)
    assert p.info["data_parallel"] == 2
    assert any(v.endswith("@1") for v in p.graph.ops)
    assert any(v.startswith("allreduce:") for v in p.graph.ops)
    # automatic choice never worse than DPOS on the model itself
    auto = solve(g, c, method="os_dpos", max_split_ops=1)
    assert auto.predicted["makespan_ms"] <= solve(g, c, method="dpos").predicted["makespan_ms"]


def test_os_dpos_time_limit_status():
    """A limit shorter than one DPOS pass is refused at once, naming the time a pass takes;
    a limit that ends during the search returns the best plan so far as ``time_limit``."""
    from workbench.errors import TimeLimitError

    g = samples.cnn(60, seed=0)
    c = Cluster.preset("2xV100-pcie")
    with pytest.raises(TimeLimitError, match="one DPOS pass"):
        solve(g, c, method="os_dpos", data_parallel=False, time_limit=1e-6)
    big = samples.cnn(3000, seed=0)
    p = solve(big, c, method="os_dpos", data_parallel=False, time_limit=0.5)
    assert p.status in ("time_limit", "heuristic")
    assert math.isfinite(p.predicted["makespan_ms"])


@pytest.mark.parametrize("method", ["etf", "m_etf", "m_sct", "heft", "dpos"])
def test_zero_time_ops_do_not_stall(method):
    """Real TF graphs hold many zero-time ops (NoOp, Identity); regression for a stall."""
    import workbench as wb

    ops = [(f"z{i}", {"compute": {"cpu": 0.0}}) for i in range(6)] + [
        ("a", {"compute": {"cpu": 1.0}}), ("b", {"compute": {"cpu": 2.0}})]
    edges = [("z0", "z1"), ("z1", "z2"), ("z2", "a"), ("z0", "z3"), ("z3", "b"), ("a", "z4"),
             ("b", "z4"), ("z4", "z5")]
    g = wb.OpGraph.from_ops(ops, edges)
    c = wb.Cluster.preset("2xcpu")
    plan = wb.solve(g, c, method=method)
    s = wb.simulate(plan, c, congestion=False, order="plan")
    assert s.makespan == pytest.approx(plan.predicted["makespan_ms"], rel=1e-9)
    assert s.makespan <= 3.0 + 1e-9
