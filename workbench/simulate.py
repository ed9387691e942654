"""The judge: a discrete-event simulator of a plan on a cluster, the pipelined max-load, and
:func:`evaluate`, which reports both objectives with feasibility and gaps.

Model
-----
* Each device runs one op at a time; an op of compute time ``t`` on a device of speed ``s``
  takes ``t / s`` ms and starts once all of its inputs are on the device.
* A tensor is sent once per destination device (edges from one op to several consumers on one
  device share the transfer). In ``direct`` mode it travels over the directed link
  ``src -> dst``; in ``host`` mode it is uploaded once over ``src -> host`` and downloaded over
  ``host -> dst`` by each staged destination (see :mod:`workbench.cluster`).
* With ``congestion=True`` every channel is a capacity-1 FIFO resource (Pesto's model); with
  ``congestion=False`` transfers never wait for each other.
* A device with ``recv_overhead`` spends that time on every tensor it receives (LogP's *o*);
  it is added to the tensor's first consumer on the device (lowest topological index).
* Op order per device: ``"plan"`` follows ``plan.order`` exactly; ``"fifo"`` runs ready ops in
  the order they became ready (like TensorFlow's executor); ``"rank"`` runs the ready op of
  highest upward rank first. By default a plan's own order is used when it has one, else FIFO.

Events are kept in a heap of ``(time, priority, sequence, event)``; all events at one instant are
applied before devices and channels pick their next work, so results do not depend on the heap's
tie-breaking.

Examples
--------
>>> from workbench import samples, Cluster, Plan, simulate
>>> g = samples.diamond()
>>> c = Cluster.preset("2xV100-pcie")
>>> s = simulate(Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"}), c)
>>> round(s.makespan, 3)
6.04
>>> s.critical_ops()
['a', 'c', 'd']
"""

from __future__ import annotations

import heapq
import math
import sys
from collections import deque

import numpy as np

from .errors import GraphError, PlanError
from .liveness import live_intervals, live_peaks
from .costs.pipeline import op_shares
from .plan import Metrics, Plan, Schedule

__all__ = ["simulate", "max_load", "device_loads", "evaluate", "receive_overheads", "ORDERS"]

ORDERS = ("plan", "fifo", "rank")

_OP_END = 0
_XFER_END = 1


def _overflow(op: str, start: float, duration: float, where: str, what: str = "it") -> None:
    """Times are float64 milliseconds: a finish time beyond ~1.8e308 is ``inf``, and an order
    of infinite times means nothing (it used to be reported as a deadlock)."""
    raise GraphError(f"simulated times overflow: op {op!r}: {what} would start at {start:.6g} "
                     f"ms and take {duration:.6g} ms on {where}, which ends beyond the largest "
                     f"float ({sys.float_info.max:.3g} ms); the graph's costs are too large")


def _overflowed_order(dur: list, names, device: str) -> None:
    """Before blaming a deadlocked order: if the op times add up to ``inf`` (in topological
    order), the order was most likely built from overflowed times (a solver's own schedule);
    say so, naming the op where the sum overflows."""
    total = np.cumsum(np.asarray(dur, dtype=float))
    bad = np.flatnonzero(~np.isfinite(total))
    if len(bad):
        i = int(bad[0])
        raise GraphError(f"simulated times overflow: the op times add up beyond the largest "
                         f"float ({sys.float_info.max:.3g} ms) at op {names[i]!r} "
                         f"({dur[i]:.6g} ms), so the execution order on {device!r}, built from "
                         f"such times, cannot be run; the graph's costs are too large")


def simulate(plan: Plan, cluster, *, congestion: bool = True, order: str | None = None) -> Schedule:
    """Simulate ``plan`` on ``cluster`` and return the realised :class:`Schedule`.

    Parameters
    ----------
    plan : Plan
    cluster : Cluster
    congestion : bool
        Transfers on one channel queue behind each other (FIFO) when True.
    order : {"plan", "fifo", "rank"} or None
        How each device picks its next op; None = the plan's order if it has one, else FIFO.

    Raises
    ------
    PlanError
        If the plan does not fit the graph/cluster, ``order="plan"`` without an order, or an
        order that deadlocks (an op waits for one queued after it on the same device).
    GraphError
        If a time overflows (costs near 1e308 ms add up to ``inf``), naming the op.
    """
    if order is None:
        order = "plan" if plan.order is not None else "fifo"
    if order not in ORDERS:
        raise PlanError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    if order == "plan" and plan.order is None:
        raise PlanError(f"plan {plan.method!r} has no execution order; use order='fifo' or 'rank'")
    g = plan.graph
    gc, cc = g.c, cluster.c
    n, nd = gc.n, cc.n
    dev = plan.device_array(cluster)
    times = cluster.op_times(g)
    dur = times[np.arange(n), dev]
    if cc.recv_overhead.any():
        dur = dur + receive_overheads(g, cluster, dev)
    dur = dur.tolist()
    devl = dev.tolist()

    # --- per-op output groups: (consumer device, bytes, comm) -> consumers
    _src_l, dst_l = gc.src.tolist(), gc.dst.tolist()
    bytes_l = gc.bytes.tolist()
    comm_l = [None if c != c else c for c in gc.comm.tolist()]  # None = use the link model
    out_edges = gc.out_edges
    host_mode = cc.host_mode
    lat, inv = cc.lat.tolist(), cc.inv_bw.tolist()
    up_lat, up_inv = cc.up_lat.tolist(), cc.up_inv_bw.tolist()
    staged = cc.staged.tolist()
    shares = op_shares(g)  # replicas of a stage: transfers scaled by their share of the stream
    share = [1.0] * n if shares is None else shares.tolist()

    remaining = [len(gc.in_edges[i]) for i in range(n)]
    ready_t = [0.0] * n
    why_input: list = [None] * n       # what delivered the last input: ("op", j) / ("transfer", k)
    start = [math.nan] * n
    rank = [0] * n                   # order in which the ops were started
    n_started = 0
    end = [math.nan] * n
    why: list = [None] * n             # binding predecessor of each op's start

    # transfers
    t_op: list = []
    t_src: list = []
    t_dst: list = []
    t_start: list = []
    t_end: list = []
    t_bytes: list = []
    t_dur: list = []
    t_payload: list = []              # ("deliver", consumers) or ("stage", [(dst_dev, consumers)])
    t_why: list = []
    n_channels = 2 * nd if host_mode else nd * nd
    chan_queue = [deque() for _ in range(n_channels)]
    chan_busy = [False] * n_channels
    chan_last = [None] * n_channels   # last transfer on channel (for the critical path)
    chan_free_t = [0.0] * n_channels
    dirty_chan: list = []

    busy = [False] * nd
    dev_last = [None] * nd
    dev_free_t = [0.0] * nd
    dirty_dev: set = set()

    if order == "plan":
        seq = [[g.index[v] for v in plan.order.get(d.name, [])] for d in cluster.devices]
        pos = [0] * nd
    else:
        readyq: list = [[] for _ in range(nd)]
        if order == "rank":
            from .analysis import levels

            prio = (-levels(g, cluster).blevel).tolist()
        else:
            prio = None
    topo = list(range(n))  # op index == topological position

    heap: list = []
    counter = 0

    def input_ready(v: int, t: float, cause) -> None:
        remaining[v] -= 1
        if t >= ready_t[v]:
            ready_t[v] = t
            why_input[v] = cause
        if remaining[v] == 0:
            d = devl[v]
            if order != "plan":
                key = prio[v] if prio is not None else ready_t[v]
                heapq.heappush(readyq[d], (key, topo[v], v))
            dirty_dev.add(d)

    def new_transfer(u: int, a: int, b: int, chan: int, nbytes: float, duration: float,
                     payload, ready: float, cause) -> None:
        k = len(t_op)
        t_op.append(u)
        t_src.append(a)
        t_dst.append(b)
        t_start.append(math.nan)
        t_end.append(math.nan)
        t_bytes.append(nbytes)
        t_dur.append(duration)
        t_payload.append(payload)
        t_why.append(cause)
        if congestion:
            chan_queue[chan].append((k, chan))
            dirty_chan.append(chan)
        else:
            start_transfer(k, chan, ready)

    def start_transfer(k: int, chan: int, t: float) -> None:
        nonlocal counter
        t_start[k] = t
        t_end[k] = t + t_dur[k]
        if t_end[k] == math.inf:
            _overflow(gc.names[t_op[k]], t, t_dur[k], "a link", "its output transfer")
        if congestion:
            if chan_last[chan] is not None and chan_free_t[chan] >= t and t_why[k] is not None:
                # the transfer waited for the channel rather than for its data
                if chan_free_t[chan] > _cause_time(t_why[k]):
                    t_why[k] = ("transfer", chan_last[chan])
            chan_busy[chan] = True
            chan_last[chan] = k
            chan_free_t[chan] = t_end[k]
        counter += 1
        heapq.heappush(heap, (t_end[k], 0, counter, _XFER_END, k, chan))

    def _cause_time(cause) -> float:
        kind, x = cause
        return end[x] if kind == "op" else t_end[x]

    def op_finished(u: int, t: float) -> None:
        a = devl[u]
        groups: dict = {}
        for e in out_edges[u]:
            v = dst_l[e]
            b = devl[v]
            if b == a:
                input_ready(v, t, ("op", u))
                continue
            c = comm_l[e]
            if host_mode:
                key = (bytes_l[e], c)
                groups.setdefault(key, {}).setdefault(b, []).append(v)
            else:
                groups.setdefault((b, bytes_l[e], c), []).append(v)
        if not groups:
            return
        if host_mode:
            su = share[u]
            for (nb, c), by_dev in groups.items():
                if staged[a]:
                    d_up = (c if c is not None else up_lat[a] + nb * up_inv[a]) * su
                    new_transfer(u, a, -1, a, nb * su, d_up, ("stage", by_dev, nb, c), t,
                                 ("op", u))
                else:
                    stage_out(u, by_dev, nb, c, t, ("op", u))
        else:
            for (b, nb, c), consumers in groups.items():
                f = share[u] * max(share[v] for v in consumers)
                d_t = (c if c is not None else lat[a][b] + nb * inv[a][b]) * f
                new_transfer(u, a, b, a * nd + b, nb * f, d_t, ("deliver", consumers), t,
                             ("op", u))

    def stage_out(u: int, by_dev: dict, nb: float, c, t: float, cause) -> None:
        for b, consumers in by_dev.items():
            if staged[b]:
                f = share[u] * max(share[v] for v in consumers)
                d_down = (c if c is not None else up_lat[b] + nb * up_inv[b]) * f
                new_transfer(u, -1, b, nd + b, nb * f, d_down, ("deliver", consumers), t, cause)
            else:
                for v in consumers:
                    input_ready(v, t, cause)

    def start_op(d: int, v: int, t: float) -> None:
        nonlocal counter, n_started
        start[v] = t
        rank[v] = n_started
        n_started += 1
        end[v] = t + dur[v]
        if end[v] == math.inf:
            _overflow(gc.names[v], t, dur[v], repr(cluster.names[d]))
        # binding cause: the device (previous op) if it freed later than the inputs arrived
        if dev_last[d] is not None and dev_free_t[d] > ready_t[v]:
            why[v] = ("op", dev_last[d])
        else:
            why[v] = why_input[v]
        busy[d] = True
        dev_last[d] = v
        dev_free_t[d] = end[v]
        counter += 1
        heapq.heappush(heap, (end[v], 1, counter, _OP_END, v, d))

    for v in range(n):
        if remaining[v] == 0:
            d = devl[v]
            if order != "plan":
                key = prio[v] if prio is not None else 0.0
                heapq.heappush(readyq[d], (key, topo[v], v))
            dirty_dev.add(d)

    t = 0.0
    while True:
        # dispatch channels and devices at time t
        while dirty_chan:
            ch = dirty_chan.pop()
            if not chan_busy[ch] and chan_queue[ch]:
                k, _ = chan_queue[ch].popleft()
                start_transfer(k, ch, t)
        if dirty_dev:
            for d in sorted(dirty_dev):
                if busy[d]:
                    continue
                if order == "plan":
                    if pos[d] < len(seq[d]):
                        v = seq[d][pos[d]]
                        if remaining[v] == 0:
                            pos[d] += 1
                            start_op(d, v, t)
                elif readyq[d]:
                    _, _, v = heapq.heappop(readyq[d])
                    start_op(d, v, t)
            dirty_dev.clear()
        if not heap:
            break
        t = heap[0][0]
        while heap and heap[0][0] == t:
            _, _, _, kind, x, r = heapq.heappop(heap)
            if kind == _OP_END:
                busy[r] = False
                dirty_dev.add(r)
                op_finished(x, t)
            else:
                if congestion:
                    chan_busy[r] = False
                    dirty_chan.append(r)
                payload = t_payload[x]
                if payload[0] == "deliver":
                    for v in payload[1]:
                        input_ready(v, t, ("transfer", x))
                else:
                    stage_out(t_op[x], payload[1], payload[2], payload[3], t, ("transfer", x))

    if any(math.isnan(s) for s in start):
        stuck = next(v for v in range(n) if math.isnan(start[v]))
        d = devl[stuck]
        name = gc.names[stuck]
        if order == "plan":
            head = gc.names[seq[d][pos[d]]] if pos[d] < len(seq[d]) else None
            _overflowed_order(dur, gc.names, cluster.names[d])
            raise PlanError(
                f"plan {plan.method!r}: the execution order on {cluster.names[d]!r} deadlocks: "
                f"{head!r} is queued first but waits for an input that can only come later "
                f"(op {name!r} never ran); the order must respect precedence")
        raise PlanError(f"simulation stalled: op {name!r} never ran")  # pragma: no cover

    start_a, end_a = np.array(start), np.array(end)
    makespan = float(end_a.max()) if n else 0.0
    # realised critical path: walk back the binding causes from the op that ends last
    path: list = []
    if n:
        item = ("op", int(np.argmax(end_a)))
        guard = 0
        while item is not None and guard <= n + len(t_op) + 1:
            guard += 1
            kind, x = item
            if kind == "op":
                path.append(("op", gc.names[x]))
                item = why[x]
            else:
                path.append(("transfer", x))
                item = t_why[x]
        path.reverse()
    mem = np.bincount(dev, weights=gc.memory, minlength=nd)
    t_src_a = np.array(t_src, dtype=np.int64)
    t_dst_a = np.array(t_dst, dtype=np.int64)
    t_bytes_a = np.array(t_bytes, dtype=float)
    link_bytes: dict = {}
    names = cluster.names
    for s_, d_, b_ in zip(t_src, t_dst, t_bytes):
        key = f"{names[s_] if s_ >= 0 else 'host'}->{names[d_] if d_ >= 0 else 'host'}"
        link_bytes[key] = link_bytes.get(key, 0.0) + b_
    t_op_a, t_start_a, t_end_a = (np.array(t_op, dtype=np.int64), np.array(t_start, dtype=float),
                                  np.array(t_end, dtype=float))
    live = live_peaks(*live_intervals(g, dev, start_a, end_a, t_op_a, t_dst_a, t_start_a,
                                      t_end_a, nd=nd), nd)  # memory over time
    return Schedule(
        graph=g, cluster=cluster, device=dev, start=start_a, end=end_a,
        t_op=t_op_a, t_src=t_src_a, t_dst=t_dst_a, t_start=t_start_a, t_end=t_end_a,
        t_bytes=t_bytes_a, makespan=makespan, critical_path=path,
        peak_memory={names[i]: float(mem[i]) for i in range(nd)}, link_bytes=link_bytes,
        method=plan.method, run_rank=np.array(rank, dtype=np.int64),
        peak_live_memory={names[i]: float(live[i]) for i in range(nd)})


def device_loads(plan: Plan, cluster) -> np.ndarray:
    """Pipelined load of every device (ms per sample), in cluster device order.

    The accounting of Tarnawski et al. (Section 5.1.1; see ``sample_graphs/msr/README.md``):
    a device's load is the compute time of its ops plus, for each tensor it sends off-device, the
    transfer time (in host mode: once per op output, if the device is staged) and, for each
    tensor it receives, the transfer time (once per producing op and receiving device). Devices
    that are not staged (``cpu`` in host mode) pay no communication. Training graphs need no
    special case: a device's forward and backward ops are simply both on it.

    >>> from workbench import samples, Cluster, Plan
    >>> g = samples.diamond()
    >>> c = Cluster.preset("2xV100-pcie")
    >>> device_loads(Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"}), c).round(3).tolist()
    [6.04, 4.04]
    """
    g = plan.graph
    gc, cc = g.c, cluster.c
    nd = cc.n
    dev = plan.device_array(cluster)
    times = cluster.op_times(g)[np.arange(gc.n), dev]
    load = np.bincount(dev, weights=times, minlength=nd).astype(float)
    if gc.m == 0:
        return load
    ds, dd = dev[gc.src], dev[gc.dst]
    cross = ds != dd
    if not cross.any():
        return load
    src, _dst = gc.src[cross], gc.dst[cross]
    ds, dd = ds[cross], dd[cross]
    nb, cm = gc.bytes[cross], gc.comm[cross]
    fixed = ~np.isnan(cm)
    shares = op_shares(g)  # replica ops pay for their share of the stream (Appendix C.2)
    if cc.host_mode:
        out_t = np.where(fixed, np.nan_to_num(cm), cc.up_lat[ds] + nb * cc.up_inv_bw[ds])
        out_t = np.where(cc.staged[ds], out_t, 0.0)
        in_t = np.where(fixed, np.nan_to_num(cm), cc.up_lat[dd] + nb * cc.up_inv_bw[dd])
        in_t = np.where(cc.staged[dd], in_t, 0.0)
        if shares is not None:
            in_t = in_t * shares[src] * shares[_dst]
        # sender pays once per produced tensor
        per_src = np.zeros(gc.n)
        np.maximum.at(per_src, src, out_t)
        np.add.at(load, dev, per_src if shares is None else per_src * shares)
    else:
        link_t = np.where(fixed, np.nan_to_num(cm), cc.lat[ds, dd] + nb * cc.inv_bw[ds, dd])
        if shares is not None:
            link_t = link_t * shares[src] * shares[_dst]
        out_t = in_t = link_t
        # sender pays once per (tensor, destination device)
        load += _pair_max_sum(src, dd, out_t, ds, nd)
    # receiver pays once per (tensor, receiving device)
    load += _pair_max_sum(src, dd, in_t, dd, nd)
    return load


def _pair_max_sum(src: np.ndarray, dd: np.ndarray, cost: np.ndarray, charge_to: np.ndarray,
                  nd: int) -> np.ndarray:
    """Sum over unique (src op, destination device) pairs of the max cost, charged to a device."""
    key = src * nd + dd
    order = np.lexsort((-cost, key))
    key_s = key[order]
    first = np.ones(len(key_s), dtype=bool)
    first[1:] = key_s[1:] != key_s[:-1]
    pick = order[first]
    return np.bincount(charge_to[pick], weights=cost[pick], minlength=nd)


def receive_overheads(graph, cluster, dev: np.ndarray) -> np.ndarray:
    """Per op: the receive overhead (``Device.recv_overhead``) of the tensors it is the first
    consumer of on its device. A tensor is one transfer as the simulator counts them: one per
    producing op, destination device and edge size (and fixed ``comm``).

    >>> from workbench import samples, Cluster, Device
    >>> g = samples.diamond()
    >>> c = Cluster([Device("g0"), Device("g1", recv_overhead=0.5)])
    >>> receive_overheads(g, c, np.array([0, 1, 1, 0])).tolist()
    [0.0, 0.5, 0.0, 0.0]
    """
    gc = graph.c
    over = cluster.c.recv_overhead
    out = np.zeros(gc.n)
    dev = np.asarray(dev)
    cross = np.nonzero(dev[gc.src] != dev[gc.dst])[0]
    first: dict = {}
    for e, u, v, nb, cm in zip(cross.tolist(), gc.src[cross].tolist(), gc.dst[cross].tolist(),
                               gc.bytes[cross].tolist(), gc.comm[cross].tolist()):
        key = (u, int(dev[v]), nb, None if cm != cm else cm)
        if key not in first or v < first[key]:
            first[key] = v
    for (_, b, _, _), v in first.items():
        out[v] += over[b]
    return out


def max_load(plan: Plan, cluster) -> float:
    """Pipelined time-per-sample: the largest device load (see :func:`device_loads`)."""
    loads = device_loads(plan, cluster)
    return float(loads.max()) if len(loads) else 0.0


def evaluate(plan: Plan, cluster, *, congestion: bool = True, order: str | None = None,
             schedule: Schedule | None = None) -> Metrics:
    """Both objectives of ``plan`` with resources, named violations and gaps to lower bounds.

    Violations are memory over a device's capacity and colocation groups split over devices.

    >>> from workbench import samples, Cluster, Plan, evaluate
    >>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
    >>> m = evaluate(Plan(g, {v: "gpu0" for v in g.ops}), c)
    >>> m.makespan_ms, m.feasible, m.devices_used
    (6.0, True, 1)
    """
    from .bounds import lower_bounds

    s = schedule if schedule is not None else simulate(plan, cluster, congestion=congestion,
                                                       order=order)
    ml = max_load(plan, cluster)
    violations = []
    frac = live_frac = 0.0
    for d in cluster.devices:
        used = s.peak_memory.get(d.name, 0.0)
        live = s.peak_live_memory.get(d.name, 0.0)
        if d.memory > 0:
            frac = max(frac, used / d.memory)
            live_frac = max(live_frac, live / d.memory)
        else:
            frac = math.inf if used > 0 else frac
            live_frac = math.inf if live > 0 else live_frac
        if used > d.memory * (1 + 1e-9):
            violations.append(f"memory on {d.name}: {used / 2**30:.3f} GiB placed > "
                              f"{d.memory / 2**30:.3f} GiB capacity")
    for grp, members in plan.graph.colocation_groups.items():
        devs = sorted({plan.placement[v] for v in members})
        if len(devs) > 1:
            violations.append(f"colocation group {grp!r} split over {', '.join(devs)}")
    lb = lower_bounds(plan.graph, cluster)
    return Metrics(
        makespan_ms=s.makespan, max_load_ms=ml,
        comm_ms=float((s.t_end - s.t_start).sum()), comm_bytes=float(s.t_bytes.sum()),
        peak_memory=s.peak_memory, memory_fraction=frac,
        devices_used=len(plan.devices_used()), feasible=not violations, violations=violations,
        makespan_lb=lb["makespan_ms"], max_load_lb=lb["max_load_ms"],
        peak_live_memory=s.peak_live_memory, live_memory_fraction=live_frac)
