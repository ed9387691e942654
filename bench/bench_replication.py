"""Replicated pipeline stages judged (Tarnawski et al., Appendix C.2; issue 29.4) on the
published MSR throughput workloads.

The MSR clusters give transfer times per edge (fixed ``comm``) and no link bandwidth, so
``dp(replicate=True)`` needs ``allreduce_bandwidth`` there: for every workload, the DP without
replication, then with free synchronisation (``inf``, the former default) and with the ring
all-reduce of the default's accounting over a 150 GB/s (NVLink-like) and a 12 GB/s
(PCIe-like) link (``B = bw / 4``: 3.75e7 and 3e6 bytes/ms); then the bundled training samples
on a host-mode cluster of 4 GPUs with a 12 GB/s host link and the default bandwidth. For each:
the DP's value, ``max_load`` of the plan it returns (judged on its replica graph), the replicas
per stage, the ops of the judged graph and the wall time of the solve.

Run: ``.venv/bin/python bench/bench_replication.py``
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from workbench import max_load, samples, solve
from workbench.cluster import Cluster, Device, Link
from workbench.io.msr import read_msr
from workbench.costs.pipeline_costs import default_allreduce_bandwidth

MSR = Path(__file__).resolve().parent.parent / "sample_graphs" / "msr" / "throughput"


def _row(name: str, setting: str, g, c, kw: dict) -> None:
    t0 = time.perf_counter()
    p = solve(g, c, method="dp", **kw)
    wall = time.perf_counter() - t0
    reps = sorted((len(v) for v in p.info.get("replicas", {}).values()), reverse=True)
    bw = kw.get("allreduce_bandwidth", default_allreduce_bandwidth(c)) if kw else None
    print(f"| {name} | {setting} | {'-' if bw is None else f'{bw:.4g}'} | "
          f"{p.predicted['max_load_ms']:.4f} | {max_load(p, c):.4f} | "
          f"{reps or '-'} | {p.graph.n_ops} | {wall:.2f} |")


def main() -> None:
    print("| workload | setting | B (bytes/ms) | DP value | max_load | replicas | judged ops | "
          "solve s |")
    print("|---|---|---|---|---|---|---|---|")
    for path in sorted(MSR.glob("*.json")):
        g, c = read_msr(path)
        for setting, kw in [("no replication", {}),
                            ("free sync", {"replicate": True, "allreduce_bandwidth": math.inf}),
                            ("ring, 150 GB/s", {"replicate": True, "allreduce_bandwidth": 3.75e7}),
                            ("ring, 12 GB/s", {"replicate": True, "allreduce_bandwidth": 3e6})]:
            _row(path.stem, setting, g, c, kw)
    c = Cluster([Device(f"gpu{i}", "gpu", 16 * 2**30) for i in range(4)], mode="host",
                host_link=Link(0.0, 1.2e7), name="4xgpu-host-12GBs")
    assert default_allreduce_bandwidth(c) == 3e6
    for name, g in [("cnn(40) training", samples.to_training(samples.cnn(40), update=True)),
                    ("transformer(60) training",
                     samples.to_training(samples.transformer(60), update=True))]:
        for setting, kw in [("no replication", {}),
                            ("free sync", {"replicate": True, "allreduce_bandwidth": math.inf}),
                            ("ring (default)", {"replicate": True})]:
            _row(name, setting, g, c, kw)


if __name__ == "__main__":
    main()
