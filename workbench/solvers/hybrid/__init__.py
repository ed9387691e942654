"""Hybrid-parallel training strategies searched on the training judge (issue 48).

* :func:`megatron` -- the best configuration of Megatron-LM's grid, every valid one judged
  (:mod:`.megatron`);
* :func:`tarnawski` -- Tarnawski et al.'s stage-splitting DP at op granularity, with the
  hybrid degrees enumerated around it (:mod:`.tarnawski`);
* :func:`strategy_bound` -- the lower bound every method's gap is measured against
  (:mod:`.bound`).

Both return a :class:`SearchResult` whose ``plan`` the judge
(:func:`workbench.judge.training.simulate_training`) has executed.
"""

from .bound import bubble_factor, strategy_bound
from .costs import OpVectors, op_vectors
from .megatron import SearchResult, grid, megatron
from .split import stage_split
from .tarnawski import tarnawski

__all__ = ["OpVectors", "SearchResult", "bubble_factor", "grid", "megatron", "op_vectors",
           "stage_split", "strategy_bound", "tarnawski"]
