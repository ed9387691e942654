"""``tarnawski``: pipeline stages cut anywhere in the op chain by the dynamic program of
Tarnawski et al., with tensor/data parallelism, micro-batch size and recomputation chosen
around it; judged like every other plan.

Tarnawski, Phanishayee, Devanur, Mahajan and Nina Paravecino (NeurIPS 2020, "Efficient
Algorithms for Device Placement of DNN Graph Operators", section 4) split a DNN into
pipeline stages by a dynamic program over the graph's ideals minimising the largest stage
load (the max-load objective of pipelined training) under each device's memory. On the chain
of a transformer (:func:`workbench.costs.llm.chain`) the ideals are the chain's prefixes, so
the program is ``T[k][j] = min_i max(T[k-1][i], w(i, j))`` over ``k`` stages and op positions
``i < j``, where ``w(i, j)`` is the work of ops ``i .. j-1`` per micro-batch on one rank and
``(i, j)`` is allowed on stage ``k`` when its parameter states plus the stashes of its
in-flight micro-batches (``pp - k`` under 1F1B) plus one recomputed block fit in memory.
Costs come from the judge's own model (:func:`.costs.op_vectors`: op roofline times of the
shard, tensor-parallel collectives of :mod:`workbench.judge.collectives`, recomputation).

**Extension (named as such): uniform hybrid degrees around the DP.** The DP's plans share
one ``tp`` and ``dp`` across their stages (Megatron's layout; the paper's per-stage replication
follows it, below), so here the DP chooses the stage boundaries
(at op granularity: a stage may end inside a block, which is where a large LM head can be
balanced) and an outer loop enumerates ``tp`` (with and without sequence parallelism),
``pp``, ``dp``, micro-batch size, interleaving (2, 3, 4, 6 or 8 chunks a stage, whether or
not they divide the layers), recomputation and ZeRO stage -- in the order of their lower
bounds (:mod:`.bound`), stopping at the first bound not below the best judged step. Each
strategy's DP split is judged by :func:`workbench.judge.training.simulate_training`; the best
configuration of :func:`.megatron.megatron` is a candidate too, so the answer is never worse
than Megatron's grid under the judge.

**Extension (named as such): per-stage recomputation.** Under 1F1B stage ``k`` holds ``pp -
k`` micro-batches' activations, the first stage the most, the last one: recomputing only where
memory needs it is cheaper than recomputing everywhere (Megatron Core sets recomputation per
pipeline rank; Aceso searches it per stage). For each 1F1B strategy the DP takes each stage's
recomputation (none, selective, full) with its boundaries, charging the stage its own work,
stash and recomputed bytes (:func:`.stages.stage_split` with ``alternatives``); the plan
carries the choice (``Strategy.stage_recompute``) and the judge executes it. Its lower bound
counts the work without recomputation and the memory of full recomputation's stash.

**The paper's replication** (its appendix C.2; :mod:`.replication`): from the fastest plans
found (and the fastest of each other tp), the DP chooses each stage's data-parallel degree
with its boundaries and the stage count (on at most the plan's GPUs), costed by the judge's
model, for every micro-batch size; its best splits, of per-stage widths
(``Strategy.stage_widths``), are judged and the fastest kept where faster. **Extension (named as
such, off by default): per-stage tensor parallelism** (``stage_tp=True``): each stage also
chooses its ``tp``.

Examples
--------
>>> from workbench.cluster import Cluster
>>> from workbench.solvers.hybrid import megatron
>>> cl = Cluster.preset("8xA100-80g")
>>> spec = "llama:layers=4,hidden=256,heads=4,seq=128,vocab=32000"
>>> h = tarnawski(spec, cl, global_batch=16, gpus=4)
>>> m = megatron(spec, cl, global_batch=16, gpus=4)
>>> h.step_ms <= m.step_ms and h.bound <= h.step_ms
True
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from ...errors import PlanError
from ...transforms.parallel import parallelize
from .bound import widths_bound
from .costs import static_bytes_per_param
from .megatron import SearchResult, check_search, grid, judge_all, megatron
from .replication import replicate
from .stages import cut_points, stage_split

__all__ = ["refine_cuts", "stage_split", "tarnawski"]


def refine_cuts(plan, result, *, max_judged: int = 40, deadline: float | None = None):
    """Judge-guided refinement of a plan's stage boundaries (an extension, named as such:
    first-improvement hill climbing): each cut moved by one block or to the next allowed cut
    point (:func:`.split.cut_points`) either way, kept where the judged step drops and memory fits;
    no move is judged after ``deadline`` (a :func:`time.perf_counter` time).
    Returns ``(plan, result, judged)``.

    >>> from workbench.cluster import Cluster
    >>> from workbench.judge.training import simulate_training
    >>> from workbench.transforms.parallel import Strategy
    >>> p = parallelize("llama:layers=4,hidden=256,heads=4,seq=128,vocab=32000",
    ...                 Cluster.preset("8xA100-80g"), Strategy(pp=2, global_batch=8))
    >>> r = simulate_training(p)
    >>> q, rq, n = refine_cuts(p, r)
    >>> rq.step_ms <= r.step_ms and q.cuts != p.cuts
    True
    """
    from ...judge.training import simulate_training
    from .costs import op_vectors

    if plan.n_chunks < 2:
        return plan, result, 0
    ok, _ = cut_points(plan, op_vectors(plan))
    allowed = np.flatnonzero(ok[:-1])
    block = sum(1 for o in plan.ops if o.layer == 0)
    judged, improved = 0, True
    while improved and judged < max_judged:
        improved = False
        for k in range(1, plan.n_chunks):
            c = plan.cuts[k]
            near = [int(a) for a in allowed if a != c and abs(a - c) <= block]
            moves = {c - block, c + block, *[a for a in near if a < c][-1:],
                     *[a for a in near if a > c][:1]}
            for new in sorted(moves):
                cuts = list(plan.cuts)
                cuts[k] = new
                if not 0 < new < len(plan.ops) or not ok[new] or any(b <= a for a, b in zip(cuts, cuts[1:])) or \
                        cuts[-1] >= len(plan.ops) or judged >= max_judged:
                    continue
                if deadline is not None and time.perf_counter() >= deadline:
                    return plan, result, judged
                cand = parallelize(plan.config, plan.cluster, plan.strategy, cuts=cuts,
                                   gpu=plan.gpu)
                r = simulate_training(cand, record_links=False)
                judged += 1
                if r.feasible and r.step_ms < result.step_ms * (1 - 1e-9):
                    plan, result, improved = cand, r, True
                    break
    return plan, result, judged


def _check_options(config, cluster, global_batch, baseline, refine, virtuals) -> None:
    """PlanError unless ``refine`` is a count, ``virtuals`` counts >= 2 and ``baseline`` a
    megatron search of this model, cluster and global batch."""
    if isinstance(refine, bool) or not isinstance(refine, int) or refine < 0:
        raise PlanError(f"refine must be an integer >= 0, got {refine!r}")
    try:
        vs = list(virtuals)
    except TypeError:
        vs = [virtuals]
    if any(isinstance(v, bool) or not isinstance(v, int) or v < 2 for v in vs):
        raise PlanError(f"virtuals must be integers >= 2 (interleaved chunks a stage), got "
                        f"{virtuals!r}")
    if baseline is None:
        return
    if isinstance(baseline, (list, tuple)):
        if not baseline:
            raise PlanError("baseline must be megatron(...) results, got an empty list")
        for b in baseline:
            _check_options(config, cluster, global_batch, b, refine, virtuals)
        return
    if not isinstance(baseline, SearchResult):
        raise PlanError(f"baseline must be the SearchResult of megatron(...), got "
                        f"{type(baseline).__name__}")
    p = baseline.plan
    if p is None:
        return
    other = []
    if replace(p.config, mbs=config.mbs) != config:
        other.append(f"model {p.config.spec} (not {config.spec})")
    if p.cluster is not cluster and p.cluster.to_dict() != cluster.to_dict():
        other.append(f"cluster {p.cluster.name!r} (not {cluster.name!r})")
    if p.strategy.global_batch != global_batch:
        other.append(f"global batch {p.strategy.global_batch} (not {global_batch})")
    if other:
        raise PlanError(f"baseline is a search of another problem: {', '.join(other)}")


def _per_stage(config, cluster, gpu):
    """``(alternatives, bound_of)``: the selective and full recomputation costings of a
    strategy's chain (cached), and the lower bound of a strategy whose stages choose their
    recomputation (the work without recomputation, the memory test with full recomputation's
    stash: both the least of any choice)."""
    from .bound import strategy_bound
    from .costs import OpVectors, op_vectors

    cache: dict = {}

    def alternatives(plan):
        s = plan.strategy
        key = (s.tp, s.sp, s.mbs, s.algorithm, len(set(plan.hosts[:s.tp])))
        if key not in cache:
            cache[key] = [op_vectors(plan, r) for r in PER_STAGE[1:]]
        return cache[key]

    def bound_of(plan, vec):
        if not _chooses_per_stage(plan.strategy):
            return strategy_bound(plan, vec)
        full = alternatives(plan)[-1]
        return strategy_bound(plan, OpVectors(vec.work, vec.params, full.stash, vec.out, 0.0))

    return alternatives, bound_of


PER_STAGE = ("none", "selective", "full")
"""The recomputation settings each 1F1B stage chooses among (in this order in the DP)."""


def _chooses_per_stage(s) -> bool:
    """Whether the search lets each stage of ``s`` choose its recomputation: 1F1B with
    several stages, entered as the strategy without recomputation."""
    return s.pp > 1 and s.virtual == 1 and s.recompute == "none" and not s.stage_recompute


def _replicated(plan, result, pool, tops, *, stage_tp, per_stage_recompute, deadline, curve,
                t0):
    """The best of ``plan`` and the per-stage widths :func:`.replication.replicate` finds
    from it, the 1F1B plans of ``pool`` and the fastest of ``tops`` (judged ``(step, plan,
    result)``) of each other tp (the DP's best splits over all these starts judged);
    ``(plan, result, judged)``."""
    if plan is None or result is None:
        return plan, result, 0
    seen = {(plan.strategy, tuple(plan.cuts))}
    # the pool's plans, and the fastest of every other tensor-parallel degree judged (the
    # paper's replication keeps one tp: the DP starts from each)
    tps = {p.strategy.tp for _, p, _ in pool if p is not None} | {plan.strategy.tp}
    others = {}
    for _, p, r in sorted(tops, key=lambda x: x[0]):
        t = p.strategy.tp
        if t not in tps and t not in others and p.strategy.virtual == 1 and \
                not p.strategy.stage_widths:
            others[t] = (p, r)
    starts = []
    for p, r in [(p, r) for _, p, r in pool] + list(others.values()):
        key = (p.strategy, tuple(p.cuts)) if p is not None else None
        if p is None or r is None or key in seen:
            continue
        seen.add(key)
        starts.append(p)
    q, rq, judged = replicate(plan, result, stage_tp=stage_tp,
                              per_stage_recompute=per_stage_recompute, deadline=deadline,
                              starts=starts)
    if rq.step_ms < result.step_ms * (1 - 1e-9):
        plan, result = q, rq
        curve.append((time.perf_counter() - t0, rq.step_ms))
    return plan, result, judged


def tarnawski(config, cluster, *, global_batch: int, gpus: int | None = None,
              baseline: SearchResult | None = None, time_limit: float | None = None,
              refine: int = 3, virtuals=(2, 3, 4, 6, 8), gpu=None,
              per_stage_recompute: bool = True, replication: bool = True,
              stage_tp: bool = False) -> SearchResult:
    """The fastest plan found (see the module docstring); ``virtuals``: the interleaved
    chunks a stage tried (any number: op-level cuts need no equal layer counts). ``baseline``: a
    :func:`.megatron.megatron` result already at hand, or a list of them (e.g. the balanced
    grid's and ``layout=True``'s; their best is a candidate), else the balanced grid is
    searched, pruned by the bound, with half of ``time_limit``, and its time counted in this
    search's. ``per_stage_recompute``: 1F1B strategies' stages choose their recomputation in
    the DP (an extension, see the module docstring). ``replication``: the paper's per-stage
    replication (:mod:`.replication`) on the fastest 1F1B plans found (``refine`` of them);
    ``stage_tp``: each stage also chooses its tensor-parallel degree there (an extension,
    off by default). ``time_limit`` bounds the whole call
    (baseline, DP search and refinement; one judged plan may run past it); the notes say
    "time limit reached" where it cut the search short."""
    config, gpu = check_search(config, cluster, global_batch=global_batch, gpus=gpus,
                               time_limit=time_limit, gpu=gpu)
    _check_options(config, cluster, global_batch, baseline, refine, virtuals)
    for name, flag in (("per_stage_recompute", per_stage_recompute),
                       ("replication", replication), ("stage_tp", stage_tp)):
        if not isinstance(flag, bool):
            raise PlanError(f"{name} must be True or False, got {flag!r}")
    t0, c0 = time.perf_counter(), time.process_time()
    deadline = None if time_limit is None else t0 + time_limit
    bases = list(baseline) if isinstance(baseline, (list, tuple)) else \
        [baseline or megatron(config, cluster, global_batch=global_batch, gpus=gpus,
                              prune=True, gpu=gpu,
                              time_limit=None if time_limit is None else time_limit / 2)]
    base = min(bases, key=lambda r: r.step_ms)
    strategies = [s for s in grid(config, cluster, global_batch=global_batch, gpus=gpus,
                                  virtuals=virtuals, divisible=False, gpu=gpu) if s.pp > 1]
    alternatives, bound_of = _per_stage(config, cluster, gpu)

    def plan_of(plan, vec):
        s = plan.strategy
        cap = min(cluster.devices[r].memory for r in range(s.devices))
        per_param = static_bytes_per_param(config.precision, s.zero, s.dp)
        ok, send = cut_points(plan, vec)
        chooses = per_stage_recompute and _chooses_per_stage(s)
        split = stage_split(vec, pp=s.pp, n_micro=plan.n_micro, capacity=cap,
                            per_param=per_param, virtual=s.virtual, cut_ok=ok, send_ms=send,
                            alternatives=alternatives(plan) if chooses else ())
        if split is None:
            return None
        if chooses:
            s = replace(s, stage_recompute=tuple(PER_STAGE[i] for i in split[2]))
        return parallelize(config, cluster, s, cuts=split[1], gpu=gpu)

    left = None if deadline is None else max(0.0, deadline - time.perf_counter())
    incumbent = (base.plan, base.result) if base.result is not None else None
    own = judge_all("tarnawski", config, cluster, strategies, prune=True, time_limit=left,
                    incumbent=incumbent, plan_of=plan_of, gpu=gpu,
                    bound_of=bound_of if per_stage_recompute else None)
    plan, result, judged = own.plan, own.result, own.judged
    pool = sorted(own.top + [t for b in bases for t in b.top], key=lambda x: x[0])[:refine]
    cut_short = widths_cut = False
    for _, p, r in pool:
        if deadline is not None and time.perf_counter() >= deadline:
            cut_short = True
            break
        p2, r2, n = refine_cuts(p, r, deadline=deadline)
        judged += n
        cut_short = deadline is not None and time.perf_counter() >= deadline
        if result is None or r2.step_ms < result.step_ms:
            plan, result = p2, r2
            own.curve.append((time.perf_counter() - t0, r2.step_ms))
    if replication or stage_tp:
        tops = own.top + [t for b in bases for t in b.top]
        plan, result, n = _replicated(plan, result, pool, tops, stage_tp=stage_tp,
                                      per_stage_recompute=per_stage_recompute,
                                      deadline=deadline, curve=own.curve, t0=t0)
        judged += n
        widths_cut = deadline is not None and time.perf_counter() >= deadline
    won = result is not None and base.result is not None and plan is not base.plan
    notes = (f"op-level stage split beats {base.method}'s best" if won else
             f"{base.method}'s best kept (a candidate of this search)")
    if plan is not None and plan.strategy.stage_widths:
        notes += "; per-stage widths (the paper's replication" + \
            (", tp per stage: extension)" if len({t for t, _ in plan.strategy.stage_widths}) > 1
             else ")")
    limited = [x for x in [b.notes for b in bases] + [own.notes] if "time limit" in x]
    if own.notes:            # e.g. the time limit was reached
        notes += "; " + own.notes
    if cut_short and not limited:
        notes += "; time limit reached: the refinement cut short"
    elif widths_cut and not limited and "time limit" not in notes:
        notes += "; time limit reached: the per-stage widths cut short"
    elif limited and "time limit" not in notes:
        notes += "; time limit reached in megatron's search"
    bound = min([own.bound] + [b.bound for b in bases])
    if replication or stage_tp:      # the space holds plans of per-stage widths too
        bound = min(bound, widths_bound(config, cluster, global_batch=global_batch, gpus=gpus,
                                        gpu=gpu, stage_tp=stage_tp))
    return SearchResult("tarnawski", plan, result, own.grid + sum(b.grid for b in bases),
                        judged + sum(b.judged for b in bases),
                        own.fits + sum(b.fits for b in bases),
                        own.ruled_out + sum(b.ruled_out for b in bases),
                        time.perf_counter() - t0, time.process_time() - c0, bound, own.curve,
                        notes)
