"""Tests of Pesto's acyclic batch coarsening (workbench/transforms/coarsen.py)."""

from __future__ import annotations

import math

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench import Cluster, Device, Link, Plan, samples, simulate
from workbench.errors import GraphError, InfeasibleError, PlanError
from workbench.graph import OpGraph
from workbench.transforms.coarsen import coarsen, heights, min_coarse_size


def _check_coarsening(g: OpGraph, cg, cluster=None) -> None:
    coarse = cg.coarse
    # acyclic: OpGraph validates, and check again explicitly
    assert nx.is_directed_acyclic_graph(coarse.nx)
    # members partition the original ops
    flat = [m for ms in cg.members for m in ms]
    assert sorted(flat) == sorted(g.ops)
    assert len(cg.members) == coarse.n_ops
    allowed = set(cluster.kinds) if cluster is not None else None
    for v, ms in zip(coarse.ops, cg.members):
        assert all(cg.vertex_of[m] == v for m in ms)
        # members in topological order of the original graph
        assert [g.index[m] for m in ms] == sorted(g.index[m] for m in ms)
        # device affinity: all members run on the same kinds
        kinds = {frozenset(g.op(m)["compute"]) if allowed is None else
                 frozenset(g.op(m)["compute"]) & allowed for m in ms}
        assert len(kinds) == 1
        a = coarse.op(v)
        for k, t in a["compute"].items():
            assert math.isclose(t, sum(g.op(m)["compute"][k] for m in ms), rel_tol=1e-9)
        assert math.isclose(a["memory"], sum(g.op(m)["memory"] for m in ms), rel_tol=1e-9,
                            abs_tol=1e-9)
    # every original edge between different coarse vertices is a coarse edge
    for u, w in g.edges():
        cu, cw = cg.vertex_of[u], cg.vertex_of[w]
        if cu != cw:
            assert coarse.nx.has_edge(cu, cw)
    # colocation: the members of one original group share one coarse colocation label
    for ms in g.colocation_groups.values():
        labels = {coarse.op(cg.vertex_of[m])["colocate"] for m in ms}
        assert len(labels) == 1 and None not in labels


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(2, 70), seed=st.integers(0, 10_000), p=st.floats(0.02, 0.5),
       frac=st.floats(0.0, 1.0), coloc=st.sampled_from([0.0, 0.2]),
       cpu_only=st.sampled_from([0.0, 0.15]), plain=st.booleans())
def test_coarsening_is_acyclic_and_consistent(n, seed, p, frac, coloc, cpu_only, plain):
    g = samples.random_dag(n, seed=seed, edge_prob=p, colocate_fraction=coloc,
                           cpu_only_fraction=cpu_only)
    target = max(min_coarse_size(g), int(frac * n), 1)
    kw = {"balance": None, "cp_slack": None} if plain else {}
    cg = coarsen(g, target, **kw)
    _check_coarsening(g, cg)
    if g.n_ops <= target:
        assert cg.coarse.n_ops == g.n_ops and cg.rounds == 0
    elif cg.stopped == "target":
        assert cg.coarse.n_ops == target  # merging stops exactly at the target
    else:
        assert cg.coarse.n_ops > target


@settings(max_examples=25, deadline=None)
@given(n=st.integers(10, 120), seed=st.integers(0, 10_000))
def test_dense_random_dags_plain_rule(n, seed):
    """The paper's plain rule (no balance cap, no critical-path guard) on dense DAGs, where the
    conflicting-pair condition matters most."""
    g = samples.random_dag(n, seed=seed, edge_prob=0.3)
    cg = coarsen(g, 2, balance=None, cp_slack=None)
    _check_coarsening(g, cg)


def test_fig6_conflicting_pairs_are_not_merged_in_one_batch():
    # A, B -> C, D (complete bipartite): merging (A, C) and (B, D) together makes a cycle
    e = {"bytes": 1e6}
    g = OpGraph.from_ops([(v, {"compute": {"gpu": 1.0}}) for v in "ABCD"],
                         [("A", "C", e), ("A", "D", e), ("B", "C", e), ("B", "D", e)])
    cg = coarsen(g, 2, balance=None, cp_slack=None, max_rounds=1)
    assert cg.history == (4, 3)  # only one of the two pairs in the first batch
    _check_coarsening(g, cg)
    full = coarsen(g, 1, balance=None, cp_slack=None)
    assert full.coarse.n_ops == 1
    _check_coarsening(g, full)


def test_heights_levelwise():
    h, order = heights([[1, 2], [3], [3], []], [0, 1, 1, 2])
    assert h == [1, 2, 2, 3]
    assert order[0] == 0 and order[-1] == 3


def test_reaches_target_on_generators_and_keeps_parallelism():
    c = Cluster.preset("4xV100-nvlink")
    for g in (samples.cnn(200), samples.inception(200), samples.transformer(200),
              samples.lstm_grid(200), samples.to_training(samples.cnn(60))):
        cg = coarsen(g, 40, cluster=c)
        assert cg.coarse.n_ops <= 40 and cg.stopped == "target", g.name
        _check_coarsening(g, cg, c)


def test_affinity_never_mixes_kinds():
    g = samples.random_dag(80, seed=5, cpu_only_fraction=0.3, edge_prob=0.1)
    cg = coarsen(g, 2)
    _check_coarsening(g, cg)
    # with a gpu-only cluster, kinds are restricted to gpu: everything can merge together
    # except ops that only run on cpu
    assert cg.coarse.n_ops >= 2


def test_colocation_groups_respect_memory_cap():
    g = samples.random_dag(60, seed=3, colocate_fraction=0.4, memory=1e6)
    small = Cluster([Device("gpu0", memory=6e6), Device("gpu1", memory=6e6),
                     Device("cpu0", kind="cpu", memory=6e6)], intra_host=Link(0.01, 1e7))
    cg = coarsen(g, 5, cluster=small)
    _check_coarsening(g, cg, small)
    for v in cg.coarse.ops:
        assert cg.coarse.op(v)["memory"] <= 6e6
    groups: dict = {}
    for v in cg.coarse.ops:
        grp = cg.coarse.op(v)["colocate"]
        if grp is not None:
            groups[grp] = groups.get(grp, 0.0) + cg.coarse.op(v)["memory"]
    assert all(m <= 6e6 * (1 + 1e-9) for m in groups.values())


def test_bad_targets():
    g = samples.random_dag(30, seed=1, cpu_only_fraction=0.3)
    with pytest.raises(GraphError, match="2 different sets of device kinds"):
        coarsen(g, 1)
    with pytest.raises(GraphError, match="integer >= 1"):
        coarsen(g, 0)
    iso = OpGraph.from_ops([("a", {"compute": {"gpu": 1}}), ("b", {"compute": {"gpu": 1}})])
    assert coarsen(iso, 1).stopped == "no_feasible_edge"
    with pytest.raises(InfeasibleError, match="cannot coarsen"):
        coarsen(iso, 1, strict=True)


def test_expand_keeps_members_consecutive_and_simulates():
    g = samples.lstm_grid(60, layers=2)
    c = Cluster.preset("2xV100-pcie")
    cg = coarsen(g, 10, cluster=c)
    devs = c.names
    placement = {v: devs[i % 2] for i, v in enumerate(cg.coarse.ops)}
    order = {d: [v for v in cg.coarse.ops if placement[v] == d] for d in devs}
    p = cg.expand(Plan(cg.coarse, placement, order=order, method="x"))
    p.validate(c)
    assert p.graph is g
    for d in devs:
        seq = p.order[d]
        pos = {op: i for i, op in enumerate(seq)}
        for v in order[d]:
            ms = cg.members_of(v)
            idx = [pos[m] for m in ms]
            assert idx == list(range(idx[0], idx[0] + len(ms)))  # consecutive, in topo order
    assert simulate(p, c).makespan > 0
    with pytest.raises(PlanError, match="coarse graph"):
        cg.expand(Plan(g, {v: "gpu0" for v in g.ops}))


def test_stop_at_ends_the_rounds_where_they_are():
    """``stop_at`` (a hard bound after ``deadline``): no round begins past it, nor one
    expected to end past it; the coarsest graph so far is returned, consistent."""
    import time

    g = samples.layered(400, seed=0)
    full = coarsen(g, 20)
    now = coarsen(g, 20, stop_at=time.perf_counter())
    assert now.stopped == "deadline" and now.rounds == 0 and now.coarse.n_ops == g.n_ops
    later = coarsen(g, 20, stop_at=time.perf_counter() + 60)
    assert later.stopped == full.stopped == "target"
    assert later.coarse.n_ops == full.coarse.n_ops
