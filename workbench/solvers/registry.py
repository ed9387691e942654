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
from dataclasses import dataclass, field
from typing import Callable

from ..errors import SolverError
from . import params as _params_mod
from ..budget import Budget
from .params import RULES, Param, check as _check_params, declare
from .progress import recording

__all__ = ["SOLVERS", "SolverInfo", "Param", "register", "get", "solve", "methods"]


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

    def parameters(self) -> dict:
        """Name -> :class:`Param` of every keyword parameter: types from the signature's
        annotations, ranges from :data:`~workbench.solvers.params.RULES` and ``params``.

        >>> p = get("local_search").parameters()["restarts"]
        >>> p.types, p.min
        (('int',), 1)
        """
        return declare(self.func, self.params)


SOLVERS: dict[str, SolverInfo] = {}


def register(name: str, *, family: str, paper: str, objective: str = "makespan",
             memory: bool = True, colocation: bool = True, exact: bool = False,
             orders: bool = False, description: str = "", contract_params: dict | None = None,
             needs: tuple = (), params: dict | None = None):
    """Decorator registering ``func`` under ``name`` (see :class:`SolverInfo`)."""

    def deco(func: Callable) -> Callable:
        if name in SOLVERS and SOLVERS[name].func is not func:
            raise SolverError(f"solver name {name!r} registered twice")
        doc = description or (inspect.getdoc(func) or "").split("\n")[0]
        SOLVERS[name] = SolverInfo(name, func, family, paper, objective, memory, colocation,
                                   exact, orders, doc, dict(contract_params or {}), tuple(needs),
                                   dict(params or {}))
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
          seed: int | None = None, progress: Callable | None = None, **params):
    """Run solver ``method`` and return its :class:`~workbench.plan.Plan`.

    Checks that every op can run somewhere first; fills ``plan.stats["solve_s"]`` with the
    wall time. Unknown keyword parameters raise SolverError naming the accepted ones.

    ``time_limit`` (seconds, or a :class:`~workbench.budget.Budget` a caller already holds)
    becomes one Budget, made here once: a method annotated ``time_limit: float | Budget | None``
    gets the Budget itself and hands shares of it down; an older one gets the seconds left.
    A method without a ``time_limit`` parameter runs to completion (list schedulers and other
    one-pass heuristics); ``plan.stats["budget"]`` says so (``bounded: False``) instead of
    dropping the limit silently, with the limit and the time used.

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
    cluster.check_graph(graph)
    kw = dict(params)
    bounded = "time_limit" in valid or accepts_kw
    if bounded:
        takes_budget = "budget" in decl.get("time_limit", RULES["time_limit"]).types
        kw["time_limit"] = budget if takes_budget else budget.seconds(floor=1e-3)
    for k, v in (("seed", seed), ("progress", progress)):
        if k in valid or accepts_kw:
            kw[k] = v

    t0 = time.perf_counter()
    with recording() as trace:  # incumbents and bounds of CP-SAT/HiGHS runs, if any
        plan = info.func(graph, cluster, **kw)
    plan.stats.setdefault("solve_s", time.perf_counter() - t0)
    plan.stats.setdefault("budget", {**budget.report(), "bounded": bounded})
    if trace.events:
        plan.stats.setdefault("progress", trace.events)
    plan.method = method
    plan.info.setdefault("problem", graph.fingerprint)  # what ties a plan to its problem
    return plan


_params_mod.method_names = lambda: SOLVERS  # parameter checks know the registered names
