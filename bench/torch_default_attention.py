"""Models as users build them (issue 50): default SDPA attention captured, ViT-B/16's export.

Table 1, per model of :func:`workbench.testing.user_models.user_model` (transformers' default
attention, SDPA): :func:`workbench.io.torch.from_torch` of the SGD training step (``profile=None``)
against the same model with ``attn_implementation="eager"``, and against torch's own count of
the eager step (``FlopCounterMode``, the fused attention paths counted:
:func:`workbench.testing.torch_flops.torch_flops`); CPU seconds of the capture.

Table 2 (``--vit-b16``): torchvision's full ``vit_b_16`` (random weights, batch 1, 224x224)
exported by both ONNX exporters and read by :func:`workbench.io.onnx.read_onnx`, against torch's
counter as it counts by default under ``torch.no_grad()`` (where ``nn.MultiheadAttention`` takes
its fused fast path, which the counter does not count) and with the fused paths counted.

Usage::

    .venv/bin/python bench/torch_default_attention.py [--vit-b16]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from workbench.costs.roofline import op_family  # noqa: E402
from workbench.io.onnx import read_onnx  # noqa: E402
from workbench.io.torch import from_torch  # noqa: E402
from workbench.testing.torch_flops import torch_flops  # noqa: E402
from workbench.testing.user_models import user_model  # noqa: E402

COUNTED = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::convolution",
           "aten::convolution_backward")


def _sum(g, key, pred=lambda a: True):
    return sum(g.op(v)[key] for v in g.ops if pred(g.op(v)))


def capture_row(name: str) -> dict:
    model, x = user_model(name)
    t = time.process_time()
    g = from_torch(model, (x,), profile=None)
    cpu_s = time.process_time() - t

    def step():
        model.zero_grad()
        model(x).float().mean().backward()
    ref = torch_flops(step, grad=True)
    counted = _sum(g, "flops", lambda a: a["op_type"] in COUNTED
                   or "scaled_dot_product" in a["op_type"])
    row = {"model": name, "ops": g.n_ops, "cpu_s": cpu_s, "gflop": _sum(g, "flops") / 1e9,
           "counted_vs_torch": counted / ref, "total_vs_torch": _sum(g, "flops") / ref,
           "attention": sorted({t for t in (g.op(v)["op_type"] for v in g.ops)
                                if ("softmax" in t or "dot_product" in t)
                                and "backward" not in t})}
    if not name.startswith("torchvision"):
        eager = from_torch(user_model(name, attn="eager")[0], (x,), profile=None)
        row.update(flops_vs_eager=_sum(g, "flops") / _sum(eager, "flops"),
                   memory_vs_eager=_sum(g, "memory") / _sum(eager, "memory"),
                   eager_ops=eager.n_ops)
    return row


def _export(model, x, path, exporter):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "classic":
            torch.onnx.export(model, (x,), str(path), input_names=["x"], dynamo=False,
                              dynamic_axes={"x": {0: "batch"}})
        else:
            torch.onnx.export(model, (x,), str(path), input_names=["x"], dynamo=True,
                              dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=64)},),
                              verbose=False)


def vit_rows(tmp: Path) -> list:
    model, x = user_model("torchvision-vit-b16")
    model.eval()
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        model(x)
    raw = fc.get_total_flops()
    ref = torch_flops(lambda: model(x))
    rows = []
    for exporter in ("classic", "dynamo"):
        path = tmp / f"vit_b_16_{exporter}.onnx"
        _export(model, x, path, exporter)
        g = read_onnx(path, batch=1)
        counted = _sum(g, "flops", lambda a: op_family(a["op_type"]) in ("matmul", "conv"))
        rows.append({"exporter": exporter, "ops": g.n_ops, "gflop": _sum(g, "flops") / 1e9,
                     "raw": raw / 1e9, "ref": ref / 1e9, "vs_raw": _sum(g, "flops") / raw,
                     "counted_vs_ref": counted / ref, "total_vs_ref": _sum(g, "flops") / ref})
    return rows


def markdown(caps, vits) -> str:
    out = ["| model | ops (eager) | GFLOP | vs eager attention | memory vs eager | "
           "counted vs torch | total vs torch | capture CPU s | attention ops (forward) |",
           "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in caps:
        ve = f"{r['flops_vs_eager']:.4f}" if "flops_vs_eager" in r else "-"
        me = f"{r['memory_vs_eager']:.3f}" if "memory_vs_eager" in r else "-"
        out.append(f"| {r['model']} | {r['ops']} ({r.get('eager_ops', '-')}) | "
                   f"{r['gflop']:.3f} | {ve} | {me} | {r['counted_vs_torch']:.4f} | "
                   f"{r['total_vs_torch']:.4f} | {r['cpu_s']:.1f} | "
                   f"{', '.join(r['attention'])} |")
    if vits:
        out += ["", "| vit_b_16 export | ops | GFLOP | torch no_grad GFLOP | torch, attention "
                    "counted | vs no_grad count | matmul/conv vs counted | total vs counted |",
                "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in vits:
            out.append(f"| {r['exporter']} | {r['ops']} | {r['gflop']:.3f} | {r['raw']:.3f} | "
                       f"{r['ref']:.3f} | {r['vs_raw']:.3f} | {r['counted_vs_ref']:.4f} | "
                       f"{r['total_vs_ref']:.4f} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vit-b16", action="store_true", help="also export the full ViT-B/16")
    args = ap.parse_args(argv)
    caps = [capture_row(n) for n in ("gpt2", "llama", "bert", "vit", "torchvision-vit")]
    vits = []
    if args.vit_b16:
        with tempfile.TemporaryDirectory() as tmp:
            vits = vit_rows(Path(tmp))
    print(markdown(caps, vits))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
