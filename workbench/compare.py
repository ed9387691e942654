"""Many methods on one problem -> one tidy pandas DataFrame.

Every number comes from the judge (:func:`workbench.simulate`, :func:`workbench.max_load`),
whatever a solver predicted. A method that fails gets a row with status ``error`` and the
message; the other rows are unaffected. A method that cannot serve the problem (its model does
not cover the cluster or the graph's size, :class:`~workbench.errors.NotApplicableError`, or no
plan of it fits the devices, :class:`~workbench.errors.InfeasibleError`) gets no row: it is
listed in ``Comparison.left_out`` with the reason, in one line.

Examples
--------
>>> import workbench as wb
>>> g, c = wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie")
>>> cmp = wb.compare(g, c, methods=["single", "round_robin", "m_topo"], progress=False)
>>> cmp.table.set_index("method")["makespan_ms"].round(2).to_dict()
{'single': 6.0, 'round_robin': 5.02, 'm_topo': 5.02}
>>> list(cmp.table.columns[:4]), type(cmp.table).__name__
(['method', 'family', 'objective', 'status'], 'DataFrame')
>>> round(cmp.schedules["m_topo"].makespan, 6) == float(cmp.table["makespan_ms"].iloc[2])
True

The result is a :class:`~workbench.comparison.Comparison`: the table, the plans, the schedules
the table's numbers come from, the problem's bounds and the settings; views draw what it holds.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Iterable

from .comparison import Comparison
from .errors import InfeasibleError, NotApplicableError, SolverError
from .simulate import evaluate, simulate
from .solvers import SOLVERS, get, solve

__all__ = ["compare", "default_methods", "proven_bound", "COLUMNS", "Comparison", "ONE_DEVICE"]

COLUMNS = ["method", "family", "objective", "status", "makespan_ms", "max_load_ms",
           "makespan_lb", "max_load_lb", "makespan_gap", "max_load_gap", "comm_ms", "comm_bytes",
           "peak_mem_frac", "live_mem_frac", "devices_used", "feasible", "violations", "solve_s",
           "error", "proven_bound"]
"""Columns of :func:`compare`'s table (``measure=True`` adds ``measured_ms``,
``measured_std_ms`` and ``sim_error``). ``makespan_lb``/``max_load_lb`` are the best bounds
known for the problem (the same in every row: :mod:`workbench.judge.bounds` and every solver's proven
bound, see :func:`proven_bound`); ``makespan_gap``/``max_load_gap`` each method's distance to
them; ``proven_bound`` the method's own proven bound of its objective (NaN if none).
``peak_mem_frac`` is the fullest device's static sum of op memory over its capacity,
``live_mem_frac`` the same for the peak of live memory over the simulated step
(:mod:`workbench.judge.liveness`): a plan can fit by one and not by the other."""


ONE_DEVICE = ("single",)
"""Methods that put every op on one device by design: they cannot serve a problem that no
single device holds (:func:`workbench.judge.bounds.min_devices` above 1)."""


def default_methods(graph=None, cluster=None, *, candidates: Iterable[str] | None = None,
                    objective: str | None = None) -> list[str]:
    """The methods that suit a problem, chosen from the registry's metadata without running any.

    Of ``candidates`` (default: every registered method), those registered, needing no extra
    input (an expert split, say), aimed at ``objective`` (:attr:`SolverInfo.objective`; None:
    any) and, given ``graph`` and ``cluster``, none of :data:`ONE_DEVICE` when no device holds
    the model. What metadata cannot tell (a method refusing the cluster's link model, say)
    shows as an error row of :func:`compare`, whose default is ``default_methods()``: every
    method, so that the table shows which fail.

    >>> from workbench.workloads import workload
    >>> g, c = workload("layered300-4xV100").build()  # memory-capped: no device holds it all
    >>> default_methods(g, c, candidates=["single", "round_robin", "dp", "expert", "nope"],
    ...                 objective="makespan")
    ['round_robin']
    >>> "expert" in default_methods(), "single" in default_methods()
    (False, True)
    """
    if graph is not None and cluster is not None:
        from .compare_training import training_problem
        from .solvers.hybrid import STRATEGY_METHODS

        if training_problem(graph, cluster) is not None:  # strategies, not op placements
            return [m for m in STRATEGY_METHODS if candidates is None or m in candidates]
    names = list(SOLVERS) if candidates is None else list(candidates)
    out = [m for m in names if m in SOLVERS and not SOLVERS[m].needs
           and (objective is None or SOLVERS[m].objective == objective)]
    if graph is not None and cluster is not None and set(out) & set(ONE_DEVICE):
        from .judge.bounds import min_devices

        if min_devices(graph, cluster) > 1:
            out = [m for m in out if m not in ONE_DEVICE]
    return out


def proven_bound(plan, info, *, congestion: bool = True) -> tuple[str, float] | None:
    """``(objective, value)`` of the lower bound a solver proved for the whole problem, or None.

    A makespan bound is ``plan.stats["bound_ms"]``; a max-load bound ``plan.stats["bound"]``.
    Either counts only where it bounds *every* plan of the problem: the plan says so with
    ``stats["bound_valid"]`` (default: the solver is registered ``exact`` and its objective is
    the makespan), and a makespan bound proved with congestion modelled does not bound a
    congestion-free judge.

    >>> from workbench.solvers import get
    >>> from workbench.plan import Plan
    >>> from workbench import samples
    >>> p = Plan(samples.diamond(), {}, stats={"bound_ms": 4.5, "congestion_modelled": True})
    >>> proven_bound(p, get("pesto_ilp")), proven_bound(p, get("pesto_ilp"), congestion=False)
    (('makespan', 4.5), None)
    """
    st = plan.stats
    if info.objective == "makespan":
        b = st.get("bound_ms")
        if b is None or not st.get("bound_valid", info.exact):
            return None
        if st.get("congestion_modelled") and not congestion:
            return None
        return ("makespan", float(b))
    if info.objective == "max_load":
        b = st.get("bound")
        if b is None or not st.get("bound_valid", False):
            return None
        return ("max_load", float(b))
    return None


def compare(graph, cluster, methods: Iterable[str] | None = None, *,
            time_limit: float | None = 30.0, params: dict | None = None, seed: int | None = 0,
            congestion: bool = True, order: str | None = None,
            progress: bool | Callable = True, measure: bool = False,
            measure_options: dict | None = None, global_batch: int | None = None
            ) -> Comparison:
    """Run ``methods`` on ``graph``/``cluster`` and tabulate both objectives.

    Parameters
    ----------
    graph : OpGraph
    cluster : Cluster
    methods : iterable of str, optional
        Registered method names; default :func:`default_methods`.
    time_limit : float or None
        Seconds per method (passed to solvers that take one).
    params : dict, optional
        ``{method: {param: value}}`` extra parameters per method.
    congestion, order
        Passed to :func:`workbench.simulate` (order None = each plan's own order, else FIFO);
        the kept ``schedules`` are simulated under them.
    progress : bool or callable
        A tqdm bar (True), nothing (False), or ``callback(done, total, method)``.
    measure : bool
        Also run each plan on local devices with :mod:`workbench.runtime` (TensorFlow needed)
        and add ``measured_ms``, ``measured_std_ms`` and ``sim_error`` (relative).
    global_batch : int, optional
        Sequences per step of an LLM training problem (``gpt:...``/``llama:...`` on a GPU-node
        preset: :mod:`workbench.compare_training`, whose strategy methods it runs, side by
        side with their breakdowns; default four micro-batches per GPU).

    Returns
    -------
    Comparison
        ``table`` (the DataFrame of :data:`COLUMNS`; the Comparison reads and renders as it),
        ``plans``, ``schedules``, ``bounds`` and ``settings`` (``settings["left_out"]``, also
        ``Comparison.left_out``: method -> the one-line reason it cannot serve the problem,
        for the methods left out of the table).
    """
    import pandas as pd

    from .compare_training import check_training_args, not_training, training_problem
    from .solvers.hybrid import STRATEGY_METHODS

    methods = None if methods is None else list(methods)
    problem = training_problem(graph, cluster)
    check_training_args(problem, global_batch, measure, params)
    for m in methods or ():
        if m not in STRATEGY_METHODS:
            get(m)  # unknown names fail before any work is done
    if problem is not None:  # strategies side by side (issue 43)
        from .compare_training import compare_training

        return compare_training(graph, cluster, methods, problem=problem,
                                global_batch=global_batch, time_limit=time_limit,
                                progress=progress, columns=COLUMNS, settings={
                                    "time_limit": time_limit, "params": {},
                                    "seed": seed, "congestion": congestion, "order": order,
                                    "measure": False, "measure_options": {}})
    methods = list(default_methods() if methods is None else methods)
    params = dict(params or {})
    for m in params:
        if m not in methods:
            raise SolverError(f"params given for method {m!r}, which is not being compared")
    settings = {"methods": methods, "time_limit": time_limit, "params": params, "seed": seed,
                "congestion": congestion, "order": order, "measure": measure,
                "measure_options": dict(measure_options or {})}
    from .judge.bounds import lower_bounds

    lb = lower_bounds(graph, cluster)  # once: every method whose plan keeps the graph reuses it
    rows, plans, schedules, proven = [], {}, {}, {}
    left_out = settings["left_out"] = {}
    bar = None
    if progress is True:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(methods), desc="compare", leave=False)
    for k, m in enumerate(methods):
        if bar is not None:
            bar.set_postfix_str(m)
        try:
            if m in STRATEGY_METHODS:
                raise NotApplicableError(not_training(graph, cluster))
            rows.append(_run_one(graph, cluster, m, settings, plans, schedules, proven, lb))
        except (NotApplicableError, InfeasibleError) as e:
            left_out[m] = " ".join(str(e).split())  # one line
        if bar is not None:
            bar.update(1)
        elif callable(progress):
            progress(k + 1, len(methods), m)
    if bar is not None:
        bar.close()
    df = pd.DataFrame(rows, columns=COLUMNS)
    bounds = _best_bounds(df, lb, proven)
    if measure:
        df = _add_measurements(df, graph, cluster, plans, measure_options or {})
    df = df.round({c: 6 for c in ("makespan_ms", "max_load_ms", "makespan_lb", "max_load_lb",
                                  "comm_ms")})
    return Comparison(df, plans, schedules=schedules, bounds=bounds, settings=settings,
                      graph=graph, cluster=cluster)


def _run_one(graph, cluster, m: str, settings: dict, plans: dict, schedules: dict,
             proven: dict, lb: dict) -> dict:
    """Solve, simulate and judge method ``m``; its row (an error row when it fails). Its plan
    and schedule go to ``plans``/``schedules``, a proven bound raises ``proven``."""
    info = SOLVERS[m]
    row = {"method": m, "family": info.family, "objective": info.objective}
    congestion = settings["congestion"]
    t0 = time.perf_counter()
    try:
        plan = solve(graph, cluster, method=m, time_limit=settings["time_limit"],
                     seed=settings["seed"], **settings["params"].get(m, {}))
        sched = simulate(plan, cluster, congestion=congestion, order=settings["order"])
        same = plan.graph is graph or plan.graph.fingerprint == graph.fingerprint
        met = evaluate(plan, cluster, schedule=sched,
                       bounds=lb if same else None)
        row.update(status=plan.status, makespan_ms=met.makespan_ms,
                   max_load_ms=met.max_load_ms, makespan_lb=met.makespan_lb,
                   max_load_lb=met.max_load_lb, makespan_gap=met.makespan_gap,
                   max_load_gap=met.max_load_gap, comm_ms=met.comm_ms,
                   comm_bytes=met.comm_bytes, peak_mem_frac=met.memory_fraction,
                   live_mem_frac=met.live_memory_fraction,
                   devices_used=met.devices_used, feasible=met.feasible,
                   violations="; ".join(met.violations),
                   solve_s=float(plan.stats.get("solve_s", time.perf_counter() - t0)),
                   error="", proven_bound=math.nan)
        pb = proven_bound(plan, info, congestion=congestion)
        if pb is not None and math.isfinite(pb[1]):
            row["proven_bound"] = pb[1]
            proven[pb[0]] = max(proven.get(pb[0], -math.inf), pb[1])
        plans[m], schedules[m] = plan, sched
    except (NotApplicableError, InfeasibleError):
        raise  # no row: compare lists the method as left out
    except Exception as e:  # one failing method must not lose the others' results
        msg = str(e) if hasattr(e, "args") and str(e) else type(e).__name__
        if not isinstance(e, (ValueError, RuntimeError, ArithmeticError)) and \
                not type(e).__module__.startswith("workbench"):
            msg = f"{type(e).__name__}: {msg}"
        row.update(status="error", error=msg, solve_s=time.perf_counter() - t0)
    return row


def _best_bounds(df, lb: dict, proven: dict) -> dict:
    """Put the best known bound of each objective in every row and each method's gap to it;
    returns the bounds (see :attr:`Comparison.bounds`). ``lb``: the problem's analytic
    :func:`~workbench.judge.bounds.lower_bounds`, computed once per comparison."""
    from .plan import _gap

    out = {"min_devices": lb["min_devices"], "analytic": lb, "proven": dict(proven)}
    for obj, col in (("makespan", "makespan"), ("max_load", "max_load")):
        best = max(float(lb[f"{col}_ms"]), proven.get(obj, -math.inf))
        out[f"{col}_ms"] = best
        df[f"{col}_lb"] = best
        df[f"{col}_gap"] = [(math.nan if math.isnan(v) else _gap(v, best))
                            for v in df[f"{col}_ms"].tolist()]
    return out


def _add_measurements(df, graph, cluster, plans: dict, options: dict):
    """Measured step time of every plan on local devices (see workbench.runtime)."""
    try:
        from . import runtime
        measure_plans = runtime.measure_plans
    except (ImportError, AttributeError) as e:
        raise SolverError(f"measure=True needs the TensorFlow bridge (pip install "
                          f"'placement-workbench[tf]'): {e}") from None
    # plans without an order are run in the order the simulator gave them on this cluster
    results = measure_plans(graph, plans, **{"cluster": cluster, **options})
    meas, std, err, notes = [], [], [], []
    for _, row in df.iterrows():
        r = results.get(row["method"])
        if r is None or getattr(r, "error", None):
            meas.append(math.nan)
            std.append(math.nan)
            err.append(math.nan)
            notes.append(getattr(r, "error", "") if r is not None else "not measured")
            continue
        meas.append(r.mean_ms)
        std.append(r.std_ms)
        sim = row["makespan_ms"]
        err.append(abs(sim - r.mean_ms) / r.mean_ms if r.mean_ms > 0 else math.nan)
        notes.append("")
    df = df.copy()
    df["measured_ms"] = meas
    df["measured_std_ms"] = std
    df["sim_error"] = err
    df["measure_error"] = notes
    return df
