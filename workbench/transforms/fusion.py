"""Optimal Operation Fusion (Celeritas, Section 5.1, Algorithm 1).

The ops are laid out in CPD-TOPO order ``v_1 .. v_n`` (critical path first, see
:mod:`workbench.orders`); breakpoints cut this sequence into runs of consecutive ops, and each
run becomes one node of a *coarse graph*. Because only ops adjacent in a topological sequence
are merged, the coarse graph is acyclic (Lemma 2; checked on every call). The breakpoints are
chosen by the dynamic programme of Eqs. 4-6 (Kernighan's optimal sequential partition)::

    cost(i, j) = communication from {v_i .. v_(j-1)} to {v_j .. v_n}                 (Eq. 4)
    S(j)       = min over i in [j - R, j - 1] of S(i) + cost(i, j)                      (Eq. 6)
                 subject to  memory(v_i .. v_(j-1)) <= M

so ``S(n)`` is the least total communication between clusters of at most ``R`` consecutive ops
holding at most ``M`` bytes each. ``cost`` is updated incrementally as in Eq. 5 (an op's
out-edges join the cut when it enters a run, the edges into it leave), which makes the whole
programme ``O(n R + |E|)`` with the inner minimum vectorised. A run is also kept on ops that
share a device kind, so every coarse node can run somewhere.

:func:`fuse` returns a :class:`Fusion` holding the coarse graph, the op -> cluster map, the
breakpoints, and nodes / CCR before and after (the paper's Table 2); :meth:`Fusion.expand`
maps a plan of the coarse graph back onto the original ops.

Examples
--------
>>> from workbench import samples, Cluster
>>> g, c = samples.transformer(600, seed=0), Cluster.preset("4xV100-nvlink")
>>> f = fuse(g, c, R=50)
>>> f.stats["nodes_before"], f.stats["nodes_after"] <= 40
(600, True)
>>> f.stats["ccr_after"] < f.stats["ccr_before"]
True
>>> sorted(set(f.cluster_of.tolist())) == list(range(f.coarse.n_ops))
True
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from ..errors import GraphError, InfeasibleError, PlanError, SolverError
from ..graph import OP_KINDS, OpGraph

__all__ = ["Fusion", "check_fusion_params", "fuse"]


@dataclass
class Fusion:
    """The result of :func:`fuse`.

    Attributes
    ----------
    graph : OpGraph
        The original graph.
    coarse : OpGraph
        One node per cluster, named ``fused<k>``; compute per device kind and memory are the
        members' sums, edges bundle the tensors between clusters (a tensor sent to several ops
        of one cluster counts once).
    cluster_of : numpy.ndarray
        Cluster index of every op (in ``graph.c`` op order); cluster ``k`` is coarse op ``k``.
    members : list of list of int
        Op indices of each cluster, in sequence order.
    sequence : numpy.ndarray
        The op sequence that was cut (CPD-TOPO by default).
    breakpoints : list of int
        Positions in ``sequence`` where a cluster starts (the first is 0).
    cut_comm : float
        ``S(n)``: total communication (ms) on edges between clusters (Eq. 6 objective).
    R, M : int, float
        Exploration range and memory cap used.
    stats : dict
        ``nodes_before``, ``nodes_after``, ``edges_before``, ``edges_after``, ``ccr_before``,
        ``ccr_after``, ``R``, ``M``, ``largest_cluster``.
    """

    graph: OpGraph
    coarse: OpGraph
    cluster_of: np.ndarray
    members: list
    sequence: np.ndarray
    breakpoints: list
    cut_comm: float
    R: int
    M: float
    stats: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        s = self.stats
        return (f"Fusion({self.graph.name!r}: {s['nodes_before']} -> {s['nodes_after']} nodes, "
                f"CCR {s['ccr_before']:.3g} -> {s['ccr_after']:.3g}, R={self.R})")

    def member_names(self, k: int) -> list[str]:
        """Names of the ops fused into coarse node ``k``."""
        names = self.graph.c.names
        return [names[i] for i in self.members[k]]

    def expand_placement(self, placement: Mapping[str, str], *,
                         first: Sequence[int] | None = None) -> dict:
        """Op -> device from coarse node -> device.

        Colocation groups follow their first member (Celeritas Section 6.1, as in Baechi):
        the first op of a group met when the clusters are visited in ``first`` (coarse node
        indices; default their index order) and their members in sequence order decides the
        device of the whole group.
        """
        cnames = self.coarse.c.names
        missing = [v for v in cnames if v not in placement]
        if missing:
            raise PlanError(f"coarse placement leaves {len(missing)} fused nodes unplaced "
                            f"(e.g. {missing[0]!r})")
        gc = self.graph.c
        names = gc.names
        coloc = gc.coloc.tolist()
        group_dev: dict[int, str] = {}
        out: dict[str, str] = {}
        visit = range(len(self.members)) if first is None else first
        for k in visit:
            d = placement[cnames[k]]
            for i in self.members[k]:
                g = coloc[i]
                if g >= 0:
                    out[names[i]] = group_dev.setdefault(g, d)
                else:
                    out[names[i]] = d
        if len(out) != gc.n:
            raise PlanError("visit order of the fused nodes must list each node once")
        return out

    def expand(self, plan, *, first: Sequence[int] | None = None, cluster=None):
        """A :class:`~workbench.plan.Plan` of the original graph from a plan of ``coarse``.

        The per-device order, if the coarse plan has one, is expanded so that it stays free of
        deadlock: coarse nodes are laid out in one global order compatible with both the
        coarse edges and every device's coarse order, members keep their sequence order, and
        each device runs its ops in that global order (ops moved by their colocation group
        included). ``cluster`` (optional) validates the result.

        >>> from workbench import samples, Cluster, Plan
        >>> g = samples.cnn(40)
        >>> f = fuse(g, R=10)
        >>> cp = Plan(f.coarse, {v: "gpu0" for v in f.coarse.ops},
        ...           order={"gpu0": f.coarse.ops})
        >>> p = f.expand(cp)
        >>> p.order["gpu0"] == [g.c.names[i] for i in f.sequence]
        True
        """
        from ..plan import Plan

        if plan.graph is not self.coarse and plan.graph.fingerprint != self.coarse.fingerprint:
            raise PlanError(f"plan {plan.method!r} is not a plan of the fused graph "
                            f"{self.coarse.name!r}")
        placement = self.expand_placement(plan.placement, first=first)
        order = None
        if plan.order is not None:
            cg = nx.DiGraph()
            cidx = self.coarse.index
            cg.add_nodes_from(range(self.coarse.n_ops))
            cg.add_edges_from(zip(self.coarse.c.src.tolist(), self.coarse.c.dst.tolist()))
            for ops in plan.order.values():
                seq = [cidx[v] for v in ops]
                cg.add_edges_from(itertools.pairwise(seq))
            try:
                glob = list(nx.lexicographical_topological_sort(cg))
            except nx.NetworkXUnfeasible:
                raise PlanError(f"plan {plan.method!r}: its device orders contradict the "
                                f"edges of the fused graph (they would deadlock)") from None
            rank = np.empty(self.coarse.n_ops, dtype=np.int64)
            rank[np.asarray(glob, dtype=np.int64)] = np.arange(len(glob))
            pos = np.empty(self.graph.n_ops, dtype=np.int64)
            pos[self.sequence] = np.arange(self.graph.n_ops)
            key = np.lexsort((pos, rank[self.cluster_of]))
            names = self.graph.c.names
            order = {d: [] for d in plan.order}
            for i in key.tolist():
                order.setdefault(placement[names[i]], []).append(names[i])
        info = dict(plan.info)
        info["fusion"] = dict(self.stats)
        out = Plan(self.graph, placement, method=plan.method, order=order, status=plan.status,
                   predicted=dict(plan.predicted), stats=dict(plan.stats), info=info)
        if cluster is not None:
            out.validate(cluster)
        return out


def check_fusion_params(graph, R, M) -> tuple[int, float]:
    """Validate the exploration range ``R`` (integer >= 1) and memory cap ``M`` (>= the largest
    op's memory; ``None`` = no cap); return them normalised."""
    if isinstance(R, bool) or not isinstance(R, (int, np.integer)):
        raise SolverError(f"exploration range R must be an integer >= 1, got {R!r}")
    if R < 1:
        raise SolverError(f"exploration range R must be >= 1, got {R}")
    if M is None:
        return int(R), math.inf
    try:
        M = float(M)
    except (TypeError, ValueError):
        raise SolverError(f"memory cap M must be a number of bytes, got {M!r}") from None
    if math.isnan(M):
        raise SolverError("memory cap M is NaN")
    gc = graph.c
    if gc.n:
        big = int(np.argmax(gc.memory))
        if gc.memory[big] > M:
            raise SolverError(
                f"memory cap M = {M:.6g} bytes is below the memory of op {gc.names[big]!r} "
                f"({gc.memory[big]:.6g} bytes): no cluster could hold it")
    return int(R), M


def _weights(graph, cluster, w, c):
    if w is not None and c is not None:
        return np.asarray(w, dtype=float), np.asarray(c, dtype=float)
    if cluster is not None:
        from ..analysis import levels

        lv = levels(graph, cluster)
        return (lv.w if w is None else np.asarray(w, float)), \
            (lv.c if c is None else np.asarray(c, float))
    from ..orders import cluster_free_weights

    w0, c0 = cluster_free_weights(graph)
    return (w0 if w is None else np.asarray(w, float)), (c0 if c is None else np.asarray(c, float))


def fuse(graph: OpGraph, cluster=None, *, R: int = 200, M: float | None = None,
         order: str | Sequence[int] = "cpd", w: np.ndarray | None = None,
         c: np.ndarray | None = None) -> Fusion:
    """Optimal Operation Fusion (Algorithm 1): cut ``order`` into runs of at most ``R`` ops and
    ``M`` bytes with the least communication between runs; fuse each run into one node.

    Parameters
    ----------
    graph : OpGraph
    cluster : Cluster, optional
        Gives node weights (mean compute over its devices) and edge weights (mean transfer
        time between distinct devices); runs are kept on ops sharing one of its device kinds.
        Without it: fastest compute and bytes at 10 GB/s (or the edge's fixed ``comm``).
    R : int
        Exploration range: the largest number of ops in one cluster (the paper uses 200).
    M : float or None
        Memory cap of a cluster in bytes (None: no cap). Must hold the largest op.
    order : {"cpd", "dfs", "bfs"} or sequence of op indices
        The topological sequence that is cut (CPD-TOPO in the paper).
    w, c : numpy.ndarray, optional
        Node / edge weights overriding those derived from ``cluster``.

    Raises
    ------
    SolverError
        ``R < 1``, ``M`` below the largest op, an unknown order name.
    GraphError
        An explicit ``order`` that is not topological.
    InfeasibleError
        An op that runs on none of the cluster's device kinds.

    Examples
    --------
    A chain whose cheapest cut is in the middle, fused with at most 3 ops per cluster:

    >>> from workbench.graph import OpGraph
    >>> ops = [(v, {"compute": {"gpu": 1.0}}) for v in "abcd"]
    >>> g = OpGraph.from_ops(ops, [("a", "b", {"bytes": 5e7}), ("b", "c", {"bytes": 1e6}),
    ...                            ("c", "d", {"bytes": 5e7})])
    >>> f = fuse(g, R=3)
    >>> [f.member_names(k) for k in range(f.coarse.n_ops)], round(f.cut_comm, 3)
    ([['a', 'b'], ['c', 'd']], 0.1)
    >>> fuse(g, R=0)
    Traceback (most recent call last):
    ...
    workbench.errors.SolverError: exploration range R must be >= 1, got 0
    """
    from .. import orders as _orders

    R, M = check_fusion_params(graph, R, M)
    gc = graph.c
    n = gc.n
    w, ce = _weights(graph, cluster, w, c)
    if isinstance(order, str):
        if order == "cpd":
            seq = _orders.cpd_topo_order(graph, w=w, c=ce)
        elif order in ("dfs", "bfs", "m_topo"):
            seq = _orders.ORDERS[order](graph)
        else:
            raise SolverError(f"order must be 'cpd', 'dfs', 'bfs' or a sequence of op indices, "
                              f"got {order!r}")
    else:
        seq = list(order)
        _orders.check_topological(graph, seq)
    seq = np.asarray(seq, dtype=np.int64)
    pos = _orders.positions(seq) if n else np.zeros(0, dtype=np.int64)

    # ---- device kinds a run may share (those of the cluster, else all of the graph's)
    kinds = list(gc.kinds)
    if cluster is not None:
        kinds = [k for k in kinds if k in set(cluster.kinds)]
    ok = np.isfinite(gc.compute[:, [gc.kind_index[k] for k in kinds]]) if kinds else \
        np.zeros((n, 0), dtype=bool)
    nowhere = np.nonzero(~ok.any(axis=1))[0] if n else []
    if len(nowhere):
        raise InfeasibleError(f"op {gc.names[int(nowhere[0])]!r} can run on none of the device "
                              f"kinds {', '.join(kinds) or '(none)'}")

    # ---- lower end of the feasible window of each breakpoint j (1..n)
    js = np.arange(1, n + 1)
    lo = np.maximum(js - R, 0)
    if math.isfinite(M):
        pm = np.concatenate([[0.0], np.cumsum(gc.memory[seq])])
        lo = np.maximum(lo, np.searchsorted(pm, pm[1:] - M * (1 + 1e-12) - 1e-9, side="left"))
    if ok.shape[1] > 1 and not ok.all():
        # for each kind: first position after the last op (before j) that cannot run on it
        best = np.full(n, n, dtype=np.int64)
        for k in range(ok.shape[1]):
            bad = np.where(~ok[seq, k], np.arange(n), -1)
            last_bad = np.maximum.accumulate(bad)          # last bad position <= p
            best = np.minimum(best, last_bad + 1)
        lo = np.maximum(lo, best)
    lo_l = lo.tolist()

    # ---- edges in sequence positions, grouped by destination position
    ps, pd = pos[gc.src], pos[gc.dst]
    by_dst = np.argsort(pd, kind="stable")
    ps_s, ce_s = ps[by_dst], ce[by_dst]
    dptr = np.searchsorted(pd[by_dst], np.arange(n + 1), side="left").tolist()
    rem = np.zeros(n)                                   # out-comm of position k to >= j
    np.add.at(rem, ps, ce)
    S = np.full(n + 1, np.inf)
    S[0] = 0.0
    P = np.zeros(n + 1, dtype=np.int64)
    for j in range(1, n + 1):
        a, b = dptr[j - 1], dptr[j]                     # edges ending at position j - 1
        if b > a:
            rem[ps_s[a:b]] -= ce_s[a:b]
        low = lo_l[j - 1]
        r = rem[low:j]
        cost = np.cumsum(r[::-1])[::-1]                 # cost(i, j) for i = low .. j-1
        cand = S[low:j] + cost
        t = int(np.argmin(cand))                        # first minimum = the largest cluster
        S[j] = cand[t]
        P[j] = low + t
    bps = []
    k = n
    while k > 0:
        k = int(P[k])
        bps.append(k)
    bps.reverse()
    bounds = bps + [n]
    cluster_of = np.empty(n, dtype=np.int64)
    members = []
    for t in range(len(bps)):
        run = seq[bounds[t]:bounds[t + 1]]
        cluster_of[run] = t
        members.append(run.tolist())
    # Lemma 2: runs of a topological sequence never point backwards, so the coarse graph is a DAG
    cs, cd = cluster_of[gc.src], cluster_of[gc.dst]
    if np.any(cs > cd):
        e = int(np.argmax(cs > cd))
        raise AssertionError(f"Lemma 2 violated: edge {gc.names[int(gc.src[e])]} -> "
                             f"{gc.names[int(gc.dst[e])]} goes from cluster {int(cs[e])} back "
                             f"to cluster {int(cd[e])}")
    coarse = _coarse_graph(graph, seq, bps, cluster_of, members, ce)
    work = float(w.sum())
    cw = _coarse_edge_comm(graph, cluster_of, ce)
    stats = {
        "nodes_before": n, "nodes_after": coarse.n_ops,
        "edges_before": gc.m, "edges_after": coarse.n_edges,
        "ccr_before": float(ce.sum()) / work if work > 0 else math.inf,
        "ccr_after": float(cw) / work if work > 0 else math.inf,
        "cut_comm_ms": float(S[n]), "R": R, "M": M,
        "largest_cluster": max((len(m) for m in members), default=0),
    }
    return Fusion(graph, coarse, cluster_of, members, seq, bps, float(S[n]), R, M, stats)


def _dedup_cross(graph, cluster_of):
    """Cross-cluster edges reduced to one per (source op, destination cluster): a tensor is
    sent once to a cluster however many of its ops read it. Returns edge ids kept."""
    gc = graph.c
    cs, cd = cluster_of[gc.src], cluster_of[gc.dst]
    cross = np.nonzero(cs != cd)[0]
    if not len(cross):
        return cross
    key = gc.src[cross] * (int(cluster_of.max()) + 1) + cd[cross]
    o = np.lexsort((-gc.bytes[cross], key))
    ks = key[o]
    first = np.ones(len(ks), dtype=bool)
    first[1:] = ks[1:] != ks[:-1]
    return cross[o[first]]


def _coarse_edge_comm(graph, cluster_of, ce) -> float:
    keep = _dedup_cross(graph, cluster_of)
    return float(ce[keep].sum()) if len(keep) else 0.0


def _coarse_graph(graph, seq, bps, cluster_of, members, ce) -> OpGraph:
    gc = graph.c
    nk = len(bps)
    comp = np.add.reduceat(gc.compute[seq], bps, axis=0) if nk else np.zeros((0, len(gc.kinds)))
    mem = np.add.reduceat(gc.memory[seq], bps) if nk else np.zeros(0)
    kinds_of = gc.op_kind
    names = gc.names
    ops = []
    for t in range(nk):
        m = members[t]
        kset = set(kinds_of[m].tolist())
        kind = OP_KINDS[kset.pop()] if len(kset) == 1 else "other"
        compute = {k: float(comp[t, j]) for j, k in enumerate(gc.kinds)
                   if math.isfinite(comp[t, j])}
        if not compute:                                  # unreachable: runs share a kind
            raise GraphError(f"fused node {t} has no device kind all of its ops can run on")
        ops.append((f"fused{t}", {"compute": compute, "memory": float(mem[t]), "kind": kind,
                                  "op_type": "Fused", "size": len(m), "first": names[m[0]]}))
    keep = _dedup_cross(graph, cluster_of)
    edges = []
    if len(keep):
        cs, cd = cluster_of[gc.src[keep]], cluster_of[gc.dst[keep]]
        key = cs * nk + cd
        uk, inv = np.unique(key, return_inverse=True)
        nbytes = np.bincount(inv, weights=gc.bytes[keep], minlength=len(uk))
        fixed = ~np.isnan(gc.comm[keep])
        nfixed = np.bincount(inv, weights=fixed.astype(float), minlength=len(uk))
        cnt = np.bincount(inv, minlength=len(uk))
        csum = np.bincount(inv, weights=ce[keep], minlength=len(uk))
        fsum = np.bincount(inv, weights=np.nan_to_num(gc.comm[keep]), minlength=len(uk))
        for u, b, nf, n_, cw, fs in zip(uk.tolist(), nbytes.tolist(), nfixed.tolist(),
                                         cnt.tolist(), csum.tolist(), fsum.tolist()):
            attrs = {"bytes": b}
            if nf > 0:       # fixed transfer times: their sum (mixed bundles: the weights' sum)
                attrs["comm"] = fs if nf == n_ else cw
            edges.append((f"fused{u // nk}", f"fused{u % nk}", attrs))
    return OpGraph.from_ops(ops, edges, name=f"{graph.name}-fused",
                            meta={**graph.meta, "fused_from": graph.name})
