"""How fast is :func:`workbench.robustness`? 10 methods x 200 draws, on a 300-op hard-regime
graph and on a 6,598-op real model (GNMT with V100 roofline costs), against simulating every
draw with the judge.

Printed per workload: ops and transfers per plan, the seconds to solve the 10 methods (not part
of the goal), then ``--repeats`` timings of ``robustness(cmp, samples=200)`` (event graphs
built and checked against the judge, draws, replays, statistics; a fresh process pays numba's
cache load once, about 0.2 s, in the first run), and the estimated time of 2,000 full
simulations (one simulation per plan timed, x 200). Goals (issue 26): < 5 s and < 60 s.

Usage::

    .venv/bin/python bench/bench_robustness.py [--repeats 3] [--samples 200] [--skip-large]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import workbench as wb
from workbench.io import load_graph
from workbench.costs.roofline import costs_for_cluster
from workbench.workloads import layered

METHODS = ["order_place", "round_robin", "m_topo", "heft", "etf", "m_etf", "m_sct", "dpos", "metis",
           "celeritas"]


def run(name: str, g, c, samples: int, repeats: int) -> dict:
    t0 = time.perf_counter()
    cmp = wb.compare(g, c, methods=METHODS, progress=False, time_limit=60)
    solve_s = time.perf_counter() - t0
    failed = cmp.table.loc[cmp.table["status"] == "error", "method"].tolist()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        r = wb.robustness(cmp, samples=samples, noise="profiled")
        times.append(time.perf_counter() - t0)
    sim = []
    for p in cmp.plans.values():
        t0 = time.perf_counter()
        wb.simulate(p, c)
        sim.append(time.perf_counter() - t0)
    n_tr = [wb.simulate(p, c).n_transfers for p in cmp.plans.values()]
    print(f"{name}: {g.n_ops} ops, {len(cmp.plans)} plans ({', '.join(failed) or 'none'} "
          f"failed), transfers per plan {min(n_tr)}-{max(n_tr)}, cluster {c.name}")
    print(f"  solve 10 methods: {solve_s:.1f} s (not timed below)")
    print(f"  robustness, {samples} draws x {len(cmp.plans)} methods: "
          + ", ".join(f"{t:.2f}" for t in times)
          + f" s (median {statistics.median(times):.2f} s)")
    print(f"  full simulation of every draw instead: ~{sum(sim) * samples:.1f} s "
          f"({1e3 * sum(sim) / len(sim):.1f} ms per simulation)")
    print(f"  verdict: {r.verdict}")
    return {"name": name, "times": times}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-large", action="store_true", help="only the 300-op graph")
    a = ap.parse_args(argv)
    c = wb.Cluster.preset("4xV100-nvlink")
    run("layered-300 (hard regime)", layered(300, seed=0), c, a.samples, a.repeats)
    if not a.skip_large:
        g = costs_for_cluster(load_graph(ROOT / "sample_graphs" / "gnmt.json.gz"), c)
        run("gnmt (real model, V100 roofline)", g, c, a.samples, a.repeats)


if __name__ == "__main__":
    main()
