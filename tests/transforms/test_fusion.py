"""Optimal Operation Fusion (Celeritas Algorithm 1, Eqs. 4-6)."""

import itertools
import math

import numpy as np
import pytest

import workbench as wb
from workbench import Cluster, Device, GraphError, InfeasibleError, Link, Plan, SolverError, samples
from workbench.graph import OpGraph
from workbench.orders import cluster_free_weights, positions
from workbench.transforms.fusion import fuse


def brute_force(graph, seq, R, M, ce):
    """Least cut communication over every way to cut ``seq`` into runs (2^(n-1) cuts)."""
    gc = graph.c
    n = gc.n
    pos = positions(seq)
    ok = np.isfinite(gc.compute)
    best = math.inf
    for mask in range(1 << (n - 1)):
        cuts = [0] + [k + 1 for k in range(n - 1) if mask >> k & 1] + [n]
        runs = list(itertools.pairwise(cuts))
        if any(b - a > R for a, b in runs):
            continue
        if any(gc.memory[seq[a:b]].sum() > M for a, b in runs):
            continue
        if any(not ok[seq[a:b]].all(axis=0).any() for a, b in runs):
            continue
        run_of = np.empty(n, dtype=int)
        for r, (a, b) in enumerate(runs):
            run_of[a:b] = r
        cut = run_of[pos[gc.src]] != run_of[pos[gc.dst]]
        best = min(best, float(ce[cut].sum()))
    return best


@pytest.mark.parametrize("seed", range(8))
def test_dp_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    g = samples.random_dag(9, seed=seed, edge_prob=0.3, cpu_only_fraction=0.2 * (seed % 2))
    R = int(rng.integers(1, 6))
    M = float(g.c.memory.max() * rng.uniform(1.0, 3.0)) if seed % 3 else None
    f = fuse(g, R=R, M=M)
    _, ce = cluster_free_weights(g)
    want = brute_force(g, f.sequence, R, math.inf if M is None else M, ce)
    assert f.cut_comm == pytest.approx(want, rel=1e-9, abs=1e-12)
    # the clusters found respect R and M and cost exactly cut_comm
    assert max(len(m) for m in f.members) <= R
    if M is not None:
        assert max(g.c.memory[m].sum() for m in f.members) <= M * (1 + 1e-9)
    cut = f.cluster_of[g.c.src] != f.cluster_of[g.c.dst]
    assert float(ce[cut].sum()) == pytest.approx(f.cut_comm)


@pytest.mark.parametrize("order", ["cpd", "dfs", "bfs"])
def test_lemma2_coarse_graph_is_a_dag_and_sums_are_kept(order):
    g = samples.to_training(samples.inception(150, seed=1))
    f = fuse(g, Cluster.preset("4xV100-nvlink"), R=12, order=order)
    assert np.all(f.cluster_of[g.c.src] <= f.cluster_of[g.c.dst])
    cg = f.coarse  # OpGraph construction itself rejects cycles
    assert cg.n_ops == len(f.members) == len(f.breakpoints)
    assert cg.total_memory() == pytest.approx(g.total_memory())
    assert cg.total_compute("gpu") == pytest.approx(g.total_compute("gpu"))
    assert sorted(i for m in f.members for i in m) == list(range(g.n_ops))
    # each run is consecutive in the sequence
    pos = positions(f.sequence)
    for m in f.members:
        p = pos[m]
        assert p.tolist() == list(range(p[0], p[0] + len(p)))


def test_fusion_reduces_nodes_and_ccr_like_table2():
    g = samples.inception(3000, ccr=30, seed=0)
    c = Cluster([Device(f"gpu{i}") for i in range(4)], intra_host=Link(0.0, 1e7))
    f = fuse(g, c, R=200)
    s = f.stats
    assert s["nodes_before"] == 3000 and s["nodes_after"] <= 60
    assert s["ccr_before"] == pytest.approx(30, rel=0.01)
    assert s["ccr_after"] < s["ccr_before"] / 5
    assert repr(f).startswith("Fusion(")


def test_R1_is_the_identity():
    g = samples.cnn(30)
    f = fuse(g, R=1)
    assert f.coarse.n_ops == g.n_ops
    assert f.stats["ccr_after"] == pytest.approx(f.stats["ccr_before"])


def test_cheapest_cut_is_chosen():
    ops = [(v, {"compute": {"gpu": 1.0}, "memory": 1.0}) for v in "abcdef"]
    b = {"ab": 9e6, "bc": 9e6, "cd": 1e5, "de": 9e6, "ef": 9e6}
    g = OpGraph.from_ops(ops, [(k[0], k[1], {"bytes": v}) for k, v in b.items()])
    f = fuse(g, R=4)
    assert [f.member_names(k) for k in range(f.coarse.n_ops)] == [list("abc"), list("def")]
    f = fuse(g, R=6, M=3.0)          # the memory cap forces the same cut
    assert f.coarse.n_ops == 2
    assert fuse(g, R=6).coarse.n_ops == 1


def test_runs_share_a_device_kind():
    ops = [("a", {"compute": {"gpu": 1.0}}), ("b", {"compute": {"cpu": 1.0}}),
           ("c", {"compute": {"gpu": 1.0, "cpu": 2.0}})]
    g = OpGraph.from_ops(ops, [("a", "b", {"bytes": 1e9}), ("b", "c", {"bytes": 1e9})])
    f = fuse(g, R=3)
    assert f.coarse.n_ops >= 2
    assert f.cluster_of[0] != f.cluster_of[1]
    c = Cluster([Device("g0", "gpu")])
    with pytest.raises(InfeasibleError, match="op 'b' can run on none"):
        fuse(g, c)


def test_coarse_edges_bundle_tensors_once_per_cluster():
    ops = [(v, {"compute": {"gpu": 1.0}}) for v in "abcd"]
    g = OpGraph.from_ops(ops, [("a", "b", {"bytes": 5.0}), ("a", "c", {"bytes": 5.0}),
                               ("b", "d", {"bytes": 1.0}), ("c", "d", {"bytes": 1.0})])
    f = fuse(g, order=[0, 1, 2, 3], R=1)
    assert f.coarse.n_edges == 4
    f2 = fuse(g, order=[g.index[v] for v in "abcd"], R=3)
    # whatever the runs, the coarse bytes never exceed the original bytes
    assert f2.coarse.total_bytes() <= g.total_bytes()


def test_bad_parameters_are_named():
    g = samples.cnn(30)
    with pytest.raises(SolverError, match="R must be >= 1, got 0"):
        fuse(g, R=0)
    with pytest.raises(SolverError, match="R must be an integer"):
        fuse(g, R=2.5)
    big = g.c.names[int(np.argmax(g.c.memory))]
    with pytest.raises(SolverError, match=f"below the memory of op '{big}'"):
        fuse(g, M=float(g.c.memory.max()) / 2)
    with pytest.raises(SolverError, match="order must be"):
        fuse(g, order="random")
    with pytest.raises(GraphError, match="not topological"):
        fuse(g, order=list(range(g.n_ops))[::-1])


def test_expand_keeps_order_deadlock_free_with_colocation():
    g = samples.to_training(samples.cnn(60, seed=3))
    c = Cluster.preset("2xV100-pcie")
    f = fuse(g, c, R=7)
    cg = f.coarse
    # alternate the coarse nodes over two devices, in topological order
    placement = {v: f"gpu{k % 2}" for k, v in enumerate(cg.ops)}
    order = {d: [v for v in cg.ops if placement[v] == d] for d in ("gpu0", "gpu1")}
    plan = f.expand(Plan(cg, placement, order=order, method="x"), cluster=c)
    for members in g.colocation_groups.values():
        assert len({plan.placement[v] for v in members}) == 1
    s = wb.simulate(plan, c, order="plan")  # raises PlanError on deadlock
    assert np.isfinite(s.makespan)
    assert plan.info["fusion"]["nodes_after"] == cg.n_ops
    with pytest.raises(wb.PlanError, match="not a plan of the fused graph"):
        f.expand(Plan(g, {v: "gpu0" for v in g.ops}))
