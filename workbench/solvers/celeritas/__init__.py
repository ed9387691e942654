"""Celeritas (Xu et al.): operation fusion, CPD-TOPO order and Adjusting Placement.

* :mod:`.placement`: methods ``order_place`` and ``celeritas`` (Algorithm 2).
* :mod:`.boundaries`: the exact segment-boundary search Adjusting Placement uses.
* Fusion is a transform (:mod:`workbench.transforms.fusion`), the orders live in
  :mod:`workbench.orders`, standard evaluation in :mod:`workbench.costs.standard`.

The methods are named here too: ``from workbench.solvers.celeritas import celeritas``.
"""

from .placement import celeritas, order_place

__all__ = ["order_place", "celeritas"]
