"""How much slower a program's ops run while other devices of the machine compute: measured
untraced, by running the same single-device step in several sessions at once.

Logical CPU devices share the machine's cores, caches and memory bandwidth. A plan's op runs
at single-device speed only while no other device computes. The ``contention`` change fits one
factor from *traced* op times of a probe and of a single-device run; but a traced step with
two busy threads also contends for the tracer, and the probe's devices mostly wait on each
other, so that factor swings (1.0-1.4 on the same model between runs). This benchmark measures
the slowdown directly: the program's single-device step (the ``rescale`` reference) timed alone
and timed while ``devices - 1`` copies of it run at the same time in their own sessions, on
their own devices, in alternating blocks. The ratio minus one is the slope of the ``overlap``
change (an op slowed by that fraction when another device computes for its whole run;
:func:`workbench.fidelity.extras.simulate_overlap`).
"""

from __future__ import annotations

import statistics
import threading

from ..errors import RuntimeBridgeError
from ..fidelity.probes import reference_plan

__all__ = ["measure_contention"]


def _timed(session, steps: int, k: int, out: dict, errs: list) -> None:
    """``session.time(steps)`` into ``out[k]``; an exception into ``errs`` (thread target)."""
    try:
        out[k] = session.time(steps)
    except BaseException as e:  # noqa: BLE001 - re-raised by the caller's thread
        errs.append(e)


def measure_contention(graph, cluster, *, steps: int = 10, warmup: int = 3, blocks: int = 3,
                       program=None, realtime: bool = False) -> dict:
    """Slowdown of the program's single-device step while the cluster's other devices run it
    too: ``{"alone_ms", "together_ms", "ratio", "slope"}`` (``slope = max(0, ratio - 1)``).

    Each of the cluster's devices gets its own session of the single-device plan
    (:func:`reference_plan` moved to that device); per block the
    first is timed alone, then all are timed at once (one thread each); medians over the
    blocks. ``realtime``: every step under ``SCHED_FIFO`` (see :mod:`~workbench.runtime.
    realtime`).

    Raises
    ------
    RuntimeBridgeError
        A cluster with fewer than two devices, or a failed run.
    """
    from .runner import PlanSession

    names = cluster.names
    if len(names) < 2:
        raise RuntimeBridgeError("measure_contention: needs a cluster of two or more devices")
    ref = reference_plan(graph, cluster)
    first = names[0]
    sessions = []
    try:
        for d in names:
            plan = (ref.with_placement({v: d for v in graph.ops}, order={d: ref.order[first]})
                    if d != first else ref)
            sessions.append(PlanSession(plan, program=program, realtime=realtime))
        for s in sessions:
            s.warm(warmup)
        alone: list = []
        together: list = []
        for _ in range(max(1, int(blocks))):
            alone.extend(sessions[0].time(steps))
            out: dict = {}
            errs: list = []
            threads = [threading.Thread(target=_timed, args=(s, steps, k, out, errs))
                       for k, s in enumerate(sessions)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errs:
                raise errs[0]
            together.extend(x for k in sorted(out) for x in out[k])
    finally:
        for s in sessions:
            s.close()
    a, b = statistics.median(alone), statistics.median(together)
    return {"alone_ms": a, "together_ms": b, "ratio": b / a, "slope": max(0.0, b / a - 1.0)}
