"""The probe plans the calibrated judge is fitted to: plans that are never among the plans it
judges, each built to show one effect (a random placement: many cross-device tensors; the
single-device reference: the machine's speed; one op moved: the cost of a multi-device step;
another order: live memory; long idle periods: the wake-up latency), and their names.

>>> from workbench import samples
>>> from workbench.cluster import local_cluster
>>> reference_plan(samples.diamond(), local_cluster(2)).order
{'cpu0': ['a', 'b', 'c', 'd']}
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..cluster import Cluster, local_cluster  # noqa: F401  (the doctests' cluster)
from ..errors import RuntimeBridgeError

__all__ = ["PROBES", "REFERENCES", "SPLIT_PROBES", "STEP_PROBES", "idle_probe_plan",
           "list_order", "one_op_probe", "one_op_probes", "order_probe", "probe_plan",
           "reference_plan", "split_order_probes"]

REFERENCES = ("(reference)", "(reference 2)", "(reference 3)")
"""The names of the sessions that time :func:`reference_plan` (the same plan, a session each);
a model uses the first :attr:`JudgeModel.anchor_sessions` of them and anchors to their median."""

STEP_PROBES = ("(one-op probe)", "(one-op probe 2)", "(one-op probe 3)")
"""The names of the ``step_cost`` change's probes (:func:`one_op_probes`, the first
:func:`one_op_probe`); a model uses the first :attr:`JudgeModel.anchor_sessions` of them."""

SPLIT_PROBES = ("(split reference)", "(split order probe)")
"""The names of :func:`split_order_probes` (``live_memory`` on plans of several devices)."""

PROBES = ("(probe)", *REFERENCES, *STEP_PROBES, "(order probe)", *SPLIT_PROBES)
"""The names of :meth:`JudgeModel.probe_plans`: :func:`probe_plan` (``recv_fit``, in its run
order), :func:`reference_plan` (``rescale``, ``step_cost``, ``live_memory``; :data:`REFERENCES`),
:func:`one_op_probes` (``step_cost``, :data:`STEP_PROBES`), :func:`order_probe` and
:func:`split_order_probes` (``live_memory``), in parentheses so that they never clash with a
solver's name."""
def reference_plan(graph, cluster):
    """The single-device reference of the ``rescale`` change and of :func:`measure_contention`:
    every op on the cluster's first device, chained in the graph's topological order.

    >>> from workbench import samples, Cluster
    >>> reference_plan(samples.diamond(), Cluster.preset("2xV100-pcie")).order
    {'gpu0': ['a', 'b', 'c', 'd']}
    """
    from ..plan import Plan

    first = cluster.names[0]
    return Plan(graph, {v: first for v in graph.ops}, order={first: graph.topological_order()},
                method="reference")


def probe_plan(graph, cluster: Cluster, *, seed: int = 0):
    """A random placement (seeded) over the cluster's devices, colocation groups kept together:
    a plan with many cross-device tensors, used to fit the receive overhead.

    >>> from workbench import samples
    >>> p = probe_plan(samples.diamond(), local_cluster(2), seed=1)
    >>> sorted(p.placement), p.method
    (['a', 'b', 'c', 'd'], 'probe')
    """
    from ..plan import Plan

    rng = np.random.default_rng(seed)
    names = cluster.names
    placement = {v: names[int(rng.integers(len(names)))] for v in graph.ops}
    for members in graph.colocation_groups.values():
        for v in members:
            placement[v] = placement[members[0]]
    return Plan(graph, placement, method="probe")


def one_op_probe(graph, cluster: Cluster):
    """The ``step_cost`` change's probe: :func:`reference_plan` with one op moved to the
    cluster's second device -- the op nearest the middle of the topological order that has one
    input and one consumer and no colocation group (any op when none has). The first of
    :func:`one_op_probes`.

    >>> from workbench import samples
    >>> p = one_op_probe(samples.diamond(), local_cluster(2))
    >>> p.method, sorted(v for v, d in p.placement.items() if d == "cpu1")
    ('one-op-probe', ['c'])
    """
    return one_op_probes(graph, cluster, 1)[0]


def one_op_probes(graph, cluster: Cluster, k: int = 3) -> list:
    """``k`` probes of the ``step_cost`` change, each :func:`reference_plan` with a different
    single op moved to the cluster's second device: the ops nearest the middle, then the
    quarters, ... of the topological order (``k`` positions spread over it, the middle first)
    among those with one input and one consumer and no colocation group, then any other op.
    Fewer where the graph has fewer ops. Each probe runs in a session of its own, so one
    session in a slow state no longer sets the step cost (:meth:`JudgeModel.fit_step_cost`
    takes the median).

    >>> from workbench import samples
    >>> ps = one_op_probes(samples.diamond(), local_cluster(2), 3)
    >>> [sorted(v for v, d in p.placement.items() if d == "cpu1") for p in ps]
    [['c'], ['b'], ['d']]
    >>> [p.order["cpu1"] for p in ps] == [["c"], ["b"], ["d"]]
    True
    """
    if k < 1:
        raise RuntimeBridgeError(f"one_op_probes: k must be at least 1, got {k}")
    ref = reference_plan(graph, cluster)
    topo = ref.order[cluster.names[0]]
    grouped = {v for members in graph.colocation_groups.values() for v in members}
    gc, index = graph.c, {v: i for i, v in enumerate(graph.ops)}
    simple = [v for v in topo if v not in grouped and len(gc.pred[index[v]]) == 1
              and len(gc.succ[index[v]]) == 1]
    pos = {v: j for j, v in enumerate(topo)}
    targets = sorted(((i + 1) / (k + 1) for i in range(k)), key=lambda f: (abs(f - 0.5), f))
    moved: list = []
    for f in targets:
        left = [v for v in simple if v not in moved] or [v for v in topo if v not in moved]
        if not left:
            break
        mid = f * len(topo)
        moved.append(min(left, key=lambda v: (abs(pos[v] - mid), pos[v])))
    first, second = cluster.names[0], cluster.names[1]
    return [replace(ref, placement={**ref.placement, v: second},
                    order={first: [u for u in topo if u != v], second: [v]},
                    method="one-op-probe") for v in moved]


def order_probe(graph, cluster: Cluster):
    """The ``live_memory`` change's probe: every op on the cluster's first device (as
    :func:`reference_plan`), run in list-scheduling order -- of the ready ops the one with the
    longest path to the end (upward rank, op costs on the first device) first, ties in
    topological order. List schedulers (HEFT, ETF, DPOS) order by such priorities; they keep
    tensors live longer than the topological order does.

    >>> from workbench import samples
    >>> p = order_probe(samples.diamond(), local_cluster(2))
    >>> p.order, p.method
    ({'cpu0': ['a', 'b', 'c', 'd']}, 'order-probe')
    """
    ref = reference_plan(graph, cluster)
    return replace(ref, order={cluster.names[0]: list_order(graph, cluster)},
                   method="order-probe")


def split_order_probes(graph, cluster: Cluster, *, chunks: int = 8) -> tuple:
    """The ``live_memory`` change's probes for plans on several devices: the graph split as
    :func:`idle_probe_plan` (``chunks`` runs of the topological order alternating over the
    devices), once with each device's ops in topological order (the split reference), once
    in list-scheduling order (as :func:`order_probe`: longest remaining path first). Their
    measured difference fits the slope of plans on several devices
    (``JudgeModel.memory_slope_multi``): on this VM resnet_small's single-device order probe
    ran 8-9 % slower than its reference, while its list-scheduled two-device plans (HEFT,
    DPOS, ETF) ran 2-4 % over their prediction without the change, and the single-device
    slope put them 3-6 % slow, ordering them wrongly against m_topo (round eight).

    >>> from workbench import samples
    >>> ref, probe = split_order_probes(samples.diamond(), local_cluster(2), chunks=2)
    >>> ref.placement == probe.placement, ref.order, probe.method
    (True, {'cpu0': ['a', 'b'], 'cpu1': ['c', 'd']}, 'split-order-probe')
    """
    split = idle_probe_plan(graph, cluster, chunks=chunks)
    names = cluster.names

    def by_device(seq):
        return {d: [v for v in seq if split.placement[v] == d] for d in names
                if any(split.placement[v] == d for v in seq)}

    topo = graph.topological_order()
    return (replace(split, order=by_device(topo), method="split-reference"),
            replace(split, order=by_device(list_order(graph, cluster)),
                    method="split-order-probe"))


def list_order(graph, cluster: Cluster) -> list:
    """Every op in list-scheduling order: of the ready ops the one with the longest path to the
    end (upward rank, op costs on the cluster's first device) first, ties in topological
    order."""
    import heapq

    from ..analysis import upward_rank

    gc, topo = graph.c, graph.topological_order()
    pos = {v: k for k, v in enumerate(topo)}
    cost = cluster.op_times(graph)[:, 0]
    rank = upward_rank(graph, np.where(np.isfinite(cost), cost, 0.0), np.zeros(gc.m))
    indeg = np.array([len(gc.pred[i]) for i in range(gc.n)])
    ready = [(-rank[gc.index[v]], pos[v], v) for v in topo if indeg[gc.index[v]] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, _, v = heapq.heappop(ready)
        order.append(v)
        for j in gc.succ[gc.index[v]]:
            indeg[j] -= 1
            if indeg[j] == 0:
                w = gc.names[j]
                heapq.heappush(ready, (-rank[j], pos[w], w))
    return order


def idle_probe_plan(graph, cluster: Cluster, *, chunks: int = 8):
    """The ``wakeup`` change's probe: the topological order cut into ``chunks`` runs of equal op
    count, alternating over the cluster's devices (colocation groups follow their first member):
    few cross-device tensors, each reaching a device that idled while the other computed.

    >>> from workbench import samples
    >>> p = idle_probe_plan(samples.diamond(), local_cluster(2), chunks=2)
    >>> p.placement, p.method
    ({'a': 'cpu0', 'b': 'cpu0', 'c': 'cpu1', 'd': 'cpu1'}, 'idle-probe')
    """
    from ..plan import Plan

    names, ops = cluster.names, graph.topological_order()
    size = max(1, math.ceil(len(ops) / max(1, int(chunks))))
    placement = {v: names[(k // size) % len(names)] for k, v in enumerate(ops)}
    for members in graph.colocation_groups.values():
        for v in members:
            placement[v] = placement[members[0]]
    return Plan(graph, placement, method="idle-probe")
