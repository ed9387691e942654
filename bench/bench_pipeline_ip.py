"""Pipelined IPs on the published workloads (Tarnawski et al., NeurIPS 2020): the latency
program (``latency_ip``, CP-SAT or HiGHS) against the paper's Table 4, and whether HiGHS proves
the non-contiguous max-load optimum of GNMT training (``ip_noncontig``, gap 0).

Usage::

    python bench/bench_pipeline_ip.py latency layer_gnmt_inference --engine cpsat --time-limit 300
    python bench/bench_pipeline_ip.py latency op_bert3_inference --engine milp --time-limit 300
    python bench/bench_pipeline_ip.py noncontig layer_gnmt_training --time-limit 180
    python bench/bench_pipeline_ip.py table --limits 120 300 --engines cpsat milp

The single runs print one line each: workload, limit, status, the judged value, the paper's
value, the relative difference, bound, and wall seconds. ``table`` runs every latency workload
with every engine and ``ip_noncontig`` on GNMT training at every limit, one after another, and
prints a Markdown table (a row as each run ends). Each run takes about its time limit.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from workbench import max_load, solve
from workbench.io.msr import read_msr
from workbench.judge.pipelined import latency

MSR = Path(__file__).resolve().parents[1] / "sample_graphs" / "msr"
PAPER = {("latency", "layer_gnmt_inference"): 225.6, ("latency", "op_bert3_inference"): 408.47,
         ("noncontig", "layer_gnmt_training"): 88.46}


def run(what: str, workload: str, engine: str, limit: float) -> dict:
    """One call; returns the row's figures (value judged, bound, status, wall seconds)."""
    kind = "latency" if what == "latency" else "throughput"
    g, c = read_msr(MSR / kind / f"{workload}.json")
    t = time.perf_counter()
    if what == "latency":
        p = solve(g, c, method="latency_ip", engine=engine, time_limit=limit)
        value = latency(p, c)
    else:
        p = solve(g, c, method="ip_noncontig", gap=0.0, time_limit=limit)
        value = max_load(p, c)
    wall = time.perf_counter() - t
    paper = PAPER.get((what, workload))
    return {"what": what, "workload": workload, "engine": engine if what == "latency" else "milp",
            "limit": limit, "status": p.status, "value": value, "paper": paper,
            "diff": (value - paper) / paper if paper else None,
            "bound": p.stats.get("bound", float("nan")), "wall": wall,
            "warm": p.stats.get("warm_start_ms")}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["latency", "noncontig", "table"])
    ap.add_argument("workload", nargs="?")
    ap.add_argument("--engine", default="cpsat", choices=["cpsat", "milp"])
    ap.add_argument("--time-limit", type=float, default=300.0)
    ap.add_argument("--limits", type=float, nargs="+", default=[120.0, 300.0])
    ap.add_argument("--engines", nargs="+", default=["cpsat"], choices=["cpsat", "milp"])
    args = ap.parse_args(argv)
    if args.what == "table":
        print("| workload | method | engine | limit | status | value | paper | diff | bound "
              "| wall |\n|---|---|---|---|---|---|---|---|---|---|", flush=True)
        jobs = [("latency", w, e, lim) for lim in args.limits
                for w in ("layer_gnmt_inference", "op_bert3_inference") for e in args.engines]
        jobs += [("noncontig", "layer_gnmt_training", "milp", lim) for lim in args.limits]
        for what, w, e, lim in jobs:
            r = run(what, w, e, lim)
            method = "`latency_ip`" if what == "latency" else "`ip_noncontig`, `gap=0`"
            print(f"| {w} | {method} | {'HiGHS' if e == 'milp' else 'CP-SAT'} | {lim:g} s "
                  f"| {r['status']} | {r['value']:.3f} | {r['paper']} | {r['diff']:+.2%} "
                  f"| {r['bound']:.3f} | {r['wall']:.1f} s |", flush=True)
        return
    if not args.workload:
        ap.error("a workload is needed")
    r = run(args.what, args.workload, args.engine, args.time_limit)
    diff = f"{r['diff']:+.2%}" if r["diff"] is not None else "-"
    print(f"{args.what} {args.workload} engine={r['engine']} limit={args.time_limit:g}s "
          f"status={r['status']} value={r['value']:.3f} paper={r['paper']} diff={diff} "
          f"bound={r['bound']:.3f} wall={r['wall']:.1f}s", flush=True)


if __name__ == "__main__":
    main()
