"""Graph contraction for the DP over ideals (Tarnawski et al., NeurIPS 2020, Section 5.3 and
Appendix B): the forward graph the DP of :mod:`workbench.solvers.pipeline.dp` runs on.

* Colour classes (colocation groups) become supernodes; the forward and backward ops of a class
  share one. A backward class without a forward partner (*orphaned*) gets an artificial forward
  image, tied in with mirrored copies of its backward edges.
* Strongly connected components that the contraction creates in the forward part are fused.
* Zero-time forward supernodes with one forward neighbour are folded into it (as the authors'
  implementation does), unless that would exceed the accelerator memory.
* ``contract_branches=True`` (the PipeDream baseline) merges every biconnected component of the
  forward graph at its edge tails, so the graph becomes a path.
* Transfers become hyperedges over supernodes: the judge's nested transfer tiers
  (:func:`workbench.costs.pipeline_costs.transfer_tiers`), exact for any per-edge costs.

Examples
--------
>>> from workbench import samples, Cluster
>>> p = contract_for_dp(samples.to_training(samples.diamond()), Cluster.preset("2xV100-pcie"))
>>> p.n, p.pred
(4, [[], [0], [0], [1, 2]])
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...errors import GraphError, InfeasibleError, SolverError
from ...costs.pipeline_costs import out_costs, transfer_tiers

__all__ = ["BACKWARD_KINDS", "DPProblem", "class_keys", "contract_for_dp", "device_kinds"]

BACKWARD_KINDS = ("bwd", "update")
_FWD, _BWD = 0, 1


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


def device_kinds(cluster) -> tuple[str, list[int], list[int], float]:
    """The accelerator kind, the accelerators, the CPUs and the smallest accelerator memory of
    ``cluster``; SolverError when it has several accelerator kinds (the DPs assume one).

    >>> from workbench import Cluster
    >>> device_kinds(Cluster.preset("2xV100-pcie"))[:3]
    ('gpu', [0, 1], [])
    """
    acc = [i for i, d in enumerate(cluster.devices) if d.kind != "cpu"]
    cpus = [i for i, d in enumerate(cluster.devices) if d.kind == "cpu"]
    kinds = sorted({cluster.devices[i].kind for i in acc})
    if len(kinds) > 1:
        raise SolverError(f"the pipelined DP assumes one accelerator kind (Section 3); cluster "
                          f"{cluster.name!r} has {', '.join(kinds)}")
    cap = min((cluster.devices[i].memory for i in acc), default=math.inf)
    return (kinds[0] if kinds else "gpu"), acc, cpus, cap


def _out_costs(graph, cluster, acc_devs: list[int] | None = None) -> np.ndarray:
    """Per op: the paper's ``c_u`` (see :func:`workbench.costs.pipeline_costs.out_costs`)."""
    return out_costs(graph, cluster)


def class_keys(graph) -> tuple[np.ndarray, list]:
    """Colour class index per op (ops without one get their own) and a sort key per class.

    >>> from workbench import samples
    >>> cls, keys = class_keys(samples.diamond())
    >>> cls.tolist(), keys
    ([0, 1, 2, 3], [(2, 0), (2, 1), (2, 2), (2, 3)])
    """
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
                    merge_trivial: bool = True, skip_span: int | None = None,
                    forwarded: bool = False) -> DPProblem:
    """Contract ``graph`` for the DP (Section 5.3 and Appendix B of the paper).
    ``forwarded``: transfers charged at the slowest link of a ``direct``-mode cluster (the
    hops of :data:`workbench.costs.pipeline_costs.FORWARDED`).

    Made once per graph, cluster and options (kept on the graph, which is immutable): the IPs
    ask for it in their units and in each DP warm start, seconds apiece on 36,000 ops.
    Read-only for callers.

    Raises GraphError for an edge from a backward op into a forward op, and InfeasibleError for
    a colour class (or fused component) that no single device kind can run.

    >>> from workbench import samples, Cluster
    >>> g = samples.to_training(samples.diamond())
    >>> p = contract_for_dp(g, Cluster.preset("2xV100-pcie"))
    >>> p.n, sorted(len(m) for m in p.members)
    (4, [2, 2, 2, 2])
    """
    memo = graph.__dict__.setdefault("_dp_contractions", {})
    key = (id(cluster), contract_branches, merge_trivial, skip_span, forwarded)
    hit = memo.get(key)
    if hit is not None and hit[0] is cluster:
        return hit[1]
    p = _contract_for_dp(graph, cluster, contract_branches=contract_branches,
                         merge_trivial=merge_trivial, skip_span=skip_span, forwarded=forwarded)
    if len(memo) >= 8:
        memo.clear()
    memo[key] = (cluster, p)
    return p


def _contract_for_dp(graph, cluster, *, contract_branches: bool, merge_trivial: bool,
                     skip_span: int | None, forwarded: bool) -> DPProblem:
    gc = graph.c
    n = gc.n
    acc_kind, acc_devs, cpu_devs, _cap = device_kinds(cluster)
    is_bwd = np.isin(gc.op_kind, [["fwd", "bwd", "update", "other"].index(k)
                                  for k in BACKWARD_KINDS])
    src, dst = gc.src, gc.dst
    bad = np.flatnonzero(is_bwd[src] & ~is_bwd[dst])
    if len(bad):
        e = int(bad[0])
        raise GraphError(f"edge {gc.names[src[e]]!r} -> {gc.names[dst[e]]!r} goes from a backward "
                         f"op into the forward part ({len(bad)} such edges); the pipelined DP "
                         f"needs the backward pass after the forward pass")
    cls, keys = class_keys(graph)
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
        nodes = sorted(set(roots))
        if _acyclic(nodes, adj):  # the usual case: nothing to fuse (cheaper than Tarjan)
            break
        comps = _scc(nodes, adj)
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
    for u, cons, cost in transfer_tiers(graph, cluster, slowest=forwarded):
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


def _acyclic(nodes: list, adj: dict) -> bool:
    """Whether the graph ``adj`` on ``nodes`` has no cycle (Kahn's count).

    >>> _acyclic([0, 1, 2], {0: {1}, 1: {2}}), _acyclic([0, 1], {0: {1}, 1: {0}})
    (True, False)
    """
    indeg = dict.fromkeys(nodes, 0)
    for ws in adj.values():
        for w in ws:
            indeg[w] += 1
    ready = [v for v in nodes if indeg[v] == 0]
    seen = 0
    while ready:
        v = ready.pop()
        seen += 1
        for w in adj.get(v, ()):
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    return seen == len(nodes)


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
