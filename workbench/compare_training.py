"""Strategies side by side: :func:`workbench.compare` on an LLM training problem.

An LLM training step built from its formulas (``gpt:...``, ``llama:...``:
:func:`workbench.costs.llm_graph.training_graph`) on a cluster of GPU nodes whose GPU the
training judge knows (``8xA100-80g``, ``64xA100-40g``, ``8xH100``, ...:
:data:`workbench.transforms.parallel.PRESET_GPUS`) is a **training problem**: what is chosen
is a tensor x pipeline x data-parallel strategy for a step of ``global_batch`` sequences, not
a device for each op of one micro-batch. :func:`workbench.compare` then runs the strategy
methods (:data:`workbench.solvers.hybrid.STRATEGY_METHODS`: ``megatron``, ``tarnawski``,
``ddp``, ``zero``) and each row holds the chosen strategy, its judged step
(``makespan_ms``, from :func:`workbench.judge.training.simulate_training`), the step's
breakdown (compute, recomputation, TP, PP, bubble, DP, optimizer: they add up to the step),
the peak memory of the fullest device, whether it fits, and the gap to the least lower bound
of the strategies the methods searched (:func:`workbench.solvers.hybrid.strategy_bound`; each
row's own in ``space_bound_ms``). Op-placing methods take the problem where it is meaningful:
those of the pipeline and partitioning families (:data:`PIPELINE_FAMILIES`) place the ops of
one micro-batch's step on a node's GPUs, and a placement whose GPUs each hold one run of the
chain is judged as pipeline stages with data parallelism over the other GPUs
(:func:`as_pipeline`); the others, and placements that are no pipeline split, are left out
with the reason in one line.

The :class:`~workbench.comparison.Comparison` keeps, for each row, the judged
:class:`~workbench.judge.training.TrainingResult` (``training``, links recorded: the views'
pipeline Gantt, memory over time and breakdown draw it) and the op-level plan of one
micro-batch that records the strategy (``plans``, :meth:`TrainingPlan.to_plan`); it has no
op-level ``schedules``.

Examples
--------
>>> import workbench as wb
>>> from workbench.workloads import resolve
>>> g, _ = resolve("gpt:layers=2,hidden=128,heads=4,seq=64,vocab=1000")
>>> cmp = wb.compare(g, wb.Cluster.preset("8xA100-80g"), methods=["ddp", "megatron", "heft"],
...                  global_batch=16, progress=False)
>>> cmp.table["method"].tolist(), cmp.left_out["heft"][:40]
(['ddp', 'megatron'], 'places the ops of one micro-batch of gpt')
>>> r = cmp.training["megatron"]
>>> float(cmp.table["makespan_ms"].iloc[1]) == round(r.step_ms, 6), r.plan.strategy.devices
(True, 8)
>>> training_problem(wb.samples.diamond(), wb.Cluster.preset("8xA100-80g")) is None
True
"""

from __future__ import annotations

import math
import time

from .comparison import Comparison, fmt_bytes
from .errors import InfeasibleError, NotApplicableError, SolverError

__all__ = ["PIPELINE_FAMILIES", "TRAINING_COLUMNS", "as_pipeline", "check_training_args",
           "compare_training", "default_global_batch", "not_training", "training_problem"]

TRAINING_COLUMNS = ["strategy", "tp", "sp", "pp", "dp", "mbs", "n_micro", "schedule", "virtual",
                    "recompute", "zero", "compute_ms", "recompute_ms", "tp_ms", "pp_ms",
                    "bubble_ms", "dp_ms", "optimizer_ms", "peak_mem_bytes", "capacity_bytes",
                    "mfu", "space_bound_ms", "grid", "judged", "paper"]
"""Columns a training comparison adds to :data:`workbench.compare.COLUMNS`: the strategy
(``strategy`` its one line, then its knobs), the slowest rank's step breakdown in ms, the
fullest device's peak memory and its capacity, the model FLOPs utilisation, the lower bound of
the method's own space of strategies, the strategies of that space, how many were judged and
the reference the method follows."""


def training_problem(graph, cluster):
    """``(config, gpu)`` when ``graph``/``cluster`` is a training problem (module docstring),
    else None."""
    meta = getattr(graph, "meta", None) or {}
    if meta.get("source") != "llm" or not meta.get("model"):
        return None
    from .costs.llm import parse_spec
    from .transforms.parallel import PRESET_GPUS

    gpu = PRESET_GPUS.get(getattr(cluster, "name", ""))
    return None if gpu is None else (parse_spec(meta["model"]), gpu)


def not_training(graph, cluster) -> str:
    """Why a strategy method cannot take ``graph`` on ``cluster`` (not a training problem)."""
    meta = getattr(graph, "meta", None) or {}
    if meta.get("source") != "llm":
        return (f"chooses a parallel strategy for an LLM training step (gpt:..., llama:...); "
                f"{graph.name!r} is an op graph to place")
    from .transforms.parallel import PRESET_GPUS

    return (f"needs a cluster of GPU nodes whose GPU the training judge knows "
            f"({', '.join(list(PRESET_GPUS)[:4])}, ...), not {cluster.name!r}")


def default_global_batch(config, cluster) -> int:
    """Sequences per step when none is given: four micro-batches of the model's size per GPU.

    >>> from workbench.costs.llm import parse_spec
    >>> from workbench.cluster import Cluster
    >>> default_global_batch(parse_spec("gpt:1.3b,mbs=2"), Cluster.preset("8xA100-80g"))
    64
    """
    return 4 * config.mbs * len(cluster.devices)


def _oom_text(oom) -> str:
    return (f"out of memory on {oom['device']} at {oom['time_ms']:.1f} ms: "
            f"{fmt_bytes(oom['bytes'])} of {fmt_bytes(oom['capacity'])}")


def _row(m: str, found, result, cluster) -> dict:
    """The table row of strategy method ``m``: ``found`` its search, ``result`` its judged
    choice (links recorded)."""
    from .solvers import SOLVERS
    from .solvers.hybrid import STRATEGY_METHODS

    s, b = result.plan.strategy, result.breakdown()
    hybrid = m in STRATEGY_METHODS
    frac = max(result.peak[r] / cluster.devices[r].memory for r in result.peak)
    peak_rank = max(result.peak, key=lambda r: (result.peak[r], -r))
    parts = {f"{k}_ms": float(v) for k, v in b.items() if k != "step"}
    return {"method": m, "family": "hybrid" if hybrid else SOLVERS[m].family,
            "objective": "step",
            "status": "time_limit" if "time limit" in found.notes else "heuristic",
            "makespan_ms": result.step_ms, "max_load_ms": math.nan,
            "comm_ms": parts["tp_ms"] + parts["pp_ms"] + parts["dp_ms"] + parts.get("ep_ms", 0.0),
            "comm_bytes": math.nan, "peak_mem_frac": frac, "live_mem_frac": frac,
            "devices_used": s.devices, "feasible": result.feasible,
            "violations": "" if result.oom is None else _oom_text(result.oom),
            "solve_s": float(found.seconds), "error": "", "proven_bound": math.nan,
            "strategy": s.describe(), "tp": s.tp, "sp": s.sp, "pp": s.pp, "dp": s.dp,
            "mbs": s.mbs, "n_micro": result.plan.n_micro, "schedule": s.schedule,
            "virtual": s.virtual, "recompute": s.recompute_label, "zero": s.zero, **parts,
            "peak_mem_bytes": float(result.peak[peak_rank]),
            "capacity_bytes": float(cluster.devices[peak_rank].memory),
            "mfu": result.mfu(), "space_bound_ms": float(found.bound), "grid": found.grid,
            "judged": found.judged,
            "paper": (STRATEGY_METHODS[m] if hybrid else SOLVERS[m]).paper}


PIPELINE_FAMILIES = ("pipeline", "partitioning")
"""The op-placing families whose placements of one micro-batch are pipeline stages (they
minimise the most loaded device, pipelined training's time per micro-batch, or a
latency over stages): on a training problem :func:`as_pipeline` judges them as strategies."""


def as_pipeline(m: str, graph, cluster, problem, gbs: int, time_limit):
    """Op-placing method ``m`` on a training problem, where meaningful: it places the ops of
    one micro-batch's step (``graph``) on the GPUs of the cluster's first node; when each GPU's
    forward ops are one run of the chain, the runs are pipeline stages
    (:func:`~workbench.transforms.parallel.cuts_from_placement`), run with tp 1 and data
    parallelism over the cluster's other GPUs (the largest ``dp`` with ``pp x dp`` GPUs whose
    micro-batches divide the global batch), judged like every strategy. ``(found, result)``
    (``found`` a :class:`~workbench.solvers.hybrid.SearchResult` of one strategy), or
    :class:`~workbench.errors.NotApplicableError` saying in one line why not (a family that
    shortens one micro-batch's makespan; a placement that is not a pipeline split).

    >>> import workbench as wb
    >>> from workbench.workloads import resolve
    >>> from workbench.costs.llm import parse_spec
    >>> g, _ = resolve("gpt:layers=2,hidden=128,heads=4,seq=64,vocab=1000")
    >>> found, r = as_pipeline("pipedream", g, wb.Cluster.preset("8xA100-80g"),
    ...                        (parse_spec(g.meta["model"]), "A100-80G"), 16, None)
    >>> s = found.plan.strategy
    >>> (s.tp, s.pp * s.dp <= 8, r.feasible, r.step_ms == found.step_ms)
    (1, True, True, True)
    """
    from .cluster import Cluster
    from .errors import PlanError
    from .judge.training import simulate_training
    from .solvers import SOLVERS, solve
    from .solvers.hybrid import STRATEGY_METHODS, SearchResult, strategy_bound
    from .transforms.parallel import Strategy, cuts_from_placement, parallelize

    config, gpu = problem
    family = SOLVERS[m].family
    head = f"places the ops of one micro-batch of {config.spec}"
    if family not in PIPELINE_FAMILIES:
        raise NotApplicableError(
            f"{head} to shorten its makespan (an op-placing method of the {family} family); "
            f"a training problem needs a "
            f"pipeline split or a tp x pp x dp strategy for a step of {gbs} sequences: "
            f"{', '.join(STRATEGY_METHODS)} or the {'/'.join(PIPELINE_FAMILIES)} families")
    first = cluster.devices[0].host
    node = Cluster([d for d in cluster.devices if d.host == first],
                   intra_host=cluster.intra_host, host_link=cluster.host_link,
                   name=f"{cluster.name} (first node)")
    t0, c0 = time.perf_counter(), time.process_time()
    placed = solve(graph, node, method=m, time_limit=time_limit)
    try:
        cuts = cuts_from_placement(config, placed.placement)
        pp = len(cuts)
        dp = next(d for d in range(len(cluster.devices) // pp, 0, -1)
                  if gbs % (config.mbs * d) == 0)
        plan = parallelize(config, cluster, Strategy(pp=pp, dp=dp, mbs=config.mbs,
                                                     global_batch=gbs), cuts=cuts, gpu=gpu)
    except PlanError as e:
        raise NotApplicableError(f"{head}; its placement is not a pipeline strategy: "
                                 f"{e}") from None
    result = simulate_training(plan)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    notes = (f"{m}'s placement of one micro-batch on {len(node.devices)} GPUs as {pp} pipeline "
             f"stage{'s' if pp > 1 else ''}, data parallel over {dp} replicas")
    return SearchResult(m, plan, result, 1, 1, int(result.feasible), 0, wall, cpu,
                        strategy_bound(plan), [(wall, result.step_ms)], notes), result


def _op_plan(m: str, found, result):
    """The op-level plan of one micro-batch recording ``m``'s strategy, its search's anytime
    curve as progress (``plan.stats["progress"]``, the searched space's bound beside it)."""
    plan = result.plan.to_plan()
    plan.method = m
    plan.stats.update(solve_s=float(found.seconds), judged=found.judged, grid=found.grid,
                      progress=[{"s": float(t), "objective": float(v),
                                 "bound": float(found.bound)} for t, v in found.curve])
    return plan


def compare_training(graph, cluster, methods, *, problem, global_batch: int | None,
                     time_limit: float | None, progress, settings: dict,
                     columns: list) -> Comparison:
    """The strategy methods of ``methods`` (default: all of them) on training problem
    ``problem`` (:func:`training_problem`); see the module docstring. ``columns``: the
    table's columns before :data:`TRAINING_COLUMNS` (:data:`workbench.compare.COLUMNS`)."""
    import pandas as pd

    from .judge.training import simulate_training
    from .solvers import SOLVERS
    from .solvers.hybrid import STRATEGY_METHODS, search_strategy

    config, gpu = problem
    methods = list(STRATEGY_METHODS) if methods is None else list(methods)
    gbs = default_global_batch(config, cluster) if global_batch is None else int(global_batch)
    settings.update(methods=methods, training={"model": config.spec, "gpu": gpu,
                                               "global_batch": gbs})
    left_out = settings["left_out"] = {}
    rows, plans, training, searched = [], {}, {}, {}
    bar = _bar(progress, len(methods))
    for k, m in enumerate(methods):
        if m in SOLVERS and m not in STRATEGY_METHODS:
            try:
                found, result = as_pipeline(m, graph, cluster, problem, gbs, time_limit)
            except (NotApplicableError, InfeasibleError) as e:
                left_out[m] = " ".join(str(e).split())
            else:
                searched[m], training[m] = found, result
                rows.append(_row(m, found, result, cluster))
                plans[m] = _op_plan(m, found, result)
        elif m not in STRATEGY_METHODS:
            left_out[m] = (f"places the ops of one micro-batch of {config.spec} (no strategy "
                           f"method); a training problem needs a tp x pp x dp strategy for a "
                           f"step of {gbs} sequences: {', '.join(STRATEGY_METHODS)}")
        else:
            if bar is not None:
                bar.set_postfix_str(m)
            t0 = time.perf_counter()
            try:
                found = search_strategy(m, config, cluster, global_batch=gbs,
                                        time_limit=time_limit, baseline=searched.get("megatron"))
            except (NotApplicableError, InfeasibleError) as e:
                left_out[m] = " ".join(str(e).split())
            else:
                searched[m] = found
                same = [x for x in training if searched[x].plan is found.plan]
                result = training[same[0]] if same else simulate_training(found.plan)
                training[m] = result
                rows.append(_row(m, found, result, cluster))
                plans[m] = _op_plan(m, found, result)
                rows[-1]["solve_s"] = float(found.seconds or time.perf_counter() - t0)
        if bar is not None:
            bar.update(1)
        elif callable(progress):
            progress(k + 1, len(methods), m)
    if bar is not None:
        bar.close()
    df = pd.DataFrame(rows, columns=list(columns) + TRAINING_COLUMNS)
    lb = min((b for b in df["space_bound_ms"].astype(float) if math.isfinite(b)),
             default=math.nan)
    df["makespan_lb"] = lb
    df["makespan_gap"] = [v / lb - 1 if lb > 0 else math.nan
                          for v in df["makespan_ms"].astype(float)]
    bounds = {"makespan_ms": lb, "max_load_ms": math.nan, "min_devices": 1, "analytic": {},
              "proven": {}, "space": {m: float(f.bound) for m, f in searched.items()}}
    df = df.round({c: 6 for c in ("makespan_ms", "makespan_lb", "comm_ms")})
    return Comparison(df, plans, schedules={}, bounds=bounds, settings=settings, graph=graph,
                      cluster=cluster, training=training)


def _bar(progress, total: int):
    if progress is not True:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="compare", leave=False)


def check_training_args(problem, global_batch, measure, params=None) -> None:
    """What :func:`workbench.compare` refuses with a training option on the wrong problem."""
    given = [m for m, p in (params or {}).items() if p]
    if given and problem is not None:
        raise SolverError(f"params given for {', '.join(map(str, given))}: the strategy "
                          f"methods of a training problem take no parameters")
    if global_batch is not None and problem is None:
        raise SolverError("global_batch applies to an LLM training problem only (gpt:... or "
                          "llama:... on a GPU-node cluster such as 8xA100-80g)")
    if global_batch is not None and (isinstance(global_batch, bool) or
                                     not isinstance(global_batch, int) or global_batch < 1):
        raise SolverError(f"global_batch must be a positive number of sequences, got "
                          f"{global_batch!r}")
    if measure and problem is not None:
        raise SolverError("measure=True runs op-level plans on local devices; a training "
                          "problem's strategies are judged only")
