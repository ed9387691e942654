"""Celeritas (Xu et al.): operation fusion, CPD-TOPO order and Adjusting Placement.

* :mod:`.placement`: methods ``order_place``, ``celeritas`` (Algorithm 2 as written) and
  ``celeritas_portfolio`` (with this workbench's extensions).
* :mod:`.boundaries`: the exact segment-boundary search Adjusting Placement uses.
* Fusion is a transform (:mod:`workbench.transforms.fusion`), the orders live in
  :mod:`workbench.orders`, standard evaluation in :mod:`workbench.costs.standard`.
"""

from ..._moved import forward

__getattr__ = forward(__name__, "placement")  # the names of the module this package replaced
