"""Models as their users build them: transformers' default attention captured, exports costed.

Every model here is built in code the way its library builds it (random weights, small sizes
through the config classes, the default attention implementation, SDPA), captured with
:func:`workbench.io.torch.from_torch` and exported with both ONNX exporters; FLOPs are checked
against torch's own counter (``FlopCounterMode``) with the fused attention paths counted
(:func:`workbench.testing.torch_flops.torch_flops`), and the SDPA capture against the capture of
the same model with ``attn_implementation="eager"`` (matmul-softmax-matmul).
"""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
tr = pytest.importorskip("transformers")
torchvision = pytest.importorskip("torchvision")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from workbench.costs.roofline import op_family  # noqa: E402
from workbench.io.onnx import read_onnx  # noqa: E402
from workbench.io.torch import from_torch  # noqa: E402
from workbench.testing.torch_flops import torch_flops  # noqa: E402
from workbench.testing.user_models import user_model, wrap  # noqa: E402

COUNTED_ATEN = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::convolution",
                "aten::convolution_backward"}


def _flops(g, kind=None):
    return sum(g.op(v)["flops"] for v in g.ops if kind is None or g.op(v)["kind"] == kind)


def _counted(g):
    """FLOPs of the ops torch's counter counts (matrix products, convolutions, attention)."""
    return sum(g.op(v)["flops"] for v in g.ops if g.op(v)["op_type"] in COUNTED_ATEN
               or "scaled_dot_product" in g.op(v)["op_type"])


def _step(model, x):
    def run():
        model.zero_grad()
        model(x).float().mean().backward()      # from_torch's default loss
    return run


# bert and vit (6-7 s each, two captures) run in `make test` only
@pytest.mark.parametrize("name", ["gpt2", "llama", pytest.param("bert", marks=pytest.mark.slow),
                                  pytest.param("vit", marks=pytest.mark.slow), "torchvision-vit"])
def test_default_attention_captures_with_the_eager_paths_costs(name):
    model, x = user_model(name)
    if name != "torchvision-vit":
        assert model.m.config._attn_implementation == "sdpa"     # the library's default
    g = from_torch(model, (x,), training=True, profile=None)
    ref = torch_flops(_step(model, x), grad=True)
    assert _counted(g) == pytest.approx(ref, rel=0.02), (name, _counted(g), ref)
    assert _flops(g) == pytest.approx(ref, rel=0.10)
    if name != "torchvision-vit":
        eager = from_torch(user_model(name, attn="eager")[0], (x,), training=True, profile=None)
        for kind in ("fwd", "bwd", "update", None):
            assert _flops(g, kind) == pytest.approx(_flops(eager, kind), rel=0.02), (name, kind)
        assert g.meta["param_bytes"] == eager.meta["param_bytes"]
    unused = {"bert": ["m.pooler.dense.weight", "m.pooler.dense.bias"],
              "vit": ["m.pooler.dense.weight", "m.pooler.dense.bias"]}.get(name, [])
    assert g.meta["params_without_grad"] == unused
    assert all(p.requires_grad for p in model.parameters())     # the user's model untouched
    # one update per parameter that gets a gradient (GPT-2's tied embedding and decoder: one)
    ups = [g.op(v)["param"] for v in g.ops if g.op(v)["kind"] == "update"]
    params = [n for n, _ in model.named_parameters()]
    assert sorted(ups) == sorted(set(params) - set(unused))


def test_fused_attention_is_one_op_with_its_flops_and_kept_outputs():
    model, x = user_model("llama")
    g = from_torch(model, (x,), training=True, profile=None)
    att = [v for v in g.ops if g.op(v)["op_type"] ==
           "aten::_scaled_dot_product_flash_attention_for_cpu"]
    back = [v for v in g.ops if g.op(v)["op_type"] ==
            "aten::_scaled_dot_product_flash_attention_for_cpu_backward"]
    assert len(att) == len(back) == 2                           # one per layer
    b, h, s, d = 2, 4, 32, 32
    for v in att:
        assert g.op(v)["flops"] == 4 * b * h * s * s * d       # QK^T and PV
        # kept for backward: the output and the log-sum-exp (not the s x s probabilities)
        assert g.op(v)["memory"] == 4 * (b * h * s * d + b * h * s)
        assert g.op(v)["compute"]["gpu"] > 0
    for v in back:
        assert g.op(v)["flops"] == 10 * b * h * s * s * d      # recomputed scores + 4 grads


def test_a_tied_embedding_and_decoder_get_one_update():
    torch.manual_seed(0)
    m = tr.GPT2LMHeadModel(tr.GPT2Config(n_layer=1, n_embd=64, n_head=2, vocab_size=500,
                                         n_positions=32, use_cache=False))
    assert m.lm_head.weight is m.transformer.wte.weight
    g = from_torch(wrap(m, "logits"), (torch.randint(0, 500, (2, 16)),), optimizer="adam",
                   profile=None)
    up = g.op("m.transformer.wte.weight/update")
    assert "m.lm_head.weight/update" not in g.ops
    n = 500 * 64
    assert up["flops"] == 12 * n + n               # Adam, plus accumulating the 2nd gradient
    assert up["memory"] == 2 * 4 * n               # one set of Adam states
    grads = [u for u in g.predecessors("m.transformer.wte.weight/update")
             if g.op(u)["kind"] == "bwd"]
    assert len(grads) == 2                         # the embedding's and the decoder's


def test_a_parameter_read_without_a_gradient_is_named():
    class Detached(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
            self.w = torch.nn.Parameter(torch.ones(4))

        def forward(self, x):
            return self.lin(x) + self.w.detach()      # read, but no gradient reaches it
    from workbench.errors import CaptureError
    net = Detached()
    with pytest.raises(CaptureError, match="did not receive a gradient.*requires_grad to False"):
        from_torch(net, (torch.randn(2, 4),), profile=None)
    assert all(p.requires_grad for p in net.parameters())
    net.w.requires_grad_(False)
    g = from_torch(net, (torch.randn(2, 4),), profile=None)
    assert sorted(g.op(v)["param"] for v in g.ops if g.op(v)["kind"] == "update") == \
        ["lin.bias", "lin.weight"]


def test_a_models_own_data_dependent_branch_still_fails_clearly():
    class Gate(torch.nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x
    net = torch.nn.Sequential(torch.nn.Linear(4, 4), Gate())
    from workbench.errors import CaptureError
    with pytest.raises(CaptureError, match=r"module '1' \(Gate\).*data-dependent"):
        from_torch(net, (torch.randn(2, 4),), profile=None)


# ---------------------------------------------------------------------- ONNX exports
def _export(model, x, path, exporter):
    tokens = x.dim() == 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "classic":
            axes = {0: "batch", 1: "seq"} if tokens else {0: "batch"}
            torch.onnx.export(model, (x,), str(path), input_names=["x"], dynamo=False,
                              dynamic_axes={"x": axes})
        else:
            dims = {0: torch.export.Dim("batch", min=1, max=64)}
            if tokens:
                dims[1] = torch.export.Dim("seq", min=2, max=64)
            torch.onnx.export(model, (x,), str(path), input_names=["x"], dynamo=True,
                              dynamic_shapes=(dims,), verbose=False)


# the classic exporter cannot export transformers' packed-sequence check of a decoder called
# without a mask (torch.diff: "aten::diff ... not supported"): those pass the mask, as users do
_SLOW = pytest.mark.slow      # the dynamo exporter takes 15-20 s on a decoder here


@pytest.mark.parametrize("name,exporter", [
    ("gpt2", "classic"), pytest.param("gpt2", "dynamo", marks=_SLOW),
    ("llama", "classic"), pytest.param("llama", "dynamo", marks=_SLOW),
    ("bert", "classic"), ("bert", "dynamo"),
    ("torchvision-vit", "classic"), ("torchvision-vit", "dynamo")])
def test_exports_of_models_as_built_match_torchs_count(tmp_path, name, exporter):
    model, x = user_model(name, mask=exporter == "classic" and name in ("gpt2", "llama"))
    model.eval()
    path = tmp_path / f"{name}.onnx"
    _export(model, x, path, exporter)
    g = read_onnx(path, batch=x.shape[0], seq=x.shape[1] if x.dim() == 2 else None)
    ref = torch_flops(lambda: model(x))
    counted = sum(g.op(v)["flops"] for v in g.ops
                  if op_family(g.op(v)["op_type"]) in ("matmul", "conv"))
    # BERT's pooler runs in eager PyTorch, but its output is no graph output: not exported
    assert counted == pytest.approx(ref, rel=0.005 if name == "bert" else 1e-6), \
        (name, exporter, counted, ref)
    assert _flops(g) == pytest.approx(ref, rel=0.05)


def test_vit_classic_export_is_not_double_counted_torchs_fast_path_is_not_counted(tmp_path):
    """The 1.56x of ViT-B/16's classic export against torch's counter: torch counts nothing
    for ``nn.MultiheadAttention``'s inference fast path (eval + no_grad); the export's
    matrix products are the layer's maths, term by term."""
    model, x = user_model("torchvision-vit")
    model.eval()
    _export(model, x, tmp_path / "vit.onnx", "classic")
    g = read_onnx(tmp_path / "vit.onnx", batch=2)
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        model(x)
    b, s, e, mlp, layers, patches = 2, 17, 128, 512, 2, 16
    per_layer = 2 * b * s * e * 3 * e + 4 * b * s * s * e + 2 * b * s * e * e \
        + 2 * 2 * b * s * e * mlp
    by_hand = layers * per_layer + 2 * b * patches * e * 3 * 16 * 16 + 2 * b * e * 1000
    counted = sum(g.op(v)["flops"] for v in g.ops
                  if op_family(g.op(v)["op_type"]) in ("matmul", "conv"))
    assert counted == by_hand == torch_flops(lambda: model(x))
    attention = layers * (2 * b * s * e * 3 * e + 4 * b * s * s * e + 2 * b * s * e * e)
    assert fc.get_total_flops() == by_hand - attention       # what torch's counter misses
