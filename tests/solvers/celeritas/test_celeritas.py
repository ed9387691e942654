"""Order-Place and Adjusting Placement (Celeritas Algorithm 2)."""

import numpy as np
import pytest

import workbench as wb
from workbench import Cluster, Device, Link, SolverError, samples, simulate
from workbench.graph import OpGraph
from workbench.solvers.celeritas.placement import default_M, default_R


def fork(branch_comm: float, join_comm: float):
    """a -> (b, c) -> d with fixed transfer times: b and c take 10 ms each."""
    ops = [("a", {"compute": {"gpu": 1.0}}), ("b", {"compute": {"gpu": 10.0}}),
           ("c", {"compute": {"gpu": 10.0}}), ("d", {"compute": {"gpu": 1.0}})]
    edges = [("a", "b", {"comm": branch_comm}), ("a", "c", {"comm": branch_comm}),
             ("b", "d", {"comm": join_comm}), ("c", "d", {"comm": join_comm})]
    return OpGraph.from_ops(ops, edges, name="fork")


TWO = Cluster([Device("gpu0"), Device("gpu1")], intra_host=Link(0.0, 1e6), name="two")


def test_adjusting_moves_a_waiting_node_when_it_pays():
    # c would wait until b ends (t=11) on b's device; elsewhere it starts at 1 + 1 = 2
    p = wb.solve(fork(1.0, 1.0), TWO, method="celeritas", R=1)
    assert p.placement["b"] != p.placement["c"]
    s = simulate(p, TWO, congestion=False)
    assert s.makespan == pytest.approx(1 + 1 + 10 + 1)  # a, transfer, c, d (b overlaps)
    assert p.predicted["makespan_ms"] == pytest.approx(s.makespan)


def test_back_cost_rule_eq9():
    # gap EST(d_k) - EST(d_1) = 11 - (1 + 5) = 5; back_cost = max comm to successors
    # the rule itself, without the even split the judge would keep (b and c apart)
    stay = wb.solve(fork(5.0, 5.0), TWO, method="celeritas", R=1,
                    split_start=False)                                   # 5 > 5 is false
    assert len(set(stay.placement.values())) == 1
    move = wb.solve(fork(5.0, 4.9), TWO, method="celeritas", R=1)     # 5 > 4.9
    assert move.placement["b"] != move.placement["c"]
    # a far-away device (expensive transfers) is never worth it
    far = wb.solve(fork(20.0, 1.0), TWO, method="celeritas", R=1)
    assert len(set(far.placement.values())) == 1


def test_full_device_moves_on_and_best_effort_when_all_full():
    g = samples.transformer(200, seed=0)
    cap = g.total_memory() * 0.4
    c = Cluster.preset("4xV100-nvlink").with_memory(cap)
    for method in ("celeritas", "order_place"):
        p = wb.solve(g, c, method=method, R=10)
        m = wb.evaluate(p, c)
        assert p.status == "heuristic" and m.feasible, (method, m.violations)
        assert len(p.devices_used()) >= 3
    # memory for only half the model on the two devices: best effort, least-used device
    tiny = Cluster.preset("2xV100-pcie").with_memory(g.total_memory() * 0.25)
    p = wb.solve(g, tiny, method="celeritas", R=10)
    assert p.status == "infeasible" and p.stats["best_effort_nodes"] > 0
    used = wb.evaluate(p, tiny).peak_memory
    assert max(used.values()) < g.total_memory() * 0.75  # spread, not piled on one device


def test_order_place_fills_devices_in_sequence():
    g = samples.cnn(300, seed=1)
    c = Cluster.preset("4xV100-nvlink").with_memory(g.total_memory() * 0.45)
    p = wb.solve(g, c, method="order_place", R=10)
    fusion = p.info["fusion"]
    assert fusion["nodes_after"] < g.n_ops
    used = wb.evaluate(p, c).peak_memory
    # the first device is filled before the next one gets anything big
    assert used["gpu0"] >= 0.8 * c.devices[0].memory
    assert p.devices_used() == ["gpu0", "gpu1", "gpu2"]


def test_colocation_groups_follow_their_first_member():
    g = samples.to_training(samples.inception(120, seed=0))
    c = Cluster.preset("4xV100-nvlink").with_memory(g.total_memory() * 0.4)
    for method in ("celeritas", "order_place"):
        p = wb.solve(g, c, method=method, R=9)
        for grp, members in g.colocation_groups.items():
            assert len({p.placement[v] for v in members}) == 1, grp
        m = wb.evaluate(p, c)
        # the papers' static model holds; the judge's live model decides the status (issue 42)
        assert m.memory_fraction <= 1 + 1e-9
        assert (p.status == "out_of_memory") == (not m.feasible), m.violations


@pytest.mark.parametrize("method", ["celeritas", "order_place"])
def test_plans_carry_a_deadlock_free_order(method):
    g = samples.random_dag(150, seed=4, edge_prob=0.04, colocate_fraction=0.2)
    c = Cluster.preset("4xV100-nvlink")
    kw = {"congestion": False, "order": "est"} if method == "celeritas" else {}
    p = wb.solve(g, c, method=method, R=6, **kw)
    assert p.order is not None and sum(len(v) for v in p.order.values()) == g.n_ops
    s = simulate(p, c, order="plan", congestion=False)
    # the simulator runs each op no later than the EST schedule planned
    assert s.makespan <= p.predicted["makespan_ms"] * (1 + 1e-9) + 1e-9


def test_celeritas_beats_order_place_on_a_branchy_graph():
    g = samples.random_dag(400, seed=0, edge_prob=0.01)
    c = Cluster.preset("4xV100-nvlink").with_memory(g.total_memory() * 0.4)
    cel = wb.evaluate(wb.solve(g, c, method="celeritas"), c)
    op = wb.evaluate(wb.solve(g, c, method="order_place"), c)
    # both keep the static sum they constrain (their live peaks are the judge's to flag)
    assert cel.memory_fraction <= 1 + 1e-9 and op.memory_fraction <= 1 + 1e-9
    assert cel.makespan_ms < op.makespan_ms


def test_defaults_and_bad_parameters():
    g = samples.transformer(3000)
    c = Cluster.preset("4xV100-nvlink")
    assert default_R(g, c) == 93 and default_R(samples.transformer(40000), c) == 200
    assert default_M(g, c) == pytest.approx(0.25 * 16 * 2**30)
    assert default_M(g, c.with_memory(float("inf"))) is None
    small = samples.cnn(40)
    with pytest.raises(SolverError, match="R must be >= 1"):
        wb.solve(small, c, method="celeritas", R=0)
    with pytest.raises(SolverError, match="below the memory of op"):
        wb.solve(small, c, method="order_place", M=1.0)


def test_host_mode_cluster_and_heterogeneous_kinds():
    g = samples.random_dag(60, seed=2, cpu_only_fraction=0.2)
    c = Cluster([Device("gpu0"), Device("gpu1"), Device("cpu0", "cpu")], mode="host")
    p = wb.solve(g, c, method="celeritas", R=4)
    p.validate(c)
    assert np.isfinite(simulate(p, c).makespan)


def test_anchor_previous_vs_heaviest_predecessor():
    # c0 -> c1 -> c2 with a variable v -> c1; CPD-TOPO gives c0, v, c1, c2. v is moved off c0's
    # busy device (gap 10 > back cost 0.1); with anchor="previous" c1 then sticks to v's device
    # (gap 5 < back cost 6), with anchor="pred" it stays with its heavy predecessor c0.
    ops = [("c0", {"compute": {"gpu": 10.0}}), ("v", {"compute": {"gpu": 0.1}}),
           ("c1", {"compute": {"gpu": 10.0}}), ("c2", {"compute": {"gpu": 1.0}})]
    edges = [("c0", "c1", {"comm": 5.0}), ("v", "c1", {"comm": 0.1}),
             ("c1", "c2", {"comm": 6.0})]
    g = OpGraph.from_ops(ops, edges)
    # the rule itself: without the Order-Place guard (which keeps all on one device here)
    prev = wb.solve(g, TWO, method="celeritas", R=1, keep_start=False)
    pred = wb.solve(g, TWO, method="celeritas", R=1, anchor="pred", keep_start=False)
    assert prev.placement["v"] != prev.placement["c0"]
    assert prev.placement["c1"] == prev.placement["v"]
    assert pred.placement["c1"] == pred.placement["c0"]
    assert simulate(pred, TWO).makespan < simulate(prev, TWO).makespan
    with pytest.raises(SolverError, match="anchor must be"):
        wb.solve(g, TWO, method="celeritas", anchor="next")


def queue_graph():
    """a feeds a 40 ms op L, a 38 ms tensor to big and a 5 ms tensor to w (one link, 1 MB/ms).
    CPD-TOPO: a, L, big, w, z. big leaves L's busy device (EST 39 vs 41); w would start at 6
    on big's device if the link were free, but there its tensor queues behind big's (arrives
    at 44), so on L's device (41) it is earlier."""
    ops = [("a", 1.0), ("L", 40.0), ("big", 1.0), ("w", 10.0), ("z", 1.0)]
    edges = [("a", "big", 38e6), ("a", "w", 5e6), ("a", "L", 1e3), ("L", "z", 1e3),
             ("big", "z", 0.5e6), ("w", "z", 0.5e6)]
    return OpGraph.from_ops([(n, {"compute": {"gpu": t}}) for n, t in ops],
                            [(u, v, {"bytes": b}) for u, v, b in edges], name="queue")


def test_link_aware_est_avoids_a_queue():
    g = queue_graph()
    free = wb.solve(g, TWO, method="celeritas", R=1, congestion=False, order="est")
    links = wb.solve(g, TWO, method="celeritas", R=1, order="est")      # congestion=True
    assert free.placement["big"] == links.placement["big"] != free.placement["a"]
    assert free.placement["w"] == free.placement["big"]                  # contention-free EST 6
    assert links.placement["w"] == links.placement["L"]                  # link-aware: 41 < 44
    # the link-aware EST schedule is what the congested simulator realises ...
    assert links.predicted["makespan_ms"] == pytest.approx(simulate(links, TWO).makespan)
    assert simulate(links, TWO).makespan == pytest.approx(52.0)
    # ... and beats the contention-free decision under congestion (not without it)
    assert simulate(free, TWO).makespan == pytest.approx(56.5)
    assert simulate(free, TWO, congestion=False).makespan < simulate(links, TWO,
                                                                      congestion=False).makespan


def test_links_book_each_tensor_once_per_device():
    # one 6 ms tensor from a to three consumers on the other device travels once
    ops = [("a", 1.0), ("b", 30.0)] + [(f"w{i}", 2.0) for i in range(3)]
    edges = [("a", "b", 1e3)] + [("a", f"w{i}", 6e6) for i in range(3)]
    g = OpGraph.from_ops([(n, {"compute": {"gpu": t}}) for n, t in ops],
                         [(u, v, {"bytes": x}) for u, v, x in edges])
    p = wb.solve(g, TWO, method="celeritas", R=1, order="est")
    moved = [f"w{i}" for i in range(3) if p.placement[f"w{i}"] != p.placement["a"]]
    assert moved
    s = simulate(p, TWO)
    assert s.n_transfers == 1 + (p.placement["b"] != p.placement["a"])
    assert p.predicted["makespan_ms"] == pytest.approx(s.makespan)


def test_order_best_keeps_the_faster_of_the_two_orders():
    g = samples.random_dag(200, seed=3, edge_prob=0.03)
    c = Cluster.preset("4xV100-nvlink").with_memory(g.total_memory() * 0.4)
    best = wb.solve(g, c, method="celeritas", order="best")
    rank = wb.solve(g, c, method="celeritas", order="rank")
    est = wb.solve(g, c, method="celeritas", order="est")
    assert best.placement == rank.placement == est.placement       # the order only
    assert best.info["order"] in ("rank", "est")
    ms = {k: simulate(p, c).makespan for k, p in (("best", best), ("rank", rank), ("est", est))}
    assert ms["best"] == pytest.approx(min(ms["rank"], ms["est"]))
    assert best.predicted["makespan_ms"] == pytest.approx(ms["best"])
    assert rank.predicted["makespan_ms"] == pytest.approx(ms["rank"])
    assert best.stats["rank_order_ms"] == pytest.approx(ms["rank"])
    assert best.stats["est_order_ms"] == pytest.approx(ms["est"])
    with pytest.raises(SolverError, match="order must be"):
        wb.solve(g, c, method="celeritas", order="fifo")


@pytest.mark.parametrize("name", ["resnet50-4xV100", "rnnlm-4xV100"])
def test_never_worse_than_order_place_and_m_topo_on_suite_pairs(name):
    # issue 15's goal on two suite pairs, congestion on (rnnlm: link queueing, 152 ms before)
    from workbench.workloads import workload

    g, c = workload(name).build()
    ms = {m: simulate(wb.solve(g, c, method=m), c).makespan
          for m in ("m_topo", "order_place", "celeritas_portfolio")}
    assert ms["celeritas_portfolio"] <= min(ms["m_topo"], ms["order_place"])


# ------------------------------------------------ issue 29: Celeritas that holds off the suite
def _real(name: str, preset: str, pressure):
    from workbench.workloads import Workload, _sample

    # the paper's scenario: pressure on the static sum Celeritas constrains (issue 42)
    return Workload(name, _sample(name), preset, pressure, device_costs=True,
                    memory_model="static").build()


def test_link_relief_on_rnnlm_pcie_with_memory_pressure():
    """The issue's case: rnnlm on 2xV100-pcie, memory pressure 1.6. Adjusting Placement as
    written sends every time step's read of a 134 MB LSTM weight over the one PCIe link
    (641.7 ms with congestion, 69 ms without); link relief colocates heavy tensors' ends."""
    from workbench.solvers.celeritas.placement import heavy_colocation

    g, c = _real("rnnlm", "2xV100-pcie", 1.6)
    raw = wb.solve(g, c, method="celeritas", order="best")  # the rule, in the faster order
    s_raw = simulate(raw, c)
    assert s_raw.makespan > 5 * simulate(raw, c, congestion=False).makespan  # saturated
    p = wb.solve(g, c, method="celeritas_portfolio")
    ms = simulate(p, c).makespan
    assert p.info["placement_from"] == "relief"
    assert p.stats.get("solver_status", p.status) == "heuristic"
    assert p.stats["candidates_ms"]["adjusting"] == pytest.approx(s_raw.makespan)
    others = [simulate(wb.solve(g, c, method=m), c).makespan for m in ("order_place", "m_topo")]
    assert ms <= 1.05 * min(others) and ms < 0.1 * s_raw.makespan
    assert p.predicted["makespan_ms"] == pytest.approx(ms)
    # the heavy groups: every weight with the ops that read it, within 90 % of a device
    h = heavy_colocation(g, c)
    groups = h.colocation_groups
    cap = 0.9 * min(d.memory for d in c.devices)
    assert all(sum(h.op(v)["memory"] for v in ms_) <= cap for ms_ in groups.values())
    for members in g.colocation_groups.values():  # the graph's own groups stay together
        assert len({h.op(v)["colocate"] for v in members}) == 1
    w0 = h.op("lstm0/w")["colocate"]
    reads = [v for v in g.nx.successors("lstm0/w")]
    assert w0 is not None and reads and all(h.op(v)["colocate"] == w0 for v in reads)


def test_keep_start_holds_the_papers_order_place_guarantee():
    """mlp on 2xV100-pcie without memory pressure: Order-Place keeps the model on one device,
    Adjusting Placement spreads it and pays for transfers; the guard keeps Order-Place's
    placement, as the paper's Section 5.2 proof says it should."""
    g, c = _real("mlp", "2xV100-pcie", None)
    op = simulate(wb.solve(g, c, method="order_place"), c).makespan
    raw = simulate(wb.solve(g, c, method="celeritas"), c).makespan
    p = wb.solve(g, c, method="celeritas_portfolio")
    assert raw > op * 1.05  # the rule as written loses here
    assert simulate(p, c).makespan <= op * (1 + 1e-9)
    assert p.info["placement_from"] == "order_place" and p.method == "celeritas_portfolio"


def test_relief_bad_input():
    g = samples.diamond()
    with pytest.raises(SolverError, match="relief"):
        wb.solve(g, TWO, method="celeritas", relief=0.5)


def test_relief_plan_that_strands_an_op_is_no_candidate():
    """Regression (contract seed 156, starved memory): best effort on the heavy-colocated graph
    left a grown group's member on a device that cannot run it; that plan is dropped."""
    from workbench.testing.contract import make_case

    case = make_case(156, max_ops=300)
    p = wb.solve(case.graph, case.cluster, method="celeritas_portfolio")
    p.validate(case.cluster)
    assert "relief_dropped" in p.stats and p.info["placement_from"] != "relief"


def test_even_split_is_contiguous_and_even():
    """A chain of 8 ops of 1 MB on 4 devices, unfused (R=1): two ops per device, in chain
    order, hand-checked."""
    from workbench.solvers.celeritas.placement import even_split

    ops = [(f"o{i}", {"compute": {"gpu": 1.0}, "memory": 1e6}) for i in range(8)]
    g = OpGraph.from_ops(ops, [(f"o{i}", f"o{i + 1}", {"bytes": 1e3}) for i in range(7)])
    c = Cluster([Device(f"gpu{i}") for i in range(4)], intra_host=Link(0.0, 1e6))
    p = even_split(g, c, R=1)
    assert [p.placement[f"o{i}"] for i in range(8)] == \
        ["gpu0", "gpu0", "gpu1", "gpu1", "gpu2", "gpu2", "gpu3", "gpu3"]
    # devices too small for their share: the run spills to the next device that fits
    small = Cluster([Device(f"gpu{i}", memory=1.5e6) for i in range(4)] +
                    [Device("gpu4", memory=8e6)], intra_host=Link(0.0, 1e6))
    q = even_split(g, small, R=1)
    assert q.status == "heuristic" and q.placement["o1"] != q.placement["o0"]


def test_even_split_kept_on_resnet50_8xa100():
    """The grid's one miss before the extension: resnet50 on 8xA100-nvlink without memory
    pressure. Adjusting Placement as written (and Order-Place) keep the model on one or two
    GPUs (6.15 ms); m_topo's contiguous split over eight runs 5.43 ms. The even split of the
    fused CPD-TOPO sequence is kept by the judge."""
    g, c = _real("resnet50", "8xA100-nvlink", None)
    paper = wb.solve(g, c, method="celeritas")  # the rule as written, the default
    mt = simulate(wb.solve(g, c, method="m_topo"), c).makespan
    assert simulate(paper, c).makespan > 1.05 * mt         # the paper's rules miss by > 5 %
    no_split = wb.solve(g, c, method="celeritas_portfolio", split_start=False)
    assert no_split.info["placement_from"] != "even_split"
    p = wb.solve(g, c, method="celeritas_portfolio")
    ms = simulate(p, c).makespan
    assert p.info["placement_from"] == "even_split" and len(p.devices_used()) > 2
    assert ms <= mt and ms == pytest.approx(p.stats["candidates_ms"]["even_split"])
    assert ms == pytest.approx(min(p.stats["candidates_ms"].values()))
