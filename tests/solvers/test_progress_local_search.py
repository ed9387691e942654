"""Quality against solver time (issue 26, part 2): local search records each improvement of its
incumbent in plan.stats["progress"], as the CP-SAT and MILP engines do."""

from __future__ import annotations

from itertools import pairwise

import pytest

import workbench as wb
from workbench.cluster import Device, Link
from workbench.solvers.pipeline.local_search import local_search
from workbench.solvers.progress import recording


@pytest.fixture(scope="module")
def problem():
    c = wb.Cluster([Device(f"gpu{i}", "gpu", 1e9) for i in range(3)], mode="host",
                   host_link=Link(0.0, 1e6))
    return wb.samples.transformer(40), c


def test_local_search_records_each_improvement(problem):
    g, c = problem
    p = wb.solve(g, c, method="local_search", seed=1, restarts=3)
    ev = p.stats["progress"]
    assert len(ev) >= 2  # the first random split, then at least one improving move
    assert {e["engine"] for e in ev} == {"local_search"}
    assert all(e["bound"] is None for e in ev)  # a heuristic proves no bound
    s = [e["s"] for e in ev]
    assert s == sorted(s) and s[-1] <= p.stats["solve_s"]
    objs = [e["objective"] for e in ev]
    assert all(b < a for a, b in pairwise(objs))  # each event strictly improves the incumbent
    # the last incumbent is the returned plan's search max load
    assert objs[-1] == pytest.approx(p.stats["search_max_load_ms"], rel=1e-9)
    assert objs[-1] == pytest.approx(p.predicted["max_load_ms"], rel=1e-6)


def test_local_search_progress_counts_moves_across_restarts(problem):
    """Improvements inside later restarts are recorded only when they beat every earlier state,
    and a single-restart run's trace is its own descent, one event per improving move."""
    g, c = problem
    with recording() as tr:
        p = local_search(g, c, seed=1, restarts=1)
    assert len(tr.events) == p.stats["moves"] + 1
    with recording() as tr3:
        local_search(g, c, seed=1, restarts=3)
    assert len(tr3.events) >= len(tr.events)
    assert tr3.events[len(tr.events) - 1]["objective"] == tr.events[-1]["objective"]


def test_local_search_outside_a_recording_has_no_progress(problem):
    g, c = problem
    assert "progress" not in local_search(g, c, seed=1, restarts=1).stats


def test_local_search_under_a_time_limit_keeps_its_trace(problem):
    g, c = problem
    p = wb.solve(g, c, method="local_search", seed=2, restarts=2, time_limit=1e-9)
    ev = p.stats["progress"]
    assert p.status == "time_limit" and ev  # the first random split is an incumbent
    assert ev[-1]["objective"] == pytest.approx(p.stats["search_max_load_ms"])
