"""Pesto (Hafeez et al., Middleware'21): joint placement and scheduling with link congestion.

* :mod:`.ilp`: the paper's pipeline (Theorem 3.5 coarsening + the ILP with congestion and its
  memory-balance constraint; methods ``pesto`` and ``pesto_ilp``), :class:`~.ilp.PestoModel`.
* :mod:`.cpsat`: the same joint problem as a CP-SAT model (extension, ``engine="cpsat"``),
  :class:`~.cpsat.CpsatModel` (build / hint / solve / extract) and :func:`~.cpsat.solve_cpsat`.
* :mod:`.cpsat_engine`: the CP-SAT engine's coarse start, window rounds and LNS (extension).
* :mod:`.hint`: a heuristic schedule turned into a CP-SAT hint.
* :mod:`.heuristics`: what both engines share (warm-start heuristics, the fastest simulated
  order, memory checks, default sizes, :func:`~.heuristics.budget_of`); it imports neither.
* Time: one :class:`workbench.budget.Budget` per call, split by the shares ``pesto.*`` and
  ``cpsat.*`` of :data:`workbench.budget.SHARES`; ``plan.stats["budget"]`` reports them.
* The graph side of coarsening is a transform: :mod:`workbench.transforms.coarsen`.

The methods and the model are named here too: ``from workbench.solvers.pesto import pesto``.
"""

from .ilp import PestoModel, pesto, pesto_ilp

__all__ = ["pesto", "pesto_ilp", "PestoModel"]
