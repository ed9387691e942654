"""Hierarchical clusters (Tarnawski et al., Appendix C.3): a hand-computed optimum, brute force."""

from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np
import pytest

from workbench import Cluster, Plan, solve
from workbench.errors import SolverError
from workbench.graph import OpGraph
from workbench.judge.pipelined import hierarchical_loads

# the preset's links: inside a host 0.01 ms + bytes / 45 GB/s, across hosts 0.03 ms + bytes / 11 GB/s


def FAST(nbytes: float) -> float:
    return 0.01 + nbytes / 45e6


def SLOW(nbytes: float) -> float:
    return 0.03 + nbytes / 11e6


def chain(sizes: list[float], compute: float = 10.0) -> OpGraph:
    names = [chr(ord("a") + i) for i in range(len(sizes) + 1)]
    ops = [(v, {"compute": {"gpu": compute}}) for v in names]
    edges = [(names[i], names[i + 1], {"bytes": b}) for i, b in enumerate(sizes)]
    return OpGraph.from_ops(ops, edges, name="chain")


def test_preset_has_two_hosts_of_two():
    c = Cluster.preset("2x2xV100")
    assert c.hosts() == ["h0", "h1"] and len(c) == 4
    assert c.link("gpu0", "gpu1").bandwidth > c.link("gpu1", "gpu2").bandwidth


def test_hand_computed_optimum_moves_the_host_boundary_off_the_big_tensor():
    # a-b-c-d-e-f, 10 ms each, every tensor 1 MB except c -> d (200 MB). Six ops on four
    # accelerators: some stage holds two ops (>= 20 ms). Balanced splits with the host boundary
    # at c|d pay 10 + 0.03 + 200e6 / 11e6 = 28.2 ms on c. Best: two-op stages next to the host
    # boundary elsewhere, e.g. {a}{b} | {c,d}{e,f}: {c,d} pays 1 MB across hosts in and 1 MB
    # inside out: 20 + SLOW(1e6) + FAST(1e6).
    g = chain([1e6, 1e6, 2e8, 1e6, 1e6])
    c = Cluster.preset("2x2xV100")
    plan = solve(g, c, method="dp", hierarchical=True)
    want = 20 + SLOW(1e6) + FAST(1e6)
    assert plan.status == "optimal"
    assert plan.predicted["max_load_ms"] == pytest.approx(want, rel=1e-12)
    assert hierarchical_loads(plan, c).max() == pytest.approx(want, rel=1e-12)
    host = {d.name: d.host for d in c.devices}
    assert host[plan.placement["c"]] == host[plan.placement["d"]]
    # the flat optimum {a,b}{c}|{d}{e,f} would cost 28.2 ms here
    flat = Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu2", "e": "gpu3", "f": "gpu3"})
    assert hierarchical_loads(flat, c).max() == pytest.approx(10 + FAST(1e6) + SLOW(2e8))


def ordered(parts: dict, g: OpGraph) -> bool:
    """The quotient graph of ``parts`` (label per op) is acyclic: the labelled sets are
    contiguous and can run as a pipeline."""
    q = nx.DiGraph()
    q.add_nodes_from(set(parts.values()))
    q.add_edges_from((parts[u], parts[v]) for u, v in g.edges() if parts[u] != parts[v])
    return nx.is_directed_acyclic_graph(q)


def brute_force(g: OpGraph, c: Cluster) -> float:
    names = c.names
    host = {d.name: d.host for d in c.devices}
    best = math.inf
    for combo in itertools.product(range(len(names)), repeat=g.n_ops):
        pl = {v: names[d] for v, d in zip(g.ops, combo)}
        if not ordered(pl, g) or not ordered({v: host[d] for v, d in pl.items()}, g):
            continue
        best = min(best, float(hierarchical_loads(Plan(g, pl), c).max()))
    return best


def random_graph(seed: int, n: int = 5) -> OpGraph:
    rng = np.random.default_rng(seed)
    ops = [(f"v{i}", {"compute": {"gpu": float(rng.uniform(1, 10))}}) for i in range(n)]
    edges = [(f"v{i}", f"v{j}", {"bytes": float(rng.choice([1e6, 5e7, 1.5e8]))})
             for i in range(n) for j in range(i + 1, n) if rng.random() < 0.45]
    return OpGraph.from_ops(ops, edges, name=f"r{seed}")


@pytest.mark.parametrize("seed", range(5))
def test_hierarchical_dp_equals_brute_force(seed):
    g = random_graph(seed)
    c = Cluster.preset("2x2xV100")
    plan = solve(g, c, method="dp", hierarchical=True)
    assert plan.predicted["max_load_ms"] == pytest.approx(brute_force(g, c), rel=1e-9)
    assert hierarchical_loads(plan, c).max() == pytest.approx(plan.predicted["max_load_ms"],
                                                              rel=1e-9)


def test_hierarchy_needs_identical_hosts_and_no_cpu():
    from workbench.cluster import Device, Link

    g = chain([1e6])
    uneven = Cluster([Device("g0", host="h0"), Device("g1", host="h0"), Device("g2", host="h1")],
                     intra_host=Link(0.0, 1e7), inter_host=Link(0.0, 1e6))
    with pytest.raises(SolverError, match="h0: 2, h1: 1"):
        solve(g, uneven, method="dp", hierarchical=True)
    with_cpu = Cluster([Device("g0", host="h0"), Device("c0", "cpu", host="h1")])
    with pytest.raises(SolverError, match="'c0'"):
        solve(g, with_cpu, method="dp", hierarchical=True)
    with pytest.raises(SolverError, match="interleave"):
        solve(g, Cluster.preset("2x2xV100"), method="dp", hierarchical=True, interleave=True)
