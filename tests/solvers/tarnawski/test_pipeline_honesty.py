"""Issue 12 (pipeline part): the pipelined solvers either model a cluster exactly or refuse it.

Every plan with status ``optimal`` must predict the judge's value (``max_load`` / ``latency``)
and be optimal under the judge's model (checked against brute force on small graphs); clusters
outside the paper's model get a SolverError naming what is unsupported.
"""

from __future__ import annotations

import _thread
import ast
import itertools
import math
import threading
from pathlib import Path

import numpy as np
import pytest

from workbench import Plan, max_load, samples, solve
from workbench.cluster import Cluster, Device, Link
from workbench.errors import GraphError, SolverError
from workbench.graph import OpGraph
from workbench.judge.pipelined import latency
from workbench.testing.timing import Stopwatch

ROOT = Path(__file__).resolve().parents[3]
MSR = ROOT / "sample_graphs" / "msr"  # the in-repo copy (MIT licence)
MAXLOAD = ("dp", "dpl", "pipedream", "ip_contig", "ip_noncontig")
IPS = ("ip_contig", "ip_noncontig", "latency_ip")


def cluster(accs, cpus=(), *, mode="host", bw=1e6) -> Cluster:
    """``accs``/``cpus``: lists of (memory, speed)."""
    devs = [Device(f"gpu{i}", "gpu", m, s) for i, (m, s) in enumerate(accs)]
    devs += [Device(f"cpu{i}", "cpu", m, s) for i, (m, s) in enumerate(cpus)]
    return Cluster(devs, mode=mode, host_link=Link(0.0, bw), intra_host=Link(0.0, bw))


def contiguous(g: OpGraph, ops: set) -> bool:
    import networkx as nx

    for u in ops:
        for v in nx.descendants(g.nx, u):
            if v not in ops and any(w in ops for w in nx.descendants(g.nx, v)):
                return False
    return True


def brute_force(g: OpGraph, c: Cluster, *, contiguous_only: bool = True) -> float:
    """Best judged max_load over all memory-feasible assignments (contiguous per device)."""
    best = math.inf
    names = c.names
    times = c.op_times(g)
    for combo in itertools.product(range(len(names)), repeat=g.n_ops):
        if not np.isfinite(times[np.arange(g.n_ops), list(combo)]).all():
            continue
        sets = [set() for _ in names]
        for v, d in zip(g.ops, combo):
            sets[d].add(v)
        if any(sum(g.op(v)["memory"] for v in s) > c.devices[i].memory * (1 + 1e-12)
               for i, s in enumerate(sets)):
            continue
        if contiguous_only and not all(contiguous(g, s) for s in sets if s):
            continue
        best = min(best, max_load(Plan(g, {v: names[d] for v, d in zip(g.ops, combo)}), c))
    return best


def own_status(plan) -> str:
    """The method's own status: the live memory judge may have marked the plan
    ``out_of_memory`` and kept the method's status in ``stats["solver_status"]``."""
    return plan.stats.get("solver_status", plan.status)


def proved_contiguous(plan) -> bool:
    """Optimal among contiguous splits: ``optimal`` only when that is optimal under the judge
    (which does not ask for contiguity), else ``feasible`` saying so."""
    status = own_status(plan)
    return status == "optimal" or (status == "feasible"
                                   and plan.stats["optimal_among"] == "contiguous splits")


def assert_honest(plan, c, value_fn=max_load, key="max_load_ms"):
    judged = value_fn(plan, c)
    assert plan.predicted[key] == pytest.approx(judged, rel=1e-6, abs=1e-9)
    if own_status(plan) == "optimal":
        assert not plan.stats.get("gap", 0.0) > 1e-6


# ----------------------------------------------------------------------------- DP family
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dp_is_exact_for_per_edge_costs_and_speed(seed):
    """Edges of one op with different sizes (nested transfer tiers) and accelerators twice as
    fast as the graph's costs: the DP's value is the judge's and the brute-force optimum."""
    g = samples.random_dag(6, edge_prob=0.45, seed=seed, memory=1e6)
    c = cluster([(5e6, 2.0)] * 2, [(math.inf, 1.0)], bw=1e7)
    p = solve(g, c, method="dp")
    assert proved_contiguous(p)
    assert_honest(p, c)
    assert p.predicted["max_load_ms"] == pytest.approx(brute_force(g, c), rel=1e-9)
    if own_status(p) == "optimal":
        assert p.predicted["max_load_ms"] <= brute_force(g, c, contiguous_only=False) + 1e-9


def test_dp_direct_mode_two_devices_is_exact_and_three_are_forwarded():
    g = samples.random_dag(6, edge_prob=0.45, seed=4, memory=1e6)
    c2 = cluster([(1e9, 1.0)] * 2, mode="direct", bw=1e6)
    p = solve(g, c2, method="dp")
    assert proved_contiguous(p)
    assert p.predicted["max_load_ms"] == pytest.approx(brute_force(g, c2), rel=1e-9)
    # three devices: activations forwarded stage to stage (tests/solvers/tarnawski/test_pipeline_forwarded.py)
    c3 = cluster([(1e9, 1.0)] * 3, mode="direct")
    for m in MAXLOAD:
        p = solve(g, c3, method=m, **({"time_limit": 5} if m.startswith("ip") else {}))
        assert "chain" in p.info
        assert_honest(p, c3)


def test_dp_refuses_unequal_accelerator_speeds_and_kinds():
    g = samples.random_dag(8, seed=1)
    c = cluster([(1e9, 1.0), (1e9, 1.7)])
    for m in ("dp", "dpl", "pipedream"):
        with pytest.raises(SolverError, match="accelerator speeds gpu0=1, gpu1=1.7"):
            solve(g, c, method=m)
    mixed = Cluster([Device("g", "gpu"), Device("t", "tpu")], mode="host")
    with pytest.raises(SolverError, match="one accelerator kind"):
        solve(g, mixed, method="dp")


def test_dp_unequal_memories_matches_stages_to_devices():
    g = samples.random_dag(6, edge_prob=0.4, seed=5, memory=1e6)
    total = g.total_memory()
    c = cluster([(total * 0.3, 1.0), (total * 0.8, 1.0)], bw=1e7)
    p = solve(g, c, method="dp")
    assert_honest(p, c)
    bf = brute_force(g, c)
    if proved_contiguous(p):
        assert p.predicted["max_load_ms"] == pytest.approx(bf, rel=1e-9)
    else:
        assert own_status(p) == "heuristic" and "smallest" in p.stats["note"]
        assert p.predicted["max_load_ms"] >= bf - 1e-9
    used = {d.name: 0.0 for d in c.devices}
    for v, d in p.placement.items():
        used[d] += g.op(v)["memory"]
    assert all(used[d.name] <= d.memory * (1 + 1e-9) for d in c.devices)


def test_dp_finite_cpu_memory_checked_on_the_optimum():
    g = samples.random_dag(8, seed=2, memory=1e6)
    roomy = cluster([(1e9, 1.0)], [(1e12, 1.0)])
    p = solve(g, roomy, method="dp")
    assert proved_contiguous(p)
    on_cpu = sum(g.op(v)["memory"] for v, d in p.placement.items() if d == "cpu0")
    if on_cpu > 0:
        tight = cluster([(1e9, 1.0)], [(on_cpu / 2, 1.0)])
        with pytest.raises(SolverError, match="finite CPU memory"):
            solve(g, tight, method="dp")


def test_dp_overflowing_costs_are_a_clear_error():
    ops = [(f"n{i}", {"compute": {"gpu": 1e308}}) for i in range(3)]
    g = OpGraph.from_ops(ops, [("n0", "n1", {"bytes": 1.0}), ("n1", "n2", {"bytes": 1.0})])
    c = cluster([(math.inf, 1.0)] * 2)
    for m in ("dp",) + IPS:
        with pytest.raises(GraphError, match="overflow"):
            solve(g, c, method=m)


def test_replicated_dp_pruning_is_exact():
    """The DPL bound window must allow r x B of compute in an r-replica stage."""
    from workbench.solvers.pipeline.dp import _run

    g = samples.transformer(30, seed=2)
    c = cluster([(1e12, 1.0)] * 4)
    kw = {"linear": False, "max_ideals": 100_000, "interleave": False, "replicate": True,
              "allreduce_bandwidth": 5e3, "time_limit": None, "progress": None}
    pruned = _run(g, c, "dp", prune=True, **kw)
    full = _run(g, c, "dp", prune=False, **kw)
    assert pruned.predicted["max_load_ms"] == pytest.approx(full.predicted["max_load_ms"],
                                                            rel=1e-9)


@pytest.mark.skipif(not MSR.is_dir(), reason="MSR workloads not found")
def test_replicated_dp_on_gnmt_training():
    from workbench.io.msr import read_msr

    g, c = read_msr(MSR / "throughput" / "layer_gnmt_training.json")
    # was "DP backtracking failed"; MSR links carry no bandwidth: free sync asked explicitly
    p = solve(g, c, method="dp", replicate=True, allreduce_bandwidth=math.inf)
    assert p.predicted["max_load_ms"] <= 107.01
    assert max_load(p, c) == pytest.approx(p.predicted["max_load_ms"])  # on its replica graph
    assert p.status == "heuristic"  # not optimal against the unreplicated lower bounds
    with pytest.raises(SolverError, match="replicate=True needs allreduce_bandwidth"):
        solve(g, c, method="dp", replicate=True)


# ----------------------------------------------------------------------------- the IPs
def test_ips_model_speeds_and_memories_per_device():
    g = samples.random_dag(6, edge_prob=0.45, seed=3, memory=1e6)
    total = g.total_memory()
    c = cluster([(total * 0.5, 1.0), (math.inf, 2.5)], [(total * 0.6, 0.5)], bw=1e7)
    nc = solve(g, c, method="ip_noncontig", time_limit=30)
    assert own_status(nc) == "optimal"
    assert_honest(nc, c)
    assert nc.predicted["max_load_ms"] == pytest.approx(
        brute_force(g, c, contiguous_only=False), rel=1e-6)
    ct = solve(g, c, method="ip_contig", time_limit=30)
    assert proved_contiguous(ct)
    assert_honest(ct, c)
    assert ct.predicted["max_load_ms"] >= nc.predicted["max_load_ms"] - 1e-6
    lat = solve(g, c, method="latency_ip", time_limit=30)
    assert_honest(lat, c, latency, "latency_ms")


@pytest.mark.parametrize("method", IPS)
def test_ips_with_unlimited_memory_and_huge_costs(method):
    base = samples.random_dag(7, edge_prob=0.4, seed=6)
    ops = [(v, {**base.op(v), "compute": {k: t * 1e15 for k, t in base.op(v)["compute"].items()}})
           for v in base.ops]
    g = OpGraph.from_ops(ops, [(u, v, {"comm": 3e14}) for u, v in base.edges()])
    c = cluster([(math.inf, 1.0)] * 2, [(math.inf, 1.0)])
    p = solve(g, c, method=method, time_limit=20)
    if method == "latency_ip":
        assert_honest(p, c, latency, "latency_ms")
    else:
        assert_honest(p, c)
        assert p.predicted["max_load_ms"] <= solve(g, c, method="dp").predicted["max_load_ms"] \
            * (1 + 1e-6)


def test_ip_gap_default_zero_and_optimal_only_when_proved():
    g = samples.random_dag(9, edge_prob=0.3, seed=0)
    c = cluster([(math.inf, 1.0)] * 3, [(math.inf, 1.0)])
    p = solve(g, c, method="ip_noncontig", time_limit=30)
    assert p.status == "optimal" and p.stats["gap"] <= 1e-6
    loose = solve(g, c, method="ip_noncontig", time_limit=30, gap=0.5)
    assert loose.status in ("optimal", "feasible")
    if loose.status == "optimal":
        assert loose.stats["gap"] <= 1e-6
    assert_honest(loose, c)


@pytest.mark.skipif(not MSR.is_dir(), reason="MSR workloads not found")
def test_time_limit_bounds_the_whole_call():
    """ip_noncontig on GNMT training took 176 s at a 2 s limit (unbounded DP warm start)."""
    from workbench.io.msr import read_msr

    g, c = read_msr(MSR / "throughput" / "layer_gnmt_training.json")
    with Stopwatch() as sw:  # load-scaled: the bound holds on a loaded machine (issue 41)
        p = solve(g, c, method="ip_noncontig", time_limit=2)
    assert sw.within(1.2 * 2 + 1), sw
    assert p.status == "time_limit"
    assert_honest(p, c)


def test_ctrl_c_returns_the_incumbent():
    g = samples.transformer(120, seed=1)
    c = cluster([(math.inf, 1.0)] * 6, [(math.inf, 1.0)], bw=1e5)
    timer = threading.Timer(3.0, _thread.interrupt_main)
    timer.start()
    try:
        with Stopwatch() as sw:  # 33.7 s at load 10 on the clock (issue 41): load-scaled
            p = solve(g, c, method="ip_noncontig", time_limit=60)
    finally:
        timer.cancel()
    assert sw.within(20), sw
    if p.status != "optimal":  # solved before the interrupt on a fast machine: nothing to check
        assert p.status == "time_limit"
        assert p.stats.get("milp_status") in ("interrupted", None)
    assert_honest(p, c)


# ----------------------------------------------------------------------------- the seam
def test_judge_imports_no_solver():
    for rel in ("workbench/judge/pipelined.py", "workbench/costs/pipeline_costs.py", "workbench/simulate.py"):
        tree = ast.parse((ROOT / rel).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert "solvers" not in (node.module or ""), f"{rel} imports {node.module}"
            elif isinstance(node, ast.Import):
                assert not any("solvers" in a.name for a in node.names), rel


# ----------------------------------------------------------------------------- latency baselines
def test_greedy_latency_on_a_training_graph_places_every_unit():
    """Colour classes of a training graph form unit cycles (forward a -> b, backward b' -> a');
    the greedy's DFS order missed such units, which then landed on the last device unchecked."""
    g = samples.to_training(samples.random_dag(6, edge_prob=0.4, seed=1, memory=1e6))
    need = g.total_memory()
    tight = cluster([(need * 0.2, 1.0)], [(need * 0.3, 1.0)])
    p = solve(g, tight, method="greedy_latency")
    assert p.status == "infeasible"  # memory cannot hold the model: it must say so
    roomy = cluster([(need * 0.6, 1.0)], [(need, 1.0)])
    p = solve(g, roomy, method="greedy_latency")
    used = {d.name: 0.0 for d in roomy.devices}
    for v, d in p.placement.items():
        used[d] += g.op(v)["memory"]
    assert own_status(p) == "heuristic"
    assert all(used[d.name] <= d.memory * (1 + 1e-9) for d in roomy.devices)


def test_latency_ip_zero_cost_graph():
    ops = [(f"n{i}", {"compute": {"gpu": 0.0}}) for i in range(4)]
    g = OpGraph.from_ops(ops, [("n0", "n1", {"bytes": 0.0}), ("n0", "n2", {"bytes": 0.0})])
    c = Cluster([Device("gpu0")], mode="direct")
    p = solve(g, c, method="latency_ip", time_limit=5)  # was ZeroDivisionError
    assert p.predicted["latency_ms"] == 0.0 and p.status == "optimal"


def test_local_search_time_limit_bounds_the_call():
    """Regression (contract soak, seed 757: 66 s without a limit): the search stops when its time
    limit runs out and returns the best complete split seen, status ``time_limit``."""
    from workbench.testing.contract import make_case

    case = make_case(757, max_ops=300)
    with Stopwatch() as sw:
        plan = solve(case.graph, case.cluster, method="local_search", time_limit=0.5, seed=0)
    assert sw.within(1.2 * 0.5 + 1.0), sw
    assert own_status(plan) == "time_limit" and plan.stats["stopped_by_time_limit"]
    assert plan.predicted["max_load_ms"] == pytest.approx(max_load(plan, case.cluster))


def test_ip_warm_start_dp_stops_within_the_time_limit():
    """Regression (contract soak, seed 799: 274-op dense graph, 4.4 s at a 1 s limit): the
    compiled DP of the warm start ran 4,096 ideals per uninterruptible chunk; with a time limit
    the chunks now adapt to ~50 ms, so the limit bounds the whole call."""
    from workbench.testing.contract import make_case, warm_up

    case = make_case(799, max_ops=300)
    for method in ("ip_contig", "ip_noncontig"):
        warm_up(method)
        with Stopwatch() as sw:  # load-scaled (issue 41: failed at load 10 on the clock)
            solve(case.graph, case.cluster, method=method, time_limit=1.0)
        # the margin of test_time_limits_large (1.25): a fresh clone's suite once measured
        # 2.25 s here (2.13 s CPU, 0.6 s alone); the regression it guards took 4.4 s
        assert sw.within((1.2 * 1.0 + 1.0) * 1.25), (method, sw)
