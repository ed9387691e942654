"""DP over ideals: exactness against brute force, training contraction, options, bad input."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from workbench import Plan, max_load, samples, solve
from workbench.cluster import Cluster, Device, Link
from workbench.errors import GraphError, InfeasibleError, SolverError
from workbench.graph import OpGraph
from workbench.solvers.pipeline.dp import contract_for_dp, count_ideals, enumerate_ideals


def host(k: int, l_: int = 1, mem: float = 1e12, bw: float = 1e6) -> Cluster:
    return Cluster([Device(f"gpu{i}", "gpu", mem) for i in range(k)]
                   + [Device(f"cpu{i}", "cpu") for i in range(l_)],
                   mode="host", host_link=Link(0.0, bw))


def uniform(g: OpGraph) -> OpGraph:
    """Same graph with one transfer time per producer (the paper's per-node ``c_u``; the DP is
    exact for that accounting)."""
    ops = [(v, dict(g.op(v))) for v in g.ops]
    edges = [(u, v, {"comm": 0.2 + 0.37 * (g.index[u] % 5)}) for u, v in g.edges()]
    return OpGraph.from_ops(ops, edges, name=g.name)


def contiguous(g: OpGraph, ops: set) -> bool:
    import networkx as nx

    G = g.nx
    for u in ops:
        for v in nx.descendants(G, u):
            if v not in ops and any(w in ops for w in nx.descendants(G, v)):
                return False
    return True


def brute_force(g: OpGraph, c: Cluster, metric=None) -> float:
    """Best ``metric`` (max_load) over all assignments whose device sets are contiguous."""
    metric = metric or max_load
    best = math.inf
    names = c.names
    for combo in itertools.product(range(len(names)), repeat=g.n_ops):
        sets = [set() for _ in names]
        for v, d in zip(g.ops, combo):
            sets[d].add(v)
        if not all(contiguous(g, s) for s in sets if s):
            continue
        plan = Plan(g, {v: names[d] for v, d in zip(g.ops, combo)})
        mem = [sum(g.op(v)["memory"] for v in s) for s in sets]
        if any(m > c.devices[i].memory for i, m in enumerate(mem)):
            continue
        best = min(best, metric(plan, c))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_dp_equals_brute_force_on_small_random_graphs(seed):
    g = uniform(samples.random_dag(6, edge_prob=0.35, seed=seed))
    c = host(2, 1)
    p = solve(g, c, method="dp")
    assert p.predicted["max_load_ms"] == pytest.approx(brute_force(g, c), rel=1e-9)
    assert max_load(p, c) == pytest.approx(p.predicted["max_load_ms"], rel=1e-9)


def test_dp_respects_memory_and_matches_brute_force():
    g = uniform(samples.random_dag(6, edge_prob=0.3, seed=3, memory=1e6))
    c = host(3, 0, mem=2.5e6)
    p = solve(g, c, method="dp")
    assert p.predicted["max_load_ms"] == pytest.approx(brute_force(g, c), rel=1e-9)
    used = {}
    for v, d in p.placement.items():
        used[d] = used.get(d, 0) + g.op(v)["memory"]
    assert max(used.values()) <= 2.5e6


def test_ideals_of_a_diamond():
    g = samples.diamond()
    assert count_ideals(g, host(2)) == 6
    assert enumerate_ideals([[], [0], [0], [1, 2]], [[1, 2], [3], [3], []]) == [0, 1, 3, 5, 7, 15]


def test_training_graph_colocates_and_is_exact():
    g = uniform(samples.to_training(samples.transformer(24, seed=1)))
    c = host(3, 1)
    p = solve(g, c, method="dp")
    assert max_load(p, c) == pytest.approx(p.predicted["max_load_ms"], rel=1e-9)
    for grp, members in g.colocation_groups.items():
        assert len({p.placement[v] for v in members}) == 1, grp
    assert solve(g, c, method="dpl").predicted["max_load_ms"] >= p.predicted["max_load_ms"] - 1e-9


def test_orphaned_backward_ops_get_artificial_images():
    ops = [("a", {"compute": {"gpu": 1.0, "cpu": 4.0}, "colocate": "A"}),
           ("b", {"compute": {"gpu": 2.0, "cpu": 8.0}, "colocate": "B"}),
           ("gb", {"compute": {"gpu": 2.0, "cpu": 8.0}, "kind": "bwd", "colocate": "B"}),
           ("loss_grad", {"compute": {"gpu": 1.0, "cpu": 1.0}, "kind": "bwd"}),
           ("ga", {"compute": {"gpu": 1.0, "cpu": 4.0}, "kind": "bwd", "colocate": "A"})]
    edges = [("a", "b", {"comm": 0.5}), ("b", "loss_grad", {"comm": 0.5}),
             ("loss_grad", "gb", {"comm": 0.5}), ("gb", "ga", {"comm": 0.5})]
    g = OpGraph.from_ops(ops, edges)
    c = host(2, 0)
    pr = contract_for_dp(g, c)
    assert pr.info["orphaned_backward_classes"] == 1 and pr.info["mirrored_edges"] == 1
    p = solve(g, c, method="dp")
    assert max_load(p, c) == pytest.approx(p.predicted["max_load_ms"], rel=1e-9)
    assert set(p.placement) == set(g.ops)


def test_backward_edge_into_forward_part_is_rejected():
    ops = [("a", {"compute": {"gpu": 1.0}}), ("g", {"compute": {"gpu": 1.0}, "kind": "bwd"}),
           ("b", {"compute": {"gpu": 1.0}})]
    g = OpGraph.from_ops(ops, [("a", "g", {}), ("g", "b", {})])
    with pytest.raises(GraphError, match="'g' -> 'b'"):
        solve(g, host(2, 0), method="dp")


def test_colour_class_spanning_device_kinds_is_rejected():
    ops = [("a", {"compute": {"gpu": 1.0}, "colocate": "X"}),
           ("b", {"compute": {"cpu": 1.0}, "colocate": "X"})]
    g = OpGraph.from_ops(ops, [("a", "b", {})])
    with pytest.raises(InfeasibleError, match="spans device kinds|no device"):
        solve(g, host(1, 1), method="dp")


def test_memory_caps_no_contiguous_split_meets():
    g = samples.random_dag(8, seed=1, memory=1e6)
    with pytest.raises(InfeasibleError, match="respects the memory caps"):
        solve(g, host(2, 0, mem=2e6), method="dp")


def test_too_many_ideals_says_how_many_and_suggests_dpl():
    ops = [(f"v{i}", {"compute": {"gpu": 1.0, "cpu": 2.0}}) for i in range(20)]
    g = OpGraph.from_ops(ops, [])
    with pytest.raises(SolverError, match=r"more than 1,000 ideals.*dpl"):
        solve(g, host(2), method="dp", max_ideals=1000)
    assert solve(g, host(2), method="dpl").status == "heuristic"


def test_too_many_ideals_is_refused_before_the_lattice_grows(monkeypatch):
    """A chain of n ops has n + 1 ideals and each level of width w 2^w: a graph past
    ``max_ideals`` by that count is refused in linear time, naming the size the DP takes
    (it grew the lattice to the limit first: 7-11 s CPU on 100,000 ops)."""
    from workbench.solvers.pipeline import ideals

    def grow(*a, **k):
        raise AssertionError("the lattice was grown")

    monkeypatch.setattr(ideals, "_grow", grow)
    ops = [(f"v{i}", {"compute": {"gpu": 1.0, "cpu": 2.0}}) for i in range(1200)]
    chain = OpGraph.from_ops(ops, [(f"v{i}", f"v{i + 1}") for i in range(1199)])
    with pytest.raises(SolverError, match=r"more than 1,000 ideals.*up to 1,000 ideals.*"
                                          r"chain of up to 999 ops.*dpl"):
        solve(chain, host(2), method="dp", max_ideals=1000)
    assert ideals.ideals_lower_bound(*[[[]] * 30] * 2) == 2 ** 30


def test_interleave_and_replication_options():
    g = samples.transformer(30, seed=2)
    c = host(4, 0)
    base = solve(g, c, method="dp").predicted["max_load_ms"]
    inter = solve(g, c, method="dp", interleave=True).predicted["max_load_ms"]
    assert inter <= base + 1e-9
    rep = solve(g, c, method="dp", replicate=True)
    assert rep.predicted["max_load_ms"] <= base + 1e-9
    slow = solve(g, c, method="dp", replicate=True, allreduce_bandwidth=1e-3)
    assert slow.predicted["max_load_ms"] >= rep.predicted["max_load_ms"] - 1e-9


def test_replication_pays_when_one_op_dominates():
    ops = [("a", {"compute": {"gpu": 1.0, "cpu": 9.0}}),
           ("b", {"compute": {"gpu": 40.0, "cpu": 400.0}, "memory": 1.0}),
           ("c", {"compute": {"gpu": 1.0, "cpu": 9.0}})]
    g = OpGraph.from_ops(ops, [("a", "b", {"comm": 0.1}), ("b", "c", {"comm": 0.1})])
    c = host(4, 0)
    assert solve(g, c, method="dp").predicted["max_load_ms"] == pytest.approx(40.2)
    rep = solve(g, c, method="dp", replicate=True)
    assert rep.predicted["max_load_ms"] < 40.2 / 2 + 1e-6
    assert "replicas" in rep.info


def test_pipedream_is_a_feasible_contiguous_baseline():
    g = uniform(samples.inception(80, seed=0))
    c = host(3, 1)
    pd = solve(g, c, method="pipedream")
    assert max_load(pd, c) == pytest.approx(pd.predicted["max_load_ms"], rel=1e-9)
    assert pd.predicted["max_load_ms"] >= solve(g, c, method="dp").predicted["max_load_ms"] - 1e-9


def test_large_lattice_is_solved_quickly():
    g = uniform(samples.inception(200, seed=0))
    c = host(4, 1)
    n = count_ideals(g, c)
    assert n > 1000
    p = solve(g, c, method="dp")
    assert p.stats["ideals"] == n
    assert max_load(p, c) == pytest.approx(p.predicted["max_load_ms"], rel=1e-9)
    assert p.predicted["max_load_ms"] <= solve(g, c, method="dpl").predicted["max_load_ms"] + 1e-9
    assert np.isfinite(p.predicted["max_load_ms"])


@pytest.mark.parametrize("mode", [True, "full_duplex"])
@pytest.mark.parametrize("seed", range(4))
def test_interleaved_dp_equals_brute_force(mode, seed):
    from workbench.judge.pipelined import pipelined_time

    g = uniform(samples.random_dag(6, edge_prob=0.4, seed=10 + seed))
    c = host(2, 1, bw=2e5)
    p = solve(g, c, method="dp", interleave=mode)
    best = brute_force(g, c, lambda plan, cl: pipelined_time(plan, cl, interleave=mode))
    assert p.predicted["max_load_ms"] == pytest.approx(best, rel=1e-9)
    assert pipelined_time(p, c, interleave=mode) == pytest.approx(best, rel=1e-9)


def test_full_duplex_is_between_compute_and_half_duplex():
    from workbench.judge.pipelined import pipelined_time

    g = uniform(samples.transformer(30, seed=4))
    c = host(3, 0, bw=1e5)
    vals = [solve(g, c, method="dp", interleave=m).predicted["max_load_ms"]
            for m in (False, True, "full_duplex")]
    assert vals[2] <= vals[1] + 1e-9 <= vals[0] + 2e-9
    plan = solve(g, c, method="dp")
    assert pipelined_time(plan, c) == pytest.approx(max_load(plan, c), rel=1e-12)
    with pytest.raises(SolverError, match="full_duplex"):
        solve(g, c, method="dp", interleave="sideways")


def brute_force_supernodes(g: OpGraph, c: Cluster, metric) -> float:
    """Best ``metric`` over every assignment of the DP's supernodes to devices that runs as a
    pipeline (acyclic quotient of the forward supernode graph), memory respected."""
    import networkx as nx

    p = contract_for_dp(g, c)
    names = c.names
    best = math.inf
    for combo in itertools.product(range(len(names)), repeat=p.n):
        q = nx.DiGraph()
        q.add_nodes_from(set(combo))
        q.add_edges_from((combo[a], combo[b]) for a in range(p.n) for b in p.succ[a]
                         if combo[a] != combo[b])
        if not nx.is_directed_acyclic_graph(q):
            continue
        pl = {g.c.names[i]: names[combo[s]] for s in range(p.n) for i in p.members[s]}
        if any(not math.isfinite(c.op_times(g)[g.index[v], c.names.index(d)])
               for v, d in pl.items()):
            continue
        mem = {}
        for v, d in pl.items():
            mem[d] = mem.get(d, 0.0) + g.op(v)["memory"]
        if any(m > c.device(d).memory for d, m in mem.items()):
            continue
        best = min(best, metric(Plan(g, pl), c))
    return best


@pytest.mark.parametrize("mode", [False, "full_duplex"])
@pytest.mark.parametrize("seed,bw", [(25, 3e6), (22, 1e7), (23, 1e7)])
def test_gpipe_dp_equals_brute_force(mode, seed, bw):
    from workbench.judge.pipelined import pipelined_time

    g = samples.to_training(samples.random_dag(5, edge_prob=0.5, seed=seed))
    c = host(2, 1, bw=bw)
    p = solve(g, c, method="dp", objective="gpipe", interleave=mode)
    best = brute_force_supernodes(
        g, c, lambda plan, cl: pipelined_time(plan, cl, objective="gpipe", interleave=mode))
    assert p.predicted["time_per_sample_ms"] == pytest.approx(best, rel=1e-9)
    assert pipelined_time(p, c, objective="gpipe", interleave=mode) == pytest.approx(best,
                                                                                     rel=1e-9)
    # the sum of the two maxima is never below the max of the sums, and the PipeDream-optimal
    # split is no better under GPipe (on these graphs it is worse without interleaving)
    pd = solve(g, c, method="dp", interleave=mode)
    assert best >= pd.predicted["max_load_ms"] - 1e-9
    gp_of_pd = pipelined_time(pd, c, objective="gpipe", interleave=mode)
    assert best <= gp_of_pd + 1e-9
    if mode is False:
        assert best < gp_of_pd - 1e-3


def test_gpipe_option_errors():
    g = samples.to_training(samples.random_dag(4, seed=1))
    with pytest.raises(SolverError, match="objective must be"):
        solve(g, host(2, 1), method="dp", objective="1f1b")
    with pytest.raises(SolverError, match="replicate"):
        solve(g, host(2, 1), method="dp", objective="gpipe", replicate=True)


def shuffled_training_graph(seed: int, n: int = 5) -> OpGraph:
    """Forward layers f_i with backward twins g_i (one colour class each) whose backward
    order is a random permutation of the forward one, so backward parts can interleave."""
    rng = np.random.default_rng(seed)
    ops, edges = [], []
    for i in range(n):
        t = float(rng.uniform(1, 6))
        ops.append((f"f{i}", {"compute": {"gpu": t, "cpu": 6 * t}, "colocate": f"L{i}"}))
        ops.append((f"g{i}", {"compute": {"gpu": 2 * t, "cpu": 12 * t}, "kind": "bwd",
                              "colocate": f"L{i}"}))
    edges = [(f"f{i}", f"f{j}", {"comm": float(rng.uniform(0.1, 1))})
             for i in range(n) for j in range(i + 1, n) if rng.random() < 0.45]
    perm = rng.permutation(n)
    edges += [(f"g{perm[a]}", f"g{perm[b]}", {"comm": float(rng.uniform(0.1, 1))})
              for a in range(n) for b in range(a + 1, n) if b == a + 1 or rng.random() < 0.3]
    edges.append((f"f{n - 1}", f"g{perm[0]}", {"comm": 0.1}))
    return OpGraph.from_ops(ops, edges, name=f"shuffled{seed}")


@pytest.mark.parametrize("seed", [0, 2, 5, 11])
def test_backward_contiguous_dp_equals_brute_force(seed):
    from workbench.judge.pipelined import contiguity_violations

    g = shuffled_training_graph(seed)
    c = host(2, 1)
    free = solve(g, c, method="dp")
    p = solve(g, c, method="dp", backward_contiguous=True)
    assert contiguity_violations(free)  # the unconstrained optimum interleaves backward parts
    assert contiguity_violations(p) == [] and contiguity_violations(p, part="forward") == []
    best = brute_force_supernodes(
        g, c, lambda plan, cl: math.inf if contiguity_violations(plan) else max_load(plan, cl))
    assert p.predicted["max_load_ms"] == pytest.approx(best, rel=1e-9)
    assert max_load(p, c) == pytest.approx(best, rel=1e-9)
    assert best > free.predicted["max_load_ms"] + 1e-6
    q = solve(g, c, method="dpl", backward_contiguous=True)
    assert contiguity_violations(q) == [] and q.predicted["max_load_ms"] >= best - 1e-9


MSR = __import__("pathlib").Path(__file__).resolve().parents[3] / "sample_graphs" / "msr"


@pytest.mark.skipif(not MSR.is_dir(), reason="MSR workloads not in the repo")
@pytest.mark.parametrize("name,principled,authors", [
    ("layer_gnmt_training", 294.90, 107.35),
    ("layer_bert24_inference", 17.79, 17.79),
    ("layer_resnet50_training", 83.67, 83.67)])
def test_pipedream_authors_setting_reproduces_table1(name, principled, authors):
    from workbench.io.msr import read_msr

    g, c = read_msr(MSR / "throughput" / f"{name}.json")
    p = solve(g, c, method="pipedream")
    q = solve(g, c, method="pipedream", skip_span=10)
    assert max_load(p, c) == pytest.approx(principled, abs=5e-3)
    assert max_load(q, c) == pytest.approx(authors, abs=5e-3)
    assert q.predicted["max_load_ms"] == pytest.approx(max_load(q, c), rel=1e-9)
    with pytest.raises(SolverError, match="skip_span"):
        solve(g, c, method="pipedream", skip_span=-1)


@pytest.mark.parametrize("seed", range(3))
def test_pruning_is_exact(seed):
    """The DPL bound, the feasibility pass and the stopped descent change nothing: same value
    and same split as the plain DP over every pair."""
    from workbench.solvers.pipeline.dp import linear_order, solve_dp
    from workbench.solvers.pipeline.kernel import lattice

    g = uniform(samples.inception(90, seed=seed))
    c = host(4, 1)
    p = contract_for_dp(g, c)
    lat = lattice(p.pred, p.succ)
    ub = solve_dp(p, 4, 1, 1e12, order=linear_order(p)).value
    plain = solve_dp(p, 4, 1, 1e12, ideals=lat, feasibility=False)
    pruned = solve_dp(p, 4, 1, 1e12, ideals=lat, upper_bound=ub)
    assert pruned.value == plain.value
    assert pruned.stages == plain.stages
    assert pruned.stats["ideal_pairs"] < plain.stats["ideal_pairs"]
    assert pruned.stats["feasible_ideals"] <= plain.stats["feasible_ideals"] == len(lat)


@pytest.mark.parametrize("mode", [True, "full_duplex"])
@pytest.mark.parametrize("seed", range(2))
def test_interleaved_ips_match_dp_and_brute_force(mode, seed):
    from workbench.judge.pipelined import pipelined_time

    g = uniform(samples.random_dag(6, edge_prob=0.4, seed=10 + seed))
    c = host(2, 1, bw=2e5)
    d = solve(g, c, method="dp", interleave=mode).predicted["max_load_ms"]
    ic = solve(g, c, method="ip_contig", interleave=mode, time_limit=30)
    assert ic.predicted["max_load_ms"] == pytest.approx(d, rel=1e-6)
    assert pipelined_time(ic, c, interleave=mode) == pytest.approx(d, rel=1e-6)
    inc = solve(g, c, method="ip_noncontig", interleave=mode, time_limit=30)
    names = c.names
    best = min(pipelined_time(Plan(g, {v: names[k] for v, k in zip(g.ops, combo)}), c,
                              interleave=mode)
               for combo in itertools.product(range(len(names)), repeat=g.n_ops))
    assert inc.status == "optimal"
    assert inc.predicted["max_load_ms"] == pytest.approx(best, rel=1e-6)
    assert best <= d + 1e-9
