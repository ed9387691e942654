"""The per-op extra times of the calibrated judge's changes and the simulation that applies them
(:func:`simulate_overlap`): overlap with other devices' ops, wake-ups, hand-offs, live memory.

The simulator is not changed: it is handed each op's time on its device
(``workbench.simulate(plan, cluster, op_times=...)``), the extras read off the previous pass's
schedule, to a fixed point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["IDLE_CAP_MS", "WAKEUP_IDLE_MS", "HandoffCosts", "busy_overlap", "handoff_idle",
           "live_bytes", "sent_tensors", "simulate_overlap", "woken_ops"]

WAKEUP_IDLE_MS = 0.1
"""A device whose thread idled at least this long before a tensor from another device woke it
pays the ``wakeup`` change's latency (see :func:`woken_ops`)."""

IDLE_CAP_MS = 1.0
"""Idle periods longer than this cost no more than this one (the line is not extrapolated)."""


@dataclass(frozen=True)
class HandoffCosts:
    """Per-tensor costs of a cross-device hand-off (ms); see the module docstring.

    ``points``: the ping-pong measurements ``(idle_ms, handoff_ms)`` the line was fitted to
    (each the median of its passes); ``pass_points``: every pass's, in the order they ran.

    >>> h = HandoffCosts(send_ms=0.002, recv_ms=0.002, latency_ms=0.003, slope=0.04)
    >>> round(float(h.latency(0.1)), 4), round(float(h.latency(5.0)), 4)   # idle capped at 1 ms
    (0.007, 0.043)
    """

    send_ms: float
    recv_ms: float
    latency_ms: float
    slope: float
    points: tuple = field(default=(), compare=False)
    pass_points: tuple = field(default=(), compare=False)

    def latency(self, idle_ms):
        """Hand-off delay (ms) after the receiver idled ``idle_ms`` (scalar or array)."""
        return self.latency_ms + self.slope * np.minimum(np.maximum(idle_ms, 0.0), IDLE_CAP_MS)

    def to_dict(self) -> dict:
        return {"send_ms": self.send_ms, "recv_ms": self.recv_ms,
                "handoff_latency_ms": self.latency_ms, "handoff_slope": self.slope}



def busy_overlap(device, start, end) -> np.ndarray:
    """Per op, the fraction of its run during which another device was running an op (0-1):
    ``device``, ``start``, ``end`` are per-op arrays (a device runs one op at a time). With
    more than two devices the other devices' busy times are added (capped at the op's run).

    >>> busy_overlap([0, 0, 1], [0.0, 2.0, 1.0], [2.0, 4.0, 3.0]).tolist()
    [0.5, 0.5, 1.0]
    """
    dev = np.asarray(device)
    st, en = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
    dur = en - st
    busy = np.zeros(len(dev))
    for d in np.unique(dev):
        on = dev == d
        order = np.argsort(st[on], kind="stable")
        s_d, e_d = st[on][order], en[on][order]
        cum = np.concatenate([[0.0], np.cumsum(e_d - s_d)])

        def upto(x, s_d=s_d, e_d=e_d, cum=cum):  # busy time of device d before x
            k = np.searchsorted(s_d, x, side="right")
            last = np.clip(np.minimum(x, e_d[np.maximum(k - 1, 0)]) - s_d[np.maximum(k - 1, 0)],
                           0.0, None)
            return cum[np.maximum(k - 1, 0)] + np.where(k > 0, last, 0.0)

        other = ~on
        busy[other] += upto(en[other]) - upto(st[other])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(dur > 0, np.clip(busy / np.where(dur > 0, dur, 1.0), 0.0, 1.0), 0.0)



def handoff_idle(graph, schedule) -> np.ndarray:
    """Per op (graph order), how long (ms) its device had been idle when the simulated
    ``schedule`` starts it, where that start waits for an input from another device (its latest
    input ends on another device after the device's previous op: a hand-off wakes the device),
    or, for the first op of a device other than the one that starts first, its start time (a
    device thread woken at the step's start); ``-1`` for every other op.

    >>> from workbench import samples, Plan, Cluster, simulate
    >>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
    >>> s = simulate(Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"}), c)
    >>> [v for v, x in zip(g.ops, handoff_idle(g, s)) if x >= 0]   # gpu1 starts; d waits on c
    ['c', 'd']
    """
    gc = graph.c
    dev, st, en = np.asarray(schedule.device), schedule.start, schedule.end
    prev_end = np.full(gc.n, -np.inf)
    first_dev = int(dev[int(np.argmin(st))]) if gc.n else -1
    out = np.full(gc.n, -1.0)
    for d in np.unique(dev):
        ops = np.flatnonzero(dev == d)
        ops = ops[np.argsort(st[ops], kind="stable")]
        prev_end[ops[1:]] = en[ops[:-1]]
        if int(d) != first_dev and len(ops):
            out[ops[0]] = max(0.0, float(st[ops[0]]))
    for i in range(gc.n):
        if out[i] >= 0 or not gc.pred[i]:
            continue
        pe = prev_end[i]
        last = max(gc.pred[i], key=lambda u: en[u])
        if dev[last] != dev[i] and en[last] >= (pe if np.isfinite(pe) else -np.inf):
            out[i] = max(0.0, float(st[i] - (pe if np.isfinite(pe) else 0.0)))
    return out


def live_bytes(graph, start, end) -> np.ndarray:
    """Per op, the bytes of tensors live when it starts (the ``live_memory`` model change): an
    op's output (its largest outgoing tensor) is live from the op's end until the end of its
    last consumer; ``start`` and ``end`` are per-op times of one schedule (any devices: logical
    devices of one process share the memory). Outputs nobody consumes are not counted.

    >>> from workbench import samples
    >>> g = samples.diamond()          # a -> b, a -> c, b -> d, c -> d
    >>> [g.edge(u, v)["bytes"] for u, v in g.edges()]
    [10000000.0, 10000000.0, 10000000.0, 10000000.0]
    >>> live_bytes(g, [0, 1, 2, 3], [1, 2, 3, 4]).tolist()   # one device, order a b c d
    [0.0, 10000000.0, 20000000.0, 20000000.0]
    """
    gc = graph.c
    st, en = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
    if gc.m == 0:
        return np.zeros(gc.n)
    size = np.zeros(gc.n)
    np.maximum.at(size, gc.src, np.asarray(gc.bytes, dtype=float))
    last = np.full(gc.n, -np.inf)
    np.maximum.at(last, gc.src, en[gc.dst])
    has = np.isfinite(last)
    born, dies, w = en[has], last[has], size[has]
    ob, od = np.argsort(born, kind="stable"), np.argsort(dies, kind="stable")
    cb = np.concatenate([[0.0], np.cumsum(w[ob])])
    cd = np.concatenate([[0.0], np.cumsum(w[od])])
    return (cb[np.searchsorted(born[ob], st, side="right")]
            - cd[np.searchsorted(dies[od], st, side="right")])


def woken_ops(graph, schedule, *, idle_ms: float = WAKEUP_IDLE_MS) -> np.ndarray:
    """Per op (graph order), True where the simulated ``schedule`` starts it on a device that had
    been idle for at least ``idle_ms`` and whose start waits for an input from another device
    (:func:`handoff_idle`), or where it is the first op of a device other than the one that
    starts first (a device thread woken at the step's start). These are the hand-offs the
    ``wakeup`` change charges.

    >>> from workbench import samples, Plan, Cluster, simulate
    >>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
    >>> s = simulate(Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"}), c)
    >>> [v for v, w in zip(g.ops, woken_ops(g, s, idle_ms=0.0)) if w]  # gpu1 starts; d waits on c
    ['c', 'd']
    """
    idle = handoff_idle(graph, schedule)
    first = np.zeros(len(idle), dtype=bool)
    dev, st = np.asarray(schedule.device), schedule.start
    if len(idle):
        first_dev = int(dev[int(np.argmin(st))])
        for d in np.unique(dev):
            if int(d) != first_dev:
                ops = np.flatnonzero(dev == d)
                first[ops[np.argmin(st[ops])]] = True
    return first | (idle >= idle_ms)


def sent_tensors(plan, cluster) -> np.ndarray:
    """Per op (graph order), the number of other devices its consumers are on: the ``_Send``
    ops TensorFlow adds after it (one per output tensor and destination device; an op's
    outputs are counted as one tensor).

    >>> from workbench import samples, Plan, Cluster
    >>> g = samples.diamond()
    >>> sent_tensors(Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"}),
    ...              Cluster.preset("2xV100-pcie")).tolist()
    [1.0, 0.0, 1.0, 0.0]
    """
    gc = plan.graph.c
    dev = plan.device_array(cluster)
    return np.array([len({int(dev[j]) for j in gc.succ[i]} - {int(dev[i])})
                     for i in range(gc.n)], dtype=float)


def simulate_overlap(plan, cluster, slope: float, *, iterations: int = 3, wakeup_ms: float = 0.0,
                     idle_ms: float = WAKEUP_IDLE_MS, send_ms: float = 0.0,
                     handoff_slope: float = 0.0, idle_cap_ms: float = 1.0,
                     memory_slope: float = 0.0, memory_base=None,
                     memory_cap: float = math.inf, **sim_kw):
    """:func:`workbench.simulate` with the per-op extras of the optional model changes:

    * ``overlap``: each op's compute time ``t`` becomes ``t * (1 + slope * x)``, ``x`` its
      overlap with other devices' ops (:func:`busy_overlap`);
    * ``wakeup``: ``wakeup_ms`` more where :func:`woken_ops` marks it;
    * ``handoff``: ``send_ms`` per tensor an op sends to another device
      (:func:`sent_tensors`, static), and ``handoff_slope * min(idle, idle_cap_ms)`` where its
      start is a hand-off after its device idled ``idle`` ms (:func:`handoff_idle`);
    * ``live_memory``: ``t * memory_slope * (live - base) / 1e6``, ``live`` the bytes live when
      the op starts (:func:`live_bytes`) and ``base`` the same op's in a reference schedule
      (``memory_base``, per op; default 0), both capped at ``memory_cap`` bytes (the last-level
      cache: beyond it more live memory evicts nothing more); never less than ``-t / 2``.

    The dynamic extras are read off the previous iteration's schedule (starting from the plain
    simulation; ``iterations`` fixed-point passes). The simulator itself is unchanged: it is
    handed each op's time with its extras (``simulate(..., op_times=)``).

    >>> from workbench import samples, Plan, Cluster, simulate
    >>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
    >>> p = Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"})
    >>> simulate_overlap(p, c, 0.0).makespan == simulate(p, c).makespan
    True
    >>> simulate_overlap(p, c, 0.5).makespan > simulate(p, c).makespan   # b and c overlap
    True
    >>> simulate_overlap(p, c, 0.0, wakeup_ms=1.0).makespan > simulate(p, c).makespan
    True
    >>> simulate_overlap(p, c, 0.0, send_ms=1.0).makespan > simulate(p, c).makespan
    True
    >>> simulate_overlap(p, c, 0.0, memory_slope=0.5).makespan > simulate(p, c).makespan
    True
    """
    from ..simulate import simulate

    if not (slope > 0 or wakeup_ms > 0 or send_ms > 0 or handoff_slope > 0
            or memory_slope > 0):
        return simulate(plan, cluster, **sim_kw)
    g = plan.graph
    base = cluster.op_times(g)[np.arange(g.n_ops), plan.device_array(cluster)]
    static = send_ms * sent_tensors(plan, cluster) if send_ms > 0 else 0.0 * base
    s = simulate(plan, cluster, op_times=base + static, **sim_kw)
    dynamic = slope > 0 or wakeup_ms > 0 or handoff_slope > 0 or memory_slope > 0
    mem_base = 0.0 if memory_base is None else np.asarray(memory_base, dtype=float)
    mem_base = np.minimum(mem_base, memory_cap)
    for _ in range(max(1, int(iterations)) if dynamic else 0):
        extra = base * slope * busy_overlap(s.device, s.start, s.end) if slope > 0 else 0.0 * base
        if wakeup_ms > 0:
            extra = extra + wakeup_ms * woken_ops(g, s, idle_ms=idle_ms)
        if handoff_slope > 0:
            idle = handoff_idle(g, s)
            extra = extra + np.where(idle >= 0, handoff_slope * np.minimum(idle, idle_cap_ms),
                                     0.0)
        if memory_slope > 0:
            live = np.minimum(live_bytes(g, s.start, s.end), memory_cap) - mem_base
            extra = extra + np.maximum(base * memory_slope * live / 1e6, -0.5 * base)
        s = simulate(plan, cluster, op_times=base + static + extra, **sim_kw)
    return s
