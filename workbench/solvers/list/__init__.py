"""List schedulers and FastT (Yi et al.): ranked ops placed one at a time.

* :mod:`.scheduling`: ``heft``, ``etf``, Baechi's ``m_etf`` and ``m_sct``, FastT's ``dpos``
  (one shared core, :class:`~.scheduling.ListCore`).
* :mod:`.os_dpos`: FastT's OS-DPOS (operation splitting on top of DPOS).
* :mod:`.data_parallel`: FastT's baseline, pure data parallelism (``data_parallel``).

The methods are named here too: ``from workbench.solvers.list import heft``. (``os_dpos`` and
``data_parallel`` name the functions, as attributes of this package, not their modules: import
the modules by their full path, ``from workbench.solvers.list.os_dpos import replica_units``.)
"""

from .data_parallel import data_parallel
from .os_dpos import os_dpos
from .scheduling import dpos, etf, heft, m_etf, m_sct

__all__ = ["heft", "etf", "m_etf", "m_sct", "dpos", "os_dpos", "data_parallel"]
