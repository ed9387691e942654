"""The judge's result: a :class:`~workbench.plan.Schedule` from a finished event run.

Examples
--------
>>> import numpy as np
>>> from workbench import samples, Cluster, Plan
>>> from workbench.judge.events import EventCore
>>> from workbench.judge.policies import FifoOrder
>>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
>>> plan = Plan(g, {v: "gpu0" for v in g.ops})
>>> dev = plan.device_array(c)
>>> core = EventCore(g, c, dev, c.op_times(g)[np.arange(4), dev].tolist(), FifoOrder(plan, c),
...                  congestion=True)
>>> core.run()
>>> s = build_schedule(plan, c, dev, core)
>>> s.makespan, s.critical_ops(), s.link_bytes
(6.0, ['a', 'b', 'c', 'd'], {})
"""

from __future__ import annotations

import numpy as np

from .liveness import live_intervals, live_peaks, shared_memory
from ..plan import Schedule

__all__ = ["build_schedule", "critical_path"]


def critical_path(core) -> list:
    """The realised critical path of a finished run: the binding causes walked back from the
    op that ends last, as ``("op", name)`` and ``("transfer", k)`` items in time order."""
    n = len(core.end)
    path: list = []
    if not n:
        return path
    item = ("op", int(np.argmax(np.array(core.end))))
    guard = 0
    while item is not None and guard <= n + len(core.t_op) + 1:
        guard += 1
        kind, x = item
        if kind == "op":
            path.append(("op", core.names[x]))
            item = core.why[x]
        else:
            path.append(("transfer", x))
            item = core.t_why[x]
    path.reverse()
    return path


def build_schedule(plan, cluster, dev: np.ndarray, core) -> Schedule:
    """The :class:`~workbench.plan.Schedule` of ``plan`` from ``core``, an
    :class:`~workbench.judge.events.EventCore` that has run: times as arrays, the realised
    critical path, static and live memory per device and bytes per link."""
    g = plan.graph
    gc = g.c
    nd = cluster.c.n
    names = cluster.names
    start_a, end_a = np.array(core.start), np.array(core.end)
    makespan = float(end_a.max()) if gc.n else 0.0
    path = critical_path(core)
    mem = np.bincount(dev, weights=gc.memory, minlength=nd)
    t_src_a = np.array(core.t_src, dtype=np.int64)
    t_dst_a = np.array(core.t_dst, dtype=np.int64)
    t_bytes_a = np.array(core.t_bytes, dtype=float)
    link_bytes: dict = {}
    for s_, d_, b_ in zip(core.t_src, core.t_dst, core.t_bytes):
        key = f"{names[s_] if s_ >= 0 else 'host'}->{names[d_] if d_ >= 0 else 'host'}"
        link_bytes[key] = link_bytes.get(key, 0.0) + b_
    t_op_a, t_start_a, t_end_a = (np.array(core.t_op, dtype=np.int64),
                                  np.array(core.t_start, dtype=float),
                                  np.array(core.t_end, dtype=float))
    live = live_peaks(*live_intervals(g, dev, start_a, end_a, t_op_a, t_dst_a, t_start_a,
                                      t_end_a, nd=nd, shared=shared_memory(cluster),
                                      workspace_on=np.asarray(cluster.c.kind_of) == "cpu"), nd)  # memory over time
    return Schedule(
        graph=g, cluster=cluster, device=dev, start=start_a, end=end_a,
        t_op=t_op_a, t_src=t_src_a, t_dst=t_dst_a, t_start=t_start_a, t_end=t_end_a,
        t_bytes=t_bytes_a, makespan=makespan, critical_path=path,
        peak_memory={names[i]: float(mem[i]) for i in range(nd)}, link_bytes=link_bytes,
        method=plan.method, run_rank=np.array(core.rank, dtype=np.int64),
        peak_live_memory={names[i]: float(live[i]) for i in range(nd)}, plan_key=plan.key)
