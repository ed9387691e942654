"""One way to solve every MILP of the workbench: PuLP models, HiGHS (through highspy) by
default, CBC as the fallback, with a time limit, a warm start, and the *true* outcome.

PuLP maps a HiGHS time limit with an incumbent to "Optimal"; :func:`solve_milp` reads HiGHS's own
model status, objective, dual bound and MIP gap instead, so a plan can say ``time_limit`` and
show its gap.

Examples
--------
>>> import pulp
>>> from workbench.solvers.milp import solve_milp
>>> prob = pulp.LpProblem("knap", pulp.LpMaximize)
>>> x = [pulp.LpVariable(f"x{i}", cat="Binary") for i in range(4)]
>>> prob += pulp.lpSum(v * x[i] for i, v in enumerate([5, 4, 3, 2]))
>>> prob += pulp.lpSum(w * x[i] for i, w in enumerate([4, 3, 2, 1])) <= 6, "capacity"
>>> r = solve_milp(prob, time_limit=10, warm_start={x[0]: 1, x[1]: 0, x[2]: 1, x[3]: 0})
>>> r.status, r.objective, [r.value(v) for v in x]
('optimal', 9.0, [0.0, 1.0, 1.0, 1.0])
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from .._lazy import lazy_module
from ..errors import SolverError

pulp = lazy_module("pulp")  # loaded at the first model, not at ``import workbench``

__all__ = ["solve_milp", "MilpResult", "available_solvers", "new_highs", "HIGHS_S_PER_NZ",
           "highs_not_started"]

MILP_STATUSES = ("optimal", "feasible", "time_limit", "interrupted", "infeasible", "unbounded",
                 "error")


@dataclass
class MilpResult:
    """Outcome of :func:`solve_milp`.

    ``status``: ``optimal`` (proved within the requested gap, 0 by default), ``feasible``
    (stopped with an incumbent for another reason: gap target, iteration limit), ``time_limit``
    (time ran out; an incumbent exists iff ``has_solution``), ``interrupted`` (Ctrl-C stopped
    the solver; the incumbent is kept), ``infeasible``, ``unbounded``,
    ``error``. ``objective`` is the incumbent's value, ``bound`` the proven dual bound, ``gap``
    the relative MIP gap (0 when optimal).
    """

    status: str
    objective: float = math.nan
    bound: float = math.nan
    gap: float = math.nan
    seconds: float = 0.0
    solver: str = ""
    message: str = ""
    has_solution: bool = False
    values: dict = field(default_factory=dict, repr=False)
    stale_values: bool = False  # HiGHS's objective disagrees with the values it handed back

    def value(self, var) -> float:
        """Value of ``var`` in the incumbent (NaN when there is none)."""
        v = self.values.get(var.name) if self.has_solution else None
        return math.nan if v is None else float(v) + 0.0


_BANNER_DONE = False


def new_highs():
    """A ``highspy.Highs`` with its log off. HiGHS prints a banner to the process's standard
    output (from C, past Python's ``sys.stdout``) when the first instance of a process is
    created, before any option can be set; solvers must not print, so that first instance is
    created with file descriptor 1 pointed at /dev/null."""
    global _BANNER_DONE
    import highspy

    if not _BANNER_DONE:
        import os
        import sys

        sys.stdout.flush()
        saved = os.dup(1)
        try:
            with open(os.devnull, "wb") as null:
                os.dup2(null.fileno(), 1)
                h = highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        _BANNER_DONE = True
    else:
        h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    return h


def available_solvers() -> list[str]:
    """Backends that can run here, in order of preference."""
    out = []
    try:
        import highspy  # noqa: F401

        out.append("highs")
    except ImportError:
        pass
    try:
        if pulp.PULP_CBC_CMD(msg=False).available():
            out.append("cbc")
    except Exception:  # pragma: no cover - depends on the install
        pass
    return out


class _WarmStart:
    """PuLP's highspy interface plus a warm start (HiGHS ``setSolution``); mixed into
    ``pulp.HiGHS`` by :func:`_warm_highs` (PuLP is loaded when a model is solved, not at
    ``import workbench``)."""

    def __init__(self, warm: dict | None = None, scale: float = 1.0,
                 deadline: float | None = None, **kw):
        super().__init__(**kw)
        self._deadline = deadline    # when HiGHS must have stopped (the reading kept after it)
        self._warm = warm or {}
        self._scale = scale
        self.interrupted = False
        self.watchdog = False

    def callSolver(self, lp):  # noqa: N802 - PuLP's name
        if self._deadline is not None:
            # PuLP's hand-over of a large model to HiGHS takes seconds: HiGHS gets what is
            # left of the limit after it, not the whole limit again
            self.timeLimit = max(0.01, self._deadline - time.perf_counter())
            if "time_limit" not in self.optionsDict:      # (an explicit option stays HiGHS's)
                lp.solverModel.setOptionValue("time_limit", float(self.timeLimit))
        if self._warm:
            import highspy

            cols = lp.variables()
            sol = highspy.HighsSolution()
            vals = [0.0] * len(cols)
            for var in cols:
                v = self._warm.get(var.name)
                if v is None:
                    v = var.lowBound if var.lowBound is not None else 0.0
                vals[var.index] = float(v)
            sol.col_value = vals
            sol.value_valid = True
            lp.solverModel.setSolution(sol)
        sense = (-1.0 if lp.sense == pulp.LpMaximize else 1.0) * self._scale
        rec = _trace_progress(lp.solverModel, sense)
        self.interrupted, self.watchdog = _run_interruptible(lp.solverModel, self.timeLimit)
        if rec is not None:  # the final incumbent and bound
            info = lp.solverModel.getInfo()
            has = int(getattr(info, "primal_solution_status", 0)) == 2
            rec(sense * float(info.objective_function_value) if has else math.nan,
                sense * float(getattr(info, "mip_dual_bound", math.nan)))


_WARM_HIGHS: list = []


def _warm_highs(**kw):
    """A HiGHS solver object of PuLP with :class:`_WarmStart`'s warm start."""
    if not _WARM_HIGHS:
        _WARM_HIGHS.append(type("_WarmHiGHS", (_WarmStart, pulp.HiGHS), {}))
    return _WARM_HIGHS[0](**kw)


def _trace_progress(h, sense: float):
    """Incumbent and dual bound as HiGHS improves them, to the progress recording of the method
    being solved (:mod:`workbench.solvers.progress`; nothing outside one). Returns the
    recorder (None outside a recording)."""
    from .progress import new_call

    rec = new_call("highs")
    if rec is None:
        return None

    def on(e):
        d = e.data_out
        rec(sense * float(d.mip_primal_bound), sense * float(d.mip_dual_bound))

    h.cbMipImprovingSolution.subscribe(on)
    h.cbMipInterrupt.subscribe(on)
    return rec


def _run_interruptible(h, time_limit: float | None = None) -> tuple[bool, bool]:
    """Run HiGHS in its own thread so that Ctrl-C (KeyboardInterrupt) cancels the solve through
    HiGHS's interrupt callback and the incumbent survives. A watchdog cancels the solve the same
    way when it runs past ``time_limit`` (+5 % and 0.2 s): HiGHS checks its own limit only
    between steps, and a badly conditioned node LP has been seen to run for minutes past it.
    Returns ``(interrupted by Ctrl-C, stopped by the watchdog)``."""
    import time

    h.HandleUserInterrupt = True
    interrupted = watchdog = False
    limit = None if time_limit is None else 1.05 * float(time_limit) + 0.2
    t0 = time.perf_counter()
    thread = h.startSolve()
    while True:
        try:
            done, _st = h.wait(0.1)
            if done:
                break
            if limit is not None and not watchdog and time.perf_counter() - t0 > limit:
                watchdog = True
                h.cancelSolve()
        except KeyboardInterrupt:
            interrupted = True
            h.cancelSolve()
    thread.join()
    return interrupted, watchdog


HIGHS_S_PER_NZ = 150e-6
"""Seconds per nonzero of HiGHS's MIP set-up after presolve, which neither its time limit nor
an interrupt stops: 32-44 s wall for the 428,584 nonzeros of ``ip_contig`` on
``transformer(10000)`` (HiGHS 1.16, load 4-6, with or without warm start, symmetry detection
or presolve probing; with a time limit of 5 s the call took 8 s, of 9 s 36-45 s), and a whole
call with T = 60 s 94.7 s at load 6 with HiGHS started 35 s before the end; Pesto's coarse
ILP at ``target=200`` (353,581 rows) ran 107.5 and 139.7 s given about 25 s.
``ip_contig``, ``ip_noncontig``, ``pesto`` and ``pesto_ilp`` do not start HiGHS with less
time left than this (:func:`highs_not_started`; the warm start is then the answer)."""


def highs_not_started(prob, left: float | None, after: float = 0.0) -> str | None:
    """Why HiGHS should not be started on ``prob`` with ``left`` seconds of the limit left, or
    None when its uninterruptible set-up (:data:`HIGHS_S_PER_NZ` a nonzero) plus ``after``
    seconds (the caller's own reading back) fits (always when ``left`` is None: no limit).

    >>> import pulp
    >>> prob = pulp.LpProblem("p", pulp.LpMinimize)
    >>> x = [pulp.LpVariable(f"x{i}", cat="Binary") for i in range(3)]
    >>> prob += pulp.lpSum(x)
    >>> prob += pulp.lpSum(x) >= 1, "one"
    >>> highs_not_started(prob, 10.0) is None, highs_not_started(prob, None) is None
    (True, True)
    >>> highs_not_started(prob, 1e-4)
    "HiGHS not started: the MILP's 3 nonzeros take about 0.00045 s of set-up that HiGHS does not interrupt, more than the 0.0001 s left of the limit"
    """
    if left is None:
        return None
    nz = sum(len(row) for row in prob.constraints.values())
    setup = nz * HIGHS_S_PER_NZ
    if left >= after + setup:
        return None
    return (f"HiGHS not started: the MILP's {nz:,} nonzeros take about {setup:.3g} s of "
            f"set-up that HiGHS does not interrupt, more than the {left:.3g} s left of the "
            f"limit")


def solve_milp(prob: pulp.LpProblem, *, time_limit: float | None = None,
               gap: float | None = None, warm_start: dict | None = None, solver: str = "highs",
               threads: int | None = None, msg: bool = False,
               options: dict | None = None, progress_scale: float = 1.0,
               reserve: float = 0.0) -> MilpResult:
    """Solve ``prob`` and report what really happened.

    Parameters
    ----------
    prob : pulp.LpProblem
    time_limit : float, optional
        Seconds.
    gap : float, optional
        Relative MIP gap at which to stop (e.g. 0.01). Status is ``optimal`` when the final gap
        is within it.
    warm_start : dict, optional
        ``{LpVariable: value}`` of a known feasible solution (missing variables start at their
        lower bound).
    solver : {"highs", "cbc"}
        Preferred backend; falls back to the other when it is not installed.
    options : dict, optional
        HiGHS options by name (e.g. ``{"mip_heuristic_effort": 0.3}``); ignored by CBC.
    progress_scale : float
        The objective's unit in ms (a model written in units of a reference time): incumbents
        and bounds go to the progress recording (:mod:`workbench.solvers.progress`) times this,
        so every method's progress is in ms. The result's own figures stay in model units.
    reserve : float
        Seconds of ``time_limit`` kept for reading the answer back (PuLP's hand-over of the
        model counts against the limit too): HiGHS stops that much before the limit, and the
        second solve below is not begun with less than twice that left. A caller that must end
        within the limit passes its estimate (for a large model, seconds).

    Raises
    ------
    SolverError
        When neither HiGHS (``pip install highspy``) nor CBC is available, or on an unknown solver.
    """
    if solver not in ("highs", "cbc"):
        raise SolverError(f"unknown MILP solver {solver!r}; use 'highs' or 'cbc'")
    avail = available_solvers()
    if not avail:
        raise SolverError("no MILP solver is installed: pip install highspy (HiGHS) or "
                          "install CBC (pulp's bundled cbc binary)")
    backend = solver if solver in avail else avail[0]
    warm = {v.name: float(x) for v, x in (warm_start or {}).items()}
    t0 = time.perf_counter()
    reserve = max(0.0, float(reserve))
    if backend == "highs":
        res = _solve_highs(prob, time_limit, gap, warm, threads, msg, options, progress_scale,
                           reserve)
        late = time_limit is not None and \
            time_limit - (time.perf_counter() - t0) < 2 * reserve + 0.05
        if warm and res.stale_values and not late:
            # HiGHS 1.16 can finish (e.g. solved in presolve) with a better objective than the
            # warm start's while getSolution() still returns the warm start's values: solve
            # again without it, in the time that is left
            left = (None if time_limit is None
                    else max(0.05, time_limit - (time.perf_counter() - t0)))
            res = _solve_highs(prob, left, gap, {}, threads, msg, options, progress_scale,
                               reserve)
            res.message += " (solved again without the warm start, whose values HiGHS returned)"
    else:
        res = _solve_cbc(prob, time_limit, gap, warm, threads, msg)
    res.seconds = time.perf_counter() - t0
    res.solver = backend
    return res


def _solve_highs(prob, time_limit, gap, warm, threads, msg, options=None,
                 scale: float = 1.0, reserve: float = 0.0) -> MilpResult:
    deadline = None if time_limit is None else \
        time.perf_counter() + max(0.01, float(time_limit) - reserve)
    new_highs()  # PuLP creates its own Highs: absorb the process's banner first
    import highspy

    s = _warm_highs(warm=warm, scale=scale, msg=msg, timeLimit=time_limit, gapRel=gap,
                    threads=threads, deadline=deadline, **(options or {}))
    try:
        prob.solve(s)
    except pulp.PulpSolverError as e:
        return MilpResult("error", message=str(e))
    except (IndexError, ValueError, OverflowError) as e:  # PuLP's HiGHS glue on a bad model
        return MilpResult("error", message=f"HiGHS could not solve model {prob.name!r} "
                                           f"(badly scaled coefficients?): {e}")
    h = prob.solverModel
    st = h.getModelStatus()
    info = h.getInfo()
    M = highspy.HighsModelStatus
    has_sol = int(getattr(info, "primal_solution_status", 0)) == 2
    sense = -1.0 if prob.sense == pulp.LpMaximize else 1.0  # PuLP hands HiGHS a minimisation
    obj = float(pulp.value(prob.objective) or 0.0) if has_sol else math.nan
    bound = sense * float(getattr(info, "mip_dual_bound", math.nan))
    mip_gap = float(getattr(info, "mip_gap", math.nan))
    cols = prob.variables()   # (PuLP sorts them on every call: once)
    is_mip = any(v.cat == pulp.LpInteger for v in cols)
    if not is_mip:
        bound = obj if st == M.kOptimal else bound
        mip_gap = 0.0 if st == M.kOptimal else mip_gap
    if st == M.kOptimal:
        tol = gap if gap is not None else 1e-4
        status = "optimal" if (not is_mip or not (mip_gap > tol)) else "feasible"
        if math.isnan(mip_gap) or mip_gap < 0:
            mip_gap = 0.0
    elif st == M.kTimeLimit:
        status = "time_limit"
    elif st == M.kInterrupt and getattr(s, "interrupted", False):
        status = "interrupted"
    elif st == M.kInterrupt and getattr(s, "watchdog", False):
        status = "time_limit"
    elif st == M.kInfeasible:
        status = "infeasible"
    elif st in (M.kUnbounded, M.kUnboundedOrInfeasible):
        status = "unbounded"
    elif st in (M.kIterationLimit, M.kInterrupt, M.kObjectiveBound, M.kObjectiveTarget,
                M.kSolutionLimit) and has_sol:
        status = "feasible"
    else:
        status = "error"
    values = {v.name: v.varValue for v in cols} if has_sol else {}
    if mip_gap > 1e20:
        mip_gap = math.inf
    hobj = sense * float(getattr(info, "objective_function_value", math.nan))
    stale = bool(has_sol and math.isfinite(hobj) and math.isfinite(obj)
                 and abs(obj - hobj) > 1e-7 * max(1.0, abs(obj), abs(hobj)))
    return MilpResult(status, obj, bound, mip_gap if has_sol else math.nan,
                      message=h.modelStatusToString(st), has_solution=has_sol, values=values,
                      stale_values=stale)


def _solve_cbc(prob, time_limit, gap, warm, threads, msg) -> MilpResult:
    if warm:
        for v in prob.variables():
            if v.name in warm:
                v.setInitialValue(warm[v.name])
    s = pulp.PULP_CBC_CMD(msg=msg, timeLimit=time_limit, gapRel=gap, threads=threads,
                          warmStart=bool(warm))
    try:
        prob.solve(s)
    except pulp.PulpSolverError as e:
        return MilpResult("error", message=str(e))
    st, sol = prob.status, prob.sol_status
    has_sol = sol in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
    obj = float(pulp.value(prob.objective)) if has_sol and prob.objective is not None else math.nan
    if sol == pulp.LpSolutionOptimal:
        status = "optimal"
    elif sol == pulp.LpSolutionIntegerFeasible:
        status = "time_limit" if time_limit else "feasible"
    elif st == pulp.LpStatusInfeasible:
        status = "infeasible"
    elif st == pulp.LpStatusUnbounded:
        status = "unbounded"
    else:
        status = "time_limit" if time_limit else "error"
    values = {v.name: v.varValue for v in prob.variables()} if has_sol else {}
    return MilpResult(status, obj, obj if status == "optimal" else math.nan,
                      0.0 if status == "optimal" else math.nan,
                      message=pulp.LpStatus[st], has_solution=has_sol, values=values)
