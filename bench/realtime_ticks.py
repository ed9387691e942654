"""Does the measurement measure the model or the scheduler? Timed steps with and without
real-time scheduling (:mod:`workbench.runtime.realtime`).

For each plan (default: transformer_small's single-device and HEFT plans on two logical CPU
devices) and each mode (normal priority, ``SCHED_FIFO``), in alternating blocks so that a
drifting machine affects both modes alike, ``--steps`` timed steps after ``--warmup``; printed
per plan and mode: the median, minimum, maximum, half the interquartile range, and the share of
steps within 0.3 ms of a non-zero multiple of the scheduler's 4 ms tick
(:func:`workbench.fidelity.ladder.tick_share`). On a loaded machine the normal-priority steps
of a sub-4 ms plan cluster at 4, 8, 12 ms; under ``SCHED_FIFO`` they should not.

``--hogs N`` starts N busy-loop processes at normal priority for the duration of the
measurement (killed at the end): a reproducible stand-in for "other jobs on the machine" (more
runnable threads than cores). The 1-minute load average is printed at the start and the end.

Usage::

    .venv/bin/python bench/realtime_ticks.py [--model transformer_small] [--steps 40]
    .venv/bin/python bench/realtime_ticks.py --hogs 4 --methods single heft --blocks 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _start_hogs(n: int) -> list:
    """``n`` busy-loop processes (bounded: killed by :func:`_stop_hogs`, or after 20 minutes)."""
    code = "import time\nend = time.time() + 1200\nwhile time.time() < end:\n    pass\n"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]


def _stop_hogs(procs: list) -> None:
    for p in procs:
        p.kill()
        p.wait()


def main(argv: list[str] | None = None) -> int:
    import workbench as wb
    from workbench.cluster import local_cluster
    from workbench.fidelity.ladder import step_spread, tick_share
    from workbench.runtime.realtime import realtime
    from workbench.runtime.runner import PlanSession

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="transformer_small")
    ap.add_argument("--methods", nargs="*", default=["single", "heft"])
    ap.add_argument("--devices", type=int, default=2)
    ap.add_argument("--steps", type=int, default=40, help="timed steps per plan, mode, block")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--blocks", type=int, default=1,
                    help="alternating blocks of (normal, realtime) per plan")
    ap.add_argument("--hogs", type=int, default=0, help="busy-loop processes to start")
    args = ap.parse_args(argv)
    with realtime(required=False) as granted:
        pass
    if not granted:
        raise SystemExit("this machine refuses SCHED_FIFO (see the warning): nothing to compare")
    g = wb.samples.load_sample(args.model)
    cluster = local_cluster(args.devices)
    plans = {m: wb.solve(g, cluster, method=m, seed=0) for m in args.methods}
    hogs = _start_hogs(args.hogs)
    load0 = os.getloadavg()[0]
    samples: dict = {}
    try:
        time.sleep(1.0 if hogs else 0.0)
        for m, plan in plans.items():
            with PlanSession(plan, cluster=cluster) as normal, \
                    PlanSession(plan, cluster=cluster, realtime=True) as fifo:
                normal.warm(args.warmup)
                fifo.warm(args.warmup)
                for _ in range(args.blocks):
                    normal.time(args.steps)
                    fifo.time(args.steps)
                samples[(m, "normal")] = normal.samples
                samples[(m, "SCHED_FIFO")] = fifo.samples
    finally:
        _stop_hogs(hogs)
    print(f"{args.model} on {args.devices} logical CPU devices, {args.hogs} busy-loop processes, "
          f"load average {load0:.2f} at start, {os.getloadavg()[0]:.2f} at end")
    print(f"{'plan':12s} {'mode':11s} {'steps':>5s} {'median':>7s} {'min':>6s} {'max':>7s} "
          f"{'spread':>6s} {'at 4 ms ticks':>13s}")
    for (m, mode), s in samples.items():
        print(f"{m:12s} {mode:11s} {len(s):5d} {statistics.median(s):7.2f} {min(s):6.2f} "
              f"{max(s):7.2f} {step_spread(s):6.2f} {100 * tick_share(s):12.0f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
