"""Pipelined IPs on the published workloads (Tarnawski et al., NeurIPS 2020): the latency
program (``latency_ip``, CP-SAT or HiGHS) against the paper's Table 4, and whether HiGHS proves
the non-contiguous max-load optimum of GNMT training (``ip_noncontig``, gap 0).

Usage::

    python bench/bench_pipeline_ip.py latency layer_gnmt_inference --engine cpsat --time-limit 300
    python bench/bench_pipeline_ip.py latency op_bert3_inference --engine milp --time-limit 300
    python bench/bench_pipeline_ip.py noncontig layer_gnmt_training --time-limit 180

Prints one line per run: workload, limit, status, the judged value, the paper's value, the
relative difference, bound, and wall seconds. Each run takes about its time limit.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from workbench import max_load, solve
from workbench.io.msr import read_msr
from workbench.pipeline import latency

MSR = Path(__file__).resolve().parents[1] / "sample_graphs" / "msr"
PAPER = {("latency", "layer_gnmt_inference"): 225.6, ("latency", "op_bert3_inference"): 408.47,
         ("noncontig", "layer_gnmt_training"): 88.46}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["latency", "noncontig"])
    ap.add_argument("workload")
    ap.add_argument("--engine", default="cpsat", choices=["cpsat", "milp"])
    ap.add_argument("--time-limit", type=float, default=300.0)
    args = ap.parse_args(argv)
    kind = "latency" if args.what == "latency" else "throughput"
    g, c = read_msr(MSR / kind / f"{args.workload}.json")
    t = time.perf_counter()
    if args.what == "latency":
        p = solve(g, c, method="latency_ip", engine=args.engine, time_limit=args.time_limit)
        value = latency(p, c)
    else:
        p = solve(g, c, method="ip_noncontig", gap=0.0, time_limit=args.time_limit)
        value = max_load(p, c)
    wall = time.perf_counter() - t
    paper = PAPER.get((args.what, args.workload))
    diff = f"{(value - paper) / paper:+.2%}" if paper else "-"
    print(f"{args.what} {args.workload} engine={args.engine if args.what == 'latency' else 'milp'} "
          f"limit={args.time_limit:g}s status={p.status} value={value:.3f} paper={paper} "
          f"diff={diff} bound={p.stats.get('bound', float('nan')):.3f} wall={wall:.1f}s",
          flush=True)


if __name__ == "__main__":
    main()
