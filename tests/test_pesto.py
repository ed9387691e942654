"""Tests of the Pesto ILP and the pesto method (workbench/solvers/pesto.py)."""

from __future__ import annotations

import math

import pytest

from workbench import Cluster, Device, Link, samples, simulate, solve
from workbench.errors import GraphError, InfeasibleError, SolverError
from workbench.solvers import SOLVERS
from workbench.testing.oracles import best_makespan


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
    assert p.status in ("optimal", "feasible", "time_limit")
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
    assert "mip_gap" in st and st["solve_s"] < 30
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
