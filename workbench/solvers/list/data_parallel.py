"""Pure data parallelism, FastT's main baseline (Sections 2.1 and 6.2, Tables 1 and 2).

``R`` replicas of the model on ``R`` devices: replica ``r`` of every op -- and the ring
all-reduce of every variable's gradient -- on device ``r``
(:func:`workbench.transforms.data_parallel.data_parallel_graph`). Strong scaling (default)
keeps the global batch and gives each replica ``1/R`` of it; weak scaling gives each replica the
whole batch (``R`` times the samples per step). Each device runs its replica in the order of a
FIFO simulation of the plan with tensors queued on the links (a FIFO executor's order; the
ring all-reduce runs on the links and overlaps compute). The plan refers to the data-parallel
graph (ops ``v@r``);
``info["global_batch"]`` is the samples per step, for samples/s.

Graphs without split dimensions but with shapes (extracted, ONNX) get them first
(:func:`~workbench.transforms.split_dims.with_split_dims`); graphs without a batch dimension are
replicated whole (every replica does all the work: an upper bound, not data parallelism).

Examples
--------
>>> from workbench import samples, Cluster, solve
>>> g = samples.to_training(samples.cnn(30), update=True)
>>> p = solve(g, Cluster.preset("4xV100-nvlink"), method="data_parallel")
>>> p.info["replicas"], p.info["scaling"], p.info["global_batch"], p.devices_used()
(4, 'strong', 32, ['gpu0', 'gpu1', 'gpu2', 'gpu3'])
>>> p.placement["stem@2"], p.placement["allreduce:cc:stem@2"]
('gpu2', 'gpu2')
"""

from __future__ import annotations

import numpy as np

from ...errors import InfeasibleError, SolverError
from ...graph import OpGraph
from ...plan import Plan
from ...simulate import simulate
from ...transforms.data_parallel import AGGREGATIONS, data_parallel_graph, ring_over_devices
from ...transforms.split_dims import has_split_dims, with_split_dims
from ..params import Param
from ..registry import register
from ..common import order_by_start

__all__ = ["batch_of", "data_parallel", "ensure_split_dims", "fifo_plan", "ring_plan"]


def ensure_split_dims(graph: OpGraph) -> OpGraph:
    """``graph`` itself when it names split dimensions or cannot get them (no shapes or no
    ``meta["batch"]``), else :func:`with_split_dims` of it (derived at use: the bundled samples
    carry shapes and their batch, not split dimensions).

    >>> from workbench import samples
    >>> g = samples.load_sample("mlp")
    >>> ensure_split_dims(g).op("fc0/MatMul")["splits"]
    {'batch': 64, 'out': 256}
    >>> ensure_split_dims(samples.diamond()) is not None
    True
    """
    if has_split_dims(graph):
        return graph
    b = (graph.meta or {}).get("batch")
    nodes = graph.nx.nodes
    if isinstance(b, int) and not isinstance(b, bool) and b >= 1 and \
            any(nodes[v].get("shapes") for v in graph.ops):
        return with_split_dims(graph, b)
    return graph


def batch_of(graph: OpGraph) -> int | None:
    """The batch of a graph: the largest ``batch`` split dimension of its ops (None without).

    >>> from workbench import samples
    >>> batch_of(samples.cnn(20)), batch_of(samples.diamond())
    (32, None)
    """
    sizes = [sp["batch"] for sp in graph.op_values("splits", {}) if "batch" in sp]
    return max(sizes) if sizes else None


def ring_plan(plan: Plan, cluster) -> Plan:
    """``plan`` on the graph whose all-reduce rings run over the devices its placement gives the
    replicas (:func:`~workbench.transforms.data_parallel.ring_over_devices`: co-located replicas
    aggregate for free), ``predicted["makespan_ms"]`` the simulated makespan of that graph
    (congestion off, plan order; a DPOS plan predicts exactly that on its own graph). ``plan``
    itself when its rings already match.

    >>> from workbench import samples, Cluster
    >>> from workbench.transforms.data_parallel import data_parallel_graph
    >>> c = Cluster.preset("2xV100-pcie")
    >>> h = data_parallel_graph(samples.to_training(samples.cnn(12), update=True), 2)
    >>> p = ring_plan(Plan(h, {v: "gpu0" for v in h.ops}), c)
    >>> [u for u in p.graph.successors("allreduce:cc:stem@0")]
    ['allreduce:cc:stem/done@0']
    """
    g = ring_over_devices(plan.graph, plan.placement)
    if g is plan.graph:
        return plan
    out = Plan(g, dict(plan.placement), method=plan.method, order=plan.order,
               status=plan.status, predicted=dict(plan.predicted), stats=dict(plan.stats),
               info=dict(plan.info))
    out.predicted["makespan_ms"] = float(simulate(out, cluster, congestion=False,
                                                  order="plan" if plan.order else None).makespan)
    return out


def fifo_plan(graph: OpGraph, placement: dict, cluster, method: str) -> Plan:
    """``placement`` on ``graph`` (its all-reduce rings drawn over the replicas' devices, see
    :func:`ring_plan`) with the per-device order of a FIFO simulation (congestion on: what a
    FIFO executor does when tensors queue on the links) and ``predicted["makespan_ms"]`` that
    order's simulated makespan with congestion off (as every plan predicts).

    >>> from workbench import samples, Cluster
    >>> from workbench.transforms.data_parallel import data_parallel_graph
    >>> c = Cluster.preset("2xV100-pcie")
    >>> h = data_parallel_graph(samples.to_training(samples.cnn(12), update=True), 2)
    >>> p = fifo_plan(h, {v: "gpu0" for v in h.ops}, c, "x")
    >>> p.predicted["makespan_ms"] == simulate(p, c, congestion=False).makespan
    True
    """
    g = ring_over_devices(graph, placement)
    plan = Plan(g, placement, method=method)
    s = simulate(plan, cluster, order="fifo")
    plan = Plan(g, placement, method=method,
                order=order_by_start(g, cluster, plan.device_array(cluster), s.start))
    plan.predicted["makespan_ms"] = simulate(plan, cluster, congestion=False,
                                             order="plan").makespan
    return plan


def _replica_devices(graph: OpGraph, cluster, replicas: int | None) -> list[int]:
    """The devices that can run every op, fastest first (ties: cluster order)."""
    times = cluster.op_times(graph)
    ok = np.isfinite(times).all(axis=0)
    cands = [d for d in range(len(cluster)) if ok[d]]
    if not cands:
        raise InfeasibleError(f"data_parallel: no device of cluster {cluster.name!r} can run "
                              f"every op of graph {graph.name!r} (a replica needs them all)")
    total = times.sum(axis=0)
    cands.sort(key=lambda d: (total[d], d))
    R = len(cands) if replicas is None else replicas
    if R > len(cands):
        raise SolverError(f"data_parallel: replicas={R} but only {len(cands)} devices of "
                          f"cluster {cluster.name!r} can run every op")
    return sorted(cands[:R])


def dp_plan(graph: OpGraph, cluster, devices: list[int], *, scaling: str = "strong",
            method: str = "data_parallel", aggregation: str = "links") -> Plan:
    """The data-parallel plan of ``graph`` with one replica on each of ``devices`` (indices),
    ordered by a FIFO simulation (:func:`fifo_plan`); ``predicted["makespan_ms"]`` is its
    simulated makespan (congestion off, plan order). Raises InfeasibleError when a replica does not fit."""
    R = len(devices)
    names = [cluster.names[d] for d in devices]
    if not np.isfinite(cluster.op_times(graph)[:, devices]).all():
        raise InfeasibleError(f"{method}: a device of {names} cannot run every op of graph "
                              f"{graph.name!r} (a replica needs them all)")
    g = data_parallel_graph(graph, R, cluster=cluster, devices=names, scaling=scaling,
                            aggregation=aggregation)
    rep = [int(v.rsplit("@", 1)[1]) for v in g.ops]
    placement = dict(zip(g.ops, (names[r] for r in rep)))
    needs = np.bincount(np.array(rep), weights=g.c.memory, minlength=R)
    for r, d in enumerate(devices):
        need = float(needs[r])
        cap = cluster.devices[d].memory
        if need > cap:
            raise InfeasibleError(f"{method}: a replica of graph {graph.name!r} needs "
                                  f"{need / 1e6:.1f} MB, device {names[r]} holds "
                                  f"{cap / 1e6:.1f} MB")
    plan = fifo_plan(g, placement, cluster, method)
    b = batch_of(graph)
    gb = None if b is None else (b * R if scaling == "weak" else b)
    plan.info.update(replicas=R, scaling=scaling, global_batch=gb, data_parallel=R,
                     devices=names)
    return plan


@register("data_parallel", family="list",
          paper="FastT (Middleware'20): the data-parallel baseline of Tables 1 and 2",
          memory=True, orders=True,
          params={"replicas": Param(("int", "none"), min=1),
                  "scaling": Param(("str",), choices=("strong", "weak")),
                  "aggregation": Param(("str",), choices=AGGREGATIONS)},
          description="Pure data parallelism: R replicas on R devices, ring all-reduce of "
                      "every variable's gradient (strong or weak scaling)")
def data_parallel(graph, cluster, *, replicas: int | None = None, scaling: str = "strong",
                  aggregation: str = "links", progress=None) -> Plan:
    """Pure data parallelism (module docstring).

    Parameters
    ----------
    replicas : int or None
        Number of replicas; None: every device that can run all ops. The fastest such devices
        are used.
    scaling : {"strong", "weak"}
        Fixed global batch (FastT Table 1) or fixed batch per replica (Table 2).
    aggregation : {"links", "device"}
        The ring all-reduce on the links (default) or, the model before, as an op occupying
        each replica's device (:func:`~workbench.transforms.data_parallel.data_parallel_graph`).

    Raises
    ------
    InfeasibleError
        No device runs every op, or a replica does not fit in a device's memory.
    SolverError
        More replicas than such devices; strong scaling with fewer samples than replicas.
    """
    if scaling not in ("strong", "weak"):
        raise SolverError(f"data_parallel: scaling must be 'strong' or 'weak', got {scaling!r}")
    if replicas is not None and (isinstance(replicas, bool) or not isinstance(replicas, int)
                                 or replicas < 1):
        raise SolverError(f"data_parallel: replicas must be a positive integer, got "
                          f"{replicas!r}")
    g = ensure_split_dims(graph)
    devices = _replica_devices(g, cluster, replicas)
    b = batch_of(g)
    if scaling == "strong" and b is not None and b < len(devices):
        raise SolverError(f"data_parallel: graph {graph.name!r} has a batch of {b}, fewer "
                          f"samples than {len(devices)} replicas (use scaling='weak', fewer "
                          f"replicas, or workbench.transforms.split_dims.with_batch)")
    if aggregation not in AGGREGATIONS:
        raise SolverError(f"data_parallel: aggregation must be 'links' or 'device', got "
                          f"{aggregation!r}")
    plan = dp_plan(g, cluster, devices, scaling=scaling, aggregation=aggregation)
    if progress is not None:
        progress(1.0)
    return plan
