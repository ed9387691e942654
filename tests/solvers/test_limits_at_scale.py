"""Methods at LLM sizes: a limit no plan can be made in is refused at once in one line naming the
time the graph needs; phases that would not fit are skipped; heuristics and the judge grow
linearly towards a million ops (slow; the million itself: bench/bench_scaling.py). Bounds are
on load-scaled seconds (workbench.testing.timing)."""

from __future__ import annotations

import pytest

import workbench as wb
from workbench import samples
from workbench.budget import Budget
from workbench.errors import TimeLimitError
from workbench.solvers.list.scheduling import LIST_S_PER_OP
from workbench.solvers.pesto.heuristics import best_heuristic, expected_seconds
from workbench.testing.timing import Stopwatch

C2 = wb.Cluster.preset("2xV100-pcie").with_memory(float("inf"))


@pytest.fixture(scope="module")
def t20k():
    return samples.transformer(20_000, seed=0)


@pytest.mark.parametrize("method", ["m_sct", "os_dpos"])
def test_a_limit_shorter_than_one_list_pass_is_refused_at_once(t20k, method):
    T = 0.5 * LIST_S_PER_OP * t20k.n_ops          # half of what the list phase needs
    with Stopwatch() as sw:
        with pytest.raises(TimeLimitError) as e:
            wb.solve(t20k, C2, method=method, time_limit=T)
    msg = str(e.value)
    assert "\n" not in msg and "20,000-op" in msg and "s left of the time limit" in msg
    assert sw.within(1.0), sw


def test_os_dpos_skips_the_data_parallel_start_it_has_no_time_for(t20k):
    T = 2.0
    with Stopwatch() as sw:
        p = wb.solve(t20k, C2, method="os_dpos", time_limit=T)
    assert sw.within(1.2 * T + 1.0), sw
    assert p.info["dp_skipped"].startswith("time limit") and p.info["data_parallel"] == 1
    p.validate(C2)


def test_the_warm_start_runs_only_the_heuristics_that_fit():
    g = samples.transformer(50_000, seed=1)
    budget = Budget(0.5)
    assert all(expected_seconds(m, g.n_ops) > 0.5 for m in ("dpos", "heft", "m_topo"))
    with Stopwatch() as sw:
        plan, sched, method, tried, errors = best_heuristic(g, C2, "auto", True, 0,
                                                            budget=budget)
    # none is expected to fit: the cheapest alone gives the warm start
    assert list(tried) == [method] == ["m_topo"] and plan is not None
    assert errors["dpos"].startswith("skipped: expected 2 s")
    assert sw.within(0.5 * 1.2 + 1.0 + 2.0), sw   # m_topo and its simulation: about 1 s


GROWTH = (50_000, 200_000)
"""Sizes at which the heuristics and the judge are timed: a fifth of a million ops and a
quarter of that (the million itself: ``bench/bench_scaling.py``, docs/results-scaling.md)."""


@pytest.fixture(scope="module")
def growing():
    return [samples.transformer(n, seed=0) for n in GROWTH]


@pytest.mark.slow
@pytest.mark.parametrize("method", ["m_topo", "heft", "m_etf", "dpos", "metis",
                                    "order_place", "celeritas"])
def test_a_heuristic_and_the_judge_grow_linearly_towards_a_million_ops(growing, method):
    """Solving and judging stay within 60 s a million ops, pro rata, and their CPU time grows
    about as the graph (4x the ops: far below the 16x of a quadratic step), so the million
    bench/bench_scaling.py times is reached (9-17 s CPU a method there)."""
    wb.simulate(wb.solve(samples.transformer(200, seed=1), C2, method=method), C2)  # warm
    cpu = []
    for g in growing:
        with Stopwatch() as sw:
            p = wb.solve(g, C2, method=method)
        with Stopwatch() as sj:
            s = wb.simulate(p, C2)
        assert s.makespan > 0 and len(p.placement) == g.n_ops
        cpu.append(sw.cpu + sj.cpu)
    growth = GROWTH[-1] / GROWTH[0]
    assert cpu[1] < 2.5 * growth * cpu[0] + 0.5, f"CPU {cpu[0]:.2f} s -> {cpu[1]:.2f} s"
    pro_rata = 60.0 * GROWTH[-1] / 1_000_000  # on the clock, load-scaled, or in CPU seconds
    for t in (sw, sj):                        # (a reference loop misjudges a load that swings)
        assert t.within(pro_rata) or t.cpu <= pro_rata, (sw, sj)


def test_whole_graph_models_refuse_a_graph_beyond_their_size_in_one_line():
    from workbench.errors import NotApplicableError
    from workbench.solvers import SOLVERS
    from workbench.solvers.registry import MAX_MODEL_OPS

    capped = sorted(m for m, info in SOLVERS.items() if info.max_ops)
    assert {"dp", "dpl", "ip_contig", "ip_noncontig", "pesto_ilp", "pesto"} <= set(capped)
    g = samples.layered(MAX_MODEL_OPS + 1, seed=0)
    for m in capped:
        with Stopwatch() as sw:
            with pytest.raises(NotApplicableError) as e:
                wb.solve(g, C2, method=m, time_limit=5)
        msg = str(e.value)
        assert "\n" not in msg and f"up to {MAX_MODEL_OPS:,} ops" in msg and "100,001" in msg
        assert sw.within(1.0), (m, sw)
