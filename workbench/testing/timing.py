"""Wall-clock bounds that hold on a loaded machine (issue 41).

A wall-clock bound in a test measures the machine as much as the code: at load 10 a call that
takes 5 s alone takes 15 s or more. The contract's clauses stay (a method given ``T`` seconds
returns within ``1.2 T + 1 s``), but they are checked on *load-scaled* seconds: the wall time
divided by the slowdown of a reference loop, a pure-Python busy loop timed right after the call
in the same process (its wall time over the CPU time of the thread that ran it).
Alone the slowdown is about 1; with two busy loops per core beside it about 3, and the bound
grows with it, while a method that ignores its limit still overruns by far more.

:class:`Stopwatch` times a block that way; :func:`slowdown` is the reference alone.

Examples
--------
>>> from workbench.testing.timing import Stopwatch, slowdown
>>> slowdown() >= 1.0
True
>>> with Stopwatch() as sw:
...     _ = sum(range(10_000))
>>> sw.wall >= 0.0 and sw.factor >= 1.0 and sw.scaled <= sw.wall
True
>>> sw.within(1.2 * 0.5 + 1.0)
True
"""

from __future__ import annotations

import time
from typing import Self

__all__ = ["Stopwatch", "slowdown"]

REFERENCE_S = 0.05  # CPU seconds of the reference loop (a few million bytecodes)


def slowdown(cpu_s: float = REFERENCE_S) -> float:
    """How many times slower than its own CPU time a busy loop runs now (>= 1).

    The loop runs until its thread has used ``cpu_s`` CPU seconds; the ratio of the wall
    time it took to that CPU time is the share of a core this thread gets on the machine as it
    is loaded now (1 when alone, about 3 with two busy loops per core beside it).

    >>> 1.0 <= slowdown(0.01) < 1e6
    True
    """
    if not cpu_s > 0:
        raise ValueError(f"slowdown: cpu_s must be positive, got {cpu_s!r}")
    w0, c0 = time.perf_counter(), time.thread_time()
    x = 0
    while time.thread_time() - c0 < cpu_s:
        for i in range(2000):
            x += i
    cpu = time.thread_time() - c0
    wall = time.perf_counter() - w0
    return max(1.0, wall / cpu) if cpu > 0 else 1.0


class Stopwatch:
    """Wall time of a ``with`` block, and that time scaled by the machine's load.

    Attributes after the block: ``wall`` (seconds) and ``cpu`` (process CPU seconds, all
    threads). :meth:`within` checks a bound: a block within it on the clock passes at once;
    otherwise the reference loop is timed (:func:`slowdown`, once, right after the block) and
    the bound applies to ``scaled = wall / factor``, the seconds the block would have taken on
    an idle machine, near enough. ``reference=False`` keeps ``factor`` at 1 (plain wall time).

    >>> with Stopwatch(reference=False) as sw:
    ...     pass
    >>> sw.factor, sw.within(0.0)
    (1.0, False)
    """

    def __init__(self, *, reference: bool = True):
        self.reference = reference
        self.wall = self.cpu = 0.0
        self._factor: float | None = None

    def __enter__(self) -> Self:
        self._factor = None
        self._w0, self._c0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> bool:
        self.wall = time.perf_counter() - self._w0
        self.cpu = time.process_time() - self._c0
        return False

    @property
    def factor(self) -> float:
        """The machine's slowdown, timed once when first asked for (1 without ``reference``)."""
        if self._factor is None:
            self._factor = slowdown() if self.reference else 1.0
        return self._factor

    @property
    def scaled(self) -> float:
        """``wall / factor``: the block's load-scaled seconds."""
        return self.wall / self.factor

    def within(self, bound_s: float) -> bool:
        """Whether the block took at most ``bound_s`` seconds on the clock or, failing that,
        in load-scaled seconds."""
        return self.wall <= bound_s or self.scaled <= bound_s

    def __repr__(self) -> str:
        return (f"Stopwatch(wall={self.wall:.3f} s, cpu={self.cpu:.3f} s, "
                f"load x{self.factor:.2f}, scaled={self.scaled:.3f} s)")
