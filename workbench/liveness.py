"""Memory over time in the judge: the peak of *live* memory per device of a simulated schedule,
beside the static sum (every op's ``memory`` on its device, :attr:`Schedule.peak_memory`).

Model (per device, over the simulated step ``[0, makespan]``)
-----------------------------------------------------------
* **Parameters** are resident the whole step: the ``memory`` of every op, except the ops below.
* **Stashes** (training graphs): a forward op with a backward (``bwd``/``update``) successor
  keeps its ``memory`` from its start to the end of its last backward successor. Graphs
  extracted from TensorFlow put exactly such stashed activations there; the bundled samples put
  a layer's weights there, which its gradient reads, so both are counted while they are used.
* **Activations**: an op's output tensor (the largest of its out-edges' ``bytes``) is live on
  the op's device from the op's start to the last of: the ends of its consumers there and the
  ends of the transfers that send it off; on every other device holding consumers of it, from
  the start of the first transfer that brings it there (when none is simulated, a CPU reading
  host DRAM: from the end of the op's upload, else from the op's end) to the end of its last
  consumer there (the tensor bytes there: the largest edge to those consumers). A stashing op's output and its stash are one buffer on its
  device: the larger of the two, for the longer of the two lifetimes.
* At one instant frees come before allocations (an op's input may be reused by the next op's
  output); a tensor live for no time is not counted.

So a device can fit by the static sum and not by liveness (activations in flight on top of its
parameters), or the reverse (stashes that are never all live at once).

Examples
--------
>>> from workbench import samples, Cluster, Plan, simulate
>>> from workbench.graph import OpGraph
>>> g = OpGraph.from_ops([("a", {"compute": {"gpu": 1.0}, "memory": 10.0}),
...                       ("b", {"compute": {"gpu": 2.0}}), ("c", {"compute": {"gpu": 1.0}})],
...                      [("a", "b", {"bytes": 100.0}), ("b", "c", {"bytes": 40.0})])
>>> c = Cluster.preset("2xV100-pcie")
>>> s = simulate(Plan(g, {v: "gpu0" for v in g.ops}), c)
>>> s.peak_memory["gpu0"], s.peak_live_memory["gpu0"]   # 10 resident + a's 100 + b's 40
(10.0, 150.0)
"""

from __future__ import annotations

import numpy as np

__all__ = ["live_intervals", "live_peaks", "memory_timeline"]


def _tensor_bytes(gc) -> np.ndarray:
    size = np.zeros(gc.n)
    if gc.m:
        np.maximum.at(size, gc.src, gc.bytes)
    return size


def live_intervals(graph, device, start, end, t_op, t_dst, t_start, t_end, *, nd: int):
    """Live-memory intervals of a schedule: ``(resident, dev, t0, t1, nbytes)`` with
    ``resident[d]`` the parameter bytes of device ``d`` for the whole step and one row per
    transient buffer (stash or activation) on device ``dev``, live over ``[t0, t1)``.
    Arguments are a :class:`~workbench.plan.Schedule`'s arrays (``nd`` devices)."""
    gc = graph.c
    n = gc.n
    dev = np.asarray(device, dtype=np.int64)
    start, end = np.asarray(start, float), np.asarray(end, float)
    t_op, t_dst = np.asarray(t_op, np.int64), np.asarray(t_dst, np.int64)
    t_start, t_end = np.asarray(t_start, float), np.asarray(t_end, float)
    src, dst = gc.src, gc.dst
    back = np.isin(gc.op_kind, [1, 2])
    # stashes: forward ops (kind 0) with a backward successor, until its end
    stash_end = np.full(n, -np.inf)
    if gc.m:
        sel = (gc.op_kind[src] == 0) & back[dst]
        np.maximum.at(stash_end, src[sel], end[dst[sel]])
    stash = np.isfinite(stash_end) & (gc.memory > 0)
    resident = np.bincount(dev, weights=np.where(stash, 0.0, gc.memory), minlength=nd)
    size = _tensor_bytes(gc)
    # the output on its producer's device: until local consumers and outgoing transfers end
    local_end = end.copy()
    if gc.m:
        same = dev[src] == dev[dst]
        np.maximum.at(local_end, src[same], end[dst[same]])
    if len(t_op):
        np.maximum.at(local_end, t_op, t_end)
    own_bytes = np.where(stash, np.maximum(size, gc.memory), size)
    own_end = np.where(stash, np.maximum(local_end, stash_end), local_end)
    rows = [(dev, start, own_end, own_bytes)]
    # copies on consumer devices, one per (producer, device)
    if gc.m:
        cross = dev[src] != dev[dst]
        u, b, v = src[cross], dev[dst[cross]], dst[cross]
        if len(u):
            key = u * nd + b
            keys, inv = np.unique(key, return_inverse=True)
            k_end = np.full(len(keys), -np.inf)
            np.maximum.at(k_end, inv, end[v])
            k_bytes = np.zeros(len(keys))
            np.maximum.at(k_bytes, inv, gc.bytes[cross])
            k_start = end[keys // nd].astype(float)
            if len(t_op):  # no transfer to the device (a CPU reading host DRAM): the upload's end
                up_end = np.full(n, np.inf)
                up = t_dst < 0
                np.minimum.at(up_end, t_op[up], t_end[up])
                k_start = np.where(np.isfinite(up_end[keys // nd]), up_end[keys // nd], k_start)
                arrive = (t_dst >= 0)
                tkey = t_op[arrive] * nd + t_dst[arrive]
                pos = np.searchsorted(keys, tkey)
                ok = (pos < len(keys)) & (keys[np.minimum(pos, len(keys) - 1)] == tkey)
                first = np.full(len(keys), np.inf)
                np.minimum.at(first, pos[ok], t_start[arrive][ok])
                k_start = np.where(np.isfinite(first), first, k_start)
            rows.append(((keys % nd).astype(np.int64), k_start, k_end, k_bytes))
    d_, t0, t1, nb = (np.concatenate(x) for x in zip(*rows))
    keep = (t1 > t0) & (nb > 0)
    return resident, d_[keep], t0[keep], t1[keep], nb[keep]


def live_peaks(resident, dev, t0, t1, nbytes, nd: int) -> np.ndarray:
    """Peak live bytes per device: its resident bytes plus the highest sum of intervals live at
    one time (frees before allocations at equal times)."""
    peak = np.asarray(resident, dtype=float).copy()
    if len(dev) == 0:
        return peak
    d = np.concatenate([dev, dev])
    t = np.concatenate([t0, t1])
    delta = np.concatenate([nbytes, -nbytes])
    order = np.lexsort((delta, t, d))  # per device, by time, frees (negative) first
    d, delta = d[order], delta[order]
    level = np.cumsum(delta)
    starts = np.flatnonzero(np.r_[True, d[1:] != d[:-1]])
    base = np.repeat(level[starts] - delta[starts], np.diff(np.r_[starts, len(d)]))
    top = np.full(nd, 0.0)
    np.maximum.at(top, d, level - base)
    return peak + top


def memory_timeline(schedule) -> dict:
    """Live memory of every device over the step: device name -> ``(times, bytes)``, a step
    function (``bytes[i]`` from ``times[i]`` until ``times[i + 1]``), for plotting.

    >>> from workbench import samples, Cluster, Plan, simulate
    >>> g = samples.diamond()
    >>> s = simulate(Plan(g, {v: "gpu0" for v in g.ops}), Cluster.preset("2xV100-pcie"))
    >>> t, b = memory_timeline(s)["gpu0"]
    >>> float(b.max()) == s.peak_live_memory["gpu0"]
    True
    """
    nd = len(schedule.cluster.devices)
    res, dev, t0, t1, nb = live_intervals(
        schedule.graph, schedule.device, schedule.start, schedule.end, schedule.t_op,
        schedule.t_dst, schedule.t_start, schedule.t_end, nd=nd)
    out = {}
    for i, name in enumerate(schedule.cluster.names):
        sel = dev == i
        t = np.concatenate([t0[sel], t1[sel]])
        delta = np.concatenate([nb[sel], -nb[sel]])
        order = np.lexsort((delta, t))
        t, level = t[order], np.cumsum(delta[order]) + res[i]
        times = np.r_[0.0, t]
        vals = np.r_[res[i], level]
        # one value per instant: the last at each time (frees come first, so it is the
        # instant's highest, as live_peaks counts it)
        last = np.r_[times[1:] != times[:-1], True]
        out[name] = (times[last], vals[last])
    return out
