"""Per-op costs of a training strategy, read from the training judge's own cost model.

The searches of this room (:mod:`.megatron`, :mod:`.tarnawski`) and the lower bound
(:mod:`.bound`) need, for every op of a model's chain under a strategy (tensor-parallel degree,
sequence parallelism, micro-batch size, recomputation), what one rank spends on it per
micro-batch and what it keeps in memory. These are the numbers
:func:`workbench.judge.training.chunk_program` gives a chunk -- the roofline time of the op's
shard (:meth:`~workbench.costs.llm.GPUSpec.op_ms`), the tensor-parallel collectives after it
(:func:`workbench.judge.collectives.collective_ms`), the recomputed forward -- op by op, so that
any contiguous run of ops (a pipeline stage cut anywhere) costs the sum of its ops.

Examples
--------
>>> from workbench.cluster import Cluster
>>> from workbench.transforms.parallel import Strategy, parallelize
>>> plan = parallelize("gpt:layers=2,hidden=64,heads=4,seq=16,vocab=100",
...                    Cluster.preset("8xA100-80g"), Strategy(tp=2, global_batch=2))
>>> v = op_vectors(plan)
>>> len(v.work) == len(plan.ops)
True
>>> from workbench.judge.training import simulate_training
>>> r = simulate_training(plan)
>>> b = r.breakdown()
>>> bool(abs(plan.n_micro * v.work.sum() - (b["compute"] + b["recompute"] + b["tp"])) < 1e-9)
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...costs.llm import state_bytes_per_param
from ...judge.collectives import collective_ms
from ...judge.training import op_collectives

__all__ = ["OpVectors", "op_vectors", "static_bytes_per_param"]


@dataclass
class OpVectors:
    """Per chain op, per micro-batch, on one rank: ``work`` (forward + backward + recomputed
    forward + blocking tensor-parallel collectives and, under expert parallelism, the
    all-to-alls, ms), ``params`` (of the shard; an expert op's ``1 / ep``), ``stash``
    (activation bytes kept from forward to backward); ``transient`` the largest recomputed
    block held while a backward runs (bytes); ``out`` the bytes each op's output sends to the
    next stage (per tensor-parallel rank)."""

    work: np.ndarray
    params: np.ndarray
    stash: np.ndarray
    out: np.ndarray
    transient: float


def static_bytes_per_param(precision: str, zero: int, dp: int) -> float:
    """Bytes per parameter of parameters, gradients and optimizer states on one rank, sharded
    over ``dp`` by ZeRO stage ``zero`` (as the judge keeps them).

    >>> static_bytes_per_param("bf16", 0, 8), static_bytes_per_param("bf16", 1, 8)
    (16.0, 5.5)
    """
    pb, gb, ob = state_bytes_per_param(precision)
    return pb / (dp if zero >= 3 else 1) + gb / (dp if zero >= 2 else 1) + \
        ob / (dp if zero >= 1 else 1)


def op_vectors(plan, recompute: str | None = None, nodes: int | None = None) -> OpVectors:
    """The per-op costs of ``plan``'s chain under its strategy (see the module docstring).

    Recomputation as the judge runs it: ``full`` re-runs every forward (with its collectives)
    and keeps only each block's input, ``selective`` re-runs the attention core and drops its
    matrices; ``recompute`` (default: the strategy's ``recompute``) the setting costed, e.g.
    one stage's of a per-stage choice. ``nodes``: the nodes the tensor-parallel group spans
    (default: those of the plan's first ``tp`` ranks).
    """
    s, cfg, gpu = plan.strategy, plan.config, plan.gpu
    rec = recompute or s.recompute
    t, sp, half = s.tp, s.sp, cfg.precision != "fp32"
    tp_nodes = nodes or len(set(plan.hosts[:t]))
    intra, inter = plan.cluster.intra_host, plan.cluster.inter_host
    cache: dict = {}

    def coll(c) -> float:
        if c is None:
            return 0.0
        key = (c.kind, c.nbytes)
        if key not in cache:
            cache[key] = collective_ms(c.kind, c.nbytes, t, tp_nodes, intra, inter,
                                       s.algorithm)
        return cache[key]

    ep_nodes = len({plan.hosts[plan.rank(0, x, 0)] for x in range(s.ep)})

    def comms_ms(o, phase) -> float:
        """The blocking collectives after the op, as the judge's program has them
        (:func:`~workbench.judge.training.op_collectives`; the all-to-alls over the first
        replicas' expert-parallel group)."""
        return sum(collective_ms("alltoall", x, s.ep, ep_nodes, intra, inter) if kind == "a"
                   else coll(x) for kind, x in op_collectives(o, phase, t, sp, s.ep))

    ops = plan.ops
    n = len(ops)
    work, params, stash, out = (np.zeros(n) for _ in range(4))
    per_block: dict = {}
    core_block: dict = {}
    for i, o in enumerate(ops):
        d = t if (o.split or sp) else 1
        fwd = gpu.op_ms(o.flops / d, o.bytes / d, half=half)
        fcomm = comms_ms(o, "f")
        w = fwd + fcomm + gpu.op_ms(o.bwd_flops / d, o.bwd_bytes / d, half=half) + \
            comms_ms(o, "b")
        block = 0 <= o.layer < cfg.blocks
        if rec == "full":
            w += fwd + fcomm
        elif rec == "selective" and o.core:
            w += fwd
        work[i] = w
        params[i] = o.params / (t if o.split else 1) / (s.ep if o.expert else 1)
        saved = o.saved / d
        if block:
            per_block[o.layer] = per_block.get(o.layer, 0.0) + saved
            core_block[o.layer] = core_block.get(o.layer, 0.0) + o.core_saved / d
        if rec == "full" and block:
            first = i == 0 or ops[i - 1].layer != o.layer
            stash[i] = o.resid / (t if sp else 1) if first else 0.0
        elif rec == "selective":
            stash[i] = saved - o.core_saved / d
        else:
            stash[i] = saved
        out[i] = o.out / t
    transient = max(per_block.values(), default=0.0) if rec == "full" else \
        max(core_block.values(), default=0.0) if rec == "selective" else 0.0
    return OpVectors(work, params, stash, out, transient)
