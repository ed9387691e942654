"""The placement and scheduling methods, one room per paper family.

=====================  ==========================================================================
room                   methods (paper)
=====================  ==========================================================================
``baselines/``         ``single``, ``round_robin``, ``m_topo`` (Baechi), ``expert``
``list/``              ``heft``, ``etf``, ``m_etf``, ``m_sct`` (Baechi), ``dpos``, ``os_dpos``,
                       ``data_parallel`` (FastT)
``celeritas/``         ``order_place``, ``celeritas`` (Celeritas: fusion + Adjusting Placement),
                       ``celeritas_portfolio`` (with the extensions)
``pesto/``             ``pesto``, ``pesto_ilp`` (Pesto: coarsening + ILP; CP-SAT engine extension)
``pipeline/``          ``dp``, ``dpl``, ``pipedream``, ``ip_contig``, ``ip_noncontig``,
                       ``greedy_latency``, ``latency_ip``, ``local_search``, ``metis``
                       (Tarnawski et al. and their baselines)
=====================  ==========================================================================

Shared by every room: :mod:`.registry` (``register``, ``SOLVERS``, ``get``, ``solve``),
:mod:`.params` (parameter declarations and checks), :mod:`.common` (arrays, memory book,
plan building), :mod:`.milp` (HiGHS/CBC through PuLP), :mod:`.progress` (incumbent/bound
traces), :mod:`.budget` (the time budget). A new method goes in its paper's room and registers
with ``@register``; the module is listed in :data:`FAMILY_MODULES` below.

Examples
--------
>>> from workbench.solvers import SOLVERS, get
>>> get("single").family
'baseline'
"""

from __future__ import annotations

import importlib

from .params import Param
from .registry import SOLVERS, SolverInfo, get, methods, register, solve

__all__ = ["SOLVERS", "SolverInfo", "Param", "register", "get", "solve", "methods"]

FAMILY_MODULES = (
    "baselines.simple", "celeritas.placement", "list.data_parallel", "list.scheduling",
    "pipeline.metis", "list.os_dpos", "pesto.ilp", "pipeline.local_search", "pipeline.dp",
    "pipeline.ip", "pipeline.latency",
)
"""The modules that register methods, in the order :func:`methods` lists them."""

for _mod in FAMILY_MODULES:
    importlib.import_module(f"{__name__}.{_mod}")
del _mod
