"""The DP over ideals in pure Python, for lattices too small for numba to pay.

Same walk, same pruning, same float64 operations in the same order as the compiled kernels of
:mod:`workbench.solvers.pipeline._dp_jit` (sub-ideals visited down the covering edges, the
stage's compute, memory and cut updated per pair and restored on the way back; see
:mod:`workbench.solvers.pipeline.kernel`), so both give bit-identical values, splits and
pair counts (``tests/solvers/tarnawski/test_pipeline_dp_speed.py`` checks this on many graphs). It runs on Python
lists and ints (bitsets of the backward-contiguity check as Python ints), about 1-3 us per
(ideal, sub-ideal) pair, and needs neither numba's import (about 0.1 s) nor its cache load
(about 0.17 s per process): a 30-ideal lattice is solved in about a millisecond.

Examples
--------
>>> import numpy as np
>>> from workbench.solvers.pipeline.ideals import lattice
>>> lat = lattice([[], [0]], [[1], []])                 # a two-node chain: ideals 0, {0}, {0, 1}
>>> k = PyKernel(lat, nptr=np.array([0, 1, 2]), nh=np.array([0, 0]), hsize=np.array([2]),
...              hcost=np.array([0.5]), hsrc=np.array([0]), acc=np.array([2.0, 3.0]),
...              cpu=np.zeros(2), mem=np.zeros(2), uacc=np.zeros(2), ucpu=np.ones(2), K=2, L=0,
...              cap=np.inf, tolB=np.inf, reps_max=1, mode=0, replicate=False, sync_inv=0.0,
...              bdesc=np.zeros((2, 0), np.uint64), banc=np.zeros((2, 0), np.uint64),
...              bnd=np.zeros(3), cfwd=0.0,
...              lo=np.zeros((1, 3), np.int64), hi=np.full((1, 3), 2, np.int64))
>>> k.forward(0, 3)                                     # pairs visited
3
>>> k.value(2, 2, 0), k.value(2, 1, 0)                  # both nodes on 2 / on 1 accelerator
(3.5, 5.0)
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["PyKernel", "greedy_bound"]

INF = math.inf


def _bitsets(rows: np.ndarray) -> list | None:
    """uint64 word rows as Python ints (None when there are no words: the check is off)."""
    if rows.shape[1] == 0:
        return None
    return [sum(int(w) << (64 * i) for i, w in enumerate(row.tolist())) for row in rows]


def stage_load(comp, cin, cout, mem, r, mode, replicate, sync_inv):
    """Load of one accelerator stage on ``r`` replicas. ``mode``: 0 compute + communication,
    1 max(compute, communication) (App. C.1), 2 max(in-transfer, compute, out-transfer)
    (full duplex, App. C.1). Compiled as is for the numba kernels.

    A replica does ``1 / r`` of the stage's compute and transfers, and the ring all-reduce of
    the stage's weights, ``syn = (r - 1) * mem / (r * B)`` (App. C.2), travels the same links
    as its activations, as the judge (:func:`workbench.judge.pipelined.pipelined_time` on the replica
    graph) charges it: added to the communication under ``mode`` 1, half on each channel under
    ``mode`` 2 (the ring sends and receives as much; issue 29).

    >>> stage_load(8.0, 1.0, 1.0, 4e6, 2, 1, True, 1 / 2.5e5)   # max(8/2, 2/2 + 8)
    9.0
    >>> stage_load(8.0, 1.0, 1.0, 4e6, 2, 2, True, 1 / 2.5e5)   # max(8/2, 1/2 + 4, 1/2 + 4)
    4.5
    """
    if r == 1 and not replicate:
        if mode == 0:
            return comp + cin + cout
        if mode == 1:
            return max(comp, cin + cout)
        return max(comp, max(cin, cout))
    syn = (r - 1) * mem * sync_inv / r
    if mode == 0:
        return (comp + cin + cout) / r + syn
    if mode == 1:
        return max(comp / r, (cin + cout) / r + syn)
    return max(comp / r, max(cin / r, cout / r) + 0.5 * syn)


def apply_move(v, sign, nptr, nh, hsize, hcost, hsrc, cnt, srcin, cio):
    """Add (sign=1) or remove (sign=-1) supernode ``v`` from the stage; ``cio`` holds the in- and
    out-communication of the stage and is updated in place (lists here; compiled, the same
    function on arrays)."""
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


class PyKernel:
    """The DP's state (``dp[I][a * (L + 1) + b]``, lists of floats) and its two passes over one
    lattice; arguments as the compiled kernels take them (numpy arrays, converted once;
    ``lo``/``hi`` the feasible accelerator counts per CPU count and ideal)."""

    def __init__(self, lat, *, nptr, nh, hsize, hcost, hsrc, acc, cpu, mem, uacc, ucpu, K, L,
                 cap, tolB, reps_max, mode, replicate, sync_inv, bdesc, banc, bnd, cfwd, lo,
                 hi):
        self.dptr, self.dv, self.dj = lat.dptr.tolist(), lat.dv.tolist(), lat.dj.tolist()
        self.nptr, self.nh = nptr.tolist(), nh.tolist()
        self.hsize, self.hcost, self.hsrc = hsize.tolist(), hcost.tolist(), hsrc.tolist()
        self.acc, self.cpu, self.mem = acc.tolist(), cpu.tolist(), mem.tolist()
        self.uacc, self.ucpu = uacc.tolist(), ucpu.tolist()
        self.K, self.L, self.cap, self.tolB = int(K), int(L), float(cap), float(tolB)
        self.reps_max, self.mode, self.replicate = int(reps_max), int(mode), bool(replicate)
        self.sync_inv = float(sync_inv)
        self.bdesc, self.banc = _bitsets(bdesc), _bitsets(banc)
        self.lo, self.hi = lo.tolist(), hi.tolist()
        self.bnd, self.cfwd = bnd.tolist(), float(cfwd)
        N = len(self.dptr) - 1
        self.L1 = self.L + 1
        self.dp = [None] * N
        self.dp[0] = [0.0] * ((self.K + 1) * self.L1)
        self.dmin = [INF] * N
        self.dmin[0] = 0.0
        H = len(self.hsize)
        self.cnt = [0] * H
        self.srcin = [0] * H
        self.cio = [0.0, 0.0]
        self._none = [INF] * ((self.K + 1) * self.L1)
        # per supernode its hyperedges as (id, size, cost, produced here): the cut update of
        # apply_move without the index lookups
        self.rows = [tuple((h, self.hsize[h], self.hcost[h], self.hsrc[h] == v)
                           for h in self.nh[self.nptr[v]:self.nptr[v + 1]])
                     for v in range(len(self.nptr) - 1)]
        self.stamp = [-1] * N
        self.walks = 0

    def value(self, I: int, a: int, b: int) -> float:
        """``dp[I, a, b]`` (``inf`` for states not filled)."""
        row = self.dp[I]
        return INF if row is None else row[a * self.L1 + b]

    def _moves(self, I: int, lo, hi):
        """Per replica count ``r`` the (state, source state) index pairs an accelerator stage
        relaxes at ideal ``I``, and those of a CPU stage (``lo[b][I] <= a <= hi[b][I]``)."""
        K, L1 = self.K, self.L1
        acc = [None] + [[(a * L1 + b, (a - r) * L1 + b) for b in range(L1)
                         for a in range(max(r, lo[b][I]), min(K, hi[b][I]) + 1)]
                        for r in range(1, self.reps_max + 1)]
        cpu = [(a * L1 + b, a * L1 + b - 1) for b in range(1, L1)
               for a in range(max(0, lo[b][I]), min(K, hi[b][I]) + 1)]
        return acc, cpu

    def _descend(self, I, visit):
        """Walk the sub-ideals ``J`` of ``I`` down the covering edges, each once, calling
        ``visit(j, comp, cp, mm, cin, cout, acc_alive, cpu_alive)`` for each stage ``I \\ J``
        that some device can still hold (the compiled walk's order and float operations;
        ``cin``/``cout`` with the forwarded boundaries ``bnd[J]``/``bnd[I]``, ``cp`` with
        ``cfwd`` times both); returns the number of pairs visited."""
        dptr, dv, dj = self.dptr, self.dv, self.dj
        acc, cpu, mem, uacc, ucpu = self.acc, self.cpu, self.mem, self.uacc, self.ucpu
        K, L, cap, tolB, rmax = self.K, self.L, self.cap, self.tolB, self.reps_max
        bdesc, banc = self.bdesc, self.banc
        bnd, cfwd = self.bnd, self.cfwd
        bI = bnd[I]
        rows, cnt, srcin, cio, stamp = self.rows, self.cnt, self.srcin, self.cio, self.stamp
        self.walks += 1
        walk = self.walks

        def add(v):  # apply_move(v, 1, ...): the same float operations
            for h, size, cost, own in rows[v]:
                c = cnt[h]
                if 0 < c < size:
                    cio[srcin[h]] -= cost
                c += 1
                cnt[h] = c
                if own:
                    srcin[h] = 1
                if c < size:
                    cio[srcin[h]] += cost

        def remove(v):  # apply_move(v, -1, ...)
            for h, size, cost, own in rows[v]:
                c = cnt[h]
                if c < size:
                    cio[srcin[h]] -= cost
                c -= 1
                cnt[h] = c
                if own:
                    srcin[h] = 0
                if c > 0:
                    cio[srcin[h]] += cost

        pairs = 0
        # frame: node, next edge, v added, saved (comp, cp, mm, ua, uc, cin, cout), D, A, S
        stack = [[I, dptr[I], -1, (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0), 0, 0, 0]]
        comp = cp = mm = ua = uc = 0.0
        cio[0] = cio[1] = 0.0
        while stack:
            fr = stack[-1]
            p = fr[1]
            if p == dptr[fr[0] + 1]:
                stack.pop()
                if stack:
                    remove(fr[2])
                    comp, cp, mm, ua, uc, cio[0], cio[1] = stack[-1][3]
                continue
            fr[1] = p + 1
            j = dj[p]
            if stamp[j] == walk:
                continue
            stamp[j] = walk
            v = dv[p]
            pairs += 1
            acc_alive = (K > 0 and ua + uacc[v] < 0.5 and mm + mem[v] <= cap
                         and comp + acc[v] <= tolB * rmax)
            cpu_alive = L > 0 and uc + ucpu[v] < 0.5 and cp + cpu[v] <= tolB
            if not acc_alive and not cpu_alive:  # (decided before the cut is updated)
                continue
            add(v)
            comp += acc[v]
            cp += cpu[v]
            mm += mem[v]
            ua += uacc[v]
            uc += ucpu[v]
            D = A = S = 0
            if bdesc is not None:
                D, A, S = fr[4] | bdesc[v], fr[5] | banc[v], fr[6] | (1 << v)
                if D & A & ~S:
                    acc_alive = cpu_alive = False
            bj = bnd[j]
            visit(j, comp, cp + cfwd * (bj + bI), mm, cio[0] + bj, cio[1] + bI, acc_alive,
                  cpu_alive)
            stack.append([j, dptr[j], v, (comp, cp, mm, ua, uc, cio[0], cio[1]), D, A, S])
        return pairs

    def forward(self, I0: int, I1: int) -> int:
        """Fill the states of ideals ``I0 <= I < I1`` (their sub-ideals done before), as the
        compiled ``forward``; returns the pairs visited."""
        lo, hi, dptr = self.lo, self.hi, self.dptr
        pairs = 0
        for I in range(I0, I1):
            if dptr[I] != dptr[I + 1] and any(lo[b][I] <= hi[b][I] for b in range(self.L1)):
                pairs += self._fill(I)
        return pairs

    def _fill(self, I: int) -> int:
        """Relax every state of ideal ``I`` over its sub-ideals; returns the pairs visited."""
        lo, hi, dp, dmin = self.lo, self.hi, self.dp, self.dmin
        K, L1, tolB, rmax = self.K, self.L1, self.tolB, self.reps_max
        mode, repl, sinv = self.mode, self.replicate, self.sync_inv
        none = self._none
        best = [INF] * ((K + 1) * L1)
        amoves, cmoves = self._moves(I, lo, hi)
        simple = mode == 0 and not repl and rmax == 1

        def visit(j, comp, cp, mm, cin, cout, acc_alive, cpu_alive):
            if dmin[j] > tolB:
                return
            src = dp[j] or none
            if acc_alive:
                for r in range(1, rmax + 1):
                    c = comp + cin + cout if simple else \
                        stage_load(comp, cin, cout, mm, r, mode, repl, sinv)
                    if c > tolB:
                        continue
                    for d, s in amoves[r]:
                        x = src[s]
                        if c > x:  # noqa: PLR1730 - a call to max/min costs 3x in this loop
                            x = c
                        if x < best[d]:  # noqa: PLR1730 - a call to max/min costs 3x in this loop
                            best[d] = x
            if cpu_alive:
                for d, s in cmoves:
                    x = src[s]
                    if cp > x:  # noqa: PLR1730 - a call to max/min costs 3x in this loop
                        x = cp
                    if x < best[d]:  # noqa: PLR1730 - a call to max/min costs 3x in this loop
                        best[d] = x

        pairs = self._descend(I, visit)
        m = INF
        for a in range(K + 1):
            for b in range(L1):
                i = a * L1 + b
                if a < lo[b][I] or a > hi[b][I]:
                    best[i] = INF
                    continue
                x = best[i]
                if a > 0 and best[i - L1] < x:
                    x = best[i - L1]
                if b > 0 and best[i - 1] < x:
                    x = best[i - 1]
                best[i] = x
                if x < m:  # noqa: PLR1730 - a call to max/min costs 3x in this loop
                    m = x
        dp[I] = best
        dmin[I] = m
        return pairs

    def backtrack_moves(self, I: int, a: int, b: int):
        """Best move out of state ``(I, a, b)`` as the compiled ``backtrack_moves``:
        ``(vals, js)``, index 0 a CPU stage, ``r`` an accelerator stage on ``r`` replicas."""
        L1, tolB, mode, repl, sinv = self.L1, self.tolB, self.mode, self.replicate, self.sync_inv
        dp, none = self.dp, self._none
        vals = [INF] * (self.reps_max + 1)
        js = [-1] * (self.reps_max + 1)

        def visit(j, comp, cp, mm, cin, cout, acc_alive, cpu_alive):
            src = dp[j] or none
            if acc_alive:
                for r in range(1, min(self.reps_max, a) + 1):
                    c = stage_load(comp, cin, cout, mm, r, mode, repl, sinv)
                    if c > tolB:
                        continue
                    x = max(src[(a - r) * L1 + b], c)
                    if x < vals[r] or (x == vals[r] and j < js[r]):
                        vals[r] = x
                        js[r] = j
            if cpu_alive and b > 0:
                x = max(src[a * L1 + b - 1], cp)
                if x < vals[0] or (x == vals[0] and j < js[0]):
                    vals[0] = x
                    js[0] = j

        self._descend(I, visit)
        return np.array(vals), np.array(js, dtype=np.int64)


def greedy_bound(order: list, a: dict, *, steps: int = 16, budget=None,
                 split: bool = False):
    """An upper bound on the DP's optimum from greedy splits of the topological ``order``.

    ``a``: the kernels' inputs (:func:`workbench.solvers.pipeline.kernel._arrays`). For a
    bound ``B`` the supernodes of ``order`` are packed into consecutive accelerator stages,
    each closed when the next supernode would take its load (the kernels' stage cost on one
    replica) above ``B`` or its memory above the cap; a packing into at most ``K`` stages is a
    contiguous split the DP also considers (prefixes of a topological order are ideals), so its
    largest load bounds the optimum. ``B`` is searched from the balanced load up, at most
    ``steps`` packings, until it is known within 1 %; ``inf`` when no packing fits (an op that
    cannot run on an accelerator, memory). Costs O(steps * (n + cut updates)), a fraction of
    the DP's pairs, and lets the DP prune as with the DPL bound.

    >>> import numpy as np
    >>> a = {"nptr": np.array([0, 1, 2, 3]), "nh": np.array([0, 0, 1]),
    ...      "hsize": np.array([2, 1]), "hcost": np.array([0.5, 0.0]), "hsrc": np.array([0, 2]),
    ...      "acc": np.array([2.0, 3.0, 1.0]), "mem": np.zeros(3), "uacc": np.zeros(3),
    ...      "K": 2, "cap": np.inf, "mode": 0, "replicate": False, "sync_inv": 0.0}
    >>> greedy_bound([0, 1, 2], a)        # {0} then {1, 2}: loads 2.5 and 4.5
    4.5
    >>> greedy_bound([0, 1, 2], a, split=True)
    (4.5, [[0], [1, 2]])

    ``split=True`` returns ``(bound, stages)``: the packing that gives the bound (lists of
    supernodes in pipeline order; ``None`` when no packing fits), the split a DP stopped by its
    time limit returns. ``budget`` (a :class:`~workbench.budget.Budget`) ends the search for a
    tighter ``B`` when it runs out (the first packing is always made).
    """
    K = int(a["K"])
    acc, mem, uacc = a["acc"].tolist(), a["mem"].tolist(), a["uacc"].tolist()
    if K == 0 or any(uacc[v] >= 0.5 for v in order):
        return (INF, None) if split else INF
    hyper = [a[x].tolist() for x in ("nptr", "nh", "hsize", "hcost", "hsrc")]
    cap, mode, repl, sinv = float(a["cap"]), int(a["mode"]), bool(a["replicate"]), \
        float(a["sync_inv"])
    H = len(hyper[2])

    stages: list = []

    def pack(B: float) -> float:
        """Largest stage load of the greedy packing at ``B`` (``inf`` if it needs > K); its
        stages in ``stages``."""
        cnt, srcin, cio = [0] * H, [0] * H, [0.0, 0.0]
        stage: list = []
        stages.clear()
        stages.append(stage)
        comp = mm = load = worst = 0.0
        used = 1
        for v in order:
            apply_move(v, 1, *hyper, cnt, srcin, cio)
            c2, m2 = comp + acc[v], mm + mem[v]
            new = stage_load(c2, cio[0], cio[1], m2, 1, mode, repl, sinv)
            if stage and (new > B or m2 > cap):
                worst = max(worst, load)
                used += 1
                if used > K:
                    return INF
                stage = []
                stages.append(stage)
                cnt, srcin, cio = [0] * H, [0] * H, [0.0, 0.0]
                apply_move(v, 1, *hyper, cnt, srcin, cio)
                c2, m2 = acc[v], mem[v]
                new = stage_load(c2, cio[0], cio[1], m2, 1, mode, repl, sinv)
            if m2 > cap:
                return INF
            stage.append(v)
            comp, mm, load = c2, m2, new
        return max(worst, load)

    best = pack(INF)
    if not math.isfinite(best):
        return (INF, None) if split else INF
    best_stages = [list(x) for x in stages]
    lo, hi = sum(acc) / K, best
    for _ in range(steps):
        if hi - lo <= 1e-2 * hi or (budget is not None and budget.over()):
            break  # tight enough to prune, or out of time
        # balanced splits lie near lo: probe there first, then bisect
        mid = min(0.5 * (lo + hi), 1.125 * lo) if hi > 1.25 * lo else 0.5 * (lo + hi)
        got = pack(mid)
        if math.isfinite(got):
            if got < best:
                best, best_stages = got, [list(x) for x in stages]
            hi = mid
        else:
            lo = mid
    return (best, best_stages) if split else best
