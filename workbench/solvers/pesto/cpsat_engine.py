"""Pesto on the CP-SAT engine: the warm start, coarsening that keeps it expressible, and the
choice of the returned plan (used by ``pesto`` and ``pesto_ilp`` with ``engine="cpsat"``).

Coarsening that keeps the warm start expressible
------------------------------------------------
:func:`schedule_groups` merges only ops that the warm-start schedule runs *consecutively on one
device*: a merged unit shares one placement literal and keeps its members' order, so the warm
start (placement and per-device order) is a solution of the coarse problem and CP-SAT, started
from it, can only improve on it. Transfers stay those of the original graph (the model is
not approximated by aggregated coarse edges). The number of units shrinks only as far as
:func:`units_target` asks: more time per device, less coarsening; graphs within the target are
solved as given.

Examples
--------
>>> from workbench import samples, Cluster, simulate, solve
>>> from workbench.solvers.pesto.cpsat_engine import schedule_groups
>>> g, c = samples.pesto_fig2(), Cluster.preset("2xV100-pcie")
>>> s = simulate(solve(g, c, method="heft"), c)
>>> groups = schedule_groups(s, 4)
>>> sum(len(m) for m in groups) == g.n_ops, len(groups) <= 4
(True, True)
"""

from __future__ import annotations

import math

import numpy as np

from ...budget import SHARES, Budget
from ...errors import SolverError
from ...plan import Plan
from .cpsat import BuildTimeout, CpsatResult, solve_cpsat
from .heuristics import (
    best_heuristic,
    best_order,
    budget_of,
    budget_report,
    check_memory,
    default_target,
    respects,
)

__all__ = ["LNS_PARAMETERS", "paper_coarse_start", "pesto_cpsat", "schedule_groups",
           "units_target", "window_rounds"]


LNS_PARAMETERS = {"use_lns_only": True, "cp_model_presolve": False}
"""CP-SAT settings for a coarsened (grouped) model: its bound is not a bound of the problem, so
the search only improves the hint, by large-neighbourhood search. On the 1,000-6,600-op real
graphs of the hard suite the default portfolio spent its whole budget in presolve and the LP's
first propagation (no solution in 55 s on GNMT, 4 devices), while LNS improved the hint within
seconds; on ResNet-50 (150 units) both gained the same (6.52 -> 6.29 / 6.25 ms in 60 s)."""


ROUNDS_SHARE_FIRST = SHARES["cpsat.first_solve"]
"""Coarsened graphs: the share of the remaining time for the first solve of the whole coarse
problem; the rest goes to :func:`window_rounds` (``SHARES["cpsat.first_solve"]``)."""

FINAL_MARGIN_MAX_S = 5.0
"""At most this many seconds of the limit are kept for judging the result (the share
``cpsat.final_margin`` of :data:`workbench.budget.SHARES`, capped)."""

WINDOW_OPS = 150
"""Ops left free around a critical op in each round of :func:`window_rounds`."""


def units_target(n_devices: int, time_limit: float) -> int:
    """How many placement units CP-SAT gets: ``max(24, 10 * time_limit / devices)``.

    The one place where the problem this method builds depends on its time limit, on purpose
    (docs/decisions.md, 64): the units are what CP-SAT can improve in the time it has, about
    ten per second and device; a fixed size would either leave a long limit unused (few
    units, the warm start's runs frozen) or give a short one a model it cannot even build
    (thousands of ops). ``pesto(..., engine="cpsat", target=N)`` fixes the size instead.

    A limit measured on a clock (``Budget.limit``, 4.9999999999 s for 5 s) sizes as the
    seconds it stands for: the product is rounded to 6 decimals before it is truncated.

    >>> units_target(2, 120), units_target(4, 120), units_target(8, 5)
    (600, 300, 24)
    >>> units_target(2, 5.0), units_target(2, 5.0 - 1e-11)
    (25, 25)
    """
    return int(max(24, round(10.0 * float(time_limit) / max(1, int(n_devices)), 6)))


def schedule_groups(schedule, target: int, *, balance: float = 2.0,
                    free=None) -> list[list[str]]:
    """Groups of ops run consecutively on one device by ``schedule``, at most ``target`` of them
    where the schedule allows (each group is a run of one device's sequence).

    Adjacent pairs on a device are merged heaviest tensor first (pairs with no edge last,
    then the lightest compute), and a group's compute stays under ``balance`` times the mean
    per target unit while any other merge is left. Ops in ``free`` (indices) stay alone.

    Returns
    -------
    list of list of str
        Every op exactly once, each group in its device's order.
    """
    g = schedule.graph
    gc = g.c
    n = gc.n
    if target < 1:
        raise SolverError(f"coarsening target must be >= 1, got {target!r}")
    dev = np.asarray(schedule.device).tolist()
    work = (schedule.end - schedule.start).tolist()
    seqs: dict = {}
    rank = np.arange(n) if schedule.run_rank is None else np.asarray(schedule.run_rank)
    for i in np.lexsort((rank, schedule.start)).tolist():  # ties: the order they ran
        seqs.setdefault(dev[i], []).append(i)
    edge_bytes: dict = {}
    for s_, d_, b_ in zip(gc.src.tolist(), gc.dst.tolist(), gc.bytes.tolist()):
        edge_bytes[s_, d_] = edge_bytes.get((s_, d_), 0.0) + b_
    pairs = []
    free = set() if free is None else set(free)
    for seq in seqs.values():
        for a, b in zip(seq, seq[1:]):
            if a in free or b in free:
                continue
            pairs.append((-edge_bytes.get((a, b), -1.0), work[a] + work[b], a, b))
    pairs.sort()
    parent = list(range(n))
    size = list(work)

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    units = n
    cap = balance * sum(work) / max(1, target)
    while units > target and pairs:
        left, merged = [], False
        for item in pairs:
            if units <= target:
                break
            ra, rb = find(item[2]), find(item[3])
            if ra == rb:
                continue
            if size[ra] + size[rb] > cap:
                left.append(item)
                continue
            parent[rb] = ra
            size[ra] += size[rb]
            units -= 1
            merged = True
        pairs = left
        if not merged:
            cap *= 2  # nothing fits under the cap: relax it
    groups: dict = {}
    for seq in seqs.values():
        for i in seq:
            groups.setdefault(find(i), []).append(gc.names[i])
    return list(groups.values())


def paper_coarse_start(graph, cluster, current: tuple, tried: dict, *, warm_start, congestion,
                       seed, time_limit) -> tuple:
    """The better of ``current`` = (plan, schedule, method) and the warm-start heuristics run on
    Pesto's own coarse graph (Theorem 3.5 coarsening to
    :func:`~workbench.solvers.pesto.heuristics.default_target` vertices, expanded, in the
    fastest of the simulator's orders), within ``time_limit`` (seconds or a
    :class:`~workbench.budget.Budget`). ``tried`` gets ``"<method>@coarse"``.

    Why: on rnnlm-4xV100 every heuristic on the original graph sends 3-5.6 GB between devices
    (celeritas 47.2 ms), while on the coarse graph, whose heavy-edge-first merging hides the
    large tensors inside vertices, any of them finds a 2-device cut of 0.9 MB (24.7 ms); runs
    of the original heuristic's schedule cannot reach that cut (docs/decisions.md).
    """
    from ...simulate import simulate
    from ...transforms.coarsen import coarsen

    budget = Budget.of(time_limit, name="cpsat.coarse_start")
    tgt = default_target(cluster)
    if graph.n_ops <= tgt or budget.over():
        return current
    cg = coarsen(graph, tgt, cluster=cluster, deadline=budget.deadline, stop_at=budget.deadline)
    cp, _cs, cm, _tried, _err = best_heuristic(cg.coarse, cluster, warm_start, congestion,
                                               seed, budget=budget)
    if cp is None:
        return current
    plan, ms, _how = best_order(cg.expand(cp), cluster, congestion, True)
    tried[f"{cm}@coarse"] = ms
    if not respects(plan, cluster) or (current[1] is not None
                                       and ms >= current[1].makespan * (1 - 1e-9)):
        return current
    plan = Plan(graph, dict(plan.placement), method=cm, order=plan.order, status="heuristic")
    return plan, simulate(plan, cluster, congestion=congestion), f"{cm}@coarse"


def window_rounds(graph, cluster, schedule, time_limit, *, congestion: bool, workers: int,
                  symmetry: bool, seed, free_ops: int, outside_units: int = 60) -> tuple:
    """Improve ``schedule`` by rounds of CP-SAT on windows of it, within ``time_limit``
    (seconds or a :class:`~workbench.budget.Budget`).

    Each round takes the ``free_ops`` ops that start nearest (in time) to a random op of the
    incumbent's critical path and leaves them free (own placement, own order); every other
    op is coarsened into runs of the incumbent (:func:`schedule_groups`, at most
    ``outside_units`` units), which keeps the incumbent a solution of the round's model.
    CP-SAT, started from the incumbent, solves the round (a share ``cpsat.window_round`` of
    what is left, at least 2 s); a plan that simulates faster becomes the incumbent. A
    large-neighbourhood search at the coarsening level (an extension of Pesto's
    coarsen-then-solve: the coarse problem changes every round, always around the current
    best plan). Rounds stop when less than a second is left.

    Returns ``(best schedule, stats)``.
    """
    from ...simulate import simulate

    budget = Budget.of(time_limit, name="cpsat.window_rounds")
    rng = np.random.default_rng(0 if seed is None else int(seed))
    best = schedule
    n = graph.n_ops
    rounds = improved = 0
    gains: list = []
    while budget.left() >= 1.0:
        left = budget.left()
        crit = [graph.index[x] for kind, x in best.critical_path if kind == "op"]
        centre = crit[int(rng.integers(len(crit)))] if crit else int(rng.integers(n))
        near = np.argsort(np.abs(best.start - best.start[centre]), kind="stable")[:free_ops]
        groups = schedule_groups(best, int(free_ops) + int(outside_units), free=near.tolist())
        this = budget.share("cpsat.window_round",
                            seconds=max(2.0, SHARES["cpsat.window_round"] * left))
        try:
            r = solve_cpsat(graph, cluster, congestion=congestion, hint=best, groups=groups,
                            workers=workers, symmetry=symmetry, seed=rounds, time_limit=this)
        except BuildTimeout:
            break
        rounds += 1
        if r.has_solution and r.simulated_ms < best.makespan * (1 - 1e-9):
            gains.append(float(best.makespan - r.simulated_ms))
            best = simulate(r.plan(graph, cluster), cluster, congestion=congestion)
            improved += 1
    return best, {"lns_rounds": rounds, "lns_improved": improved,
                  "lns_gain_ms": float(sum(gains))}


def _warm_start(graph, cluster, budget: Budget, *, coarsen: bool, warm_start, congestion,
                seed) -> tuple:
    """(plan, schedule, method, tried, errors) of the best heuristic, within the shares
    ``cpsat.warm_start`` (and with ``coarsen``, ``cpsat.coarse_start``) of ``budget``."""
    warm_plan, warm_s, warm_m, tried, errors = best_heuristic(
        graph, cluster, warm_start, congestion, seed,
        budget=budget.until("cpsat.warm_start", SHARES["cpsat.warm_start"]))
    if coarsen:
        warm_plan, warm_s, warm_m = paper_coarse_start(
            graph, cluster, (warm_plan, warm_s, warm_m), tried, warm_start=warm_start,
            congestion=congestion, seed=seed,
            time_limit=budget.until("cpsat.coarse_start", SHARES["cpsat.coarse_start"]))
    return warm_plan, warm_s, warm_m, tried, errors


def _not_solved(why: str) -> CpsatResult:
    return CpsatResult("unknown", "NOT_SOLVED", None, None, None, float("nan"), None, None,
                       {"engine": "cpsat", "cp_status": "NOT_SOLVED",
                        "not_solved_because": why, "bound_valid": False})


def _first_solve(graph, cluster, budget: Budget, search: Budget, warm_s, groups, *,
                 congestion, workers, symmetry, seed) -> CpsatResult:
    """CP-SAT on the whole (coarse) problem from the warm start: all of ``search``, or with
    ``groups`` its share ``cpsat.first_solve`` (the rest is for :func:`window_rounds`);
    without a warm start the whole ``budget`` (at least 0.2 s). A model that cannot be built
    in time gives a NOT_SOLVED result when there is a warm start to return."""
    try:
        if warm_s is not None and search.over():
            return _not_solved("the heuristics used up the time limit")
        if warm_s is None:
            limit = budget if budget.deadline is None or budget.left() >= 0.2 else 0.2
        else:
            limit = search.share("cpsat.first_solve") if groups else search
        return solve_cpsat(graph, cluster, congestion=congestion, hint=warm_s, groups=groups,
                           workers=workers, symmetry=symmetry, seed=seed,
                           parameters=LNS_PARAMETERS if groups else None, time_limit=limit)
    except BuildTimeout as exc:
        if warm_s is None:
            raise
        return _not_solved(str(exc))


def pesto_cpsat(graph, cluster, *, coarsen: bool, target, congestion: bool, warm_start,
                time_limit, workers: int, symmetry: bool, seed, method: str) -> Plan:
    """Warm start, (coarsening,) CP-SAT, and the plan to return (see ``pesto``).

    ``time_limit``: seconds or a :class:`~workbench.budget.Budget` (None or unbounded: 120 s,
    :func:`~.heuristics.budget_of`), split by the shares ``cpsat.*`` of
    :data:`workbench.budget.SHARES`; ``stats["budget"]`` reports it.
    With ``coarsen`` and no ``target`` the number of placement units is
    :func:`units_target` of the limit (documented there: the one size that depends on time)."""
    from ...simulate import simulate

    budget = budget_of(time_limit, method)
    limit = budget.limit
    check_memory(graph, cluster)
    warm_plan, warm_s, warm_m, tried, errors = _warm_start(
        graph, cluster, budget, coarsen=coarsen, warm_start=warm_start, congestion=congestion,
        seed=seed)
    t_heur = budget.elapsed()
    groups = None
    if coarsen:
        tgt = units_target(len(cluster), limit) if target is None else int(target)
        if warm_s is not None and tgt < graph.n_ops:
            groups = schedule_groups(warm_s, tgt)
    # a share of the limit is kept for judging the result (simulations, other orders)
    search = budget.until("cpsat.search", 1.0 - min(SHARES["cpsat.final_margin"],
                                                     FINAL_MARGIN_MAX_S / limit))
    res = _first_solve(graph, cluster, budget, search, warm_s, groups, congestion=congestion,
                       workers=workers, symmetry=symmetry, seed=seed)
    stats = dict(res.stats)
    stats.update({
        "ilp_status": res.status, "objective_ms": res.objective_ms,
        "heuristic_seconds": t_heur, "warm_start_method": warm_m,
        "warm_start_candidates": tried,
        "warm_start_predicted_ms": None if warm_s is None else float(warm_s.makespan),
        "units": len(groups) if groups else graph.n_ops,
    })
    if errors:
        stats["warm_start_errors"] = errors
    model_bound = res.bound_ms
    stats["model_bound_ms"] = model_bound
    # CP-SAT's bound is a bound of the problem only when nothing was merged
    stats["bound_ms"] = model_bound if not groups and not math.isnan(model_bound) else None
    cands = []
    if res.has_solution:
        cands.append(("cpsat", res.plan(graph, cluster, method=method), res.simulated_ms))
        if not budget.over():  # the simulator's own orders on CP-SAT's placement
            for how in ("fifo", "rank"):
                s_ = simulate(cands[0][1], cluster, congestion=congestion, order=how)
                if s_.makespan < cands[-1][2] - 1e-9:
                    order = s_.device_order()
                    cands.append(("cpsat", Plan(graph, dict(cands[0][1].placement),
                                                method=method, order=order,
                                                stats=dict(res.stats)), float(s_.makespan)))
    if groups and warm_s is not None and search.left() > 1.0:
        inc = warm_s
        if cands and cands[0][2] < warm_s.makespan * (1 - 1e-9):
            inc = simulate(cands[0][1], cluster, congestion=congestion)
        best_s, lns = window_rounds(graph, cluster, inc, search.share("cpsat.rounds", 1.0),
                                    congestion=congestion,
                                    workers=workers, symmetry=symmetry, seed=seed,
                                    free_ops=WINDOW_OPS)
        stats.update(lns)
        if best_s.makespan < inc.makespan * (1 - 1e-9):  # the final choice below takes the best
            placement = {graph.c.names[i]: cluster.names[d]
                         for i, d in enumerate(np.asarray(best_s.device).tolist())}
            cands.append(("cpsat", Plan(graph, placement, method=method,
                                        order=best_s.device_order(), stats=dict(res.stats)),
                          float(best_s.makespan)))
    if warm_s is not None:
        order = warm_s.device_order()
        wp = Plan(graph, dict(warm_plan.placement), method=method, order=order)
        cands.append(("warm_start", wp, float(warm_s.makespan)))
    if not cands:
        raise SolverError(f"CP-SAT found no solution for graph {graph.name!r} within "
                          f"{limit:g} s and no heuristic gave a warm start; raise time_limit")
    name, plan, ms = min(cands, key=lambda t: (t[2], t[0] != "cpsat"))
    stats["chosen"] = "ilp" if name == "cpsat" else name
    stats["simulated_ms"] = ms
    if name != "cpsat":
        stats["fallback"] = ("the CP-SAT plan simulates worse than its warm start"
                             if res.has_solution else "CP-SAT found no solution in time")
    elif (warm_s is not None and ms >= float(warm_s.makespan) * (1 - 1e-9)
          and res.status != "optimal"):
        # CP-SAT's plan only ties with its warm start: that is the heuristic's plan
        stats["chosen"] = "warm_start"
        stats["fallback"] = "CP-SAT found no better plan than its warm start in time"
    status = res.status if name == "cpsat" else (
        "time_limit" if res.status in ("time_limit", "unknown") else "feasible")
    if status == "optimal" and groups:
        status = "feasible"  # optimal for the coarse problem only
    if status == "optimal" and not congestion:
        status = "feasible"  # optimal for a congestion-free judge, not the default one
    if status == "unknown":
        status = "time_limit"
    bound = stats["bound_ms"]
    stats["gap"] = None if bound is None or ms <= 0 else max(0.0, (ms - bound) / ms)
    stats["mip_gap"] = stats["gap"]
    plan.status = status
    plan.stats.update(stats)
    # the engine judges its own plan: predicted = simulated (CP-SAT's objective in stats)
    plan.predicted = {"makespan_ms": ms}
    if groups:
        plan.info["coarse_members"] = {grp[0]: list(grp) for grp in groups}
    plan.stats["budget"] = budget_report(budget)
    return plan
