"""Celeritas (Xu et al.): operation fusion, CPD-TOPO order and Adjusting Placement.

* :mod:`.placement`: methods ``order_place`` and ``celeritas`` (Algorithm 2).
* :mod:`.boundaries`: the exact segment-boundary search Adjusting Placement uses.
* Fusion is a transform (:mod:`workbench.transforms.fusion`), the orders live in
  :mod:`workbench.orders`, standard evaluation in :mod:`workbench.costs.standard`.
"""

from ..._moved import forward

__getattr__ = forward(__name__, "placement")  # the names of the module this package replaced
