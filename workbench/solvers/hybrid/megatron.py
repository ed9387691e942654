"""``megatron``: the best configuration of Megatron-LM's grid, every valid one judged.

What a Megatron-LM user sweeps by hand (Narayanan et al. 2021, "Efficient Large-Scale Language
Model Training on GPU Clusters Using Megatron-LM", section 3 and its Figures 13-16): tensor
parallelism ``tp`` inside a node (1, 2, 4, 8, with and without sequence parallelism),
pipeline parallelism ``pp`` (balanced layers, Megatron's split), data parallelism ``dp`` on
the remaining GPUs, micro-batch size, the 1F1B or interleaved 1F1B schedule (``virtual`` 2 or
4 chunks a stage where the layers and micro-batches allow it), activation recomputation
(none, selective, full), the ZeRO stage (0 or 1 -- Megatron's distributed optimizer --,
2 and 3 only without pipelining, as DeepSpeed allows) and, on a model with experts, the
expert-parallel degree ``ep`` (Megatron-Core's ``--expert-model-parallel-size``: 1, 2, 4, ...
dividing both ``dp`` and the expert count; not with ZeRO-3; with ``tp > 1`` only under sequence
parallelism, as Megatron-Core requires). Every valid strategy is judged by
:func:`workbench.judge.training.simulate_training`; the fastest that fits in memory is
returned, with the grid's size, how many were judged and the time it took.

``prune=True`` judges the grid in the order of its lower bounds (:mod:`.bound`) and stops at
the first bound not below the best judged step: the same answer (every strategy left out is
provably no faster), far fewer simulations.

Examples
--------
>>> from workbench.cluster import Cluster
>>> r = megatron("gpt:layers=4,hidden=256,heads=4,seq=128,vocab=1000",
...              Cluster.preset("8xA100-80g"), global_batch=8, gpus=4)
>>> r.judged == r.grid - r.ruled_out, r.result.feasible
(True, True)
>>> p = megatron("gpt:layers=4,hidden=256,heads=4,seq=128,vocab=1000",
...              Cluster.preset("8xA100-80g"), global_batch=8, gpus=4, prune=True)
>>> p.step_ms == r.step_ms and p.judged <= r.judged
True
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ...costs.llm import LLMConfig, chain
from ...errors import PlanError
from ...judge.training import simulate_training
from ...transforms.parallel import MAX_MICRO, Strategy, check_inputs, gpu_of, parallelize
from .bound import strategy_bound
from .costs import op_vectors

__all__ = ["SearchResult", "check_search", "expert_degrees", "grid", "megatron",
           "space_bounds"]


@dataclass
class SearchResult:
    """What a strategy search found: the judged ``plan`` and ``result`` of its choice, the
    ``grid`` size (strategies of its space), ``judged`` (simulated), ``fits`` (judged and in
    memory), ``ruled_out`` (never judged: memory bound or lower bound), wall and CPU
    ``seconds``, ``bound`` (the least lower bound of the space), ``curve`` (``(seconds, best
    step)`` each time the best improved: the anytime curve), ``notes`` and ``top`` (the
    fastest judged ``(step, plan, result)`` that fit, best first)."""

    method: str
    plan: object
    result: object
    grid: int
    judged: int
    fits: int
    ruled_out: int
    seconds: float
    cpu_seconds: float
    bound: float
    curve: list = field(default_factory=list)
    notes: str = ""
    top: list = field(default_factory=list, repr=False)

    @property
    def step_ms(self) -> float:
        return self.result.step_ms if self.result is not None else math.inf

    @property
    def gap(self) -> float:
        """``step / bound - 1`` (0.05 = 5 % above the lower bound)."""
        return self.step_ms / self.bound - 1 if self.bound > 0 else math.inf

    def summary(self) -> dict:
        out = {"method": self.method, "grid": self.grid, "judged": self.judged,
               "fits": self.fits, "ruled_out": self.ruled_out,
               "seconds": round(self.seconds, 3), "cpu_seconds": round(self.cpu_seconds, 3),
               "bound_ms": round(self.bound, 3), "gap": round(self.gap, 4)}
        if self.result is not None:
            out.update(self.result.summary())
            out["cuts"] = list(self.plan.cuts)
        return out


def check_search(config, cluster, *, global_batch, gpus, time_limit, gpu=None) -> tuple:
    """``(config, gpu figures)`` of a strategy search, or a PlanError naming the bad input:
    an op graph or another object for the model, a cluster that is not one, a global batch
    or GPU count that is not a positive integer (``gpus`` at most the cluster's), a CPU among
    the GPUs searched, a time limit that is not a number >= 0, no GPU figures."""
    config = check_inputs(config, cluster, Strategy())
    if isinstance(global_batch, bool) or not isinstance(global_batch, int) or global_batch < 1:
        raise PlanError(f"global_batch must be an integer >= 1, got {global_batch!r}")
    n = len(cluster.devices)
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int)
                             or not 1 <= gpus <= n):
        raise PlanError(f"gpus must be an integer in [1, {n}] (cluster {cluster.name!r}), "
                        f"got {gpus!r}")
    if time_limit is not None and (isinstance(time_limit, bool) or
                                   not isinstance(time_limit, (int, float)) or
                                   not 0 <= time_limit < math.inf):
        raise PlanError(f"time_limit must be a number of seconds >= 0 or None, got "
                        f"{time_limit!r}")
    cpu = [d.name for d in cluster.devices[:gpus or n] if d.kind == "cpu"]
    if cpu:
        raise PlanError(f"cluster {cluster.name!r} has CPU device(s) {', '.join(cpu[:3])} among "
                        f"the GPUs searched; the training judge runs GPUs")
    return config, gpu_of(cluster, gpu)


def _node_size(cluster) -> int:
    return Counter(d.host for d in cluster.devices).most_common(1)[0][1]


def grid(config: LLMConfig, cluster, *, global_batch: int, gpus: int | None = None,
         schedules=("1f1b", "interleaved"), virtuals=(2, 4), divisible: bool = True,
         gpu=None, expert_parallel: bool = True) -> list:
    """Megatron's grid of :class:`~workbench.transforms.parallel.Strategy` on ``gpus`` GPUs
    (default: all of the cluster's) that :func:`parallelize` accepts (see the module
    docstring); ``virtuals`` the interleaved chunks a stage, ``divisible=False`` also those
    whose chunks cannot hold equal numbers of layers (op-level cuts can balance them);
    ``expert_parallel=False`` leaves out the expert-parallel degrees (:func:`expert_degrees`)
    of a model with experts.

    >>> from workbench.cluster import Cluster
    >>> from workbench.costs.llm import parse_spec
    >>> g = grid(parse_spec("gpt:layers=4,hidden=256,heads=4,seq=128,vocab=1000"),
    ...          Cluster.preset("8xA100-80g"), global_batch=16)
    >>> len(g), g[0].describe()
    (402, 'tp1 pp1 dp8 mbs1 gbs16 1f1b recompute=none zero0')
    """
    n = gpus or len(cluster.devices)
    out = []
    for tp in (t for t in (1, 2, 4, 8) if t <= min(_node_size(cluster), n) and n % t == 0):
        for pp in (p for p in range(1, n // tp + 1) if (n // tp) % p == 0
                   and p <= config.blocks):
            dp = n // (tp * pp)
            for mbs in (b for b in (1, 2, 4, 8) if global_batch % (b * dp) == 0):
                m = global_batch // (mbs * dp)
                scheds = [("1f1b", 1)]
                if pp > 1 and "interleaved" in schedules and m % pp == 0:
                    scheds += [("interleaved", v) for v in virtuals
                               if config.blocks % (pp * v) == 0 or
                               (not divisible and pp * v <= config.blocks)]
                scheds = [x for x in scheds if x[0] in schedules]
                zeros = (0,) if dp == 1 else (0, 1) if pp > 1 else (0, 1, 2, 3)
                eps = expert_degrees(config, dp) if expert_parallel else [1]
                for sp in ((False, True) if tp > 1 else (False,)):
                    for sched, v in scheds:
                        for rec in ("none", "selective", "full"):
                            out += [Strategy(tp=tp, pp=pp, dp=dp, mbs=mbs,
                                             global_batch=global_batch, schedule=sched,
                                             virtual=v, recompute=rec, zero=z, sp=sp, ep=e)
                                    for z in zeros for e in eps
                                    if e == 1 or (z < 3 and (sp or tp == 1))]
    return [p.strategy for p in _plans(config, cluster, out, gpu)]


def expert_degrees(config: LLMConfig, dp: int) -> list:
    """The expert-parallel degrees of Megatron's grid at ``dp`` replicas: 1, and for a model
    with experts the powers of two dividing both ``dp`` and the expert count
    (Megatron-Core's ``--expert-model-parallel-size``).

    >>> from workbench.costs.llm import parse_spec
    >>> expert_degrees(parse_spec("moe:8x7b"), 16), expert_degrees(parse_spec("llama:7b"), 16)
    ([1, 2, 4, 8], [1])
    """
    out, e = [1], 2
    while config.experts and e <= dp:
        if dp % e == 0 and config.experts % e == 0:
            out.append(e)
        e *= 2
    return out


def _plans(config, cluster, strategies, gpu=None) -> list:
    """The plans of the strategies :func:`parallelize` accepts (one chain per micro-batch
    size, shared by the plans)."""
    chains: dict = {}
    out = []
    for s in strategies:
        try:
            p = parallelize(config, cluster, s, gpu=gpu)
        except PlanError:
            continue
        if p.config not in chains:
            chains[p.config] = chain(p.config)
        p.__dict__["ops"] = chains[p.config]     # TrainingPlan.ops is a cached property
        out.append(p)
    return out


def space_bounds(config, cluster, strategies, *, gpu=None, bound_of=None) -> tuple:
    """``(plans, vectors, bounds)`` of the ``strategies`` :func:`parallelize` accepts: each
    plan's op costs (:func:`.costs.op_vectors`, shared by the plans of equal costs) and lower
    bound (``bound_of(plan, vectors)``, default :func:`.bound.strategy_bound`)."""
    plans = _plans(config, cluster, strategies, gpu)
    cache: dict = {}
    vecs = []
    for p in plans:
        s = p.strategy
        key = (s.tp, s.sp, s.mbs, s.recompute, s.algorithm, len(set(p.hosts[:s.tp])))
        if key not in cache:
            cache[key] = op_vectors(p)
        vecs.append(cache[key])
    return plans, vecs, [(bound_of or strategy_bound)(p, v) for p, v in zip(plans, vecs)]


def judge_all(method, config, cluster, strategies, *, prune, time_limit, incumbent=None,
              plan_of=None, notes="", gpu=None, bound_of=None):
    """Judge ``strategies`` (all, or in bound order until the bound reaches the best step);
    ``plan_of(plan, vectors)`` may return another plan of the strategy (new cuts), a list of
    plans (each judged) or None; ``bound_of(plan, vectors)`` the lower bound of what
    ``plan_of`` may return (default :func:`.bound.strategy_bound`)."""
    t0, c0 = time.perf_counter(), time.process_time()
    plans, vecs, bounds = space_bounds(config, cluster, strategies, gpu=gpu, bound_of=bound_of)
    order = sorted(range(len(plans)), key=lambda i: bounds[i]) if prune else \
        range(len(plans))
    best_plan, best = incumbent if incumbent is not None else (None, None)
    curve = [] if best is None else [(0.0, best.step_ms)]
    judged = fits = ruled = 0
    timed_out = False
    top: list = []
    for i in order:
        if math.isinf(bounds[i]) or (prune and best is not None and
                                     bounds[i] >= best.step_ms):
            ruled += 1
            continue
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            ruled += 1
            timed_out = True
            continue
        cands = [plans[i]] if plan_of is None else plan_of(plans[i], vecs[i])
        cands = [c for c in (cands if isinstance(cands, list) else [cands]) if c is not None]
        if not cands:
            ruled += 1
            continue
        for plan in cands:
            r = simulate_training(plan, record_links=False)
            judged += 1
            if r.feasible:
                fits += 1
                top.append((r.step_ms, len(top), plan, r))
                if best is None or r.step_ms < best.step_ms:
                    best_plan, best = plan, r
                    curve.append((time.perf_counter() - t0, r.step_ms))
    space_bound = min(bounds, default=math.inf)
    top = [(st, p, r) for st, _, p, r in sorted(top, key=lambda x: x[:2])[:8]]
    if timed_out:
        notes = (notes + "; " if notes else "") + "time limit reached: the rest not judged"
    return SearchResult(method, best_plan, best, len(plans), judged, fits, ruled,
                        time.perf_counter() - t0, time.process_time() - c0, space_bound,
                        curve, notes, top)


def _layout_plan_of(config, cluster, gpu=None):
    """A strategy's even split and the best split of its chain at block boundaries (the
    stage DP of :func:`.stages.stage_split` with cuts only where a block starts), both judged:
    what Megatron-LM's ``--pipeline-model-parallel-layout`` can express (any number of
    blocks on each pipeline and virtual stage, the embedding on the first, the head and loss
    on the last), the even split included."""
    from .costs import OpVectors, static_bytes_per_param
    from .stages import cut_points, stage_split

    def plan_of(plan, vec):
        s = plan.strategy
        if s.pp == 1:
            return plan
        ok, send = cut_points(plan, vec)
        n = len(plan.ops)
        pos = [0] + [i for i, o in enumerate(plan.ops) if 0 < i and ok[i] and
                     0 <= o.layer < config.blocks and plan.ops[i - 1].layer != o.layer] + [n]
        # the chain folded into its segments between block starts (the same DP, fewer cuts)
        seg = [np.add.reduceat(a, pos[:-1]) for a in (vec.work, vec.params, vec.stash,
                                                       vec.out)]
        folded = OpVectors(*seg, vec.transient)
        cap = min(cluster.devices[r].memory for r in range(s.devices))
        split = stage_split(folded, pp=s.pp, n_micro=plan.n_micro, capacity=cap,
                            per_param=static_bytes_per_param(config.precision, s.zero, s.dp),
                            virtual=s.virtual, send_ms=send[pos])
        if split is None:
            return plan
        cuts = [pos[c] for c in split[1]]
        return [plan] if cuts == plan.cuts else \
            [plan, parallelize(config, cluster, s, cuts=cuts, gpu=gpu)]

    return plan_of


def megatron(config, cluster, *, global_batch: int, gpus: int | None = None,
             prune: bool = False, time_limit: float | None = None, gpu=None,
             layout: bool = False, expert_parallel: bool = True) -> SearchResult:
    """The fastest strategy of Megatron's grid that fits in memory (see the module
    docstring); ``result`` is None when none fits. ``gpu``: the GPU figures of a cluster that
    is no GPU preset (a name of :data:`workbench.costs.llm.GPUS`). ``layout=True``: each
    pipelined strategy's blocks also split by the stage DP at block boundaries (Megatron-LM's
    ``--pipeline-model-parallel-layout``, which subsumes its
    ``--decoder-first/last-pipeline-num-layers``), interleaved chunks of unequal block counts
    allowed (method name ``megatron-layout``). ``expert_parallel=False``: the grid without
    expert parallelism (``ep = 1`` only) on a model with experts."""
    config, gpu = check_search(config, cluster, global_batch=global_batch, gpus=gpus,
                               time_limit=time_limit, gpu=gpu)
    strategies = grid(config, cluster, global_batch=global_batch, gpus=gpus, gpu=gpu,
                      divisible=not layout, expert_parallel=expert_parallel)
    if not strategies:
        raise PlanError(f"no strategy of Megatron's grid fits {config.spec} on "
                        f"{cluster.name} with global batch {global_batch}: every tp x pp x dp "
                        f"on {gpus or len(cluster.devices)} GPUs needs a global batch that is a "
                        f"multiple of mbs x dp (mbs 1, 2, 4 or 8) with at most "
                        f"{MAX_MICRO} micro-batches a replica, and pp at most the "
                        f"{config.blocks} blocks")
    return judge_all("megatron-layout" if layout else "megatron", config, cluster, strategies,
                     prune=prune, time_limit=time_limit, gpu=gpu,
                     plan_of=_layout_plan_of(config, cluster, gpu) if layout else None,
                     notes=("every valid strategy judged" if not prune else
                            "judged in bound order; the rest provably no faster") +
                     ("; blocks split by the stage DP at block boundaries" if layout else ""))
