"""Quality against solver time: the incumbents and proven bounds that the CP-SAT and MILP
engines report while they run, collected for the method being solved.

:func:`workbench.solve` opens a :func:`recording` around every method; each CP-SAT or HiGHS solve
inside it asks for a recorder (:func:`new_call`) and hands it each improvement. The events end
up in ``plan.stats["progress"]``: a list of ``{"s", "objective", "bound", "engine", "call"}``,
``s`` seconds since the method started, ``objective`` and ``bound`` in ms (``None`` while
unknown), ``call`` numbering the engine runs of one method (Pesto's window rounds, the IPs'
passes). The objective is the engine's model objective: predicted makespan for the CP-SAT and
HiGHS makespan models, the search's max load for ``local_search``, the model's max load or
latency for the pipeline IPs (their HiGHS models are written in units of a reference time and
scaled to ms where they are recorded, ``solve_milp(progress_scale=...)``). Nothing is recorded outside a recording,
and methods without such an engine get no ``progress``.

Examples
--------
>>> with recording() as tr:
...     rec = new_call("demo")
...     rec(10.0, 2.0); rec(10.0, 2.0); rec(8.0, 5.0)
>>> [(e["objective"], e["bound"], e["call"]) for e in tr.events]
[(10.0, 2.0, 0), (8.0, 5.0, 0)]
>>> new_call("demo") is None
True
"""

from __future__ import annotations

import math
import threading
import time
from contextlib import contextmanager

__all__ = ["Trace", "new_call", "recording"]

_LOCK = threading.Lock()
_STACK: list = []


def _num(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


class Trace:
    """The events of one recording (see the module docstring)."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.events: list = []
        self.calls = 0
        self._last: dict = {}

    def add(self, engine: str, call: int, objective, bound) -> None:
        ev = (_num(objective), _num(bound))
        with _LOCK:
            if self._last.get(call) == ev:
                return
            self._last[call] = ev
            self.events.append({"s": time.perf_counter() - self.t0, "objective": ev[0],
                                "bound": ev[1], "engine": engine, "call": call})


@contextmanager
def recording():
    """Collect the progress of the engine runs started inside (innermost recording wins)."""
    tr = Trace()
    with _LOCK:
        _STACK.append(tr)
    try:
        yield tr
    finally:
        with _LOCK:
            _STACK.remove(tr)


def new_call(engine: str):
    """A ``record(objective, bound)`` for one engine run, or None outside a recording."""
    with _LOCK:
        if not _STACK:
            return None
        tr = _STACK[-1]
        call = tr.calls
        tr.calls += 1
    return lambda objective, bound: tr.add(engine, call, objective, bound)
