"""Every registered method at growing sizes: solve time, whole-call time against the time limit,
peak memory, the fitted growth exponent; the import and first-call times.

Run: ``.venv/bin/python bench/bench_scaling.py`` (all methods, 1k/10k/100k/1M ops). Options:
``--sizes 1000,10000`` ``--methods heft,dpos`` ``--graph transformer|layered|cnn``
``--cluster 2xV100-pcie`` (device memory unlimited, so that the limit, not memory, is under test)
``--limit 20`` (seconds given to every method that takes a time limit) ``--mem-gib 8`` (address-
space cap of each run) ``--json FILE`` (rows as JSON as well).

Each cell: solve s (``plan.stats["solve_s"]``) / whole call s (the call's CPU s: on a loaded
machine wall time is inflated, CPU time much less), peak MiB of the run, status,
the judge's time on the plan (``workbench.simulate``) and the machine's load average when the
call ended. Every (method, size) runs in a fresh
interpreter, one at a time (the machine is shared): the
graph is built once per size in the parent and handed over as a pickle (its load is not
counted), the child times ``workbench.solve`` and reports its peak resident memory. A run is
killed at ``3 * limit + 60 + ops / 5000`` s wall (the graph's load included) or at the
memory cap; a method's series stops at the first size where it fails, is killed, or its whole
call exceeds ``1.2 * limit + 1`` s (with a limit) or 60 s (without one). The growth exponent is the least-squares slope of log(solve s) against
log(ops) over the sizes that finished (at least two, the smallest above 10 ms).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import pickle
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NO_LIMIT_BOUND = 60.0

CHILD = r"""
import json, pickle, resource, sys, time
t0 = time.perf_counter()
import workbench as wb
t_import = time.perf_counter() - t0
from workbench.solvers import SOLVERS
import inspect
method, path, cluster_name, limit = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
with open(path, "rb") as f:
    g = pickle.load(f)
c = wb.Cluster.preset(cluster_name).with_memory(float("inf"))
takes = "time_limit" in inspect.signature(SOLVERS[method].func).parameters
kw = {"time_limit": limit} if takes else {}
out = {"method": method, "ops": g.n_ops, "import_s": t_import, "bounded": takes}
t = time.perf_counter(); cpu = time.process_time()
try:
    p = wb.solve(g, c, method=method, **kw)
    out["call_s"] = time.perf_counter() - t
    out["cpu_s"] = time.process_time() - cpu
    out["status"] = p.status
    out["solve_s"] = float(p.stats.get("solve_s", out["call_s"]))
    t = time.perf_counter()
    wb.simulate(p, c)           # the judge on the plan just made
    out["judge_s"] = time.perf_counter() - t
    if g.n_ops <= 1000:        # first call against a second one: lazy imports, compilation
        t = time.perf_counter()
        wb.solve(g, c, method=method, **kw)
        out["second_call_s"] = time.perf_counter() - t
except Exception as e:
    out["call_s"] = time.perf_counter() - t
    out["cpu_s"] = time.process_time() - cpu
    out["status"] = "error"
    out["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
out["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
import os
out["load"] = os.getloadavg()[0]     # the machine's 1-minute load average at the end
print("RESULT " + json.dumps(out))
"""


def _graph_file(graph: str, n: int, tmp: Path) -> tuple[Path, float]:
    """Build the graph once and pickle it; returns (file, build seconds)."""
    import workbench as wb

    t = time.perf_counter()
    g = getattr(wb.samples, graph)(n, seed=0)
    g.c  # compiled once here: the children get it with the pickle
    built = time.perf_counter() - t
    path = tmp / f"{graph}{n}.pkl"
    with open(path, "wb") as f:
        pickle.dump(g, f, protocol=pickle.HIGHEST_PROTOCOL)
    del g
    gc.collect()            # the parent holds no graph while a child runs
    return path, built


def _run_one(method: str, path: Path, cluster: str, limit: float, mem_gib: float,
             n: int = 0) -> dict:
    cap = int(mem_gib * 2**30)
    kill = 3 * limit + 60 + n / 5000       # (the child also loads the pickled graph)

    def guard():
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t = time.perf_counter()
    try:
        r = subprocess.run([sys.executable, "-c", CHILD, method, str(path), cluster, str(limit)],
                           capture_output=True, text=True, env=env, cwd=ROOT,
                           timeout=kill, preexec_fn=guard)
    except subprocess.TimeoutExpired:
        return {"method": method, "status": "killed", "call_s": time.perf_counter() - t,
                "error": f"killed after {kill:.0f} s (graph load included)"}
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"method": method, "status": "killed", "call_s": time.perf_counter() - t,
            "error": f"exit {r.returncode}: {tail[0][:160]}"}


def growth_exponent(points: list) -> float:
    """Least-squares slope of log(seconds) against log(ops); NaN with fewer than two points.

    >>> round(growth_exponent([(1000, 0.1), (10000, 1.0), (100000, 10.0)]), 3)
    1.0
    """
    pts = [(math.log(n), math.log(s)) for n, s in points if s > 0.01]
    if len(pts) < 2:
        return math.nan
    mx = statistics.fmean(x for x, _ in pts)
    my = statistics.fmean(y for _, y in pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx > 0 else math.nan


def import_times(runs: int = 5) -> dict:
    """Median whole-process seconds of ``import workbench`` and of a bare interpreter."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))

    def med(code):
        ts = []
        for _ in range(runs):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, check=True)
            ts.append(time.perf_counter() - t)
        return statistics.median(ts)

    bare, wb = med("pass"), med("import workbench")
    return {"bare_s": bare, "import_s": wb, "over_bare_s": wb - bare}


def over_limit(row: dict, limit: float) -> bool:
    bound = 1.2 * limit + 1 if row.get("bounded") else NO_LIMIT_BOUND
    return row["status"] in ("error", "killed") or row.get("call_s", math.inf) > bound


def table(rows: list, sizes: list, limit: float) -> str:
    """Markdown: one line per method, per size ``solve s / whole call s, peak MiB``."""
    by = {}
    for r in rows:
        by.setdefault(r["method"], {})[r["ops"]] = r
    head = ("| method | limit | " + " | ".join(f"{n:,} ops" for n in sizes)
            + " | growth | first call / second (s) |")
    lines = [head, "|" + " --- |" * (len(sizes) + 4)]
    for m, cells in by.items():
        bounded = any(r.get("bounded") for r in cells.values())
        out = []
        for n in sizes:
            r = cells.get(n)
            if r is None:
                out.append("(stopped)")
            elif r["status"] in ("error", "killed"):
                out.append(f"{r['status']} {r.get('call_s', math.nan):.1f} s: "
                           f"{r.get('error', '')[:60]}")
            else:
                late = " **late**" if over_limit(r, limit) else ""
                out.append(f"{r['solve_s']:.2f} / {r['call_s']:.2f} s{late} "
                           f"(CPU {r.get('cpu_s', math.nan):.2f} s), "
                           f"{r.get('peak_mib', math.nan):.0f} MiB, {r['status']}, judge "
                           f"{r.get('judge_s', math.nan):.2f} s, load "
                           f"{r.get('load', math.nan):.1f}")
        pts = [(n, r["solve_s"]) for n, r in cells.items() if "solve_s" in r]
        k = growth_exponent(pts)
        first = min(cells)
        fc = cells[first]
        fcs = (f"{fc['call_s']:.2f} / {fc['second_call_s']:.2f}" if "second_call_s" in fc
               else "-")
        lines.append(f"| {m} | {f'{limit:g} s' if bounded else 'none'} | " + " | ".join(out)
                     + f" | {'-' if math.isnan(k) else f'{k:.2f}'} | {fcs} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000,1000000")
    ap.add_argument("--methods", default="")
    ap.add_argument("--graph", default="transformer")
    ap.add_argument("--cluster", default="2xV100-pcie")
    ap.add_argument("--limit", type=float, default=20.0)
    ap.add_argument("--mem-gib", type=float, default=8.0)
    ap.add_argument("--json", default="")
    ap.add_argument("--no-import", action="store_true")
    a = ap.parse_args(argv)
    from workbench.solvers import SOLVERS

    sizes = [int(s) for s in a.sizes.split(",")]
    methods = [m for m in a.methods.split(",") if m] or list(SOLVERS)
    if not a.no_import:
        imp = import_times()
        print(f"import workbench: {imp['import_s']:.3f} s whole process, bare interpreter "
              f"{imp['bare_s']:.3f} s: {imp['over_bare_s']:.3f} s over bare (median of 5)")
    rows, alive = [], set(methods)
    with tempfile.TemporaryDirectory(prefix="bench_scaling_") as tmp:
        for n in sizes:
            if not alive:
                break
            path, built = _graph_file(a.graph, n, Path(tmp))
            print(f"{a.graph}({n}): built in {built:.1f} s", flush=True)
            for m in methods:
                if m not in alive:
                    continue
                r = _run_one(m, path, a.cluster, a.limit, a.mem_gib, n)
                r.setdefault("ops", n)
                rows.append(r)
                print(f"  {m:13s} {r['status']:10s} call {r.get('call_s', math.nan):7.2f} s "
                      f"CPU {r.get('cpu_s', math.nan):7.2f} s "
                      f"peak {r.get('peak_mib', math.nan):6.0f} MiB "
                      f"load {r.get('load', math.nan):4.1f} {r.get('error', '')}",
                      flush=True)
                if over_limit(r, a.limit):
                    alive.discard(m)
            path.unlink()
    print()
    print(table(rows, sizes, a.limit))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
