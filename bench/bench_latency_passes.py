"""Single-sample latency of training graphs (Tarnawski et al., Section 4.2): ``latency_ip`` with
joint contiguity (``separate_passes=False``) and with ``separate_passes=True`` (the default for
training graphs since decision 63), beside the greedy
baseline, on the MSR training workloads in the paper's memory-bound setting of Section 7
(accelerator memory such that all accelerators together hold 1.6x the model).

Prints per workload and setting: status, judged latency (``workbench.judge.pipelined.latency``),
whether the forward and backward parts of every accelerator are contiguous, the warm start
and the wall time.

Run: ``.venv/bin/python bench/bench_latency_passes.py [--time-limit 30]``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from workbench import solve
from workbench.cluster import Cluster, Device
from workbench.io.msr import read_msr
from workbench.judge.pipelined import contiguity_violations, latency

MSR = Path(__file__).resolve().parent.parent / "sample_graphs" / "msr" / "throughput"


def memory_bound(graph, cluster, factor: float = 1.6) -> Cluster:
    """``cluster`` with accelerator memories summing to ``factor`` x the model."""
    k = sum(d.kind != "cpu" for d in cluster.devices)
    cap = factor * graph.total_memory() / k
    return Cluster([Device(d.name, d.kind, cap if d.kind != "cpu" else d.memory, d.speed)
                    for d in cluster.devices], mode=cluster.mode, host_link=cluster.host_link,
                   name=f"{cluster.name}-mem{factor:g}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--time-limit", type=float, default=30.0)
    args = ap.parse_args()
    print("| workload | method | status | latency (ms) | passes contiguous | warm start | wall s |")
    print("|---|---|---|---|---|---|---|")
    for path in sorted(MSR.glob("*training.json")):
        g, c0 = read_msr(path)
        c = memory_bound(g, c0)
        acc = {d.name for d in c.devices if d.kind != "cpu"}
        for name, method, kw in [("greedy_latency", "greedy_latency", {}),
                                 ("latency_ip", "latency_ip", {"time_limit": args.time_limit,
                                                               "separate_passes": False}),
                                 ("latency_ip separate_passes", "latency_ip",
                                  {"time_limit": args.time_limit, "separate_passes": True})]:
            t0 = time.perf_counter()
            p = solve(g, c, method=method, **kw)
            wall = time.perf_counter() - t0
            bad = [m for part in ("forward", "backward")
                   for m in contiguity_violations(p, part=part) if m.split("'")[1] in acc]
            print(f"| {path.stem} | {name} | {p.status} | {latency(p, c):.3f} | "
                  f"{'yes' if not bad else 'no'} | {p.stats.get('warm_start') or '-'} | "
                  f"{wall:.1f} |")


if __name__ == "__main__":
    main()
