"""One time budget per call (workbench.budget): shares never extend the deadline, the registry
makes the budget once and says which methods cannot be bounded by it."""

from __future__ import annotations

import inspect
import math

import pytest

import workbench as wb
from workbench.budget import SHARES, Budget
from workbench.errors import SolverError, TimeLimitError
from workbench.solvers import SOLVERS


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_shares_are_fractions_of_what_is_left_and_never_pass_the_deadline():
    clock = Clock()
    b = Budget(10.0, clock=clock)
    clock.t += 4.0  # 6 s left
    warm = b.share("pesto.warm_start")  # SHARES: 0.3 of what is left
    assert warm.limit == pytest.approx(0.3 * 6.0)
    big = b.share("greedy", seconds=100.0)
    assert big.deadline == pytest.approx(b.deadline)  # capped by the parent
    clock.t += 6.0
    assert b.over() and b.left() == 0.0 and b.seconds(floor=0.5) == 0.5
    with pytest.raises(TimeLimitError, match="time limit of 10 s"):
        b.check("the model build")
    assert set(b.report()["shares"]) == {"pesto.warm_start", "greedy"}


def test_until_ends_at_a_fraction_of_the_whole_call():
    clock = Clock()
    b = Budget(10.0, clock=clock)
    clock.t += 2.0
    polish = b.until("polish", 0.9)
    assert polish.deadline == pytest.approx(b.t0 + 9.0)


def test_the_limit_is_the_seconds_given_whatever_the_clock_reads():
    # at this clock reading t0 + 120 - t0 is 119.99999999999977 in floating point: the limit
    # (reported, and shown in doctests) must still be the 120 s asked for
    assert 1929.057 + 120.0 - 1929.057 != 120.0
    b = Budget(120.0, clock=lambda: 1929.057)
    assert b.limit == 120.0 and b.deadline == 1929.057 + 120.0


def test_unbounded_budget():
    b = Budget.of(None)
    assert b.left() == math.inf and b.seconds() is None and not b.over()
    assert b.share("pesto.ilp").seconds() is None


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "5", True])
def test_bad_limits_are_refused(bad):
    with pytest.raises(SolverError, match="time_limit"):
        Budget.of(bad)


def test_an_unknown_share_needs_a_fraction():
    with pytest.raises(SolverError, match="SHARES"):
        Budget(1.0).share("no.such.phase")
    assert all(0 < f <= 1 for f in SHARES.values())


def test_the_registry_makes_one_budget_and_records_it():
    g, c = wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie")
    heft = wb.solve(g, c, method="heft", time_limit=5)
    assert heft.stats["budget"]["bounded"] is False  # a list scheduler runs to completion
    assert heft.stats["budget"]["limit_s"] == 5.0
    dp = wb.solve(g, c, method="dp", time_limit=Budget(5.0))
    assert dp.stats["budget"]["bounded"] is True
    with pytest.raises(SolverError, match="time_limit must be > 0"):
        wb.solve(g, c, method="heft", time_limit=-1)


def test_every_method_with_a_time_limit_takes_the_one_budget():
    """Every method that takes ``time_limit`` accepts the registry's Budget (annotated
    ``float | Budget | None``), so one deadline is made per call and handed down; the others
    are one-pass heuristics that run to completion (recorded as ``bounded: False``)."""
    takes = {name: info.parameters()["time_limit"].types for name, info in SOLVERS.items()
             if "time_limit" in inspect.signature(info.func).parameters}
    assert {"pesto", "pesto_ilp", "dp", "ip_contig", "latency_ip", "local_search", "os_dpos",
            "m_sct"} <= set(takes)
    assert all("budget" in t for t in takes.values()), takes


def test_a_callers_budget_is_the_one_the_method_spends():
    g, c = wb.samples.transformer(40, seed=1), wb.Cluster.preset("2xV100-pcie")
    b = Budget(30.0, name="caller")
    plan = wb.solve(g, c, method="os_dpos", time_limit=b)
    assert plan.stats["budget"]["limit_s"] == pytest.approx(30.0)
    assert plan.stats["budget"]["bounded"] is True
