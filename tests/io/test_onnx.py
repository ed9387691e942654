"""ONNX import: models built in code with onnx.helper."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper

from workbench import Cluster, solve
from workbench.errors import FormatError, GraphError
from workbench.io.onnx import onnx_to_opgraph, read_onnx


def _init(name, shape):
    return numpy_helper.from_array(np.zeros(shape, np.float32), name)


def small_cnn():
    """conv(3->8, 3x3) -> relu -> maxpool -> two branches (conv 1x1, identity) -> add ->
    flatten -> gemm(8*4*4 -> 10)."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], name="conv2"),
        helper.make_node("Add", ["c2", "p1"], ["a"], name="add"),
        helper.make_node("Flatten", ["a"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], name="fc", transB=1),
    ]
    g = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])],
        [_init("w1", (8, 3, 3, 3)), _init("b1", (8,)), _init("w2", (8, 8, 1, 1)),
         _init("wf", (10, 128)), _init("bf", (10,))])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_shapes_flops_memory_and_edges(tmp_path):
    path = tmp_path / "cnn.onnx"
    onnx.save(small_cnn(), str(path))
    g = read_onnx(path, batch=2)
    assert g.name == "cnn" and g.n_ops == 7
    assert g.op("conv1")["shapes"] == [[2, 8, 8, 8]]
    assert g.op("conv1")["flops"] == 2 * (2 * 8 * 8 * 8) * 27
    assert g.op("fc")["flops"] == 2 * (2 * 10) * 128
    assert g.op("flat")["flops"] == 0 and g.op("flat")["compute"]["gpu"] == 0
    # initialisers are parameter memory on the ops that read them
    assert g.op("conv1")["memory"] == 4 * (8 * 27 + 8)
    assert g.op("fc")["memory"] == 4 * (10 * 128 + 10)
    assert g.meta["param_bytes"] == 4 * (8 * 27 + 8 + 64 + 1280 + 10)
    assert g.edge("pool", "add")["bytes"] == 4 * 2 * 8 * 4 * 4
    assert set(g.edges()) >= {("conv1", "relu1"), ("pool", "conv2"), ("pool", "add")}
    # roofline costs: V100 on gpu, the fitted CPU on cpu; the graph solves on a preset
    assert all(g.op(v)["compute"]["gpu"] < g.op(v)["compute"]["cpu"] for v in g.ops
               if g.op(v)["flops"] > 0)
    plan = solve(g, Cluster.preset("4xV100-nvlink"), method="heft")
    assert set(plan.placement) == set(g.ops)


def test_training_graph_and_batch():
    fwd = onnx_to_opgraph(small_cnn(), batch=4)
    tr = onnx_to_opgraph(small_cnn(), batch=4, training=True)
    assert tr.is_training() and tr.n_ops == 2 * fwd.n_ops
    # activations are kept for the backward pass
    assert tr.total_memory() > fwd.total_memory()
    assert onnx_to_opgraph(small_cnn(), batch=8).op("conv1")["flops"] == \
        2 * fwd.op("conv1")["flops"]


def test_unknown_op_type_is_named_or_costed_as_elementwise():
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="relu"),
             helper.make_node("Hardmax", ["h"], ["y"], name="hm")]
    g = helper.make_graph(nodes, "hm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(GraphError, match="'hm' \\(type 'Hardmax'\\)"):
        onnx_to_opgraph(model)
    og = onnx_to_opgraph(model, unknown="elementwise")
    assert og.meta["cost_fallback_types"] == ["Hardmax"] and og.op("hm")["flops"] == 10


def test_bad_files(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\xffnot a protobuf at all" * 10)
    with pytest.raises(FormatError, match="bad.onnx"):
        read_onnx(bad)
    with pytest.raises(FormatError, match="does not exist"):
        read_onnx(tmp_path / "missing.onnx")
    # a model whose shapes do not agree
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    g = helper.make_graph(nodes, "mm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                          [_init("w", (4, 3))])
    with pytest.raises(FormatError, match="shape inference"):
        onnx_to_opgraph(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
