"""PyTorch capture (workbench.io.torch.from_torch): the training step at ATen level."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from workbench import Cluster, simulate, solve  # noqa: E402
from workbench.errors import CaptureError  # noqa: E402
from workbench.io.torch import from_torch  # noqa: E402
from workbench.io.torch_models import build_model  # noqa: E402


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def _kinds(g):
    out: dict = {}
    for v in g.ops:
        out.setdefault(g.op(v)["kind"], []).append(v)
    return out


def test_training_step_has_autograds_backward_and_updates():
    g = from_torch(mlp(), (torch.randn(32, 8),), profile=None)
    k = _kinds(g)
    assert {g.op(v)["op_type"] for v in k["fwd"]} >= {"aten::addmm", "aten::relu"}
    # autograd's own backward ops (not mirrored forward ops)
    assert {g.op(v)["op_type"] for v in k["bwd"]} >= {"aten::mm", "aten::threshold_backward",
                                                       "aten::sum"}
    assert sorted(k["update"]) == ["0.bias/update", "0.weight/update", "2.bias/update",
                                   "2.weight/update"]
    # views (t, view, alias, getitem) are folded: no kernel, no op
    assert not any(g.op(v)["op_type"] in ("aten::t", "aten::view", "aten::alias",
                                          "aten::expand") for v in g.ops)
    # the weight gradient of layer 0 is produced under its module and feeds its update
    assert "0/mm_2" in g.predecessors("0.weight/update")
    assert g.edge("0/mm_2", "0.weight/update")["bytes"] == 16 * 8 * 4
    # parameters on their first reader, colocated with their updates; gradients on producers
    assert g.op("0/addmm")["memory"] == 4 * (16 * 8 + 16)
    assert g.op("0/addmm")["colocate"] == g.op("0.weight/update")["colocate"] \
        == g.op("0.bias/update")["colocate"]
    assert g.op("0/mm_2")["memory"] == 16 * 8 * 4
    # the ReLU output is kept for backward (threshold_backward reads it)
    assert g.op("1/relu")["memory"] == 32 * 16 * 4
    assert g.meta["param_bytes"] == 4 * (16 * 8 + 16 + 4 * 16 + 4)


def test_forward_only_and_optimizer_state():
    fwd = from_torch(mlp(), (torch.randn(32, 8),), training=False, profile=None)
    assert {fwd.op(v)["kind"] for v in fwd.ops} == {"fwd"}
    adam = from_torch(mlp(), (torch.randn(32, 8),), optimizer="adam", profile=None)
    up = adam.op("0.weight/update")
    assert up["memory"] == 2 * 16 * 8 * 4 and up["flops"] == 12 * 16 * 8
    assert up["op_type"] == "optim::adam"


@pytest.mark.slow
def test_flops_match_torchs_counter_on_a_training_step():
    model, (x,) = build_model("torchvision:resnet18", batch=2, image=32)
    g = from_torch(model, (x,), profile=None)
    model.zero_grad()
    with FlopCounterMode(display=False) as fc:
        model(x).float().mean().backward()
    counted = sum(g.op(v)["flops"] for v in g.ops
                  if g.op(v)["op_type"] in ("aten::convolution", "aten::convolution_backward",
                                            "aten::addmm", "aten::mm"))
    assert counted == pytest.approx(fc.get_total_flops(), rel=0.01)
    total = sum(g.op(v)["flops"] for v in g.ops)
    assert total == pytest.approx(fc.get_total_flops(), rel=0.10)
    names = set(g.ops)
    assert any(v.startswith("layer1.0.conv1/convolution") for v in names)
    bw = [v for v in names if g.op(v)["op_type"] == "aten::convolution_backward"]
    assert any(v.startswith("layer1.0.conv1/") for v in bw)     # backward under its module
    params = sum(p.numel() * 4 for p in model.parameters())
    assert g.meta["param_bytes"] == params
    owned = sum(g.op(v)["memory"] for v in g.ops if g.op(v).get("colocate"))
    assert owned >= params


def test_cpu_profile_measures_every_op_and_the_plan_simulates():
    g = from_torch(mlp(), (torch.randn(64, 8),), profile="cpu", repeats=3)
    assert g.meta["device_kind"] == "cpu" and g.meta["profile_repeats"] == 3
    assert all(g.op(v)["compute"]["cpu"] > 0 for v in g.ops)
    assert all("gpu" in g.op(v)["compute"] for v in g.ops)        # roofline for GPU presets
    plan = solve(g, Cluster.preset("4xV100-nvlink"), method="heft")
    assert simulate(plan, Cluster.preset("4xV100-nvlink")).makespan > 0


def test_meta_model_captures_without_weights():
    model, x = build_model("hf:gpt2", batch=2, seq=32, layers=2, device="meta",
                           config=dict(n_embd=64, n_head=4, vocab_size=500, n_positions=64))
    assert next(model.parameters()).device.type == "meta"
    g = from_torch(model, x, profile=None)
    assert g.meta["param_bytes"] == sum(p.numel() * 4 for p in model.parameters())
    assert any(v.startswith("model.transformer.h.1.attn") for v in g.ops)
    assert all(g.op(v)["compute"]["gpu"] >= 0 for v in g.ops)
    with pytest.raises(CaptureError, match="real tensors"):
        from_torch(model, x, profile="cpu")


class _Gate(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:            # data-dependent control flow
            return x * 2
        return x


def test_a_model_that_cannot_be_captured_names_the_module_and_the_construct():
    net = torch.nn.Sequential(torch.nn.Linear(4, 4), _Gate())
    with pytest.raises(CaptureError, match=r"module '1' \(_Gate\).*data-dependent control "
                                           r"flow.*torch.where"):
        from_torch(net, (torch.randn(2, 4),), profile=None)


@pytest.mark.parametrize("kw,match", [
    (dict(optimizer="lamb"), "optimizer must be one of"),
    (dict(profile="tpu"), "profile must be"),
    (dict(repeats=0), "repeats must be"),
    (dict(loss="hinge"), "loss must be"),
])
def test_bad_arguments_are_named(kw, match):
    with pytest.raises(CaptureError, match=match):
        from_torch(mlp(), (torch.randn(2, 8),), **kw)
    with pytest.raises(CaptureError, match="example_inputs must be a tuple"):
        from_torch(mlp(), torch.randn(2, 8))


# ------------------------------------------------- issue 46: FastT's split dimensions
class _Attn(torch.nn.Module):
    """Linear, attention in PyTorch's default [S, B, H] layout, and a small conv stem."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.emb = torch.nn.Linear(8, 32)
        self.att = torch.nn.MultiheadAttention(32, 4)
        self.ff = torch.nn.Linear(32, 10)

    def forward(self, img):
        h = torch.relu(self.conv(img)).flatten(2).transpose(1, 2)   # [B, 16, 8]
        h = torch.relu(self.emb(h)).transpose(0, 1)                  # [16, B, 32]
        a, _ = self.att(h, h, h)
        return self.ff(a + h)


def test_torch_capture_carries_split_dims_and_os_dpos_splits_the_batch():
    torch.manual_seed(0)
    g = from_torch(_Attn(), (torch.randn(8, 3, 4, 4),), profile=None)
    assert g.meta["split_dims"] == {"batch": 8}
    op = g.op
    by_type: dict = {}
    for v in g.ops:
        by_type.setdefault(op(v)["op_type"], []).append(v)
    # the forward conv, linears and attention matmuls split along the batch; conv channels
    # and matmul columns are the model-parallel dimensions
    conv = by_type["aten::convolution"]
    assert conv and all(op(v)["splits"] == {"batch": 8, "channels": 8} for v in conv)
    fwd_mm = [v for t in ("aten::addmm", "aten::mm", "aten::bmm") for v in by_type.get(t, [])
              if op(v)["kind"] == "fwd"]
    assert fwd_mm and all("batch" in op(v)["splits"] and op(v)["batch_out"] for v in fwd_mm)
    assert all("out" in op(v)["splits"] for v in fwd_mm)
    # weight gradients read the batch and sum it away; updates never split
    wgrads = [v for v in g.ops if op(v).get("weight_grad")]
    assert wgrads and all(not op(v)["batch_out"] for v in wgrads)
    assert all(not op(v)["splits"] for v in g.ops if op(v)["kind"] == "update")
    splittable = [v for v in g.ops if "batch" in op(v)["splits"]]
    assert len(splittable) > 0.5 * sum(op(v)["kind"] != "update" for v in g.ops)
    # data parallelism now splits the work instead of doubling it, and os_dpos searches splits
    c = Cluster.preset("2xV100-pcie")
    one = simulate(solve(g, c, method="single"), c).makespan
    dp = solve(g, c, method="data_parallel")
    assert dp.graph.total_compute() < 1.5 * g.total_compute()
    p = solve(g, c, method="os_dpos", time_limit=20)
    assert p.info["split_candidates"] > 0 and p.info["start"] in p.info["starts"]
    assert simulate(p, c).makespan <= min(one, simulate(dp, c).makespan) + 1e-9
