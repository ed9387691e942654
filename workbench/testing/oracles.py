"""Exhaustive oracles for tests: the true optimum of tiny problems under the judge's own model.

>>> from workbench import samples, Cluster, Device, Link
>>> c = Cluster([Device("gpu0"), Device("gpu1")], intra_host=Link(0.0, 1e6))
>>> round(best_makespan(samples.diamond(), c), 6) <= round(sum(
...     samples.diamond().op(v)["compute"]["gpu"] for v in samples.diamond().ops), 6)
True
"""

from __future__ import annotations

import itertools
import math

import networkx as nx

from ..plan import Plan
from ..simulate import simulate

__all__ = ["best_makespan"]


def best_makespan(graph, cluster, *, congestion: bool = True) -> float:
    """Best simulated makespan over every placement and every per-device order.

    Every deadlock-free set of per-device orders is induced by some linear extension of the
    graph, so enumerating placements x linear extensions covers every schedule the simulator
    can run. Exponential: for graphs of a handful of ops.
    """
    names = cluster.names
    exts = list(nx.all_topological_sorts(graph.nx))
    ok = [[d for d in names if cluster.device(d).kind in graph.op(v)["compute"]]
          for v in graph.ops]
    best = math.inf
    for devs in itertools.product(*ok):
        pl = dict(zip(graph.ops, devs, strict=True))
        seen = set()
        for ext in exts:
            order = {d: [v for v in ext if pl[v] == d] for d in names}
            key = tuple(tuple(order[d]) for d in names)
            if key in seen:
                continue
            seen.add(key)
            best = min(best, simulate(Plan(graph, pl, order=order), cluster,
                                      congestion=congestion).makespan)
    return best
