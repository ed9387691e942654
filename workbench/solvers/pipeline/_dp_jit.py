"""The compiled (numba) kernels of the DP over ideals: :func:`forward` and
:func:`backtrack_moves` as described in :mod:`workbench.solvers.pipeline.kernel`.

Imported only (a private module: :mod:`workbench.solvers` does not import it with the
solvers) when a lattice is large enough for compilation to pay (importing numba costs
about 0.1 s and loading these kernels from numba's on-disk cache about 0.17 s per process on
the development machine); smaller lattices run the same DP in pure Python
(:mod:`workbench.solvers.pipeline.pykernel`, identical results). ``cache=True``: the first
call in a fresh environment compiles for seconds to a minute, later processes load the cache.

Examples
--------
>>> from workbench.solvers.pipeline._dp_jit import _stage
>>> _stage(2.0, 0.5, 0.25, 0.0, 1, 0, False, 0.0)      # compute + in + out on one replica
2.75
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import pykernel as _py

__all__ = ["backtrack_moves", "forward"]


# the stage load and the cut update are the pure-Python kernel's own functions, compiled.
# numba's cache is keyed on this file's text, not on pykernel.py's: change PYKERNEL_EDITION
# whenever stage_load or apply_move change there, or the cached kernels keep the old ones
# (the python/compiled agreement tests of tests/solvers/tarnawski/test_pipeline_dp_speed.py catch it).
PYKERNEL_EDITION = 3  # 2: replicated stages under interleaving (issue 29); 3: bnd, cfwd
_stage = njit(cache=True)(_py.stage_load)
_apply = njit(cache=True)(_py.apply_move)


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
            cap, tolB, reps_max, mode, replicate, sync_inv, bdesc, banc, bnd, cfwd, lo, hi, dpv,
            dmin, I0, I1):
    """Fill ``dpv[I, a, b]`` (``inf`` above ``tolB``) for the ideals ``I0 <= I < I1`` (their
    sub-ideals done before); returns the number of (ideal, sub-ideal) pairs visited. Only the
    states ``lo[b, I] <= a <= hi[b, I]`` are filled (the others stay ``inf``); ``dmin[I]`` is
    the least of them (sub-ideals with ``dmin = inf`` are walked through, not evaluated).
    ``bdesc``/``banc`` (one bitset row per supernode, zero columns to switch it off): stages
    whose backward part is not contiguous are not evaluated (``backward_contiguous``).
    ``bnd`` (per ideal): the forwarded transfers crossing the ideal's boundary, added to the
    stage's in- (``bnd[J]``) and out-communication (``bnd[I]``), and with weight ``cfwd`` to a
    CPU stage; zeros (and no change to any sum) outside forwarded mode."""
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
            pairs += 1
            # a dead stage is decided on compute, memory and support alone: the cut is
            # updated only for the stages that go on (the running sums are the frame's)
            acc_alive = (K > 0 and ua + uacc[v] < 0.5 and mm + mem[v] <= cap
                         and comp + acc[v] <= tolB * reps_max)
            cpu_alive = L > 0 and uc + ucpu[v] < 0.5 and cp + cpu[v] <= tolB
            if not acc_alive and not cpu_alive:
                continue
            _apply(v, 1, nptr, nh, hsize, hcost, hsrc, cnt, srcin, cio)
            comp += acc[v]
            cp += cpu[v]
            mm += mem[v]
            ua += uacc[v]
            uc += ucpu[v]
            if dmin[j] > tolB:
                acc_alive = cpu_alive = False
            if W > 0 and not _convex(v, depth, bdesc, banc, st_D, st_A, st_S, tD, tA, tS):
                acc_alive = cpu_alive = False
            if acc_alive:
                for r in range(1, reps_max + 1):
                    c = _stage(comp, cio[0] + bnd[j], cio[1] + bnd[I], mm, r, mode,
                               replicate, sync_inv)
                    if c > tolB:
                        continue
                    for b in range(L + 1):
                        for a in range(max(r, lo[b, I]), min(K, hi[b, I]) + 1):
                            x = dpv[j, a - r, b]
                            x = max(x, c)
                            best[a, b] = min(best[a, b], x)
            if cpu_alive:
                cpl = cp + cfwd * (bnd[j] + bnd[I])
                for b in range(1, L + 1):
                    for a in range(max(0, lo[b, I]), min(K, hi[b, I]) + 1):
                        x = dpv[j, a, b - 1]
                        x = max(x, cpl)
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
                    bnd, cfwd, dpv):
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
        acc_alive = (K > 0 and ua + uacc[v] < 0.5 and mm + mem[v] <= cap
                     and comp + acc[v] <= tolB * reps_max)
        cpu_alive = L > 0 and uc + ucpu[v] < 0.5 and cp + cpu[v] <= tolB
        if not acc_alive and not cpu_alive:
            continue
        _apply(v, 1, nptr, nh, hsize, hcost, hsrc, cnt, srcin, cio)
        comp += acc[v]
        cp += cpu[v]
        mm += mem[v]
        ua += uacc[v]
        uc += ucpu[v]
        if W > 0 and not _convex(v, depth, bdesc, banc, st_D, st_A, st_S, tD, tA, tS):
            acc_alive = cpu_alive = False
        if acc_alive:
            for r in range(1, min(reps_max, a) + 1):
                c = _stage(comp, cio[0] + bnd[j], cio[1] + bnd[I], mm, r, mode, replicate,
                           sync_inv)
                if c > tolB:
                    continue
                x = max(dpv[j, a - r, b], c)
                if x < vals[r] or (x == vals[r] and j < js[r]):
                    vals[r] = x
                    js[r] = j
        if cpu_alive and b > 0:
            x = max(dpv[j, a, b - 1], cp + cfwd * (bnd[j] + bnd[I]))
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
