"""latency_ip with separate forward/backward contiguity for training graphs (Tarnawski et al.,
Section 4.2), against brute force under the judge (:func:`workbench.judge.pipelined.latency`)."""

from __future__ import annotations

import itertools
import math

import pytest

from workbench import Plan, solve
from workbench.cluster import Cluster, Device, Link
from workbench.errors import SolverError
from workbench.graph import OpGraph
from workbench.judge.pipelined import contiguity_violations, latency


def training_chain(n: int, *, skip: bool = False) -> OpGraph:
    """n layers: forward f0 -> ... -> f{n-1}, backward b{n-1} -> ... -> b0, each layer's
    forward activation feeding its gradient; fi and bi share weights (one colour class).
    ``skip``: f0 also feeds f2 and b1 feeds nothing but b0 (a branch)."""
    ops, edges = [], []
    for i in range(n):
        ops.append((f"f{i}", {"compute": {"gpu": 1.0 + 0.5 * i, "cpu": 9.0 + i}, "memory": 4.0,
                              "colocate": f"L{i}", "kind": "fwd"}))
        ops.append((f"b{i}", {"compute": {"gpu": 2.0 - 0.25 * i, "cpu": 15.0}, "memory": 0.0,
                              "colocate": f"L{i}", "kind": "bwd"}))
    for i in range(n - 1):
        edges.append((f"f{i}", f"f{i + 1}", {"comm": 0.5 + 0.1 * i}))
        edges.append((f"b{i + 1}", f"b{i}", {"comm": 0.4}))
    for i in range(n):
        edges.append((f"f{i}", f"b{i}", {"comm": 0.25}))
    if skip:
        edges.append(("f0", "f2", {"comm": 0.3}))
    return OpGraph.from_ops(ops, edges, name=f"train{n}")


def cluster(k: int, mem: float) -> Cluster:
    return Cluster([Device(f"gpu{i}", "gpu", mem) for i in range(k)] + [Device("cpu0", "cpu")],
                   mode="host", host_link=Link(0.0, 1e6))


def brute_force(g: OpGraph, c: Cluster) -> float:
    """Least judged latency over every colocated split whose forward and backward parts are
    contiguous on every accelerator and that fits the memories."""
    layers = sorted({g.op(v)["colocate"] for v in g.ops})
    best = math.inf
    for devs in itertools.product(c.names, repeat=len(layers)):
        where = dict(zip(layers, devs))
        plan = Plan(g, {v: where[g.op(v)["colocate"]] for v in g.ops})
        used: dict = {}
        for v in g.ops:
            used[plan.placement[v]] = used.get(plan.placement[v], 0.0) + g.op(v)["memory"]
        if any(used.get(d.name, 0.0) > d.memory for d in c.devices):
            continue
        bad = [m for m in contiguity_violations(plan, part="forward")
               + contiguity_violations(plan, part="backward") if "gpu" in m.split("'")[1]]
        if bad:
            continue
        best = min(best, latency(plan, c))
    return best


@pytest.mark.parametrize("n,k,skip", [(3, 2, False), (4, 2, False), (4, 3, True)])
@pytest.mark.parametrize("engine", ["cpsat", "milp"])
def test_separate_passes_match_brute_force(n, k, skip, engine):
    g, c = training_chain(n, skip=skip), cluster(k, 8.0)
    p = solve(g, c, method="latency_ip", separate_passes=True, engine=engine, time_limit=60)
    assert p.stats["separate_passes"] is True
    assert p.predicted["latency_ms"] == pytest.approx(latency(p, c))
    for part in ("forward", "backward"):
        assert not [m for m in contiguity_violations(p, part=part) if "gpu" in m]
    assert p.predicted["latency_ms"] == pytest.approx(brute_force(g, c), rel=1e-6)
    assert p.stats["bound"] <= p.predicted["latency_ms"] + 1e-9


def test_joint_contiguity_cannot_split_a_training_graph():
    """Without the option a colour-class unit holds both passes: the units form cycles, so
    any contiguous subgraph holds the whole model, which fits no accelerator here."""
    g, c = training_chain(3), cluster(2, 8.0)
    joint = solve(g, c, method="latency_ip", separate_passes=False, time_limit=30)
    sep = solve(g, c, method="latency_ip", separate_passes=True, time_limit=30)
    assert set(joint.placement.values()) == {"cpu0"}
    assert sep.predicted["latency_ms"] < joint.predicted["latency_ms"] / 5
    assert "separate_passes" not in joint.stats


def test_separate_passes_are_the_default_for_training_graphs_only():
    """Section 4.2 is the paper's program for training graphs: ``separate_passes=None`` (the
    default) takes it there and the joint program elsewhere."""
    g, c = training_chain(3), cluster(2, 8.0)
    auto = solve(g, c, method="latency_ip", time_limit=30)
    sep = solve(g, c, method="latency_ip", separate_passes=True, time_limit=30)
    assert auto.stats["separate_passes"] is True
    assert auto.predicted["latency_ms"] == pytest.approx(sep.predicted["latency_ms"])
    assert auto.predicted["latency_ms"] == pytest.approx(brute_force(g, c), rel=1e-6)
    fwd = OpGraph.from_ops([("a", {"compute": {"gpu": 1.0}}), ("b", {"compute": {"gpu": 2.0}})],
                           [("a", "b", {"comm": 0.5})])
    assert "separate_passes" not in solve(fwd, c, method="latency_ip", time_limit=10).stats


def test_separate_passes_need_a_training_graph():
    g = OpGraph.from_ops([("a", {"compute": {"gpu": 1.0}})])
    with pytest.raises(SolverError, match="separate_passes=True is for training graphs"):
        solve(g, cluster(1, 8.0), method="latency_ip", separate_passes=True)


def test_separate_passes_with_two_subgraphs_per_pass():
    g, c = training_chain(4, skip=True), cluster(2, 8.0)
    p = solve(g, c, method="latency_ip", separate_passes=True, q=2, time_limit=60)
    assert p.info["q"] == 2 and p.stats["q"] == 2
    assert p.predicted["latency_ms"] == pytest.approx(brute_force(g, c), rel=1e-6)
