"""Pipelined partitioning on clusters of several hosts (Tarnawski et al., Appendix C.3).

Accelerators are grouped in hosts: a transfer inside a host uses the cluster's ``intra_host``
link, one across hosts the slower ``inter_host`` link (as in PipeDream's hierarchical
planner). What a stage pays for a tensor therefore depends on where its partners are, which the
flat DP over ideals cannot know. As Appendix C.3 suggests (PipeDream's method), the DP is run
over *segments* as well as prefixes:

* every host takes one contiguous segment ``T = I \\ J`` of the contracted forward graph (``J ⊆ I``
  ideals), hosts in pipeline order (they are identical, so the order loses nothing);
* inside the segment, an inner DP over the ideals between ``J`` and ``I`` splits ``T`` into at
  most ``g`` stages (``g`` accelerators per host), where a stage ``S`` pays, per op output that
  leaves it, the across-hosts cost when some consumer lies outside ``T`` (else the inside
  cost), and per op output it receives, the across-hosts cost when the producer lies outside
  ``T``;
* the outer DP ``F[h, I] = min(F[h-1, I], min_J max(F[h-1, J], inner(J, I)))``.

This is exact for the accounting of :func:`workbench.judge.pipelined.hierarchical_loads` (the judge;
per-op costs ``c_u``, Section 3), at a cost of one inner DP per pair of ideals (the
``O(|I|)`` factor of the paper), so it is meant for graphs with up to a few hundred ideals;
larger lattices are refused with a SolverError naming the count.

Examples
--------
>>> from workbench import Cluster, solve
>>> from workbench.graph import OpGraph
>>> from workbench.judge.pipelined import hierarchical_loads
>>> ops = [(v, {"compute": {"gpu": 10.0}}) for v in "abcd"]
>>> edges = [("a", "b", {"bytes": 1e8}), ("b", "c", {"bytes": 1e6}), ("c", "d", {"bytes": 1e8})]
>>> g = OpGraph.from_ops(ops, edges)
>>> c = Cluster.preset("2x2xV100")
>>> plan = solve(g, c, method="dp", hierarchical=True)
>>> sorted(plan.placement.items())
[('a', 'gpu0'), ('b', 'gpu1'), ('c', 'gpu2'), ('d', 'gpu3')]
>>> round(plan.predicted["max_load_ms"], 4) == round(float(hierarchical_loads(plan, c).max()), 4)
True
"""

from __future__ import annotations

import math
import time

import numpy as np

from ...budget import Budget
from ...errors import InfeasibleError, SolverError, TimeLimitError
from ...judge.pipelined import hierarchical_costs
from ...plan import Plan
from .contraction import contract_for_dp
from .ideals import enumerate_ideals

__all__ = ["host_groups", "solve_hierarchical"]


def host_groups(cluster, method: str = "dp") -> list[list[int]]:
    """Device indices per host (cluster order), checked to be the model of Appendix C.3:
    accelerators of one kind and speed, the same number in every host, no CPU.

    >>> from workbench import Cluster
    >>> host_groups(Cluster.preset("2x4xV100"))
    [[0, 1, 2, 3], [4, 5, 6, 7]]
    """
    devs = cluster.devices
    cpus = [d.name for d in devs if d.kind == "cpu"]
    if cpus:
        raise SolverError(f"{method}: the hierarchical DP places on accelerators only; cluster "
                          f"{cluster.name!r} has CPU device {cpus[0]!r}")
    kinds = sorted({d.kind for d in devs})
    speeds = sorted({d.speed for d in devs})
    if len(kinds) > 1 or len(speeds) > 1:
        raise SolverError(f"{method}: the hierarchical DP needs identical accelerators; cluster "
                          f"{cluster.name!r} has kinds {kinds} and speeds {speeds}")
    groups = [[i for i, d in enumerate(devs) if d.host == h] for h in cluster.hosts()]
    sizes = sorted({len(x) for x in groups})
    if len(sizes) > 1:
        raise SolverError(f"{method}: the hierarchical DP needs the same number of accelerators "
                          f"in every host; cluster {cluster.name!r} has "
                          + ", ".join(f"{h}: {len(x)}" for h, x in zip(cluster.hosts(), groups)))
    return groups


def solve_hierarchical(graph, cluster, *, max_ideals: int = 2_000, time_limit=None,
                       method: str = "dp") -> Plan:
    """Optimal contiguous split over the hosts and accelerators of ``cluster`` (see the module
    text); ``predicted["max_load_ms"]`` is the largest
    :func:`~workbench.judge.pipelined.hierarchical_loads` value of the returned plan. ``time_limit``:
    seconds or a :class:`~workbench.budget.Budget`; TimeLimitError when it runs out (no
    complete split exists before the last ideal)."""
    t0 = time.perf_counter()
    budget = Budget.of(time_limit, name=method)
    groups = host_groups(cluster, method)
    g_per, nh = len(groups[0]), len(groups)
    cap = min(d.memory for d in cluster.devices)
    p = contract_for_dp(graph, cluster)
    ideals = enumerate_ideals(p.pred, p.succ, limit=max_ideals)
    fast, slow = hierarchical_costs(graph, cluster)
    own = p.owner.tolist()
    hyper = []
    for u in range(graph.c.n):
        h = {own[u]} | {own[v] for v in graph.c.succ[u]}
        if len(h) > 1 and (fast[u] > 0 or slow[u] > 0):
            hyper.append((sum(1 << s for s in h), 1 << own[u], float(fast[u]), float(slow[u])))
    acc = p.acc.tolist()
    mem = p.mem.tolist()
    N = len(ideals)

    def stage(S: int, T: int) -> float:
        comp = sum(acc[s] for s in range(p.n) if (S >> s) & 1)
        if not math.isfinite(comp) or sum(mem[s] for s in range(p.n) if (S >> s) & 1) > cap:
            return math.inf
        comm = 0.0
        for hm, src, f, sl in hyper:
            if src & S:
                if hm & ~S:
                    comm += sl if hm & ~T else f
            elif hm & S:
                comm += f if src & T else sl
        return comp + comm

    def inner(j0: int, i0: int, back: bool = False):
        J0, I0 = ideals[j0], ideals[i0]
        T = I0 & ~J0
        sub = [k for k in range(j0, i0 + 1) if ideals[k] & J0 == J0 and ideals[k] & ~I0 == 0]
        f = {j0: [0.0] + [math.inf] * g_per}
        arg: dict = {}
        for k in sub[1:]:
            K = ideals[k]
            row = [math.inf] * (g_per + 1)
            for kk in sub:
                if kk == k:
                    break
                Kp = ideals[kk]
                if Kp & ~K or kk not in f:
                    continue
                c = stage(K & ~Kp, T)
                if not math.isfinite(c):
                    continue
                prev = f[kk]
                for m in range(1, g_per + 1):
                    v = max(prev[m - 1], c)
                    if v < row[m]:
                        row[m] = v
                        arg[k, m] = kk
            f[k] = row
        m_best = min(range(g_per + 1), key=lambda m: (f[i0][m], m))
        if not back:
            return f[i0][m_best]
        out, k, m = [], i0, m_best
        while k != j0:
            kk = arg[k, m]
            out.append(ideals[k] & ~ideals[kk])
            k, m = kk, m - 1
        return out[::-1]

    pairs = sum(1 for i in range(N) for j in range(i) if ideals[j] & ~ideals[i] == 0)
    if pairs * max(1, N // 4) > 5_000_000:
        raise SolverError(f"{method}: the hierarchical DP would solve {pairs:,} inner DPs over a "
                          f"lattice of {N:,} ideals, too many for it; use hierarchical=False "
                          f"(flat DP) or a coarser graph")
    F = np.full((nh + 1, N), np.inf)
    F[:, 0] = 0.0
    choice: dict = {}
    for i in range(1, N):
        if budget.over():
            raise TimeLimitError(f"{method}: the hierarchical DP ran out of its time limit "
                                 f"({budget.limit:.3g} s) after {i:,} of {N:,} ideals")
        seg = [(j, inner(j, i)) for j in range(i) if not ideals[j] & ~ideals[i]]
        for h in range(1, nh + 1):
            best, arg = F[h - 1, i], None
            for j, v in seg:
                x = max(F[h - 1, j], v)
                if x < best:
                    best, arg = x, j
            F[h, i] = best
            choice[h, i] = arg
    value = float(F[nh, N - 1])
    if not math.isfinite(value):
        raise InfeasibleError(f"{method}: no contiguous split of graph {graph.name!r} over the "
                              f"{nh} hosts x {g_per} accelerators of cluster {cluster.name!r} "
                              f"respects their memory ({cap / 2**30:.3g} GiB each)")
    placement: dict = {}
    names = cluster.names
    h, i = nh, N - 1
    segments = []
    while i != 0:
        j = choice[h, i]
        if j is not None:
            segments.append((j, i))
            i = j
        h -= 1
    for hi, (j, i) in enumerate(reversed(segments)):
        for m, S in enumerate(inner(j, i, back=True)):
            for s in range(p.n):
                if (S >> s) & 1:
                    for op in p.members[s]:
                        placement[graph.c.names[op]] = names[groups[hi][m]]
    plan = Plan(graph, placement, method=method, status="optimal",
                predicted={"max_load_ms": value},
                stats={"ideals": N, "ideal_pairs": pairs, "hosts": nh, "per_host": g_per,
                       "solve_s": time.perf_counter() - t0},
                info={"hierarchical": True, "segments": len(segments), "contraction": p.info})
    return plan
