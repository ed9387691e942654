"""Tests of the CP-SAT scheduling engine (workbench/solvers/cpsat.py) and Pesto on it
(workbench/solvers/cpsat_pesto.py)."""

from __future__ import annotations

import math

import pytest

from workbench import Cluster, Device, Link, samples, simulate, solve
from workbench.errors import InfeasibleError, SolverError
from workbench.solvers.pesto.cpsat import solve_cpsat, time_scale
from workbench.solvers.pesto.cpsat_engine import schedule_groups, units_target
from workbench.testing.oracles import best_makespan


def brute_force(g, c, congestion: bool) -> float:
    return best_makespan(g, c, congestion=congestion)


SLOW2 = Cluster([Device("gpu0"), Device("gpu1")], intra_host=Link(0.05, 1e6), name="slow2")
HET3 = Cluster([Device("gpu0"), Device("gpu1"), Device("cpu0", kind="cpu")],
               intra_host=Link(0.05, 2e6), name="het3")
HOST3 = Cluster([Device("gpu0"), Device("gpu1"), Device("cpu0", kind="cpu")], mode="host",
                host_link=Link(0.05, 1e6), name="host3")


def _close(a, b, tol=1e-3):
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)


@pytest.mark.parametrize("graph", ["diamond", "pesto_fig2"])
@pytest.mark.parametrize("cluster", ["2xV100-pcie", "slow2"])
@pytest.mark.parametrize("congestion", [False, True])
def test_optimum_equals_simulation_and_brute_force(graph, cluster, congestion):
    g = samples.load_sample(graph)
    c = SLOW2 if cluster == "slow2" else Cluster.preset(cluster)
    res = solve_cpsat(g, c, congestion=congestion, time_limit=20, workers=1)  # no hint
    assert res.status == "optimal" and res.cp_status == "OPTIMAL"
    opt = brute_force(g, c, congestion)
    assert _close(res.simulated_ms, opt) and _close(res.objective_ms, opt)
    assert res.bound_ms <= opt + 1e-9 and res.gap < 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 3])
@pytest.mark.parametrize("cluster", ["het3", "host3"])
def test_exact_on_random_heterogeneous_and_host_staged(seed, cluster):
    g = samples.random_dag(6, seed=seed, edge_prob=0.4, ccr=1.0)
    c = HET3 if cluster == "het3" else HOST3
    for congestion in (False, True):
        res = solve_cpsat(g, c, congestion=congestion, time_limit=20, workers=1)
        opt = brute_force(g, c, congestion)
        assert res.bound_ms <= opt + 1e-6, "the bound must be a lower bound"
        assert _close(res.simulated_ms, opt)
        assert res.status == "optimal"


def test_congestion_matters_pesto_fig5_in_miniature():
    g = samples.random_dag(6, seed=1, edge_prob=0.4, ccr=1.0)
    c = Cluster.preset("2xV100-pcie")
    on = solve_cpsat(g, c, congestion=True, time_limit=20, workers=1)
    off = solve_cpsat(g, c, congestion=False, time_limit=20, workers=1)
    assert _close(on.simulated_ms, brute_force(g, c, True))
    assert off.objective_ms <= on.objective_ms + 1e-9
    assert _close(off.objective_ms, brute_force(g, c, False))


def test_hint_is_a_solution_and_never_lost():
    g = samples.inception(60, seed=0, ccr=1.0)
    c = Cluster.preset("4xV100-nvlink")
    warm = simulate(solve(g, c, method="m_etf"), c)
    res = solve_cpsat(g, c, hint=warm, time_limit=10, workers=2)
    assert res.has_solution
    assert res.objective_ms <= warm.makespan + 1e-6  # the hint (rounded down) is feasible
    assert res.bound_ms <= res.simulated_ms + 1e-9
    assert 0 <= res.gap <= 1


def test_memory_colocation_affinity_and_infeasible():
    g = samples.random_dag(9, seed=4, colocate_fraction=0.4, cpu_only_fraction=0.2,
                           memory=1e6, edge_prob=0.3)
    c = Cluster([Device("gpu0", memory=4.5e6), Device("gpu1", memory=4.5e6),
                 Device("cpu0", kind="cpu", memory=4.5e6)], intra_host=Link(0.02, 5e6))
    res = solve_cpsat(g, c, time_limit=10, workers=1)
    p = res.plan(g, c)
    used = {d: 0.0 for d in c.names}
    for v, d in p.placement.items():
        used[d] += g.op(v)["memory"]
        assert c.device(d).kind in g.op(v)["compute"]
    assert all(used[d] <= c.device(d).memory * (1 + 1e-9) for d in c.names)
    for ms in g.colocation_groups.values():
        assert len({p.placement[v] for v in ms}) == 1
    tight = c.with_memory(2.9e6)  # 9 ops of 1 MB cannot fit in 3 x 2.9 MB
    with pytest.raises(InfeasibleError, match="CP-SAT proves"):
        solve_cpsat(g, tight, time_limit=10, workers=1)


def test_groups_share_a_device_and_keep_their_order():
    g = samples.lstm_grid(40, layers=2)
    c = Cluster.preset("2xV100-pcie")
    warm = simulate(solve(g, c, method="heft"), c)
    groups = schedule_groups(warm, 10)
    assert len(groups) <= 10 and sorted(v for grp in groups for v in grp) == sorted(g.ops)
    for grp in groups:  # runs of one device in the warm start
        assert len({int(warm.device[g.index[v]]) for v in grp}) == 1
    res = solve_cpsat(g, c, hint=warm, groups=groups, time_limit=10, workers=1)
    assert not res.stats["bound_valid"]
    p = res.plan(g, c)
    for grp in groups:
        d = p.placement[grp[0]]
        assert all(p.placement[v] == d for v in grp)
        pos = [p.order[d].index(v) for v in grp]
        assert pos == sorted(pos)
    assert res.objective_ms <= warm.makespan + 1e-6
    with pytest.raises(SolverError, match="outside graph"):
        solve_cpsat(g, c, groups=[[0, 10**6]], time_limit=2)


def test_time_scale_and_units_target():
    assert time_scale(1.0) == 10**7 and time_scale(1e7) == 1
    assert units_target(2, 120) > units_target(4, 120) > units_target(4, 10)


def test_pesto_ilp_uses_cpsat_by_default_pesto_the_papers_milp():
    g, c = samples.pesto_fig2(), Cluster.preset("2xV100-pcie")
    p = solve(g, c, method="pesto_ilp", time_limit=10, warm_start="round_robin")
    assert p.stats["engine"] == "cpsat" and p.status == "optimal"
    assert _close(p.stats["bound_ms"], 8.0) and p.stats["gap"] < 1e-6
    assert _close(simulate(p, c).makespan, 8.0) and p.stats["chosen"] == "ilp"
    d = solve(samples.lstm_grid(60, layers=2), c, method="pesto", target=12, time_limit=5)
    assert d.stats["engine"] == "milp" and d.stats["memory_balance"].startswith("footprint")
    assert d.stats["coarse_vertices"] <= 12
    q = solve(samples.lstm_grid(60, layers=2), c, method="pesto", target=12, time_limit=5,
              engine="cpsat")
    assert q.stats["units"] <= 12 and q.stats["bound_ms"] is None
    assert q.status in ("feasible", "time_limit")  # coarsened: never claims optimal
    assert simulate(q, c).makespan <= q.stats["warm_start_predicted_ms"] + 1e-9
    with pytest.raises(SolverError, match="engine"):
        solve(g, c, method="pesto", engine="gurobi")


def test_compare_shows_the_best_known_bound_and_gaps_to_it():
    import workbench as wb
    from workbench.judge.bounds import lower_bounds

    g = samples.diamond()
    df = wb.compare(g, SLOW2, methods=["round_robin", "pesto_ilp"], progress=False,
                    time_limit=10).table
    own = lower_bounds(g, SLOW2)["makespan_ms"]
    row = df.set_index("method")
    proven = row.loc["pesto_ilp", "proven_bound"]
    assert proven > own + 1e-6  # CP-SAT proves more than the critical path
    assert (df["makespan_lb"] == max(own, proven)).all()
    assert math.isnan(row.loc["round_robin", "proven_bound"])
    assert row.loc["pesto_ilp", "makespan_gap"] < 1e-3
    assert (df["makespan_ms"] >= df["makespan_lb"] - 1e-9).all()
    off = wb.compare(g, SLOW2, methods=["pesto_ilp"], progress=False, time_limit=10,
                     congestion=False, params={"pesto_ilp": {"congestion": True}})
    assert off.table["makespan_lb"].iloc[0] == pytest.approx(own)  # congested bound not used


def test_hint_names_each_variable_once_host_mode_diamond():
    """Regression: in host mode the hint named a variable twice (an interval's end is its start
    plus a fixed duration), CP-SAT answered MODEL_INVALID and pesto_ilp fell back to its warm
    start with status time_limit, as if it had run out of time."""
    c = Cluster([Device("gpu0"), Device("gpu1")], intra_host=Link(0.0, 1e6), mode="host")
    g = samples.diamond()
    plan = solve(g, c, method="pesto_ilp", seed=0, time_limit=5)
    assert plan.stats["cp_status"] == "OPTIMAL"
    assert plan.status == "optimal"
    assert _close(simulate(plan, c).makespan, brute_force(g, c, True))


def _real(name: str, preset: str, pressure: float | None = 1.6):
    from workbench.costs.roofline import costs_for_cluster
    from workbench.workloads import apply_memory_pressure

    c = Cluster.preset(preset)
    g = costs_for_cluster(samples.load_sample(name), c)
    # the paper's scenario: pressure on the static sum the methods constrain (issue 42)
    return g, (apply_memory_pressure(g, c, pressure, model="static") if pressure else c)


HOST4 = Cluster([Device(f"gpu{i}") for i in range(3)] + [Device("cpu0", kind="cpu")],
                mode="host", host_link=Link(0.01, 1.2e7), name="host4")


@pytest.mark.parametrize("warm", ["m_topo", "m_etf", "order_place"])
@pytest.mark.parametrize("cluster", ["4xV100-nvlink", "host4"])
@pytest.mark.parametrize("congestion", [True, False])
@pytest.mark.parametrize("target", [None, 40])
def test_hint_is_exactly_a_solution_on_a_real_graph(warm, cluster, congestion, target):
    """CP-SAT with every variable fixed to the hint must accept it. A real graph has
    zero-duration ops that start together (their order is the run rank, not the op index),
    transfers back to back on a link (their floored times must still chain), and producers
    near the end whose unused transfers must be parked inside the horizon."""
    if cluster == "host4":
        g = samples.load_sample("resnet_small")
        c = HOST4
    else:
        g, c = _real("resnet_small", cluster)
    s = simulate(solve(g, c, method=warm), c, congestion=congestion)
    groups = schedule_groups(s, target) if target else None
    res = solve_cpsat(g, c, hint=s, groups=groups, congestion=congestion, time_limit=30,
                      workers=1, parameters={"fix_variables_to_their_hinted_value": True})
    assert res.has_solution, res.cp_status
    assert res.objective_ms <= s.makespan + 1e-6
    if target:
        assert res.stats["fused_runs"] > 0


@pytest.mark.slow
def test_gapless_runs_become_one_interval_and_keep_the_hint():
    from workbench.solvers.pesto.hint import gapless_blocks

    g, c = _real("resnet_small", "4xV100-nvlink")
    s = simulate(solve(g, c, method="order_place"), c)
    groups = schedule_groups(s, 30)
    chains = [[g.index[v] for v in grp] for grp in groups if len(grp) > 1]
    blocks = gapless_blocks(g, s, chains)
    assert blocks and all(len(b) > 1 for b in blocks)
    for b in blocks:  # back to back on one device in the hint
        assert len({int(s.device[i]) for i in b}) == 1
        for a, z in zip(b, b[1:]):
            assert s.start[z] <= s.end[a] + 1e-9
    # the interval counts are the models' and the hint is a solution of both, kept: 6 s for
    # the fused model (20 s before; it stops in under 1 s), 2 s x load for the plain one, which
    # runs to its limit (6 s before; at 1 s it still returned the hint, 506 intervals)
    from workbench.testing.timing import slowdown

    fused = solve_cpsat(g, c, hint=s, groups=groups, time_limit=6, workers=1)
    plain = solve_cpsat(g, c, hint=s, groups=groups, time_limit=min(6.0, 2.0 * slowdown()),
                        workers=1, fuse=False)
    assert fused.stats["n_intervals"] < plain.stats["n_intervals"]
    for res in (fused, plain):
        assert res.simulated_ms <= s.makespan * (1 + 1e-6)
        p = res.plan(g, c)
        for grp in groups:  # groups stay on one device in their order
            d = p.placement[grp[0]]
            pos = [p.order[d].index(v) for v in grp]
            assert all(p.placement[v] == d for v in grp) and pos == sorted(pos)
    # a fused run's ops sit back to back in the solution too
    st = dict(zip(g.ops, fused.start.tolist()))
    times = c.op_times(g)
    for b in blocks:
        for a, z in zip(b, b[1:]):
            d = int(fused.device[a])
            assert st[g.ops[z]] == pytest.approx(st[g.ops[a]] + times[a, d], abs=1e-3)


@pytest.mark.slow
def test_window_rounds_only_improve_and_keep_memory():
    from workbench.solvers.pesto.cpsat_engine import window_rounds

    g = samples.inception(120, seed=2, ccr=1.5)
    c = Cluster.preset("2xV100-pcie")
    c = c.with_memory(0.7 * float(g.c.memory.sum()))
    s = simulate(solve(g, c, method="m_topo"), c)
    # 16 s, not 8: under the suite's load a first round's build could miss its share at 8 s
    best, st = window_rounds(g, c, s, 16, congestion=True, workers=1,
                             symmetry=True, seed=0, free_ops=40, outside_units=20)
    assert st["lns_rounds"] >= 1
    assert best.makespan <= s.makespan * (1 + 1e-9)
    if st["lns_improved"]:
        assert best.makespan < s.makespan and st["lns_gain_ms"] > 0
    used = {d: 0.0 for d in range(len(c))}
    for i, d in enumerate(best.device.tolist()):
        used[d] += float(g.c.memory[i])
    assert all(u <= c.devices[d].memory * (1 + 1e-9) for d, u in used.items())


@pytest.mark.slow
def test_cpsat_engine_starts_from_the_papers_coarse_graph_on_rnnlm():
    """Issue 29: on rnnlm-4xV100 every heuristic on the original graph sends gigabytes between
    devices (celeritas 47.2 ms); run on Pesto's Theorem 3.5 coarse graph they find a 2-device
    cut of under 1 MB (24.7 ms). The CP-SAT engine's warm start now includes those plans."""
    from workbench.solvers.pesto.cpsat_engine import paper_coarse_start
    from workbench.workloads import workload

    from dataclasses import replace

    # issue 29's scenario: the pressure on the static sum (issue 42 moved the suite to live)
    g, c = replace(workload("rnnlm-4xV100"), memory_model="static").build()
    cel = solve(g, c, method="celeritas")
    s_cel = simulate(cel, c)
    tried: dict = {}
    plan, s, method = paper_coarse_start(g, c, (cel, s_cel, "celeritas"), tried,
                                         warm_start="auto", congestion=True, seed=0,
                                         time_limit=60)
    assert method.endswith("@coarse") and method in tried
    assert s.makespan < 0.6 * s_cel.makespan
    assert _close(simulate(plan, c).makespan, s.makespan)  # the schedule is the plan's own
    assert float(s.t_bytes.sum()) < 0.01 * float(s_cel.t_bytes.sum())
    # a start already better than anything on the coarse graph is kept
    same = paper_coarse_start(g, c, (plan, s, "x"), {}, warm_start="auto", congestion=True,
                              seed=0, time_limit=60)
    assert same[2] == "x"
