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
row's own in ``space_bound_ms``). Op-placing methods are left out with the reason: they place
the ops of one micro-batch's step, not a parallel step of the global batch.

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

__all__ = ["TRAINING_COLUMNS", "check_training_args", "compare_training", "default_global_batch",
           "not_training", "training_problem"]

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
    from .solvers.hybrid import STRATEGY_METHODS

    s, b = result.plan.strategy, result.breakdown()
    frac = max(result.peak[r] / cluster.devices[r].memory for r in result.peak)
    peak_rank = max(result.peak, key=lambda r: (result.peak[r], -r))
    parts = {f"{k}_ms": float(v) for k, v in b.items() if k != "step"}
    return {"method": m, "family": "hybrid", "objective": "step",
            "status": "time_limit" if "time limit" in found.notes else "heuristic",
            "makespan_ms": result.step_ms, "max_load_ms": math.nan,
            "comm_ms": parts["tp_ms"] + parts["pp_ms"] + parts["dp_ms"],
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
            "judged": found.judged, "paper": STRATEGY_METHODS[m].paper}


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
        if m not in STRATEGY_METHODS:
            kind = "an op-placing method" if m in SOLVERS else "no strategy method"
            left_out[m] = (f"places the ops of one micro-batch of {config.spec} ({kind}); a "
                           f"training problem needs a tp x pp x dp strategy for a step of "
                           f"{gbs} sequences: {', '.join(STRATEGY_METHODS)}")
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
