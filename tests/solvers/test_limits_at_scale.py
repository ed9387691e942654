"""Methods at LLM sizes: a limit no plan can be made in is refused at once in one line naming the
time the graph needs; phases that would not fit are skipped; heuristics and the judge reach a
million ops (slow). Bounds are on load-scaled seconds (workbench.testing.timing)."""

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


@pytest.fixture(scope="module")
def million():
    return samples.transformer(1_000_000, seed=0)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["m_topo", "heft", "m_etf", "dpos", "metis",
                                    "order_place", "celeritas"])
def test_a_heuristic_and_the_judge_on_a_million_ops(million, method):
    # measured at load 12-14 (CPU): bench/bench_scaling.py, docs/results-scaling.md
    with Stopwatch() as sw:
        p = wb.solve(million, C2, method=method)
    assert sw.within(60.0), sw
    with Stopwatch() as sj:
        s = wb.simulate(p, C2)
    assert sj.within(60.0), sj
    assert s.makespan > 0 and len(p.placement) == 1_000_000


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
