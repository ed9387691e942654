"""A lower bound on the training step of a model on a cluster, for every strategy of a space.

For one strategy (tensor-parallel degree ``t``, sequence parallelism, micro-batch size,
recomputation, ``pp`` stages, ``m`` micro-batches per replica), the judge's cost model gives
each op's work per micro-batch on one rank (:func:`.costs.op_vectors`: roofline compute of its
shard -- the compute and memory-bandwidth work over the ``t`` devices of a tensor-parallel group
--, its recomputed forward and its blocking tensor-parallel collectives, the communication the
strategy cannot avoid). Whatever the stage boundaries, with ``W`` the work of one micro-batch:

* **pipeline bubble** (one chunk per stage, any schedule): stage ``i`` cannot start before the
  first micro-batch's forward crossed the stages before it, runs ``m w_i`` of work, and after
  its last backward the backward of that micro-batch still crosses the stages before it, so
  ``step >= S_{i-1} + m w_i`` (``S`` the work of the stages before ``i``); the partition that
  minimises the largest of these has ``step >= W / (1 - (1 - 1/m)^pp)``
  (``= m W / pp x (1 + (pp - 1) / 2m + ...)``, the bubble's minimum for ``m`` micro-batches);
  no op is split between stages, so also ``step >= m max_op w``;
* **interleaved** schedules (``virtual > 1``): ``step >= m W / pp`` (the average stage);
* **what follows the last backward** on each stage's rank: the optimizer step and ZeRO-1/2's
  gather of the updated parameters (with one stage also the last gradient bucket's
  synchronisation, and ZeRO-3's gather of the parameters before the first task): some stage does at least the average, ``step >= (m W + tail) / pp``
  (``m W + tail`` with one stage);
* **memory**: some stage holds at least ``1/pp`` of the parameter states and of one
  micro-batch's stash; a strategy where that exceeds the device memory cannot run (bound
  infinite).

The rest of the gradient synchronisation and the pipeline sends are left out (they may
overlap): the bound stays below every judged step of the strategy, and the least
bound over a space of strategies is below every method's answer in that space -- the
**gap** printed for every method is ``step / bound - 1``.

**Per-stage widths** (:func:`widths_bound`). A plan whose stages have their own ``(t_k,
d_k)`` (``Strategy.stage_widths``: the paper's replication, one ``t`` for every stage, or the
``stage_tp`` extension) is in no uniform strategy's space, so the least of the bounds above
does not cover it. For such a 1F1B plan on at most ``n`` GPUs, ``m`` micro-batches of ``M``
sequences, stage ``k`` on ``g_k = t_k d_k`` GPUs (``d_k`` divides ``M``: each replica runs
``b_k = M / d_k`` sequences of every micro-batch), let ``y_k`` be the work a rank of stage
``k`` does a micro-batch (every rank of a stage does the same: tensor-parallel ranks run the
same shards, replicas equal shares). With ``rho_o(t)`` the least over ``b | M`` of ``t
w_o(t, b) / b`` -- op ``o``'s forward and backward with its blocking tensor-parallel
collectives on a rank, times the group's ``t`` ranks, a sequence (no recomputation, the
least over sequence parallelism and the nodes a group of ``t`` consecutive ranks can span)
--, a stage runs ``g_k y_k >= M sum_{o in k} rho_o(t_k)`` rank-ms a micro-batch, so
``sum_k g_k y_k >= M R`` (``R = sum_o rho_o``). Then:

* **work conservation**: each rank's tasks, blocking collectives and optimizer step follow
  one another, so ``n step >= m M R + opt`` (``opt``: one Adam step over all parameters,
  no more than the sum of the ranks' steps since the roofline ``op_ms`` is subadditive);
* **pipeline fill** (stages of any width): as above ``step >= S_{<k} + m y_k`` for every
  ``k``, ``S_{<k} = sum_{j<k} y_j``; any set ``K`` of stages obeys the same inequalities
  (dropping stages only lowers ``S``), so ``sum_{k in K} y_k <= T (1 - (1 - 1/m)^|K|)`` with
  ``T = step``. Writing ``sum_k g_k y_k = int_0^inf sum_{g_k > s} y_k ds`` and noting that
  the stages wider than ``s`` are at most ``floor(n / v)`` (``v`` the least possible width
  above ``s``, ``t d`` with ``d | M``): ``M R <= T F`` (:func:`fill_capacity`), ``step >= M
  R / F``; for ``pp`` equal stages this is the bubble factor above;
* **one micro-batch's path**: a rank of stage ``k`` runs at least ``b_min`` sequences (its
  share with the most replicas that fit in ``n``), so ``y_k >= sum_{o in k} w_o(t, b_min)``,
  and ``sum_k y_k <= T (1 - (1 - 1/m)^pp)`` with ``pp <= n / t``;
* **memory**: every parameter's states (16 bytes in bf16) are held by some rank (ZeRO shards
  them over a stage's replicas, no further), so more states than all ``n`` GPUs' memory is
  infinite.

The bound is the least over ``M | global batch`` (and ``t``) of the largest of these; the
ranks' sends, data-parallel gradients and ZeRO gathers are left out (they may overlap), and
recomputation only adds work. It holds whatever the cuts, micro-batch, recomputation and
ZeRO stage (with the fused softmax and ring collectives of the searches' strategies);
:func:`.tarnawski.tarnawski` prints the least of it and the uniform grid's bound where its
space holds per-stage widths (``replication=True``, the default, or ``stage_tp``). It ignores memory beyond the total, so it is weaker than the uniform bound
where memory decides (the bench's memory-bound cases, docs/results-hybrid.md).

Examples
--------
>>> from workbench.cluster import Cluster
>>> from workbench.judge.training import simulate_training
>>> from workbench.transforms.parallel import Strategy, parallelize
>>> plan = parallelize("gpt:layers=4,hidden=256,heads=4,seq=128,vocab=1000",
...                    Cluster.preset("8xA100-80g"), Strategy(tp=2, pp=2, dp=2, global_batch=16))
>>> lb = strategy_bound(plan)
>>> 0 < lb <= simulate_training(plan).step_ms
True
>>> round(bubble_factor(8, 1), 3), round(bubble_factor(8, 4), 3)
(8.0, 2.417)
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .costs import op_vectors, static_bytes_per_param

__all__ = ["bubble_factor", "strategy_bound", "widths_bound"]


def bubble_factor(m: int, pp: int) -> float:
    """Least step over the work of one micro-batch on ``pp`` stages with ``m`` micro-batches:
    ``1 / (1 - (1 - 1/m)^pp)`` (``m`` on one stage, ``m / pp`` plus the bubble otherwise)."""
    return 1.0 / (1.0 - (1.0 - 1.0 / m) ** pp)


def strategy_bound(plan, vectors=None) -> float:
    """Lower bound (ms) on the judged step of ``plan``'s strategy, whatever its stage
    boundaries (see the module docstring); ``math.inf`` where memory rules it out."""
    s = plan.strategy
    v = vectors or op_vectors(plan)
    m, pp = plan.n_micro, s.pp
    per_param = static_bytes_per_param(plan.config.precision, s.zero, s.dp)
    cap = min(plan.cluster.devices[r].memory for r in range(s.devices))
    if (per_param * v.params.sum() + v.stash.sum()) / pp > cap:
        return math.inf
    total = float(v.work.sum())
    experts = sum(float(x) for x, o in zip(v.params, plan.ops) if o.expert) if s.ep > 1 \
        else 0.0
    tail = _tail_ms(plan, float(v.params.sum()), experts)
    if s.virtual > 1:
        return (m * total + tail) / pp
    if pp == 1:
        return m * total + tail
    return max(total * bubble_factor(m, pp), m * float(v.work.max()), (m * total + tail) / pp)


def _tail_ms(plan, params: float, experts: float = 0.0) -> float:
    """What must follow a stage's last backward on its rank, summed over the stages (no
    less than for all ``params`` at once: each term is affine with a non-negative constant):
    the optimizer step, ZeRO-1/2's gather of the updated parameters and, with one stage,
    the last gradient bucket's synchronisation, as the judge times them. Under expert
    parallelism (``ep > 1``; ``experts`` of the ``params`` are the rank's experts') the
    optimizer steps ``params / dp`` (the experts' shards are larger: ``dp / ep``), the
    gathers count only the other parameters and the last bucket is left out (the judge
    syncs the experts' over fewer ranks, in buckets of their own)."""
    from ...costs.llm import ADAM_FLOPS, state_bytes_per_param
    from ...judge.collectives import collective_ms
    from ...judge.training import identical_ranks

    s, cl = plan.strategy, plan.cluster
    pb, gb, ob = state_bytes_per_param(plan.config.precision)
    n = params / (s.dp if s.zero >= 1 else 1)
    tail = plan.gpu.op_ms(ADAM_FLOPS * n, (pb + gb + 2 * ob) * n, half=False)
    if s.dp > 1 and identical_ranks(plan):
        nodes = len({plan.hosts[plan.rank(0, x)] for x in range(s.dp)})

        def coll(kind, nbytes):
            return collective_ms(kind, nbytes, s.dp, nodes, cl.intra_host, cl.inter_host,
                                 s.algorithm)

        if s.pp == 1 and s.virtual == 1 and s.ep == 1:
            last = _last_bucket(plan.config, s.tp, s.bucket_mb)
            tail += coll("allreduce" if s.zero == 0 else "reducescatter", last) if last else 0.0
            if s.zero >= 3:     # ZeRO-3: the first task waits for its parameters' gather
                tail += coll("allgather", pb * params)
        if s.zero in (1, 2):
            tail += coll("allgather", pb * (params - experts))
    return tail


@lru_cache(maxsize=256)
def _last_bucket(config, tp: int, bucket_mb: float) -> float:
    """Bytes of the last gradient bucket of a one-chunk step, as
    :func:`workbench.judge.training.chunk_program` fills the buckets (the backward's ops in
    reverse chain order, a bucket sent once it reaches ``bucket_mb`` MB)."""
    from ...costs.llm import chain

    gbytes = 4 if config.precision == "fp32" else 2
    acc = last = 0.0
    for o in reversed(chain(config)):
        acc += gbytes * o.params / (tp if o.split else 1)
        if acc >= bucket_mb * 1e6:
            acc, last = 0.0, acc
    return acc if acc > 0 else last



def widths_bound(config, cluster, *, global_batch: int, gpus: int | None = None, gpu=None,
                 stage_tp: bool = False, tps=(1, 2, 4, 8)) -> float:
    """Lower bound (ms) on the judged step of every 1F1B plan of per-stage widths on ``gpus``
    GPUs (default: the cluster's): any ``pp``, cuts, micro-batch, stage data-parallel degrees,
    recomputation and ZeRO stage, one tensor-parallel degree of ``tps`` for every stage (the
    paper's replication) or, with ``stage_tp``, each stage its own; ``math.inf`` where the
    parameter states cannot fit in the GPUs' memory. The least over the micro-batch sizes
    (and tensor-parallel degrees) of the work-conservation, pipeline-fill and path bounds of
    the module docstring ("Per-stage widths").

    >>> from workbench.cluster import Cluster
    >>> from workbench.judge.training import simulate_training
    >>> from workbench.transforms.parallel import Strategy, parallelize
    >>> spec = "llama:layers=2,hidden=512,heads=8,seq=512,vocab=128000"
    >>> cl = Cluster.preset("8xA100-80g")
    >>> p = parallelize(spec, cl, Strategy(pp=2, mbs=2, global_batch=24,
    ...                                    stage_widths=((1, 1), (1, 3))))
    >>> lb = widths_bound(spec, cl, global_batch=24, gpus=4)
    >>> 0 < lb <= simulate_training(p).step_ms
    True
    """
    from ...costs.llm import ADAM_FLOPS, parse_spec, state_bytes_per_param
    from ...transforms.parallel import gpu_of

    cfg = parse_spec(config) if isinstance(config, str) else config
    n = gpus or len(cluster.devices)
    spec = gpu_of(cluster, gpu)
    divisors = [x for x in range(1, global_batch + 1) if global_batch % x == 0]
    per_rank, params = _per_rank_ms(cfg, cluster, n, spec, divisors,
                                    [t for t in tps if t <= n])
    pb, gb, ob = state_bytes_per_param(cfg.precision)
    if (pb + gb + ob) * params > sum(d.memory for d in cluster.devices[:n]) * (1 + 1e-9):
        return math.inf
    optimizer = spec.op_ms(ADAM_FLOPS * params, (pb + gb + 2 * ob) * params, half=False)
    best = math.inf
    for M in divisors:          # sequences of a micro-batch
        m = global_batch // M
        ways = {t: [d for d in divisors if M % d == 0 and t * d <= n] for t in per_rank}
        # per op, the least rank-ms a sequence (over the shares b | M of a rank) and the
        # least work a rank does a micro-batch (at its smallest share M / d) at tp t
        rank = {t: np.min([t * v[b] / b for b in divisors if M % b == 0], axis=0)
                for t, v in per_rank.items()}
        path = {t: v[M // max(ways[t])] for t, v in per_rank.items() if ways[t]}
        cases = [((t,), rank[t], path[t]) for t in path] if not stage_tp else \
            [(tuple(path), np.min(list(rank.values()), axis=0),
              np.min(list(path.values()), axis=0))] if path else []
        for ts, r, a in cases:
            R = float(r.sum())
            widths = {t * d for t in ts for d in ways[t]}
            bound = max((global_batch * R + optimizer) / n,
                        M * R / fill_capacity(widths, m, n),
                        float(a.sum()) / (1.0 - (1.0 - 1.0 / m) ** (n // min(ts))))
            best = min(best, bound)
    return best


def fill_capacity(widths, m: int, n: int) -> float:
    """The most ``sum_k g_k y_k / T`` can be over pipelines on at most ``n`` GPUs whose stage
    ``k`` runs on ``g_k`` GPUs, one of ``widths``, and does ``y_k`` of work a micro-batch on
    each rank, with ``sum_{j<k} y_j + m y_k <= T`` (the module docstring's proof):
    ``sum_i (v_i - v_{i-1}) (1 - (1 - 1/m)^floor(n / v_i))`` over the sorted widths ``v_i``
    (``v_0 = 0``). Equal stages give the bubble factor:

    >>> n, pp, m = 8, 4, 6
    >>> round(n / pp / fill_capacity({n // pp}, m, n), 9) == round(bubble_factor(m, pp), 9)
    True
    >>> fill_capacity({2, 4, 8}, 1, 8)       # one micro-batch: the stages run one by one
    8.0
    """
    q = 1.0 - 1.0 / m
    total, below = 0.0, 0.0
    for v in sorted(widths):
        total += (v - below) * (1.0 - q ** (n // v))
        below = v
    return total


def _per_rank_ms(cfg, cluster, n: int, gpu, shares, tps) -> tuple:
    """``({t: {b: per-op ms}}, parameters)``: each op's forward and backward (no
    recomputation) with its blocking tensor-parallel collectives on one rank, at
    tensor-parallel degree ``t`` and ``b`` sequences a rank, the least over sequence
    parallelism and the nodes a group of ``t`` consecutive ranks of the first ``n`` can
    span."""
    from ...errors import PlanError
    from ...transforms.parallel import Strategy, parallelize

    hosts = [d.host for d in cluster.devices[:n]]
    out: dict = {}
    params = 0.0
    for t in tps:
        spans = sorted({len(set(hosts[r:r + t])) for r in range(n - t + 1)})
        for b in shares:
            least = None
            for sp in (False, True)[:1 + (t > 1)]:
                try:
                    plan = parallelize(cfg, cluster, Strategy(tp=t, sp=sp, mbs=b,
                                                              global_batch=b), gpu=gpu)
                except PlanError:       # t does not divide the heads, sp the sequence
                    continue
                params = float(sum(o.params for o in plan.ops))
                for nodes in spans:
                    w = op_vectors(plan, "none", nodes).work
                    least = w if least is None else np.minimum(least, w)
            if least is not None:
                out.setdefault(t, {})[b] = least
    return out, params
