"""Per-stage widths: the replication of Tarnawski et al.'s DP, each stage its own ``(tp, dp)``.

Tarnawski et al. (NeurIPS 2020, appendix C.2 "Replication", after PipeDream) let the DP
choose, with each stage's subgraph, how many devices replicate it: the recurrence
``min_{k''} max(dp[I'][k' - k''], acc(I \\ I', k''))``, where ``acc(., k'')`` is the stage's
time per sample on ``k''`` replicas plus the synchronisation of its weights by all-reduce.
:func:`replication_split` is that DP on a transformer's op chain (the ideals are the chain's
prefixes) under the training judge's costs: the state is the prefix and the GPUs used, each
stage chooses its boundaries and its data-parallel degree ``dp_k`` (a divisor of the
micro-batch: each replica runs ``micro / dp_k`` sequences of every micro-batch) within its
memory (``pp - k`` stashes under 1F1B), the stage costing its own op times at that share
(:func:`.costs.op_vectors`) plus its gradients' all-reduce over ``dp_k`` (the paper's sum
form: the all-reduce counted in full, :func:`workbench.judge.collectives.collective_ms`).
The pipeline's objective is the 1F1B one of :func:`.stages.stage_split`, ``max_k (S_k + m
w_k)``; the fill ``S_k`` is counted with the uniform strategy's op times (the widths of the
earlier stages are not part of the DP's state: an approximation of the DP only, the plan is
judged). All stages sum to the strategy's GPUs.

**Extensions, named as such, off by default**: ``stage_tp=True`` lets each stage also choose
its tensor-parallel degree (Megatron Core's ``--encoder-tensor-model-parallel-size`` gives an
encoder its own tp; the paper replicates only); with per-stage recomputation the stage
chooses its recomputation too (as :func:`.stages.stage_split`'s ``alternatives``).

:func:`replicate` runs the DP for a judged 1F1B plan (same GPUs, micro-batch of ``mbs x dp``
sequences, recomputation, ZeRO) and judges what it returns
(:func:`workbench.judge.training.simulate_training` executes per-stage widths: the sends
between stages of unequal widths reshard the micro-batch, see
:meth:`~workbench.transforms.parallel.TrainingPlan.route`).

Examples
--------
>>> from workbench.cluster import Cluster
>>> from workbench.judge.training import simulate_training
>>> from workbench.transforms.parallel import Strategy, parallelize
>>> p = parallelize("llama:layers=2,hidden=512,heads=8,seq=512,vocab=128000",
...                 Cluster.preset("8xA100-80g"), Strategy(pp=2, dp=2, mbs=3, global_batch=24))
>>> r = simulate_training(p)
>>> q, rq, n = replicate(p, r)
>>> q.strategy.stage_widths, rq.step_ms < 0.8 * r.step_ms
(((1, 1), (1, 3)), True)
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from ...errors import PlanError
from ...judge.collectives import collective_ms
from ...transforms.parallel import parallelize
from .costs import op_vectors, static_bytes_per_param
from .stages import cut_points

__all__ = ["replicate", "replication_split"]

RECOMPUTE = ("none", "selective", "full")


def replication_split(options, *, pp: int, n_micro: int, devices: int, capacity: float,
                      ref_work, cut_ok=None, send_ms=None):
    """The DP of the module docstring: ``(objective, cuts, choice)`` (``choice[k]`` the
    index of stage ``k``'s option), or None when no split fits in ``devices`` GPUs.

    ``options``: per stage width, ``(gpus, vectors, per_param, sync)`` -- its GPUs, its
    :class:`.costs.OpVectors` (per replica and micro-batch), bytes of states a parameter on
    a replica, and ``sync(param_count) -> ms`` (its all-reduce; vectorised). ``ref_work``:
    the op times the fill ``S_k`` is counted with.

    >>> import numpy as np
    >>> from workbench.solvers.hybrid.costs import OpVectors
    >>> z = np.zeros(3)
    >>> one = OpVectors(np.array([1., 1., 4.]), z, z, z, 0.)
    >>> two = OpVectors(np.array([.5, .5, 2.]), z, z, z, 0.)   # two replicas, half each
    >>> opts = [(1, one, 16., lambda p: 0. * p), (2, two, 16., lambda p: 0. * p)]
    >>> replication_split(opts, pp=2, n_micro=4, devices=3, capacity=1e9, ref_work=one.work)
    (10.0, [0, 2], [0, 1])
    """
    n = len(ref_work)
    ok = np.ones(n + 1, dtype=bool) if cut_ok is None else np.array(cut_ok, dtype=bool)
    ok[0] = ok[n] = True
    pos = np.flatnonzero(ok)
    N, m = len(pos), n_micro
    send = np.zeros(n + 1) if send_ms is None else np.asarray(send_ms, dtype=float)
    sp = send[pos]
    P = np.concatenate([[0.0], np.cumsum(ref_work)])[pos]
    upper = np.triu(np.ones((N, N), dtype=bool), 1)
    prep = []
    for g, v, per_param, sync in options:
        W = np.concatenate([[0.0], np.cumsum(v.work)])[pos]
        S = np.concatenate([[0.0], np.cumsum(v.params)])[pos]
        A = np.concatenate([[0.0], np.cumsum(v.stash)])[pos]
        params = S[None, :] - S[:, None]
        cost = P[:, None] + m * (W[None, :] - W[:, None] + sp[:, None] + sp[None, :]) + \
            sync(params)
        prep.append((g, cost, params * per_param, A[None, :] - A[:, None], v.transient))
    gmin = min(o[0] for o in prep)
    best = {0: np.where(np.arange(N) == 0, 0.0, np.inf)}
    back: list = []
    cols = np.arange(N)
    for k in range(pp):
        new: dict = {}
        step: dict = {}
        for oi, (g, cost, static, stash, transient) in enumerate(prep):
            mem_ok = upper & (static + min(pp - k, m) * stash + transient <= capacity)
            c = np.where(mem_ok, cost, np.inf)
            for u0, b in best.items():
                u = u0 + g
                if u + (pp - 1 - k) * gmin > devices or (k == pp - 1 and u != devices):
                    continue
                cand = np.maximum(b[:, None], c)
                arg = cand.argmin(axis=0)
                val = cand[arg, cols]
                if u not in new:
                    new[u] = val
                    step[u] = (arg, np.full(N, oi), np.full(N, u0))
                else:
                    better = val < new[u]
                    new[u] = np.where(better, val, new[u])
                    a, o, p = step[u]
                    step[u] = (np.where(better, arg, a), np.where(better, oi, o),
                               np.where(better, u0, p))
        best = new
        back.append(step)
    if devices not in best or not np.isfinite(best[devices][N - 1]):
        return None
    cuts, choice, j, u = [], [], N - 1, devices
    for k in range(pp - 1, -1, -1):
        arg, opt, prev = back[k][u]
        choice.append(int(opt[j]))
        j, u = int(arg[j]), int(prev[j])
        cuts.append(int(pos[j]))
    return float(best[devices][N - 1]), cuts[::-1], choice[::-1]


def _options(plan, micro: int, *, stage_tp: bool, recomputes):
    """``(labels, options)`` of :func:`replication_split` for ``plan``'s strategy with
    micro-batches of ``micro`` sequences: each ``(tp, dp, recompute)`` a stage may take
    (``dp`` dividing the micro-batch, ``tp`` the strategy's or, with ``stage_tp``, any
    dividing the model's heads and widths)."""
    s, cfg, cl = plan.strategy, plan.config, plan.cluster
    total = s.devices
    tps = [t for t in (1, 2, 4, 8) if t * s.pp <= total] if stage_tp else [s.tp]
    gbytes = 4 if cfg.precision == "fp32" else 2
    labels, options = [], []
    for t in tps:
        if s.sp and t == 1:
            continue
        for d in range(1, micro + 1):
            if micro % d or t * d > total - (s.pp - 1):
                continue
            try:
                local = parallelize(cfg, cl, replace(s, tp=t, dp=1, pp=1, mbs=micro // d,
                                                     global_batch=micro // d, schedule="1f1b",
                                                     virtual=1, stage_recompute=(),
                                                     stage_widths=()), gpu=plan.gpu)
            except PlanError:
                continue
            nodes = len(set(plan.hosts[:t * d:t]))
            kind = "allreduce" if s.zero == 0 else "reducescatter"
            lo, hi = (collective_ms(kind, x, d, nodes, cl.intra_host, cl.inter_host,
                                    s.algorithm) for x in (1e6, 2e6))
            sync = _allreduce_of(0.0 if d == 1 else 2 * lo - hi,
                                 0.0 if d == 1 else gbytes * (hi - lo) / 1e6)
            per_param = static_bytes_per_param(cfg.precision, s.zero, d)
            for rec in recomputes:
                labels.append((t, d, rec))
                options.append((t * d, op_vectors(local, rec), per_param, sync))
    return labels, options


def _allreduce_of(base: float, per_param: float):
    """``sync(params)`` of :func:`replication_split`: a stage's gradient synchronisation,
    affine in its parameters as the collectives are (``base`` ms plus ``per_param`` ms a
    parameter; nothing for a stage without parameters).

    >>> import numpy as np
    >>> _allreduce_of(0.5, 1e-6)(np.array([0.0, 1e6]))
    array([0. , 1.5])
    """
    def sync(params):
        return np.where(params > 0, base + per_param * params, 0.0)
    return sync


def replicate(plan, result, *, stage_tp: bool = False, per_stage_recompute: bool = False,
              deadline: float | None = None):
    """The paper's replication for a judged 1F1B ``plan`` (see the module docstring): the DP's
    widths and cuts judged, returned where faster and in memory, else ``plan`` and ``result``
    unchanged. ``stage_tp``, ``per_stage_recompute``: the extensions. Returns ``(plan,
    result, judged)``."""
    s = plan.strategy
    if s.pp < 2 or s.virtual > 1 or s.stage_widths or \
            (deadline is not None and time.perf_counter() >= deadline):
        return plan, result, 0
    per_stage = (per_stage_recompute and s.recompute == "none") or bool(s.stage_recompute)
    recs = RECOMPUTE if per_stage else (s.recompute,)
    vec = op_vectors(plan, s.recompute_of(s.pp - 1))
    ok, send = cut_points(plan, vec)
    judged = 0
    base = plan
    ref = _uniform_objective(base, recs, vec, ok, send)
    for micro in _micro_sizes(base):
        for wide in (False, True)[:1 + stage_tp]:   # the paper's, then the extension's
            if deadline is not None and time.perf_counter() >= deadline:
                return plan, result, judged
            labels, options = _options(base, micro, stage_tp=wide, recomputes=recs)
            # the paper's split judged where its DP beats the uniform widths (judging
            # unequal widths simulates every rank); the extension's always
            cand = _judged_split(base, micro, labels, options, vec, ok, send,
                                 math.inf if wide else ref) if options else None
            if cand is not None:
                judged += 1
                if cand[1].feasible and cand[1].step_ms < result.step_ms * (1 - 1e-9):
                    plan, result = cand
    return plan, result, judged


def _micro_sizes(plan) -> list:
    """The micro-batch sizes (sequences) the widths are chosen for: the plan's, then the
    other divisors of the global batch within a factor of two of it (a stage of three
    replicas needs a micro-batch that three divide).

    >>> from workbench.cluster import Cluster
    >>> from workbench.transforms.parallel import Strategy
    >>> _micro_sizes(parallelize("gpt:layers=2,hidden=64,heads=4,seq=16,vocab=100",
    ...     Cluster.preset("8xA100-80g"), Strategy(pp=2, dp=4, mbs=1, global_batch=36)))
    [4, 2, 3, 6]
    """
    M, gbs = plan.micro_seqs, plan.strategy.global_batch
    return [M] + [x for x in range(max(1, M // 2), 2 * M + 1) if x != M and gbs % x == 0]


def _split(plan, micro, options, vec, ok, send):
    """:func:`replication_split` of ``plan``'s pipeline with ``options`` and micro-batches of
    ``micro`` sequences."""
    s = plan.strategy
    cap = min(plan.cluster.devices[r].memory for r in range(s.devices))
    return replication_split(options, pp=s.pp, n_micro=s.global_batch // micro,
                             devices=s.devices, capacity=cap, ref_work=vec.work, cut_ok=ok,
                             send_ms=send)


def _uniform_objective(plan, recs, vec, ok, send) -> float:
    """The DP's objective with every stage at the plan's own width: a split of unequal
    widths is judged only where the DP finds it better than this (``inf`` where none fits)."""
    s = plan.strategy
    labels, options = _options(plan, plan.micro_seqs, stage_tp=False, recomputes=recs)
    same = [o for lab, o in zip(labels, options) if lab[:2] == (s.tp, s.dp)]
    split = _split(plan, plan.micro_seqs, same, vec, ok, send) if same else None
    return math.inf if split is None else split[0]


def _judged_split(plan, micro, labels, options, vec, ok, send, ref=math.inf):
    """The plan :func:`replication_split` makes of ``plan`` with ``options`` (micro-batches
    of ``micro`` sequences), judged: ``(plan, result)``, or None where no split fits, the
    stages come out of equal widths, or the DP's objective is not below ``ref``."""
    from ...judge.training import simulate_training

    s = plan.strategy
    split = _split(plan, micro, options, vec, ok, send)
    if split is None or split[0] >= ref * (1 - 1e-9):
        return None
    picked = [labels[i] for i in split[2]]
    widths = tuple((t, d) for t, d, _ in picked)
    if len(set(widths)) == 1:     # every stage alike: the uniform DP's ground
        return None
    dmax = max(d for _, d in widths)
    stage_rec = tuple(r for _, _, r in picked)
    new = replace(s, mbs=micro // dmax, stage_widths=widths,
                  stage_recompute=stage_rec if len(set(stage_rec)) > 1 else (),
                  recompute=stage_rec[0])
    try:
        cand = parallelize(plan.config, plan.cluster, new, cuts=split[1], gpu=plan.gpu)
    except PlanError:
        return None
    return cand, simulate_training(cand, record_links=False)
