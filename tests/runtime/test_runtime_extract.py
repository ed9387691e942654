"""Extraction and profiling of the five sample models (TensorFlow, logical CPU devices)."""

import pytest

pytest.importorskip("tensorflow")

from workbench.errors import RuntimeBridgeError

pytestmark = pytest.mark.tf


@pytest.fixture(scope="module")
def rt():
    import workbench.runtime as rt

    return rt


@pytest.mark.parametrize("model", ["mlp", "resnet_small", "inception_small",
                                   "transformer_small", "lstm_seq2seq"])
def test_extract_each_model(rt, model):
    g = rt.extract(model, 4, **rt.TINY[model])
    kinds = {g.op(v)["kind"] for v in g.ops}
    assert {"fwd", "bwd", "update", "other"} <= kinds
    # every update op is colocated with the variable it updates
    for v in g.ops:
        a = g.op(v)
        if a["op_type"] == "ResourceApplyGradientDescent":
            grp = a["colocate"]
            assert grp is not None and grp.startswith("var:")
            var = grp[4:]
            assert g.op(var)["op_type"] == "VarHandleOp" and g.op(var)["colocate"] == grp
            assert g.op(var)["memory"] > 0
    # gradient ops are real ops with tensor edges
    bwd = [v for v in g.ops if g.op(v)["kind"] == "bwd"]
    assert any(g.edge(u, w)["bytes"] > 0 for u in bwd for w in g.successors(u))
    assert g.meta["program"]["model"] == model and g.meta["param_bytes"] > 0
    assert g.meta["costs"] == "estimated" and g.total_compute("cpu") > 0
    assert g.is_training()


def test_extract_output_bytes_match_shapes(rt):
    g = rt.extract("mlp", 8, layers=1, width=16, in_dim=12)
    # fc0/MatMul: [8, 16] float32 -> 512 bytes to its bias add
    assert g.edge("fc0/MatMul", "fc0/add")["bytes"] == 8 * 16 * 4
    # fc0/w is a [12, 16] float32 variable
    assert g.op("fc0/w")["memory"] == 12 * 16 * 4
    # activations read by the backward pass are stashed
    assert g.op("data/x_value")["kind"] == "other" or g.op("data/x_value")["memory"] >= 0


def test_profile_writes_measured_costs(rt):
    g = rt.extract("mlp", 8, **rt.TINY["mlp"])
    p = rt.profile(g, steps=2, warmup=1)
    assert p.meta["costs"] == "profiled" and p.meta["profile"]["steps"] == 2
    assert p.ops == g.ops
    assert p.op("fc0/MatMul")["compute"]["cpu"] > 0
    # the op times add up to the measured single-device step time
    assert p.total_compute("cpu") == pytest.approx(p.meta["profile"]["step_ms"], rel=1e-6)


def test_bad_models(rt):
    with pytest.raises(RuntimeBridgeError, match="unknown model 'nope'"):
        rt.extract("nope", 4)
    with pytest.raises(RuntimeBridgeError, match="batch"):
        rt.extract("mlp", 0)
    with pytest.raises(RuntimeBridgeError, match="scalar loss"):
        rt.extract(lambda batch: None, 4)


def test_sample_graphs_load():
    from workbench import samples

    for name in ("resnet_small", "inception_small", "transformer_small", "lstm_seq2seq",
                 "mlp"):
        g = samples.load_sample(name)
        assert g.meta["costs"] == "profiled" and g.meta["program"]["model"] == name
        assert g.meta["tf_version"] and g.meta["batch"] > 0
        assert g.is_training() and g.total_compute("cpu") > 0
