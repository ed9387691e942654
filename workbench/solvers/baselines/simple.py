"""Baselines: everything on one device, round robin, Baechi's m-TOPO, and a given expert split.

Examples
--------
>>> from workbench import samples, Cluster, solve
>>> g, c = samples.cnn(60), Cluster.preset("4xV100-nvlink")
>>> solve(g, c, method="single").devices_used()
['gpu0']
>>> plan = solve(g, c.with_memory(12e6), method="m_topo")  # 20.6 MB live, 12 MB devices
>>> len(plan.devices_used()) >= 3, plan.status
(True, 'heuristic')
"""

from __future__ import annotations


import numpy as np

from ...errors import InfeasibleError, PlanError, SolverError
from ...plan import Plan
from ...orders import bfs_topo_order
from ..registry import register
from ..common import MemoryBook, group_runnable, plan_from_arrays

__all__ = ["bfs_topo_order", "expert", "m_topo", "round_robin", "single"]


@register("single", family="baseline", paper="-", memory=True, colocation=True,
          description="Everything on the one device that runs the graph fastest")
def single(graph, cluster, *, device: str | None = None) -> Plan:
    """All ops on one device (the fastest that can run and hold them, or ``device``).

    Ops the chosen device cannot run at all (e.g. CPU-only ops) go to the fastest device that
    can. Raises InfeasibleError when no device can hold the model, naming the shortfall.
    """
    times = cluster.op_times(graph)
    ok = group_runnable(graph, cluster)
    mem = graph.c.memory
    cands = range(len(cluster)) if device is None else [cluster.index[cluster.device(device).name]]
    fitting = [d for d in cands if float(mem[ok[:, d]].sum()) <= cluster.devices[d].memory]
    best = min(fitting, key=lambda d: (-int(ok[:, d].sum()),
                                       float(np.where(ok[:, d], times[:, d], 0).sum())),
               default=-1)
    if best < 0:
        total = graph.total_memory()
        cap = max(cluster.devices[d].memory for d in cands)
        raise InfeasibleError(
            f"graph {graph.name!r} needs {total / 2**30:.2f} GiB but the largest device holds "
            f"{cap / 2**30:.2f} GiB (short by {(total - cap) / 2**30:.2f} GiB): it does not fit "
            f"on a single device")
    # ops the chosen device cannot run (CPU-only ops, say) go to the fastest device that can
    # run them (and their whole colocation group) and still has room
    book = MemoryBook(graph, cluster)
    dev = np.empty(graph.n_ops, dtype=np.int64)
    status = "heuristic"
    for i in range(graph.n_ops):
        d = book.forced_device(i)
        if d < 0:
            if ok[i, best]:
                d = best
            else:
                order = [int(k) for k in np.argsort(times[i], kind="stable") if ok[i, k]]
                d = next((k for k in order if book.fits(i, k)), order[0])
        if not book.fits(i, d):
            status = "infeasible"
        book.place(i, d)
        dev[i] = d
    return plan_from_arrays(graph, cluster, dev, method="single", status=status)


@register("round_robin", family="baseline", paper="-",
          description="Ops dealt to devices in turn, in topological order")
def round_robin(graph, cluster) -> Plan:
    """Deal ops to devices in turn (topological order), skipping devices that cannot run an
    op or have no memory left; colocated ops follow their group. Status ``infeasible`` when an
    op fits nowhere (it is then put where it can run, to keep the plan inspectable)."""
    ok = group_runnable(graph, cluster)
    book = MemoryBook(graph, cluster)
    nd = len(cluster)
    dev = np.empty(graph.n_ops, dtype=np.int64)
    status = "heuristic"
    nxt = 0
    for i in range(graph.n_ops):
        f = book.forced_device(i)
        choice = -1
        if f >= 0:
            choice = f
        else:
            for k in range(nd):
                d = (nxt + k) % nd
                if ok[i, d] and book.fits(i, d):
                    choice = d
                    nxt = d + 1
                    break
        if choice < 0 or not book.fits(i, choice):
            status = "infeasible"
            if choice < 0:
                choice = int(np.argmax(ok[i]))
        book.place(i, choice)
        dev[i] = choice
    return plan_from_arrays(graph, cluster, dev, method="round_robin", status=status)


@register("m_topo", family="baseline", paper="Baechi (SoCC'20), as described in Celeritas",
          description="Baechi m-TOPO: BFS topological order, devices filled to an even memory share")
def m_topo(graph, cluster) -> Plan:
    """Baechi's m-TOPO: walk the BFS-like topological order and fill devices one after another,
    moving on when the current device reaches its share of the model's memory (total / number
    of devices, at most its capacity). A graph without memory figures is shared by compute time.
    Ops a device cannot run, or that no longer fit, go to the next device that can take them;
    when every device is full the op goes where most memory is left (status ``infeasible``).
    """
    gc = graph.c
    ok = group_runnable(graph, cluster)
    book = MemoryBook(graph, cluster)
    nd = len(cluster)
    weight = gc.memory if gc.memory.sum() > 0 else gc.min_compute()
    total = float(weight.sum())
    caps = [d.memory for d in cluster.devices]
    share = [min(total / nd, caps[d]) if weight is gc.memory else total / nd for d in range(nd)]
    filled = [0.0] * nd
    cur = 0
    dev = np.empty(gc.n, dtype=np.int64)
    status = "heuristic"
    for i in bfs_topo_order(graph):
        f = book.forced_device(i)
        if f >= 0:
            choice = f
        else:
            choice = -1
            w = float(weight[i])
            if cur < nd - 1 and filled[cur] > 0 and filled[cur] + w > share[cur] * (1 + 1e-9):
                cur += 1
            for k in range(nd):
                d = (cur + k) % nd
                if ok[i, d] and book.fits(i, d):
                    choice = d
                    break
            if choice < 0:
                status = "infeasible"
                cands = [d for d in range(nd) if ok[i, d]]
                choice = max(cands, key=book.free)
        book.place(i, choice)
        filled[choice] += float(weight[i])
        dev[i] = choice
    if status == "infeasible" and any(u > c for u, c in zip(book.used, caps)):
        status = "infeasible"
    return plan_from_arrays(graph, cluster, dev, method="m_topo", status=status)


@register("expert", family="baseline", paper="-", needs=("split",),
          description="A given split: placement dict, list of op lists per device, or MSR file")
def expert(graph, cluster, *, split=None) -> Plan:
    """A hand-made split. ``split`` is a dict op -> device name, a list of op lists (one per
    device, in cluster order), or the path of an MSR expert file (its accelerator and CPU
    lists map to the cluster's accelerators and CPUs in order; for a training graph whose file
    lists only forward ops, each backward op follows its colour class).
    """
    if split is None:
        raise SolverError("method 'expert' needs split=... (a dict op -> device, a list of op "
                          "lists per device, or the path of an expert file)")
    if isinstance(split, (str, bytes)) or hasattr(split, "__fspath__"):
        from ...io.msr import read_expert

        return _checked_split(read_expert(split, graph, cluster), cluster)
    if isinstance(split, dict):
        placement = {str(k): str(v) for k, v in split.items()}
    else:
        placement = {}
        groups = list(split)
        if len(groups) > len(cluster):
            raise SolverError(f"expert split has {len(groups)} parts but the cluster has "
                              f"{len(cluster)} devices")
        for d, ops in zip(cluster.names, groups):
            for v in ops:
                placement[str(v)] = d
    plan = Plan(graph, placement, method="expert")
    plan.validate(cluster)
    return _checked_split(plan, cluster)


def _checked_split(plan: Plan, cluster) -> Plan:
    """A PlanError for a split colocation group; status ``infeasible`` (with the devices in
    ``info["memory_over"]``) when the split overfills a device's memory."""
    g = plan.graph
    for grp, members in g.colocation_groups.items():
        devs = sorted({plan.placement[v] for v in members})
        if len(devs) > 1:
            raise PlanError(f"expert split puts colocation group {grp!r} (e.g. op "
                            f"{members[0]!r}) on several devices: {', '.join(devs)}")
    used = dict.fromkeys(cluster.names, 0.0)
    for v, m in zip(g.c.names, g.c.memory.tolist()):
        used[plan.placement[v]] += m
    over = [d.name for d in cluster.devices if used[d.name] > d.memory * (1 + 1e-9)]
    if over:
        plan.status = "infeasible"
        plan.info["memory_over"] = over
    return plan
