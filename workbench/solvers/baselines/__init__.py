"""Baselines every comparison needs.

* :mod:`.simple`: ``single``, ``round_robin``, Baechi's ``m_topo`` and a given ``expert`` split.
* ``metis`` (k-way partitioning, the baseline of Tarnawski et al.) lives in their room:
  :mod:`workbench.solvers.pipeline.metis`.
"""

from ..._moved import forward

__getattr__ = forward(__name__, "simple")  # the names of the module this package replaced
