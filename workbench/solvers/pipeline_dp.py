"""Pipelined partitioning by dynamic programming over ideals (Tarnawski et al., NeurIPS 2020).

``dp`` finds the contiguous split of a graph over ``k`` accelerators and ``l`` CPUs that minimises
the largest device load (the pipelined time per sample, Section 5.1.1); ``dpl`` restricts the
search to the prefixes of one DFS topological order (the linearisation heuristic, Section 5.1.2);
``pipedream`` first contracts every branching region to a single node, so the graph becomes a
path, as PipeDream's optimiser does.

How it works
------------
* **Training graphs** (Section 5.3, Appendix B): the forward and the backward ops of every colour
  class are contracted into a forward and a backward supernode; a backward supernode without a
  forward partner (*orphaned*) gets an artificial forward image, tied in with mirrored copies of
  its backward edges; strongly connected components that the contraction creates in the forward
  part are fused. The DP then runs on the forward part only, and every forward set carries its
  backward siblings (their compute, memory and communication are charged to the same device).
* **Ideals** are enumerated as bitsets with the lattice's covering edges (remove one maximal
  element). A contiguous set is ``S = I \\ J`` for ideals ``J ⊆ I`` (Fact 5.2).
* **The inner loop is compiled** (numba, :mod:`workbench.solvers.pipeline_dp_kernel`): the
  sub-ideals of each ideal are walked down the covering edges, the stage's compute, memory and
  hypergraph cut (op ``u`` pays its output cost once when the set of supernodes holding ``u``
  and its consumers is split by ``S``) are updated incrementally per pair in float64, and one
  pass relaxes every device count. No float32 anywhere: the value is exact up to float64
  rounding of sums (see the kernel's docstring).
* **Accounting** (from the judge, :mod:`workbench.pipeline_costs`): each op's out-edges become
  nested hyperedges (the consumers of its dearest edges, increments of cost), so the DP's value
  equals :func:`workbench.simulate.max_load` of its split for any per-edge costs; with one cost
  per op (the MSR workloads) this is the paper's ``c_u``. Clusters outside the paper's model
  (several accelerator kinds or speeds, ``direct`` mode with more than two devices or with a
  CPU) are refused with a SolverError; unequal memories are solved as a relaxation (the largest
  memory) whose stages are then matched to devices, else with the smallest memory and status
  ``heuristic``; finite CPU memory is checked on the optimum (SolverError when it does not fit).
* **Pruning** (exact): the DPL solution gives an upper bound ``B`` on the optimum; a
  feasibility pass at ``B`` keeps, per ideal, only the device counts that can lie on a split
  within ``B`` (compute bounds of the prefix and of the rest), and the sub-ideal walk stops where
  compute alone exceeds ``B``.
* **Options**: ``interleave`` (half or full duplex, App. C.1), ``replicate`` (App. C.2),
  ``hierarchical`` (hosts, App. C.3, :mod:`~workbench.solvers.pipeline_dp_hier`),
  ``objective="gpipe"`` (App. A, :mod:`~workbench.solvers.pipeline_dp_gpipe`) and
  ``backward_contiguous`` (training graphs).

Examples
--------
>>> from workbench import samples, Cluster, solve, max_load
>>> from workbench.cluster import Device, Link
>>> g = samples.transformer(60)
>>> c = Cluster([Device(f"gpu{i}", "gpu", 16e9) for i in range(3)] + [Device("cpu0", "cpu")],
...             mode="host", host_link=Link(0.0, 1e7))
>>> plan = solve(g, c, method="dp")
>>> plan.status, plan.stats["optimal_among"]   # optimal among contiguous splits
('feasible', 'contiguous splits')
>>> abs(plan.predicted["max_load_ms"] - max_load(plan, c)) < 1e-9
True
>>> solve(g, c, method="dpl").predicted["max_load_ms"] >= plan.predicted["max_load_ms"]
True
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import GraphError, InfeasibleError, SolverError
from ..pipeline_costs import (
    check_finite_costs,
    contiguous_optimum_status,
    edge_costs,
    out_costs,
    pipeline_model,
    transfer_tiers,
)
from ..plan import Plan
from . import register
from .pipeline_dp_kernel import Lattice, interleave_mode, lattice, linear_lattice, solve_lattice

__all__ = [
    "BACKWARD_KINDS",
    "DPProblem",
    "DPResult",
    "contract_for_dp",
    "count_ideals",
    "dp",
    "dpl",
    "enumerate_ideals",
    "pipedream",
    "solve_dp",
]

BACKWARD_KINDS = ("bwd", "update")
_FWD, _BWD = 0, 1


# ----------------------------------------------------------------------------- preprocessing
@dataclass
class DPProblem:
    """The contracted forward graph the DP runs on.

    ``members[s]``: original op indices held by supernode ``s`` (forward ops and their backward
    siblings); ``acc``/``cpu``: processing time of the whole supernode on an accelerator / a CPU
    (``inf`` where some member cannot run there); ``mem``: bytes; ``pred``/``succ``: forward DAG
    (artificial mirrored edges included), supernodes numbered topologically; ``hyper``: list of
    ``(owners, cost)`` with ``owners`` a sorted tuple of supernodes (producer first is not
    implied); ``key``: tie-break key of the linearisation (the MSR colour class where known).
    """

    graph: object
    members: list
    acc: np.ndarray
    cpu: np.ndarray
    mem: np.ndarray
    pred: list
    succ: list
    hyper: list
    key: list
    out_cost: np.ndarray
    owner: np.ndarray
    n_artificial: int = 0
    info: dict = field(default_factory=dict)
    hyper_src: list = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.members)


class _UF:
    def __init__(self, n: int):
        self.p = list(range(n))

    def find(self, a: int) -> int:
        p = self.p
        while p[a] != a:
            p[a] = p[p[a]]
            a = p[a]
        return a

    def union(self, a: int, b: int) -> None:
        a, b = self.find(a), self.find(b)
        if a != b:
            if b < a:
                a, b = b, a
            self.p[b] = a


def _device_kinds(cluster) -> tuple[str, list[int], list[int], float]:
    acc = [i for i, d in enumerate(cluster.devices) if d.kind != "cpu"]
    cpus = [i for i, d in enumerate(cluster.devices) if d.kind == "cpu"]
    kinds = sorted({cluster.devices[i].kind for i in acc})
    if len(kinds) > 1:
        raise SolverError(f"the pipelined DP assumes one accelerator kind (Section 3); cluster "
                          f"{cluster.name!r} has {', '.join(kinds)}")
    cap = min((cluster.devices[i].memory for i in acc), default=math.inf)
    return (kinds[0] if kinds else "gpu"), acc, cpus, cap


def _out_costs(graph, cluster, acc_devs: list[int] | None = None) -> np.ndarray:
    """Per op: the paper's ``c_u`` (see :func:`workbench.pipeline_costs.out_costs`)."""
    return out_costs(graph, cluster)


def _class_keys(graph) -> tuple[np.ndarray, list]:
    """Colour class index per op (ops without one get their own) and a sort key per class."""
    gc = graph.c
    n = gc.n
    cls = np.empty(n, dtype=np.int64)
    keys: list = []
    group_cls: dict = {}
    for i in range(n):
        g = int(gc.coloc[i])
        if g >= 0:
            if g not in group_cls:
                group_cls[g] = len(keys)
                name = gc.coloc_groups[g]
                try:
                    keys.append((0, int(str(name)[2:]) if str(name).startswith("cc") else int(name)))
                except ValueError:
                    keys.append((1, i))
            cls[i] = group_cls[g]
        else:
            cls[i] = len(keys)
            keys.append((2, i))
    return cls, keys


def contract_for_dp(graph, cluster, *, contract_branches: bool = False,
                    merge_trivial: bool = True, skip_span: int | None = None) -> DPProblem:
    """Contract ``graph`` for the DP (Section 5.3 and Appendix B of the paper).

    Raises GraphError for an edge from a backward op into a forward op, and InfeasibleError for
    a colour class (or fused component) that no single device kind can run.

    >>> from workbench import samples, Cluster
    >>> g = samples.to_training(samples.diamond())
    >>> p = contract_for_dp(g, Cluster.preset("2xV100-pcie"))
    >>> p.n, sorted(len(m) for m in p.members)
    (4, [2, 2, 2, 2])
    """
    gc = graph.c
    n = gc.n
    acc_kind, acc_devs, cpu_devs, _cap = _device_kinds(cluster)
    is_bwd = np.isin(gc.op_kind, [["fwd", "bwd", "update", "other"].index(k)
                                  for k in BACKWARD_KINDS])
    src, dst = gc.src, gc.dst
    bad = np.flatnonzero(is_bwd[src] & ~is_bwd[dst])
    if len(bad):
        e = int(bad[0])
        raise GraphError(f"edge {gc.names[src[e]]!r} -> {gc.names[dst[e]]!r} goes from a backward "
                         f"op into the forward part ({len(bad)} such edges); the pipelined DP "
                         f"needs the backward pass after the forward pass")
    cls, keys = _class_keys(graph)
    ncls = len(keys)
    uf = _UF(ncls)
    if contract_branches:
        _union_biconnected(graph, cls, uf, skip_span)
    has_fwd = np.zeros(ncls, dtype=bool)
    has_fwd[cls[~is_bwd]] = True
    # forward edges between classes, and mirrored edges for orphaned backward classes
    fsrc = cls[src].tolist()
    fdst = cls[dst].tolist()
    bw_l = is_bwd.tolist()
    cls_edges: set = set()
    n_art_edges = 0
    for a, b, ua, vb in zip(fsrc, fdst, src.tolist(), dst.tolist()):
        if a == b:
            continue
        if not bw_l[ua] and not bw_l[vb]:
            cls_edges.add((a, b))
        elif bw_l[ua] and bw_l[vb] and (not has_fwd[a] or not has_fwd[b]):
            cls_edges.add((b, a))
            n_art_edges += 1
    # fuse strongly connected components of the (class-contracted) forward graph
    while True:
        roots = [uf.find(c) for c in range(ncls)]
        adj: dict = {}
        for a, b in cls_edges:
            ra, rb = roots[a], roots[b]
            if ra != rb:
                adj.setdefault(ra, set()).add(rb)
        comps = _scc(sorted(set(roots)), adj)
        merged = False
        for comp in comps:
            if len(comp) > 1:
                merged = True
                for c in comp[1:]:
                    uf.union(comp[0], c)
        if not merged:
            break
    roots = np.array([uf.find(c) for c in range(ncls)], dtype=np.int64)
    n_merged = 0
    if merge_trivial:
        n_merged = _merge_trivial(graph, cluster, cls, roots, cls_edges, is_bwd, uf, _cap)
        roots = np.array([uf.find(c) for c in range(ncls)], dtype=np.int64)
    # supernodes: one per root, numbered topologically
    root_ids = sorted(set(roots.tolist()))
    adj_r: dict = {r: set() for r in root_ids}
    for a, b in cls_edges:
        ra, rb = int(roots[a]), int(roots[b])
        if ra != rb:
            adj_r[ra].add(rb)
    rkey: dict = {}
    for c in range(ncls):
        r = int(roots[c])
        if r not in rkey or keys[c] < rkey[r]:
            rkey[r] = keys[c]
    order = _topo(root_ids, adj_r, rkey)
    sid = {r: i for i, r in enumerate(order)}
    ns = len(order)
    owner = np.array([sid[int(roots[cls[i]])] for i in range(n)], dtype=np.int64)
    members: list = [[] for _ in range(ns)]
    for i, s in enumerate(owner.tolist()):
        members[s].append(i)
    key_of: list = [None] * ns
    for c in range(ncls):
        s = sid[int(roots[c])]
        if key_of[s] is None or keys[c] < key_of[s]:
            key_of[s] = keys[c]
    ka = gc.kind_index.get(acc_kind)
    kc = gc.kind_index.get("cpu")
    # compute time on the device (Device.speed divides it; one speed per kind, see _run)
    sa = cluster.devices[acc_devs[0]].speed if acc_devs else 1.0
    sc = cluster.devices[cpu_devs[0]].speed if cpu_devs else 1.0
    acc_t = gc.compute[:, ka] / sa if ka is not None else np.full(n, np.inf)
    cpu_t = gc.compute[:, kc] / sc if kc is not None else np.full(n, np.inf)
    acc = np.bincount(owner, weights=np.where(np.isfinite(acc_t), acc_t, 0.0), minlength=ns)
    cpu = np.bincount(owner, weights=np.where(np.isfinite(cpu_t), cpu_t, 0.0), minlength=ns)
    acc[np.bincount(owner, weights=~np.isfinite(acc_t), minlength=ns) > 0] = np.inf
    cpu[np.bincount(owner, weights=~np.isfinite(cpu_t), minlength=ns) > 0] = np.inf
    mem = np.bincount(owner, weights=gc.memory, minlength=ns)
    allowed_acc = bool(acc_devs)
    allowed_cpu = bool(cpu_devs)
    for s in range(ns):
        if not ((allowed_acc and np.isfinite(acc[s])) or (allowed_cpu and np.isfinite(cpu[s]))):
            ops = [gc.names[i] for i in members[s]]
            only_acc = [v for v in ops if not math.isfinite(cpu_t[gc.index[v]])]
            only_cpu = [v for v in ops if not math.isfinite(acc_t[gc.index[v]])]
            grp = {gc.coloc_groups[gc.coloc[gc.index[v]]] for v in ops if gc.coloc[gc.index[v]] >= 0}
            raise InfeasibleError(
                f"colour class {', '.join(sorted(map(str, grp))) or ops[0]!r} ({len(ops)} ops after "
                f"contraction) spans device kinds: op {only_cpu[0] if only_cpu else ops[0]!r} cannot "
                f"run on {acc_kind!r} and op {only_acc[0] if only_acc else ops[0]!r} cannot run on "
                f"'cpu', so no device of cluster {cluster.name!r} can hold them together")
    succ = [sorted({sid[int(roots[b])] for b in adj_r[r]}) for r in order]
    pred: list = [[] for _ in range(ns)]
    for a, ss in enumerate(succ):
        for b in ss:
            pred[b].append(a)
    # hyperedges: supernodes of each op and the consumers of its dearest edges (nested tiers,
    # exact for any per-edge costs; one tier per op when its edges cost the same)
    out_cost = out_costs(graph, cluster)
    hyper_d: dict = {}
    own = owner.tolist()
    for u, cons, cost in transfer_tiers(graph, cluster):
        h = {own[u]}
        for v in cons:
            h.add(own[v])
        if len(h) > 1:
            t = (tuple(sorted(h)), own[u])  # the producer's side pays out, the others in
            hyper_d[t] = hyper_d.get(t, 0.0) + cost
    return DPProblem(graph=graph, members=members, acc=acc, cpu=cpu, mem=mem, pred=pred,
                     succ=succ, hyper=[(t, c) for (t, _s), c in hyper_d.items()],
                     hyper_src=[s_ for (_t, s_) in hyper_d], key=key_of, out_cost=out_cost,
                     owner=owner, n_artificial=int((~has_fwd).sum()),
                     info={"classes": ncls, "orphaned_backward_classes": int((~has_fwd).sum()),
                           "mirrored_edges": n_art_edges, "supernodes": ns,
                           "merged_trivial": n_merged,
                           "contract_branches": contract_branches})


def _merge_trivial(graph, cluster, cls, roots, cls_edges, is_bwd, uf: _UF, cap: float) -> int:
    """Fold zero-time forward supernodes with exactly one forward neighbour (and no edge to a
    backward op) into that neighbour, as the authors' implementation does before the DP: it
    never makes a split worse on time and removes a factor of up to 2 in the number of ideals
    per such node. A fold that would exceed the accelerator memory ``cap`` is skipped."""
    gc = graph.c
    kinds = list(gc.kind_index.values())
    busy = (np.nan_to_num(gc.compute[:, kinds], posinf=1.0) > 1e-12).any(axis=1) \
        if kinds else np.zeros(gc.n, dtype=bool)
    r_of = roots[cls]
    busy_r: dict = {}
    mem_r: dict = {}
    bwd_touch: dict = {}
    for i in range(gc.n):
        r = int(r_of[i])
        busy_r[r] = busy_r.get(r, False) or bool(busy[i])
        mem_r[r] = mem_r.get(r, 0.0) + float(gc.memory[i])
    src, dst = gc.src, gc.dst
    mixed = is_bwd[src] != is_bwd[dst]
    for u, v in zip(src[mixed].tolist(), dst[mixed].tolist()):
        for x in (u, v):
            if not is_bwd[x]:
                bwd_touch[int(r_of[x])] = True
    fwd_roots = {int(r_of[i]) for i in range(gc.n) if not is_bwd[i]}
    adj: dict = {}
    for a, b in cls_edges:
        ra, rb = int(roots[a]), int(roots[b])
        if ra != rb:
            adj.setdefault(ra, set()).add(rb)
            adj.setdefault(rb, set()).add(ra)
    # number of distinct incident forward edges (in + out)
    deg: dict = {}
    for a, b in {(int(roots[a]), int(roots[b])) for a, b in cls_edges}:
        if a != b:
            deg[a] = deg.get(a, 0) + 1
            deg[b] = deg.get(b, 0) + 1
    work = sorted(r for r in fwd_roots if deg.get(r, 0) == 1)
    merged = 0
    while work:
        r = work.pop()
        if uf.find(r) != r or deg.get(r, 0) != 1 or busy_r.get(r) or bwd_touch.get(r) \
                or r not in fwd_roots:
            continue
        (m,) = adj[r]
        if mem_r.get(r, 0.0) + mem_r.get(m, 0.0) > cap:
            continue
        uf.union(r, m)
        new = uf.find(r)
        old = m if new == r else r
        adj[m].discard(r)
        deg[m] -= 1
        adj[new] = adj.pop(m) if new != m else adj[m]
        adj.pop(old, None) if old != new else None
        for x in adj[new]:
            if old in adj[x]:
                adj[x].discard(old)
                adj[x].add(new)
        deg[new] = deg.pop(m) if new != m else deg[m]
        busy_r[new] = busy_r.get(r, False) or busy_r.get(m, False)
        bwd_touch[new] = bwd_touch.get(r, False) or bwd_touch.get(m, False)
        mem_r[new] = mem_r.get(r, 0.0) + mem_r.get(m, 0.0)
        fwd_roots.add(new)
        merged += 1
        if deg[new] == 1:
            work.append(new)
    return merged


def _scc(nodes: list, adj: dict) -> list:
    """Strongly connected components (iterative Tarjan)."""
    index: dict = {}
    low: dict = {}
    on: set = set()
    stack: list = []
    out: list = []
    c = 0
    for s in nodes:
        if s in index:
            continue
        work = [(s, iter(sorted(adj.get(s, ()))))]
        index[s] = low[s] = c
        c += 1
        stack.append(s)
        on.add(s)
        while work:
            v, it = work[-1]
            pushed = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = c
                    c += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(adj.get(w, ())))))
                    pushed = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if pushed:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def _topo(nodes: list, adj: dict, key: dict | None) -> list:
    import heapq

    indeg = {v: 0 for v in nodes}
    for v in nodes:
        for w in adj[v]:
            indeg[w] += 1
    kf = (lambda v: (key[v], v)) if key is not None else (lambda v: (v,))
    heap = [(kf(v), v) for v in nodes if indeg[v] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _, v = heapq.heappop(heap)
        out.append(v)
        for w in adj[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                heapq.heappush(heap, (kf(w), w))
    if len(out) != len(nodes):
        raise GraphError("the contracted forward graph has a cycle")  # pragma: no cover
    return out


def _union_biconnected(graph, cls: np.ndarray, uf: _UF, skip_span: int | None = None) -> None:
    """PipeDream-style contraction: in every biconnected component of the (undirected,
    class-contracted) forward graph, merge the tails of its edges, so branches become one node.
    ``skip_span``: also ignore forward edges that jump over more than that many forward ops (in
    topological order), as the authors skipped long-range inputs by hand."""
    import networkx as nx

    gc = graph.c
    is_fwd = gc.op_kind == 0
    # like PipeDream, ignore edges out of input layers (no predecessors, no compute), which
    # would otherwise tie the whole network into one biconnected component
    idle = np.nan_to_num(gc.compute, posinf=0.0).sum(axis=1) <= 0
    skip = np.array([not gc.pred[i] and idle[i] for i in range(gc.n)])
    pos = np.cumsum(is_fwd) - 1  # position among forward ops (indices are topological)
    far = set()
    if skip_span is not None:
        far = {(u, v) for u, v in zip(gc.src.tolist(), gc.dst.tolist())
               if is_fwd[u] and is_fwd[v] and pos[v] - pos[u] > skip_span}
    G = nx.Graph()
    for u, v in zip(gc.src.tolist(), gc.dst.tolist()):
        if is_fwd[u] and is_fwd[v] and cls[u] != cls[v] and not skip[u] and (u, v) not in far:
            G.add_edge(int(cls[u]), int(cls[v]))
    tails: dict = {}
    for u, v in zip(gc.src.tolist(), gc.dst.tolist()):
        if is_fwd[u] and is_fwd[v] and cls[u] != cls[v] and not skip[u] and (u, v) not in far:
            tails.setdefault((int(cls[u]), int(cls[v])), int(cls[u]))
    for comp_edges in nx.biconnected_component_edges(G):
        tl = set()
        for a, b in comp_edges:
            if (a, b) in tails:
                tl.add(a)
            if (b, a) in tails:
                tl.add(b)
        tl_l = sorted(tl)
        for t in tl_l[1:]:
            uf.union(tl_l[0], t)


# ----------------------------------------------------------------------------- ideals
def enumerate_ideals(pred: list, succ: list, *, limit: int = 100_000) -> list[int]:
    """All ideals (down-closed sets) of a DAG as bitmask ints, by breadth-first growth.

    Raises SolverError naming the count when there are more than ``limit``.

    >>> enumerate_ideals([[], [0], [0]], [[1, 2], [], []])
    [0, 1, 3, 5, 7]
    """
    n = len(pred)
    npred = [len(p) for p in pred]
    full = (1 << n) - 1
    seen = {0: None}
    out = [0]
    start = tuple(v for v in range(n) if npred[v] == 0)
    frontier = [start]
    pos = 0
    bits = [1 << v for v in range(n)]
    predmask = [sum(bits[u] for u in pred[v]) for v in range(n)]
    while pos < len(out):
        ideal = out[pos]
        addable = frontier[pos]
        pos += 1
        for v in addable:
            new = ideal | bits[v]
            if new in seen:
                continue
            seen[new] = None
            fr = [w for w in addable if w != v]
            for w in succ[v]:
                pm = predmask[w]
                if new & pm == pm:
                    fr.append(w)
            out.append(new)
            frontier.append(tuple(fr))
            if len(out) > limit:
                raise SolverError(
                    f"the forward graph has more than {limit:,} ideals (stopped counting at "
                    f"{len(out):,}): too branching for the exact DP within its limits; use "
                    f"method='dpl' (linearised, polynomial) or raise max_ideals")
    if out[-1] != full and full not in seen:  # pragma: no cover
        raise SolverError("ideal enumeration missed the full set")
    return out


def count_ideals(graph, cluster, *, limit: int = 10_000_000) -> int:
    """Number of ideals of the contracted forward graph the DP would enumerate.

    >>> from workbench import samples, Cluster
    >>> count_ideals(samples.diamond(), Cluster.preset("2xV100-pcie"))
    6
    """
    p = contract_for_dp(graph, cluster)
    return len(enumerate_ideals(p.pred, p.succ, limit=limit))


def _linear_order(p: DPProblem) -> list[int]:
    """DFS-like topological order (a stack of ready nodes; successors pushed by key), as in the
    authors' linearisation."""
    n = p.n
    indeg = [len(x) for x in p.pred]
    stack = [v for v in sorted(range(n), key=lambda v: p.key[v], reverse=True) if indeg[v] == 0]
    out = []
    while stack:
        v = stack.pop()
        out.append(v)
        for w in sorted(p.succ[v], key=lambda w: p.key[w]):
            indeg[w] -= 1
            if indeg[w] == 0:
                stack.append(w)
    return out


# ----------------------------------------------------------------------------- the DP
@dataclass
class DPResult:
    """Outcome of :func:`solve_dp`: value, the stages (lists of supernodes, accelerator or
    CPU, replicas) in pipeline order, and statistics."""

    value: float
    stages: list
    stats: dict


def solve_dp(p: DPProblem, k: int, l: int, cap: float, *, order: list[int] | None = None,
             upper_bound: float = math.inf, max_ideals: int = 100_000,
             interleave=False, replicate: bool = False,
             allreduce_bandwidth: float = math.inf, time_limit: float | None = None,
             progress=None, ideals: Lattice | None = None,
             feasibility: bool = True, backward_contiguous: bool = False) -> DPResult:
    """Run the DP over the ideals of ``p`` (``ideals``, a :class:`Lattice`, else enumerated), or
    over the prefixes of ``order`` for the linearised variant, with the compiled kernel of
    :mod:`workbench.solvers.pipeline_dp_kernel`. ``upper_bound`` prunes transitions that cannot
    be part of a split at most that good (it must be at least the optimum, e.g. the DPL value).
    """
    t0 = time.perf_counter()
    if ideals is not None:
        lat = ideals
    elif order is not None:
        lat = linear_lattice(order)
    else:
        lat = lattice(p.pred, p.succ, limit=max_ideals)
    t_enum = time.perf_counter() - t0
    value, stages, stats = solve_lattice(
        p, k, l, cap, lat, upper_bound=upper_bound, interleave=interleave,
        replicate=replicate, allreduce_bandwidth=allreduce_bandwidth, time_limit=time_limit,
        progress=progress, feasibility=feasibility, backward_contiguous=backward_contiguous)
    stats["enumerate_s"] = t_enum
    return DPResult(value, stages, stats)


# ----------------------------------------------------------------------------- exact costs
def stage_cost(p: DPProblem, S: list[int], on: str, *, interleave=False,
               replicas: int = 1, allreduce_bandwidth: float = math.inf) -> float:
    """Exact load of one stage (a set of supernodes) under the paper's accounting;
    ``interleave``: False (sum), True (max of compute and communication) or ``"full_duplex"``
    (max of in-transfer, compute and out-transfer), Appendix C.1."""
    mode = interleave_mode(interleave)
    Sset = set(S)
    if on == "cpu":
        return float(sum(p.cpu[s] for s in S))
    comp = float(sum(p.acc[s] for s in S))
    cio = [0.0, 0.0]
    src = p.hyper_src or [h[0] for h, _c in p.hyper]
    for (h, c), u in zip(p.hyper, src):
        inside = sum(1 for x in h if x in Sset)
        if 0 < inside < len(h):
            cio[u in Sset] += c
    comm = cio[0] + cio[1]
    base = (comp + comm, max(comp, comm), max(comp, cio[0], cio[1]))[mode]
    if replicas > 1:
        mem = float(sum(p.mem[s] for s in S))
        sync = (replicas - 1) * mem / (replicas * allreduce_bandwidth) \
            if math.isfinite(allreduce_bandwidth) else 0.0
        return max(base / replicas, sync) if mode else base / replicas + sync
    return base


def _plan_from_stages(p: DPProblem, res: DPResult, cluster, method: str, acc_devs, cpu_devs,
                      *, status: str, interleave: bool, allreduce_bandwidth: float,
                      extra_stats: dict) -> Plan:
    gc = p.graph.c
    names = cluster.names
    dev = np.full(gc.n, -1, dtype=np.int64)
    ai = ci = 0
    loads = []
    stage_info = []
    replicas: dict = {}
    for S, on, r in res.stages:
        if on == "acc":
            ds = acc_devs[ai:ai + r]
            ai += r
        else:
            ds = cpu_devs[ci:ci + 1]
            ci += 1
        load = stage_cost(p, S, on, interleave=interleave, replicas=r,
                          allreduce_bandwidth=allreduce_bandwidth)
        loads.append(load)
        for s in S:
            for i in p.members[s]:
                dev[i] = ds[0]
        if r > 1:
            replicas[names[ds[0]]] = [names[d] for d in ds]
        stage_info.append({"device": names[ds[0]], "ops": sum(len(p.members[s]) for s in S),
                           "load_ms": load, **({"replicas": r} if r > 1 else {})})
    if (dev < 0).any():  # pragma: no cover
        raise SolverError("DP split leaves ops unplaced")
    placement = {gc.names[i]: names[int(d)] for i, d in enumerate(dev.tolist())}
    value = max(loads) if loads else 0.0
    info = {"stages": stage_info, "contraction": p.info}
    if replicas:
        info["replicas"] = replicas
    stats = dict(res.stats)
    stats.update(extra_stats)
    return Plan(p.graph, placement, method=method, status=status,
                predicted={"max_load_ms": value}, stats=stats, info=info)


def _one_blas_thread():
    """Context limiting BLAS to one thread: the DP issues many small products, for which
    OpenBLAS threads only contend (10x slower on a loaded machine)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover
        import contextlib

        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def _match_stages(res: DPResult, p: DPProblem, devs: list, mems: list, on: str):
    """Devices for the ``on`` stages of ``res`` in stage order (each replica a device), largest
    stage to largest memory; ``None`` when some stage fits no device left (sorted matching
    decides this exactly). Unused devices follow."""
    need = []
    for si, (S, where, r) in enumerate(res.stages):
        if where == on:
            m = float(sum(p.mem[s] for s in S))
            need.extend([(m, si)] * r)
    free = sorted(range(len(devs)), key=lambda i: (-mems[i], i))
    pick: dict = {}
    for (m, si), i in zip(sorted(need, key=lambda x: (-x[0], x[1])), free):
        if m > mems[i] * (1 + 1e-12) + 1e-9:
            return None
        pick.setdefault(si, []).append(devs[i])
    used = {d for ds in pick.values() for d in ds}
    return [d for si in sorted(pick) for d in pick[si]] + [d for d in devs if d not in used]


def _run(graph, cluster, method: str, *, linear: bool, contract_branches: bool = False,
         skip_span: int | None = None,
         max_ideals: int, interleave: bool, replicate: bool, allreduce_bandwidth: float,
         time_limit, progress, prune: bool = True, backward_contiguous: bool = False) -> Plan:
    t0 = time.perf_counter()
    model = pipeline_model(cluster, method=method, cpus_pay=False)
    times = cluster.op_times(graph)
    check_finite_costs(np.concatenate([times[np.isfinite(times)], edge_costs(graph, cluster)]),
                       what="compute and transfer times", method=method)
    acc_devs, cpu_devs = list(model.acc), list(model.cpus)
    acc_mem, cpu_mem = list(model.acc_memory), list(model.cpu_memory)
    p = contract_for_dp(graph, cluster, contract_branches=contract_branches, skip_span=skip_span)
    k, l_ = len(acc_devs), len(cpu_devs)
    kw = {"interleave": interleave, "replicate": replicate,
          "backward_contiguous": backward_contiguous,
          "allreduce_bandwidth": allreduce_bandwidth, "time_limit": time_limit,
          "progress": progress}
    ideals = None if linear else lattice(p.pred, p.succ, limit=max_ideals)

    def run(cap: float) -> DPResult:
        if linear:
            return solve_dp(p, k, l_, cap, order=_linear_order(p), **kw)
        ub = math.inf
        if prune and len(ideals) > 4 * (p.n + 1):  # the DPL bound pays off on big lattices
            ub = solve_dp(p, k, l_, cap, order=_linear_order(p), **kw).value
        res = solve_dp(p, k, l_, cap, upper_bound=ub, ideals=ideals, **kw)
        if not math.isfinite(res.value) and math.isfinite(ub):  # pragma: no cover - safety
            res = solve_dp(p, k, l_, cap, ideals=ideals, **kw)
        res.stats["dpl_bound_ms"] = ub
        return res

    exact = not linear and not contract_branches
    note = None
    # unequal accelerator memories: solve the relaxation with the largest one, then match its
    # stages to devices; if they do not fit, fall back to the smallest memory (no proof)
    cap = max(acc_mem, default=math.inf)
    with _one_blas_thread():
        res = run(cap)
        acc_order = _match_stages(res, p, acc_devs, acc_mem, "acc") \
            if math.isfinite(res.value) else acc_devs
        if acc_order is None:
            cap = min(acc_mem)
            res = run(cap)
            acc_order = _match_stages(res, p, acc_devs, acc_mem, "acc") or acc_devs
            exact = False
            note = (f"accelerator memories differ and the optimum for the largest "
                    f"({max(acc_mem) / 2**30:.3g} GiB) does not fit the devices; solved with "
                    f"the smallest ({cap / 2**30:.3g} GiB) for every accelerator")
    if not math.isfinite(res.value):
        total = float(p.mem.sum())
        big = int(np.argmax(p.mem))
        raise InfeasibleError(
            f"no contiguous split of graph {graph.name!r} over {k} accelerators with "
            f"{cap / 2**30:.3g} GiB each and {l_} CPUs respects the memory caps (model "
            f"{total / 2**30:.3g} GiB; the largest colour class/fused component, with op "
            f"{graph.c.names[p.members[big][0]]!r}, needs {p.mem[big] / 2**30:.3g} GiB)")
    cpu_order = _match_stages(res, p, cpu_devs, cpu_mem, "cpu")
    if cpu_order is None:
        worst = max(float(sum(p.mem[s] for s in S)) for S, on, _r in res.stages if on == "cpu")
        raise SolverError(
            f"{method} does not model finite CPU memory (the paper's CPUs hold any amount): "
            f"its best split of graph {graph.name!r} puts {worst / 2**30:.3g} GiB on a CPU of "
            f"cluster {cluster.name!r}, which has {max(cpu_mem) / 2**30:.3g} GiB at most")
    replicated = any(r > 1 for _S, _on, r in res.stages)
    if interleave or replicated:
        exact = False  # the App. C value is not what max_load judges
        note = (f"predicted max_load_ms is the value under the "
                f"{'interleaved' if interleave else 'replicated'} model (App. C), not max_load")
    extra = {"total_s": time.perf_counter() - t0}
    if note:
        extra["note"] = note
    status = "heuristic"
    if exact:  # optimal among contiguous splits; "optimal" only when no split can do better
        from ..bounds import max_load_lower_bound

        status, why = contiguous_optimum_status(res.value, max_load_lower_bound(graph, cluster))
        extra.update(why)
    return _plan_from_stages(p, res, cluster, method, acc_order, cpu_order,
                             status=status,
                             interleave=interleave, allreduce_bandwidth=allreduce_bandwidth,
                             extra_stats=extra)


@register("dp", family="pipeline", paper="Tarnawski et al. NeurIPS'20", objective="max_load",
          exact=True, contract_params={"max_ideals": 20_000},
          description="Optimal contiguous pipeline split by DP over ideals (max-load)")
def dp(graph, cluster, *, max_ideals: int = 100_000, interleave: bool | str = False,
       replicate: bool = False, allreduce_bandwidth: float = math.inf,
       hierarchical: bool = False, objective: str = "pipedream",
       backward_contiguous: bool = False, time_limit: float | None = None,
       progress=None) -> Plan:
    """Optimal contiguous split minimising the max device load (Section 5.1.1).

    Parameters
    ----------
    max_ideals : int
        Refuse (SolverError naming the count, suggesting ``dpl``) beyond this many ideals.
    interleave : bool
        Appendix C.1: ``True``: a device's load is max(compute, communication) instead of
        the sum; ``"full_duplex"``: max(in-transfers, compute, out-transfers). Judged by
        :func:`workbench.pipeline.pipelined_time`.
    replicate : bool
        Appendix C.2: a stage may be replicated over several accelerators; time per sample is
        load / r plus the all-reduce term (r - 1) * weights / (r * allreduce_bandwidth). The
        plan puts a replicated stage on its first replica (``info["replicas"]`` lists all);
        ``predicted`` holds the replicated max-load.
    allreduce_bandwidth : float
        Bytes per ms of the all-reduce (``inf``: free synchronisation).
    hierarchical : bool
        Appendix C.3: accelerators grouped in hosts, transfers inside a host over the
        ``intra_host`` link and across hosts over ``inter_host``; exact DP over segments and
        prefixes (:mod:`workbench.solvers.pipeline_dp_hier`), judged by
        :func:`workbench.pipeline.hierarchical_loads`. Small lattices only.
    objective : {"pipedream", "gpipe"}
        Appendix A: ``"pipedream"`` minimises max(FW + BW) per device (the default, the max
        load); ``"gpipe"`` minimises max FW + max BW by a DP over Pareto fronts
        (:mod:`workbench.solvers.pipeline_dp_gpipe`; ``predicted["time_per_sample_ms"]``, judged
        by :func:`workbench.pipeline.pipelined_time`). Small lattices only.
    backward_contiguous : bool
        Training graphs (Section 5.3): only splits whose backward part on every device is
        contiguous too (checked by :func:`workbench.pipeline.contiguity_violations`).
    """
    if objective not in ("pipedream", "gpipe"):
        raise SolverError(f"dp: objective must be 'pipedream' or 'gpipe', got {objective!r}")
    if objective == "gpipe":
        if hierarchical or replicate:
            raise SolverError("dp: objective='gpipe' does not combine with hierarchical or "
                              "replicate")
        from .pipeline_dp_gpipe import solve_gpipe

        return solve_gpipe(graph, cluster, interleave=interleave,
                           max_ideals=min(max_ideals, 1_000), time_limit=time_limit)
    if hierarchical:
        if interleave or replicate:
            raise SolverError("dp: hierarchical=True does not combine with interleave or "
                              "replicate")
        from .pipeline_dp_hier import solve_hierarchical

        return solve_hierarchical(graph, cluster, max_ideals=min(max_ideals, 2_000),
                                  time_limit=time_limit)
    return _run(graph, cluster, "dp", linear=False, max_ideals=max_ideals,
                interleave=interleave, replicate=replicate,
                allreduce_bandwidth=allreduce_bandwidth, time_limit=time_limit,
                progress=progress, backward_contiguous=backward_contiguous)


@register("dpl", family="pipeline", paper="Tarnawski et al. NeurIPS'20", objective="max_load",
          description="DP over the prefixes of a DFS topological order (linearisation heuristic)")
def dpl(graph, cluster, *, interleave: bool | str = False, replicate: bool = False,
        allreduce_bandwidth: float = math.inf, backward_contiguous: bool = False,
        time_limit: float | None = None, progress=None) -> Plan:
    """The linearised DP (Section 5.1.2): add a DFS Hamiltonian path, so the ideals are the
    |V| + 1 prefixes; polynomial, usually optimal or close. Options as :func:`dp`."""
    return _run(graph, cluster, "dpl", linear=True, max_ideals=0, interleave=interleave,
                replicate=replicate, allreduce_bandwidth=allreduce_bandwidth,
                time_limit=time_limit, progress=progress,
                backward_contiguous=backward_contiguous)


@register("pipedream", family="pipeline", paper="PipeDream (SOSP'19) as run by Tarnawski et al.",
          objective="max_load",
          description="PipeDream-style: contract branching regions to a path, then the DP")
def pipedream(graph, cluster, *, skip_span: int | None = None, time_limit: float | None = None,
              progress=None) -> Plan:
    """The PipeDream baseline: every biconnected component of the forward graph is merged at its
    edge tails (so branches collapse and the graph becomes a path), then the DP runs.

    Parameters
    ----------
    skip_span : int, optional
        The authors' setting: forward edges that jump over more than ``skip_span`` forward ops
        are left out of the contraction (they hand-picked such long-range inputs on GNMT: the
        encoder output and attention broadcast into every decoder layer). ``None`` (default,
        the principled variant) skips only edges out of input layers. ``skip_span=10`` gives
        the paper's PipeDream column on all three layer workloads (GNMT 107.35, BERT-24
        17.79, ResNet-50 83.67); every value from 7 to 15 gives 107.35 on GNMT.
    """
    if skip_span is not None and (isinstance(skip_span, bool) or skip_span < 0):
        raise SolverError(f"pipedream: skip_span must be a non-negative integer, got "
                          f"{skip_span!r}")
    return _run(graph, cluster, "pipedream", linear=True, contract_branches=True, max_ideals=0,
                interleave=False, replicate=False, allreduce_bandwidth=math.inf,
                time_limit=time_limit, progress=progress, skip_span=skip_span)
