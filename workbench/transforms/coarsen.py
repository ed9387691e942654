"""Pesto's acyclic batch coarsening (Hafeez et al., Middleware'21, Section 3.3).

Each round computes the *height* of every vertex (level-wise topological sort, roots at 1) and
builds a matching of edges in descending order of their communication cost, keeping only edges
``(u, v)`` that satisfy the sufficient conditions of Theorem 3.5, then contracts all matched
pairs at once. Rounds repeat until the target number of vertices is reached or no edge can be
merged.

The conditions, and why the contracted graph stays acyclic
-----------------------------------------------------------
An edge ``(u, v)`` of the current graph is *mergeable* when one of these holds:

(c) ``|succ(u)| = 1``: a path can leave ``{u, v}`` only from ``v``, so the pair behaves like the
    original edge ``u -> v``;
(d) ``|pred(v)| = 1``: a path can enter ``{u, v}`` only at ``u`` (same argument);
(b) every other successor ``w`` of ``u`` has ``H(w) > H(v)``;
(a) ``H(v) = H(u) + 1``.

Follow a cycle of the contracted graph through the vertices where it enters each coarse vertex:
an original edge raises the height by at least 1; inside a pair, a path that enters at ``v`` and
leaves from ``u`` drops by ``H(v) - H(u)`` first. Under (c) or (d) that never happens, under (b)
the next entry is strictly higher than ``v``, under (a) it is at least as high. Heights along a
cycle cannot only rise, so every pair on a cycle satisfies (a) alone, all at one level, joined by
*cross edges* ``u_i -> v_j``. This is condition (iii) of the theorem ("no conflicting pairs"); we
enforce it by accepting a pair that satisfies (a) alone only if ``u`` has no edge to the ``v`` of
such a pair accepted earlier in the round: cross edges then all point from earlier to later
pairs and cannot close a cycle. Each check costs the out-degree of ``u``; a round costs
``O(|E| log |E|)`` for the sort.

Beyond the paper
----------------
* Device affinity: two vertices merge only when they can run on exactly the same device kinds
  (restricted to the cluster's kinds when a cluster is given), so a merged vertex is runnable
  wherever its members are.
* Colocation: merging vertices of two colocation groups unites the groups (everything in both
  must then share a device); this is refused when the united group would have no common device
  kind or, with a cluster, would not fit in the largest device's memory.
* Balance: a merged vertex may not exceed ``balance * total_work / target`` of compute (work is
  each op's fastest time); when no edge is left under that cap the cap doubles, so the target is
  still reached where the structure allows (Corollary 3.6), while vertices stay comparable in
  size, which keeps the coarse graph parallelisable ("maintaining parallelizability").
* Weight cap (``weights``, ``weight_cap``): a hard cap on the summed weight of a merged vertex
  and of a united colocation group (never relaxed). ``pesto`` weighs ops by their tensor
  footprint and caps units so that a placement of the coarse graph can meet the paper's memory
  balance of the *original* graph: without it, merges united the colocation groups of
  rnnlm-4xV100 into one group holding the whole model (one device only).

Examples
--------
>>> from workbench import samples
>>> from workbench.transforms.coarsen import coarsen
>>> g = samples.lstm_grid(300, layers=4)
>>> cg = coarsen(g, 40)
>>> cg.coarse.n_ops <= 40, sum(len(m) for m in cg.members) == g.n_ops
(True, True)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import networkx as nx

from ..errors import GraphError, InfeasibleError, PlanError
from ..graph import OpGraph
from ..plan import Plan

__all__ = ["Coarsening", "coarsen", "heights", "min_coarse_size"]


def heights(succ: list, pred_count: list) -> tuple[list[int], list[int]]:
    """Heights by level-wise Kahn sort (roots have height 1) and a topological order.

    ``succ[i]`` iterates the successors of vertex ``i``; ``pred_count[i]`` is its in-degree.

    >>> heights([[1, 2], [2], []], [0, 1, 2])
    ([1, 2, 3], [0, 1, 2])
    """
    n = len(succ)
    indeg = list(pred_count)
    h = [1] * n
    order = [i for i in range(n) if indeg[i] == 0]
    k = 0
    while k < len(order):
        i = order[k]
        k += 1
        hi = h[i] + 1
        for j in succ[i]:
            h[j] = max(h[j], hi)
            indeg[j] -= 1
            if indeg[j] == 0:
                order.append(j)
    if len(order) != n:  # pragma: no cover - the construction keeps the graph acyclic
        raise GraphError("coarsening produced a cycle (internal error)")
    return h, order


def _kinds_of(graph: OpGraph, cluster) -> list[frozenset]:
    allowed = set(cluster.kinds) if cluster is not None else None
    out = []
    for v in graph.ops:
        ks = frozenset(graph.nx.nodes[v]["compute"])
        if allowed is not None:
            ks = ks & allowed
        out.append(ks)
    return out


def min_coarse_size(graph: OpGraph, cluster=None) -> int:
    """A lower bound on the size of any coarsening: ops that run on different device kinds never
    merge, so there is at least one vertex per distinct set of runnable kinds.

    >>> from workbench import samples
    >>> min_coarse_size(samples.random_dag(30, seed=1, cpu_only_fraction=0.3))
    2
    """
    return len(set(_kinds_of(graph, cluster))) if graph.n_ops else 0


@dataclass(frozen=True, eq=False)
class Coarsening:
    """The result of :func:`coarsen`.

    Attributes
    ----------
    graph : OpGraph
        The original graph.
    coarse : OpGraph
        The coarse graph: compute and memory summed over members, edges aggregated (one edge
        per pair of coarse vertices; its bytes are the sum over distinct producing ops of the
        largest tensor each sends across).
    members : tuple of tuple of str
        Coarse vertex ``i`` (in ``coarse.ops`` order) -> its original ops in topological order.
    vertex_of : dict
        Original op -> coarse vertex name.
    rounds : int
        Matching rounds run.
    seconds : float
        Wall time.
    stopped : str
        ``"target"``, ``"no_feasible_edge"`` or ``"deadline"`` (:func:`coarsen`'s
        ``stop_at``).
    """

    graph: OpGraph
    coarse: OpGraph
    members: tuple
    vertex_of: dict
    rounds: int
    seconds: float
    stopped: str
    history: tuple = field(default=())

    @property
    def n_vertices(self) -> int:
        return self.coarse.n_ops

    def members_of(self, vertex: str) -> tuple:
        """Original ops merged into coarse vertex ``vertex``."""
        try:
            return self.members[self.coarse.index[vertex]]
        except KeyError:
            raise GraphError(f"{vertex!r} is not a vertex of coarse graph "
                             f"{self.coarse.name!r}") from None

    def summary(self) -> dict:
        sizes = [len(m) for m in self.members]
        return {"original_ops": self.graph.n_ops, "coarse_vertices": self.coarse.n_ops,
                "coarse_edges": self.coarse.n_edges, "largest_vertex": max(sizes, default=0),
                "rounds": self.rounds, "seconds": self.seconds, "stopped": self.stopped}

    def expand(self, plan: Plan) -> Plan:
        """Map a plan on the coarse graph back to the original graph.

        Every member goes to its coarse vertex's device; when the plan has an order, the
        members of a coarse vertex run consecutively in topological order at its place.

        >>> from workbench import samples, Cluster, Plan
        >>> from workbench.simulate import simulate
        >>> g = samples.pesto_fig2()
        >>> cg = coarsen(g, 4)
        >>> [list(m) for m in cg.members]
        [['A', 'F'], ['B', 'C', 'D'], ['G'], ['E']]
        >>> coarse_plan = Plan(cg.coarse, {v: "gpu0" for v in cg.coarse.ops},
        ...                    order={"gpu0": cg.coarse.ops})
        >>> p = cg.expand(coarse_plan)
        >>> p.order["gpu0"], p.graph is g
        (['A', 'F', 'B', 'C', 'D', 'G', 'E'], True)
        >>> simulate(p, Cluster.preset("2xV100-pcie")).makespan
        11.0
        """
        if plan.graph is not self.coarse and plan.graph.fingerprint != self.coarse.fingerprint:
            raise PlanError(f"plan {plan.method!r} is for graph {plan.graph.name!r}, not for the "
                            f"coarse graph {self.coarse.name!r} of this coarsening")
        missing = [v for v in self.coarse.ops if v not in plan.placement]
        if missing:
            raise PlanError(f"plan {plan.method!r} leaves coarse vertex {missing[0]!r} unplaced")
        placement = {op: plan.placement[self.vertex_of[op]] for op in self.graph.ops}
        order = None
        if plan.order is not None:
            idx = self.coarse.index
            order = {d: [m for x in seq for m in self.members[idx[x]]]
                     for d, seq in plan.order.items()}
        info = dict(plan.info)
        info["coarsening"] = self.summary()
        return Plan(self.graph, placement, method=plan.method, order=order, status=plan.status,
                    predicted=dict(plan.predicted), stats=dict(plan.stats), info=info)


class _UnionFind:
    def __init__(self, kinds: list, mem: list, wt: list | None = None):
        self.parent = list(range(len(kinds)))
        self.kinds = list(kinds)
        self.mem = list(mem)
        self.wt = list(wt) if wt is not None else [0.0] * len(kinds)

    def find(self, a: int) -> int:
        p = self.parent
        while p[a] != a:
            p[a] = p[p[a]]
            a = p[a]
        return a

    def union(self, a: int, b: int) -> int:
        a, b = self.find(a), self.find(b)
        if a == b:
            return a
        if b < a:
            a, b = b, a
        self.parent[b] = a
        self.kinds[a] = self.kinds[a] & self.kinds[b]
        self.mem[a] += self.mem[b]
        self.wt[a] += self.wt[b]
        return a


def coarsen(graph: OpGraph, target: int, *, cluster=None, balance: float | None = 2.0,
            cp_slack: float | None = 0.1, max_rounds: int = 200,
            strict: bool = False, deadline: float | None = None, weights=None,
            weight_cap: float | None = None, stop_at: float | None = None) -> Coarsening:
    """Coarsen ``graph`` to at most ``target`` vertices by Pesto's acyclic batch merging.

    Parameters
    ----------
    graph : OpGraph
    target : int
        Desired number of coarse vertices (>= 1).
    cluster : Cluster, optional
        Restricts device kinds to the cluster's, sets edge costs from its mean link (else bytes
        over :data:`workbench.cluster.REF_BANDWIDTH`) and caps a merged vertex's memory (and
        a united colocation group's) at the largest device's memory.
    balance : float or None
        Cap on a merged vertex's compute, as a multiple of ``total_work / target``; doubled each
        time no edge fits under it. ``None`` = no cap (the paper's plain rule).
    cp_slack : float or None
        Parallelism guard: a pair merges only if the longest compute path through the merged
        vertex stays within ``(1 + cp_slack)`` times the original graph's critical path
        (compute only, fastest device). Relaxed (doubled) together with ``balance`` when no
        edge is left. ``None`` = no guard (the paper's plain rule).
    max_rounds : int
        Safety bound on matching rounds.
    strict : bool
        Raise InfeasibleError when the target cannot be reached (default: return the coarsest
        graph found, with ``stopped="no_feasible_edge"``).
    deadline : float, optional
        A :func:`time.perf_counter` value; once it has passed, both guards are dropped (the
        plain rule, which needs the fewest rounds), so that a caller's time limit holds.
    weights, weight_cap : sequence of float (one per op), float, optional
        A hard cap on the summed ``weights`` of a merged vertex and of a united colocation
        group (never relaxed, not dropped at the deadline); an op or an original group already
        above it stays as it is. ``pesto`` passes the tensor footprint and the room its memory
        balance leaves (:func:`~workbench.solvers.pesto.balance.unit_cap`).
    stop_at : float, optional
        A :func:`time.perf_counter` value after which no round begins, nor one expected to
        end past it (the last round's time scaled by the vertices left): the coarsest graph
        so far is returned with ``stopped="deadline"``. A caller's hard bound, after
        ``deadline``.

    Raises
    ------
    GraphError
        ``target`` below 1 or below :func:`min_coarse_size` (ops on different device kinds that
        can never merge).

    Examples
    --------
    >>> from workbench import samples
    >>> g = samples.random_dag(60, seed=2, cpu_only_fraction=0.2)
    >>> cg = coarsen(g, 10)
    >>> all(len(set(frozenset(g.op(m)["compute"]) for m in ms)) == 1 for ms in cg.members)
    True
    >>> coarsen(g, 1)
    Traceback (most recent call last):
    ...
    workbench.errors.GraphError: cannot coarsen graph 'random60_s2' to 1 vertices: its ops run on 2 different sets of device kinds ({cpu}, {cpu, gpu}), which never merge
    """
    t0 = time.perf_counter()
    kinds0 = _check_args(graph, target, cluster, balance, cp_slack)
    if weight_cap is not None and not weight_cap >= 0:
        raise GraphError(f"weight_cap must be a number >= 0 or None, got {weight_cap!r}")
    cur, uf = _initial_state(graph, kinds0, _edge_costs(graph, cluster), weights)
    memcap = max(d.memory for d in cluster.devices) if cluster is not None else math.inf
    wcap = math.inf if weight_cap is None else float(weight_cap)
    total_work = float(sum(cur.work))
    cap = math.inf if balance is None or total_work <= 0 else balance * total_work / target
    cp0 = _critical_path(cur.succ, cur.pred, cur.work) if cur.n else 0.0
    slack = cp_slack
    rounds = 0
    history = [cur.n]
    stopped = "target"
    t_round, n_round = 0.0, cur.n
    while cur.n > target:
        if rounds >= max_rounds:
            stopped = "no_feasible_edge"
            break
        if stop_at is not None and \
                time.perf_counter() + t_round * cur.n / max(1, n_round) > stop_at:
            stopped = "deadline"
            break
        t_begin, n_round = time.perf_counter(), cur.n
        rounds += 1
        if deadline is not None and (cap < math.inf or slack is not None) \
                and time.perf_counter() > deadline:
            cap, slack = math.inf, None
        h, topo = heights([list(s) for s in cur.succ], [len(p) for p in cur.pred])
        guard = None
        if slack is not None:
            tl, bl = _levels(cur.succ, cur.pred, cur.work, topo)
            guard = (tl, bl, cp0 * (1.0 + slack) * (1 + 1e-12))
        mate, acc = _match(cur, h, cur.n - target, cap, (memcap, wcap), uf, guard)
        if not acc:
            if cap < math.inf or slack is not None:
                cap, slack = _relax(cap, slack, total_work, cur.n)
                t_round = time.perf_counter() - t_begin
                continue
            stopped = "no_feasible_edge"
            break
        if guard is not None:
            slack = _guard_batch(cur, acc, mate, guard[2], slack)
        cur = _contract(cur, mate)
        history.append(cur.n)
        t_round = time.perf_counter() - t_begin
    if cur.n > target and stopped != "deadline":
        stopped = "no_feasible_edge"
        if strict:
            raise InfeasibleError(
                f"cannot coarsen graph {graph.name!r} below {cur.n} vertices (target {target}): "
                f"no remaining edge can merge without a cycle, mixing device kinds, or joining "
                f"colocation groups that share no device kind or memory (or past weight_cap)")
    coarse, members_t, vertex_of = _build_coarse(graph, cur.members, cur.grp, uf)
    return Coarsening(graph=graph, coarse=coarse, members=members_t, vertex_of=vertex_of,
                      rounds=rounds, seconds=time.perf_counter() - t0, stopped=stopped,
                      history=tuple(history))


def _check_args(graph: OpGraph, target, cluster, balance, cp_slack) -> list[frozenset]:
    """Check :func:`coarsen`'s arguments; return each op's runnable device kinds."""
    if isinstance(target, bool) or not isinstance(target, int) or target < 1:
        raise GraphError(f"coarsening target must be an integer >= 1, got {target!r}")
    if cp_slack is not None and not cp_slack >= 0:
        raise GraphError(f"cp_slack must be a number >= 0 or None, got {cp_slack!r}")
    if balance is not None and not balance > 0:
        raise GraphError(f"balance must be a positive number or None, got {balance!r}")
    gc = graph.c
    kinds0 = _kinds_of(graph, cluster)
    classes = sorted(set(kinds0), key=lambda s: sorted(s))
    if gc.n and target < len(classes):
        shown = ", ".join("{" + ", ".join(sorted(s)) + "}" for s in classes[:6])
        raise GraphError(
            f"cannot coarsen graph {graph.name!r} to {target} vertices: its ops run on "
            f"{len(classes)} different sets of device kinds ({shown}), which never merge")
    for i, ks in enumerate(kinds0):
        if not ks:
            raise InfeasibleError(f"op {gc.names[i]!r} runs on no device kind of the cluster")
    return kinds0


def _edge_costs(graph: OpGraph, cluster) -> list[float]:
    """Per edge: its fixed ``comm``, else latency plus bytes over bandwidth of the cluster's
    mean link (or bytes over :data:`~workbench.cluster.REF_BANDWIDTH` without a cluster)."""
    gc = graph.c
    if cluster is not None and len(cluster) > 1:
        lat, bw = cluster.mean_link()
    else:
        from ..cluster import REF_BANDWIDTH

        lat, bw = 0.0, REF_BANDWIDTH
    inv = 0.0 if math.isinf(bw) else 1.0 / bw
    return [lat + b * inv if math.isnan(c) else c
            for b, c in zip(gc.bytes.tolist(), gc.comm.tolist())]


@dataclass
class _Current:
    """The current (partly coarsened) graph; vertex ids are positions in a topological order.
    Per vertex: memory, work (fastest compute), runnable kinds, original ops, the original
    colocation group of one member (-1 = none), successor/predecessor -> summed edge cost, and
    the summed weight (:func:`coarsen`'s ``weights``; zeros without)."""

    mem: list
    work: list
    ksets: list
    members: list
    grp: list
    succ: list
    pred: list
    wt: list = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.work)


def _initial_state(graph: OpGraph, kinds0: list, ecost: list,
                   weights=None) -> tuple[_Current, _UnionFind]:
    """The original graph as a :class:`_Current`, and the colocation groups (kinds they can
    all run on, summed memory and weight) in a union-find."""
    gc = graph.c
    n0 = gc.n
    mem = gc.memory.tolist()
    if weights is None:
        wt = [0.0] * n0
    else:
        wt = [float(w) for w in weights]
        if len(wt) != n0 or not all(math.isfinite(w) and w >= 0 for w in wt):
            raise GraphError(f"coarsen: weights must be {n0} finite numbers >= 0 (one per op "
                             f"of {graph.name!r})")
    coloc = gc.coloc.tolist()
    ngroups = len(gc.coloc_groups)
    gk = [frozenset.intersection(*(kinds0[i] for i in range(n0) if coloc[i] == g_))
          if ngroups else frozenset() for g_ in range(ngroups)]
    gm = [0.0] * ngroups
    gw = [0.0] * ngroups
    for i in range(n0):
        if coloc[i] >= 0:
            gm[coloc[i]] += mem[i]
            gw[coloc[i]] += wt[i]
    succ: list = [{} for _ in range(n0)]
    pred: list = [{} for _ in range(n0)]
    for e, (s, d) in enumerate(zip(gc.src.tolist(), gc.dst.tolist())):
        succ[s][d] = succ[s].get(d, 0.0) + ecost[e]
        pred[d][s] = pred[d].get(s, 0.0) + ecost[e]
    cur = _Current(mem=mem, work=gc.min_compute().tolist(), ksets=list(kinds0),
                   members=[[i] for i in range(n0)], grp=list(coloc), succ=succ, pred=pred,
                   wt=wt)
    return cur, _UnionFind(gk, gm, gw)


def _match(cur: _Current, h: list, need: int, cap: float, caps: tuple, uf: _UnionFind,
           guard: tuple | None) -> tuple[list, list]:
    """One round's matching: edges in descending cost, each accepted when its ends are free,
    run on the same kinds, fit the balance cap, memory and weight (``caps``) and (``guard`` =
    top levels, bottom levels, limit) the critical-path limit, keep colocation groups feasible
    and satisfy Theorem 3.5's conditions (see the module notes); at most ``need`` pairs.
    Accepted pairs update ``uf`` at once. Returns ``mate`` (per vertex its partner or -1) and the pairs."""
    succ, pred, work, mem, ksets, grp = cur.succ, cur.pred, cur.work, cur.mem, cur.ksets, cur.grp
    wt = cur.wt
    memcap, wcap = caps
    n = cur.n
    edges = [(w, u, v) for u in range(n) for v, w in succ[u].items()]
    edges.sort(key=lambda t: (-t[0], t[1], t[2]))
    mate = [-1] * n
    a_only_v: set = set()   # v of accepted pairs that satisfy condition (a) alone
    acc: list = []
    for _w, u, v in edges:
        if len(acc) >= need:
            break
        if mate[u] >= 0 or mate[v] >= 0 or ksets[u] != ksets[v]:
            continue
        if work[u] + work[v] > cap or mem[u] + mem[v] > memcap or wt[u] + wt[v] > wcap:
            continue
        if guard is not None and not _path_fits(guard, succ, pred, work, u, v):
            continue
        gu = uf.find(grp[u]) if grp[u] >= 0 else -1
        gv = uf.find(grp[v]) if grp[v] >= 0 else -1
        if (gu >= 0 or gv >= 0) and not _groups_fit(uf, gu, gv, (mem[u], wt[u]),
                                                     (mem[v], wt[v]), caps):
            continue
        a_only = _acyclic(h, succ[u], pred[v], u, v, a_only_v)
        if a_only is None:
            continue
        mate[u], mate[v] = v, u
        acc.append((u, v))
        if a_only:
            a_only_v.add(v)
        if gu >= 0 and gv >= 0:
            uf.union(gu, gv)
        elif gu >= 0:
            uf.mem[gu] += mem[v]
            uf.wt[gu] += wt[v]
        elif gv >= 0:
            uf.mem[gv] += mem[u]
            uf.wt[gv] += wt[u]
    return mate, acc


def _path_fits(guard: tuple, succ: list, pred: list, work: list, u: int, v: int) -> bool:
    """The longest compute path through ``u`` and ``v`` merged stays within the limit."""
    tl, bl, cp_limit = guard
    top = tl[u]
    for p_ in pred[v]:
        if p_ != u and tl[p_] + work[p_] > top:
            top = tl[p_] + work[p_]
    bot = 0.0
    for s_ in succ[u]:
        if s_ != v and bl[s_] > bot:
            bot = bl[s_]
    for s_ in succ[v]:
        bot = max(bot, bl[s_])
    return not top + work[u] + work[v] + bot > cp_limit


def _groups_fit(uf: _UnionFind, gu: int, gv: int, size_u: tuple, size_v: tuple,
                caps: tuple) -> bool:
    """Merging keeps colocation groups feasible: two groups united share a device kind and
    fit in memory and under the weight cap; a group joined by an ungrouped vertex still fits.
    ``size_*`` and ``caps`` are (memory, weight) pairs."""
    (mem_u, wt_u), (mem_v, wt_v), (memcap, wcap) = size_u, size_v, caps
    if gu >= 0 and gv >= 0 and gu != gv:
        return (bool(uf.kinds[gu] & uf.kinds[gv]) and not uf.mem[gu] + uf.mem[gv] > memcap
                and not uf.wt[gu] + uf.wt[gv] > wcap)
    return not (gu >= 0 and gv < 0 and (uf.mem[gu] + mem_v > memcap or uf.wt[gu] + wt_v > wcap)
                or gv >= 0 and gu < 0 and (uf.mem[gv] + mem_u > memcap
                                           or uf.wt[gv] + wt_u > wcap))


def _acyclic(h: list, su: dict, pv: dict, u: int, v: int, a_only_v: set) -> bool | None:
    """Theorem 3.5 for edge ``(u, v)``: ``None`` = may close a cycle; ``True`` = it holds by
    condition (a) alone (no cross edge to an earlier such pair); ``False`` = by (b), (c) or (d).

    >>> h = [1, 2, 2, 3]                    # a diamond 0 -> {1, 2} -> 3
    >>> _acyclic(h, {1: 1.0, 2: 1.0}, {0: 1.0}, 0, 1, set())      # (d): 1 has one input
    False
    >>> _acyclic(h, {3: 1.0}, {1: 1.0, 2: 1.0}, 2, 3, set())      # (c): 2 has one output
    False
    """
    if len(su) == 1 or len(pv) == 1:  # (c) or (d)
        return False
    hv = h[v]
    if all(h[x] > hv for x in su if x != v):  # (b)
        return False
    if hv != h[u] + 1:
        return None
    if any(x in a_only_v for x in su if x != v):
        return None
    return True


def _relax(cap: float, slack: float | None, total_work: float, n: int) -> tuple:
    """No edge fits under the guards: double the balance cap (dropped beyond twice the total
    work) and widen the critical-path slack (dropped beyond 64).

    >>> _relax(10.0, 0.1, 100.0, 50)
    (20.0, 0.2)
    >>> _relax(150.0, 63.95, 100.0, 50000)
    (inf, None)
    """
    cap *= 2.0
    if cap > 2 * total_work:
        cap = math.inf
    if slack is not None:
        # small steps on small graphs (quality), doubling on large ones (speed)
        slack = slack + 0.1 if n <= _CP_BISECT_MAX else 2 * slack + 0.1
        if slack > 64:
            slack = None
    return cap, slack


def _guard_batch(cur: _Current, acc: list, mate: list, cp_limit: float, slack: float) -> float:
    """Parallelism guard on the whole batch: keep the longest prefix of the accepted pairs
    (highest communication first) whose contraction keeps the critical path within the limit
    (a single pair always does: its check is exact); unmatch the rest in ``mate``. Returns the
    slack, widened when a large graph progresses slowly."""
    succ, work, n = cur.succ, cur.work, cur.n
    if not (len(acc) > 1 and n <= _CP_CHECK_MAX and _quotient_cp(succ, work, acc) > cp_limit):
        return slack
    lo, hi = 1, len(acc) - 1
    if n > _CP_BISECT_MAX:  # large graph: halve until it fits (fewer checks)
        hi = len(acc) // 2
        while hi > 1 and _quotient_cp(succ, work, acc[:hi]) > cp_limit:
            hi //= 2
        lo = hi
    while lo < hi:  # longest prefix that fits
        mid = (lo + hi + 1) // 2
        if _quotient_cp(succ, work, acc[:mid]) <= cp_limit:
            lo = mid
        else:
            hi = mid - 1
    for u, v in acc[lo:]:
        mate[u] = mate[v] = -1
    if n > _CP_BISECT_MAX and lo < 0.1 * n:
        slack = 2 * slack + 0.1  # large graph, slow progress: relax the guard
    return slack


def _contract(cur: _Current, mate: list) -> _Current:
    """Contract the matched pairs; relabel the vertices in a topological order so that ids
    stay deterministic."""
    n = cur.n
    rep = [0] * n
    nn = 0
    for i in range(n):
        m = mate[i]
        if m < 0 or m > i:
            rep[i] = nn
            nn += 1
        else:
            rep[i] = rep[m]
    n_mem = [0.0] * nn
    n_wt = [0.0] * nn
    n_work = [0.0] * nn
    n_ks: list = [None] * nn
    n_members: list = [None] * nn
    n_grp = [-1] * nn
    for i in range(n):
        r = rep[i]
        n_mem[r] += cur.mem[i]
        n_wt[r] += cur.wt[i]
        n_work[r] += cur.work[i]
        n_ks[r] = cur.ksets[i]
        n_members[r] = cur.members[i] if n_members[r] is None else n_members[r] + cur.members[i]
        if cur.grp[i] >= 0:
            n_grp[r] = cur.grp[i]
    n_succ: list = [{} for _ in range(nn)]
    n_pred: list = [{} for _ in range(nn)]
    for u in range(n):
        ru = rep[u]
        for v, w in cur.succ[u].items():
            rv = rep[v]
            if ru != rv:
                n_succ[ru][rv] = n_succ[ru].get(rv, 0.0) + w
                n_pred[rv][ru] = n_pred[rv].get(ru, 0.0) + w
    _, order = heights([list(s) for s in n_succ], [len(p) for p in n_pred])
    pos = [0] * nn
    for k, i in enumerate(order):
        pos[i] = k
    return _Current(mem=[n_mem[i] for i in order], work=[n_work[i] for i in order],
                    ksets=[n_ks[i] for i in order], members=[n_members[i] for i in order],
                    grp=[n_grp[i] for i in order],
                    succ=[{pos[v]: w for v, w in n_succ[i].items()} for i in order],
                    pred=[{pos[v]: w for v, w in n_pred[i].items()} for i in order],
                    wt=[n_wt[i] for i in order])


def _levels(succ: list, pred: list, work: list, topo: list) -> tuple[list, list]:
    """Top level (longest compute path before a vertex) and bottom level (including it)."""
    n = len(work)
    tl = [0.0] * n
    for i in topo:
        best = 0.0
        for p in pred[i]:
            x = tl[p] + work[p]
            best = max(best, x)
        tl[i] = best
    bl = [0.0] * n
    for i in reversed(topo):
        best = 0.0
        for s in succ[i]:
            best = max(best, bl[s])
        bl[i] = best + work[i]
    return tl, bl


_CP_CHECK_MAX = 10000
"""Rounds on graphs larger than this skip the batch critical-path check (cost)."""
_CP_BISECT_MAX = 5000
"""Rounds on graphs larger than this halve the batch instead of bisecting it (cost)."""


def _quotient_cp(succ: list, work: list, pairs: list) -> float:
    """Critical path (compute only) of the graph with ``pairs`` contracted."""
    n = len(work)
    rep = list(range(n))
    for u, v in pairs:
        rep[v] = u
    w = list(work)
    for u, v in pairs:
        w[u] += work[v]
    adj: list = [[] for _ in range(n)]
    indeg = [0] * n
    for a in range(n):
        ra = rep[a]
        for b in succ[a]:
            rb = rep[b]
            if ra != rb:
                adj[ra].append(rb)
                indeg[rb] += 1
    tl = [0.0] * n
    stack = [i for i in range(n) if rep[i] == i and indeg[i] == 0]
    best = 0.0
    while stack:
        i = stack.pop()
        f = tl[i] + w[i]
        best = max(best, f)
        for j in adj[i]:
            tl[j] = max(tl[j], f)
            indeg[j] -= 1
            if indeg[j] == 0:
                stack.append(j)
    return best


def _critical_path(succ: list, pred: list, work: list) -> float:
    _, topo = heights([list(s) for s in succ], [len(p) for p in pred])
    tl, bl = _levels(succ, pred, work, topo)
    return max((t + b for t, b in zip(tl, bl)), default=0.0)


def _build_coarse(graph: OpGraph, members: list, grp: list, uf: _UnionFind):
    gc = graph.c
    names = gc.names
    nodes = graph.nx.nodes
    used: set = set()
    vnames = []
    groups = gc.coloc_groups
    G = nx.DiGraph()
    vertex_of_idx = [0] * gc.n
    members_t = []
    for k, ms in enumerate(members):
        ms = sorted(ms)
        members_t.append(tuple(names[i] for i in ms))
        first = names[ms[0]]
        name = first if len(ms) == 1 else f"{first}+{len(ms) - 1}"
        if name in used or (len(ms) > 1 and name in graph.index):
            name = f"~{k}:{first}"
        used.add(name)
        vnames.append(name)
        for i in ms:
            vertex_of_idx[i] = k
        common = None
        for i in ms:
            ks = set(nodes[names[i]]["compute"])
            common = ks if common is None else common & ks
        compute = {kd: float(sum(nodes[names[i]]["compute"][kd] for i in ms))
                   for kd in sorted(common)}
        kinds = {nodes[names[i]]["kind"] for i in ms}
        attrs = {"compute": compute, "memory": float(gc.memory[ms].sum()),
                 "kind": kinds.pop() if len(kinds) == 1 else "other",
                 "colocate": None, "op_type": nodes[first]["op_type"] if len(ms) == 1 else "Merged",
                 "n_members": len(ms)}
        g_ = grp[k]
        if g_ >= 0:
            attrs["colocate"] = str(groups[uf.find(g_)])
        G.add_node(name, **attrs)
    # edges: per (coarse src, coarse dst, producing op) the largest tensor, summed over producers
    agg: dict = {}
    for s, d, b, c in zip(gc.src.tolist(), gc.dst.tolist(), gc.bytes.tolist(),
                          gc.comm.tolist()):
        ks, kd = vertex_of_idx[s], vertex_of_idx[d]
        if ks == kd:
            continue
        key = (ks, kd)
        per = agg.setdefault(key, {})
        old = per.get(s)
        cc = None if math.isnan(c) else c
        if old is None:
            per[s] = (b, cc)
        else:
            per[s] = (max(old[0], b), None if old[1] is None or cc is None else max(old[1], cc))
    for (ks, kd), per in agg.items():
        nbytes = float(sum(b for b, _ in per.values()))
        fixed = [c for _, c in per.values()]
        attrs = {"bytes": nbytes, "n_tensors": len(per)}
        if all(c is not None for c in fixed):
            attrs["comm"] = float(sum(fixed))
        G.add_edge(vnames[ks], vnames[kd], **attrs)
    coarse = OpGraph(G, name=f"{graph.name}/coarse{len(members)}",
                     meta={**graph.meta, "coarsened_from": graph.name})
    vertex_of = {names[i]: vnames[vertex_of_idx[i]] for i in range(gc.n)}
    # members in the coarse graph's own op order
    by_name = dict(zip(vnames, members_t))
    return coarse, tuple(by_name[v] for v in coarse.ops), vertex_of
