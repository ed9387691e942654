"""Regenerate ``sample_graphs/``: extract, profile and save the sample models.

Each model of :data:`workbench.runtime.models.MODELS` -- the five small models and the
paper-sized ones (ResNet-50, Inception-V3, BERT-base, GNMT, RNNLM, Transformer base) -- is
built with its default sizes and the batch of :data:`~workbench.runtime.models.DEFAULT_BATCH`,
extracted (forward, backward and SGD update ops, with per-op FLOPs, bytes and shapes),
profiled on this machine's CPU (one logical device, one thread per op), given V100 roofline
costs on device kind ``gpu`` (:func:`workbench.costs.roofline.with_device_costs`) so that it solves on
the GPU cluster presets, and saved as ``sample_graphs/<model>.json.gz`` with its metadata
(model, batch, sizes, device, TensorFlow version, profiling figures: steps, warm-up, timed
steps).

Usage::

    .venv/bin/python scripts/make_sample_graphs.py [--steps 20] [--warmup 5] [model ...]
    nice .venv/bin/python scripts/make_sample_graphs.py --paper --steps 3 --warmup 1 --timed 3

Timings depend on the machine and its load: regenerate on a quiet machine for a fair profile.
CI never runs this script; tests load the files it writes.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT_MB = 40.0  # all checked-in sample files together


def _with_work(saved, extract):
    """The saved graph with the per-op work of a fresh extraction of the same program."""
    from workbench import OpGraph

    spec = saved.meta["program"]
    fresh = extract(spec["model"], spec["batch"], seed=spec.get("seed", 0),
                    lr=spec.get("lr", 0.01), **(spec.get("sizes") or {}))
    if set(fresh.ops) != set(saved.ops):
        raise SystemExit(f"{saved.name}: the rebuilt program differs from the saved graph")
    G = saved.to_networkx()
    for v in G.nodes:
        for k in ("flops", "bytes_moved", "shapes", "memory"):
            G.nodes[v][k] = fresh.op(v)[k]
    meta = {**saved.meta, "cost_fallback_types": fresh.meta["cost_fallback_types"]}
    return OpGraph(G, name=saved.name, meta=meta)


def main(argv: list[str] | None = None) -> int:
    from workbench.io import load_graph, save_graph
    from workbench.costs.roofline import with_device_costs
    from workbench.runtime import DEFAULT_BATCH, MODELS, extract, profile
    from workbench.runtime.paper_models import PAPER_MODELS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", help="models to regenerate (default: the small ones)")
    ap.add_argument("--paper", action="store_true", help="the paper-sized models")
    ap.add_argument("--steps", type=int, default=20, help="traced steps averaged per op")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    ap.add_argument("--timed", type=int, default=20, help="untraced steps timed for the step")
    ap.add_argument("--out", type=Path, default=ROOT / "sample_graphs")
    ap.add_argument("--work-only", action="store_true",
                    help="keep the saved profile; only renew per-op FLOPs/bytes/shapes/memory "
                         "and the V100 roofline costs of the existing files (no profiling)")
    args = ap.parse_args(argv)
    names = args.models or (list(PAPER_MODELS) if args.paper
                            else [m for m in MODELS if m not in PAPER_MODELS])
    for name in names:
        if name not in MODELS:
            ap.error(f"unknown model {name!r}; known: {', '.join(MODELS)}")
        t0 = time.perf_counter()
        path = args.out / f"{name}.json.gz"
        if args.work_only:
            g = _with_work(load_graph(path), extract)
        else:
            g = profile(extract(name, DEFAULT_BATCH[name]), steps=args.steps,
                        warmup=args.warmup, timed_steps=args.timed)
        g = with_device_costs(g, "V100", kind="gpu")
        save_graph(g, path)
        print(f"{name:18s} {g.n_ops:6d} ops {g.n_edges:6d} edges  batch {DEFAULT_BATCH[name]:3d}"
              f"  step {g.meta['profile']['step_ms']:9.2f} ms  params "
              f"{g.meta['param_bytes'] / 1e6:7.2f} MB"
              f"  -> {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} "
              f"({path.stat().st_size / 1e3:.0f} kB, {time.perf_counter() - t0:.1f} s)",
              flush=True)
    total = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file()) / 1e6
    print(f"sample_graphs/ holds {total:.1f} MB (limit {LIMIT_MB:.0f} MB)")
    return 0 if total < LIMIT_MB else 1


if __name__ == "__main__":
    raise SystemExit(main())
