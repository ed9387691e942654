"""Helpers shared by solvers: memory bookkeeping with colocation groups, orders from start
times, and plan construction. Solvers import these instead of re-implementing them.

Examples
--------
>>> from workbench import samples, Cluster
>>> from workbench.solvers.common import MemoryBook
>>> g = samples.diamond().map_ops(lambda v, a: {**a, "memory": 6e9})
>>> book = MemoryBook(g, Cluster.preset("2xV100-pcie"))
>>> book.fits(0, 0), book.place(0, 0), book.fits(1, 0), book.place(1, 0), book.fits(2, 0)
(True, None, True, None, False)
"""

from __future__ import annotations

import numpy as np

from ..errors import InfeasibleError
from ..plan import Plan, order_from_starts

__all__ = ["SLOW_FACTOR", "MemoryBook", "fast_devices", "group_runnable", "order_by_start",
           "plan_from_arrays", "runnable", "tensor_classes"]


def tensor_classes(graph) -> list[list[tuple]]:
    """Per producer index: its tensor classes ``(bytes, comm or None, [(edge, consumer), ...])``
    in the order the simulator creates its transfers (first appearance among the out-edges).
    Edges of one producer with the same size and fixed cost are one tensor (decision 2): sent
    once to each device that holds a consumer.

    >>> from workbench import samples
    >>> tensor_classes(samples.diamond())[0]
    [(10000000.0, None, [(0, 1), (1, 2)])]
    """
    import math

    gc = graph.c
    bl, cl, dl = gc.bytes.tolist(), gc.comm.tolist(), gc.dst.tolist()
    out = []
    for u in range(gc.n):
        cls: dict = {}
        for e in gc.out_edges[u]:
            c = cl[e]
            key = (bl[e], None if math.isnan(c) else c)
            cls.setdefault(key, []).append((e, dl[e]))
        out.append([(k[0], k[1], v) for k, v in cls.items()])
    return out


def runnable(graph, cluster) -> np.ndarray:
    """Boolean matrix (ops x devices): can op i run on device d."""
    return np.isfinite(cluster.op_times(graph))


def group_runnable(graph, cluster) -> np.ndarray:
    """Like :func:`runnable`, but a colocated op may only use devices that can run every
    member of its group.

    >>> from workbench import samples, Cluster
    >>> bool(group_runnable(samples.diamond(), Cluster.preset("2xV100-pcie")).all())
    True
    """
    ok = runnable(graph, cluster)
    gc = graph.c
    if len(gc.coloc_groups):
        grp_ok = np.ones((len(gc.coloc_groups), ok.shape[1]), dtype=bool)
        has = gc.coloc >= 0
        np.logical_and.at(grp_ok, gc.coloc[has], ok[has])
        ok[has] &= grp_ok[gc.coloc[has]]
    return ok


SLOW_FACTOR = 2.0
"""An op counts as *slow* on a device where it takes more than this many times its fastest
time (see :func:`fast_devices`)."""


def fast_devices(graph, cluster, *, factor: float = SLOW_FACTOR) -> np.ndarray:
    """Boolean matrix (ops x devices): op i may run on device d (group-aware, as
    :func:`group_runnable`) and takes at most ``factor`` times its fastest time there (for a
    colocated op: its group's total time).

    The earliest-start rules of ETF, m-ETF, m-SCT and Celeritas's Adjusting Placement assume
    identical devices: an idle device that is 10x slower (a host CPU beside GPUs) starts an op
    "earliest" and gets it. Their authors' systems keep such devices for the ops that need them
    (Baechi places only CPU-only ops on the CPU); these solvers therefore choose among an op's
    fast devices and fall back to the slow ones only when no fast device has room for it
    (docs/decisions.md).

    >>> from workbench import samples, Cluster, Device
    >>> c = Cluster([Device("gpu0"), Device("cpu0", kind="cpu")])
    >>> fast_devices(samples.diamond(), c)[:, 1].tolist()  # the CPU is 4x slower
    [False, False, False, False]
    """
    ok = group_runnable(graph, cluster)
    times = np.where(ok, cluster.op_times(graph), np.inf)
    gc = graph.c
    has = gc.coloc >= 0
    if has.any():  # a colocated op is judged by its whole group's time on the device
        sums = np.zeros((len(gc.coloc_groups), times.shape[1]))
        np.add.at(sums, gc.coloc[has], times[has])
        times = times.copy()
        times[has] = sums[gc.coloc[has]]
    best = times.min(axis=1, keepdims=True)
    return ok & (times <= best * factor * (1 + 1e-12))


class MemoryBook:
    """Tracks memory used per device; colocation groups are charged whole when their first
    member is placed (later members follow the group and cost nothing more).

    ``group_of[i]`` is the op's group index or -1; ``group_device[g]`` the device a group went to.
    """

    def __init__(self, graph, cluster):
        gc = graph.c
        self.graph = graph
        self.cluster = cluster
        self.mem = gc.memory.tolist()
        self.group_of = gc.coloc.tolist()
        ng = len(gc.coloc_groups)
        self.group_mem = np.bincount(gc.coloc[gc.coloc >= 0], weights=gc.memory[gc.coloc >= 0],
                                     minlength=ng).tolist() if ng else []
        self.group_device = [-1] * ng
        self.capacity = [d.memory for d in cluster.devices]
        self.used = [0.0] * len(cluster.devices)

    def need(self, i: int) -> float:
        """Memory that placing op ``i`` would add now (its group's total on first placement)."""
        g = self.group_of[i]
        if g < 0:
            return self.mem[i]
        return 0.0 if self.group_device[g] >= 0 else self.group_mem[g]

    def forced_device(self, i: int) -> int:
        """The device op ``i`` must go to because of its colocation group, or -1."""
        g = self.group_of[i]
        return self.group_device[g] if g >= 0 else -1

    def fits(self, i: int, d: int) -> bool:
        f = self.forced_device(i)
        if f >= 0 and f != d:
            return False
        return self.used[d] + self.need(i) <= self.capacity[d] * (1 + 1e-12)

    def free(self, d: int) -> float:
        return self.capacity[d] - self.used[d]

    def place(self, i: int, d: int) -> None:
        self.used[d] += self.need(i)
        g = self.group_of[i]
        if g >= 0 and self.group_device[g] < 0:
            self.group_device[g] = d

    def shortfall_error(self, i: int) -> InfeasibleError:
        """An InfeasibleError naming op ``i`` and how much memory it lacks."""
        need = self.need(i)
        best = max(range(len(self.used)), key=self.free)
        g = self.group_of[i]
        what = (f"op {self.graph.c.names[i]!r}" if g < 0 else
                f"op {self.graph.c.names[i]!r} (colocation group "
                f"{self.graph.c.coloc_groups[g]!r})")
        return InfeasibleError(
            f"{what} needs {need / 2**20:.1f} MiB but the most free memory on any device is "
            f"{self.free(best) / 2**20:.1f} MiB on {self.cluster.devices[best].name} "
            f"(short by {(need - self.free(best)) / 2**20:.1f} MiB)")


def order_by_start(graph, cluster, device: np.ndarray, start: np.ndarray) -> dict:
    """Per-device execution order from start times (ties by topological index) that never
    deadlocks.

    Start times from a MILP may break a precedence by the solver's tolerance (an op "starting"
    1e-7 ms before its zero-length predecessor); ordering by them alone can then deadlock.
    The ops are therefore taken in a topological order that follows the start times (Kahn's
    algorithm, the ready op with the earliest start first); with consistent start times this
    is exactly the order by start.

    >>> from workbench import samples, Cluster
    >>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
    >>> order_by_start(g, c, [0, 0, 0, 0], [0.0, 1.0, 1.0 - 1e-9, 1.0])  # c a hair early
    {'gpu0': ['a', 'c', 'b', 'd'], 'gpu1': []}
    >>> order_by_start(g, c, [0, 0, 0, 0], [1.0, 0.0, 2.0, 3.0])  # b "before" its input a
    {'gpu0': ['a', 'b', 'c', 'd'], 'gpu1': []}
    """
    import heapq

    gc = graph.c
    st = np.asarray(start, dtype=float).tolist()
    dev = np.asarray(device).tolist()
    consistent = all(st[s] <= st[d] for s, d in zip(gc.src.tolist(), gc.dst.tolist()))
    if consistent:
        return order_from_starts(graph, cluster.names, device, start)
    indeg = [len(p) for p in gc.pred]
    heap = [(st[i], i) for i in range(gc.n) if indeg[i] == 0]
    heapq.heapify(heap)
    names, devs = gc.names, cluster.names
    out: dict = {d: [] for d in devs}
    while heap:
        _, i = heapq.heappop(heap)
        out[devs[int(dev[i])]].append(names[i])
        for j in gc.succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(heap, (st[j], j))
    return out


def plan_from_arrays(graph, cluster, device, *, method: str, start=None, status="heuristic",
                     predicted=None, stats=None, info=None) -> Plan:
    """Build a Plan from a device-index array (and start times for the order)."""
    names = graph.c.names
    devs = cluster.names
    placement = {names[i]: devs[int(d)] for i, d in enumerate(np.asarray(device).tolist())}
    order = None if start is None else order_by_start(graph, cluster, np.asarray(device),
                                                      np.asarray(start))
    return Plan(graph, placement, method=method, order=order, status=status,
                predicted=dict(predicted or {}), stats=dict(stats or {}), info=dict(info or {}))
