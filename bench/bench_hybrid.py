"""Strategy searches on the training judge (issue 48): ``megatron`` (Megatron-LM's grid) and
``tarnawski`` (Tarnawski et al.'s stage DP at op granularity with the hybrid degrees around it,
plus a judge-guided refinement of the cuts), each step checked against the lower bound of
:mod:`workbench.solvers.hybrid.bound`.

For every model x cluster x global batch below: ``megatron`` pruned by the bound (the same
answer as judging every valid strategy: ``tests/solvers/hybrid/test_hybrid.py`` checks it; ``--full`` also
judges the whole grid and prints its size and time), then ``tarnawski`` with the search of
Megatron's grid counted in its time (``baseline=None``), wall and CPU seconds
(``time.process_time``: the machine is shared), strategies judged, the chosen strategy, its
step, its breakdown and its gap to the bound. Cases marked non-uniform have a large
vocabulary, so the LM head and loss make the last pipeline stage heavier than the others.

The last line is exactly
``hybrid: never worse than megatron on a/b, >= 10 % faster on k non-uniform models,
llama-8b/64 search x s, gap y %``: a of b cases where tarnawski's judged step is at most
megatron's, k non-uniform cases where it is at least 10 % faster, x the wall seconds of the
Llama-3-8B-class search on 64 A100s, y its gap to the bound.

Run: ``PYTHONPATH=. .venv/bin/python bench/bench_hybrid.py [--full] [--only NAME]``
"""

from __future__ import annotations

import argparse
import time

from workbench.cluster import Cluster
from workbench.solvers.hybrid import megatron, tarnawski

LLAMA3_8B = "llama:7b,vocab=128256,ffn=14336,kv_heads=8"
"""Llama-3-8B's shape (Dubey et al. 2024, Table 3) at sequence 4,096: 32 layers, hidden 4,096,
32 heads, 8 key/value heads, SwiGLU width 14,336, vocabulary 128,256 (8.03 B parameters)."""

CASES = [
    # name, model, cluster, global batch, non-uniform
    ("gpt-1.3b/8", "gpt:1.3b", "8xA100-80g", 64, False),
    ("gpt-13b/64", "gpt:13b", "64xA100-80g", 128, False),
    ("llama-8b/64", LLAMA3_8B, "64xA100-80g", 256, True),
    ("llama-8b/64-40g", LLAMA3_8B, "64xA100-40g", 64, True),
    ("llama-13b-v128k/64-40g", "llama:13b,vocab=128256,layers=38", "64xA100-40g", 36, True),
    ("llama-70b-v128k/64", "llama:70b,vocab=128256", "64xA100-80g", 64, True),
]


def _line(r) -> str:
    b = r.result.breakdown()
    parts = " ".join(f"{k}={v:.0f}" for k, v in b.items() if k != "step" and v >= 0.5)
    return (f"{r.plan.strategy.describe():60s} step {r.step_ms:9.1f} ms  gap {100 * r.gap:5.1f} %"
            f"  [{parts}]")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="also judge every strategy of the grid")
    ap.add_argument("--only", default=None, help="run one case (its name)")
    args = ap.parse_args(argv)
    never = total = faster = 0
    search_s = gap = None
    for name, spec, cl, gbs, nonuniform in CASES:
        if args.only and name != args.only:
            continue
        cluster = Cluster.preset(cl)
        print(f"== {name}: {spec} on {cl}, global batch {gbs}"
              f"{' (non-uniform: large vocabulary)' if nonuniform else ''}", flush=True)
        if args.full:
            f = megatron(spec, cluster, global_batch=gbs)
            print(f"  megatron, every strategy judged: grid {f.grid}, judged {f.judged} "
                  f"({f.fits} fit), {f.seconds:.1f} s wall, {f.cpu_seconds:.1f} s CPU; "
                  f"best {f.step_ms:.1f} ms", flush=True)
        t0, c0 = time.perf_counter(), time.process_time()
        h = tarnawski(spec, cluster, global_batch=gbs)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        m = megatron(spec, cluster, global_batch=gbs, prune=True)
        print(f"  megatron  grid {m.grid:5d} judged {m.judged:4d} {m.seconds:6.1f} s wall "
              f"{m.cpu_seconds:5.1f} s CPU  {_line(m)}")
        print(f"  tarnawski grid {h.grid:5d} judged {h.judged:4d} {wall:6.1f} s wall "
              f"{cpu:5.1f} s CPU  {_line(h)}")
        speed = m.step_ms / h.step_ms - 1
        print(f"  tarnawski vs megatron: {100 * speed:+.1f} %  ({h.notes}); cuts "
              f"{h.plan.cuts}; bound {h.bound:.1f} ms", flush=True)
        total += 1
        never += h.step_ms <= m.step_ms * (1 + 1e-9)
        faster += nonuniform and speed >= 0.10
        if name == "llama-8b/64":
            search_s, gap = wall, 100 * h.gap
    print("not built: an encoder-decoder and a mixture-of-experts model (the chain builder of "
          "workbench/costs/llm.py makes decoder-only GPT and Llama models only)")
    xs = f"{search_s:.1f}" if search_s is not None else "n/a"
    ys = f"{gap:.1f}" if gap is not None else "n/a"
    print(f"hybrid: never worse than megatron on {never}/{total}, >= 10 % faster on {faster} "
          f"non-uniform models, llama-8b/64 search {xs} s, gap {ys} %")


if __name__ == "__main__":
    main()
