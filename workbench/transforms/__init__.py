"""Graph transforms: each takes an :class:`~workbench.graph.OpGraph` and returns a new one.

* :mod:`.coarsen`: Pesto's acyclic coarsening (Theorem 3.5) and its expansion.
* :mod:`.fusion`: Celeritas's operation fusion (runs of the CPD-TOPO order).
* :mod:`.split`, :mod:`.split_dims`, :mod:`.data_parallel`: FastT's operation splitting, the
  split dimensions of extracted ops, the data-parallel starting graph.
* :mod:`.training`: a mirrored backward pass for forward-only graphs (``to_training``).
* :mod:`.parallel`: LLM training strategies (tensor / sequence / pipeline / data parallelism,
  ZeRO, recomputation, micro-batch schedules) as plans for :mod:`workbench.judge.training`.

Transforms import the model layer, the cost models and the judge, never a solver.
"""
