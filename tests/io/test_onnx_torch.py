"""ONNX files as PyTorch writes them: real models exported in code with both exporters.

Each model is built with random weights (torchvision, transformers configs with small sizes, an
LSTM language model), exported by ``torch.onnx.export`` (the classic TorchScript exporter,
``dynamo=False``, and the default dynamo exporter) with a dynamic batch (and sequence) dimension,
read back at other sizes than the export's, and its FLOPs compared with torch's own count
(``torch.utils.flop_counter.FlopCounterMode``) at those sizes.

torch's counter counts matrix products and convolutions (and no LSTM): the FLOPs of our ops of
those families must agree within 2 %, the total (which adds element-wise ops, norms, softmax)
within 10 %; the LSTM's reference runs the same cell maths step by step under the counter.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxscript")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from workbench.errors import FormatError, GraphError  # noqa: E402
from workbench.io.onnx import onnx_to_opgraph, read_onnx  # noqa: E402
from workbench.io.torch_models import build_model  # noqa: E402
from workbench.costs.roofline import op_family  # noqa: E402

SMALL = {
    "resnet18": dict(spec="torchvision:resnet18", image=64),
    "mobilenet_v3_small": dict(spec="torchvision:mobilenet_v3_small", image=64),
    "bert": dict(spec="hf:bert-base", layers=2, config=dict(
        hidden_size=128, num_attention_heads=4, intermediate_size=512, vocab_size=1000,
        max_position_embeddings=64)),
    "gpt2": dict(spec="hf:gpt2", layers=2, config=dict(
        n_embd=128, n_head=4, vocab_size=1000, n_positions=64)),
    "lstm": dict(spec="lstm-lm"),
}
COUNTED = {"matmul", "conv"}            # the families torch's counter counts
RECURRENT = {"LSTM", "GRU", "RNN"}


def _build(key, batch, seq):
    kw = dict(SMALL[key])
    return build_model(kw.pop("spec"), batch=batch, seq=seq, **kw)


def _export(model, x, path, exporter, opset=None):
    model.eval()
    tokens = x.dim() == 2
    kw = {"opset_version": opset} if opset else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "classic":
            axes = {0: "batch", 1: "seq"} if tokens else {0: "batch"}
            torch.onnx.export(model, (x,), str(path), input_names=["x"], dynamo=False,
                              dynamic_axes={"x": axes}, **kw)
        else:
            dims = {0: torch.export.Dim("batch", min=1, max=64)}
            if tokens:
                dims[1] = torch.export.Dim("seq", min=2, max=64)
            torch.onnx.export(model, (x,), str(path), input_names=["x"], dynamo=True,
                              dynamic_shapes=(dims,), verbose=False, **kw)
    return path


def _unrolled_lstm_flops(lstm, x):
    """FLOPs torch counts for the LSTM's maths written step by step (its mm calls)."""
    b, s = x.shape[0], x.shape[1]
    h_in = x
    with FlopCounterMode(display=False) as fc:
        for layer in range(lstm.num_layers):
            w_ih = getattr(lstm, f"weight_ih_l{layer}")
            w_hh = getattr(lstm, f"weight_hh_l{layer}")
            h = torch.zeros(b, lstm.hidden_size)
            c = torch.zeros(b, lstm.hidden_size)
            outs = []
            for t in range(s):
                gates = h_in[:, t] @ w_ih.T + h @ w_hh.T
                i, f, g, o = gates.chunk(4, 1)
                c = f.sigmoid() * c + i.sigmoid() * g.tanh()
                h = o.sigmoid() * c.tanh()
                outs.append(h)
            h_in = torch.stack(outs, 1)
    return fc.get_total_flops()


def _torch_flops(key, model, x):
    model.eval()
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        model(x)
    total = fc.get_total_flops()
    if key == "lstm":
        with torch.no_grad():
            total += _unrolled_lstm_flops(model.lstm, model.embedding(x))
    return total


def _counted(g):
    return sum(g.op(v)["flops"] for v in g.ops
               if op_family(g.op(v)["op_type"]) in COUNTED or g.op(v)["op_type"] in RECURRENT)


@pytest.mark.parametrize("exporter", ["classic", pytest.param("dynamo", marks=pytest.mark.slow)])
@pytest.mark.parametrize("key", list(SMALL))
def test_exported_models_load_and_flops_match_torch(tmp_path, key, exporter):
    model, (x,) = _build(key, batch=2, seq=16)
    path = _export(model, x, tmp_path / f"{key}.onnx", exporter)
    # read at other sizes than the export's: the symbolic dims are bound from the flags
    batch, seq = 3, 12
    g = read_onnx(path, batch=batch, seq=seq)
    _, (x2,) = _build(key, batch=batch, seq=seq)
    ref = _torch_flops(key, model, x2)
    total = sum(g.op(v)["flops"] for v in g.ops)
    assert _counted(g) == pytest.approx(ref, rel=0.02), (key, exporter, _counted(g), ref)
    assert total == pytest.approx(ref, rel=0.10), (key, exporter, total, ref)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    # GPT-2 ties its embedding and decoder weights; the classic exporter writes both copies
    tied = sum(p.numel() * p.element_size()
               for _, p in model.named_parameters(remove_duplicate=False))
    assert g.meta["param_bytes"] == pytest.approx(params, rel=0.01) or \
        g.meta["param_bytes"] == pytest.approx(tied, rel=0.01)
    assert g.meta["batch"] == batch and g.meta["source"] == "onnx"
    assert all(g.op(v)["compute"]["gpu"] >= 0 for v in g.ops)


@pytest.mark.parametrize("key,exporter,opset", [
    ("lstm", "classic", 13),   # the classic exporter writes attention from opset 14 on
    ("gpt2", "classic", 14), ("gpt2", "classic", 17), ("gpt2", "classic", 21),
    pytest.param("gpt2", "dynamo", 18, marks=pytest.mark.slow),
    pytest.param("gpt2", "dynamo", 21, marks=pytest.mark.slow)])
def test_opsets_13_to_21(tmp_path, key, exporter, opset):
    model, (x,) = _build(key, batch=2, seq=16)
    path = _export(model, x, tmp_path / f"{key}.onnx", exporter, opset=opset)
    g = read_onnx(path, batch=2, seq=16)
    assert max(g.meta["opset"]) >= opset
    assert sum(g.op(v)["flops"] for v in g.ops) == \
        pytest.approx(_torch_flops(key, model, x), rel=0.10)


@pytest.mark.slow
def test_external_data_stays_on_disk_and_a_missing_file_is_named(tmp_path):
    model, (x,) = _build("resnet18", batch=1, seq=1)
    path = _export(model, x, tmp_path / "r.onnx", "dynamo")
    data = tmp_path / "r.onnx.data"
    assert data.is_file() and data.stat().st_size > 4e7   # the weights went beside the model
    g = read_onnx(path, batch=2)
    assert g.meta["param_bytes"] == pytest.approx(4 * 11_689_512, rel=0.001)
    data.rename(tmp_path / "elsewhere.data")
    with pytest.raises(FormatError, match="r.onnx.data"):
        read_onnx(path)


def test_symbolic_dims_need_a_value_and_a_fixed_batch_is_kept(tmp_path):
    model, (x,) = _build("lstm", batch=2, seq=8)
    path = _export(model, x, tmp_path / "lm.onnx", "classic")
    with pytest.raises(GraphError, match="'seq'.*is symbolic"):
        read_onnx(path, batch=2)
    assert read_onnx(path, dims={"batch": 4, "seq": 8}).meta["batch"] == 4
    fixed = tmp_path / "fixed.onnx"
    torch.onnx.export(model, (x,), str(fixed), dynamo=False)
    assert read_onnx(fixed).meta["batch"] == 2
    with pytest.raises(GraphError, match="fixed batch of 2"):
        read_onnx(fixed, batch=8)


@pytest.mark.parametrize("cell", ["GRU", "RNN"])
def test_gru_and_rnn_formulas_against_the_unrolled_maths(tmp_path, cell):
    rnn = getattr(torch.nn, cell)(32, 48, num_layers=1, batch_first=True, bidirectional=True)
    x = torch.randn(2, 10, 32)
    path = tmp_path / "r.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(rnn, (x,), str(path), dynamo=False)
    g = read_onnx(path)
    (op,) = [v for v in g.ops if g.op(v)["op_type"] == cell]
    gates = 3 if cell == "GRU" else 1
    mm = 2 * 10 * 2 * 2 * gates * 48 * (32 + 48)         # steps x batch x directions x products
    assert g.op(op)["flops"] == pytest.approx(mm, rel=0.03)
    assert g.op(op)["flops"] > mm                         # plus the point-wise gate maths


class _Activations(torch.nn.Module):
    def forward(self, x, y):
        a = torch.nn.functional.hardswish(x) + torch.nn.functional.hardsigmoid(x)
        a = a + torch.nn.functional.mish(x) + torch.nn.functional.softplus(x)
        a = a + torch.nn.functional.gelu(x) + torch.erf(x)
        a = torch.where(torch.isnan(a) | torch.isinf(a) | (x == y), y, a)
        a = torch.nn.functional.layer_norm(a, (a.shape[-1],))
        return torch.einsum("bij,bkj->bik", a, y)


@pytest.mark.parametrize("exporter", ["classic", "dynamo"])
def test_activation_predicate_einsum_and_norm_ops_have_formulas(tmp_path, exporter):
    x, y = torch.randn(2, 6, 8), torch.randn(2, 6, 8)
    path = tmp_path / "act.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(_Activations(), (x, y), str(path), dynamo=exporter == "dynamo",
                          opset_version=18 if exporter == "dynamo" else 17)
    g = read_onnx(path)                                   # unknown="error": every op costed
    types = {g.op(v)["op_type"] for v in g.ops}
    assert g.meta["cost_fallback_types"] == []
    assert {"IsNaN", "IsInf", "Where", "Equal"} <= types
    mm = [v for v in g.ops if g.op(v)["op_type"] in ("Einsum", "MatMul")]
    assert sum(g.op(v)["flops"] for v in mm) == 2 * 2 * 6 * 6 * 8   # b i k j


def _attention_model(op_type, domain, q, k, v, attrs):
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
           for n, s in (("q", q), ("k", k), ("v", v))]
    node = helper.make_node(op_type, ["q", "k", "v"], ["y"], name="attn", domain=domain, **attrs)
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    opsets = [helper.make_opsetid("", 23 if domain == "" else 17)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    return helper.make_model(helper.make_graph([node], "a", ins, [out]), opset_imports=opsets)


def test_attention_ops():
    b, h, s, d = 2, 4, 16, 8
    m = _attention_model("Attention", "", [b, h, s, d], [b, h, s, d], [b, h, s, d], {})
    g = onnx_to_opgraph(m)
    assert g.op("attn")["flops"] == b * h * s * s * (4 * d + 5)
    assert g.op("attn")["shapes"] == [[b, h, s, d]]


def test_an_op_without_a_formula_is_still_named():
    node = helper.make_node("Hardmax", ["x"], ["y"], name="hm")
    w = numpy_helper.from_array(np.zeros((2,), np.float32), "unused")
    m = helper.make_model(helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])], [w]),
        opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(GraphError, match="'hm' \\(type 'Hardmax'\\)"):
        onnx_to_opgraph(m)


def test_the_resolver_tells_an_onnx_file_by_its_content(tmp_path):
    """A torch export saved under another name (``model.bin``) is still read as ONNX, and a
    JSON graph named ``.onnx`` as JSON: the format comes from the bytes (workbench.io.detect)."""
    import shutil

    from workbench import samples
    from workbench.io import save_graph
    from workbench.io.detect import file_format
    from workbench.workloads import resolve

    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    onnx_path = tmp_path / "mlp.onnx"
    _export(model, torch.randn(2, 8), onnx_path, "classic")
    renamed = tmp_path / "model.bin"
    shutil.copy(onnx_path, renamed)
    assert file_format(renamed) == "onnx"
    g_named, _ = resolve(str(onnx_path), seq=8)  # a 2-D input is exported as (batch, seq)
    g_renamed, _ = resolve(str(renamed), seq=8)
    assert g_renamed.n_ops == g_named.n_ops > 0
    json_named_onnx = tmp_path / "graph.onnx"
    save_graph(samples.diamond(), json_named_onnx)
    assert file_format(json_named_onnx) == "workbench-json"
    assert resolve(str(json_named_onnx))[0].n_ops == 4
