"""The paper-sized models: builders (at tiny sizes, with TensorFlow) and the checked-in samples
(loaded, never profiled in CI)."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.io import load_graph
from workbench.runtime.paper_models import PAPER_BATCH, PAPER_MODELS, PAPER_TINY

SAMPLES = Path(__file__).resolve().parents[2] / "sample_graphs"

# model -> (min ops, parameter MB range) of the checked-in sample at the published sizes
EXPECTED = {
    "resnet50": (1000, (100, 105)),        # 25.6 M parameters
    "inception_v3": (2000, (90, 100)),     # 23.8 M parameters (no auxiliary head)
    "bert_base": (3000, (400, 450)),       # 110 M parameters
    "gnmt": (5000, (100, 140)),
    "rnnlm": (2000, (400, 450)),           # RNNLM-2-2048: 108 M parameters
    "transformer_base": (4000, (230, 250)),
}


@pytest.mark.parametrize("name", sorted(PAPER_MODELS))
def test_checked_in_paper_sample(name):
    g = load_graph(SAMPLES / f"{name}.json.gz")
    min_ops, (lo, hi) = EXPECTED[name]
    assert g.n_ops >= min_ops
    assert lo <= g.meta["param_bytes"] / 1e6 <= hi
    assert g.meta["costs"] == "profiled" and g.meta["batch"] == PAPER_BATCH[name]
    prof = g.meta["profile"]
    assert prof["steps"] >= 1 and prof["warmup"] >= 0 and prof["step_ms"] > 0
    kinds = {g.op(v)["kind"] for v in g.ops}
    assert kinds == {"fwd", "bwd", "update", "other"}
    assert all(g.op(v).get("flops") is not None for v in g.ops)
    assert {"cpu", "gpu"} <= set(g.device_kinds)
    assert g.meta["device_costs"]["gpu"] == "roofline:V100:fp32"
    # every update op is colocated with its variable
    for v in g.ops:
        a = g.op(v)
        if a["kind"] == "update" and a["op_type"].startswith("ResourceApply"):
            assert a["colocate"] and a["colocate"].startswith("var:")
    # stashed activations, not only parameters
    assert g.total_memory() > g.meta["param_bytes"]


def test_paper_model_flops_are_plausible():
    """ResNet-50 at 224x224: about 4.1 GFLOPs (multiply-adds x 2 = 8.2) per image forward."""
    g = load_graph(SAMPLES / "resnet50.json.gz")
    fwd_conv = sum(g.op(v)["flops"] for v in g.ops
                   if g.op(v)["op_type"] == "Conv2D" and g.op(v)["kind"] == "fwd")
    per_image = fwd_conv / g.meta["batch"] / 1e9
    assert 7.0 < per_image < 8.5


@pytest.mark.tf
@pytest.mark.parametrize("name", ["resnet50", "bert_base", "gnmt"])
def test_paper_builders_extract_small(name):
    from workbench.runtime import extract

    g = extract(name, 2, **PAPER_TINY[name])
    assert {g.op(v)["kind"] for v in g.ops} == {"fwd", "bwd", "update", "other"}
    heavy = [v for v in g.ops if g.op(v)["op_type"] in ("MatMul", "BatchMatMulV2", "Conv2D")]
    assert heavy and all(g.op(v)["flops"] > 0 for v in heavy)
    assert g.meta["program"]["model"] == name


@pytest.mark.tf
def test_unknown_model_name():
    from workbench.errors import RuntimeBridgeError
    from workbench.runtime import extract

    with pytest.raises(RuntimeBridgeError, match="unknown model 'resnet51'.*resnet50"):
        extract("resnet51", 1)
