"""Compiled inner loop of the DP over ideals (Tarnawski et al., NeurIPS 2020, Section 5.1.1).

The DP of :mod:`workbench.solvers.pipeline_dp` sets, for every ideal ``I`` and every count of
``a`` accelerators and ``b`` CPUs,

``dp[a, b, I] = min(dp[a-1, b, I], dp[a, b-1, I], min_J max(dp[a-r, b, J], acc(I \\ J, r)),
min_J max(dp[a, b-1, J], cpu(I \\ J)))``

over the sub-ideals ``J ⊊ I``. This module runs it with numba (``cache=True``: the first call in a
fresh environment compiles for a few seconds, later processes load the cache in well under a
second):

* **Sub-ideal descent.** The sub-ideals of ``I`` are visited by a depth-first walk down the
  lattice's covering edges (remove one maximal element), each once (a stamp per ideal). Along the
  walk the stage ``S = I \\ J`` grows by one supernode per step, so compute, memory and the
  communication cut are **updated incrementally per pair** (a counter per hyperedge; the walk
  restores the parent's sums on the way back, so no rounding accumulates across siblings).
* **Stopping the descent.** Compute and memory only grow down the walk, so once neither an
  accelerator stage (compute / ``r_max`` above the bound, memory above the cap, or an op that
  cannot run there) nor a CPU stage can stay within the bound, nothing below can either.
* **Fused min-max passes.** The cost of a pair is computed once and relaxes every ``(a, b)`` in
  one pass; the ``dp[a-1, b, I]``/``dp[a, b-1, I]`` terms are a prefix minimum afterwards.
* **Exactness.** Everything is float64; the cut is an exact sum of float64 edge costs along one
  path (relative rounding at most ``depth * 2**-52``, far below the ``1e-7`` tolerance of the
  bound). Ties between equal values are broken by the smallest sub-ideal id, the same on every
  run.

The lattice (ideals and covering edges) and the feasibility pass are in
:mod:`workbench.solvers.pipeline_dp_lattice`.

Examples
--------
>>> from workbench.solvers.pipeline_dp_lattice import lattice
>>> from workbench.solvers.pipeline_dp_contract import DPProblem
>>> lat = lattice([[], [0]], [[1], []])               # a two-node chain: ideals 0, {0}, {0, 1}
>>> p = DPProblem(graph=None, members=[[0], [1]], acc=np.array([2.0, 3.0]),
...               cpu=np.array([np.inf, np.inf]), mem=np.zeros(2), pred=[[], [0]],
...               succ=[[1], []], hyper=[((0, 1), 0.5)], key=[0, 1], out_cost=np.zeros(2),
...               owner=np.array([0, 1]), hyper_src=[0])
>>> value, stages, _stats = solve_lattice(p, 2, 0, np.inf, lat)
>>> value, stages                      # one node per accelerator, each pays the 0.5 transfer
(3.5, [([0], 'acc', 1), ([1], 'acc', 1)])
"""

from __future__ import annotations

import math
import time

import numpy as np
from numba import njit

from ..errors import SolverError, TimeLimitError
from .pipeline_dp_lattice import (  # noqa: F401 - re-exported (the kernel's former API)
    Lattice,
    _all_layers,
    feasible_ideals,
    ideal_sums,
    lattice,
    layer_ranges,
    linear_lattice,
)

__all__ = ["backtrack_moves", "backward_reach", "forward", "hyper_csr", "interleave_mode",
           "solve_lattice"]


def hyper_csr(n: int, hyper: list, hsrc: list):
    """Per supernode, the hyperedges holding it (CSR), with sizes, costs and producers."""
    H = len(hyper)
    hsize = np.array([len(h) for h, _c in hyper], dtype=np.int32)
    hcost = np.array([c for _h, c in hyper], dtype=np.float64)
    src = np.array(hsrc, dtype=np.int32) if H else np.zeros(0, dtype=np.int32)
    pairs = sorted((v, e) for e, (h, _c) in enumerate(hyper) for v in h)
    nptr = np.zeros(n + 1, dtype=np.int64)
    for v, _e in pairs:
        nptr[v + 1] += 1
    nptr = np.cumsum(nptr)
    nh = np.array([e for _v, e in pairs], dtype=np.int32)
    return nptr, nh, hsize, hcost, src


@njit(cache=True)
def _stage(comp, cin, cout, mem, r, mode, replicate, sync_inv):
    """Load of one accelerator stage on ``r`` replicas. ``mode``: 0 compute + communication,
    1 max(compute, communication) (App. C.1), 2 max(in-transfer, compute, out-transfer)
    (full duplex, App. C.1)."""
    if mode == 0:
        base = comp + cin + cout
    elif mode == 1:
        base = max(comp, cin + cout)
    else:
        base = max(comp, max(cin, cout))
    if r == 1 and not replicate:
        return base
    syn = (r - 1) * mem * sync_inv / r
    if mode > 0:
        return max(base / r, syn)
    return base / r + syn


@njit(cache=True)
def _apply(v, sign, nptr, nh, hsize, hcost, hsrc, cnt, srcin, cio):
    """Add (sign=1) or remove (sign=-1) supernode ``v`` from the stage; ``cio`` holds the in- and
    out-communication of the stage and is updated in place."""
    for q in range(nptr[v], nptr[v + 1]):
        h = nh[q]
        c = cnt[h]
        if 0 < c < hsize[h]:
            cio[srcin[h]] -= hcost[h]
        c += sign
        cnt[h] = c
        if hsrc[h] == v:
            srcin[h] = 1 if sign > 0 else 0
        if 0 < c < hsize[h]:
            cio[srcin[h]] += hcost[h]


@njit(cache=True)
def _convex(v, depth, bdesc, banc, st_D, st_A, st_S, tD, tA, tS):
    """Add ``v`` to the stage of frame ``depth`` (bitsets of the stage and of the backward
    descendants / ancestors of its parts) into ``tD, tA, tS``; True when the stage's backward
    part is contiguous (no part outside it both below and above it)."""
    ok = True
    vw = v // 64
    vb = np.uint64(1) << np.uint64(v % 64)
    for w in range(bdesc.shape[1]):
        d = st_D[depth, w] | bdesc[v, w]
        a = st_A[depth, w] | banc[v, w]
        x = st_S[depth, w]
        if w == vw:
            x = x | vb
        tD[w] = d
        tA[w] = a
        tS[w] = x
        if (d & a) & ~x != np.uint64(0):
            ok = False
    return ok


@njit(cache=True)
def forward(dptr, dv, dj, nptr, nh, hsize, hcost, hsrc, acc, cpu, mem, uacc, ucpu, K, L,
            cap, tolB, reps_max, mode, replicate, sync_inv, bdesc, banc, lo, hi, dpv, dmin,
            I0, I1):
    """Fill ``dpv[I, a, b]`` (``inf`` above ``tolB``) for the ideals ``I0 <= I < I1`` (their
    sub-ideals done before); returns the number of (ideal, sub-ideal) pairs visited. Only the
    states ``lo[b, I] <= a <= hi[b, I]`` are filled (the others stay ``inf``); ``dmin[I]`` is
    the least of them (sub-ideals with ``dmin = inf`` are walked through, not evaluated).
    ``bdesc``/``banc`` (one bitset row per supernode, zero columns to switch it off): stages
    whose backward part is not contiguous are not evaluated (``backward_contiguous``)."""
    N = len(dptr) - 1
    n = len(acc)
    H = len(hsize)
    cnt = np.zeros(H, np.int64)
    srcin = np.zeros(H, np.int64)
    stamp = np.full(N, -1, np.int64)
    best = np.empty((K + 1, L + 1))
    cio = np.zeros(2)
    st_node = np.empty(n + 2, np.int64)
    st_ptr = np.empty(n + 2, np.int64)
    st_v = np.empty(n + 2, np.int64)
    st_val = np.empty((n + 2, 7))
    W = bdesc.shape[1]
    st_D = np.zeros((n + 2, W), np.uint64)
    st_A = np.zeros((n + 2, W), np.uint64)
    st_S = np.zeros((n + 2, W), np.uint64)
    tD = np.zeros(W, np.uint64)
    tA = np.zeros(W, np.uint64)
    tS = np.zeros(W, np.uint64)
    pairs = 0
    for I in range(I0, I1):
        if dptr[I] == dptr[I + 1]:
            continue
        live = False
        for b in range(L + 1):
            if lo[b, I] <= hi[b, I]:
                live = True
        if not live:
            continue
        best[:, :] = np.inf
        depth = 0
        st_node[0] = I
        st_ptr[0] = dptr[I]
        st_val[0, :] = 0.0
        comp = cp = mm = 0.0
        ua = uc = 0.0
        cio[0] = 0.0
        cio[1] = 0.0
        while depth >= 0:
            node = st_node[depth]
            p = st_ptr[depth]
            if p == dptr[node + 1]:
                if depth > 0:
                    _apply(st_v[depth], -1, nptr, nh, hsize, hcost, hsrc, cnt, srcin, cio)
                    comp, cp, mm, ua, uc = (st_val[depth - 1, 0], st_val[depth - 1, 1],
                                            st_val[depth - 1, 2], st_val[depth - 1, 3],
                                            st_val[depth - 1, 4])
                    cio[0] = st_val[depth - 1, 5]
                    cio[1] = st_val[depth - 1, 6]
                depth -= 1
                continue
            st_ptr[depth] = p + 1
            j = dj[p]
            if stamp[j] == I:
                continue
            stamp[j] = I
            v = dv[p]
            _apply(v, 1, nptr, nh, hsize, hcost, hsrc, cnt, srcin, cio)
            comp += acc[v]
            cp += cpu[v]
            mm += mem[v]
            ua += uacc[v]
            uc += ucpu[v]
            pairs += 1
            acc_alive = K > 0 and ua < 0.5 and mm <= cap and comp <= tolB * reps_max
            cpu_alive = L > 0 and uc < 0.5 and cp <= tolB
            if not acc_alive and not cpu_alive:
                _apply(v, -1, nptr, nh, hsize, hcost, hsrc, cnt, srcin, cio)
                comp, cp, mm, ua, uc = (st_val[depth, 0], st_val[depth, 1], st_val[depth, 2],
                                        st_val[depth, 3], st_val[depth, 4])
                cio[0] = st_val[depth, 5]
                cio[1] = st_val[depth, 6]
                continue
            if dmin[j] > tolB:
                acc_alive = cpu_alive = False
            if W > 0 and not _convex(v, depth, bdesc, banc, st_D, st_A, st_S, tD, tA, tS):
                acc_alive = cpu_alive = False
            if acc_alive:
                for r in range(1, reps_max + 1):
                    c = _stage(comp, cio[0], cio[1], mm, r, mode, replicate, sync_inv)
                    if c > tolB:
                        continue
                    for b in range(L + 1):
                        for a in range(max(r, lo[b, I]), min(K, hi[b, I]) + 1):
                            x = dpv[j, a - r, b]
                            x = max(x, c)
                            best[a, b] = min(best[a, b], x)
            if cpu_alive:
                for b in range(1, L + 1):
                    for a in range(max(0, lo[b, I]), min(K, hi[b, I]) + 1):
                        x = dpv[j, a, b - 1]
                        x = max(x, cp)
                        best[a, b] = min(best[a, b], x)
            if W > 0:
                _convex(v, depth, bdesc, banc, st_D, st_A, st_S, tD, tA, tS)
                st_D[depth + 1, :] = tD
                st_A[depth + 1, :] = tA
                st_S[depth + 1, :] = tS
            depth += 1
            st_node[depth] = j
            st_ptr[depth] = dptr[j]
            st_v[depth] = v
            st_val[depth, 0] = comp
            st_val[depth, 1] = cp
            st_val[depth, 2] = mm
            st_val[depth, 3] = ua
            st_val[depth, 4] = uc
            st_val[depth, 5] = cio[0]
            st_val[depth, 6] = cio[1]
        m = np.inf
        for a in range(K + 1):
            for b in range(L + 1):
                if a < lo[b, I] or a > hi[b, I]:
                    best[a, b] = np.inf
                    continue
                x = best[a, b]
                if a > 0 and best[a - 1, b] < x:
                    x = best[a - 1, b]
                if b > 0 and best[a, b - 1] < x:
                    x = best[a, b - 1]
                best[a, b] = x
                dpv[I, a, b] = x
                m = min(m, x)
        dmin[I] = m
    return pairs


@njit(cache=True)
def backtrack_moves(I, a, b, dptr, dv, dj, nptr, nh, hsize, hcost, hsrc, acc, cpu, mem, uacc,
                    ucpu, K, L, cap, tolB, reps_max, mode, replicate, sync_inv, bdesc, banc,
                    dpv):
    """Best move out of state ``dpv[I, a, b]``: ``vals[0]``/``js[0]`` for a CPU stage and
    ``vals[r]``/``js[r]`` for an accelerator stage on ``r`` replicas (value, sub-ideal; the
    smallest sub-ideal id among equal values; ``inf``/-1 where there is none).

    The walk repeats :func:`forward`'s stack handling on purpose: moving the push, the restore
    and the stack allocation into shared ``@njit`` helpers (even with ``inline="always"``)
    made the DP 45 % slower (branchy(12): 1.61-1.73 -> 2.45-2.53 s CPU, three runs each of
    ``bench_pipeline_dp.py --large 12``, 23 Nov 2026)."""
    N = len(dptr) - 1
    n = len(acc)
    H = len(hsize)
    cnt = np.zeros(H, np.int64)
    srcin = np.zeros(H, np.int64)
    stamp = np.zeros(N, np.uint8)
    vals = np.full(reps_max + 1, np.inf)
    js = np.full(reps_max + 1, -1, np.int64)
    cio = np.zeros(2)
    st_node = np.empty(n + 2, np.int64)
    st_ptr = np.empty(n + 2, np.int64)
    st_v = np.empty(n + 2, np.int64)
    st_val = np.zeros((n + 2, 7))
    W = bdesc.shape[1]
    st_D = np.zeros((n + 2, W), np.uint64)
    st_A = np.zeros((n + 2, W), np.uint64)
    st_S = np.zeros((n + 2, W), np.uint64)
    tD = np.zeros(W, np.uint64)
    tA = np.zeros(W, np.uint64)
    tS = np.zeros(W, np.uint64)
    depth = 0
    st_node[0] = I
    st_ptr[0] = dptr[I]
    comp = cp = mm = ua = uc = 0.0
    while depth >= 0:
        node = st_node[depth]
        p = st_ptr[depth]
        if p == dptr[node + 1]:
            if depth > 0:
                _apply(st_v[depth], -1, nptr, nh, hsize, hcost, hsrc, cnt, srcin, cio)
                comp, cp, mm, ua, uc = (st_val[depth - 1, 0], st_val[depth - 1, 1],
                                        st_val[depth - 1, 2], st_val[depth - 1, 3],
                                        st_val[depth - 1, 4])
                cio[0] = st_val[depth - 1, 5]
                cio[1] = st_val[depth - 1, 6]
            depth -= 1
            continue
        st_ptr[depth] = p + 1
        j = dj[p]
        if stamp[j]:
            continue
        stamp[j] = 1
        v = dv[p]
        _apply(v, 1, nptr, nh, hsize, hcost, hsrc, cnt, srcin, cio)
        comp += acc[v]
        cp += cpu[v]
        mm += mem[v]
        ua += uacc[v]
        uc += ucpu[v]
        acc_alive = K > 0 and ua < 0.5 and mm <= cap and comp <= tolB * reps_max
        cpu_alive = L > 0 and uc < 0.5 and cp <= tolB
        if not acc_alive and not cpu_alive:
            _apply(v, -1, nptr, nh, hsize, hcost, hsrc, cnt, srcin, cio)
            comp, cp, mm, ua, uc = (st_val[depth, 0], st_val[depth, 1], st_val[depth, 2],
                                    st_val[depth, 3], st_val[depth, 4])
            cio[0] = st_val[depth, 5]
            cio[1] = st_val[depth, 6]
            continue
        if W > 0 and not _convex(v, depth, bdesc, banc, st_D, st_A, st_S, tD, tA, tS):
            acc_alive = cpu_alive = False
        if acc_alive:
            for r in range(1, min(reps_max, a) + 1):
                c = _stage(comp, cio[0], cio[1], mm, r, mode, replicate, sync_inv)
                if c > tolB:
                    continue
                x = max(dpv[j, a - r, b], c)
                if x < vals[r] or (x == vals[r] and j < js[r]):
                    vals[r] = x
                    js[r] = j
        if cpu_alive and b > 0:
            x = max(dpv[j, a, b - 1], cp)
            if x < vals[0] or (x == vals[0] and j < js[0]):
                vals[0] = x
                js[0] = j
        if W > 0:
            _convex(v, depth, bdesc, banc, st_D, st_A, st_S, tD, tA, tS)
            st_D[depth + 1, :] = tD
            st_A[depth + 1, :] = tA
            st_S[depth + 1, :] = tS
        depth += 1
        st_node[depth] = j
        st_ptr[depth] = dptr[j]
        st_v[depth] = v
        st_val[depth, 0] = comp
        st_val[depth, 1] = cp
        st_val[depth, 2] = mm
        st_val[depth, 3] = ua
        st_val[depth, 4] = uc
        st_val[depth, 5] = cio[0]
        st_val[depth, 6] = cio[1]
    return vals, js


def backward_reach(p) -> tuple[np.ndarray, np.ndarray]:
    """Bitsets (uint64 words, one row per supernode) of the supernodes whose backward ops are
    reachable from / reach the backward ops of each supernode through backward edges (its own
    row bit only when a cycle passes through it). A stage ``S`` has a contiguous backward part
    exactly when no supernode outside ``S`` is both a descendant and an ancestor of ``S``."""
    gc = p.graph.c
    n = p.n
    bwd = np.isin(gc.op_kind, [1, 2])
    own = p.owner
    succ: list = [set() for _ in range(n)]
    m = bwd[gc.src] & bwd[gc.dst] & (own[gc.src] != own[gc.dst])
    for a, b in zip(own[gc.src[m]].tolist(), own[gc.dst[m]].tolist()):
        succ[a].add(b)
    pred: list = [set() for _ in range(n)]
    for a in range(n):
        for b in succ[a]:
            pred[b].add(a)
    W = max(1, (n + 63) // 64)

    def closure(adj) -> np.ndarray:
        out = np.zeros((n, W), np.uint64)
        for s in range(n):
            seen, stack = set(), list(adj[s])
            while stack:
                x = stack.pop()
                if x not in seen:
                    seen.add(x)
                    stack.extend(adj[x])
            for x in seen:
                out[s, x // 64] |= np.uint64(1) << np.uint64(x % 64)
        return out

    return closure(succ), closure(pred)


_MODES = {False: 0, True: 1, "half_duplex": 1, "full_duplex": 2}


def interleave_mode(interleave) -> int:
    """0 (sum), 1 (max of compute and communication) or 2 (full duplex) for ``interleave``.

    >>> interleave_mode(False), interleave_mode(True), interleave_mode("full_duplex")
    (0, 1, 2)
    """
    try:
        return _MODES[interleave]
    except (KeyError, TypeError):
        raise SolverError(f"interleave must be False, True (half duplex) or 'full_duplex', "
                          f"got {interleave!r}") from None


def solve_lattice(p, k: int, l: int, cap: float, lat: Lattice, *, upper_bound: float = math.inf,
                  interleave=False, replicate: bool = False,
                  allreduce_bandwidth: float = math.inf, time_limit: float | None = None,
                  progress=None, feasibility: bool = True, backward_contiguous: bool = False,
                  chunk: int = 4096):
    """Run the DP of the module text over ``lat`` for problem ``p`` (a
    :class:`~workbench.solvers.pipeline_dp.DPProblem`) with ``k`` accelerators of memory
    ``cap`` and ``l`` CPUs. Returns ``(value, stages, stats)``; ``stages`` lists
    ``(supernodes, "acc" | "cpu", replicas)`` in pipeline order (empty when infeasible).

    ``upper_bound`` must be at least the optimum (e.g. the DPL value): values above it are
    dropped and the sub-ideal descent stops where compute alone exceeds it. With
    ``feasibility`` the pass of :func:`feasible_ideals` at that bound first restricts every
    ideal to the device counts that can lie on a split within it (exact: only states that no
    split within the bound passes through are left out). ``backward_contiguous`` admits only
    stages whose backward ops form a contiguous set too (Section 5.3's rule for training
    graphs; :func:`backward_reach`).
    """
    t0 = time.perf_counter()
    ns = p.n
    N = lat.n
    mode = interleave_mode(interleave)
    hsrc = getattr(p, "hyper_src", None) or [h[0] for h, _c in p.hyper]
    nptr, nh, hsize, hcost, src = hyper_csr(ns, p.hyper, hsrc)
    acc = np.where(np.isfinite(p.acc), p.acc, 0.0).astype(np.float64)
    cpu = np.where(np.isfinite(p.cpu), p.cpu, 0.0).astype(np.float64)
    uacc = (~np.isfinite(p.acc)).astype(np.float64)
    ucpu = (~np.isfinite(p.cpu)).astype(np.float64)
    mem = np.asarray(p.mem, dtype=np.float64)
    B = float(upper_bound)
    tolB = B + 1e-7 * (1.0 + abs(B)) if math.isfinite(B) else math.inf
    capt = cap * (1 + 1e-12) + 1e-9 if math.isfinite(cap) else math.inf
    reps_max = max(1, k) if replicate else 1
    sync_inv = 1.0 / allreduce_bandwidth if math.isfinite(allreduce_bandwidth) else 0.0
    dpv = np.full((N, k + 1, l + 1), np.inf)  # one ideal's states share a cache line
    empty = 0
    dpv[empty, :, :] = 0.0
    dmin = np.full(N, np.inf)
    dmin[empty] = 0.0
    if feasibility:
        lo, hi = feasible_ideals(lat, p.acc, p.cpu, k, l, tolB, ranges=True)
    else:
        lo, hi = _all_layers(N, k, l)
    t_feas = time.perf_counter() - t0
    bdesc, banc = backward_reach(p) if backward_contiguous else (
        np.zeros((ns, 0), np.uint64), np.zeros((ns, 0), np.uint64))
    args = (lat.dptr, lat.dv, lat.dj, nptr, nh, hsize, hcost, src, acc, cpu, mem, uacc, ucpu,
            k, l, capt, tolB, reps_max, mode, bool(replicate), sync_inv, bdesc, banc)
    pairs = 0
    start = 0
    # with a time limit the chunks adapt to ~50 ms each (the compiled pass cannot be stopped
    # inside a chunk, and 4,096 ideals of a dense graph can take seconds)
    size = chunk if time_limit is None else min(chunk, 64)
    while start < N:
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            raise TimeLimitError(f"the DP ran out of its time limit ({time_limit} s) after "
                              f"{start:,} of {N:,} ideals")
        end = min(N, start + size)
        t1 = time.perf_counter()
        pairs += forward(*args, lo, hi, dpv, dmin, start, end)
        if time_limit is not None:
            took = time.perf_counter() - t1
            size = int(min(chunk * 4, max(16, size * min(4.0, 0.05 / max(took, 1e-5)))))
        start = end
        if progress is not None:
            progress({"ideals_done": end, "ideals": N})
    full = N - 1
    value = float(dpv[full, k, l])
    stats = {"ideals": N, "ideal_pairs": int(pairs), "supernodes": ns, "upper_bound": B,
             "feasible_ideals": int((lo <= hi).any(axis=0).sum()), "feasibility_s": t_feas,
             "dp_s": time.perf_counter() - t0}
    if not math.isfinite(value):
        return value, [], stats
    stages = []
    a, b, cur = k, l, full
    while cur != empty:
        target = dpv[cur, a, b]
        vals, js = backtrack_moves(cur, a, b, *args, dpv)
        # tie-break as the authors' code: leave a CPU unused, then a CPU stage, then leave an
        # accelerator unused, then an accelerator stage (first option within tolerance wins)
        tol = target + 1e-6 * (1.0 + abs(target))
        opts = []
        if b > 0:
            opts.append((dpv[cur, a, b - 1], 2, cur, 1))
            if js[0] >= 0:
                opts.append((float(vals[0]), 4, int(js[0]), 1))
        if a > 0:
            opts.append((dpv[cur, a - 1, b], 1, cur, 1))
            for r in range(1, min(a, reps_max) + 1):
                if js[r] >= 0:
                    opts.append((float(vals[r]), 3, int(js[r]), r))
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
        diff = lat.ideals[cur] & ~lat.ideals[j]
        stages.append(([v for v in range(ns) if (diff >> v) & 1], "acc" if t == 3 else "cpu", r))
        if t == 3:
            a -= r
        else:
            b -= 1
        cur = j
    stages.reverse()
    stats["dp_s"] = time.perf_counter() - t0
    return value, stages, stats
