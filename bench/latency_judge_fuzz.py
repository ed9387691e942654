"""Random placements of contract cases judged by the latency model (issue 41).

Each of the first ``--cases`` contract cases (at most ``--max-ops`` ops) gets ``--per-case``
random placements (every op on a device that can run it); the script counts those for which
:func:`workbench.judge.pipelined.latency` raises ``PlanError`` (subgraph invocations that wait on each
other). ``--old-judge`` judges with the fast piece rule alone, as before issue 41.

    python bench/latency_judge_fuzz.py               # 0 of 1500
    python bench/latency_judge_fuzz.py --old-judge   # 264 of 1500
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    from workbench.judge import pipelined as pipeline
    from workbench.errors import PlanError
    from workbench.plan import Plan
    from workbench.testing.contract import make_case

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--max-ops", type=int, default=60)
    ap.add_argument("--per-case", type=int, default=5)
    ap.add_argument("--old-judge", action="store_true")
    args = ap.parse_args(argv)
    if min(args.cases, args.max_ops, args.per_case) < 1:
        ap.error("--cases, --max-ops and --per-case must be at least 1")
    if args.old_judge:
        pipeline._pieces_acyclic = lambda *a: True
    bad = total = 0
    for s in range(args.cases):
        case = make_case(s, max_ops=args.max_ops)
        g, c = case.graph, case.cluster
        ok = np.isfinite(c.op_times(g))
        if not ok.any(axis=1).all():
            continue
        r = np.random.default_rng(s)
        for _ in range(args.per_case):
            place = {v: c.names[int(r.choice(np.flatnonzero(ok[i])))]
                     for i, v in enumerate(g.ops)}
            total += 1
            try:
                pipeline.latency(Plan(g, place), c)
            except PlanError:
                bad += 1
    print(f"{bad} of {total} random placements raised PlanError "
          f"({'old' if args.old_judge else 'current'} judge)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
