"""List scheduling: HEFT, ETF, Baechi's m-ETF and m-SCT, and FastT's DPOS.

All five share one core (:class:`ListCore`): per-op compute times from the cluster, the
transfer model of the simulator with congestion off (a tensor produced on device ``a`` at time
``f`` reaches device ``b`` at ``f + cluster.transfer_ms(a, b, bytes, comm)``, computed with the
same floating-point operations as :func:`workbench.simulate`), per-device timelines with
insertion into idle slots, memory and colocation bookkeeping (:class:`MemoryBook`), and plan
construction with the per-device execution order. Because each op starts at
``max(data ready, end of the op before it on its device)``, the solver's predicted makespan is
exactly what ``simulate(plan, cluster, congestion=False, order="plan")`` reports.

The algorithms differ only in how they pick the next op and its device:

``heft``
    Topcuoglu et al. (2002): ops by decreasing upward rank (mean compute and mean transfer
    times), each on the device giving the earliest finish time with insertion.
``dpos``
    FastT (Algorithm 1): upward rank from the *maximum* compute time and transfer time, the
    static critical path from :func:`workbench.analysis.critical_path`; critical-path ops go to a
    critical-path device chosen by simulating as many remaining critical-path ops as fit in its
    memory and taking the smallest average time (a new one when it fills up); other ops go where
    their earliest finish time (insertion, ``inf`` where memory does not fit) is smallest.
``etf`` / ``m_etf``
    Earliest Task First (Hwang et al. 1989) as in Baechi: an event-driven list scheduler that at
    each instant starts, among the ready ops and free devices, the pair that can start earliest
    (ties: larger static level, then topological index); ``m_etf`` only considers devices with
    room for the op.
``m_sct``
    Baechi's memory-constrained Small Communication Time scheduler (after Hanen and Munier): the
    favourite child of each op comes from the LP relaxation of the SCT model (solved with
    HiGHS), rounded as Baechi does (``x < 0.5`` -> favourite); a device that finished an op
    whose favourite child can start there earliest waits for that child, accepting only urgent
    ops (those that can start at the same time on every device) meanwhile.

Examples
--------
>>> from workbench import samples, Cluster, simulate, solve
>>> g, c = samples.pesto_fig2(), Cluster.preset("2xV100-pcie")
>>> plan = solve(g, c, method="heft")
>>> plan.predicted["makespan_ms"] == simulate(plan, c, congestion=False, order="plan").makespan
True
>>> sorted(plan.order)
['gpu0', 'gpu1']
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable

import numpy as np

from ...analysis import critical_path, levels
from ...budget import SHARES, Budget
from ...errors import InfeasibleError, TimeLimitError
from ...plan import Plan
from ..registry import register
from ..common import SLOW_FACTOR, MemoryBook, fast_devices
from ..milp import new_highs

__all__ = [
    "ListCore",
    "dpos",
    "etf",
    "event_list_schedule",
    "favourite_children",
    "heft",
    "m_etf",
    "m_sct",
    "static_list_schedule",
]

_INF = math.inf

LIST_S_PER_OP = 3e-5
"""Seconds an op of the event-driven list phase (``etf``, ``m_etf``, ``m_sct``) is expected
to take: measured 2.4 s CPU for m_etf on ``samples.transformer(100000)`` and 2xV100-pcie
(24 us an op), with some margin; ``m_sct`` keeps it out of its LP's share of a time limit."""


class ListCore:
    """State shared by every list scheduler: times, placement so far, timelines, memory.

    Parameters
    ----------
    graph : OpGraph
    cluster : Cluster
    memory : bool
        Whether device memory limits candidate devices (colocation is always honoured).

    Notes
    -----
    ``seq[d]``, ``starts[d]`` and ``ends[d]`` hold device ``d``'s ops in execution order with
    their start and end times; starts and ends are non-decreasing, so idle slots are found with
    :mod:`bisect`.

    Examples
    --------
    >>> from workbench import samples, Cluster
    >>> core = ListCore(samples.diamond(), Cluster.preset("2xV100-pcie"))
    >>> core.commit(0, 0, *core.earliest_start(0, 0.0, 1.0))
    >>> core.data_ready(1)
    [1.0, 2.02]
    """

    def __init__(self, graph, cluster, *, memory: bool = True):
        cluster.check_graph(graph)
        gc, cc = graph.c, cluster.c
        self.graph, self.cluster = graph, cluster
        self.n, self.nd = gc.n, cc.n
        times = cluster.op_times(graph)
        self.times: list = times.tolist()
        ok = np.isfinite(times)
        # a colocation group may only go where all of its members can run
        if len(gc.coloc_groups):
            grp_ok = np.ones((len(gc.coloc_groups), self.nd), dtype=bool)
            has = gc.coloc >= 0
            np.logical_and.at(grp_ok, gc.coloc[has], ok[has])
            ok[has] &= grp_ok[gc.coloc[has]]
        self.ok: list = ok.tolist()
        self.memory_aware = memory
        self.fast = None  # per op, per device: not slow (see prefer_fast_devices)
        self.book = MemoryBook(graph, cluster)
        self.dev = [-1] * self.n
        self.start = [_INF] * self.n
        self.finish = [_INF] * self.n
        self.seq: list = [[] for _ in range(self.nd)]
        self.starts: list = [[] for _ in range(self.nd)]
        self.ends: list = [[] for _ in range(self.nd)]
        # transfer model: exactly the simulator's arithmetic
        self.src = gc.src.tolist()
        self.in_edges = gc.in_edges
        self.e_bytes = gc.bytes.tolist()
        self.e_comm = gc.comm.tolist()
        self.host = cc.host_mode
        self.lat, self.inv = cc.lat.tolist(), cc.inv_bw.tolist()
        self.up_lat, self.up_inv = cc.up_lat.tolist(), cc.up_inv_bw.tolist()
        self.staged = cc.staged.tolist()

    # ------------------------------------------------------------------ transfer model
    def arrivals(self, e: int) -> list:
        """Time at which edge ``e``'s tensor is available on each device (source placed)."""
        u = self.src[e]
        a, f = self.dev[u], self.finish[u]
        nd = self.nd
        nb, cm = self.e_bytes[e], self.e_comm[e]
        fixed = not math.isnan(cm)
        if not self.host:
            if fixed:
                t = f + cm
                out = [t] * nd
            else:
                la, ia = self.lat[a], self.inv[a]
                out = [f + (la[b] + nb * ia[b]) for b in range(nd)]
            out[a] = f
            return out
        staged = self.staged
        if staged[a]:
            f1 = f + (cm if fixed else self.up_lat[a] + nb * self.up_inv[a])
        else:
            f1 = f
        ul, ui = self.up_lat, self.up_inv
        out = [(f1 + (cm if fixed else ul[b] + nb * ui[b])) if staged[b] else f1
               for b in range(nd)]
        out[a] = f
        return out

    def data_ready(self, i: int) -> list:
        """Per device, when all inputs of op ``i`` are there (all predecessors placed)."""
        r = [0.0] * self.nd
        for e in self.in_edges[i]:
            r = list(map(max, r, self.arrivals(e)))
        return r

    # ------------------------------------------------------------------ devices
    def allowed(self, i: int) -> list:
        """Devices op ``i`` may go to now: runnable, its colocation group's device, and (when
        memory-aware) with room for it."""
        f = self.book.forced_device(i)
        ok = self.ok[i]
        if f >= 0:
            cands = [f] if ok[f] else []
        else:
            cands = [d for d in range(self.nd) if ok[d]]
        if self.memory_aware:
            fits = self.book.fits
            cands = [d for d in cands if fits(i, d)]
        if self.fast is not None and len(cands) > 1:
            fast = self.fast[i]
            quick = [d for d in cands if fast[d]]
            if quick:
                cands = quick
        return cands

    def prefer_fast_devices(self, factor: float = SLOW_FACTOR) -> None:
        """Restrict :meth:`allowed` to devices where an op is not slow (at most ``factor``
        times its fastest time), unless none of those has room for it (see
        :func:`~workbench.solvers.common.fast_devices`)."""
        self.fast = fast_devices(self.graph, self.cluster, factor=factor).tolist()

    def no_room(self, i: int) -> InfeasibleError:
        """The error for an op that fits on no device."""
        return self.book.shortfall_error(i)

    def earliest_start(self, d: int, ready: float, dur: float,
                       insertion: bool = True) -> tuple:
        """``(start, position)`` of the earliest slot on device ``d`` that starts no earlier
        than ``ready`` and is ``dur`` long: the first idle gap that fits (``insertion``) or
        the end of the device's sequence."""
        starts, ends = self.starts[d], self.ends[d]
        k = len(starts)
        if insertion and k:
            hi = ready + dur
            p = bisect_left(starts, hi) if hi > ready else bisect_right(starts, ready)
            while p < k:
                s = ends[p - 1] if p else 0.0
                s = max(s, ready)
                if s + dur <= starts[p]:
                    return s, p
                p += 1
        s = ends[-1] if k else 0.0
        return (max(ready, s)), k

    def commit(self, i: int, d: int, start: float, pos: int) -> None:
        """Place op ``i`` on device ``d`` at ``start``, at position ``pos`` of its sequence."""
        end = start + self.times[i][d]
        self.dev[i] = d
        self.start[i] = start
        self.finish[i] = end
        self.seq[d].insert(pos, i)
        self.starts[d].insert(pos, start)
        self.ends[d].insert(pos, end)
        self.book.place(i, d)

    def best_eft(self, i: int, cands: list, insertion: bool = True) -> tuple:
        """``(eft, device, start, pos)`` minimising the finish time of op ``i`` over ``cands``
        (ties: lowest device index)."""
        ready = self.data_ready(i)
        best = (_INF, -1, 0.0, 0)
        ti = self.times[i]
        for d in cands:
            s, p = self.earliest_start(d, ready[d], ti[d], insertion)
            eft = s + ti[d]
            if eft < best[0]:
                best = (eft, d, s, p)
        return best

    # ------------------------------------------------------------------ result
    def makespan(self) -> float:
        return max(self.finish) if self.n else 0.0

    def plan(self, method: str, *, info: dict | None = None, stats: dict | None = None) -> Plan:
        """The plan: placement, per-device order, predicted makespan; status ``infeasible``
        when memory is over capacity somewhere (possible only for memory-oblivious methods)."""
        names = self.graph.c.names
        devs = self.cluster.names
        placement = {names[i]: devs[d] for i, d in enumerate(self.dev)}
        order = {devs[d]: [names[i] for i in self.seq[d]] for d in range(self.nd)}
        over = [devs[d] for d in range(self.nd)
                if self.book.used[d] > self.book.capacity[d] * (1 + 1e-9)]
        info = dict(info or {})
        if over:
            info["memory_over"] = over
        return Plan(self.graph, placement, method=method, order=order,
                    status="infeasible" if over else "heuristic",
                    predicted={"makespan_ms": self.makespan()},
                    stats={"n_ops": self.n, **(stats or {})}, info=info)


# ---------------------------------------------------------------------- static list engine
def static_list_schedule(core: ListCore, priority: np.ndarray, *, insertion: bool = True,
                         choose: Callable | None = None, progress: Callable | None = None
                         ) -> None:
    """Schedule every op in decreasing ``priority`` (ties: topological index), each on the
    device with the earliest finish time, or where ``choose(core, i)`` says (it returns a
    device index, or -1 to fall back to earliest finish time).

    ``priority`` must not increase along edges (an upward rank never does), so every op comes
    after its predecessors.
    """
    order = np.lexsort((np.arange(core.n), -np.asarray(priority, dtype=float))).tolist()
    step = max(1, core.n // 20)
    for k, i in enumerate(order):
        d = choose(core, i) if choose is not None else -1
        if d >= 0:
            ready = core.data_ready(i)
            s, p = core.earliest_start(d, ready[d], core.times[i][d], insertion)
            core.commit(i, d, s, p)
        else:
            cands = core.allowed(i)
            if not cands:
                raise core.no_room(i)
            _, d, s, p = core.best_eft(i, cands, insertion)
            core.commit(i, d, s, p)
        if progress is not None and k % step == 0:
            progress(k / core.n)


# ---------------------------------------------------------------------- event-driven engine
def event_list_schedule(core: ListCore, level: list, favourite: list | None = None) -> dict:
    """Baechi's event-driven ETF (and SCT when ``favourite`` is given).

    At each instant ``t``, every free device proposes the ready op it can start earliest (and
    at the latest ``t``); the proposal with the smallest (start, -level, index) is started,
    and proposals are renewed until none is left; then time moves to the next instant at which a
    device frees up or a proposal becomes possible. With ``favourite[u] = v``, a free device whose
    last op ``u`` has a ready, unplaced favourite child ``v`` that can start on it no later than
    anywhere else waits for ``v``, starting meanwhile only an *urgent* op (one whose start time is
    the same on every device it may use, so waiting gains nothing).
    Returns counters (``steps``, ``waits``).
    """
    n, nd = core.n, core.nd
    pred_left = [len(core.in_edges[i]) for i in range(n)]
    succ = core.graph.c.succ
    ready_on: dict = {}     # ready op -> per-device data-ready time
    last = [-1] * nd        # last op started on each device
    avail = [0.0] * nd
    placed = 0
    stats = {"steps": 0, "waits": 0}
    for i in range(n):
        if pred_left[i] == 0:
            ready_on[i] = [0.0] * nd
    pending: list = []      # (finish time, op) of started ops whose successors are not released
    t = 0.0

    def sched_ts(i: int, cands: list) -> dict:
        r = ready_on[i]
        return {d: (max(avail[d], r[d])) for d in cands}

    while placed < n:
        stats["steps"] += 1
        # release successors of ops finished by t
        if pending:
            keep = []
            for f, u in pending:
                if f <= t:
                    for v in succ[u]:
                        pred_left[v] -= 1
                        if pred_left[v] == 0:
                            ready_on[v] = core.data_ready(v)
                else:
                    keep.append((f, u))
            pending = keep
        for d in range(nd):
            avail[d] = max(avail[d], t)
        while True:
            # candidate devices and start times of every ready op
            info = {}
            for i in ready_on:
                cands = core.allowed(i)
                if not cands:
                    raise core.no_room(i)
                ts = sched_ts(i, cands)
                info[i] = (ts, max(ts.values()))
            best = None
            for d in range(nd):
                if avail[d] > t:
                    continue
                prop = _propose(d, t, info, last, favourite, level, stats)
                if prop is None:
                    continue
                key = (info[prop][0][d], -level[prop], prop, d)
                if best is None or key < best:
                    best = key
            if best is None:
                break
            _, _, i, d = best
            # start as early as the device sequence allows (what the plan's order means; it is
            # t except after an SCT wait, when the op may fill the idle time before t)
            s, p = core.earliest_start(d, ready_on[i][d], core.times[i][d], insertion=False)
            core.commit(i, d, s, p)
            del ready_on[i]
            avail[d] = core.finish[i]
            last[d] = i
            placed += 1
            pending.append((core.finish[i], i))
        if placed >= n:
            break
        if any(f <= t for f, _ in pending):
            continue  # zero-time ops finished at t: release their successors at this instant
        # next instant: a device frees up, or a proposal becomes possible
        nxt = _INF
        for f, _ in pending:
            if t < f < nxt:
                nxt = f
        for d in range(nd):
            if avail[d] > t:
                nxt = min(nxt, avail[d])
                continue
            for i, (ts, urgent) in info.items():
                if d in ts and t < ts[d] < nxt:
                    nxt = ts[d]
                if favourite is not None and d in ts and t < urgent < nxt:
                    nxt = urgent
        if nxt == _INF:  # pragma: no cover - only reachable on a bug
            raise RuntimeError("event list scheduler stalled")
        t = nxt
    return stats


def _waits_for(d: int, last: list, favourite, info: dict) -> int:
    """The favourite child device ``d`` keeps itself for, or -1."""
    if favourite is None or last[d] < 0:
        return -1
    fc = favourite[last[d]]
    if fc < 0 or fc not in info:
        return -1
    ts = info[fc][0]
    if d not in ts or ts[d] > min(ts.values()):
        return -1
    return fc


def _propose(d: int, t: float, info: dict, last: list, favourite, level: list,
             stats: dict) -> int | None:
    fc = _waits_for(d, last, favourite, info)
    if fc >= 0:
        stats["waits"] += 1
        urgent = None
        for i, (ts, u) in info.items():
            if d in ts and (urgent is None or (u, -level[i], i) < urgent[0]):
                urgent = ((u, -level[i], i), i)
        if urgent is not None and urgent[0][0] <= t:
            return urgent[1]
        return fc if info[fc][0][d] <= t else None
    best = None
    for i, (ts, _) in info.items():
        s = ts.get(d)
        if s is not None and s <= t:
            key = (s, -level[i], i)
            if best is None or key < best[0]:
                best = (key, i)
    return None if best is None else best[1]


# ---------------------------------------------------------------------- favourite children
def favourite_children(graph, cluster, *, threshold: float = 0.5,
                       time_limit: float | Budget | None = None) -> tuple:
    """Favourite child of every op from the LP relaxation of the SCT model (Baechi's m-SCT).

    Variables ``x_e`` in [0, 1] (0 = edge ``e`` leads to the favourite child), start times
    ``s_i >= 0`` and the makespan ``w``: minimise ``w`` subject to ``s_i + p_i + c_e x_e <= s_j``
    for each edge ``e = (i, j)``, ``sum_j x_ij >= outdeg(i) - 1`` (at most one favourite child),
    ``sum_i x_ij >= indeg(j) - 1`` (a favourite child of at most one parent) and
    ``s_i + p_i <= w``. ``p`` and ``c`` are mean compute and transfer times over devices, in
    units that keep the LP's numbers below about 1e4. Edges whose ``x_e - threshold + 0.5``
    rounds to 0 (Baechi's rounding; 0.5 rounds to 0) become favourite; as in Baechi a later
    favourite edge of a parent replaces an earlier one, and a child keeps only its last favourite
    parent. The LP goes to HiGHS directly as sparse arrays (through PuLP it took seconds to
    build on dense 300-op graphs).

    Returns ``(favourite, lp_makespan)``: ``favourite[i]`` is the child's index or -1. When the
    LP is not built and solved within ``time_limit`` (seconds or a Budget; building counts)
    every entry is -1 and ``lp_makespan`` is NaN (the scheduler then behaves as m-ETF).

    >>> from workbench import samples, Cluster
    >>> fav, w = favourite_children(samples.diamond(), Cluster.preset("2xV100-pcie"))
    >>> fav[0] in (1, 2), fav[3], round(w, 3)
    (True, -1, 5.02)
    """
    budget = Budget.of(time_limit, name="m_sct: favourite children LP")
    gc = graph.c
    n, m = gc.n, gc.m
    fav = [-1] * n
    if budget.over():                          # no time for the LP at all
        return fav, math.nan
    lv = levels(graph, cluster, agg="mean")
    if m == 0:
        return fav, float(max(lv.w.tolist(), default=0.0))
    big = max(float(lv.w.sum()), float(lv.c.max(initial=0.0)))
    unit = big / 1e4 if big > 1e6 else 1.0
    xval, objective = _sct_lp(gc, lv.w / unit, lv.c / unit, budget)
    if xval is None:
        return fav, math.nan
    src, dst = gc.src.tolist(), gc.dst.tolist()
    parent = [-1] * n
    for e, xe in enumerate(xval.tolist()):
        if round(xe - threshold + 0.5) == 0:
            u, v = src[e], dst[e]
            fav[u] = v
            if parent[v] >= 0:
                fav[parent[v]] = -1
            parent[v] = u
    return fav, objective * unit


def _sct_lp(gc, p: np.ndarray, c: np.ndarray, budget: Budget) -> tuple:
    """Solve the SCT LP relaxation with HiGHS; ``(x values, objective)`` or ``(None, nan)``."""
    import highspy

    n, m = gc.n, gc.m
    src, dst = gc.src, gc.dst
    xs, ss, w = 0, m, m + n                      # column offsets: x_e, s_i, w
    rows, cols, vals, lo, hi = [], [], [], [], []
    r = 0
    # precedence: s_src - s_dst + c_e x_e <= -p_src
    e_idx = np.arange(m)
    rows += [e_idx, e_idx, e_idx]
    cols += [ss + src, ss + dst, xs + e_idx]
    vals += [np.ones(m), -np.ones(m), np.asarray(c, dtype=float)]
    lo.append(np.full(m, -np.inf))
    hi.append(-np.asarray(p, dtype=float)[src])
    # per op, in this order, a row for at most one favourite child (out-degree > 1), one for
    # at most one favourite parent (in-degree > 1) and, at a sink, s_i - w <= -p_i
    outdeg, indeg = np.diff(gc.succ_ptr), np.diff(gc.pred_ptr)
    flags = np.stack([outdeg > 1, indeg > 1, outdeg == 0], axis=1)
    row_of = (m + np.cumsum(flags.ravel()) - 1).reshape(n, 3)
    r = m + int(flags.sum())
    row_lo, row_hi = np.full(r - m, -np.inf), np.full(r - m, np.inf)
    ch = flags[:, 0]
    row_lo[row_of[ch, 0] - m] = outdeg[ch] - 1.0
    pa = flags[:, 1]
    row_lo[row_of[pa, 1] - m] = indeg[pa] - 1.0
    sk = flags[:, 2]
    row_hi[row_of[sk, 2] - m] = -np.asarray(p, dtype=float)[sk]
    e_ch = np.flatnonzero(ch[src])                   # edges out of an op with >1 children
    e_pa = np.flatnonzero(pa[dst])
    sinks = np.flatnonzero(sk)
    rows += [row_of[src[e_ch], 0], row_of[dst[e_pa], 1], row_of[sinks, 2], row_of[sinks, 2]]
    cols += [xs + e_ch, xs + e_pa, ss + sinks, np.full(len(sinks), w)]
    vals += [np.ones(len(e_ch)), np.ones(len(e_pa)), np.ones(len(sinks)), -np.ones(len(sinks))]
    lo.append(row_lo)
    hi.append(row_hi)
    R, C, V = (np.concatenate(a) for a in (rows, cols, vals))
    keep = V != 0
    R, C, V = R[keep], C[keep], V[keep]
    order = np.lexsort((R, C))                    # column-wise (CSC)
    R, C, V = R[order], C[order], V[order]
    nv = m + n + 1
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = nv, r
    cost = np.zeros(nv)
    cost[w] = 1.0
    lp.col_cost_ = cost
    lp.col_lower_ = np.zeros(nv)
    lp.col_upper_ = np.concatenate([np.ones(m), np.full(n + 1, np.inf)])
    lp.row_lower_ = np.concatenate(lo)
    lp.row_upper_ = np.concatenate(hi)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.searchsorted(C, np.arange(nv + 1)).astype(np.int32)
    lp.a_matrix_.index_ = R.astype(np.int32)
    lp.a_matrix_.value_ = V
    h = new_highs()
    if budget.over():                             # the build used up the time
        return None, math.nan
    if budget.deadline is not None:
        h.setOptionValue("time_limit", float(budget.left()))
    h.passModel(lp)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None, math.nan
    x = np.asarray(h.getSolution().col_value[:m], dtype=float)
    return x, float(h.getInfo().objective_function_value)


# ---------------------------------------------------------------------- solvers
@register("heft", family="list", paper="Topcuoglu et al. (TPDS 2002)", memory=False,
          orders=True, description="HEFT: upward rank, insertion-based earliest finish time")
def heft(graph, cluster, *, insertion: bool = True, progress=None) -> Plan:
    """Heterogeneous Earliest Finish Time.

    Ops are taken in decreasing upward rank (mean compute time over devices and mean transfer
    time over device pairs, :func:`workbench.analysis.levels`), each placed on the device where
    it finishes earliest, inserted into an idle slot when one is long enough. Memory is not a
    constraint (as in the paper): the plan's status is ``infeasible`` if a device overflows.
    Colocation groups are honoured.

    >>> from workbench import samples, Cluster
    >>> p = heft(samples.diamond(), Cluster.preset("2xV100-pcie"))
    >>> p.predicted["makespan_ms"], p.order["gpu0"]
    (5.02, ['a', 'b'])
    """
    core = ListCore(graph, cluster, memory=False)
    lv = levels(graph, cluster, agg="mean")
    static_list_schedule(core, lv.blevel, insertion=insertion, progress=progress)
    return core.plan("heft", info={"rank": "upward, mean"})


def _etf_like(graph, cluster, method: str, *, memory: bool, favourite=None,
              extra_info=None, slow_factor: float | None = SLOW_FACTOR) -> Plan:
    core = ListCore(graph, cluster, memory=memory)
    if slow_factor is not None:
        core.prefer_fast_devices(slow_factor)
    level = levels(graph, cluster, agg="mean", comm="zero").blevel.tolist()
    stats = event_list_schedule(core, level, favourite)
    return core.plan(method, info=extra_info, stats=stats)


@register("etf", family="list", paper="Hwang et al. (SIAM J. Comput. 1989)", memory=False,
          orders=True, description="ETF: start the ready op that can start earliest")
def etf(graph, cluster, *, slow_factor: float | None = SLOW_FACTOR) -> Plan:
    """Earliest Task First, event-driven as in Baechi, without memory limits (status
    ``infeasible`` if a device overflows). Ties: larger static level (compute only).

    ``slow_factor``: an op only goes to a device where it takes at most this many times its
    fastest time (an idle host CPU beside GPUs would otherwise "start earliest" and get the
    work; see :func:`~workbench.solvers.common.fast_devices`); ``None`` is the paper's rule.

    >>> from workbench import samples, Cluster
    >>> etf(samples.diamond(), Cluster.preset("2xV100-pcie")).predicted["makespan_ms"]
    5.02
    """
    return _etf_like(graph, cluster, "etf", memory=False, slow_factor=slow_factor)


@register("m_etf", family="list", paper="Baechi (SoCC'20)", memory=True, orders=True,
          description="Baechi m-ETF: earliest task first among devices with room")
def m_etf(graph, cluster, *, slow_factor: float | None = SLOW_FACTOR) -> Plan:
    """Baechi's memory-constrained ETF: like :func:`etf`, but an op only goes to a device with
    room for it (a colocation group is charged whole on its first member). Raises
    InfeasibleError naming the op and the shortfall when a ready op fits nowhere. A device
    where the op is slow (``slow_factor``, as in :func:`etf`) is used only when no other
    device has room for it.

    >>> from workbench import samples, Cluster
    >>> g = samples.diamond().map_ops(lambda v, a: {**a, "memory": 6e9})
    >>> sorted(set(m_etf(g, Cluster.preset("2xV100-pcie").with_memory(13e9)).placement.values()))
    ['gpu0', 'gpu1']
    """
    return _etf_like(graph, cluster, "m_etf", memory=True, slow_factor=slow_factor)


@register("m_sct", family="list", paper="Baechi (SoCC'20)", memory=True, orders=True,
          description="Baechi m-SCT: ETF with favourite children from an LP relaxation")
def m_sct(graph, cluster, *, threshold: float = 0.5,
          time_limit: float | Budget | None = None,
          slow_factor: float | None = SLOW_FACTOR) -> Plan:
    """Baechi's memory-constrained Small Communication Time scheduler.

    ``time_limit`` (seconds or a :class:`~workbench.budget.Budget`): the LP gets the share
    ``m_sct.lp`` of it (half), less the time the list phase after it is expected to take
    (:data:`LIST_S_PER_OP` an op; that phase cannot stop early); a limit shorter than that
    expected time is refused at once with a :class:`~workbench.errors.TimeLimitError` naming
    the time the graph needs.

    Favourite children come from :func:`favourite_children` (LP relaxation, HiGHS); scheduling
    is :func:`event_list_schedule` with the favourite-child rule, among the devices where an op
    is not slow (``slow_factor``, as in :func:`m_etf`). ``info`` reports the number of
    favourite pairs and the LP's relaxed makespan.

    >>> from workbench import samples, Cluster
    >>> p = m_sct(samples.pesto_fig2(), Cluster.preset("2xV100-pcie"))
    >>> p.info["favourites"] > 0, p.status
    (True, 'heuristic')
    """
    budget = Budget.of(time_limit, name="m_sct")
    reserve = LIST_S_PER_OP * graph.n_ops          # the list phase, expected
    if budget.deadline is not None and reserve > budget.left():
        raise TimeLimitError(
            f"m_sct: the list phase of a {graph.n_ops:,}-op graph takes about {reserve:.3g} s "
            f"({LIST_S_PER_OP * 1e6:.0f} us an op), more than the {budget.left():.3g} s left of "
            f"the time limit; give at least that, or use m_etf (the same phase without the LP)")
    left = budget.left()
    # half of the limit for the LP (SHARES["m_sct.lp"]), the list phase's time kept out of it
    lp = budget.share("m_sct.lp", seconds=None if budget.deadline is None else
                      max(0.0, min(SHARES["m_sct.lp"] * left, left - reserve)))
    fav, lp_w = favourite_children(graph, cluster, threshold=threshold, time_limit=lp)
    lp_s = lp.elapsed()
    return _etf_like(graph, cluster, "m_sct", memory=True, favourite=fav, slow_factor=slow_factor,
                     extra_info={"favourites": sum(f >= 0 for f in fav), "lp_makespan_ms": lp_w,
                                 "lp_seconds": lp_s, "lp_solved": not math.isnan(lp_w)})


class _CriticalPathDevices:
    """FastT's critical-path device rule (Algorithm 1, line 5 and the text after it)."""

    def __init__(self, core: ListCore, cp: list):
        self.core = core
        self.cp = cp
        self.pos = {i: k for k, i in enumerate(cp)}
        self.device = -1
        self.chosen: list = []

    def pick(self, k: int) -> int:
        """Device with the smallest average time over the run of remaining critical-path ops
        (from ``cp[k]``) it can hold; -1 when no device can take ``cp[k]``."""
        core, book = self.core, self.core.book
        best = None
        for d in range(core.nd):
            free = book.free(d)
            used = 0.0
            seen: set = set()
            cnt, tot = 0, 0.0
            for i in self.cp[k:]:
                if core.dev[i] >= 0:
                    continue
                f = book.forced_device(i)
                if not core.ok[i][d] or (f >= 0 and f != d):
                    break
                g = book.group_of[i]
                need = 0.0 if (g >= 0 and g in seen) else book.need(i)
                if g >= 0:
                    seen.add(g)
                if core.memory_aware and used + need > free * (1 + 1e-12):
                    break
                used += need
                cnt += 1
                tot += core.times[i][d]
            if cnt:
                key = (tot / cnt, -cnt, d)
                if best is None or key < best:
                    best = key
        return -1 if best is None else best[2]

    def __call__(self, core: ListCore, i: int) -> int:
        k = self.pos.get(i)
        if k is None:
            return -1
        cands = core.allowed(i)
        if not cands:
            raise core.no_room(i)
        f = core.book.forced_device(i)
        if f >= 0:
            return f
        if self.device < 0 or self.device not in cands:
            self.device = self.pick(k)
            if self.device < 0 or self.device not in cands:
                self.device = -1
                return -1
            self.chosen.append(self.device)
        return self.device


@register("dpos", family="list", paper="FastT (Middleware'20), Algorithm 1", memory=True,
          orders=True, description="FastT DPOS: critical path on its own device, EFT elsewhere")
def dpos(graph, cluster, *, insertion: bool = True, progress=None) -> Plan:
    """FastT's Device Placement and Operation Sequencing (Algorithm 1).

    ``w_i`` and ``c_ij`` are maxima over devices / device pairs; ops are taken in decreasing
    ``rank_u``; ops on the static critical path go to the critical-path device (chosen by
    simulating as many remaining critical-path ops as fit in memory, smallest average time; a
    new one when it fills up), the others to the device with the earliest finish time
    (insertion into idle slots; devices without room are skipped). ``info`` lists the critical
    path and the critical-path devices. Raises InfeasibleError when an op fits nowhere.

    >>> from workbench import samples, Cluster
    >>> p = dpos(samples.pesto_fig2(), Cluster.preset("2xV100-pcie"))
    >>> p.info["critical_path"], p.info["cp_devices"]
    (['A', 'F', 'G', 'E'], ['gpu0'])
    """
    core = ListCore(graph, cluster, memory=True)
    lv = levels(graph, cluster, agg="max")
    cp_names = critical_path(graph, cluster, lv=lv)
    idx = graph.index
    rule = _CriticalPathDevices(core, [idx[v] for v in cp_names])
    static_list_schedule(core, lv.blevel, insertion=insertion, choose=rule, progress=progress)
    names = cluster.names
    return core.plan("dpos", info={"critical_path": cp_names,
                                   "cp_devices": [names[d] for d in rule.chosen]})
