"""PyTorch models and ONNX files by the names a user types, through the one resolver and the CLI."""

from __future__ import annotations

import json
import warnings

import pytest

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from workbench.cli import main  # noqa: E402
from workbench.errors import FormatError  # noqa: E402
from workbench.workloads import check, resolve  # noqa: E402

NET = '''
import torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU())
        self.head = torch.nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.body(x))
'''


def _info(capsys, *argv):
    assert main(["info", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_python_file_model_through_the_cli(tmp_path, capsys, monkeypatch):
    (tmp_path / "mymodel.py").write_text(NET)
    monkeypatch.chdir(tmp_path)
    out = _info(capsys, "mymodel.py:Net", "--batch", "32")
    assert out["training"] is True and out["graph"] == "mymodel.py:Net"
    g, own = resolve("mymodel.py:Net", batch=32, training=False)
    assert own is None and {g.op(v)["kind"] for v in g.ops} == {"fwd"}
    assert any(v.startswith("body.0/") for v in g.ops) and any(v.startswith("head/")
                                                             for v in g.ops)
    mm = [v for v in g.ops if g.op(v)["op_type"] == "aten::addmm"]
    assert sorted(g.op(v)["flops"] for v in mm) == [2 * 32 * 64 * 10, 2 * 32 * 20 * 64]
    assert check("mymodel.py:Net") is False
    with pytest.raises(FormatError, match="defines no torch.nn.Module class 'Nope'"):
        resolve("mymodel.py:Nope")


@pytest.mark.slow
def test_named_models_build_from_configs_without_weights():
    g, _ = resolve("lstm-lm", batch=2, seq=8)
    assert g.meta["profile"] is None and g.meta["batch"] == 2 and g.meta["seq"] == 8
    assert {g.op(v)["kind"] for v in g.ops} == {"fwd", "bwd", "update"}
    with pytest.raises(FormatError, match="hf: models are gpt2, bert-base, vit, llama"):
        resolve("hf:gpt3")
    with pytest.raises(FormatError, match="not in torchvision.models.list_models"):
        resolve("torchvision:resnet9000")


@pytest.mark.slow
@pytest.mark.parametrize("spec,params", [("hf:gpt2", 124_439_808), ("hf:bert-base", 108_891_648),
                                         ("torchvision:resnet50", 25_557_032)])
def test_full_size_named_models_capture_on_meta(spec, params):
    g, _ = resolve(spec, batch=1, seq=64)
    assert g.meta["param_bytes"] == pytest.approx(4 * params, rel=0.002)
    assert g.n_ops > 100 and g.meta["training"]


def test_onnx_flags_on_the_command_line(tmp_path, capsys):
    pytest.importorskip("onnx")
    from workbench.io.torch_models import build_model

    model, (x,) = build_model("lstm-lm", batch=2, seq=8)
    path = tmp_path / "lm.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model.eval(), (x,), str(path), dynamo=False, input_names=["x"],
                          dynamic_axes={"x": {0: "batch", 1: "seq"}})
    assert main(["info", str(path), "--json"]) == 2           # the sequence must be given
    assert "--seq" in capsys.readouterr().err
    fwd = _info(capsys, str(path), "--batch", "4", "--seq", "8")
    train = _info(capsys, str(path), "--batch", "4", "--seq", "8", "--training",
                  "--unknown", "elementwise")
    assert fwd["training"] is False and train["training"] is True
    assert train["ops"] == 2 * fwd["ops"]
    big = _info(capsys, str(path), "--batch", "8", "--seq", "8")
    assert big["total_bytes"] > fwd["total_bytes"]
