"""Throughput and overhead of sweeps (issue 17).

1. Cells per second for the same 200-cell sweep (short cells: list schedulers on a 600-op
   graph) on a local Dask cluster of 1 and of 2 worker processes; the cluster is started
   beforehand and its start-up time printed apart.
2. Per-cell overhead of a sweep against a plain loop of ``solve`` + ``simulate`` over the same
   cells (a cell also evaluates the plan and its lower bounds, as ``compare()`` does), for
   cells of about 1 s (list schedulers on an 8,000-op graph), on one worker, with each cell in
   its killable child process (the default) and without.

Run: ``.venv/bin/python bench/bench_sweep.py [--cells 200] [--long-cells 24]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time

import workbench as wb
import workbench.sweep as sw
from workbench.sweep.cell import load_workload, make_cluster


def short_spec(n_cells: int) -> dict:
    methods = ["m_etf", "heft", "dpos", "m_topo"]
    n_bw = max(1, n_cells // len(methods))
    return {"name": "bench_short", "workloads": ["transformer:600"],
            "clusters": {"presets": ["4xV100-nvlink"],
                         "bandwidth_scale": [round(0.25 + 0.05 * i, 2) for i in range(n_bw)]},
            "methods": {m: {} for m in methods}, "time_limit": 30}


def long_spec(n_cells: int, ops: int) -> dict:
    methods = ["heft", "dpos", "m_etf"]
    n_bw = max(1, n_cells // len(methods))
    return {"name": "bench_long", "workloads": [f"transformer:{ops}"],
            "clusters": {"presets": ["4xV100-nvlink"],
                         "bandwidth_scale": [round(0.5 + 0.1 * i, 2) for i in range(n_bw)]},
            "methods": {m: {} for m in methods}, "time_limit": 60}


def timed_sweep(spec: dict, workers: int, *, isolate: bool = True):
    """(start-up s, sweep s, cells, sum of the cells' own wall times) on a fresh local cluster;
    the workers and child processes are warmed up first, as a long sweep amortises them."""
    out = tempfile.mkdtemp(prefix="bench-sweep-")
    t0 = time.perf_counter()
    client, cluster = sw.connect(workers=workers)
    try:
        # not timed: every worker (and its child process) builds the graph once
        warm = {**spec, "clusters": {"presets": ["4xV100-nvlink"],
                                     "bandwidth_scale": [100.0 + i for i in range(4 * workers)]},
                "methods": {"single": {}}}
        client.run(load_workload, spec["workloads"][0])
        sw.run(warm, out + "-warm", client=client, isolate=isolate, progress=False, echo=None)
        startup = time.perf_counter() - t0
        t1 = time.perf_counter()
        df = sw.run(spec, out, client=client, isolate=isolate, progress=False, echo=None,
                    flush_s=30.0)
        wall = time.perf_counter() - t1
    finally:
        client.close()
        cluster.close()
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(out + "-warm", ignore_errors=True)
    assert (df["status"] != "error").all(), df[df["status"] == "error"]["error"].tolist()
    return startup, wall, len(df), float(df["wall_s"].sum())


def plain_loop(spec: dict) -> tuple[float, int]:
    """The same cells as a plain loop (graph built once, outside the timing)."""
    cells = sw.Spec.from_dict(spec).cells()
    graph, own = load_workload(cells[0].workload)
    t0 = time.perf_counter()
    for c in cells:
        cl = make_cluster(c.preset, graph, own, bandwidth_scale=c.bandwidth_scale)
        plan = wb.solve(graph, cl, method=c.solver, time_limit=c.time_limit, seed=c.seed)
        wb.simulate(plan, cl)
    return time.perf_counter() - t0, len(cells)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", type=int, default=200, help="cells of the throughput sweep")
    ap.add_argument("--long-cells", type=int, default=24, help="cells of about 1 s")
    ap.add_argument("--long-ops", type=int, default=8000, help="graph size of the 1 s cells")
    ap.add_argument("--rounds", type=int, default=2, help="repeats of the overhead runs")
    args = ap.parse_args()
    print(f"# bench_sweep: python {os.sys.version.split()[0]}, {os.cpu_count()} cpus, "
          f"load average {os.getloadavg()[0]:.1f} at start")

    spec = short_spec(args.cells)
    res = {}
    for w in (1, 2):
        start, wall, n, _ = timed_sweep(spec, w)
        res[w] = n / wall
        print(f"throughput, {n} short cells, {w} worker(s): {n / wall:6.1f} cells/s "
              f"({wall:.1f} s; cluster start-up and warm-up {start:.1f} s)")
    print(f"speed-up 2 vs 1 worker: {res[2] / res[1]:.2f}x")

    spec = long_spec(args.long_cells, args.long_ops)
    # speed-up where cells carry real work (short cells measure the scheduler, not the workers)
    lres = {}
    for w in (1, 2):
        _, wall, n, _ = timed_sweep(spec, w)
        lres[w] = n / wall
        print(f"throughput, {n} long cells, {w} worker(s): {n / wall:6.2f} cells/s ({wall:.1f} s)")
    print(f"speed-up 2 vs 1 worker on long cells: {lres[2] / lres[1]:.2f}x")
    res = {**{f"short_{k}": v for k, v in res.items()}, **{f"long_{k}": v for k, v in lres.items()}}
    # the machine is shared: alternate plain loop and sweeps, keep the best of each
    plain, walls, inner = float("inf"), {True: float("inf"), False: float("inf")}, {}
    for _ in range(args.rounds):
        p, n = plain_loop(spec)
        plain = min(plain, p)
        for isolate in (True, False):
            _, wall, _, cells_s = timed_sweep(spec, 1, isolate=isolate)
            if wall < walls[isolate]:
                walls[isolate], inner[isolate] = wall, cells_s
    print(f"plain loop, {n} cells: {plain:.1f} s ({plain / n:.2f} s per cell; best of "
          f"{args.rounds})")
    out = {"plain_s_per_cell": plain / n}
    for isolate in (True, False):
        wall = walls[isolate]
        over = (wall - plain) / plain
        machinery = (wall - inner[isolate]) / inner[isolate]
        name = "child process per worker" if isolate else "in the worker"
        out[f"overhead_{'isolated' if isolate else 'inprocess'}"] = over
        print(f"sweep on 1 worker, cells {name}: {wall:.1f} s, overhead {100 * over:+.1f} % "
              f"against the plain loop ({(wall - plain) / n * 1000:+.0f} ms per cell); "
              f"Dask + transport + Parquet around the cells: {100 * machinery:+.1f} % "
              f"({(wall - inner[isolate]) / n * 1000:+.0f} ms per cell)")
    print(json.dumps({"cells_per_s": res, **out}))


if __name__ == "__main__":  # the local cluster's worker processes re-import this module
    main()
