"""Baselines every comparison needs.

* :mod:`.simple`: ``single``, ``round_robin``, Baechi's ``m_topo`` and a given ``expert`` split.
* :mod:`.metis`: ``metis`` k-way partitioning (the partitioning baseline of Tarnawski et al.).
"""

from ..._moved import forward

__getattr__ = forward(__name__, "simple")  # the names of the module this package replaced
