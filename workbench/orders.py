"""Topological orders used by sequential placers: Baechi's BFS-like m-TOPO order, Celeritas's
DFS-TOPO and its critical-path variant CPD-TOPO (Celeritas, Sections 4.2.2 and 5.1.3).

All three return op indices (positions in ``graph.c``), every op exactly once, every edge from
an earlier to a later position.

* **m-TOPO** (:func:`bfs_topo_order`, used by the ``m_topo`` baseline): Kahn's
  algorithm with a FIFO queue; the ops of one layer are interleaved, so neighbours end up far
  apart in the sequence.
* **DFS-TOPO** (:func:`dfs_topo_order`): the queue starts with the in-degree-0 ops; after
  emitting the head, its children whose in-degree drops to 0 are pushed to the *head* of the
  queue, so a chain is followed to its end before the next branch starts.
* **CPD-TOPO** (:func:`cpd_topo_order`): DFS-TOPO steered by ``cpath = tlevel + blevel`` (the
  length of the longest path through an op): the initial queue is sorted by decreasing cpath,
  children are pushed in increasing cpath so the child on the critical path ends at the head.

Examples
--------
Two independent chains on two devices (the situation of Celeritas's Fig. 3): filling the
devices in m-TOPO order cuts two edges, in DFS-TOPO order none.

>>> from workbench.graph import OpGraph
>>> ops = [(v, {"compute": {"gpu": 1.0}}) for v in ("a1", "b1", "a2", "b2", "a3", "b3")]
>>> g = OpGraph.from_ops(ops, [("a1", "a2"), ("a2", "a3"), ("b1", "b2"), ("b2", "b3")])
>>> [g.c.names[i] for i in bfs_topo_order(g)]
['a1', 'b1', 'a2', 'b2', 'a3', 'b3']
>>> [g.c.names[i] for i in dfs_topo_order(g)]
['a1', 'a2', 'a3', 'b1', 'b2', 'b3']
>>> split_cut(g, bfs_topo_order(g), 2), split_cut(g, dfs_topo_order(g), 2)
(2, 0)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

from .errors import GraphError

__all__ = [
    "ORDERS",
    "bfs_topo_order",
    "check_topological",
    "cluster_free_weights",
    "cpath",
    "cpd_topo_order",
    "dfs_topo_order",
    "mtopo_order",
    "positions",
    "split_cut",
]



def bfs_topo_order(graph) -> list[int]:
    """Baechi's BFS-like topological order: a FIFO queue of in-degree-0 ops (Kahn's algorithm).

    >>> from workbench import samples
    >>> g = samples.pesto_fig2()
    >>> [g.c.names[i] for i in bfs_topo_order(g)]
    ['A', 'B', 'F', 'C', 'G', 'D', 'E']
    """
    gc = graph.c
    indeg = [len(p) for p in gc.pred]
    q = deque(i for i in range(gc.n) if indeg[i] == 0)
    out = []
    while q:
        i = q.popleft()
        out.append(i)
        for j in gc.succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                q.append(j)
    return out


def mtopo_order(graph) -> list[int]:
    """Baechi's m-TOPO order (alias of :func:`bfs_topo_order`)."""
    return bfs_topo_order(graph)


def dfs_topo_order(graph) -> list[int]:
    """Celeritas's DFS-TOPO order: children that become ready are pushed to the head of the
    queue (the first child in the graph's order ends up first).

    >>> from workbench import samples
    >>> g = samples.pesto_fig2()
    >>> [g.c.names[i] for i in dfs_topo_order(g)]
    ['A', 'B', 'C', 'D', 'F', 'G', 'E']
    """
    gc = graph.c
    indeg = [len(p) for p in gc.pred]
    q = deque(i for i in range(gc.n) if indeg[i] == 0)
    out: list[int] = []
    succ = gc.succ
    while q:
        i = q.popleft()
        out.append(i)
        for j in reversed(succ[i]):      # last pushed = first child = new head
            indeg[j] -= 1
            if indeg[j] == 0:
                q.appendleft(j)
    return out


def cpath(graph, cluster=None, *, w: np.ndarray | None = None,
          c: np.ndarray | None = None) -> np.ndarray:
    """``tlevel + blevel`` of every op (Celeritas Eqs. 2-3): the longest path through it.

    Node weights ``w`` default to the mean compute time over the cluster's devices that can run
    the op, edge weights ``c`` to the mean transfer time between distinct devices (see
    :func:`workbench.analysis.levels`). Without a cluster, ``w`` is the fastest compute time and
    ``c`` the edge's fixed ``comm`` or its bytes over :data:`workbench.cluster.REF_BANDWIDTH`.

    >>> from workbench import samples
    >>> cpath(samples.diamond(), c=np.zeros(4)).tolist()
    [4.0, 4.0, 4.0, 4.0]
    """
    from .analysis import levels, tlevel, upward_rank

    gc = graph.c
    if cluster is not None and w is None and c is None:
        lv = levels(graph, cluster)
        return lv.tlevel + lv.blevel
    if w is None:
        w = cluster_free_weights(graph)[0] if cluster is None else levels(graph, cluster).w
    if c is None:
        c = cluster_free_weights(graph)[1] if cluster is None else levels(graph, cluster).c
    w = np.asarray(w, dtype=float)
    c = np.asarray(c, dtype=float)
    if w.shape != (gc.n,):
        raise GraphError(f"node weights have shape {w.shape}, graph {graph.name!r} has "
                         f"{gc.n} ops")
    if c.shape != (gc.m,):
        raise GraphError(f"edge weights have shape {c.shape}, graph {graph.name!r} has "
                         f"{gc.m} edges")
    return tlevel(graph, w, c) + upward_rank(graph, w, c)


def cluster_free_weights(graph) -> tuple[np.ndarray, np.ndarray]:
    """Node and edge weights without a cluster: fastest compute; fixed comm or bytes over the
    reference bandwidth of the sample generators (10 GB/s)."""
    from .cluster import REF_BANDWIDTH

    gc = graph.c
    c = np.where(np.isnan(gc.comm), gc.bytes / REF_BANDWIDTH, np.nan_to_num(gc.comm))
    return gc.min_compute(), c


def cpd_topo_order(graph, cluster=None, *, w: np.ndarray | None = None,
                   c: np.ndarray | None = None, cp: np.ndarray | None = None) -> list[int]:
    """Celeritas's CPD-TOPO order (Algorithm 1, function ``CPD_TOPO``).

    The queue starts with the in-degree-0 ops sorted by decreasing ``cpath``; after emitting
    the head, its children are visited in increasing ``cpath`` and each one whose in-degree
    drops to 0 is pushed to the head, so the child on the critical path comes next. Ties are
    broken by the graph's topological index (deterministic). ``cp`` gives ``cpath`` directly;
    otherwise it is computed by :func:`cpath` from ``cluster``/``w``/``c``.

    >>> from workbench import samples
    >>> g = samples.pesto_fig2()
    >>> [g.c.names[i] for i in cpd_topo_order(g, c=np.full(g.n_edges, 1.0))]
    ['A', 'F', 'G', 'B', 'C', 'D', 'E']
    """
    gc = graph.c
    if cp is None:
        cp = cpath(graph, cluster, w=w, c=c)
    cp = np.asarray(cp, dtype=float)
    if cp.shape != (gc.n,):
        raise GraphError(f"cpath has shape {cp.shape}, graph {graph.name!r} has {gc.n} ops")
    # rank: position in (cpath ascending, index descending) order -> one integer key per op
    rank = np.empty(gc.n, dtype=np.int64)
    rank[np.lexsort((-np.arange(gc.n), cp))] = np.arange(gc.n)
    rank_l = rank.tolist()
    indeg = [len(p) for p in gc.pred]
    sources = [i for i in range(gc.n) if indeg[i] == 0]
    sources.sort(key=rank_l.__getitem__, reverse=True)       # decreasing cpath
    q = deque(sources)
    succ = gc.succ
    out: list[int] = []
    while q:
        i = q.popleft()
        out.append(i)
        kids = succ[i]
        if len(kids) > 1:
            kids = sorted(kids, key=rank_l.__getitem__)       # increasing cpath
        for j in kids:
            indeg[j] -= 1
            if indeg[j] == 0:
                q.appendleft(j)
    return out


ORDERS = {"m_topo": mtopo_order, "bfs": bfs_topo_order, "dfs": dfs_topo_order,
          "cpd": cpd_topo_order}
"""Order name -> function ``(graph) -> list[int]`` (``cpd`` also takes a cluster)."""


def positions(order: Sequence[int]) -> np.ndarray:
    """Inverse permutation: ``positions(order)[op] = place of op in order``.

    >>> positions([2, 0, 1]).tolist()
    [1, 2, 0]
    """
    order = np.asarray(order, dtype=np.int64)
    pos = np.empty(len(order), dtype=np.int64)
    pos[order] = np.arange(len(order))
    return pos


def check_topological(graph, order: Sequence[int]) -> None:
    """Raise GraphError unless ``order`` lists every op once with every edge going forward.

    >>> from workbench import samples
    >>> check_topological(samples.diamond(), [0, 2, 1, 3])
    >>> check_topological(samples.diamond(), [3, 2, 1, 0])
    Traceback (most recent call last):
    ...
    workbench.errors.GraphError: order is not topological: edge a -> b goes backwards
    """
    gc = graph.c
    order = np.asarray(order, dtype=np.int64)
    if len(order) != gc.n or len(np.unique(order)) != gc.n or (
            gc.n and (order.min() < 0 or order.max() >= gc.n)):
        raise GraphError(f"order lists {len(order)} entries, not each of the {gc.n} ops of "
                         f"graph {graph.name!r} once")
    pos = positions(order)
    bad = np.nonzero(pos[gc.src] >= pos[gc.dst])[0]
    if len(bad):
        e = int(bad[0])
        raise GraphError(f"order is not topological: edge {gc.names[int(gc.src[e])]} -> "
                         f"{gc.names[int(gc.dst[e])]} goes backwards")


def split_cut(graph, order: Sequence[int], parts: int, *, weights: np.ndarray | None = None
              ) -> int:
    """Edges cut when ``order`` is cut into ``parts`` consecutive pieces of equal total
    ``weights`` (default one per op): the communication a sequential fill would cause.

    >>> from workbench import samples
    >>> g = samples.diamond()
    >>> split_cut(g, [0, 1, 2, 3], 2)
    2
    """
    gc = graph.c
    w = np.ones(gc.n) if weights is None else np.asarray(weights, dtype=float)
    order = np.asarray(order, dtype=np.int64)
    cum = np.cumsum(w[order])
    total = cum[-1] if len(cum) else 0.0
    part_in_order = np.minimum((cum - w[order] * 0.5) * parts // max(total, 1e-300),
                               parts - 1).astype(np.int64)
    part = np.empty(gc.n, dtype=np.int64)
    part[order] = part_in_order
    return int((part[gc.src] != part[gc.dst]).sum())
