"""Benchmark of the list schedulers (issue #3): speed on large graphs and a quality table.

Run: ``.venv/bin/python bench/bench_list_scheduling.py [--quick] [--markdown PATH]
[--memory-model static|live] [--no-speed]``

Prints
  * heft and dpos wall time on a 36,000-op synthetic transformer with 8 devices (target < 5 s);
  * os_dpos wall time on a 2,000-op transformer with 4 devices (target < 60 s);
  * the quality table: simulated makespan (congestion on) of each method with the lower bound,
    over sample graphs on 2xV100-pcie and 4xV100-nvlink, with and without tight memory.
    ``*`` marks a plan whose status is ``infeasible`` (memory over capacity, known to the
    method), ``!`` one the judge's live memory model found over capacity (``out_of_memory``),
    ``OOM`` a method
    that raised InfeasibleError. os_dpos simulates its own (data-parallel / split) graph.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench import Cluster, samples, simulate, solve
from workbench.errors import InfeasibleError
from workbench.judge.bounds import makespan_lower_bound
from workbench.workloads import memory_footprint

METHODS = ["single", "round_robin", "m_topo", "m_etf", "m_sct", "heft", "dpos", "os_dpos"]


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def speed(quick: bool) -> list[str]:
    lines = []
    n = 6000 if quick else 36000
    g = samples.transformer(n, seed=0)
    c8 = Cluster.preset("8xA100-nvlink")
    _ = g.c  # compile outside the timing
    for m in ("heft", "dpos"):
        plan, dt = timed(lambda m=m: solve(g, c8, method=m))
        lines.append(f"{m:8s} transformer({g.n_ops} ops), 8 devices: {dt:6.2f} s "
                     f"(predicted makespan {plan.predicted['makespan_ms']:.1f} ms; target < 5 s)")
    g2 = samples.transformer(2000, seed=0)
    c4 = Cluster.preset("4xV100-nvlink")
    plan, dt = timed(lambda: solve(g2, c4, method="os_dpos"))
    lines.append(f"os_dpos  transformer({g2.n_ops} ops), 4 devices: {dt:6.2f} s "
                 f"(data parallel x{plan.info['data_parallel']}, {len(plan.info['splits'])} "
                 f"splits, {plan.info['split_candidates']} candidates; target < 60 s)")
    return lines


def cases(quick: bool):
    size = 120 if quick else 300
    gs = [samples.pesto_fig2(), samples.diamond(), samples.two_branch(),
          samples.cnn(size), samples.inception(size), samples.transformer(size),
          samples.lstm_grid(size)]
    for g in gs:
        for cname in ("2xV100-pcie", "4xV100-nvlink"):
            c = Cluster.preset(cname)
            yield g, c, "16 GiB"
            total = memory_footprint(g, c)  # the judge's live model (issue 42)
            if total > 0:
                # tight: the model needs about half of the devices' memory, none holds it alone
                nd = len(c)
                cap = total * (0.6 if nd == 2 else 0.35)
                yield g, c.with_memory(cap), f"{cap / 1e6:.0f} MB"


# a plan over its memory: the method knew (infeasible) or the judge's live model found it
_MARK = {"infeasible": "*", "out_of_memory": "!"}


def quality(quick: bool, memory_model: str = "static") -> list[str]:
    head = "| graph | cluster | memory | lower bound | " + " | ".join(METHODS) + " |"
    lines = [head, "|" + "---|" * (4 + len(METHODS))]
    worse = []
    for g, c, mem in cases(quick):
        row = [g.name, c.name, mem, f"{makespan_lower_bound(g, c):.2f}"]
        res = {}
        for m in METHODS:
            try:
                plan = solve(g, c, method=m, memory_model=memory_model)
            except InfeasibleError:
                row.append("OOM")
                continue
            ms = simulate(plan, c).makespan
            res[m] = ms
            row.append(f"{ms:.2f}" + _MARK.get(plan.status, ""))
        if "dpos" in res and "m_topo" in res and res["dpos"] > res["m_topo"] * (1 + 1e-9):
            worse.append(f"{g.name} on {c.name} ({mem}): dpos {res['dpos']:.2f} > "
                         f"m_topo {res['m_topo']:.2f}")
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    lines.append("DPOS worse than m_topo: " + ("; ".join(worse) if worse else "never"))
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller graphs (a smoke run)")
    ap.add_argument("--markdown", help="also write the quality table to this file")
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("--memory-model", choices=("static", "live"), default="static",
                    help="solve(memory_model=...): the papers' static sum (default) or re-solved "
                         "with capacities tightened until the judge's live model fits")
    args = ap.parse_args()
    if not args.no_speed:
        print("## Speed (wall time on this machine)")
        for line in speed(args.quick):
            print(line)
        print()
    print("## Quality: simulated makespan (ms, congestion on)")
    table = quality(args.quick, args.memory_model)
    print("\n".join(table))
    if args.markdown:
        p = Path(args.markdown)
        tmp = p.with_suffix(p.suffix + ".tmp")
        tmp.write_text("\n".join(table) + "\n")
        tmp.replace(p)


if __name__ == "__main__":
    main()
