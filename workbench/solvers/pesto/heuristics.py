"""What both Pesto engines share: the warm-start heuristics, the fastest simulated order of a
placement, the memory checks and the default sizes (:mod:`.ilp`, the paper's MILP pipeline, and
:mod:`.cpsat_engine`, the CP-SAT extension, import it; it imports neither).

Examples
--------
>>> from workbench import samples, Cluster
>>> from workbench.budget import Budget
>>> g, c = samples.pesto_fig2(), Cluster.preset("2xV100-pcie")
>>> plan, sched, method, tried, errors = best_heuristic(g, c, ["heft", "round_robin"], True,
...                                                     0, budget=Budget(10))
>>> method in tried, plan.status, respects(plan, c)
(True, 'heuristic', True)
>>> best_order(plan, c, True, reorder=False)[2]
'model'
"""

from __future__ import annotations

import inspect

from ...budget import Budget
from ...errors import InfeasibleError, SolverError, WorkbenchError
from ...plan import Plan
from ..common import order_by_start
from ..registry import SOLVERS

__all__ = ["DEFAULT_TIME_LIMIT", "EXPECTED_S_PER_OP", "WARM_START_METHODS", "best_heuristic",
           "best_order", "budget_of", "budget_report", "candidates", "check_memory",
           "default_target", "expected_seconds", "respects"]

WARM_START_METHODS = ("dpos", "heft", "m_etf", "m_sct", "m_topo", "order_place",
                      "celeritas_portfolio", "round_robin", "single")
"""Heuristics tried for the warm start, when registered; the best simulated one is used
(Celeritas with its extensions: the plan of the paper's rule is one of its candidates)."""

EXPECTED_S_PER_OP = {"single": 1.5e-5, "round_robin": 2e-5, "m_topo": 1.5e-5, "heft": 4e-5,
                     "dpos": 4e-5, "m_etf": 4e-5, "order_place": 5e-5, "m_sct": 8e-5,
                     "celeritas_portfolio": 1e-4}
"""Seconds per op a warm-start heuristic is expected to take with the judge's simulation of its
plan (CPU seconds measured at 100,000 and 1,000,000 ops, docs/results-scaling.md, with
margin; 1e-4 for a method not listed). Under a time limit :func:`best_heuristic` starts only
heuristics expected to fit in what is left (the cheapest one alone when none does)."""

DEFAULT_TIME_LIMIT = 120.0
"""Seconds a Pesto method runs when it is given no ``time_limit``."""


def budget_of(time_limit, name: str) -> Budget:
    """``time_limit`` (seconds or a :class:`~workbench.budget.Budget`) as the Budget of a Pesto
    method: None, or an unbounded Budget (``solve(..., time_limit=None)``), gets
    :data:`DEFAULT_TIME_LIMIT` seconds, as Pesto always did; a bounded Budget is used as is.

    >>> budget_of(None, "pesto").limit, budget_of(Budget(None), "pesto").limit
    (120.0, 120.0)
    >>> b = Budget(5.0)
    >>> budget_of(b, "pesto") is b
    True
    """
    if time_limit is None or (isinstance(time_limit, Budget) and time_limit.deadline is None):
        return Budget(DEFAULT_TIME_LIMIT, name=name)
    return Budget.of(time_limit, name=name)


def budget_report(budget: Budget) -> dict:
    """``plan.stats["budget"]`` of a Pesto method: the budget's report (limit, time used, the
    shares) and ``bounded: True``, in the form the registry records for every method.

    >>> sorted(budget_report(Budget(5.0)))
    ['bounded', 'limit_s', 'shares', 'used_s']
    """
    return {**budget.report(), "bounded": True}


def default_target(cluster) -> int:
    """Default coarse size for ``pesto``: ``min(60, max(16, 240 // k))`` for ``k`` devices (the ILP
    grows with the square of the vertices times the devices).

    >>> from workbench import Cluster
    >>> [default_target(Cluster.preset(p)) for p in ("2xV100-pcie", "4xV100-nvlink", "8xA100-nvlink")]
    [60, 60, 30]
    """
    return int(min(60, max(16, 240 // max(1, len(cluster)))))


def check_memory(graph, cluster) -> None:
    """InfeasibleError with the shortfall when memory or a colocation group cannot fit.

    >>> from workbench import samples, Cluster
    >>> c = Cluster.preset("2xV100-pcie").with_memory(1e6)
    >>> check_memory(samples.lstm_grid(20, layers=2), c)
    Traceback (most recent call last):
    ...
    workbench.errors.InfeasibleError: graph 'lstm20' needs 0.093 GiB but the devices of cluster '2xV100-pcie' hold 0.002 GiB in all (short by 0.091 GiB)
    """
    gc = graph.c
    need = float(gc.memory.sum())
    cap = cluster.total_memory()
    if need > cap * (1 + 1e-12):
        raise InfeasibleError(
            f"graph {graph.name!r} needs {need / 2**30:.3f} GiB but the devices of cluster "
            f"{cluster.name!r} hold {cap / 2**30:.3f} GiB in all (short by "
            f"{(need - cap) / 2**30:.3f} GiB)")
    biggest = max(d.memory for d in cluster.devices)
    for grp, members in graph.colocation_groups.items():
        m = float(sum(gc.memory[graph.index[v]] for v in members))
        if m > biggest * (1 + 1e-12):
            raise InfeasibleError(
                f"colocation group {grp!r} ({len(members)} ops, e.g. {members[0]!r}) needs "
                f"{m / 2**30:.3f} GiB but the largest device holds {biggest / 2**30:.3f} GiB "
                f"(short by {(m - biggest) / 2**30:.3f} GiB)")
    for i in range(gc.n):
        if gc.memory[i] > biggest * (1 + 1e-12):
            raise InfeasibleError(
                f"op {gc.names[i]!r} needs {gc.memory[i] / 2**30:.3f} GiB but the largest device "
                f"holds {biggest / 2**30:.3f} GiB (short by "
                f"{(gc.memory[i] - biggest) / 2**30:.3f} GiB)")


def respects(plan: Plan, cluster) -> bool:
    """Memory within capacity and colocation groups whole."""
    g = plan.graph
    used = {d.name: 0.0 for d in cluster.devices}
    mem = g.c.memory.tolist()
    for v, i in g.index.items():
        used[plan.placement[v]] += mem[i]
    if any(used[d.name] > d.memory * (1 + 1e-9) for d in cluster.devices):
        return False
    return all(len({plan.placement[v] for v in ms}) == 1
               for ms in g.colocation_groups.values())


def candidates(warm_start) -> list[str]:
    """The heuristics ``warm_start`` names: ``"auto"``/None = every registered one of
    :data:`WARM_START_METHODS`, a method name, or a list of names.

    >>> candidates("heft"), candidates(["heft", "dpos"])
    (['heft'], ['heft', 'dpos'])
    """
    if warm_start is None or warm_start == "auto":
        return [m for m in WARM_START_METHODS if m in SOLVERS]
    if isinstance(warm_start, str):
        if warm_start not in SOLVERS:
            raise SolverError(f"warm_start method {warm_start!r} is not registered; valid: "
                              f"'auto', {', '.join(SOLVERS)}")
        return [warm_start]
    return [str(m) for m in warm_start]


def expected_seconds(method: str, n_ops: int) -> float:
    """Seconds ``method`` is expected to take as a warm start on ``n_ops`` ops.

    >>> expected_seconds("heft", 1_000_000)
    40.0
    """
    return EXPECTED_S_PER_OP.get(method, 1e-4) * n_ops


def _params(method: str) -> tuple:
    return tuple(inspect.signature(SOLVERS[method].func).parameters)


def best_heuristic(graph, cluster, warm_start, congestion: bool, seed,
                   budget: Budget | None = None, fix=None) -> tuple:
    """(plan with an order, schedule, method, table of tried methods, errors). ``fix``: applied
    to each heuristic's plan before it is checked and simulated (``pesto``'s fine balance).

    Under a bounded ``budget`` a heuristic is started only when it is expected to end in what
    is left of it (:data:`EXPECTED_S_PER_OP`; when none is, the cheapest alone runs, as a warm
    start is needed), and none after the first that succeeded once the budget is over;
    heuristics with a solver inside (m_sct's LP) get what is left of it.

    >>> [m for m in candidates("auto") if expected_seconds(m, 100_000) <= 2.0]
    ['m_topo', 'round_robin', 'single']
    """
    from ...simulate import simulate
    from ..registry import solve

    tried: dict = {}
    errors: dict = {}
    best = None
    bounded = budget is not None and budget.deadline is not None
    names = candidates(warm_start)
    if bounded:
        n = graph.n_ops
        fit = [m for m in names if expected_seconds(m, n) <= budget.left()]
        if not fit and names:            # a warm start is needed: the cheapest one
            fit = [min(names, key=lambda m: expected_seconds(m, n))]
        for m in names:
            if m not in fit:
                errors[m] = (f"skipped: expected {expected_seconds(m, n):.3g} s, "
                             f"{budget.left():.3g} s left of the time limit")
        names = fit
    for m in names:
        if best is not None and bounded and (
                budget.over() or expected_seconds(m, graph.n_ops) > budget.left()):
            errors[m] = "skipped: time limit"
            continue
        kw = {"seed": seed} if "seed" in _params(m) else {}
        if bounded and "time_limit" in _params(m):
            kw["time_limit"] = budget.seconds(floor=0.05)
        try:
            p = solve(graph, cluster, method=m, **kw)
            p = fix(p) if fix is not None else p
            if not respects(p, cluster):
                errors[m] = "violates memory or colocation"
                continue
            s = simulate(p, cluster, congestion=congestion)
        except (WorkbenchError, ValueError, KeyError) as exc:  # a heuristic that cannot run here
            errors[m] = str(exc)[:200]
            continue
        tried[m] = float(s.makespan)
        if best is None or s.makespan < best[1].makespan - 1e-12:
            best = (p, s, m)
    if best is None:
        return None, None, None, tried, errors
    p, s, m = best
    order = s.device_order()  # the simulated order, ties as the simulator ran them
    p = Plan(graph, dict(p.placement), method=m, order=order, status="heuristic",
             stats={k: v for k, v in p.stats.items()
                    if k.startswith(("balance_", "coarse_balance_"))})
    return p, s, m, tried, errors


def best_order(plan: Plan, cluster, congestion: bool, reorder: bool) -> tuple:
    """(plan, simulated makespan, order source). With ``reorder``, the plan's placement is also
    simulated with the FIFO and rank orders and the fastest order is frozen into the plan."""
    from ...simulate import simulate

    best = (plan, float(simulate(plan, cluster, congestion=congestion).makespan), "model")
    if not reorder:
        return best
    for how in ("fifo", "rank"):
        s = simulate(plan, cluster, congestion=congestion, order=how)
        if s.makespan < best[1] - 1e-9:
            order = order_by_start(plan.graph, cluster, s.device, s.start)
            p = Plan(plan.graph, dict(plan.placement), method=plan.method, order=order,
                     status=plan.status, predicted=dict(plan.predicted), stats=dict(plan.stats),
                     info=dict(plan.info))
            best = (p, float(s.makespan), how)
    return best
