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
* **Ideals** are enumerated as bitsets (Python ints while growing, a 0/1 matrix afterwards).
  A contiguous set is ``S = I \\ J`` for ideals ``J ⊆ I`` (Fact 5.2).
* **Costs of all pairs without Python loops**: compute and memory are prefix differences. The
  communication of ``S`` is a hypergraph cut: op ``u`` pays its output cost once when the set of
  supernodes holding ``u`` and its consumers, ``h_u``, is split by ``S``. With ``S = I \\ J``,
  ``[h split] = 1 - [h ∩ I ⊆ J] - [h ⊆ I][h ∩ J = ∅]``, and for a fixed pattern ``Z = h ∩ I``
  both terms factor into a function of ``I`` times a function of ``J``. So the cut of every pair
  in a block is ``γ(I) - P[I] · R[J]``, one matrix product (BLAS), exactly.
* **Accounting**: an op's output costs ``c_u`` (the paper's per-node cost, the largest of its
  out-edges' transfer times when they differ). For the MSR workloads every op has one cost and
  the DP's value equals :func:`workbench.simulate.max_load` of its split; with different
  per-edge costs the DP's value is an upper bound of ``max_load`` (Appendix B's subdivision is
  not applied).
* **Pruning**: the DPL solution gives an upper bound ``B`` on the optimum; ideals are sorted by
  accelerator compute and each block of them only meets the window of sub-ideals whose compute
  difference can stay below ``B`` (and the CPU window likewise).

Examples
--------
>>> from workbench import samples, Cluster, solve, max_load
>>> from workbench.cluster import Device, Link
>>> g = samples.transformer(60)
>>> c = Cluster([Device(f"gpu{i}", "gpu", 16e9) for i in range(3)] + [Device("cpu0", "cpu")],
...             mode="host", host_link=Link(0.0, 1e7))
>>> plan = solve(g, c, method="dp")
>>> plan.status, abs(plan.predicted["max_load_ms"] - max_load(plan, c)) < 1e-9
('optimal', True)
>>> solve(g, c, method="dpl").predicted["max_load_ms"] >= plan.predicted["max_load_ms"]
True
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import GraphError, InfeasibleError, SolverError
from ..plan import Plan
from . import register

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


def _out_costs(graph, cluster, acc_devs: list[int]) -> np.ndarray:
    """Per op: the time to move its output between an accelerator and DRAM (max over edges)."""
    gc, cc = graph.c, cluster.c
    cost = np.zeros(gc.n)
    if gc.m == 0:
        return cost
    fixed = ~np.isnan(gc.comm)
    if cc.host_mode and acc_devs:
        d = acc_devs[0]
        model = cc.up_lat[d] + gc.bytes * cc.up_inv_bw[d]
    else:
        lat, bw = cluster.mean_link()
        model = lat + (0.0 if math.isinf(bw) else 1.0) * gc.bytes / (bw if math.isfinite(bw) else 1.0)
    t = np.where(fixed, np.nan_to_num(gc.comm), model)
    np.maximum.at(cost, gc.src, t)
    return cost


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
                    merge_trivial: bool = True) -> DPProblem:
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
        _union_biconnected(graph, cls, uf)
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
    acc_t = gc.compute[:, ka] if ka is not None else np.full(n, np.inf)
    cpu_t = gc.compute[:, kc] if kc is not None else np.full(n, np.inf)
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
    # hyperedges: supernodes of each op and its consumers
    out_cost = _out_costs(graph, cluster, acc_devs)
    hyper_d: dict = {}
    osucc = gc.succ
    own = owner.tolist()
    oc = out_cost.tolist()
    for u in range(n):
        if not osucc[u] or oc[u] == 0.0:
            continue
        h = {own[u]}
        for v in osucc[u]:
            h.add(own[v])
        if len(h) > 1:
            t = tuple(sorted(h))
            hyper_d[t] = hyper_d.get(t, 0.0) + oc[u]
    return DPProblem(graph=graph, members=members, acc=acc, cpu=cpu, mem=mem, pred=pred,
                     succ=succ, hyper=list(hyper_d.items()), key=key_of, out_cost=out_cost,
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


def _union_biconnected(graph, cls: np.ndarray, uf: _UF) -> None:
    """PipeDream-style contraction: in every biconnected component of the (undirected,
    class-contracted) forward graph, merge the tails of its edges, so branches become one node."""
    import networkx as nx

    gc = graph.c
    is_fwd = gc.op_kind == 0
    # like PipeDream, ignore edges out of input layers (no predecessors, no compute), which
    # would otherwise tie the whole network into one biconnected component
    idle = np.nan_to_num(gc.compute, posinf=0.0).sum(axis=1) <= 0
    skip = np.array([not gc.pred[i] and idle[i] for i in range(gc.n)])
    G = nx.Graph()
    for u, v in zip(gc.src.tolist(), gc.dst.tolist()):
        if is_fwd[u] and is_fwd[v] and cls[u] != cls[v] and not skip[u]:
            G.add_edge(int(cls[u]), int(cls[v]))
    tails: dict = {}
    for u, v in zip(gc.src.tolist(), gc.dst.tolist()):
        if is_fwd[u] and is_fwd[v] and cls[u] != cls[v] and not skip[u]:
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


def _subideal_sets(ideals: list[int], succ: list) -> list[int]:
    """For ideals in order of size: bitset over ideal ids of all sub-ideals (itself included),
    the transitive closure of "remove one maximal element"."""
    idx = {x: i for i, x in enumerate(ideals)}
    smask = [sum(1 << w for w in ss) for ss in succ]
    sub = [0] * len(ideals)
    for i, x in enumerate(ideals):
        m = 1 << i
        y = x
        while y:
            low = y & -y
            y ^= low
            if not (smask[low.bit_length() - 1] & x):
                m |= sub[idx[x ^ low]]
        sub[i] = m
    return sub


def _bits(x: int, n: int) -> np.ndarray:
    nb = max(1, (n + 7) // 8)
    return np.unpackbits(np.frombuffer(x.to_bytes(nb, "little"), dtype=np.uint8),
                         bitorder="little")[:n]


def count_ideals(graph, cluster, *, limit: int = 10_000_000) -> int:
    """Number of ideals of the contracted forward graph the DP would enumerate.

    >>> from workbench import samples, Cluster
    >>> count_ideals(samples.diamond(), Cluster.preset("2xV100-pcie"))
    6
    """
    p = contract_for_dp(graph, cluster)
    return len(enumerate_ideals(p.pred, p.succ, limit=limit))


def _ideal_matrix(ideals: list[int], n: int) -> np.ndarray:
    nbytes = max(1, (n + 7) // 8)
    buf = b"".join(x.to_bytes(nbytes, "little") for x in ideals)
    arr = np.frombuffer(buf, dtype=np.uint8).reshape(len(ideals), nbytes)
    return np.unpackbits(arr, axis=1, bitorder="little")[:, :n]


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


# ----------------------------------------------------------------------------- features
def _features(p: DPProblem, X: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``gamma`` (per ideal) and the factor matrices ``P`` (ideal as the outer set) and ``R``
    (ideal as the inner set) with ``cut(I \\ J) = gamma[I] - P[I] @ R[J]`` for ideals J ⊆ I."""
    N, n = X.shape
    anc = [0] * n  # strict ancestors as bitmask
    for v in range(n):  # numbered topologically
        m = 0
        for u in p.pred[v]:
            m |= anc[u] | (1 << u)
        anc[v] = m
    desc = [0] * n
    for v in range(n - 1, -1, -1):
        m = 0
        for w in p.succ[v]:
            m |= desc[w] | (1 << w)
        desc[v] = m

    def maxel(zs):
        s = 0
        for z in zs:
            s |= anc[z]
        return tuple(z for z in zs if not (s >> z) & 1)

    def minel(zs):
        s = 0
        for z in zs:
            s |= desc[z]
        return tuple(z for z in zs if not (s >> z) & 1)

    total = 0.0
    gamma = np.zeros(N)
    feat: dict = {}
    cols_P: list = []
    Xb = X.astype(bool)
    for h, c in p.hyper:
        total += c
        hh = list(h)
        if len(hh) <= 62:
            w = (np.int64(1) << np.arange(len(hh), dtype=np.int64))
            code = X[:, hh].astype(np.int64) @ w
            uniq, inv = np.unique(code, return_inverse=True)
            rows_of = [np.flatnonzero(inv == q) for q in range(len(uniq))]
            pats = [tuple(hh[b] for b in range(len(hh)) if (int(z) >> b) & 1) for z in uniq]
        else:  # pragma: no cover - huge fan-out
            rowsb = Xb[:, hh]
            uniq_rows, inv = np.unique(rowsb, axis=0, return_inverse=True)
            inv = inv.ravel()
            rows_of = [np.flatnonzero(inv == q) for q in range(len(uniq_rows))]
            pats = [tuple(hh[b] for b in range(len(hh)) if r[b]) for r in uniq_rows]
        full = tuple(hh)
        for pat, rows in zip(pats, rows_of):
            if not pat:
                gamma[rows] -= c  # beta(I): h ∩ I = ∅
                continue
            key = ("Z", maxel(pat))
            f = feat.setdefault(key, len(feat))
            if f == len(cols_P):
                cols_P.append([])
            cols_P[f].append((rows, c))
            if pat == full:
                key2 = ("H", minel(full))
                f2 = feat.setdefault(key2, len(feat))
                if f2 == len(cols_P):
                    cols_P.append([])
                cols_P[f2].append((rows, c))
    gamma += total
    nf = len(feat)
    P = np.zeros((N, nf), dtype=dtype)
    R = np.zeros((N, nf), dtype=dtype)
    for (kind, els), f in feat.items():
        for rows, c in cols_P[f]:
            P[rows, f] += c
        if kind == "Z":
            R[:, f] = Xb[:, list(els)].all(axis=1)
        else:
            R[:, f] = ~Xb[:, list(els)].any(axis=1)
    return gamma, P, R


# ----------------------------------------------------------------------------- the DP
@dataclass
class DPResult:
    """Outcome of :func:`solve_dp`: value, the stages (lists of supernodes, accelerator or
    CPU, replicas) in pipeline order, and statistics."""

    value: float
    stages: list
    stats: dict


def solve_dp(p: DPProblem, k: int, l: int, cap: float, *, order: list[int] | None = None,
             upper_bound: float = math.inf, max_ideals: int = 100_000, block: int = 64,
             interleave: bool = False, replicate: bool = False,
             allreduce_bandwidth: float = math.inf, time_limit: float | None = None,
             progress=None, ideals: list[int] | None = None) -> DPResult:
    """Run the DP over the ideals of ``p`` (or the prefixes of ``order`` for the linearised
    variant). ``upper_bound`` prunes transitions that cannot be part of a split at most that
    good (it must be at least the optimum, e.g. the DPL value)."""
    t0 = time.perf_counter()
    ns = p.n
    if ideals is not None:
        pass
    elif order is not None:
        ideals = [0]
        m = 0
        for v in order:
            m |= 1 << v
            ideals.append(m)
    else:
        ideals = enumerate_ideals(p.pred, p.succ, limit=max_ideals)
    t_enum = time.perf_counter() - t0
    X = _ideal_matrix(ideals, ns)
    N = len(ideals)
    acc_fin = np.where(np.isfinite(p.acc), p.acc, 0.0)
    cpu_fin = np.where(np.isfinite(p.cpu), p.cpu, 0.0)
    Xf = X.astype(np.float64)
    Pacc = Xf @ acc_fin
    Pcpu = Xf @ cpu_fin
    Pmem = Xf @ p.mem
    Uacc = Xf @ (~np.isfinite(p.acc)).astype(np.float64)
    Ucpu = Xf @ (~np.isfinite(p.cpu)).astype(np.float64)
    size = X.sum(axis=1).astype(np.int64)
    gamma, P, R = _features(p, X, np.float64)
    t_feat = time.perf_counter() - t0 - t_enum
    # sub-ideal sets (exact candidates) and a processing order that keeps them overlapping
    linear = order is not None
    sub_sets = _subideal_sets(ideals, p.succ) if not linear else None
    perm = np.array(sorted(range(N), key=ideals.__getitem__), dtype=np.int64) \
        if not linear else np.arange(N)
    full_idx = int(np.flatnonzero(size == ns)[0])
    empty_idx = int(np.flatnonzero(size == 0)[0])
    B = upper_bound
    tolB = B + 1e-7 * (1.0 + abs(B)) if math.isfinite(B) else math.inf
    K, L = k, l
    dpv = np.full((K + 1, L + 1, N), np.inf)
    dpv[:, :, empty_idx] = 0.0
    layers = [(a, b) for a in range(K + 1) for b in range(L + 1) if (a, b) != (0, 0)]
    reps_max = K if replicate else 1
    pairs = cand_entries = valid_entries = 0

    P32, R32 = P.astype(np.float32), R.astype(np.float32)

    def stage_cost(comp, comm, dmem, r: int):
        """Load of a stage on ``r`` accelerators: compute + communication (or their max with
        interleaving, App. C.1); for r > 1 (or ``replicate``) split r ways plus the all-reduce
        of the stage's weights (App. C.2)."""
        base = np.maximum(comp, comm) if interleave else comp + comm
        if r == 1 and not replicate:
            return base
        syn = ((r - 1) * dmem / (r * allreduce_bandwidth)
               if math.isfinite(allreduce_bandwidth) else 0.0 * comp)
        return np.maximum(base / r, syn) if interleave else base / r + syn

    def costs(rows: np.ndarray, cand: np.ndarray, sub: np.ndarray, slack: float = 1.0):
        """Sparse (row-sorted) accelerator and CPU transitions of ``rows`` to ``cand``."""
        ri, ci = np.nonzero(sub)
        I, J = rows[ri], cand[ci]
        G = (P32[rows] @ R32[cand].T).astype(np.float64)
        comm = np.maximum(gamma[I] - G[ri, ci], 0.0)
        comp = Pacc[I] - Pacc[J]
        okacc = ((Uacc[I] - Uacc[J]) < 0.5) & ((Pmem[I] - Pmem[J]) <= cap * (1 + 1e-12) + 1e-9)
        if K == 0:
            okacc[:] = False
        out = []
        for r in range(1, reps_max + 1):
            cost = stage_cost(comp, comm, Pmem[I] - Pmem[J], r)
            m = okacc & (cost <= tolB * slack) if math.isfinite(tolB) else okacc.copy()
            out.append((ri[m], J[m], cost[m]))
        cpu = Pcpu[I] - Pcpu[J]
        m = ((Ucpu[I] - Ucpu[J]) < 0.5) & (cpu <= tolB * slack if math.isfinite(tolB) else True)
        if L == 0:
            m[:] = False
        return out, (ri[m], J[m], cpu[m])

    need_u_acc = bool((Uacc > 0).any())
    need_u_cpu = bool((Ucpu > 0).any())
    need_mem = bool(Pmem.max() > cap)

    def dense_costs(rows: np.ndarray, cand: np.ndarray, sub: np.ndarray):
        """Dense (rows x cand) accelerator costs per replica count and CPU costs, inf where
        the transition is invalid or above the bound."""
        G = (P32[rows] @ R32[cand].T).astype(np.float64)
        comm = gamma[rows][:, None] - G
        np.maximum(comm, 0.0, out=comm)
        comp = Pacc[rows][:, None] - Pacc[cand][None, :]
        okacc = sub.copy()
        if need_u_acc:
            okacc &= (Uacc[rows][:, None] - Uacc[cand][None, :]) < 0.5
        if need_mem:
            okacc &= (Pmem[rows][:, None] - Pmem[cand][None, :]) <= cap * (1 + 1e-12) + 1e-9
        if K == 0:
            okacc[:] = False
        out = []
        for r in range(1, reps_max + 1):
            cost = stage_cost(comp, comm, Pmem[rows][:, None] - Pmem[cand][None, :], r)
            bad = ~okacc
            if math.isfinite(tolB):
                bad |= cost > tolB
            cost[bad] = np.inf
            out.append(cost)
        cpu = None
        if L > 0:
            cpu = Pcpu[rows][:, None] - Pcpu[cand][None, :]
            bad = ~sub
            if need_u_cpu:
                bad |= (Ucpu[rows][:, None] - Ucpu[cand][None, :]) >= 0.5
            if math.isfinite(tolB):
                bad |= cpu > tolB
            cpu[bad] = np.inf
        return out, cpu

    def seg_min(nrows: int, ri: np.ndarray, vals: np.ndarray) -> np.ndarray:
        out = np.full(nrows, np.inf)
        if len(ri):
            starts = np.flatnonzero(np.r_[True, ri[1:] != ri[:-1]])
            out[ri[starts]] = np.minimum.reduceat(vals, starts)
        return out

    def candidates(rows: np.ndarray):
        if sub_sets is not None:
            u = 0
            for r in rows.tolist():
                u |= sub_sets[r]
            cand = np.flatnonzero(_bits(u, N))
        else:
            cand = np.arange(int(rows.max()) + 1)
        if math.isfinite(tolB):
            keep = Pacc[cand] >= Pacc[rows].min() - tolB - 1e-9 * (1 + abs(tolB))
            if L > 0:
                keep |= Pcpu[cand] >= Pcpu[rows].min() - tolB - 1e-9 * (1 + abs(tolB))
            cand = cand[keep]
        if sub_sets is not None:
            sub = np.stack([_bits(sub_sets[r], N)[cand] for r in rows.tolist()]).astype(bool)
        else:
            sub = cand[None, :] <= rows[:, None]
        return cand, sub

    for bstart in range(0, N, block):
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            raise SolverError(f"the DP ran out of its time limit ({time_limit} s) after "
                              f"{bstart:,} of {N:,} ideals")
        rows = perm[bstart:bstart + block]
        rows = rows[size[rows] > 0]
        if len(rows) == 0:
            continue
        cand, sub = candidates(rows)
        cand_entries += sub.size
        pairs += int(sub.sum())
        if sub.mean() < 0.4:  # sparse transitions
            acc_tr, (rc, jc, vc) = costs(rows, cand, sub)
            valid_entries += sum(len(t[0]) for t in acc_tr) + len(rc)
            nr = len(rows)
            for (a, b) in layers:
                cur = np.full(nr, np.inf)
                if a > 0:
                    cur = np.minimum(cur, dpv[a - 1, b, rows])
                    for r, (ra, ja, va) in enumerate(acc_tr, start=1):
                        if r <= a and len(ra):
                            cur = np.minimum(cur, seg_min(nr, ra, np.maximum(dpv[a - r, b, ja], va)))
                if b > 0:
                    cur = np.minimum(cur, dpv[a, b - 1, rows])
                    if len(rc):
                        cur = np.minimum(cur, seg_min(nr, rc, np.maximum(dpv[a, b - 1, jc], vc)))
                dpv[a, b, rows] = cur
            if progress is not None:
                progress({"ideals_done": bstart + len(rows), "ideals": N})
            continue
        acc_d, cpu_d = dense_costs(rows, cand, sub)
        valid_entries += sum(int(np.isfinite(m).sum()) for m in acc_d) + \
            (int(np.isfinite(cpu_d).sum()) if cpu_d is not None else 0)
        nr = len(rows)
        for (a, b) in layers:
            cur = np.full(nr, np.inf)
            if a > 0:
                cur = np.minimum(cur, dpv[a - 1, b, rows])
                for r, m in enumerate(acc_d, start=1):
                    if r <= a:
                        prev = dpv[a - r, b, cand]
                        cols = np.flatnonzero(prev <= tolB)
                        if len(cols) == 0:
                            continue
                        if len(cols) < 0.7 * len(cand):
                            vals = np.maximum(prev[cols][None, :], m[:, cols])
                        else:
                            vals = np.maximum(prev[None, :], m)
                        cur = np.minimum(cur, vals.min(axis=1))
            if b > 0:
                cur = np.minimum(cur, dpv[a, b - 1, rows])
                prev = dpv[a, b - 1, cand]
                cols = np.flatnonzero(prev <= tolB)
                if len(cols):
                    vals = np.maximum(prev[cols][None, :], cpu_d[:, cols])
                    cur = np.minimum(cur, vals.min(axis=1))
            dpv[a, b, rows] = cur
        if progress is not None:
            progress({"ideals_done": bstart + len(rows), "ideals": N})
    value = float(dpv[K, L, full_idx])
    stats = {"ideals": N, "ideal_pairs": pairs, "candidate_pairs": cand_entries,
             "valid_pairs": valid_entries, "supernodes": ns, "features": int(P.shape[1]),
             "upper_bound": B, "enumerate_s": t_enum, "features_s": t_feat,
             "dp_s": time.perf_counter() - t0}
    if not math.isfinite(value):
        return DPResult(value, [], stats)
    # backtrack: recompute the transitions of one ideal at a time and follow the best one
    stages = []
    a, b, cur = K, L, full_idx
    while cur != empty_idx:
        target = dpv[a, b, cur]
        rows = np.array([cur])
        cand, sub = candidates(rows)
        acc_tr, (rc, jc, vc) = costs(rows, cand, sub, slack=1.0 + 1e-5)
        # tie-break as the authors' code: leave a CPU unused, then a CPU stage, then leave an
        # accelerator unused, then an accelerator stage (first option within tolerance wins)
        tol = target + 1e-6 * (1.0 + abs(target))
        opts = []
        if b > 0:
            opts.append((dpv[a, b - 1, cur], 2, cur, 1))
            if len(rc):
                vals = np.maximum(dpv[a, b - 1, jc], vc)
                i = int(np.argmin(vals))
                opts.append((float(vals[i]), 4, int(jc[i]), 1))
        if a > 0:
            opts.append((dpv[a - 1, b, cur], 1, cur, 1))
            for r, (ra, ja, va) in enumerate(acc_tr, start=1):
                if r <= a and len(ra):
                    vals = np.maximum(dpv[a - r, b, ja], va)
                    i = int(np.argmin(vals))
                    opts.append((float(vals[i]), 3, int(ja[i]), r))
        best = next((o for o in opts if o[0] <= tol), min(opts, default=(np.inf, 0, 0, 0)))
        _v, t, j, r = best
        if t == 1:
            a -= 1
            continue
        if t == 2:
            b -= 1
            continue
        if t == 0:  # pragma: no cover
            raise SolverError("DP backtracking failed")
        S = [v for v in range(ns) if X[cur, v] and not X[j, v]]
        stages.append((S, "acc" if t == 3 else "cpu", r))
        if t == 3:
            a -= r
        else:
            b -= 1
        cur = j
    stages.reverse()
    return DPResult(value, stages, stats)


# ----------------------------------------------------------------------------- exact costs
def stage_cost(p: DPProblem, S: list[int], on: str, *, interleave: bool = False,
               replicas: int = 1, allreduce_bandwidth: float = math.inf) -> float:
    """Exact load of one stage (a set of supernodes) under the paper's accounting."""
    Sset = set(S)
    if on == "cpu":
        return float(sum(p.cpu[s] for s in S))
    comp = float(sum(p.acc[s] for s in S))
    comm = 0.0
    for h, c in p.hyper:
        inside = sum(1 for x in h if x in Sset)
        if 0 < inside < len(h):
            comm += c
    if replicas > 1:
        mem = float(sum(p.mem[s] for s in S))
        sync = (replicas - 1) * mem / (replicas * allreduce_bandwidth) \
            if math.isfinite(allreduce_bandwidth) else 0.0
        base = max(comp, comm) if interleave else comp + comm
        return max(base / replicas, sync) if interleave else base / replicas + sync
    return max(comp, comm) if interleave else comp + comm


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


def _run(graph, cluster, method: str, *, linear: bool, contract_branches: bool = False,
         max_ideals: int, interleave: bool, replicate: bool, allreduce_bandwidth: float,
         time_limit, progress, prune: bool = True) -> Plan:
    t0 = time.perf_counter()
    _kind, acc_devs, cpu_devs, cap = _device_kinds(cluster)
    p = contract_for_dp(graph, cluster, contract_branches=contract_branches)
    k, l_ = len(acc_devs), len(cpu_devs)
    kw = {"interleave": interleave, "replicate": replicate,
          "allreduce_bandwidth": allreduce_bandwidth, "time_limit": time_limit,
          "progress": progress}
    with _one_blas_thread():
        if linear:
            res = solve_dp(p, k, l_, cap, order=_linear_order(p), **kw)
        else:
            ideals = enumerate_ideals(p.pred, p.succ, limit=max_ideals)
            ub = math.inf
            if prune and len(ideals) > 4 * (p.n + 1):  # the DPL bound pays off on big lattices
                ub = solve_dp(p, k, l_, cap, order=_linear_order(p), **kw).value
            res = solve_dp(p, k, l_, cap, upper_bound=ub, ideals=ideals, **kw)
            if not math.isfinite(res.value) and math.isfinite(ub):  # pragma: no cover - safety
                res = solve_dp(p, k, l_, cap, ideals=ideals, **kw)
            res.stats["dpl_bound_ms"] = ub
    if not math.isfinite(res.value):
        total = float(p.mem.sum())
        big = int(np.argmax(p.mem))
        raise InfeasibleError(
            f"no contiguous split of graph {graph.name!r} over {k} accelerators with "
            f"{cap / 2**30:.3g} GiB each and {l_} CPUs respects the memory caps (model "
            f"{total / 2**30:.3g} GiB; the largest colour class/fused component, with op "
            f"{graph.c.names[p.members[big][0]]!r}, needs {p.mem[big] / 2**30:.3g} GiB)")
    return _plan_from_stages(p, res, cluster, method, acc_devs, cpu_devs,
                             status="optimal" if not linear and not contract_branches else "heuristic",
                             interleave=interleave, allreduce_bandwidth=allreduce_bandwidth,
                             extra_stats={"total_s": time.perf_counter() - t0})


@register("dp", family="pipeline", paper="Tarnawski et al. NeurIPS'20", objective="max_load",
          exact=True, contract_params={"max_ideals": 20_000},
          description="Optimal contiguous pipeline split by DP over ideals (max-load)")
def dp(graph, cluster, *, max_ideals: int = 100_000, interleave: bool = False,
       replicate: bool = False, allreduce_bandwidth: float = math.inf,
       time_limit: float | None = None, progress=None) -> Plan:
    """Optimal contiguous split minimising the max device load (Section 5.1.1).

    Parameters
    ----------
    max_ideals : int
        Refuse (SolverError naming the count, suggesting ``dpl``) beyond this many ideals.
    interleave : bool
        Appendix C.1: a device's load is max(compute, communication) instead of the sum.
    replicate : bool
        Appendix C.2: a stage may be replicated over several accelerators; time per sample is
        load / r plus the all-reduce term (r - 1) * weights / (r * allreduce_bandwidth). The
        plan puts a replicated stage on its first replica (``info["replicas"]`` lists all);
        ``predicted`` holds the replicated max-load.
    allreduce_bandwidth : float
        Bytes per ms of the all-reduce (``inf``: free synchronisation).
    """
    return _run(graph, cluster, "dp", linear=False, max_ideals=max_ideals,
                interleave=interleave, replicate=replicate,
                allreduce_bandwidth=allreduce_bandwidth, time_limit=time_limit,
                progress=progress)


@register("dpl", family="pipeline", paper="Tarnawski et al. NeurIPS'20", objective="max_load",
          description="DP over the prefixes of a DFS topological order (linearisation heuristic)")
def dpl(graph, cluster, *, interleave: bool = False, replicate: bool = False,
        allreduce_bandwidth: float = math.inf, time_limit: float | None = None,
        progress=None) -> Plan:
    """The linearised DP (Section 5.1.2): add a DFS Hamiltonian path, so the ideals are the
    |V| + 1 prefixes; polynomial, usually optimal or close."""
    return _run(graph, cluster, "dpl", linear=True, max_ideals=0, interleave=interleave,
                replicate=replicate, allreduce_bandwidth=allreduce_bandwidth,
                time_limit=time_limit, progress=progress)


@register("pipedream", family="pipeline", paper="PipeDream (SOSP'19) as run by Tarnawski et al.",
          objective="max_load",
          description="PipeDream-style: contract branching regions to a path, then the DP")
def pipedream(graph, cluster, *, time_limit: float | None = None, progress=None) -> Plan:
    """The PipeDream baseline: every biconnected component of the forward graph is merged at its
    edge tails (so branches collapse and the graph becomes a path), then the DP runs."""
    return _run(graph, cluster, "pipedream", linear=True, contract_branches=True, max_ideals=0,
                interleave=False, replicate=False, allreduce_bandwidth=math.inf,
                time_limit=time_limit, progress=progress)
