"""Replicated stages judged (Tarnawski et al., Appendix C.2): the replica graph the judge sees,
its all-reduce on the links, and the DP's prediction against max_load, simulate and brute force."""

from __future__ import annotations

import itertools
import math

import pytest

from workbench import Plan, evaluate, max_load, samples, simulate, solve
from workbench.cluster import Cluster, Device, Link
from workbench.errors import GraphError, PlanError
from workbench.graph import OpGraph
from workbench.judge.pipelined import load_parts, pipelined_time, replica_graph
from workbench.costs.pipeline_costs import (
    allreduce_chunk_ms,
    default_allreduce_bandwidth,
    op_shares,
)


def host(k: int, l_: int = 0, bw: float = 1e6, lat: float = 0.0) -> Cluster:
    return Cluster([Device(f"gpu{i}", "gpu", 1e12) for i in range(k)]
                   + [Device(f"cpu{i}", "cpu") for i in range(l_)],
                   mode="host", host_link=Link(lat, bw))


def chain() -> OpGraph:
    """a -> b -> c, b heavy and holding 4 MB of weights; every edge costs 1 ms."""
    ops = [("a", {"compute": {"gpu": 1.0, "cpu": 5.0}}),
           ("b", {"compute": {"gpu": 8.0, "cpu": 50.0}, "memory": 4e6}),
           ("c", {"compute": {"gpu": 1.0, "cpu": 5.0}})]
    return OpGraph.from_ops(ops, [("a", "b", {"comm": 1.0}), ("b", "c", {"comm": 1.0})],
                            name="chain")


def test_default_bandwidth_is_a_ring_over_the_slowest_link():
    assert default_allreduce_bandwidth(host(4)) == pytest.approx(1e6 / 4)
    assert default_allreduce_bandwidth(host(1, 1)) == math.inf
    direct = Cluster([Device("g0"), Device("g1")], mode="direct", intra_host=Link(0.0, 2e6))
    assert default_allreduce_bandwidth(direct) == pytest.approx(2e6 / 4)
    # 4 (R - 1) charges of one chunk = the paper's (R - 1) W / (R B)
    for R in (2, 3, 5):
        assert 4 * (R - 1) * allreduce_chunk_ms(6e6, R, 1e5) == \
            pytest.approx((R - 1) * 6e6 / (R * 1e5))


def test_replica_graph_hand_computed_loads_and_timeline():
    """a on gpu0, b replicated on gpu1/gpu2, c on gpu3, host link 1e6 B/ms, no latency.

    gpu0: a (1) + a's upload (1) = 2. gpu1, gpu2: b/2 (4) + a's download x 1/2 (0.5) + b's
    upload x 1/2 (0.5) + ring all-reduce: B = 1e6 / 4, chunk = 4e6 / (4 * 2 * B) = 2 ms,
    2 sends + 2 receives = 8; total 13. gpu3: c (1) + two downloads of b's half (0.5 each) = 2.
    """
    g, c = chain(), host(4)
    B = default_allreduce_bandwidth(c)
    h, pl = replica_graph(g, {"a": "gpu0", "b": "gpu1", "c": "gpu3"},
                          {"gpu1": ["gpu1", "gpu2"]}, c, allreduce_bandwidth=B)
    assert sorted(v for v in h.ops if not v.startswith("allreduce")) == ["a", "b@0", "b@1", "c"]
    assert (pl["b@0"], pl["b@1"]) == ("gpu1", "gpu2")
    assert h.op("b@1")["compute"]["gpu"] == 4.0 and h.op("b@1")["memory"] == 4e6
    assert op_shares(h)[h.index["b@0"]] == 0.5
    assert len([v for v in h.ops if v.startswith("allreduce")]) == 2 * 3   # 2 (R-1) + 1 each
    plan = Plan(h, pl)
    from workbench.simulate import device_loads

    assert device_loads(plan, c).tolist() == pytest.approx([2.0, 13.0, 13.0, 2.0])
    assert max_load(plan, c) == pytest.approx(13.0)
    assert pipelined_time(plan, c) == pytest.approx(13.0)
    parts = load_parts(plan, c)
    assert parts["compute"][1].sum() == pytest.approx(4.0)
    # timeline: a 0-1, upload 1-2, half downloads 2-2.5, b@r 2.5-6.5, b@r's half upload
    # 6.5-7, then the ring: chunk up 7-9, down 9-11, up 11-13, down 13-15; c after two
    # half downloads on gpu3's channel (7-7.5, 7.5-8) runs 8-9
    s = simulate(plan, c)
    assert s.makespan == pytest.approx(15.0)
    assert s.end[h.index["c"]] == pytest.approx(9.0)
    assert s.start[h.index["b@1"]] == pytest.approx(2.5)
    ring = s.transfers_frame()
    ring = ring[ring["op"].str.startswith("allreduce")]
    assert len(ring) == 2 * 2 * 2 and ring["bytes"].tolist() == [2e6] * 8
    assert ring["duration_ms"].tolist() == pytest.approx([2.0] * 8)


def _brute_force_replicated(g: OpGraph, c: Cluster, B: float, judge=max_load) -> float:
    """Every split of a chain into consecutive stages, each on r >= 1 accelerators (at most
    k in all), judged by ``judge`` (max_load) on its replica graph."""
    ops = g.ops
    k = len(c.devices)
    best = math.inf
    n = len(ops)
    for cuts in itertools.chain.from_iterable(
            itertools.combinations(range(1, n), m) for m in range(n)):
        bounds = (0, *cuts, n)
        stages = [ops[bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)]
        for reps in itertools.product(range(1, k + 1), repeat=len(stages)):
            if sum(reps) > k:
                continue
            pl, replicas, d = {}, {}, 0
            for S, r in zip(stages, reps):
                devs = [f"gpu{d + i}" for i in range(r)]
                d += r
                for v in S:
                    pl[v] = devs[0]
                if r > 1:
                    replicas[devs[0]] = devs
            h, hp = replica_graph(g, pl, replicas, c, allreduce_bandwidth=B)
            best = min(best, judge(Plan(h, hp), c))
    return best


@pytest.mark.parametrize("bw", [None, 2e5, math.inf])
def test_dp_replicated_optimum_equals_brute_force_under_the_judge(bw):
    g = OpGraph.from_ops(
        [(f"o{i}", {"compute": {"gpu": t}, "memory": m})
         for i, (t, m) in enumerate([(1.0, 0.0), (12.0, 2e6), (3.0, 5e5), (9.0, 6e6)])],
        [(f"o{i}", f"o{i + 1}", {"comm": 0.5 + 0.25 * i}) for i in range(3)], name="c4")
    c = host(4)
    plan = solve(g, c, method="dp", replicate=True, allreduce_bandwidth=bw)
    B = default_allreduce_bandwidth(c) if bw is None else bw
    assert plan.info.get("allreduce_bandwidth", B) == B
    assert max_load(plan, c) == pytest.approx(plan.predicted["max_load_ms"], rel=1e-9)
    assert plan.predicted["max_load_ms"] == pytest.approx(_brute_force_replicated(g, c, B),
                                                          rel=1e-9)


def test_interleaved_replica_loads_by_hand():
    """Issue 29 point 4: under App. C.1's interleaving the ring all-reduce travels the links
    with the activations. a on gpu0, b (8 ms, 4 MB) on gpu1/gpu2, c on gpu3 (see the
    hand-computed test above): a replica computes 4, moves 0.5 in and 0.5 out, and the ring
    charges 4 ms on each channel. Half duplex: max(4, 0.5 + 0.5 + 8) = 9; full duplex:
    max(4, 0.5 + 4, 0.5 + 4) = 4.5 (the DP used max(load / r, sync): 8 for both)."""
    from workbench.solvers.pipeline.pykernel import stage_load

    g, c = chain(), host(4)
    B = default_allreduce_bandwidth(c)
    h, pl = replica_graph(g, {"a": "gpu0", "b": "gpu1", "c": "gpu3"},
                          {"gpu1": ["gpu1", "gpu2"]}, c, allreduce_bandwidth=B)
    plan = Plan(h, pl)
    assert pipelined_time(plan, c, interleave=True) == pytest.approx(9.0)
    assert pipelined_time(plan, c, interleave="full_duplex") == pytest.approx(4.5)
    # the DP's stage load of b on two replicas: compute 8, in 1, out 1, 4 MB of weights
    assert stage_load(8.0, 1.0, 1.0, 4e6, 2, 1, True, 1 / B) == pytest.approx(9.0)
    assert stage_load(8.0, 1.0, 1.0, 4e6, 2, 2, True, 1 / B) == pytest.approx(4.5)
    assert stage_load(8.0, 1.0, 1.0, 4e6, 2, 0, True, 1 / B) == pytest.approx(13.0)


@pytest.mark.parametrize("mode", [True, "full_duplex"])
@pytest.mark.parametrize("graph", ["c4", "chain"])
def test_interleaved_replicated_dp_equals_pipelined_time_and_brute_force(mode, graph):
    """The DP's interleaved replicated value is pipelined_time of its replica graph, and the
    best of every replicated split of the chain under that judge."""
    if graph == "chain":
        g = chain()
    else:
        g = OpGraph.from_ops(
            [(f"o{i}", {"compute": {"gpu": t}, "memory": m})
             for i, (t, m) in enumerate([(1.0, 0.0), (12.0, 2e6), (3.0, 5e5), (9.0, 6e6)])],
            [(f"o{i}", f"o{i + 1}", {"comm": 0.5 + 0.25 * i}) for i in range(3)], name="c4")
    c = host(4)
    plan = solve(g, c, method="dp", replicate=True, interleave=mode)
    judge = lambda pl, cl: pipelined_time(pl, cl, interleave=mode)  # noqa: E731
    assert judge(plan, c) == pytest.approx(plan.predicted["max_load_ms"], rel=1e-9)
    best = _brute_force_replicated(g, c, default_allreduce_bandwidth(c), judge)
    assert plan.predicted["max_load_ms"] == pytest.approx(best, rel=1e-9)


def test_default_synchronisation_is_never_free():
    g, c = chain(), host(4)
    free = solve(g, c, method="dp", replicate=True, allreduce_bandwidth=math.inf)
    paid = solve(g, c, method="dp", replicate=True)
    assert paid.predicted["max_load_ms"] > free.predicted["max_load_ms"]
    assert max_load(paid, c) == pytest.approx(paid.predicted["max_load_ms"])
    assert max_load(free, c) == pytest.approx(free.predicted["max_load_ms"])
    # free synchronisation: the whole model on 4 replicas, (1 + 8 + 1) / 4 = 2.5
    assert free.predicted["max_load_ms"] == pytest.approx(2.5)
    assert len(free.info["replicas"]["gpu0"]) == 4


def test_latency_is_charged_per_share_like_the_dp():
    """Link latency: a replica pays (lat + bytes / bw) / R per sample, as the DP's acc / R."""
    ops = [("a", {"compute": {"gpu": 1.0}}), ("b", {"compute": {"gpu": 30.0}}),
           ("c", {"compute": {"gpu": 1.0}})]
    g = OpGraph.from_ops(ops, [("a", "b", {"bytes": 3e5}), ("b", "c", {"bytes": 1e5})])
    c = host(5, lat=0.3)
    plan = solve(g, c, method="dp", replicate=True)
    assert plan.info["replicas"]
    assert max_load(plan, c) == pytest.approx(plan.predicted["max_load_ms"], rel=1e-9)
    assert pipelined_time(plan, c) == pytest.approx(plan.predicted["max_load_ms"], rel=1e-9)


def test_replicated_training_plan_is_judged_and_respects_colocation():
    g = samples.to_training(samples.cnn(12), update=True)
    c = host(4, 1, bw=1e7)
    plan = solve(g, c, method="dp", replicate=True, allreduce_bandwidth=1e7 / 4)
    assert plan.info["replicas"], "expected a replicated stage on this instance"
    assert plan.graph is not g and plan.graph.n_ops > g.n_ops
    m = evaluate(plan, c)
    assert m.feasible, m.violations
    assert m.max_load_ms == pytest.approx(plan.predicted["max_load_ms"], rel=1e-9)
    ar = [v for v in plan.graph.ops if v.startswith("allreduce")]
    assert ar and all(plan.graph.op(v)["kind"] == "bwd" for v in ar)


def test_direct_mode_two_devices_data_parallel():
    g = chain()
    c = Cluster([Device("g0", "gpu", 1e12), Device("g1", "gpu", 1e12)], mode="direct",
                intra_host=Link(0.0, 1e6))
    plan = solve(g, c, method="dp", replicate=True, allreduce_bandwidth=1e6)
    # everything on both devices: (1 + 8 + 1) / 2 + (2 - 1) * 4e6 / (2 * 1e6) = 7 < 10
    assert plan.predicted["max_load_ms"] == pytest.approx(7.0)
    assert max_load(plan, c) == pytest.approx(7.0)


def test_bad_shares_and_replica_lists_are_named():
    g = OpGraph.from_ops([("a", {"compute": {"gpu": 1.0}, "share": 1.5})])
    with pytest.raises(GraphError, match="op 'a': share"):
        op_shares(g)
    with pytest.raises(PlanError, match="replicas of stage on 'gpu1'"):
        replica_graph(chain(), {"a": "gpu0", "b": "gpu1", "c": "gpu3"},
                      {"gpu1": ["gpu2", "gpu1"]}, host(4), allreduce_bandwidth=1e6)
    with pytest.raises(PlanError, match="unknown device 'gpu9'"):
        replica_graph(chain(), {"a": "gpu0", "b": "gpu1", "c": "gpu3"},
                      {"gpu1": ["gpu1", "gpu9"]}, host(4), allreduce_bandwidth=1e6)
    with pytest.raises(PlanError, match="op 'c' is placed on 'gpu2'"):
        replica_graph(chain(), {"a": "gpu0", "b": "gpu1", "c": "gpu2"},
                      {"gpu1": ["gpu1", "gpu2"]}, host(4), allreduce_bandwidth=1e6)
    with pytest.raises(PlanError, match="leaves 1 ops unplaced"):
        replica_graph(chain(), {"a": "gpu0", "b": "gpu1"}, {}, host(4), allreduce_bandwidth=1e6)


def _simulated_busy(s, nd: int):
    """Per device: the simulated time of its ops plus that of the transfers on its channels
    (host mode: its upload and its download channel)."""
    import numpy as np

    out = np.zeros(nd)
    np.add.at(out, s.device, s.end - s.start)
    dur = s.t_end - s.t_start
    for k in range(s.n_transfers):
        for d in (int(s.t_src[k]), int(s.t_dst[k])):
            if d >= 0:
                out[d] += dur[k]
    return out


@pytest.mark.parametrize("make", [lambda: samples.to_training(samples.cnn(12), update=True),
                                  lambda: chain()])
def test_simulate_sees_the_replicas_and_the_all_reduce(make):
    """The simulator runs every replica op and every ring transfer: per device, its simulated
    busy time (ops, upload and download channels) is max_load's load, whose largest is the
    DP's value."""
    from workbench.simulate import device_loads

    g, c = make(), host(4, bw=1e7)
    plan = solve(g, c, method="dp", replicate=True)
    assert plan.info["replicas"]
    s = simulate(plan, c)
    busy = _simulated_busy(s, len(c.devices))
    assert busy.tolist() == pytest.approx(device_loads(plan, c).tolist(), rel=1e-9)
    assert busy.max() == pytest.approx(plan.predicted["max_load_ms"], rel=1e-9)
    assert len([k for k in range(s.n_transfers)
                if plan.graph.c.names[int(s.t_op[k])].startswith("allreduce")]) > 0
