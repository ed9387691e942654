"""workbench.testing.timing: wall-clock bounds scaled by the machine's load (issue 41)."""

from __future__ import annotations

import threading
import time

import pytest

from workbench.testing import timing
from workbench.testing.timing import Stopwatch, slowdown


def test_slowdown_sees_a_thread_that_competes_for_the_interpreter():
    """Two busy Python threads leave the reference loop about a third of the interpreter:
    its slowdown rises to about 3 (more on a loaded machine, never less than about 2)."""
    stop = threading.Event()

    def spin():
        x = 0
        while not stop.is_set():
            x += 1

    threads = [threading.Thread(target=spin, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        busy = slowdown(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert busy >= 1.8, busy


@pytest.mark.parametrize("factor,inside", [(1.0, False), (100.0, True)])
def test_a_bound_missed_on_the_clock_is_judged_on_load_scaled_seconds(monkeypatch, factor,
                                                                       inside):
    calls = []
    monkeypatch.setattr(timing, "slowdown", lambda *a: calls.append(1) or factor)
    with Stopwatch() as sw:
        time.sleep(0.2)
    assert not calls  # nothing timed until a bound is missed
    assert sw.within(0.1) is inside
    assert sw.factor == factor and sw.scaled == pytest.approx(sw.wall / factor)
    assert len(calls) == 1  # timed once


def test_a_bound_met_on_the_clock_needs_no_reference(monkeypatch):
    monkeypatch.setattr(timing, "slowdown", lambda *a: pytest.fail("timed for nothing"))
    with Stopwatch() as sw:
        pass
    assert sw.within(1.0)


def test_slowdown_refuses_a_nonpositive_duration():
    with pytest.raises(ValueError, match="cpu_s must be positive"):
        slowdown(0)
