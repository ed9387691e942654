"""Three rules of the live memory model found by measuring TensorFlow's allocator on two logical
CPU devices (docs/results-memory.md): an element-wise op writes into a tensor it reads in place
from the other CPU device (the buffer stays the producer's), a stashed view owns nothing, and
oneDNN's max pooling keeps a workspace beside its output for the gradient."""

from __future__ import annotations

import pytest

from workbench import Cluster, Plan, simulate
from workbench.cluster import Device
from workbench.graph import OpGraph

COST = {"cpu": 1.0, "gpu": 1.0}


def _chain():
    ops = [("a", {"compute": COST, "op_type": "MatMul"}), ("b", {"compute": COST, "op_type": "Relu"}),
           ("c", {"compute": COST, "op_type": "MatMul"}), ("d", {"compute": COST, "op_type": "MatMul"})]
    return OpGraph.from_ops(ops, [("a", "b", {"bytes": 100.0}), ("b", "c", {"bytes": 100.0}),
                                  ("c", "d", {"bytes": 10.0})])


def test_a_relu_on_the_other_cpu_device_writes_into_the_tensor_it_reads_in_place():
    """a (cpu0) -> Relu b (cpu1) -> c (cpu1): b is a's only reader, so TensorFlow's kernel
    reuses a's buffer (measured: transformer_small's Relu on cpu1 allocates nothing); the
    buffer stays on cpu0's books until c has read it, and cpu1 holds only c's 10 bytes."""
    g = _chain()
    cpus = Cluster([Device("cpu0", "cpu"), Device("cpu1", "cpu")])
    s = simulate(Plan(g, {"a": "cpu0", "b": "cpu1", "c": "cpu1", "d": "cpu1"}), cpus)
    assert s.peak_live_memory == {"cpu0": 100.0, "cpu1": 10.0}
    # GPUs share no memory: gpu1 holds the received copy and the Relu's own output
    gpus = Cluster.preset("2xV100-pcie")
    s = simulate(Plan(g, {"a": "gpu0", "b": "gpu1", "c": "gpu1", "d": "gpu1"}), gpus)
    assert s.peak_live_memory == {"gpu0": 100.0, "gpu1": 200.0}


def test_a_stashed_view_holds_its_input_not_a_copy():
    """x -> Reshape v (stashed for gy, ``memory`` 100 as extraction charges a stash) -> y: the
    view's 100 bytes are x's buffer, live until gy; counting the stash again made 210."""
    ops = [("x", {"compute": COST, "op_type": "MatMul", "kind": "fwd"}),
           ("v", {"compute": COST, "op_type": "Reshape", "memory": 100.0, "kind": "fwd"}),
           ("y", {"compute": COST, "op_type": "MatMul", "kind": "fwd"}),
           ("gy", {"compute": COST, "op_type": "MatMul", "kind": "bwd"})]
    g = OpGraph.from_ops(ops, [("x", "v", {"bytes": 100.0}), ("v", "y", {"bytes": 100.0}),
                               ("y", "gy", {"bytes": 10.0}), ("v", "gy", {"bytes": 100.0})])
    c = Cluster.preset("2xV100-pcie")
    s = simulate(Plan(g, {v: "gpu0" for v in g.ops}), c)
    assert s.peak_live_memory["gpu0"] == 110.0


def test_a_workspace_lives_beside_its_stashed_output_until_the_gradient():
    ops = [("p", {"compute": COST, "op_type": "MaxPool", "kind": "fwd", "memory": 100.0,
                  "workspace_bytes": 25.0}),
           ("q", {"compute": COST, "op_type": "MatMul", "kind": "fwd"}),
           ("gp", {"compute": COST, "op_type": "MaxPoolGrad", "kind": "bwd"})]
    g = OpGraph.from_ops(ops, [("p", "q", {"bytes": 100.0}), ("q", "gp", {"bytes": 10.0}),
                               ("p", "gp", {"bytes": 100.0})])
    c = Cluster([Device("cpu0", "cpu"), Device("cpu1", "cpu")])
    s = simulate(Plan(g, {v: "cpu0" for v in g.ops}), c)
    assert s.peak_live_memory["cpu0"] == 135.0  # output 100 + workspace 25 + q's 10
    g0 = OpGraph.from_ops([(v, {k: x for k, x in a.items() if k != "workspace_bytes"})
                           for v, a in ops], [("p", "q", {"bytes": 100.0}),
                                              ("q", "gp", {"bytes": 10.0}),
                                              ("p", "gp", {"bytes": 100.0})])
    assert simulate(Plan(g0, {v: "cpu0" for v in g0.ops}), c).peak_live_memory["cpu0"] == 110.0
    # the workspace is oneDNN's: kept on a CPU device, not on a GPU (cuDNN's pooling keeps none)
    c = Cluster([Device("cpu0", "cpu"), Device("gpu0", "gpu")])
    assert simulate(Plan(g, {v: "cpu0" for v in g.ops}), c).peak_live_memory["cpu0"] == 135.0
    assert simulate(Plan(g, {v: "gpu0" for v in g.ops}), c).peak_live_memory["gpu0"] == 110.0


@pytest.mark.tf
def test_tensorflow_extraction_marks_onednn_max_pooling_workspaces():
    pytest.importorskip("tensorflow")
    from workbench.runtime import extract
    from workbench.runtime.extraction import ONEDNN_WORKSPACE, onednn_enabled

    g = extract("inception_small", 2)
    pools = [v for v in g.ops if g.op(v)["op_type"] == "MaxPool"]
    assert pools
    for v in pools:
        a = g.op(v)
        if onednn_enabled():
            assert a["workspace_bytes"] == pytest.approx(ONEDNN_WORKSPACE["MaxPool"] * a["out_bytes"])
        else:
            assert "workspace_bytes" not in a
    assert not any("workspace_bytes" in g.op(v) for v in g.ops if g.op(v)["op_type"] != "MaxPool")
