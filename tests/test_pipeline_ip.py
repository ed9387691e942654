"""Integer programs of the pipelining paper on small graphs: agreement with the DP, the latency
evaluator and the greedy baseline."""

from __future__ import annotations

import pytest

from workbench import Plan, max_load, samples, solve
from workbench.cluster import Cluster, Device, Link
from workbench.graph import OpGraph
from workbench.pipeline import latency, latency_pieces


def host(k: int, l_: int = 1, mem: float = 1e12) -> Cluster:
    return Cluster([Device(f"gpu{i}", "gpu", mem) for i in range(k)]
                   + [Device(f"cpu{i}", "cpu") for i in range(l_)],
                   mode="host", host_link=Link(0.0, 1e6))


def uniform(g: OpGraph) -> OpGraph:
    ops = [(v, dict(g.op(v))) for v in g.ops]
    return OpGraph.from_ops(ops, [(u, v, {"comm": 0.3 + 0.2 * (g.index[u] % 4)})
                                  for u, v in g.edges()], name=g.name)


@pytest.mark.parametrize("seed", [0, 1])
def test_ip_contig_equals_dp_and_noncontig_is_no_worse(seed):
    g = uniform(samples.random_dag(9, edge_prob=0.3, seed=seed, memory=1e6))
    c = host(3, 1, mem=4e6)
    d = solve(g, c, method="dp").predicted["max_load_ms"]
    a = solve(g, c, method="ip_contig", time_limit=30, gap=1e-6, warm_start=False)
    assert a.predicted["max_load_ms"] == pytest.approx(d, rel=1e-5)
    assert max_load(a, c) == pytest.approx(a.predicted["max_load_ms"], rel=1e-6)
    b = solve(g, c, method="ip_noncontig", time_limit=30, gap=1e-6)
    assert max_load(b, c) <= d + 1e-6


def test_latency_evaluator_by_hand():
    # a -> b -> c, a and c on the GPU, b on the CPU: two GPU pieces, run in order
    ops = [("a", {"compute": {"gpu": 1.0, "cpu": 5.0}}), ("b", {"compute": {"gpu": 1.0, "cpu": 2.0}}),
           ("c", {"compute": {"gpu": 3.0, "cpu": 9.0}})]
    g = OpGraph.from_ops(ops, [("a", "b", {"comm": 0.5}), ("b", "c", {"comm": 0.25})])
    c = host(1, 1)
    plan = Plan(g, {"a": "gpu0", "b": "cpu0", "c": "gpu0"})
    assert latency_pieces(g, plan.device_array(c), [True, False]).tolist() == [0, -1, 1]
    # piece 0: 1 + out 0.5 = 1.5; b: 1.5 + 2 = 3.5; piece 1: 3.5 + in 0.25 + 3 = 6.75
    assert latency(plan, c) == pytest.approx(6.75)


def test_latency_ip_beats_or_matches_greedy_and_agrees_with_evaluator():
    g = uniform(samples.two_branch())
    c = host(2, 2, mem=1e12)
    gr = solve(g, c, method="greedy_latency")
    p = solve(g, c, method="latency_ip", time_limit=30)
    assert p.predicted["latency_ms"] <= gr.predicted["latency_ms"] + 1e-6
    assert latency(p, c) == pytest.approx(p.predicted["latency_ms"], rel=1e-5)
    q2 = solve(g, c, method="latency_ip", q=2, time_limit=30)
    assert q2.predicted["latency_ms"] <= p.predicted["latency_ms"] + 1e-6


def test_local_search_is_seeded_and_metis_is_general():
    g = samples.transformer(40, seed=3)
    c = host(3, 1)
    a = solve(g, c, method="local_search", seed=7, restarts=2)
    b = solve(g, c, method="local_search", seed=7, restarts=2)
    assert a.placement == b.placement
    m = solve(g, Cluster.preset("4xV100-nvlink"), method="metis", seed=0)
    assert len(m.devices_used()) >= 2
