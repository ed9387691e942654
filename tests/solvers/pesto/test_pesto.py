"""Tests of the Pesto ILP and the pesto method (workbench/solvers/pesto.py)."""

from __future__ import annotations

import math

import pytest

from workbench import Cluster, Device, Link, samples, simulate, solve
from workbench.errors import GraphError, InfeasibleError, SolverError
from workbench.solvers import SOLVERS
from workbench.testing.oracles import best_makespan
from workbench.testing.timing import slowdown


def brute_force(g, c, congestion: bool) -> float:
    return best_makespan(g, c, congestion=congestion)


SLOW2 = Cluster([Device("gpu0"), Device("gpu1")], intra_host=Link(0.05, 1e6), name="slow2")
HET3 = Cluster([Device("gpu0"), Device("gpu1"), Device("cpu0", kind="cpu")],
               intra_host=Link(0.05, 2e6), name="het3")


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)


@pytest.mark.parametrize("graph", ["diamond", "pesto_fig2"])
@pytest.mark.parametrize("cluster", ["2xV100-pcie", "slow2"])
@pytest.mark.parametrize("congestion", [False, True])
def test_ilp_optimum_equals_simulation_and_brute_force(graph, cluster, congestion):
    g = samples.load_sample(graph)
    c = SLOW2 if cluster == "slow2" else Cluster.preset(cluster)
    # a weak warm start so that the ILP has to do the work
    p = solve(g, c, method="pesto_ilp", engine="milp", congestion=congestion, gap=1e-9,
              time_limit=30,
              warm_start="round_robin")
    assert p.stats["ilp_status"] == "optimal" and p.stats["chosen"] == "ilp"
    # "optimal" only under the judge's own model (congestion on)
    assert p.status == ("optimal" if congestion else "feasible")
    sim = simulate(p, c, congestion=congestion).makespan
    assert _close(p.predicted["makespan_ms"], sim)
    assert _close(sim, brute_force(g, c, congestion))


@pytest.mark.parametrize("seed", [1, 3])
def test_ilp_exact_on_random_heterogeneous(seed):
    g = samples.random_dag(6, seed=seed, edge_prob=0.4, ccr=1.0)
    for congestion in (False, True):
        p = solve(g, HET3, method="pesto_ilp", engine="milp", congestion=congestion, gap=1e-9,
                  time_limit=30, warm_start="round_robin")
        sim = simulate(p, HET3, congestion=congestion).makespan
        assert _close(p.predicted["makespan_ms"], sim)
        assert _close(sim, brute_force(g, HET3, congestion))


@pytest.mark.parametrize("seed", [1, 3])
def test_congestion_constraints_matter(seed):
    """Fig. 5 in miniature: the congestion-blind optimum looks faster but runs slower on FIFO
    links; the congestion-aware optimum is exact under the congested simulator."""
    g = samples.random_dag(6, seed=seed, edge_prob=0.4, ccr=1.0)
    c = Cluster.preset("2xV100-pcie")
    on = solve(g, c, method="pesto_ilp", engine="milp", congestion=True, gap=1e-9, time_limit=30)
    off = solve(g, c, method="pesto_ilp", engine="milp", congestion=False, gap=1e-9,
                time_limit=30)
    assert on.stats["congestion_modelled"] and not off.stats["congestion_modelled"]
    on_sim = simulate(on, c, congestion=True).makespan
    off_sim = simulate(off, c, congestion=True).makespan
    assert _close(on.predicted["makespan_ms"], on_sim)
    assert _close(on_sim, brute_force(g, c, True))
    assert _close(off.predicted["makespan_ms"], brute_force(g, c, False))
    assert off.predicted["makespan_ms"] < on.predicted["makespan_ms"] - 1e-6
    assert on_sim < off_sim - 1e-6


def test_memory_colocation_affinity():
    g = samples.random_dag(9, seed=4, colocate_fraction=0.4, cpu_only_fraction=0.2,
                           memory=1e6, edge_prob=0.3)
    c = Cluster([Device("gpu0", memory=4.5e6), Device("gpu1", memory=4.5e6),
                 Device("cpu0", kind="cpu", memory=4.5e6)], intra_host=Link(0.02, 5e6))
    p = solve(g, c, method="pesto_ilp", engine="milp", time_limit=20)
    p.validate(c)
    used = {d: 0.0 for d in c.names}
    for v, d in p.placement.items():
        used[d] += g.op(v)["memory"]
        assert c.device(d).kind in g.op(v)["compute"]
    assert all(used[d] <= c.device(d).memory * (1 + 1e-9) for d in c.names)
    for ms in g.colocation_groups.values():
        assert len({p.placement[v] for v in ms}) == 1
    assert p.stats.get("solver_status", p.status) in ("optimal", "feasible", "time_limit")
    assert p.stats["mip_gap"] >= 0 or p.stats["chosen"] == "warm_start"


def test_infeasible_memory_names_shortfall():
    g = samples.diamond().map_ops(lambda v, a: {**a, "memory": 6e9})
    c = Cluster.preset("2xV100-pcie").with_memory(10e9)
    with pytest.raises(InfeasibleError, match="short by"):
        solve(g, c, method="pesto_ilp", time_limit=5)
    with pytest.raises(InfeasibleError, match="short by"):
        solve(g, c, method="pesto", time_limit=5)


def test_time_limit_status_gap_and_never_worse_than_warm_start():
    g = samples.lstm_grid(40, layers=2)
    c = Cluster.preset("2xV100-pcie")
    p = solve(g, c, method="pesto_ilp", engine="milp", time_limit=2)
    st = p.stats
    assert p.status in ("optimal", "time_limit", "feasible")
    assert st["ilp_status"] in ("optimal", "time_limit", "feasible")
    if st["ilp_status"] == "time_limit":
        assert p.status == "time_limit"
    assert "mip_gap" in st and (st["solve_s"] < 30 or st["solve_s"] / slowdown() < 30)
    ms = simulate(p, c).makespan
    assert ms <= st["warm_start_final_simulated_ms"] + 1e-9
    assert _close(ms, st[f"{st['chosen']}_final_simulated_ms"])


def test_pesto_coarsens_and_expands():
    g = samples.lstm_grid(120, layers=2)
    c = Cluster.preset("2xV100-pcie")
    p = solve(g, c, method="pesto", engine="milp", target=14, time_limit=4, reorder=False,
              guard=False)
    p.validate(c)
    st = p.stats
    assert st["coarse_vertices"] <= 14
    assert p.status in ("feasible", "time_limit")  # coarsened: never claims optimal
    ms = simulate(p, c).makespan
    assert ms <= st["warm_start_final_simulated_ms"] + 1e-9
    # members of a merged vertex run consecutively in topological order
    members = p.info["coarse_members"]
    for d, seq in p.order.items():
        pos = {op: i for i, op in enumerate(seq)}
        for ops in members.values():
            if p.placement[ops[0]] == d:
                idx = [pos[o] for o in ops]
                assert idx == list(range(idx[0], idx[0] + len(ops)))
    q = solve(g, c, method="pesto", engine="milp", target=14, time_limit=4, guard=False)
    assert simulate(q, c).makespan <= ms + 1e-9  # reordering only ever helps
    # guarded: never worse than q
    r = solve(g, c, method="pesto", engine="milp", target=14, time_limit=4)
    assert simulate(r, c).makespan <= simulate(q, c).makespan + 1e-9


def test_pesto_bad_input():
    g = samples.random_dag(20, seed=1, cpu_only_fraction=0.3)
    c = Cluster([Device("gpu0"), Device("cpu0", kind="cpu")])
    with pytest.raises(GraphError, match="never merge"):
        solve(g, c, method="pesto", engine="milp", target=1)
    with pytest.raises(SolverError, match="warm_start"):
        solve(samples.diamond(), Cluster.preset("2xV100-pcie"), method="pesto_ilp",
              warm_start="nope")


def test_no_milp_solver_installed(monkeypatch):
    from workbench.solvers import milp

    monkeypatch.setattr(milp, "available_solvers", list)
    with pytest.raises(SolverError, match="highspy"):
        solve(samples.diamond(), Cluster.preset("2xV100-pcie"), method="pesto_ilp",
              engine="milp")


def test_registered():
    assert SOLVERS["pesto"].orders and SOLVERS["pesto_ilp"].exact
    assert SOLVERS["pesto"].family == "pesto"


def test_pesto_is_never_worse_than_the_original_heuristics():
    """guard=True (default): the expanded coarse plan is checked against the warm-start
    heuristics run on the original graph."""
    import workbench as wb

    g = wb.samples.inception(120, seed=0)
    c = wb.Cluster.preset("2xV100-pcie")
    plan = wb.solve(g, c, method="pesto", engine="milp", target=12, time_limit=5)
    best = min(wb.simulate(wb.solve(g, c, method=m), c).makespan
               for m in ("dpos", "heft", "m_etf"))
    assert wb.simulate(plan, c).makespan <= best + 1e-9
    raw = wb.solve(g, c, method="pesto", engine="milp", target=12, time_limit=5, guard=False)
    if wb.simulate(raw, c).makespan > best + 1e-9:
        assert plan.stats["chosen"] == "original_heuristic" and "fallback" in plan.stats


# ---------------------------------------------------------------- the paper's memory balance
def _footprints(plan, fp) -> dict:
    per = {d: 0.0 for d in plan.devices_used()}
    for op, d in plan.placement.items():
        per[d] += fp[plan.graph.index[op]]
    return per


def test_tensor_footprint_is_inputs_plus_outputs():
    from workbench.solvers.pesto.ilp import tensor_footprint

    g = samples.pesto_fig2()
    fp = tensor_footprint(g)
    # by hand: each op's in-edge bytes plus each distinct tensor it produces once
    for i, v in enumerate(g.ops):
        ins = sum(g.edge(u, v)["bytes"] for u in g.nx.predecessors(v))
        outs = sum({g.edge(v, w)["bytes"] for w in g.nx.successors(v)})  # one per size
        assert fp[i] == pytest.approx(ins + outs)
    # 7 edges read + 6 tensors written (A's one tensor feeds B and F), 10 MB each
    assert fp.sum() == pytest.approx(130e6)


def test_default_pesto_is_the_papers_milp_with_memory_balance():
    g, c = samples.lstm_grid(60, layers=2), Cluster.preset("2xV100-pcie")
    p = solve(g, c, method="pesto", target=12, time_limit=5)
    assert p.stats["engine"] == "milp" and p.stats["coarse_vertices"] <= 12
    assert p.stats["memory_balance"].startswith("footprint per device <=")


def test_memory_balance_rows_bind_and_hold():
    """Tolerance 0 on the 7-op Fig. 2 graph: the ILP's placement keeps every device within its
    cap (half the footprint plus the largest op), so the one-device optimum is cut off and the
    ILP's optimum is not claimed optimal for the judge."""
    from workbench.solvers.pesto.ilp import _run_ilp, balance_caps, tensor_footprint

    g, c = samples.pesto_fig2(), SLOW2
    fp = tensor_footprint(g)
    caps = balance_caps(fp, c, 0.0)
    ilp_plan, _warm, stats = _run_ilp(g, c, congestion=True, time_limit=20, gap=1e-9,
                                      warm_start="auto", seed=0, symmetry=True, threads=None,
                                      memory_balance=0.0)
    assert stats["ilp_status"] == "optimal" and "memory_balance_dropped" not in stats
    assert not stats["warm_start_balanced"]  # the best heuristic runs all on one device
    assert len(ilp_plan.devices_used()) == 2
    assert all(v <= caps[0] * (1 + 1e-9) for v in _footprints(ilp_plan, fp).values())
    assert ilp_plan.status == "feasible" and "balance" in stats["not_optimal_because"]
    free = solve(g, c, method="pesto_ilp", engine="milp", time_limit=20, gap=1e-9)
    assert free.status == "optimal"  # without the rows: the judge's optimum, all on one device
    assert simulate(free, c).makespan < simulate(ilp_plan, c).makespan - 1e-9
    # the method keeps the faster plan of the ILP and its warm start (as without the rows)
    p = solve(g, c, method="pesto_ilp", engine="milp", memory_balance=0.0, time_limit=20,
              gap=1e-9)
    assert p.stats["chosen"] == "warm_start" and p.status == "feasible"


def test_memory_balance_with_a_huge_tolerance_adds_no_rows():
    from workbench.solvers.pesto.ilp import build_pesto_ilp

    g, c = samples.pesto_fig2(), SLOW2
    loose = build_pesto_ilp(g, c, horizon=50.0)
    m = type(loose)(g, c, congestion=True, horizon=50.0, memory_balance=100.0)
    assert m.balance_rows == 0 and loose.balance_caps is None
    tight = type(loose)(g, c, congestion=True, horizon=50.0, memory_balance=0.0)
    assert tight.balance_rows == 2


def test_memory_balance_dropped_when_affinity_makes_it_infeasible():
    """A CPU-only chain c0 -> c1 -> c2 (10 MB tensors) feeding a GPU op: the CPU must hold
    10 + 20 + 11 = 41 MB of the 42 MB footprint, over its cap (a third plus the largest op,
    34 MB); the rows are dropped and a plan still comes back."""
    from workbench.graph import OpGraph
    from workbench.solvers.pesto.ilp import balance_caps, tensor_footprint

    ops = [(f"c{i}", {"compute": {"cpu": 1.0}, "memory": 0.0}) for i in range(3)]
    ops += [("g", {"compute": {"cpu": 5.0, "gpu": 1.0}, "memory": 0.0})]
    edges = [("c0", "c1", {"bytes": 1e7}), ("c1", "c2", {"bytes": 1e7}),
             ("c2", "g", {"bytes": 1e6})]
    g = OpGraph.from_ops(ops, edges, name="cpu_heavy")
    c = Cluster([Device("cpu0", kind="cpu"), Device("gpu0"), Device("gpu1")],
                intra_host=Link(0.01, 1e7))
    fp = tensor_footprint(g)
    assert fp[:3].sum() == pytest.approx(41e6)
    assert fp[:3].sum() > balance_caps(fp, c, 0.25)[0] == pytest.approx(34e6)
    p = solve(g, c, method="pesto_ilp", engine="milp", memory_balance=0.25, time_limit=10)
    assert p.stats["memory_balance_dropped"] and p.stats["memory_balance"] == "off"
    assert {p.placement[f"c{i}"] for i in range(3)} == {"cpu0"}


def test_balance_caps_bad_tolerance():
    from workbench.solvers.pesto.ilp import balance_caps

    with pytest.raises(SolverError, match="memory_balance"):
        balance_caps([1.0, 2.0], Cluster.preset("2xV100-pcie"), -0.1)
    with pytest.raises(SolverError, match="memory_balance"):
        solve(samples.diamond(), Cluster.preset("2xV100-pcie"), method="pesto_ilp",
              memory_balance=0.25, time_limit=5)


def test_pesto_on_one_device_has_no_balance_rows():
    """Regression (contract seed 10845): one accelerator, no balance rows to build."""
    c = Cluster([Device("gpu0")], name="one")
    p = solve(samples.lstm_grid(40, layers=2), c, method="pesto", target=8, time_limit=5)
    assert p.stats["memory_balance"] == "off" and p.devices_used() == ["gpu0"]


# ------------------------------------------------------------- issue 46: who made the plan
def test_pesto_says_which_component_produced_the_plan_and_the_fine_balance():
    g, c = samples.lstm_grid(60, layers=2), Cluster.preset("2xV100-pcie")
    p = solve(g, c, method="pesto", target=12, time_limit=10, threads=1)
    who = p.stats["produced_by"]
    assert who.split(":")[0] in ("milp@coarse", "warm_start", "original_heuristic")
    if p.stats["chosen"] == "original_heuristic":
        assert who == f"original_heuristic:{p.info['warm_start_method']}"
    elif who.startswith("warm_start"):
        assert who.endswith("@coarse") and p.stats["warm_start_method"] in who
    fb = p.stats["fine_balance"]
    assert set(fb) == {"max_share", "worst", "holds"} and 0 < fb["max_share"] <= 1
    assert fb["holds"] and fb["worst"] <= 1 + 1e-9


@pytest.mark.parametrize("refine", [False, True])
@pytest.mark.parametrize("mode", ["cut", "ratio", "head", "tail"])
def test_repair_balance_meets_the_caps_on_a_real_graph(mode, refine):
    """A TF-extracted sample placed on one GPU of four breaks the balance; the repair meets
    every device's cap, keeps colocation groups whole, moves only what it must."""
    from workbench.solvers.pesto.balance import repair_balance
    from workbench.solvers.pesto.heuristics import respects
    from workbench.solvers.pesto.ilp import fine_balance

    g, c = samples.load_sample("mlp"), Cluster.preset("4xV100-nvlink")
    p = solve(g, c, method="single")
    before = fine_balance(p, c, 0.25)
    assert not before["holds"] and before["max_share"] == 1.0
    q, moved = repair_balance(p, c, 0.25, mode, refine=refine)
    after = fine_balance(q, c, 0.25)
    assert after["holds"] and 0 < moved < g.n_ops and len(q.devices_used()) >= 2
    assert respects(q, c) and g.colocation_groups
    assert sum(q.placement[v] != p.placement[v] for v in g.ops) == moved
    assert simulate(q, c).makespan > 0
    assert repair_balance(q, c, 0.25, mode) == (q, 0)
    if refine:   # the cleanup only makes moves that cut fewer bytes between devices
        def cut(plan):
            return sum(b for u, v, b in g.nx.edges(data="bytes")
                       if plan.placement[u] != plan.placement[v])
        assert cut(q) <= cut(repair_balance(p, c, 0.25, mode)[0])


def test_repair_balance_respects_memory_and_bad_mode():
    """Devices without room for an op's memory take none: the repair stops short of the balance
    instead of overfilling them, and fine_balance says so."""
    from dataclasses import replace

    from workbench.solvers.pesto.balance import repair_balance
    from workbench.solvers.pesto.heuristics import respects
    from workbench.solvers.pesto.ilp import fine_balance

    g = samples.load_sample("mlp")
    c = Cluster.preset("4xV100-nvlink")
    p = solve(g, c, method="single")
    # gpu0 unlimited (equal shares then), the others with room for no op that holds memory
    full = c.with_devices([replace(c.devices[0], memory=math.inf)] +
                          [replace(d, memory=1.0) for d in c.devices[1:]])
    q, moved = repair_balance(p, full, 0.25)
    assert respects(q, full) and moved > 0
    assert all(g.op(v)["memory"] == 0 for v in g.ops if q.placement[v] != "gpu0")
    assert not fine_balance(q, full, 0.25)["holds"]
    with pytest.raises(SolverError, match="mode"):
        repair_balance(p, c, 0.25, "nope")


def test_pesto_fine_balance_holds_on_the_returned_plan():
    """The guard's and the MILP's candidates are repaired before they are compared: the
    returned fine plan meets the balance, and says how many ops the repair moved (on this
    graph the expanded coarse plans break it: 237 ops moved in the run we looked at)."""
    from workbench.solvers.pesto.balance import MODES

    g, c = samples.load_sample("resnet_small"), Cluster.preset("4xV100-nvlink")
    p = solve(g, c, method="pesto", target=10, time_limit=10, threads=1)
    assert p.stats["fine_balance"]["holds"]
    if "balance_moved_ops" in p.stats:
        assert p.stats["balance_moved_ops"] > 0
        assert p.stats["balance_repair"].removesuffix("+refine") in MODES
    off = solve(g, c, method="pesto", target=10, time_limit=10, threads=1,
                memory_balance=None)
    assert "fine_balance" not in off.stats and "balance_moved_ops" not in off.stats


def test_pesto_looser_memory_never_worse_than_the_tighter_start():
    g = samples.lstm_grid(60, layers=2)
    base = Cluster.preset("2xV100-pcie")
    tight = base.with_memory(g.total_memory() * 0.6)
    loose = base.with_memory(g.total_memory() * 2)
    p_tight = solve(g, tight, method="pesto", target=12, time_limit=8, threads=1)
    ms_tight = simulate(p_tight, loose).makespan
    p = solve(g, loose, method="pesto", target=12, time_limit=8, threads=1, start=p_tight)
    assert simulate(p, loose).makespan <= ms_tight + 1e-9
    assert p.stats["start_ms"] == pytest.approx(ms_tight)
    if p.stats["produced_by"] == "start":
        assert p.placement == p_tight.placement
    with pytest.raises(SolverError, match="same graph"):
        solve(g, loose, method="pesto", target=12, time_limit=5, threads=1,
              start=solve(samples.diamond(), loose, method="single"))
