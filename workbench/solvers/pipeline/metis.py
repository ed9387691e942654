"""k-way graph partitioning with METIS (pymetis), the Scotch/Metis baseline of Tarnawski et al.

Colocation groups are contracted to one vertex; vertex weights balance compute (time on the
partitioned device kind) and memory (two constraints when the graph has memory figures); edge
weights are the transfer times. The parts go to the accelerators (every device when the cluster
has none); a unit its part's device cannot run goes to the least loaded accelerator that can run
it, else to a CPU. Splits are usually non-contiguous.

Examples
--------
>>> from workbench import samples, Cluster, solve
>>> p = solve(samples.cnn(60), Cluster.preset("4xV100-nvlink"), method="metis", seed=0)
>>> len(p.devices_used()) > 1, p.method
(True, 'metis')
"""

from __future__ import annotations

import numpy as np

from ...plan import Plan
from ..registry import register

__all__ = ["metis"]


@register("metis", family="partitioning", paper="METIS k-way (Scotch/Metis baseline of Tarnawski et al.)",
          objective="max_load", contract_params={},
          description="METIS k-way partition balancing compute and memory, min edge cut")
def metis(graph, cluster, *, balance_memory: bool = True, seed: int | None = None) -> Plan:
    """Balanced k-way partition (pymetis) over the accelerators, minimising the cut of transfer
    times; ``balance_memory`` adds memory as a second balance constraint."""
    import pymetis

    from .contraction import class_keys

    gc = graph.c
    devs = [i for i, d in enumerate(cluster.devices) if d.kind != "cpu"] or list(range(len(cluster)))
    cpus = [i for i, d in enumerate(cluster.devices) if d.kind == "cpu"]
    kind = cluster.devices[devs[0]].kind
    cls, _ = class_keys(graph)
    uniq, owner = np.unique(cls, return_inverse=True)
    n = len(uniq)
    times = cluster.op_times(graph)
    # a unit (colour class / colocation group) can use a device that runs all of its ops
    bad = np.zeros((n, len(cluster)))
    np.add.at(bad, owner, ~np.isfinite(times))
    unit_ok = bad == 0
    best_acc = np.where(np.isfinite(times[:, devs]), times[:, devs], np.inf).min(axis=1)
    t = np.where(np.isfinite(best_acc), best_acc, 0.0)   # balance on the fastest accelerator
    tw = np.bincount(owner, weights=t, minlength=n)
    mw = np.bincount(owner, weights=gc.memory, minlength=n)
    # undirected unit graph with summed transfer times (mean over device pairs)
    from ...analysis import edge_weights

    c = edge_weights(graph, cluster, "mean")
    w: dict = {}
    for e, (u, v) in enumerate(zip(gc.src.tolist(), gc.dst.tolist())):
        a, b = int(owner[u]), int(owner[v])
        if a != b:
            key = (min(a, b), max(a, b))
            w[key] = w.get(key, 0.0) + float(c[e]) + 1e-9
    adj: list = [[] for _ in range(n)]
    for (a, b), x in w.items():
        adj[a].append((b, x))
        adj[b].append((a, x))
    xadj, adjncy, ew = [0], [], []
    scale_e = 1e6 / max(max(w.values(), default=1.0), 1e-12)
    for a in range(n):
        for b, x in adj[a]:
            adjncy.append(b)
            ew.append(max(1, round(x * scale_e)))
        xadj.append(len(adjncy))
    k = len(devs)
    if k == 1 or n <= 1:
        part = np.zeros(n, dtype=np.int64)
    elif n <= k:  # METIS cannot cut n vertices into more than n parts
        part = np.arange(n, dtype=np.int64)
    else:
        st = 1e6 / max(tw.sum(), 1e-12)
        vt = [max(1, round(x * st)) for x in tw]
        use_mem = balance_memory and mw.sum() > 0
        if use_mem:
            sm = 1e6 / mw.sum()
            vw = [val for pair in zip(vt, (max(1, round(x * sm)) for x in mw)) for val in pair]
        else:
            vw = vt
        opts = pymetis.Options(seed=0 if seed is None else int(seed))
        try:
            _cut, part = pymetis.part_graph(k, xadj=xadj, adjncy=adjncy, vweights=vw,
                                            eweights=ew, options=opts)
        except Exception:  # noqa: BLE001 - multi-constraint unsupported: compute only
            _cut, part = pymetis.part_graph(k, xadj=xadj, adjncy=adjncy, vweights=vt,
                                            eweights=ew, options=opts)
        part = np.asarray(part, dtype=np.int64)
    unit_dev = np.array([devs[int(p)] for p in part], dtype=np.int64)
    # units their part's device cannot run: the least loaded accelerator that can, else a CPU
    load = np.bincount(unit_dev, weights=tw, minlength=len(cluster))
    for u in np.flatnonzero(~unit_ok[np.arange(n), unit_dev]).tolist():
        cands = [d for d in devs if unit_ok[u, d]] or [d for d in cpus if unit_ok[u, d]] \
            or np.flatnonzero(unit_ok[u]).tolist()
        d = min(cands, key=lambda d: (load[d], d))
        load[unit_dev[u]] -= tw[u]
        load[d] += tw[u]
        unit_dev[u] = d
    dev = unit_dev[owner]
    names = cluster.names
    placement = {gc.names[j]: names[int(d)] for j, d in enumerate(dev.tolist())}
    mem = np.bincount(dev, weights=gc.memory, minlength=len(cluster))
    caps = np.array([d.memory for d in cluster.devices])
    status = "heuristic" if (mem <= caps * (1 + 1e-12)).all() else "infeasible"
    return Plan(graph, placement, method="metis", status=status,
                stats={"units": n, "kind": kind})
