"""One time budget per call: a wall-clock deadline, split into named shares.

``workbench.solve(..., time_limit=60)`` makes one :class:`Budget` and hands it down: a method
that runs longer than a list scheduler takes ``time_limit`` as seconds *or* as a Budget
(:meth:`Budget.of` accepts both), gives each phase a named share (:meth:`Budget.share`: a
warm start, the model build, the solve, a polish), asks :meth:`Budget.left` before long steps,
and passes what is left to CP-SAT or HiGHS in seconds (:meth:`Budget.seconds`). Every share is
recorded, so ``plan.stats["budget"]`` says where the time went. The fractions the methods use
are in one table, :data:`SHARES`.

Rules
-----
* The deadline is fixed when the budget is made; shares never extend it (a share of 0.3 gets
  30 % of what is *left*, capped by the parent's deadline).
* ``Budget(None)`` is unbounded: ``left()`` is ``inf``, ``seconds()`` is ``None``, ``over()``
  never true.
* The problem a method builds must not depend on its budget unless the method documents why
  (the Pesto CP-SAT extension sizes its coarse problem by the budget: documented there).

Examples
--------
>>> b = Budget(10.0)
>>> b.left() <= 10.0, b.over()
(True, False)
>>> warm = b.share("warm_start", 0.3)
>>> warm.left() <= 3.0 + 1e-6
True
>>> sorted(b.report()["shares"])
['warm_start']
>>> Budget.of(b) is b, Budget.of(None).seconds() is None
(True, True)
>>> Budget.of(-1)
Traceback (most recent call last):
...
workbench.errors.SolverError: time_limit must be a positive number of seconds or None, got -1
>>> Budget(float("nan"))
Traceback (most recent call last):
...
workbench.errors.SolverError: time_limit must be a positive number of seconds or None, got nan
"""

from __future__ import annotations

import math
import time
from typing import Callable

from .errors import SolverError, TimeLimitError

__all__ = ["Budget", "SHARES"]

SHARES: dict[str, float] = {
    # solve(memory_model="live"): the first solve's share; re-solves share the rest
    "solve.live_first": 0.5,
    # Pesto's paper pipeline (workbench.solvers.pesto.ilp)
    "pesto.warm_start": 0.3,       # heuristic warm starts on the whole graph
    "pesto.coarsen": 0.2,          # Theorem 3.5 coarsening (its guards dropped after)
    "pesto.coarsen_stop": 0.35,    # no coarsening round past this fraction of the whole
    "pesto.ilp": 0.8,              # the ILP on the coarse graph (of what is left)
    "pesto.polish": 0.9,           # deadline of the final heuristic polish (fraction of the whole)
    "pesto.build_margin": 0.1,     # stop building the ILP this much before the deadline
    # Pesto's CP-SAT engine (extension, workbench.solvers.pesto.cpsat_engine)
    "cpsat.warm_start": 0.3,
    "cpsat.coarse_start": 0.4,
    "cpsat.final_margin": 0.15,    # kept for the last improvement pass (at most 5 s)
    "cpsat.first_solve": 0.5,      # coarsened: first solve of the whole coarse problem
    "cpsat.window_round": 0.25,    # one window round (at least 2 s) of what the rounds have left
    "cpsat.build": 0.6,            # solve_cpsat builds its model within this share of its budget
    # Baechi's m-SCT: its favourite-children LP (workbench.solvers.list.scheduling)
    "m_sct.lp": 0.5,
    # Tarnawski et al.'s IPs: the DP warm starts (workbench.solvers.pipeline.ip)
    "pipeline.dpl_warm": 0.2,
    "pipeline.dp_warm": 0.25,
    "pipeline.dp_gpipe_warm": 0.25,     # objective="gpipe": the GPipe DP first
    "pipeline.dp_hier_warm": 0.25,      # hierarchical=True: the hierarchical DP first
    "pipeline.build": 0.6,         # the max-load MILP is built by this fraction of the whole
    "pipeline.after_build": 0.5,   # PuLP's hand-over and the reading back, per second of build
    # the latency IP's DP warm starts (workbench.solvers.pipeline.latency)
    "latency_ip.dpl_warm": 0.1,
    "latency_ip.dp_warm": 0.1,
}
"""Every fraction of a budget a method hands to a phase, by ``"<method>.<phase>"``: one table
instead of constants scattered over the solvers."""


def _check_seconds(seconds) -> float:
    """``seconds`` if it is a finite positive number (not a bool), else a SolverError.

    >>> _check_seconds(float("nan"))
    Traceback (most recent call last):
    ...
    workbench.errors.SolverError: time_limit must be a positive number of seconds or None, got nan
    """
    if (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
            or not math.isfinite(seconds) or seconds <= 0):
        raise SolverError(f"time_limit must be a positive number of seconds or None, "
                          f"got {seconds!r}")
    return float(seconds)


class Budget:
    """A wall-clock deadline (``time.perf_counter`` seconds) with named shares.

    Parameters
    ----------
    seconds : float or None
        The limit from now; None for no limit.
    name : str
        What the budget is for (shown in errors and in :meth:`report`).
    clock : callable
        Seconds as a float (tests pass a fake clock).
    """

    def __init__(self, seconds: float | None = None, *, name: str = "call",
                 clock: Callable[[], float] = time.perf_counter, _deadline: float | None = None):
        if _deadline is None and seconds is not None:
            _check_seconds(seconds)
        self.name = name
        self.clock = clock
        self.t0 = clock()
        if _deadline is not None:
            self.deadline: float | None = _deadline
        else:
            self.deadline = None if seconds is None else self.t0 + float(seconds)
        # the limit as given: ``t0 + seconds - t0`` is not ``seconds`` in floating point once
        # the clock is large (120 s came out as 119.99999999999955 after a long uptime)
        if self.deadline is None:
            self.limit = None
        elif _deadline is None:
            self.limit = float(seconds)
        else:
            self.limit = self.deadline - self.t0
        self.shares: dict[str, Budget] = {}

    # ------------------------------------------------------------------ making one
    @classmethod
    def of(cls, time_limit, *, name: str = "call") -> "Budget":
        """``time_limit`` as a Budget: a Budget is returned as is (so a deadline made once
        stays one deadline), seconds start a new one, None is unbounded."""
        if isinstance(time_limit, Budget):
            return time_limit
        if time_limit is None:
            return cls(None, name=name)
        return cls(_check_seconds(time_limit), name=name)

    def share(self, name: str, fraction: float | None = None, *,
              seconds: float | None = None) -> "Budget":
        """A sub-budget named ``name``: ``fraction`` of what is left now (``SHARES[name]``
        when neither is given), or ``seconds``; never past this budget's deadline."""
        if fraction is None and seconds is None:
            if name not in SHARES:
                raise SolverError(f"budget share {name!r} has no fraction: give one or add it "
                                  f"to workbench.budget.SHARES")
            fraction = SHARES[name]
        for key, v in (("fraction", fraction), ("seconds", seconds)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                                  or not math.isfinite(v) or v < 0
                                  or (key == "fraction" and v > 1)):
                raise SolverError(f"budget share {name!r}: {key} must be "
                                  f"{'in [0, 1]' if key == 'fraction' else 'seconds >= 0'}, "
                                  f"got {v!r}")
        now = self.clock()
        if self.deadline is None:
            dl = None if seconds is None else now + seconds
        else:
            left = max(0.0, self.deadline - now)
            want = left * fraction if seconds is None else seconds
            dl = now + min(left, max(0.0, want))
        sub = Budget(name=name, clock=self.clock, _deadline=dl)
        sub.t0 = now
        sub.limit = None if dl is None else dl - now
        self.shares[name] = sub
        return sub

    def until(self, name: str, fraction: float) -> "Budget":
        """A sub-budget ending at ``fraction`` of the *whole* budget from its start (a phase
        that must end by, e.g., 90 % of the call); no time (0 s) once that point has passed."""
        if self.deadline is None:
            return self.share(name, seconds=None, fraction=1.0)
        return self.share(name, seconds=max(0.0, self.t0 + fraction * self.limit
                                            - self.clock()))

    # ------------------------------------------------------------------ asking it
    def left(self) -> float:
        """Seconds left (``inf`` when unbounded, never below 0)."""
        if self.deadline is None:
            return math.inf
        return max(0.0, self.deadline - self.clock())

    def elapsed(self) -> float:
        """Seconds since the budget was made."""
        return self.clock() - self.t0

    def over(self) -> bool:
        """True once the deadline is past."""
        return self.deadline is not None and self.clock() >= self.deadline

    def seconds(self, *, floor: float = 0.0) -> float | None:
        """What is left as a solver's time limit in seconds (None when unbounded), at least
        ``floor`` (a solver given 0 s may refuse to start)."""
        if self.deadline is None:
            return None
        return max(floor, self.left())

    def check(self, what: str = "") -> None:
        """Raise :class:`~workbench.errors.TimeLimitError` once the deadline is past."""
        if self.over():
            raise TimeLimitError(f"{self.name}: time limit of {self.limit:.3g} s reached"
                                 + (f" ({what})" if what else ""))

    def report(self) -> dict:
        """Limit, time used and the shares (recursively), for ``plan.stats["budget"]``."""
        return {"limit_s": self.limit, "used_s": self.elapsed(),
                "shares": {k: v.report() for k, v in self.shares.items()}}

    def __repr__(self) -> str:
        lim = "unbounded" if self.limit is None else f"{self.limit:.3g} s"
        return f"Budget({self.name!r}, {lim}, {self.left():.3g} s left)"
