"""Celeritas (Xu et al.): operation fusion, CPD-TOPO order and Adjusting Placement.

* :mod:`.placement`: methods ``order_place``, ``celeritas`` (Algorithm 2 as written) and
  ``celeritas_portfolio`` (with this workbench's extensions).
* :mod:`.boundaries`: the exact segment-boundary search Adjusting Placement uses.
* Fusion is a transform (:mod:`workbench.transforms.fusion`), the orders live in
  :mod:`workbench.orders`, standard evaluation in :mod:`workbench.costs.standard`.

The methods are named here too: ``from workbench.solvers.celeritas import celeritas``.
"""

from .placement import celeritas, celeritas_portfolio, order_place

__all__ = ["order_place", "celeritas", "celeritas_portfolio"]
