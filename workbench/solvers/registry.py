"""The solver registry: :func:`register` (the decorator every method module uses), the
table :data:`SOLVERS`, :func:`get` and :func:`solve` (the one entry that checks parameters,
records progress and times the call).

Every solver is a function ``solve(graph, cluster, *, <keyword params>, time_limit=None,
seed=None, progress=None) -> Plan``. Method modules import this module (never the package
``workbench.solvers``, which imports them), so the registry sits below every family.

Examples
--------
>>> from workbench.solvers.registry import SOLVERS, get
>>> get("single").family
'baseline'
>>> get("nope")
Traceback (most recent call last):
...
workbench.errors.SolverError: unknown method 'nope'; valid methods: ...
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from ..errors import NotApplicableError, SolverError
from . import params as _params_mod
from ..budget import SHARES, Budget
from .params import RULES, Param, check as _check_params, declare
from .progress import recording

__all__ = ["MAX_MODEL_OPS", "SOLVERS", "SolverInfo", "Param", "register", "get", "solve",
           "methods"]


@dataclass(frozen=True)
class SolverInfo:
    """Metadata of a registered solver.

    ``objective``: ``"makespan"`` (single-step time), ``"max_load"`` (pipelined time per sample)
    or ``"latency"``. ``memory``/``colocation``: whether the solver honours those constraints.
    ``exact``: proves optimality when it says ``status="optimal"``. ``orders``: plans carry a
    per-device execution order. ``contract_params``: keyword arguments that keep the solver
    quick in the contract test. ``needs``: parameters without which it cannot run (e.g. an
    expert split), so it is skipped where they are not given. ``params``: :class:`Param`
    overrides of the declaration derived from the signature (see :meth:`parameters`).
    ``max_ops``: the largest graph the method takes (its model grows faster than the graph:
    beyond it no plan comes within a time limit and 8 GiB); :func:`solve` refuses a larger one
    at once with a :class:`~workbench.errors.NotApplicableError` naming that size.
    """

    name: str
    func: Callable
    family: str
    paper: str
    objective: str = "makespan"
    memory: bool = True
    colocation: bool = True
    exact: bool = False
    orders: bool = False
    description: str = ""
    contract_params: dict = field(default_factory=dict)
    needs: tuple = ()
    params: dict = field(default_factory=dict)
    max_ops: int | None = None

    def parameters(self) -> dict:
        """Name -> :class:`Param` of every keyword parameter: types from the signature's
        annotations, ranges from :data:`~workbench.solvers.params.RULES` and ``params``.

        >>> p = get("local_search").parameters()["restarts"]
        >>> p.types, p.min
        (('int',), 1)
        """
        return declare(self.func, self.params)


SOLVERS: dict[str, SolverInfo] = {}

MAX_MODEL_OPS = 100_000
"""The ``max_ops`` of the methods that build a model of the whole graph (the pipeline DPs and
IPs, local search, Pesto's ILP) and of Pesto (its coarsening, expansion and guard run on the
whole graph): at 100,000 ops they return or refuse with T = 20 s in 5-11 s CPU and 2 GiB; the
exact DP took 5.9 GiB to refuse 200,000 ops and was killed for memory (15 GiB) at
1,000,000, Pesto was still running after 241 s (docs/results-scaling.md)."""


def register(name: str, *, family: str, paper: str, objective: str = "makespan",
             memory: bool = True, colocation: bool = True, exact: bool = False,
             orders: bool = False, description: str = "", contract_params: dict | None = None,
             needs: tuple = (), params: dict | None = None, max_ops: int | None = None):
    """Decorator registering ``func`` under ``name`` (see :class:`SolverInfo`)."""

    def deco(func: Callable) -> Callable:
        if name in SOLVERS and SOLVERS[name].func is not func:
            raise SolverError(f"solver name {name!r} registered twice")
        doc = description or (inspect.getdoc(func) or "").split("\n")[0]
        SOLVERS[name] = SolverInfo(name, func, family, paper, objective, memory, colocation,
                                   exact, orders, doc, dict(contract_params or {}), tuple(needs),
                                   dict(params or {}), max_ops)
        return func

    return deco


def methods() -> list[str]:
    """Registered method names in registration order."""
    return list(SOLVERS)


def get(name: str) -> SolverInfo:
    if not isinstance(name, str):
        raise SolverError(f"method must be a string, got {name!r}")
    try:
        return SOLVERS[name]
    except KeyError:
        raise SolverError(f"unknown method {name!r}; valid methods: "
                          f"{', '.join(SOLVERS)}") from None


def solve(graph, cluster, method: str = "dpos", *, time_limit: float | Budget | None = None,
          seed: int | None = None, progress: Callable | None = None,
          memory_model: str = "static", **params):
    """Run solver ``method`` and return its :class:`~workbench.plan.Plan`.

    Checks that every op can run somewhere first; fills ``plan.stats["solve_s"]`` with the
    wall time. Unknown keyword parameters raise SolverError naming the accepted ones.

    ``time_limit`` (seconds, or a :class:`~workbench.budget.Budget` a caller already holds)
    becomes one Budget, made here once: a method annotated ``time_limit: float | Budget | None``
    gets the Budget itself and hands shares of it down; an older one gets the seconds left.
    A method without a ``time_limit`` parameter runs to completion (list schedulers and other
    one-pass heuristics); ``plan.stats["budget"]`` says so (``bounded: False``) instead of
    dropping the limit silently, with the limit and the time used.

    ``memory_model``: ``"static"`` (default) -- the method as published, on the papers' static
    sum of op memory; ``"live"`` -- a memory-aware method whose plan the judge's live model
    (:mod:`workbench.judge.liveness`) finds out of memory is re-solved with the capacities it
    constrains tightened (:func:`_tighten`; up to :data:`TIGHTEN_ROUNDS` more solves). Either
    way a plan still out of memory gets status ``out_of_memory`` (:func:`judge_memory`).

    >>> from workbench import samples, Cluster, solve
    >>> plan = solve(samples.diamond(), Cluster.preset("2xV100-pcie"), method="round_robin")
    >>> plan.placement
    {'a': 'gpu0', 'b': 'gpu1', 'c': 'gpu0', 'd': 'gpu1'}
    """
    info = get(method)
    decl = info.parameters()
    _check_params(method, {**decl, "time_limit": RULES["time_limit"]},
                  {"time_limit": time_limit, "seed": seed, "progress": progress})
    budget = Budget.of(time_limit, name=f"method {method!r}")
    sig = inspect.signature(info.func)
    accepts_kw = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    valid = [p for p in list(sig.parameters)[2:] if sig.parameters[p].kind is inspect.Parameter.KEYWORD_ONLY]
    for k in params:
        if not accepts_kw and k not in valid:
            raise SolverError(f"method {method!r} has no parameter {k!r}; its parameters: "
                              f"{', '.join(valid) or 'none'}")
    _check_params(method, decl, params)
    from ..cluster import Cluster
    from ..graph import OpGraph

    if not isinstance(graph, OpGraph):
        raise SolverError(f"method {method!r}: graph must be an OpGraph, got "
                          f"{type(graph).__name__}")
    if not isinstance(cluster, Cluster):
        raise SolverError(f"method {method!r}: cluster must be a Cluster, got "
                          f"{type(cluster).__name__}")
    if graph.n_ops == 0:
        raise SolverError(f"method {method!r}: graph {graph.name!r} has no ops")
    if info.max_ops is not None and graph.n_ops > info.max_ops:
        raise NotApplicableError(
            f"method {method!r} takes graphs of up to {info.max_ops:,} ops (its model grows "
            f"faster than the graph); {graph.name!r} has {graph.n_ops:,}: coarsen it "
            f"(workbench.transforms.coarsen, or method 'pesto') or use a list scheduler")
    cluster.check_graph(graph)
    kw = dict(params)
    bounded = "time_limit" in valid or accepts_kw
    if bounded:
        takes_budget = "budget" in decl.get("time_limit", RULES["time_limit"]).types
        first = budget
        if memory_model == "live" and info.memory and budget.limit is not None:
            first = budget.until("first solve", SHARES["solve.live_first"])  # room to re-solve
        kw["time_limit"] = first if takes_budget else first.seconds(floor=1e-3)
    for k, v in (("seed", seed), ("progress", progress)):
        if k in valid or accepts_kw:
            kw[k] = v

    if memory_model not in ("live", "static"):
        raise SolverError(f"method {method!r}: memory_model must be 'live' or 'static', got "
                          f"{memory_model!r}")
    t0 = time.perf_counter()
    with recording() as trace:  # incumbents and bounds of CP-SAT/HiGHS runs, if any
        plan = info.func(graph, cluster, **kw)
        plan.method = method
        judge_memory(plan, cluster, memory_aware=info.memory)
        if memory_model == "live" and info.memory and plan.status == "out_of_memory":
            plan = _tighten(info, graph, cluster, kw, plan, budget)
    plan.stats.setdefault("solve_s", time.perf_counter() - t0)
    plan.stats.setdefault("budget", {**budget.report(), "bounded": bounded})
    if trace.events:
        plan.stats.setdefault("progress", trace.events)
    plan.method = method
    plan.info.setdefault("problem", graph.fingerprint)  # what ties a plan to its problem
    return plan


TIGHTEN_ROUNDS = 3
"""Re-solves :func:`solve` may make, capacities tightened, when the judge finds a
memory-aware method's plan out of memory (``memory_model="live"``)."""


def _tighten(info, graph, cluster, kw: dict, plan, budget: Budget):
    """Re-solve with the memory the method constrains (its static sum) lowered on every
    device the judge found over (:func:`_next_caps`: first the strict rule, and the mild one
    where the method finds no plan under it), until the judge accepts a plan, the method
    finds none under either rule (:class:`~workbench.errors.InfeasibleError`), the budget is
    spent, or :data:`TIGHTEN_ROUNDS` re-solves; with a time limit the first solve had
    ``SHARES["solve.live_first"]`` (``f``) of it and re-solve ``k`` ends by ``f + (1 - f) k /``
    :data:`TIGHTEN_ROUNDS` of it (else an anytime method, CP-SAT or HiGHS, would spend the
    whole limit on a plan the live judge refuses and leave no time to re-solve it). Returns the
    first plan the judge accepts, else the first plan (out of memory). ``plan.stats``:
    ``memory_rounds`` (re-solves made) and, when a re-solve fits, ``memory_capacity``, the
    per-device memory the method was given."""
    from ..errors import WorkbenchError
    from ..simulate import simulate

    caps = [d.memory for d in cluster.devices]
    best, f = plan, SHARES["solve.live_first"]
    for k in range(1, TIGHTEN_ROUNDS + 1):
        share = budget if budget.limit is None else budget.until(
            f"re-solve {k}", f + (1 - f) * k / TIGHTEN_ROUNDS)
        if share.limit is not None and share.left() <= 0.05 * budget.limit / TIGHTEN_ROUNDS:
            break
        if "time_limit" in kw:
            kw = {**kw, "time_limit": share if not isinstance(kw["time_limit"], (int, float))
                  else share.seconds(floor=1e-3)}
        sched = simulate(plan, cluster)
        for strict in (True, False):
            tried = _next_caps(caps, cluster, sched, strict=strict)
            try:
                plan = info.func(graph, cluster.with_devices(
                    [replace(d, memory=c) for d, c in zip(cluster.devices, tried)]), **kw)
                break
            except WorkbenchError:
                continue
        else:
            break
        caps = tried
        plan.method = info.name
        plan.stats["memory_model"] = "static, tightened by the live judge"
        judge_memory(plan, cluster, memory_aware=True)
        best.stats["memory_rounds"] = k
        if plan.status not in ("out_of_memory", "infeasible"):
            plan.stats["memory_rounds"] = k
            plan.stats["memory_capacity"] = {d.name: c for d, c in zip(cluster.devices, caps)}
            return plan
    return best


def _next_caps(caps: list, cluster, sched, *, strict: bool) -> list:
    """The static allowances of the next re-solve. A device within its memory by the live
    judge keeps its allowance. One over it: *mild*, the allowance scaled by ``memory / live
    peak`` (x 0.97); *strict*, also at most its plan's static sum less the overshoot
    (x 1.03), so the re-solve moves off at least what the live peak exceeds by when the
    excess is activations the static sum does not count (BERT-3's latency IP: a GPU at 0.35
    GiB static peaks at 0.70 GiB live of 0.59 GiB; scaling alone asks for no change in three
    rounds), and the same allowance for its identical twins (same kind, memory and speed),
    else the re-solve moves the same ops to a twin (symmetric IPs do).

    >>> from workbench import Cluster
    >>> from types import SimpleNamespace
    >>> c = Cluster.preset("2xV100-pcie").with_memory(1.0)
    >>> s = SimpleNamespace(peak_memory={"gpu0": 0.5, "gpu1": 0.2},
    ...                     peak_live_memory={"gpu0": 1.2, "gpu1": 0.3})
    >>> [round(x, 3) for x in _next_caps([1.0, 1.0], c, s, strict=False)]
    [0.808, 1.0]
    >>> [round(x, 3) for x in _next_caps([1.0, 1.0], c, s, strict=True)]   # 0.5 - 1.03 x 0.2
    [0.294, 0.294]
    """
    new = []
    for cap, d in zip(caps, cluster.devices):
        live = sched.peak_live_memory.get(d.name, 0.0)
        if live <= d.memory:
            new.append(cap)
            continue
        scaled = cap * 0.97 * d.memory / live
        if strict:
            overshoot = live - d.memory
            scaled = min(scaled, max(0.0, sched.peak_memory.get(d.name, 0.0) - 1.03 * overshoot))
        new.append(scaled)
    if not strict:
        return new
    low: dict = {}
    for cap, n, d in zip(caps, new, cluster.devices):
        if n < cap:
            key = (d.kind, d.memory, d.speed)
            low[key] = min(low.get(key, n), n)
    return [min(n, low.get((d.kind, d.memory, d.speed), n)) for n, d in zip(new, cluster.devices)]


def judge_memory(plan, cluster, *, memory_aware: bool = True) -> None:
    """Mark ``plan`` ``out_of_memory`` when the judge's live model (:mod:`workbench.judge.liveness`)
    finds a device over its capacity; record which memory model the method kept.

    Methods keep the papers' static model (a device's ops' ``memory`` summed), which is not an
    upper bound of the live peak (tensors in flight, per-step gradients alive until summed).
    ``plan.stats["memory_model"]`` says so (:func:`solve` with ``memory_model="live"``, the
    re-solves such a plan with tightened capacities first: :data:`TIGHTEN_ROUNDS`); a plan over capacity by the live model gets status
    ``out_of_memory`` (its own status kept in ``stats["solver_status"]``) and
    ``stats["out_of_memory"]``, the judge's violations. A plan already ``infeasible`` (the
    method knew it broke its own memory constraint) keeps that status. The simulation is only
    run when :func:`~workbench.judge.liveness.live_upper_bound` exceeds some capacity.

    >>> from workbench import samples, Cluster, solve
    >>> g = samples.diamond()
    >>> plan = solve(g, Cluster.preset("2xV100-pcie").with_memory(15e6), method="single")
    >>> plan.status, plan.stats["solver_status"], plan.stats["memory_model"]
    ('out_of_memory', 'heuristic', 'static')
    >>> print(plan.stats["out_of_memory"][0])
    memory on gpu0: 0.028 GiB live at 3.000 ms > 0.014 GiB capacity (resident 0.000 GiB, live then: a 9.5 MiB, b 9.5 MiB, c 9.5 MiB)
    """
    from ..judge.liveness import live_upper_bound

    plan.stats.setdefault("memory_model", "static" if memory_aware else "none")
    if plan.status in ("infeasible", "out_of_memory", "error"):
        return
    cap = np.array([d.memory for d in cluster.devices], dtype=float)
    try:
        dev = plan.device_array(cluster)
    except Exception:  # noqa: BLE001 - a plan that does not fit the cluster: validate() says why
        return
    if not (live_upper_bound(plan.graph, cluster, dev) > cap * (1 + 1e-9)).any():
        return
    from ..simulate import memory_violation, simulate

    s = simulate(plan, cluster)
    over = [memory_violation(s, d) for d in cluster.devices
            if s.peak_live_memory.get(d.name, 0.0) > d.memory * (1 + 1e-9)]
    if over:
        plan.stats["solver_status"] = plan.status
        plan.stats["out_of_memory"] = over
        plan.status = "out_of_memory"


_params_mod.method_names = lambda: SOLVERS  # parameter checks know the registered names
