"""The runner on logical CPU devices: placements, order enforcement, faults, calibration and a
two-host plan on tf.distribute.Server processes."""

import math
from itertools import pairwise

import networkx as nx
import pytest

pytest.importorskip("tensorflow")

from workbench import Plan
from workbench.cluster import local_cluster
from workbench.errors import PlanError, RuntimeBridgeError
from workbench.fidelity.probes import probe_plan

pytestmark = pytest.mark.tf


@pytest.fixture(scope="module")
def rt():
    import workbench.runtime as rt

    return rt


@pytest.fixture(scope="module")
def mlp(rt):
    return rt.extract("mlp", 8, **rt.TINY["mlp"])


@pytest.fixture(scope="module")
def inception(rt):
    return rt.extract("inception_small", 2, **rt.TINY["inception_small"])


def _fwd_bwd_split(g):
    """Variables, forward and update ops on cpu0, every gradient op on cpu1."""
    return {v: ("cpu1" if g.op(v)["kind"] == "bwd" and g.op(v)["colocate"] is None else "cpu0")
            for v in g.ops}


def test_forward_and_backward_on_different_devices(rt, mlp):
    plan = Plan(mlp, _fwd_bwd_split(mlp), method="fwd_bwd")
    m = rt.run_plan(plan, steps=2, warmup=1, trace=True)
    assert m.ok and m.mean_ms > 0 and len(m.samples) == 2
    executed = {v: d for v, (d, _, _) in m.trace.items()}
    bwd = [v for v in mlp.ops if plan.placement[v] == "cpu1"]
    fwd = [v for v in mlp.ops if mlp.op(v)["kind"] == "fwd"]
    assert len(bwd) > 10 and len(fwd) > 10
    for v in bwd:
        assert executed[v].endswith("device:CPU:1"), v
    for v in fwd:
        assert executed[v].endswith("device:CPU:0"), v


def _order(g, prefer):
    """A topological order that runs ops whose name contains ``prefer`` as early as possible."""
    G = g.to_networkx()
    return list(nx.lexicographical_topological_sort(
        G, key=lambda v: (0 if prefer in v else 1, g.index[v])))


@pytest.mark.parametrize("prefer", ["inc0/b3", "inc0/b1"])
def test_order_enforced_on_one_device(rt, inception, prefer):
    g = inception
    order = _order(g, prefer)
    plan = Plan(g, {v: "cpu0" for v in g.ops}, order={"cpu0": order}, method="ordered")
    m = rt.run_plan(plan, steps=1, warmup=1, trace=True)
    assert m.ordered
    # variable handles do no work and are not chained (the initialiser needs them)
    seen = [v for v in order if v in m.trace and g.op(v)["op_type"] != "VarHandleOp"]
    assert len(seen) > 0.8 * len(order)
    # each op starts only after its predecessor in the order has finished
    for a, b in pairwise(seen):
        assert m.trace[b][1] >= m.trace[a][2] - 1e-3, (a, b)
    by_start = sorted(seen, key=lambda v: (m.trace[v][1], seen.index(v)))
    assert by_start == seen


def test_order_enforced_on_two_devices(rt, mlp):
    placement = _fwd_bwd_split(mlp)
    topo = _order(mlp, "gradients/")
    order = {d: [v for v in topo if placement[v] == d] for d in ("cpu0", "cpu1")}
    plan = Plan(mlp, placement, order=order, method="ordered2")
    m = rt.run_plan(plan, steps=1, warmup=0, trace=True)
    for d, ops in order.items():
        seen = [v for v in ops if v in m.trace and mlp.op(v)["op_type"] != "VarHandleOp"]
        for a, b in pairwise(seen):
            assert m.trace[b][1] >= m.trace[a][2] - 1e-3, (d, a, b)


def test_plan_faults_are_reported(rt, mlp, inception):
    good = Plan(mlp, {v: "cpu0" for v in mlp.ops}, method="good")
    unknown = Plan(mlp, {v: "tpu0" for v in mlp.ops}, method="unknown")
    missing = Plan(mlp, {v: "gpu7" for v in mlp.ops}, method="nogpu")
    other = Plan(inception, {v: "cpu0" for v in inception.ops}, method="other_graph")
    split = dict(good.placement)
    split["fc0/w"] = "cpu1"
    split_var = Plan(mlp, split, method="split_var")
    with pytest.raises(PlanError, match="does not name a TensorFlow device"):
        rt.run_plan(unknown, steps=1, warmup=0)
    with pytest.raises(RuntimeBridgeError, match="does not exist"):
        rt.run_plan(missing, steps=1, warmup=0)
    with pytest.raises(PlanError, match="another graph"):
        rt.run_plan(other, steps=1, warmup=0, program=rt.build_program("mlp", 8,
                                                                       **rt.TINY["mlp"]))
    with pytest.raises(PlanError, match="variable"):
        rt.run_plan(split_var, steps=1, warmup=0)
    rev = list(reversed(mlp.ops))
    with pytest.raises(PlanError, match="deadlock"):
        rt.run_plan(Plan(mlp, good.placement, order={"cpu0": rev}, method="rev"), steps=1,
                    warmup=0)
    res = rt.measure_plans(mlp, [good, unknown, missing, split_var], steps=2, warmup=1)
    assert list(res) == ["good", "unknown", "nogpu", "split_var"]
    assert res["good"].ok and res["good"].mean_ms > 0
    for k in ("unknown", "nogpu", "split_var"):
        assert not res[k].ok and math.isnan(res[k].mean_ms) and res[k].samples == []
        assert res[k].error


def _bad_builder(batch):
    import tensorflow as tf

    w = tf.compat.v1.get_variable("w", shape=[batch], initializer=tf.compat.v1.zeros_initializer(),
                                  use_resource=True)
    y = tf.debugging.check_numerics(tf.math.log(w - 1.0), "log of a negative number")
    return tf.reduce_sum(y * y)  # the gradient reads y, so the check runs in the step


def test_runtime_failure_is_reported(rt):
    prog = rt.build_program(_bad_builder, 4)
    g = rt.extract(_bad_builder, 4)
    plan = Plan(g, {v: "cpu0" for v in g.ops}, method="nan")
    with pytest.raises(RuntimeBridgeError, match="plan 'nan' failed while running"):
        rt.run_plan(plan, program=prog, steps=1, warmup=0)
    res = rt.measure_plans(g, {"a": plan}, program=prog, steps=1, warmup=0)
    assert not res["a"].ok and "InvalidArgument" in res["a"].error
    # a graph from a custom builder records no model: the runner asks for the program
    res = rt.measure_plans(g, {"a": plan}, steps=1, warmup=0)
    assert "program" in res["a"].error


def test_apply_if_faster(rt, mlp):
    single = Plan(mlp, {v: "cpu0" for v in mlp.ops}, method="single")
    split = Plan(mlp, _fwd_bwd_split(mlp), method="split")
    d = rt.apply_if_faster(single, split, tolerance=-100.0, steps=2, warmup=1)
    assert d.switched and d.plan is split and d.candidate.ok
    d = rt.apply_if_faster(single, split, current_measurement=d.current, tolerance=0.999,
                           steps=2, warmup=1)
    assert not d.switched and d.plan is single
    bad = Plan(mlp, {v: "gpu9" for v in mlp.ops}, method="bad")
    d = rt.apply_if_faster(single, bad, current_measurement=d.current, steps=1, warmup=0)
    assert not d.switched and d.plan is single and not d.candidate.ok


def test_calibrate_links_local(rt):
    c, samples = rt.calibrate_links(2, sizes=(1024, 65536, 1 << 20), repeats=2,
                                    return_samples=True)
    assert c.names == ["cpu0", "cpu1"] and set(c.links) == {("cpu0", "cpu1"), ("cpu1", "cpu0")}
    for lk in c.links.values():
        assert lk.r2 is not None and lk.latency >= 0 and lk.bandwidth > 0
    links = [s for s in samples if s.get("kind") != "pingpong"]
    assert len(links) == 6 and all(s["ms"] >= 0 for s in links)
    pings = [s for s in samples if s.get("kind") == "pingpong"]
    assert len(pings) == 3 and {(s["src"], s["dst"]) for s in pings} == {("cpu0", "cpu1")}
    assert all(math.isfinite(d.recv_overhead) and d.recv_overhead >= 0 for d in c.devices)
    quick = rt.calibrate_links(2, sizes=(1024, 65536), repeats=1, recv_overhead=False)
    assert all(d.recv_overhead == 0 for d in quick.devices)


def test_each_device_runs_one_op_at_a_time(rt, inception):
    """Logical CPU devices share one inter-op pool: without chains two ops of one device
    overlap; the runner's default chains make every device sequential."""
    import workbench as wb

    g = inception
    cl = local_cluster(2)
    plan = wb.solve(g, cl, method="round_robin")
    assert plan.order is None
    chains, source = rt.execution_chains(plan, cluster=cl)
    assert source == "simulated"
    assert chains == {d: ops for d, ops in wb.simulate(plan, cl).device_order().items() if ops}
    assert rt.execution_chains(plan)[1] == "topological"
    m = rt.run_plan(plan, steps=1, warmup=1, trace=True, cluster=cl)
    assert m.order_source == "simulated" and not m.ordered
    for d, ops in chains.items():
        seen = [v for v in ops if v in m.trace and g.op(v)["op_type"] != "VarHandleOp"]
        assert len(seen) > 0.8 * len(ops)
        for a, b in pairwise(seen):
            assert m.trace[b][1] >= m.trace[a][2] - 1e-3, (d, a, b)
    free = rt.run_plan(plan, steps=1, warmup=0, serialize=False)
    assert free.order_source is None


def test_interleaved_rounds(rt, mlp):
    good = Plan(mlp, {v: "cpu0" for v in mlp.ops}, method="good")
    split = Plan(mlp, _fwd_bwd_split(mlp), method="split")
    bad = Plan(mlp, {v: "gpu7" for v in mlp.ops}, method="nogpu")
    res = rt.measure_plans(mlp, [good, bad, split], steps=4, warmup=1, rounds=2, trace=True)
    assert list(res) == ["good", "nogpu", "split"]
    for k in ("good", "split"):
        assert res[k].ok and len(res[k].samples) == 4 and res[k].trace
    assert not res["nogpu"].ok and "does not exist" in res["nogpu"].error
    with pytest.raises(RuntimeBridgeError, match="steps >= 1"):
        rt.measure_plans(mlp, [good], steps=0)


def test_session_threads_are_per_session(rt):
    """A first session with one inter-op thread must not limit later sessions (TF's global
    pool is sized by the first session unless use_per_session_threads is set)."""
    from workbench.runtime._tf import session_config

    assert session_config(cpus=2).use_per_session_threads
    assert not session_config(cpus=2, target="grpc://x").use_per_session_threads


def test_fit_recv_overhead(rt, mlp):
    import workbench as wb

    cl = local_cluster(2)
    probe = probe_plan(mlp, cl, seed=3)
    assert len(probe.devices_used()) == 2
    for members in mlp.colocation_groups.values():
        assert len({probe.placement[v] for v in members}) == 1
    fitted, info = rt.fit_recv_overhead(mlp, cl, probe=probe, steps=3, warmup=1,
                                        return_details=True)
    o = info["overhead_ms"]
    assert o >= 0 and all(d.recv_overhead == o for d in fitted.devices)
    assert fitted.links == cl.links and info["probe_transfers"] > 0
    # the fitted overhead makes the simulated probe match its measurement (or the simulation
    # without overhead is already slower than measured)
    if o > 0:
        assert info["probe_simulated_ms"] == pytest.approx(info["probe_measured_ms"], rel=1e-3)
    else:
        assert wb.simulate(probe, cl).makespan >= info["probe_measured_ms"]
    with pytest.raises(RuntimeBridgeError, match="moves no tensor"):
        rt.fit_recv_overhead(mlp, local_cluster(1), steps=1, warmup=0)


def test_two_hosts_on_distributed_servers(rt, mlp):
    import workbench as wb

    with rt.LocalServers(2, 2) as srv:
        cluster = srv.cluster()
        assert cluster.hosts() == ["w0", "w1"]
        plan = wb.solve(mlp, cluster, method="round_robin")
        m = rt.run_plan(plan, target=srv.target, steps=2, warmup=1, trace=True)
        used = {d for d, _, _ in m.trace.values()}
        assert any("/task:0/" in d for d in used) and any("/task:1/" in d for d in used)
        for v, dev in plan.placement.items():
            if v in m.trace:
                t, j = dev[1:].split("/cpu")
                assert m.trace[v][0].endswith(f"task:{t}/device:CPU:{j}"), v


def test_cli_run_calibrated(capsys):
    import json

    from workbench.cli import main

    assert main(["run", "mlp", "--methods", "single,nope", "--steps", "1"]) == 2
    assert "unknown method 'nope'" in capsys.readouterr().err
    rc = main(["run", "mlp", "--methods", "single,round_robin", "--calibrate", "--steps", "2",
               "--warmup", "1", "--rounds", "2", "--json"])
    out = capsys.readouterr().out
    assert rc == 0
    rows = json.loads(out.strip().splitlines()[-1])
    assert [r["method"] for r in rows] == ["single", "round_robin"]
    for r in rows:
        assert r["measured_ms"] > 0 and r["simulated_ms"] > 0 and not r["error"]
