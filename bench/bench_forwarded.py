"""Tarnawski et al.'s methods on direct-mode clusters of any size (issue 46): activations
forwarded stage to stage (:data:`workbench.costs.pipeline_costs.FORWARDED`).

For every bundled model and multi-GPU preset, each of ``dp``, ``dpl``, ``pipedream``,
``ip_contig``, ``ip_noncontig`` is solved once; the table gives the judged max load
(:func:`workbench.max_load`, the plan's chain), whether the solver's prediction equals it,
the simulated makespan, the status and the CPU seconds of the solve; a method that cannot
serve a pair says why in one line (as :func:`workbench.compare` leaves it out). The last column
is ``m_topo``'s max load on the same pair (a contiguous split of Baechi, judged with direct
transfers) as a reference.

Run: ``python bench/bench_forwarded.py [--ip SECONDS] [--models a,b] [--presets p,q]``
"""

from __future__ import annotations

import argparse
import time

from workbench import max_load, simulate, solve
from workbench.cluster import Cluster
from workbench.errors import InfeasibleError, NotApplicableError
from workbench.workloads import resolve

METHODS = ("dp", "dpl", "pipedream", "ip_contig", "ip_noncontig")


def one(g, c, m: str, ip_s: float) -> str:
    t0 = time.process_time()
    try:
        p = solve(g, c, method=m, **({"time_limit": ip_s} if m.startswith("ip") else {}))
    except (NotApplicableError, InfeasibleError) as e:
        return f"left out ({type(e).__name__}: {str(e)[:70]}...)"
    cpu = time.process_time() - t0
    ml = max_load(p, c)
    same = abs(p.predicted["max_load_ms"] - ml) <= 1e-6 * max(1.0, ml)
    ms = simulate(p, c).makespan
    return (f"{ml:.3f}{'' if same else ' (pred ' + format(p.predicted['max_load_ms'], '.3f') + ')'}"
            f" / {ms:.2f} / {p.status} / {cpu:.1f}s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ip", type=float, default=10.0)
    ap.add_argument("--models", default="transformer_small,bert_base,resnet50,gnmt")
    ap.add_argument("--presets", default="4xV100-nvlink,8xA100-nvlink,2x4xV100,2x2xV100")
    a = ap.parse_args()
    print("cell: judged max load ms (pred if it differs) / simulated makespan ms / status / "
          "CPU s")
    print("| model | preset | " + " | ".join(METHODS) + " | m_topo max load |")
    print("|---" * (len(METHODS) + 3) + "|")
    for name in a.models.split(","):
        g, _own = resolve(name)
        for pre in a.presets.split(","):
            c = Cluster.preset(pre)
            cells = [one(g, c, m, a.ip) for m in METHODS]
            ref = max_load(solve(g, c, method="m_topo"), c)
            print(f"| {name} | {pre} | " + " | ".join(cells) + f" | {ref:.3f} |", flush=True)


if __name__ == "__main__":
    main()
