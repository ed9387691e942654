"""The strategy methods :func:`workbench.compare` runs on an LLM training problem, by name.

An LLM training step (``gpt:...``, ``llama:...``) on a cluster of GPU nodes is not placed op
by op: each method chooses a tensor x pipeline x data-parallel :class:`Strategy` for the whole
step of ``global_batch`` sequences and the training judge
(:func:`workbench.judge.training.simulate_training`) executes it. Besides the two searches of
this room, two families a researcher would otherwise run:

* ``megatron`` -- :func:`.megatron.megatron`, Megatron-LM's grid judged in bound order;
* ``tarnawski`` -- :func:`.tarnawski.tarnawski`, the stage-splitting DP with hybrid degrees
  around it (given ``megatron``'s result when that ran first: it is a candidate, so the
  answer is never worse);
* ``ddp`` -- PyTorch DDP (Li et al. 2020): every GPU a data-parallel replica, nothing
  sharded; the micro-batch size and recomputation of Megatron's grid chosen by the judge;
* ``zero`` -- DeepSpeed ZeRO (Rajbhandari et al. 2020): every GPU a replica with sharded
  optimizer states (1), gradients (2) or parameters (3); the stage, micro-batch size and
  recomputation chosen by the judge.

``ddp`` and ``zero`` search the ``tp = pp = 1`` part of Megatron's grid (:func:`.grid`;
without expert parallelism, which shards the experts), so
``megatron`` is never slower than either. When no strategy of a method fits in memory, the one
holding the least (highest ZeRO stage, full recomputation, smallest micro-batch) is judged
anyway, so that the comparison shows where and when it runs out of memory.

Examples
--------
>>> from workbench.cluster import Cluster
>>> r = search_strategy("ddp", "gpt:layers=2,hidden=128,heads=4,seq=64,vocab=1000",
...                     Cluster.preset("8xA100-80g"), global_batch=16)
>>> r.method, r.plan.strategy.tp, r.plan.strategy.pp, r.plan.strategy.dp, r.result.feasible
('ddp', 1, 1, 8, True)
>>> sorted(STRATEGY_METHODS)
['ddp', 'megatron', 'tarnawski', 'zero']
"""

from __future__ import annotations

from dataclasses import dataclass

from ...costs.llm import parse_spec
from ...errors import NotApplicableError, PlanError
from .megatron import SearchResult, grid, judge_all, megatron
from .tarnawski import tarnawski

__all__ = ["STRATEGY_METHODS", "StrategyMethod", "search_strategy"]


@dataclass(frozen=True)
class StrategyMethod:
    """A strategy method's name, what it searches and the reference it follows."""

    name: str
    description: str
    paper: str


STRATEGY_METHODS = {m.name: m for m in (
    StrategyMethod("megatron", "Megatron-LM's grid (tp, pp, dp, micro-batch, 1F1B or "
                   "interleaved, recomputation, ZeRO 0/1), judged in bound order",
                   "Narayanan et al. 2021"),
    StrategyMethod("tarnawski", "op-level pipeline stages by Tarnawski et al.'s DP with its "
                   "per-stage replication, hybrid degrees enumerated around it (extension)",
                   "Tarnawski et al. 2020"),
    StrategyMethod("ddp", "PyTorch DDP: data parallel on every GPU, nothing sharded",
                   "Li et al. 2020"),
    StrategyMethod("zero", "DeepSpeed ZeRO-1/2/3: data parallel on every GPU, states sharded",
                   "Rajbhandari et al. 2020"),
)}
"""Name -> :class:`StrategyMethod` of every method that takes an LLM training problem."""

_DP_ONLY = {"ddp": (0,), "zero": (1, 2, 3)}


def _least_memory(strategies):
    """The strategy of ``strategies`` that holds the least memory, by its knobs."""
    rec = {"full": 0, "selective": 1, "none": 2}
    return min(strategies, key=lambda s: (-s.zero, rec[s.recompute], s.mbs, -s.pp * s.tp))


def _out_of_memory(config, cluster, strategies, found: SearchResult) -> SearchResult:
    """``found`` with the least-memory strategy judged when nothing of it fits (or nothing
    was judged within the time limit); ``strategies``: a callable giving the space."""
    from ...judge.training import simulate_training
    from ...transforms.parallel import parallelize

    if found.result is not None:
        return found
    strategies = strategies()
    if not strategies:
        return found
    plan = parallelize(config, cluster, _least_memory(strategies))
    found.plan, found.result = plan, simulate_training(plan, record_links=False)
    found.judged += 1
    why = "nothing judged fits within the time limit" if "time limit" in found.notes else \
        "nothing fits"
    found.notes = (found.notes + "; " if found.notes else "") + \
        f"{why}: the strategy holding the least memory shown"
    return found


def search_strategy(method: str, config, cluster, *, global_batch: int,
                    time_limit: float | None = None, baseline: SearchResult | None = None
                    ) -> SearchResult:
    """Run strategy method ``method`` (:data:`STRATEGY_METHODS`) on ``config`` (an
    :class:`~workbench.costs.llm.LLMConfig` or its spec) and ``cluster``; ``baseline``:
    ``megatron``'s result at hand (``tarnawski`` takes it as its candidate).

    Raises :class:`~workbench.errors.NotApplicableError` when the method has no strategy for
    the problem (the global batch does not split over the GPUs, say).
    """
    if method not in STRATEGY_METHODS:
        raise NotApplicableError(f"{method!r} is no strategy method; known: "
                                 f"{', '.join(STRATEGY_METHODS)}")
    if isinstance(config, str):
        config = parse_spec(config)
    def space():        # built only where nothing was found (a search can take seconds)
        return grid(config, cluster, global_batch=global_batch)

    try:
        if method in _DP_ONLY:
            dp_only = [s for s in space() if s.tp == 1 and s.pp == 1 and s.ep == 1 and
                       s.zero in _DP_ONLY[method]]
            if not dp_only:
                raise PlanError(f"no {method} strategy: global batch {global_batch} does not "
                                f"split into micro-batches of 1, 2, 4 or 8 sequences over "
                                f"{len(cluster.devices)} replicas")
            found = judge_all(method, config, cluster, dp_only, prune=True,
                              time_limit=time_limit, notes="judged in bound order")
            space = dp_only.copy
        elif method == "megatron":
            found = megatron(config, cluster, global_batch=global_batch, prune=True,
                             time_limit=time_limit)
        else:
            found = tarnawski(config, cluster, global_batch=global_batch, baseline=baseline,
                              time_limit=time_limit)
    except PlanError as e:
        raise NotApplicableError(str(e)) from None
    return _out_of_memory(config, cluster, space, found)
