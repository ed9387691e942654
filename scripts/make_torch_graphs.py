"""Bundled PyTorch workloads: full training steps captured by workbench.io.torch.from_torch.

Each model is built from its config class with random weights (nothing downloaded), its SGD
training step captured at ATen level, every op timed on this machine's CPU (one thread,
median of ``--repeats`` after one warm-up run; ``compute["cpu"]``) and costed on a V100 by the
roofline (``compute["gpu"]``). Written to ``sample_graphs/torch_<name>.json.gz``; the model
name, batch, sequence, parameter bytes, capture and profile settings are in ``meta``.

Usage::

    .venv/bin/python scripts/make_torch_graphs.py [--only gpt2,bert_base] [--repeats 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench.io.json_format import save_graph  # noqa: E402
from workbench.io.torch import from_torch  # noqa: E402
from workbench.io.torch_models import build_model  # noqa: E402

MODELS = {
    "gpt2": dict(spec="hf:gpt2", batch=1, seq=1024),                 # GPT-2 small, 124 M
    "bert_base": dict(spec="hf:bert-base", batch=8, seq=128),        # BERT-base encoder
    "vit_b16": dict(spec="hf:vit", batch=8),                         # ViT-B/16, 224x224
    "llama": dict(spec="hf:llama", batch=1, seq=256, layers=2),      # 2 of Llama-2-7B's 32 layers
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated names of MODELS")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    names = args.only.split(",") if args.only else list(MODELS)
    for name in names:
        kw = dict(MODELS[name])
        spec = kw.pop("spec")
        t = time.perf_counter()
        model, inputs = build_model(spec, **kw)
        g = from_torch(model, inputs, profile="cpu", repeats=args.repeats, warmup=1,
                       name=f"torch_{name}")
        g.meta.update(model_spec=spec, **{k: v for k, v in kw.items()})
        path = ROOT / "sample_graphs" / f"torch_{name}.json.gz"
        save_graph(g, path)
        print(f"{name}: {g.n_ops} ops, {g.meta['param_bytes'] / 1e6:.0f} MB params, "
              f"{sum(g.op(v)['flops'] for v in g.ops) / 1e9:.0f} GFLOP, "
              f"{g.total_compute('cpu'):.0f} ms CPU, {time.perf_counter() - t:.0f} s -> "
              f"{path.relative_to(ROOT)} ({path.stat().st_size / 1e3:.0f} kB)", flush=True)
        del model, g
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
