"""Pesto (Hafeez et al., Middleware'21): joint placement and scheduling with link congestion.

* :mod:`.ilp`: the paper's pipeline (Theorem 3.5 coarsening + the ILP with congestion and its
  memory-balance constraint; methods ``pesto`` and ``pesto_ilp``), :class:`~.ilp.PestoModel`.
* :mod:`.cpsat`: the same joint problem as a CP-SAT model (extension, ``engine="cpsat"``).
* :mod:`.cpsat_engine`: the CP-SAT engine's coarse start, window rounds and LNS (extension).
* :mod:`.hint`: a heuristic schedule turned into a CP-SAT hint.
* The graph side of coarsening is a transform: :mod:`workbench.transforms.coarsen`.
"""

from ..._moved import forward

__getattr__ = forward(__name__, "ilp")  # the names of the module this package replaced
