"""Pipelined partitioning (Tarnawski et al., NeurIPS 2020) on the published MSR workloads.

Prints, for every throughput workload: the DP / DPL optimum beside the paper's Table 1, the
in-process DP solve time (best of 3) beside the authors' C++ DP measured on this machine, the
peak memory (tracemalloc, and ru_maxrss of the process), plus the baselines; then Table 4
(latency); then a synthetic layer graph with tens of thousands of ideals.

Run: ``.venv/bin/python bench/bench_pipeline_dp.py [--ip SECONDS]``
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc
from pathlib import Path

from workbench import max_load, solve
from workbench.cluster import Cluster, Device, Link
from workbench.io.msr import read_msr
from workbench.pipeline import expert_plan, latency
from workbench.solvers.pipeline_dp import count_ideals

MSR = Path(__file__).resolve().parents[1] / "sample_graphs" / "msr"
PAPER = {  # DP, DPL, IP non-contiguous, expert, local search, PipeDream, Scotch
    "op_bert3_inference": (27.92, 27.92, 21.91, None, 24.32, None, 35.94),
    "op_bert3_training": (65.30, 65.30, 54.21, None, 66.17, None, 416.97),
    "layer_bert24_inference": (17.79, 17.79, 17.71, 20.08, 17.80, 17.79, 18.03),
    "layer_gnmt_training": (107.00, 107.00, 88.47, 137.15, 91.52, 107.35, 107.00),
    "layer_resnet50_training": (78.63, 78.65, 76.65, 112.11, 81.32, 83.67, 80.10),
}
CPP_S = {"op_bert3_inference": 0.58, "op_bert3_training": 3.5, "layer_bert24_inference": 0.005,
         "layer_gnmt_training": 27.6, "layer_resnet50_training": 0.3}
EXPERT = {"layer_bert24_inference": "bert24_inference_expert.json",
          "layer_gnmt_training": "gnmt_training_expert.json"}


def branchy(modules: int, width: int = 5, depth: int = 4, seed: int = 0):
    """Inception-like layer graph: ``modules`` blocks of ``width`` parallel chains of ``depth``
    layers between a split and a concat layer ((depth + 1) ** width ideals per block)."""
    import numpy as np

    from workbench.graph import OpGraph

    rng = np.random.default_rng(seed)
    ops, edges, prev = [], [], None

    def op(name):
        t = float(rng.uniform(0.2, 2.0))
        ops.append((name, {"compute": {"gpu": t, "cpu": 8 * t}, "memory": 4e6}))
        return name

    for m in range(modules):
        head = op(f"m{m}_in")
        if prev:
            edges.append((prev, head, {"comm": float(rng.uniform(0.05, 0.5))}))
        tail = f"m{m}_out"
        ends = []
        for b in range(width):
            last = head
            for d in range(depth):
                v = op(f"m{m}_b{b}_{d}")
                edges.append((last, v, {"comm": float(rng.uniform(0.05, 0.5))}))
                last = v
            ends.append(last)
        op(tail)
        edges += [(e, tail, {"comm": float(rng.uniform(0.05, 0.5))}) for e in ends]
        prev = tail
    return OpGraph.from_ops(ops, edges, name=f"branchy{modules}")


def timed(fn, repeat=3):
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ip", type=float, default=60.0, help="IP time limit (s), 0 to skip")
    args = ap.parse_args()
    if not MSR.is_dir():
        raise SystemExit(f"MSR workloads not found at {MSR}")
    print("## Throughput (Time-Per-Sample = max load); ours / paper\n")
    print("| workload | ideals | DP | DPL | IP non-contig | expert | local search | PipeDream |"
          " metis (Scotch) | DP time s (C++) | peak MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, paper in PAPER.items():
        g, c = read_msr(MSR / "throughput" / f"{name}.json")
        n_id = count_ideals(g, c)
        t_dp, p = timed(lambda g=g, c=c: solve(g, c, method="dp"), repeat=5)
        tracemalloc.start()
        solve(g, c, method="dp")
        _cur, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        dpv = p.predicted["max_load_ms"]
        assert abs(max_load(p, c) - dpv) <= 1e-9 * dpv
        dplv = solve(g, c, method="dpl").predicted["max_load_ms"]
        ipv = "-"
        if args.ip > 0:
            ip = solve(g, c, method="ip_noncontig", time_limit=args.ip)
            ipv = f"{max_load(ip, c):.2f}{'' if ip.status == 'optimal' else '*'}"
        ex = (f"{max_load(expert_plan(MSR / 'experts' / EXPERT[name], g, c), c):.2f}"
              if name in EXPERT else "-")
        ls = max_load(solve(g, c, method="local_search", seed=0), c)
        pd = max_load(solve(g, c, method="pipedream"), c) if name.startswith("layer") else None
        mp = solve(g, c, method="metis", seed=0)
        me = f"{max_load(mp, c):.2f}{'!' if mp.status == 'infeasible' else ''}"

        def fmt(x, y):
            return f"{x} / {'-' if y is None else f'{y:.2f}'}"

        print(f"| {name} | {n_id} | {fmt(f'{dpv:.2f}', paper[0])} | {fmt(f'{dplv:.2f}', paper[1])}"
              f" | {fmt(ipv, paper[2])} | {fmt(ex, paper[3])} | {fmt(f'{ls:.2f}', paper[4])}"
              f" | {fmt('-' if pd is None else f'{pd:.2f}', paper[5])} | {fmt(me, paper[6])}"
              f" | {t_dp:.3f} ({CPP_S[name]}) | {peak / 2**20:.0f} |", flush=True)
    print(f"\nprocess ru_maxrss: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    if args.ip > 0:
        print("(* = IP stopped at the time limit; value is its incumbent)")
    print("(! = the split violates a device's memory: plan status 'infeasible')")

    print("\n## Single-sample latency (Table 4); ours / paper\n")
    print("| workload | greedy | max-load DP split | metis | expert | latency IP |")
    print("|---|---|---|---|---|---|")
    for name, paper, ex_file in (("op_bert3_inference", (416.20, 415.90, 497.75, None, 408.47), None),
                                 ("layer_gnmt_inference", (268.50, 244.33, 636.91, 293.40, 225.6),
                                  "gnmt_inference_expert.json")):
        g, c = read_msr(MSR / "latency" / f"{name}.json")
        gr = latency(solve(g, c, method="greedy_latency"), c)
        dl = latency(solve(g, c, method="dp"), c)
        try:
            mp = solve(g, c, method="metis", seed=0)
            me = f"{latency(mp, c):.2f}{'!' if mp.status == 'infeasible' else ''}"
        except Exception as e:  # noqa: BLE001 - a non-contiguous split may not be invocable
            me = f"n/a ({type(e).__name__})"
        ex = latency(expert_plan(MSR / "experts" / ex_file, g, c), c) if ex_file else None
        ipv = "-"
        if args.ip > 0:
            ip = solve(g, c, method="latency_ip", time_limit=args.ip)
            ipv = f"{latency(ip, c):.2f}{'' if ip.status == 'optimal' else '*'}"
        print(f"| {name} | {gr:.2f} / {paper[0]} | {dl:.2f} / {paper[1]} | {me} / {paper[2]}"
              f" | {'-' if ex is None else f'{ex:.2f}'} / {paper[3] or '-'} | {ipv} / {paper[4]} |",
              flush=True)

    print("\n## A strongly branching layer graph (synthetic inception-like)\n")
    for modules in (6, 12):
        g = branchy(modules)
        c = Cluster([Device(f"gpu{i}", "gpu", 16e9) for i in range(6)] + [Device("cpu0", "cpu")],
                    mode="host", host_link=Link(0.0, 1e7))
        n_id = count_ideals(g, c, limit=10**6)
        t = time.perf_counter()
        p = solve(g, c, method="dp", max_ideals=10**6)
        dt = time.perf_counter() - t
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(f"branchy({modules} modules, {g.n_ops} layers): {n_id} ideals, dp {dt:.1f} s, process ru_maxrss {peak / 2**20:.0f} MiB, "
              f"max load {p.predicted['max_load_ms']:.3f}", flush=True)


if __name__ == "__main__":
    main()
