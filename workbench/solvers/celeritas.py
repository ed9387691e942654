"""Celeritas (Xu et al., "Celeritas: Fast Optimizer for Large Dataflow Graphs"): Optimal
Operation Fusion followed by *Order-Place* or *Adjusting Placement* (Algorithm 2).

Both solvers first fuse the graph (:func:`workbench.transforms.fusion.fuse`: runs of the
CPD-TOPO sequence of at most ``R`` ops and ``M`` bytes, least communication between runs), then
place the coarse nodes in the CPD-TOPO order of the coarse graph:

``order_place``
    fill one device up to its memory, then move on to the next (the paper's Order-Place).
``celeritas``
    Adjusting Placement: for each coarse node compute its earliest start time (EST) on every
    device, with insertion into idle slots and the transfer time from predecessors on other
    devices (Eq. 7); a device whose free memory cannot hold the node gets EST = inf. The node
    stays on the previous node's device ``d_k`` unless another device ``d_1`` starts it
    earlier by more than ``back_cost`` = the largest transfer to its successors (Eqs. 8-9).
    When every device is full, best effort: the device with the least memory used. EST ties
    go to the device with the most free memory; ``anchor="pred"`` takes ``d_k`` from the
    node's heaviest predecessor instead of the previous node (see :func:`celeritas`).
    Devices on which a node is more than ``slow_factor`` (2) times slower than on its fastest
    device are used only when no other has room (an extension for mixed clusters).

The coarse placement is expanded to the original ops; colocation groups follow their first
member (as in Baechi, Celeritas Section 6.1) and memory is charged per group when its first
member is placed. Plans carry a per-device order taken from the EST schedule of the coarse
nodes, so the simulator runs them as the placer intended.

Examples
--------
>>> from workbench import samples, Cluster, solve, simulate
>>> g = samples.transformer(2000, seed=0)
>>> c = Cluster.preset("4xV100-nvlink").with_memory(g.total_memory() / 3)
>>> p = solve(g, c, method="celeritas")
>>> len(p.devices_used()) >= 3, p.status, p.info["fusion"]["nodes_after"] < 100
(True, 'heuristic', True)
>>> simulate(p, c).makespan > 0
True
"""

from __future__ import annotations

import bisect
import math

import numpy as np

from ..errors import SolverError
from ..plan import Plan
from . import register
from .common import SLOW_FACTOR, MemoryBook

__all__ = ["celeritas", "default_M", "default_R", "order_place"]


def default_R(graph, cluster) -> int:
    """The paper's exploration range of 200, lowered on small graphs so that the coarse graph
    keeps at least about 8 nodes per device: ``min(200, max(1, n // (8 * devices)))``."""
    return int(min(200, max(1, graph.n_ops // (8 * len(cluster)))))


def default_M(graph, cluster) -> float | None:
    """The paper's memory cap ``M = 0.25 x`` the (smallest) device memory, raised to the largest
    op's memory so that every op fits; None (no cap) when devices have unlimited memory."""
    caps = [d.memory for d in cluster.devices if math.isfinite(d.memory)]
    if not caps:
        return None
    big = float(graph.c.memory.max()) if graph.n_ops else 0.0
    return max(0.25 * min(caps), big)


class _Timeline:
    """Busy intervals of one device (sorted, disjoint) with insertion-based slot search."""

    __slots__ = ("ends", "starts")

    def __init__(self):
        self.starts: list[float] = []
        self.ends: list[float] = []

    def earliest(self, ready: float, dur: float) -> float:
        """Earliest start >= ready of an idle slot of length ``dur``."""
        ends, starts = self.ends, self.starts
        k = bisect.bisect_right(ends, ready)          # first interval ending after ready
        t = ready
        while k < len(starts):
            if t + dur <= starts[k] + 1e-12:
                return t
            t = max(t, ends[k])
            k += 1
        return t

    def add(self, s: float, e: float) -> None:
        k = bisect.bisect_left(self.starts, s)
        self.starts.insert(k, s)
        self.ends.insert(k, e)


class _Problem:
    """The fused graph of ``graph`` with everything Algorithm 2 needs in plain lists."""

    def __init__(self, graph, cluster, R, M):
        from ..analysis import edge_weights, node_weights
        from ..orders import cpd_topo_order
        from ..transforms.fusion import check_fusion_params, fuse

        R = default_R(graph, cluster) if R is None else R
        if M is None:
            M = default_M(graph, cluster)
            check_fusion_params(graph, R, None)
        else:
            check_fusion_params(graph, R, M)
        self.fusion = f = fuse(graph, cluster, R=R, M=M)
        cg = f.coarse
        cgc, cc = cg.c, cluster.c
        self.graph, self.cluster, self.coarse = graph, cluster, cg
        self.K, self.nd = cg.n_ops, len(cluster)
        self.times = cluster.op_times(cg).tolist()
        wmean = node_weights(cg, cluster, "mean")
        cmean = edge_weights(cg, cluster, "mean")
        self.proc = cpd_topo_order(cg, w=wmean, c=cmean)       # Algorithm 2, line 1
        # per coarse edge: transfer time between every ordered device pair (no contention)
        nd = self.nd
        fixed = ~np.isnan(cgc.comm)
        if cc.host_mode:
            hop_up = cc.up_lat[None, :] + cgc.bytes[:, None] * cc.up_inv_bw[None, :]
            hop_up = np.where(fixed[:, None], np.nan_to_num(cgc.comm)[:, None] * cc.staged[None, :],
                              hop_up)
            pair = hop_up[:, :, None] + hop_up[:, None, :]
        else:
            pair = cc.lat[None] + cgc.bytes[:, None, None] * cc.inv_bw[None]
            pair = np.where(fixed[:, None, None], np.nan_to_num(cgc.comm)[:, None, None], pair)
        pair = pair * (1 - np.eye(nd))[None]
        self.pair = pair.tolist()
        self.in_edges = cgc.in_edges
        self.src = cgc.src.tolist()
        cl = self.cmean = cmean.tolist()
        self.back_cost = [max((cl[e] for e in cgc.out_edges[k]), default=0.0)
                          for k in range(self.K)]                           # Eq. 8
        self.book = MemoryBook(graph, cluster)
        self.dev = [-1] * self.K
        self.start = [0.0] * self.K
        self.fin = [0.0] * self.K
        self.lines = [_Timeline() for _ in range(nd)]
        self.best_effort = 0

    def need(self, k: int) -> float:
        """Memory coarse node ``k`` adds to the device it goes to (groups charged once, members
        of groups already placed elsewhere follow their group)."""
        book = self.book
        total = 0.0
        seen = set()
        for i in self.fusion.members[k]:
            g = book.group_of[i]
            if g >= 0:
                if g in seen:
                    continue
                seen.add(g)
            total += book.need(i)
        return total

    def est(self, k: int, d: int) -> float:
        """COMP_EST of Algorithm 2 (Eq. 7) with insertion into idle slots of ``d``."""
        dur = self.times[k][d]
        if not math.isfinite(dur):
            return math.inf
        pre_t = 0.0
        dev, fin, src, pair = self.dev, self.fin, self.src, self.pair
        for e in self.in_edges[k]:
            p = src[e]
            dp = dev[p]
            t = fin[p] if dp == d else fin[p] + pair[e][dp][d]
            pre_t = max(pre_t, t)
        return self.lines[d].earliest(pre_t, dur)

    def least_used(self, k: int) -> int:
        cands = [d for d in range(self.nd) if math.isfinite(self.times[k][d])]
        return min(cands, key=lambda d: (self.book.used[d], d))

    def place(self, k: int, d: int, s: float | None = None) -> None:
        if s is None:
            s = self.est(k, d)
        e = s + self.times[k][d]
        self.dev[k], self.start[k], self.fin[k] = d, s, e
        self.lines[d].add(s, e)
        book = self.book
        for i in self.fusion.members[k]:
            f = book.forced_device(i)
            book.place(i, d if f < 0 else f)

    def plan(self, method: str) -> Plan:
        cg, cluster = self.coarse, self.cluster
        # per-device order: EST start times, ties (zero-length nodes) in processing order
        rank = [0] * self.K
        for r, k in enumerate(self.proc):
            rank[k] = r
        names = cg.c.names
        order = {d.name: [] for d in cluster.devices}
        for k in sorted(range(self.K), key=lambda k: (self.start[k], rank[k])):
            order[cluster.names[self.dev[k]]].append(names[k])
        over = [d.name for d, u in zip(cluster.devices, self.book.used)
                if u > d.memory * (1 + 1e-9)]
        status = "infeasible" if over else "heuristic"
        coarse_plan = Plan(cg, {names[k]: cluster.names[self.dev[k]] for k in range(self.K)},
                           method=method, order=order, status=status,
                           predicted={"makespan_ms": float(max(self.fin, default=0.0))},
                           stats={"coarse_nodes": self.K, "best_effort_nodes": self.best_effort},
                           info={"memory_over": over})
        return self.fusion.expand(coarse_plan, first=self.proc)


@register("order_place", family="celeritas", paper="Celeritas (Xu et al. 2023), Order-Place",
          memory=True, colocation=True, orders=True, contract_params={"R": 8},
          description="Fused graph placed in CPD-TOPO order, one device filled after another")
def order_place(graph, cluster, *, R: int | None = None, M: float | None = None) -> Plan:
    """Order-Place: fuse (``R``, ``M`` as in :func:`celeritas`), then walk the coarse nodes in
    CPD-TOPO order and fill the current device up to its memory before moving on to the next
    one; when no device can hold a node it goes to the device with the least memory used
    (status ``infeasible``). The per-device order is the EST schedule of that placement.

    >>> from workbench import samples, Cluster
    >>> g = samples.cnn(400)
    >>> c = Cluster.preset("4xV100-nvlink").with_memory(g.total_memory() * 0.6)
    >>> order_place(g, c).devices_used()
    ['gpu0', 'gpu1']
    """
    pb = _Problem(graph, cluster, R, M)
    cur = 0
    nd = pb.nd
    for k in pb.proc:
        need = pb.need(k)
        choice = -1
        # the current device, then the next ones, then (leftover room) the earlier ones
        for d in list(range(cur, nd)) + list(range(cur)):
            if math.isfinite(pb.times[k][d]) and pb.book.free(d) >= need * (1 - 1e-12):
                choice = d
                break
        if choice < 0:
            choice = pb.least_used(k)
            pb.best_effort += 1
        elif choice > cur:
            cur = choice            # the current device is full: move on
        pb.place(k, choice)
    return pb.plan("order_place")


@register("celeritas", family="celeritas", paper="Celeritas (Xu et al. 2023), Algorithm 2",
          memory=True, colocation=True, orders=True, contract_params={"R": 8},
          description="Celeritas: optimal operation fusion + Adjusting Placement (EST, back cost)")
def celeritas(graph, cluster, *, R: int | None = None, M: float | None = None,
              anchor: str = "previous", slow_factor: float | None = SLOW_FACTOR) -> Plan:
    """Celeritas: Optimal Operation Fusion then Adjusting Placement (Algorithm 2).

    Parameters
    ----------
    R : int, optional
        Exploration range of the fusion (largest cluster in ops). Default: 200 as in the
        paper, lowered on small graphs (see :func:`default_R`). ``R=1`` places the ops
        without fusing them.
    M : float, optional
        Memory cap of a cluster in bytes. Default ``0.25 x`` the device memory (see
        :func:`default_M`). Must hold the largest op.
    anchor : {"previous", "pred", "segments"}
        The device ``d_k`` a node stays on unless Eq. 9 says otherwise: ``"previous"`` is the
        device of the previous node in the CPD-TOPO sequence (Algorithm 2, line 11, as
        written); ``"pred"`` the device of the node's predecessor with the largest transfer
        to it (the previous node's device for a node without predecessors). They coincide
        when the previous node feeds the current one, the usual case in CPD-TOPO order; they
        differ after a source (e.g. a variable) was moved to another device, which with
        ``"previous"`` drags the next node of the chain after it. ``"segments"``: the device
        of the node's segment when the CPD-TOPO sequence is cut, by the fusion DP at device
        level, into at most one segment per device that fits its memory with the fewest
        bytes crossing (:mod:`~workbench.solvers.celeritas_boundaries`); the previous node's
        device when no such cut exists.
    slow_factor : float or None
        A node only goes to a device where it takes at most this many times its fastest time,
        unless no such device has room for it (default 2). The paper's EST rule assumes
        identical devices: beside GPUs an idle host CPU ties on EST, has the most free memory
        and would take the whole graph (see :func:`~workbench.solvers.common.fast_devices`).
        ``None`` is the rule as written.

    Returns
    -------
    Plan
        With a per-device order (the EST schedule), ``predicted["makespan_ms"]`` (the EST
        schedule's length, contention-free), ``info["fusion"]`` (nodes and CCR before/after)
        and status ``infeasible`` when best effort had to overfill a device.

    Examples
    --------
    >>> from workbench import samples, Cluster
    >>> g = samples.inception(300)
    >>> p = celeritas(g, Cluster.preset("2xV100-pcie"), R=1)
    >>> p.status, p.info["fusion"]["nodes_after"]
    ('heuristic', 300)
    """
    if anchor not in ("previous", "pred", "segments"):
        raise SolverError(f"anchor must be 'previous', 'pred' or 'segments', got {anchor!r}")
    pb = _Problem(graph, cluster, R, M)
    nd = pb.nd
    prev = -1
    seg = None
    if anchor == "segments":
        from .celeritas_boundaries import segment_devices

        cgc = pb.coarse.c
        seg = segment_devices(pb.proc, zip(cgc.src.tolist(), cgc.dst.tolist(),
                                           cgc.bytes.tolist()),
                              cgc.memory.tolist(), [d.memory for d in cluster.devices])
        pb.segments = seg
    for k in pb.proc:
        if seg is not None:
            prev = seg[k]
        elif anchor == "pred" and pb.in_edges[k]:
            e = max(pb.in_edges[k], key=lambda e: (pb.cmean[e], -e))
            prev = pb.dev[pb.src[e]]
        need = pb.need(k)
        room = [pb.book.free(d) >= need * (1 - 1e-12) for d in range(nd)]
        if slow_factor is not None:
            tk = pb.times[k]
            quick = min(tk) * slow_factor * (1 + 1e-12)
            if any(r and t <= quick for r, t in zip(room, tk)):
                room = [r and t <= quick for r, t in zip(room, tk)]
        est = [pb.est(k, d) if room[d] else math.inf for d in range(nd)]
        # earliest EST; ties (idle devices) go to the one with the most free memory
        d1 = min(range(nd), key=lambda d: (est[d], -pb.book.free(d), d))
        if prev < 0:
            choice = d1 if math.isfinite(est[d1]) else -1
        elif est[prev] - est[d1] > pb.back_cost[k]:             # Eq. 9 (inf - x > c too)
            choice = d1
        elif math.isfinite(est[prev]):
            choice = prev
        else:
            choice = -1
        if choice < 0:                                          # every device is full
            choice = pb.least_used(k)
            pb.best_effort += 1
            pb.place(k, choice)
        else:
            pb.place(k, choice, est[choice])
        prev = choice
    return pb.plan("celeritas")

