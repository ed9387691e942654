"""Foundation figures: compile and simulate 36,000-op graphs on 8 devices; load every MSR file.

Targets on the 2-core reference machine: compile < 1 s, simulate < 2 s (in-process wall time,
best of 3). Run: ``.venv/bin/python bench/bench_foundation.py``.
"""

from __future__ import annotations

import time
from pathlib import Path

import workbench as wb
from workbench import samples
from workbench.io import read_msr

MSR = Path(__file__).resolve().parents[1] / "sample_graphs" / "msr"


def best(fn, repeat=3):
    out, times = None, []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, min(times)


def main() -> None:
    c = wb.Cluster.preset("8xA100-nvlink")
    print(f"{'graph':<16}{'ops':>7}{'edges':>7}{'build s':>9}{'compile s':>11}"
          f"{'plan':>13}{'transfers':>11}{'sim s':>8}{'sim(no cong) s':>16}{'max_load s':>12}")
    for name in ("cnn", "inception", "transformer", "lstm"):
        t0 = time.perf_counter()
        g = samples.load_sample(name, n_ops=36_000)
        build = time.perf_counter() - t0
        g._g  # a graph built from arrays makes its networkx form from its compiled one: first

        def compile_():
            g.__dict__.pop("c", None)
            return g.c

        _, tc = best(compile_)
        for method in ("round_robin", "m_topo"):
            plan = wb.solve(g, c, method=method)
            s, ts = best(lambda: wb.simulate(plan, c))
            _, tn = best(lambda: wb.simulate(plan, c, congestion=False))
            _, tm = best(lambda: wb.max_load(plan, c))
            print(f"{g.name:<16}{g.n_ops:>7}{g.n_edges:>7}{build:>9.2f}{tc:>11.3f}"
                  f"{method:>13}{s.n_transfers:>11}{ts:>8.3f}{tn:>16.3f}{tm:>12.4f}")
    print("\ntargets: compile < 1 s, simulate < 2 s")
    if MSR.exists():
        print("\nMSR workloads:")
        for f in sorted(MSR.glob("*/*.json")):
            if f.parent.name == "experts":
                continue
            (g, cl), t = best(lambda: read_msr(f), repeat=1)
            print(f"  {f.parent.name + '/' + f.stem:<40} {g.n_ops:>5} ops {g.n_edges:>5} edges  "
                  f"{cl.kind_counts()}  loaded in {t * 1e3:.1f} ms")
    else:
        print(f"\nMSR workloads not found at {MSR}")


if __name__ == "__main__":
    main()
