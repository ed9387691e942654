"""Lower bounds for both objectives, so every result can show its gap to the best possible.

* makespan: the critical path with each op at its fastest device and free communication; total
  fastest work divided by the number of devices; the longest single op.
* max-load (pipelined time per sample): total fastest work over the devices; the largest single
  op or colocation group (it must sit whole on one device).
* devices: the fewest devices whose memory can hold the whole model (memory-forced count).

Examples
--------
>>> from workbench import samples, Cluster
>>> from workbench.judge.bounds import lower_bounds
>>> lower_bounds(samples.diamond(), Cluster.preset("2xV100-pcie"))
{'makespan_ms': 4.0, 'max_load_ms': 3.0, 'min_devices': 1}
"""

from __future__ import annotations


import numpy as np

from ..analysis import upward_rank

__all__ = ["lower_bounds", "makespan_lower_bound", "max_load_lower_bound", "min_devices"]


def _fastest(graph, cluster) -> np.ndarray:
    t = cluster.op_times(graph).min(axis=1)
    return np.where(np.isfinite(t), t, 0.0)


def makespan_lower_bound(graph, cluster) -> float:
    """max(critical path at fastest times with free communication, work / devices, longest op)."""
    w = _fastest(graph, cluster)
    if graph.n_ops == 0:
        return 0.0
    cp = float(upward_rank(graph, w, np.zeros(graph.n_edges)).max())
    return max(cp, float(w.sum()) / len(cluster.devices), float(w.max()))


def max_load_lower_bound(graph, cluster) -> float:
    """max(work / devices, largest op, largest colocation group) at fastest times."""
    w = _fastest(graph, cluster)
    if graph.n_ops == 0:
        return 0.0
    best = max(float(w.sum()) / len(cluster.devices), float(w.max()))
    coloc = graph.c.coloc
    if (coloc >= 0).any():
        sums = np.bincount(coloc[coloc >= 0], weights=w[coloc >= 0])
        best = max(best, float(sums.max()))
    return best


def min_devices(graph, cluster) -> int:
    """Fewest devices (largest memories first) whose total memory holds the model.

    Returns ``len(cluster) + 1`` when even the whole cluster is too small.
    """
    need = graph.total_memory()
    mems = sorted((d.memory for d in cluster.devices), reverse=True)
    acc = 0.0
    for k, m in enumerate(mems, start=1):
        acc += m
        if acc >= need:
            return k
    return len(mems) + 1


def lower_bounds(graph, cluster) -> dict:
    """All bounds in one dict: ``makespan_ms``, ``max_load_ms``, ``min_devices``."""
    return {"makespan_ms": makespan_lower_bound(graph, cluster),
            "max_load_ms": max_load_lower_bound(graph, cluster),
            "min_devices": min_devices(graph, cluster)}
