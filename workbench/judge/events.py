"""The judge's event core: devices that run one op at a time, channels that carry transfers,
and a heap of events; which op an idle device starts is the order policy's
(:mod:`workbench.judge.policies`) decision.

Events are kept in a heap of ``(time, priority, sequence, kind, item, resource)``; all events at
one instant are applied before devices and channels pick their next work
(:meth:`EventCore.run`), so results do not depend on the heap's tie-breaking. Transfer
ends (priority 0) are applied before op ends (priority 1) at one instant.

A tensor is sent once per (producing op, destination device, size, fixed ``comm``): directly
over the channel ``src -> dst`` (``src * n_devices + dst``), or in host mode uploaded once over
``src -> host`` (channel ``src``) and downloaded over ``host -> dst`` (channel
``n_devices + dst``) by each staged destination. Every transfer is scaled by the replica
shares of its producer and (the largest of) its consumers (:func:`workbench.costs.op_shares`).
With a ``chain`` (a pipelined plan's stage order, ``direct`` mode), a tensor is forwarded hop by
hop along it instead (:data:`workbench.costs.pipeline_costs.FORWARDED`): one transfer per (producing
op, size, fixed ``comm``, direction) over each hop up to its farthest consumer, handed to the
consumers of every device it reaches on the way.

Examples
--------
>>> import numpy as np
>>> from workbench import samples, Cluster, Plan
>>> from workbench.judge.policies import FifoOrder
>>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
>>> plan = Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"})
>>> dev = plan.device_array(c)
>>> core = EventCore(g, c, dev, c.op_times(g)[np.arange(4), dev].tolist(),
...                  FifoOrder(plan, c), congestion=True)
>>> core.run()
>>> [round(x, 3) for x in core.end], len(core.t_op)     # c on gpu1 waits for a's tensor
([1.0, 3.0, 4.02, 6.04], 2)
"""

from __future__ import annotations

import heapq
import math
import sys
from collections import deque

import numpy as np

from ..costs.pipeline_costs import next_hops, op_shares
from ..errors import GraphError, PlanError

__all__ = ["EventCore", "overflowed_order"]

_OP_END = 0
_XFER_END = 1


def _overflow(op: str, start: float, duration: float, where: str, what: str = "it") -> None:
    """Times are float64 milliseconds: a finish time beyond ~1.8e308 is ``inf``, and an order
    of infinite times means nothing (it used to be reported as a deadlock)."""
    raise GraphError(f"simulated times overflow: op {op!r}: {what} would start at {start:.6g} "
                     f"ms and take {duration:.6g} ms on {where}, which ends beyond the largest "
                     f"float ({sys.float_info.max:.3g} ms); the graph's costs are too large")


def overflowed_order(dur: list, names, device: str) -> None:
    """Before blaming a deadlocked order: if the op times add up to ``inf`` (in topological
    order), the order was most likely built from overflowed times (a solver's own schedule);
    say so, naming the op where the sum overflows.

    >>> overflowed_order([1.0, 2.0], ["a", "b"], "gpu0")     # finite: nothing to say
    >>> overflowed_order([1e308, 1e308], ["a", "b"], "gpu0")
    Traceback (most recent call last):
    ...
    workbench.errors.GraphError: simulated times overflow: the op times add up beyond the largest float (1.8e+308 ms) at op 'b' (1e+308 ms), so the execution order on 'gpu0', built from such times, cannot be run; the graph's costs are too large
    """
    total = np.cumsum(np.asarray(dur, dtype=float))
    bad = np.flatnonzero(~np.isfinite(total))
    if len(bad):
        i = int(bad[0])
        raise GraphError(f"simulated times overflow: the op times add up beyond the largest "
                         f"float ({sys.float_info.max:.3g} ms) at op {names[i]!r} "
                         f"({dur[i]:.6g} ms), so the execution order on {device!r}, built from "
                         f"such times, cannot be run; the graph's costs are too large")


class _Links:
    """The cluster's link model as Python lists (fast scalar access in the event loop)."""

    def __init__(self, graph, cluster, chain=None):
        gc, cc = graph.c, cluster.c
        self.nd = cc.n
        self.dst = gc.dst.tolist()
        self.bytes = gc.bytes.tolist()
        self.comm = [None if c != c else c for c in gc.comm.tolist()]  # None = link model
        self.out_edges = gc.out_edges
        self.host_mode = cc.host_mode
        self.lat, self.inv = cc.lat.tolist(), cc.inv_bw.tolist()
        self.up_lat, self.up_inv = cc.up_lat.tolist(), cc.up_inv_bw.tolist()
        self.staged = cc.staged.tolist()
        shares = op_shares(graph)  # replicas of a stage: transfers scaled by their share
        self.share = [1.0] * gc.n if shares is None else shares.tolist()
        self.n_channels = 2 * self.nd if self.host_mode else self.nd * self.nd
        self.route = (self.dst, self.comm, self.bytes, self.host_mode, self.out_edges)
        # forwarded transfers: chain positions of the devices (-1 off the chain)
        self.chain = None if chain is None or self.host_mode else [int(d) for d in chain]
        self.pos = None
        if self.chain is not None:
            self.pos = [-1] * self.nd
            for i, d in enumerate(self.chain):
                self.pos[d] = i


class _Transfers:
    """The link side of :class:`EventCore`: an op's outputs become transfers (one per
    destination device, size and fixed comm; staged through host memory in host mode), queued
    per channel with congestion, delivered to their consumers when they end."""

    def _init_transfers(self) -> None:
        # transfers, in creation order
        self.t_op: list = []
        self.t_src: list = []
        self.t_dst: list = []
        self.t_start: list = []
        self.t_end: list = []
        self.t_bytes: list = []
        self.t_dur: list = []
        self.t_payload: list = []  # ("deliver", consumers) or ("stage", by_dev, bytes, comm)
        self.t_why: list = []
        nc = self.links.n_channels
        self.chan_queue = [deque() for _ in range(nc)]
        self.chan_busy = [False] * nc
        self.chan_last: list = [None] * nc  # last transfer on a channel (critical path)
        self.chan_free_t = [0.0] * nc
        self.dirty_chan: list = []

    def dispatch_channels(self, t: float) -> None:
        """At ``t``: each freed channel starts its next queued transfer."""
        dirty_chan, chan_busy, chan_queue = self.dirty_chan, self.chan_busy, self.chan_queue
        while dirty_chan:
            ch = dirty_chan.pop()
            if not chan_busy[ch] and chan_queue[ch]:
                k, _ = chan_queue[ch].popleft()
                self.start_transfer(k, ch, t)

    def op_finished(self, u: int, t: float) -> None:
        """Op ``u`` ended at ``t``: feed its consumers on its device, send its tensors to the
        others (one transfer per destination device, size and fixed comm)."""
        L, devl = self.links, self.devl
        dst, comm, nbytes, host_mode, out_edges = L.route
        a = devl[u]
        groups: dict = {}
        input_ready = self.input_ready
        here = ("op", u)
        for e in out_edges[u]:
            v = dst[e]
            b = devl[v]
            if b == a:
                input_ready(v, t, here)
                continue
            if host_mode or L.chain is not None:
                groups.setdefault((nbytes[e], comm[e]), {}).setdefault(b, []).append(v)
            else:
                groups.setdefault((b, nbytes[e], comm[e]), []).append(v)
        if not groups:
            return
        share = L.share
        if host_mode:
            su = share[u]
            for (nb, c), by_dev in groups.items():
                if L.staged[a]:
                    d_up = (c if c is not None else L.up_lat[a] + nb * L.up_inv[a]) * su
                    self.new_transfer(u, a, -1, a, nb * su, d_up, ("stage", by_dev, nb, c), t,
                                      ("op", u))
                else:
                    self.stage_out(u, by_dev, nb, c, t, ("op", u))
            return
        if L.chain is not None:
            for (nb, c), by_dev in groups.items():
                self.forward_out(u, a, by_dev, nb, c, t, here)
            return
        nd = L.nd
        for (b, nb, c), consumers in groups.items():
            f = share[u] * max(share[v] for v in consumers)
            d_t = (c if c is not None else L.lat[a][b] + nb * L.inv[a][b]) * f
            self.new_transfer(u, a, b, a * nd + b, nb * f, d_t, ("deliver", consumers), t,
                              ("op", u))

    def stage_out(self, u: int, by_dev: dict, nb: float, c, t: float, cause) -> None:
        """Host mode: op ``u``'s tensor is in host memory at ``t``; download it to each staged
        destination device, hand it directly to consumers on devices that are not staged."""
        L = self.links
        share = L.share
        for b, consumers in by_dev.items():
            if L.staged[b]:
                f = share[u] * max(share[v] for v in consumers)
                d_down = (c if c is not None else L.up_lat[b] + nb * L.up_inv[b]) * f
                self.new_transfer(u, -1, b, L.nd + b, nb * f, d_down, ("deliver", consumers), t,
                                  cause)
            else:
                for v in consumers:
                    self.input_ready(v, t, cause)

    def forward_out(self, u: int, a: int, by_dev: dict, nb: float, c, t: float, cause) -> None:
        """Forwarded transfers: op ``u``'s tensor is on device ``a`` at ``t``; send it one hop
        along the chain towards the consumers ``by_dev`` (device -> ops) above ``a`` and one
        hop towards those below (each direction one transfer)."""
        L = self.links
        pos, chain, share = L.pos, L.chain, L.share
        pa = pos[a]
        if pa < 0 or any(pos[b] < 0 for b in by_dev):
            off = a if pa < 0 else next(b for b in by_dev if pos[b] < 0)
            raise PlanError(f"op {self.names[u]!r}: its tensor moves to or from device "
                             f"{self.dev_names[off]!r}, which the plan's info['chain'] (the "
                             f"stage order transfers are forwarded along) does not hold")
        for b, part, f in next_hops(by_dev, pos, chain, a, share, u):
            d_t = (c if c is not None else L.lat[a][b] + nb * L.inv[a][b]) * f
            self.new_transfer(u, a, b, a * L.nd + b, nb * f, d_t, ("forward", part, nb, c), t,
                              cause)

    def new_transfer(self, u: int, a: int, b: int, chan: int, nbytes: float, duration: float,
                     payload, ready: float, cause) -> None:
        """Record a transfer of op ``u``'s output from ``a`` to ``b`` (-1 = host); queue it on
        its channel (congestion) or start it at once."""
        k = len(self.t_op)
        self.t_op.append(u)
        self.t_src.append(a)
        self.t_dst.append(b)
        self.t_start.append(math.nan)
        self.t_end.append(math.nan)
        self.t_bytes.append(nbytes)
        self.t_dur.append(duration)
        self.t_payload.append(payload)
        self.t_why.append(cause)
        if self.congestion:
            self.chan_queue[chan].append((k, chan))
            self.dirty_chan.append(chan)
        else:
            self.start_transfer(k, chan, ready)

    def start_transfer(self, k: int, chan: int, t: float) -> None:
        """Start transfer ``k`` on channel ``chan`` at ``t``."""
        self.t_start[k] = t
        end = t + self.t_dur[k]
        self.t_end[k] = end
        if end == math.inf:
            _overflow(self.names[self.t_op[k]], t, self.t_dur[k], "a link", "its output transfer")
        if self.congestion:
            last, free_t = self.chan_last[chan], self.chan_free_t[chan]
            # the transfer waited for the channel rather than for its data
            if (last is not None and free_t >= t and self.t_why[k] is not None
                    and free_t > self._cause_time(self.t_why[k])):
                self.t_why[k] = ("transfer", last)
            self.chan_busy[chan] = True
            self.chan_last[chan] = k
            self.chan_free_t[chan] = end
        self.counter += 1
        heapq.heappush(self.heap, (end, 0, self.counter, _XFER_END, k, chan))

    def transfer_finished(self, k: int, chan: int, t: float) -> None:
        """Transfer ``k`` ended at ``t``: free its channel, deliver (or stage) its tensor."""
        if self.congestion:
            self.chan_busy[chan] = False
            self.dirty_chan.append(chan)
        payload = self.t_payload[k]
        if payload[0] == "deliver":
            for v in payload[1]:
                self.input_ready(v, t, ("transfer", k))
        elif payload[0] == "forward":
            b = self.t_dst[k]
            rest = dict(payload[1])
            for v in rest.pop(b, ()):
                self.input_ready(v, t, ("transfer", k))
            if rest:
                self.forward_out(self.t_op[k], b, rest, payload[2], payload[3], t,
                                 ("transfer", k))
        else:
            self.stage_out(self.t_op[k], payload[1], payload[2], payload[3], t, ("transfer", k))

    def _cause_time(self, cause) -> float:
        kind, x = cause
        return self.end[x] if kind == "op" else self.t_end[x]


class EventCore(_Transfers):
    """One simulation: op and transfer state, channels, devices and the event heap.

    ``chain``: device indices in stage order, to forward transfers along (``None``: direct).

    ``dev`` (device index per op) and ``dur`` (ms per op on its device, receive overheads
    included) are given; ``policy`` picks each idle device's next op. After :meth:`run`,
    ``start``/``end``/``rank`` (per op) and ``t_*`` (per transfer, in creation order) hold the
    timeline and ``why``/``t_why`` the binding cause of each start, as ``("op", i)`` or
    ``("transfer", k)``.
    """

    def __init__(self, graph, cluster, dev, dur: list, policy, *, congestion: bool,
                 chain=None):
        gc = graph.c
        n = gc.n
        self.names, self.dev_names = gc.names, cluster.names
        self.links = _Links(graph, cluster, chain)
        self.devl = np.asarray(dev).tolist()
        self.dur = dur
        self.policy = policy
        self.congestion = congestion
        # ops
        self.remaining = [len(gc.in_edges[i]) for i in range(n)]
        self.ready_t = [0.0] * n
        self.why_input: list = [None] * n   # what delivered the last input
        self.start = [math.nan] * n
        self.end = [math.nan] * n
        self.rank = [0] * n                 # order in which the ops were started
        self.n_started = 0
        self.why: list = [None] * n         # binding predecessor of each op's start
        self._init_transfers()
        nd = self.links.nd
        self.busy = [False] * nd
        self.dev_last: list = [None] * nd
        self.dev_free_t = [0.0] * nd
        self.dirty_dev: set = set()
        self.heap: list = []
        self.counter = 0
        self._op_lists = (self.start, self.end, self.rank, self.why, self.dur, self.dev_last,
                          self.dev_free_t, self.busy, self.ready_t, self.why_input,
                          self.heap)  # bound at once by start_op (speed)
        self._ready_lists = (self.remaining, self.ready_t, self.why_input, self.devl,
                             policy.ready, self.dirty_dev)  # and by input_ready

    # ---------------------------------------------------------------- the loop
    def run(self) -> None:
        """Run every event; ops that never start keep ``start`` NaN (see :meth:`stuck`)."""
        remaining, devl, policy, dirty_dev = self.remaining, self.devl, self.policy, self.dirty_dev
        for v in range(len(remaining)):
            if remaining[v] == 0:
                d = devl[v]
                if policy.ready is not None:
                    policy.ready(v, d, 0.0)
                dirty_dev.add(d)
        heap, busy, pop, pick = self.heap, self.busy, heapq.heappop, policy.pick
        op_finished, transfer_finished = self.op_finished, self.transfer_finished
        start_op, dirty_chan = self.start_op, self.dirty_chan
        t = 0.0
        while True:
            # at t: freed channels start their next queued transfer, idle devices the op their
            # policy picks (devices in index order)
            if dirty_chan:
                self.dispatch_channels(t)
            if dirty_dev:
                for d in sorted(dirty_dev):
                    if not busy[d]:
                        v = pick(d, remaining)
                        if v is not None:
                            start_op(d, v, t)
                dirty_dev.clear()
            if not heap:
                break
            t = heap[0][0]
            while heap and heap[0][0] == t:
                _, _, _, kind, x, r = pop(heap)
                if kind == _OP_END:
                    busy[r] = False
                    dirty_dev.add(r)
                    op_finished(x, t)
                else:
                    transfer_finished(x, r, t)

    def stuck(self) -> int | None:
        """The first op (topological position) that never started, or None."""
        return next((v for v, s in enumerate(self.start) if math.isnan(s)), None)

    # ---------------------------------------------------------------- ops
    def input_ready(self, v: int, t: float, cause) -> None:
        """One input of op ``v`` arrived at ``t``, delivered by ``cause``."""
        remaining, ready_t, why_input, devl, policy_ready, dirty_dev = self._ready_lists
        remaining[v] -= 1
        if t >= ready_t[v]:
            ready_t[v] = t
            why_input[v] = cause
        if remaining[v] == 0:
            d = devl[v]
            if policy_ready is not None:
                policy_ready(v, d, ready_t[v])
            dirty_dev.add(d)

    def start_op(self, d: int, v: int, t: float) -> None:
        """Start op ``v`` on idle device ``d`` at ``t``."""
        start, end_, rank, why, dur, dev_last, dev_free_t, busy, ready_t, why_input, heap = \
            self._op_lists
        start[v] = t
        rank[v] = self.n_started
        self.n_started += 1
        end = end_[v] = t + dur[v]
        if end == math.inf:
            _overflow(self.names[v], t, dur[v], repr(self.dev_names[d]))
        # binding cause: the device (previous op) if it freed later than the inputs arrived
        last = dev_last[d]
        if last is not None and dev_free_t[d] > ready_t[v]:
            why[v] = ("op", last)
        else:
            why[v] = why_input[v]
        busy[d] = True
        dev_last[d] = v
        dev_free_t[d] = end
        self.counter += 1
        heapq.heappush(heap, (end, 1, self.counter, _OP_END, v, d))
