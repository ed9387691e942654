"""Pesto's memory balance on the fine plan (issue 46).

The paper's balance rows are written on the coarse graph; after un-coarsening a device may hold
far more than its share, because coarse vertices are lumpy and their caps allow the largest one
on top of a share. :func:`repair_balance` restores the balance on the expanded (fine) plan:
while some device holds more tensor footprint than its :func:`balance_caps` cap, it moves
one unit (an op, or a whole colocation group) off the most over-full device to a device with
room. Which unit moves is set by ``mode`` (:data:`MODES`): the one whose move cuts the fewest
bytes between devices (a Fiduccia-Mattheyses gain, so moved ops follow their neighbours and a
moved region grows along the graph's edges), the fewest per byte of footprint, or the
topologically first or last, each optionally followed by a cleanup that makes every
cut-reducing move the caps allow; ``pesto`` tries each and keeps the fastest simulated plan.

Without memory limits in the way it always terminates with the balance met: when device ``d``
is over its cap ``>= share_d * F + f_max``, some device ``e`` holds less than ``share_e * F``,
so any unit fits under ``e``'s cap; every move strictly lowers an over-full device and never
fills a device past its cap. A unit only moves to a device with room for its ``memory``; when
none can, the repair stops short and ``stats["fine_balance"]`` says so.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import SolverError
from ...plan import Plan
from ..common import tensor_classes

__all__ = ["MODES", "balance_caps", "repair_balance", "tensor_footprint", "unit_cap"]


def tensor_footprint(graph) -> np.ndarray:
    """Pesto's memory footprint of each op: the bytes of its input and output tensors (each
    tensor it produces counted once, as in ``tf.profiler``'s per-op sizes).

    >>> from workbench import samples
    >>> g = samples.diamond()   # a -> b, a -> c (one 10 MB tensor), b -> d, c -> d
    >>> [round(float(f) / 1e6, 1) for f in tensor_footprint(g)]
    [10.0, 20.0, 20.0, 20.0]
    """
    gc = graph.c
    fp = np.zeros(gc.n)
    np.add.at(fp, gc.dst, gc.bytes)                     # inputs, one per in-edge
    for u, cls in enumerate(tensor_classes(graph)):     # outputs, one per tensor
        fp[u] += sum(nb for nb, _c, _cons in cls)
    return fp


def balance_caps(footprint, cluster, tolerance: float, groups=None) -> list[float]:
    """Per-device cap of the memory-balance rows: device ``d`` holds at most
    ``max((1 + tolerance) * share_d * F, share_d * F + f_max)`` of the total footprint ``F``,
    ``share_d`` its part of the cluster's memory (equal parts when some device is unlimited).
    ``f_max`` is the largest unit that must sit on one device (a vertex, or a colocation group
    when ``groups`` gives each vertex's group id, -1 for none): the rows stay satisfiable on a
    coarse graph whose vertices are lumpy, as any list partition of the units meets them.

    >>> from workbench import Cluster
    >>> balance_caps([4.0, 4.0, 2.0], Cluster.preset("2xV100-pcie"), 0.25)
    [9.0, 9.0]
    >>> balance_caps([1.0] * 10, Cluster.preset("2xV100-pcie"), 0.25)
    [6.25, 6.25]
    >>> balance_caps([1.0] * 10, Cluster.preset("2xV100-pcie"), 0.25, groups=[0] * 7 + [-1] * 3)
    [12.0, 12.0]
    """
    if tolerance is None or not tolerance >= 0:
        raise SolverError(f"memory_balance must be a number >= 0 or None, got {tolerance!r}")
    fp = np.asarray(footprint, dtype=float)
    units = fp.tolist()
    if groups is not None:
        by: dict = {}
        units = []
        for f, g_ in zip(fp.tolist(), list(groups)):
            if g_ < 0:
                units.append(f)
            else:
                by[g_] = by.get(g_, 0.0) + f
        units += list(by.values())
    total, big = float(fp.sum()), max(units, default=0.0)
    return [max((1 + tolerance) * s * total, s * total + big) for s in _shares(cluster)]


def _shares(cluster) -> list[float]:
    """Each device's part of the cluster's memory (equal parts when some device is unlimited)."""
    mems = [d.memory for d in cluster.devices]
    if all(math.isfinite(m) for m in mems) and sum(mems) > 0:
        return [m / sum(mems) for m in mems]
    return [1.0 / len(mems)] * len(mems)


def unit_cap(footprint, cluster, tolerance: float, groups=None) -> float:
    """The largest footprint a unit (a coarse vertex, a united colocation group) may have so
    that *any* coarsening into such units still has a placement within :func:`balance_caps` of
    the original ops: the smallest room a device's cap leaves above its share,
    ``min_d(cap_d - share_d * F)``. (A list partition that gives each unit to a device below its
    share never passes ``share_d * F`` by more than one unit.) ``pesto`` coarsens under it, so
    the coarse balance rows are the original graph's rows and the expanded plan meets them.

    >>> from workbench import Cluster
    >>> unit_cap([1.0] * 10, Cluster.preset("2xV100-pcie"), 0.25)    # 1.25 * 5 - 5
    1.25
    >>> unit_cap([1.0] * 10, Cluster.preset("2xV100-pcie"), 0.25, groups=[0] * 7 + [-1] * 3)
    7.0
    """
    fp = np.asarray(footprint, dtype=float)
    caps = balance_caps(fp, cluster, tolerance, groups=groups)
    total = float(fp.sum())
    return float(min(c - s * total for c, s in zip(caps, _shares(cluster))))



def _units(gc) -> np.ndarray:
    """Unit id of every op: colocation groups move as one unit, other ops alone."""
    raw = np.where(gc.coloc >= 0, gc.n + gc.coloc, np.arange(gc.n))
    return np.unique(raw, return_inverse=True)[1].astype(np.int64)


def _connections(gc, unit, udev, n_units: int, k: int):
    """``conn[u, e]``: bytes on edges between unit ``u`` and units on device ``e`` (edges
    inside a unit left out), and each unit's neighbour lists (unit, bytes) for updates."""
    su, du = unit[gc.src], unit[gc.dst]
    ext = su != du
    su, du, nb = su[ext], du[ext], np.asarray(gc.bytes, float)[ext]
    conn = np.zeros((n_units, k))
    np.add.at(conn, (su, udev[du]), nb)
    np.add.at(conn, (du, udev[su]), nb)
    a = np.concatenate([su, du])
    b = np.concatenate([du, su])
    w = np.concatenate([nb, nb])
    order = np.argsort(a, kind="stable")
    ptr = np.searchsorted(a[order], np.arange(n_units + 1))
    return conn, ptr, b[order], w[order]


MODES = ("cut", "ratio", "head", "tail")
"""Which unit :func:`repair_balance` moves next off an over-full device: ``cut`` the one whose
move cuts the fewest bytes (Fiduccia-Mattheyses gain), ``ratio`` the fewest per byte of footprint moved, ``head``/``tail`` its topologically
first/last one (shifting a pipeline-like boundary), each to the device it exchanges most
bytes with among those with room."""


def _move(u, d, e, held, mem, ufp, umem, udev, moved, conn, ptr, nbr, wts) -> None:
    """Move unit ``u`` from device ``d`` to ``e``: its footprint and memory change devices and
    its neighbours' connection weights to ``d`` and ``e`` follow it."""
    held[d] -= ufp[u]
    held[e] += ufp[u]
    mem[d] -= umem[u]
    mem[e] += umem[u]
    udev[u] = e
    moved[u] = True
    lo, hi = ptr[u], ptr[u + 1]
    np.subtract.at(conn, (nbr[lo:hi], np.full(hi - lo, d)), wts[lo:hi])
    np.add.at(conn, (nbr[lo:hi], np.full(hi - lo, e)), wts[lo:hi])


def _refine(held, limit, mem, room, ok, ufp, umem, udev, conn, ptr, nbr, wts, moved, k,
            rounds: int = 4, budget=None) -> None:
    """Fiduccia-Mattheyses-style cleanup after the repair (in place): moves that cut fewer
    bytes between devices and keep every cap (balance, memory), best first, up to ``rounds``
    moves per unit (fewer once ``budget`` is spent)."""
    n_units = len(udev)
    for _ in range(rounds * n_units):
        if budget is not None and budget.over():
            return
        cur = conn[np.arange(n_units), udev]
        gain = conn - cur[:, None]
        fits = ok & (held[None, :] + ufp[:, None] <= limit[None, :]) \
            & (mem[None, :] + umem[:, None] <= room[None, :])
        fits[np.arange(n_units), udev] = False
        gain = np.where(fits, gain, -np.inf)
        flat = int(np.argmax(gain))
        if not gain.flat[flat] > 0:
            return
        u, e = flat // k, flat % k
        d = int(udev[u])
        _move(u, d, e, held, mem, ufp, umem, udev, moved, conn, ptr, nbr, wts)


def repair_balance(plan: Plan, cluster, tolerance: float,
                   mode: str = "cut", refine: bool = False,
                   budget=None, footprint=None, caps=None) -> tuple[Plan, int]:
    """``plan`` with the paper's memory balance met on its own graph, and the number of ops
    moved (0: ``plan`` itself is returned, it already holds). The moved plan has no order (the
    caller simulates it with the orders it tries). Ops only move to devices that can run them
    and have room for their ``memory`` (the capacity :func:`~.heuristics.respects` checks);
    when no unit can move, the repair stops short (``fine_balance`` then reports it).
    ``refine``: then also make every move that cuts fewer bytes between devices and keeps
    every cap, best first (a Fiduccia-Mattheyses-style cleanup of the greedy repair).
    ``budget`` (a :class:`~workbench.budget.Budget`): once it is spent the repair stops short
    with the moves made so far (a large graph's repair can take seconds per rule).
    ``footprint``/``caps``: the footprint of each op and the per-device caps to meet, when
    not :func:`tensor_footprint` and :func:`balance_caps` of ``plan``'s own graph (``pesto``
    repairs a coarse warm start against the original graph's caps).

    >>> from workbench import samples, Cluster, Plan
    >>> from workbench.solvers.pesto.balance import repair_balance
    >>> from workbench.solvers.pesto.ilp import fine_balance
    >>> g, c = samples.lstm_grid(24, layers=2), Cluster.preset("4xV100-nvlink")
    >>> p = Plan(g, {v: "gpu0" for v in g.ops})
    >>> fine_balance(p, c, 0.25)["holds"]
    False
    >>> q, moved = repair_balance(p, c, 0.25)
    >>> fine_balance(q, c, 0.25)["holds"], moved > 0
    (True, True)
    >>> repair_balance(q, c, 0.25) == (q, 0)
    True
    """
    g = plan.graph
    gc = g.c
    k = len(cluster)
    fp = tensor_footprint(g) if footprint is None else np.asarray(footprint, dtype=float)
    if caps is None:
        caps = balance_caps(fp, cluster, tolerance, groups=gc.coloc.tolist())
    caps = np.asarray(caps, dtype=float)
    dev = plan.device_array(cluster).copy()
    held = np.bincount(dev, weights=fp, minlength=k)
    limit = caps * (1 + 1e-9)
    if (held <= limit).all():
        return plan, 0
    unit = _units(gc)
    n_units = int(unit.max()) + 1
    ufp = np.bincount(unit, weights=fp, minlength=n_units)
    udev = np.zeros(n_units, dtype=np.int64)
    udev[unit] = dev
    runs = np.isfinite(cluster.op_times(g))                      # ops x devices
    ok = np.ones((n_units, k), dtype=bool)
    np.logical_and.at(ok, unit, runs)
    umem = np.bincount(unit, weights=np.asarray(gc.memory, float), minlength=n_units)
    mem = np.bincount(udev, weights=umem, minlength=k)
    room = np.array([d.memory for d in cluster.devices], float) * (1 + 1e-9)
    conn, ptr, nbr, wts = _connections(gc, unit, udev, n_units, k)
    if mode not in MODES:
        raise SolverError(f"repair_balance: mode must be one of {', '.join(MODES)}, got {mode!r}")
    topo = np.full(n_units, -1, dtype=np.int64)
    np.maximum.at(topo, unit, np.arange(gc.n))   # ops are in topological order
    rank = {"head": -1.0, "tail": 1.0}.get(mode, 0.0) * topo
    moved = np.zeros(n_units, dtype=bool)
    while True:
        over = np.flatnonzero(held > limit)
        if over.size == 0 or (budget is not None and budget.over()):
            break
        d = int(over[np.argmax(held[over] / caps[over])])
        cand = np.flatnonzero(udev == d)
        fits = ok[cand] & (held[None, :] + ufp[cand, None] <= limit[None, :]) \
            & (mem[None, :] + umem[cand, None] <= room[None, :])
        fits[:, d] = False
        # bytes kept together by the move, then the emptier target, then the larger unit
        score = conn[cand] - 1e-6 * (held / caps)[None, :]
        if mode == "cut":
            score = score - conn[cand, d][:, None]
        elif mode == "ratio":  # bytes cut per byte of footprint moved
            score = (conn[cand] - conn[cand, d][:, None]) / np.maximum(ufp[cand, None], 1.0)
        else:                  # the unit by position first, its target by bytes then
            movable = fits.any(axis=1)
            if movable.any():
                best = np.flatnonzero(movable)[np.argmax(rank[cand][movable])]
                fits[np.arange(len(cand)) != best] = False
        score = np.where(fits, score + 1e-12 * ufp[cand, None], -np.inf)
        flat = int(np.argmax(score))
        if not np.isfinite(score.flat[flat]):
            break  # no unit fits anywhere (memory, devices that cannot run it): left as is
        u, e = int(cand[flat // k]), flat % k
        _move(u, d, e, held, mem, ufp, umem, udev, moved, conn, ptr, nbr, wts)
    if refine:
        state = (held, limit, mem, room, ok, ufp, umem, udev, conn, ptr, nbr, wts, moved)
        _refine(*state, k, budget=budget)
    new_dev = udev[unit]
    names = cluster.names
    placement = {v: names[int(new_dev[i])] for i, v in enumerate(g.ops)}
    return plan.with_placement(placement), int((new_dev != dev).sum())
