"""List schedulers and FastT (Yi et al.): ranked ops placed one at a time.

* :mod:`.scheduling`: ``heft``, ``etf``, Baechi's ``m_etf`` and ``m_sct``, FastT's ``dpos``
  (one shared core, :class:`~.scheduling.ListCore`).
* :mod:`.os_dpos`: FastT's OS-DPOS (operation splitting on top of DPOS).
* :mod:`.data_parallel`: FastT's baseline, pure data parallelism (``data_parallel``).
"""
