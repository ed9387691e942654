"""Static analysis of a graph on a cluster: node and edge weights, upward rank (b-level),
t-level, the static critical path and CCR.

Weights aggregate over devices because a list scheduler must rank ops before it places them:
HEFT uses the mean over devices, FastT's DPOS the maximum (``agg="max"``).

Examples
--------
>>> from workbench import samples, Cluster
>>> from workbench.analysis import levels, critical_path
>>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
>>> lv = levels(g, c, comm="zero")
>>> lv.blevel.tolist()
[4.0, 3.0, 3.0, 1.0]
>>> critical_path(g, c, comm="zero")
['a', 'b', 'd']
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["node_weights", "edge_weights", "upward_rank", "tlevel", "levels", "Levels",
           "critical_path", "ccr"]

_AGGS = ("mean", "max", "min")


def _check_agg(agg: str, what: str, extra: tuple = ()) -> None:
    if agg not in _AGGS + extra:
        raise ValueError(f"{what} must be one of {', '.join(_AGGS + extra)}, got {agg!r}")


def node_weights(graph, cluster, agg: str = "mean") -> np.ndarray:
    """Compute time of each op aggregated over the devices that can run it."""
    _check_agg(agg, "agg")
    t = cluster.op_times(graph)
    finite = np.isfinite(t)
    if agg == "min":
        return t.min(axis=1)
    if agg == "max":
        return np.where(finite, t, -np.inf).max(axis=1)
    cnt = finite.sum(axis=1)
    return np.where(finite, t, 0.0).sum(axis=1) / np.maximum(cnt, 1)


def edge_weights(graph, cluster, agg: str = "mean") -> np.ndarray:
    """Transfer time of each edge aggregated over ordered pairs of distinct devices.

    ``agg="zero"`` gives zeros (communication ignored). Edge order is ``graph.c``'s.
    """
    _check_agg(agg, "comm", ("zero",))
    gc, cc = graph.c, cluster.c
    n = cc.n
    if agg == "zero" or n < 2 or gc.m == 0:
        return np.zeros(gc.m)
    fixed = ~np.isnan(gc.comm)
    per_pair = []
    for a in range(n):
        for b in range(n):
            if a == b:
                continue
            if cc.host_mode:
                hops = float(cc.staged[a]) + float(cc.staged[b])
                link = (cc.up_lat[a] + gc.bytes * cc.up_inv_bw[a]
                        + cc.up_lat[b] + gc.bytes * cc.up_inv_bw[b])
                per_pair.append(np.where(fixed, np.nan_to_num(gc.comm) * hops, link))
            else:
                link = cc.lat[a, b] + gc.bytes * cc.inv_bw[a, b]
                per_pair.append(np.where(fixed, np.nan_to_num(gc.comm), link))
    stack = np.vstack(per_pair)
    return {"mean": stack.mean, "max": stack.max, "min": stack.min}[agg](axis=0)


def upward_rank(graph, w: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``rank(i) = w[i] + max over successors j of (c[i->j] + rank(j))`` (the b-level)."""
    gc = graph.c
    rank = np.asarray(w, dtype=float).tolist()
    cl = np.asarray(c, dtype=float).tolist()
    dst = gc.dst.tolist()
    out_edges = gc.out_edges
    for i in range(gc.n - 1, -1, -1):
        best = 0.0
        for e in out_edges[i]:
            x = cl[e] + rank[dst[e]]
            if x > best:
                best = x
        rank[i] += best
    return np.array(rank)


def tlevel(graph, w: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Earliest start with unbounded devices: ``max over preds j of (tlevel(j) + w[j] + c[j->i])``."""
    gc = graph.c
    wl = np.asarray(w, dtype=float).tolist()
    cl = np.asarray(c, dtype=float).tolist()
    src = gc.src.tolist()
    tl = [0.0] * gc.n
    for i in range(gc.n):
        best = 0.0
        for e in gc.in_edges[i]:
            j = src[e]
            x = tl[j] + wl[j] + cl[e]
            if x > best:
                best = x
        tl[i] = best
    return np.array(tl)


@dataclass
class Levels:
    """Node weights ``w``, edge weights ``c``, ``tlevel``, ``blevel`` (= upward rank) and the
    static critical-path length ``cp_length = max(tlevel + blevel)``."""

    w: np.ndarray
    c: np.ndarray
    tlevel: np.ndarray
    blevel: np.ndarray

    @property
    def cp_length(self) -> float:
        return float((self.tlevel + self.blevel).max()) if len(self.w) else 0.0


def levels(graph, cluster, *, agg: str = "mean", comm: str | None = None) -> Levels:
    """Weights and both levels; ``comm`` aggregates edges (defaults to ``agg``; ``"zero"``)."""
    w = node_weights(graph, cluster, agg)
    c = edge_weights(graph, cluster, comm or agg)
    return Levels(w, c, tlevel(graph, w, c), upward_rank(graph, w, c))


def critical_path(graph, cluster=None, *, agg: str = "mean", comm: str | None = None,
                  lv: Levels | None = None) -> list[str]:
    """The static critical path (longest path by ``w`` and ``c``) as op names, source first.

    Ties are broken by the lowest topological index, so the result is deterministic.
    """
    if lv is None:
        lv = levels(graph, cluster, agg=agg, comm=comm)
    gc = graph.c
    if gc.n == 0:
        return []
    total = lv.tlevel + lv.blevel
    L = total.max()
    tol = 1e-9 * max(1.0, L)
    i = int(np.argmax(np.isclose(total, L, rtol=0, atol=tol) & (lv.tlevel <= tol)))
    path = [i]
    dst = gc.dst
    while gc.out_edges[i]:
        nxt = None
        for e in gc.out_edges[i]:
            j = int(dst[e])
            if abs(lv.tlevel[i] + lv.w[i] + lv.c[e] + lv.blevel[j] - L) <= tol:
                nxt = j
                break
        if nxt is None:
            break
        i = nxt
        path.append(i)
    return [gc.names[k] for k in path]


def ccr(graph, cluster) -> float:
    """Communication-to-computation ratio with the cluster's mean link (see OpGraph.ccr)."""
    return graph.ccr(cluster)
