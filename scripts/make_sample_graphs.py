"""Regenerate ``sample_graphs/``: extract, profile and save the five sample models.

Each model of :data:`workbench.runtime.models.MODELS` is built with its default sizes and the
batch of :data:`~workbench.runtime.models.DEFAULT_BATCH`, extracted (forward, backward and SGD
update ops), profiled on this machine's CPU (one logical device, one thread per op) and saved
as ``sample_graphs/<model>.json.gz`` with its metadata (model, batch, sizes, device, TensorFlow
version, profiling figures).

Usage::

    .venv/bin/python scripts/make_sample_graphs.py [--steps 20] [--warmup 5] [model ...]

Timings depend on the machine and its load: regenerate on a quiet machine for a fair profile.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    from workbench.io import save_graph
    from workbench.runtime import DEFAULT_BATCH, MODELS, extract, profile

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=list(MODELS), help="models to regenerate")
    ap.add_argument("--steps", type=int, default=20, help="traced steps averaged per op")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    ap.add_argument("--out", type=Path, default=ROOT / "sample_graphs")
    args = ap.parse_args(argv)
    for name in args.models:
        if name not in MODELS:
            ap.error(f"unknown model {name!r}; known: {', '.join(MODELS)}")
        t0 = time.perf_counter()
        g = profile(extract(name, DEFAULT_BATCH[name]), steps=args.steps, warmup=args.warmup)
        path = args.out / f"{name}.json.gz"
        save_graph(g, path)
        print(f"{name:18s} {g.n_ops:5d} ops {g.n_edges:5d} edges  step "
              f"{g.meta['profile']['step_ms']:8.2f} ms  params {g.meta['param_bytes'] / 1e6:6.2f} MB"
              f"  -> {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} "
              f"({path.stat().st_size / 1e3:.0f} kB, {time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
