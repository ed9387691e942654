"""Hybrid-parallel training strategies searched on the training judge (issue 48).

* :func:`megatron` -- the best configuration of Megatron-LM's grid, every valid one judged
  (:mod:`.megatron`);
* :func:`tarnawski` -- Tarnawski et al.'s stage-splitting DP at op granularity, with the
  hybrid degrees enumerated around it (:mod:`.tarnawski`) and the paper's per-stage
  replication (:mod:`.replication`: stages of different widths);
* :func:`search_strategy` -- any of :data:`STRATEGY_METHODS` by name (the two above, PyTorch
  DDP and DeepSpeed ZeRO), as :func:`workbench.compare` runs them (:mod:`.methods`);
* :func:`strategy_bound` -- the lower bound every method's gap is measured against
  (:mod:`.bound`).

Both return a :class:`SearchResult` whose ``plan`` the judge
(:func:`workbench.judge.training.simulate_training`) has executed.
"""

from .bound import bubble_factor, strategy_bound
from .costs import OpVectors, op_vectors
from .megatron import SearchResult, grid, megatron
from .methods import STRATEGY_METHODS, StrategyMethod, search_strategy
from .stages import stage_split
from .tarnawski import tarnawski

__all__ = ["OpVectors", "STRATEGY_METHODS", "SearchResult", "StrategyMethod", "bubble_factor",
           "grid", "megatron", "op_vectors", "search_strategy", "stage_split", "strategy_bound",
           "tarnawski"]
