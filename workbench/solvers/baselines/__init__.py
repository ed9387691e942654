"""Baselines every comparison needs.

* :mod:`.simple`: ``single``, ``round_robin``, Baechi's ``m_topo`` and a given ``expert`` split.
* ``metis`` (k-way partitioning, the baseline of Tarnawski et al.) lives in their room:
  :mod:`workbench.solvers.pipeline.metis`.

The methods are named here too: ``from workbench.solvers.baselines import m_topo``.
"""

from .simple import expert, m_topo, round_robin, single

__all__ = ["single", "round_robin", "m_topo", "expert"]
