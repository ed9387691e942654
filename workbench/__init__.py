"""The placement workbench: place and schedule the operators of DNN graphs on several devices.

Quickstart
----------
>>> import workbench as wb
>>> g = wb.samples.transformer(300, seed=0)
>>> c = wb.Cluster.preset("4xV100-nvlink")
>>> plan = wb.solve(g, c, method="m_topo")
>>> m = wb.evaluate(plan, c)
>>> m.makespan_ms >= m.makespan_lb
True
"""

from . import samples
from .cluster import Cluster, Device, Link
from .errors import (ClusterError, FormatError, GraphError, InfeasibleError, PlanError,
                     SolverError, WorkbenchError)
from .graph import OpGraph
from .plan import Metrics, Plan, Schedule
from .simulate import device_loads, evaluate, max_load, simulate
from .solvers import SOLVERS, methods, solve

__all__ = ["OpGraph", "Cluster", "Device", "Link", "Plan", "Schedule", "Metrics", "simulate",
           "max_load", "device_loads", "evaluate", "solve", "SOLVERS", "methods", "samples",
           "compare", "robustness", "diff", "WorkbenchError", "GraphError", "ClusterError", "PlanError",
           "InfeasibleError", "SolverError", "FormatError"]

__version__ = "0.1.0"

from .compare import compare  # noqa: E402  (binds the function over the submodule's name)
from .robustness import robustness  # noqa: E402  (the function over the submodule's name)
from .diff import diff  # noqa: E402  (the function over the submodule's name)
