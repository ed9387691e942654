"""The judge's order policies: how an idle device picks its next op.

Three policies, one per value of ``simulate(order=...)``:

* :class:`PlanOrder` (``"plan"``): the plan's own per-device sequence, exactly; a device waits
  for the head of its sequence even when a later op is ready (an order that puts an op before
  one it waits for deadlocks, which is the plan's error).
* :class:`FifoOrder` (``"fifo"``): the ready op that became ready first, like TensorFlow's
  executor (ties by topological position).
* :class:`RankOrder` (``"rank"``): the ready op of highest upward rank (b-level, mean weights,
  :func:`workbench.analysis.levels`) first, ties by topological position.

A policy is told when an op becomes ready (:meth:`~FifoOrder.ready`, ``None`` when it has
nothing to queue) and asked, for an idle device, which op to start (:meth:`~PlanOrder.pick`,
which removes it or returns ``None``). The
event core (:mod:`workbench.judge.events`) knows nothing else about orders.

Examples
--------
>>> from workbench import samples, Cluster, Plan
>>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
>>> p = make_policy("fifo", Plan(g, {v: "gpu0" for v in g.ops}), c)
>>> p.ready(2, 0, 1.5); p.ready(1, 0, 1.5); p.ready(3, 0, 0.5)
>>> [p.pick(0, None) for _ in range(4)]
[3, 1, 2, None]
"""

from __future__ import annotations

import heapq

from ..errors import PlanError
from .events import overflowed_order

__all__ = ["ORDERS", "POLICIES", "FifoOrder", "PlanOrder", "RankOrder", "make_policy",
           "resolve_order"]


def _check_has_order(plan) -> None:
    if plan.order is None:
        raise PlanError(f"plan {plan.method!r} has no execution order; use order='fifo' or "
                        f"'rank'")


class PlanOrder:
    """``order="plan"``: each device runs ``plan.order[device]`` in sequence.

    >>> from workbench import samples, Cluster, Plan
    >>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
    >>> p = PlanOrder(Plan(g, {v: "gpu0" for v in g.ops}, order={"gpu0": ["a", "c", "b", "d"]}), c)
    >>> remaining = [0, 0, 1, 2]            # c still waits for an input: gpu0 waits too
    >>> p.pick(0, remaining), p.pick(0, remaining)
    (0, None)
    """

    name = "plan"

    def __init__(self, plan, cluster):
        _check_has_order(plan)
        index = plan.graph.index
        self.seq = [[index[v] for v in plan.order.get(d.name, [])] for d in cluster.devices]
        self.pos = [0] * len(self.seq)

    ready = None
    """Nothing to queue when an op becomes ready (the core skips the call)."""

    def pick(self, d: int, remaining: list) -> int | None:
        """The head of ``d``'s sequence if all its inputs are there (``remaining[v] == 0``)."""
        pos, seq = self.pos[d], self.seq[d]
        if pos < len(seq):
            v = seq[pos]
            if remaining[v] == 0:
                self.pos[d] = pos + 1
                return v
        return None

    def stalled(self, plan, cluster, d: int, op: str, dur: list, names: list) -> None:
        """Op ``op`` on device ``d`` never ran: the order deadlocks (or overflowed)."""
        pos, seq = self.pos[d], self.seq[d]
        head = names[seq[pos]] if pos < len(seq) else None
        overflowed_order(dur, names, cluster.names[d])
        raise PlanError(
            f"plan {plan.method!r}: the execution order on {cluster.names[d]!r} deadlocks: "
            f"{head!r} is queued first but waits for an input that can only come later "
            f"(op {op!r} never ran); the order must respect precedence")


class FifoOrder:
    """``order="fifo"``: per device a heap of ready ops keyed by the time they became ready
    (ops without inputs at 0), ties by topological position.

    >>> from workbench import samples, Cluster, Plan
    >>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
    >>> p = FifoOrder(Plan(g, {v: "gpu0" for v in g.ops}), c)
    >>> p.ready(2, 0, 3.0); p.ready(1, 0, 3.0)
    >>> p.pick(0, None), p.pick(1, None)
    (1, None)
    """

    name = "fifo"

    def __init__(self, plan, cluster):
        self.queues: list = [[] for _ in range(len(cluster.devices))]

    def ready(self, v: int, d: int, t: float) -> None:
        """Op ``v`` on device ``d`` became ready at ``t``: queue it by ``t``."""
        heapq.heappush(self.queues[d], (t, v))

    def pick(self, d: int, remaining) -> int | None:
        q = self.queues[d]
        return heapq.heappop(q)[1] if q else None

    def stalled(self, plan, cluster, d: int, op: str, dur: list, names: list) -> None:
        raise PlanError(f"simulation stalled: op {op!r} never ran")  # pragma: no cover


class RankOrder(FifoOrder):
    """``order="rank"``: per device the ready op of highest upward rank first.

    >>> from workbench import samples, Cluster, Plan
    >>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
    >>> p = RankOrder(Plan(g, {v: "gpu0" for v in g.ops}), c)
    >>> p.ready(3, 0, 0.0); p.ready(0, 0, 5.0)     # a (the entry) before d (the exit)
    >>> p.pick(0, None), p.pick(0, None)
    (0, 3)
    """

    name = "rank"

    def __init__(self, plan, cluster):
        from ..analysis import levels

        super().__init__(plan, cluster)
        self.prio = (-levels(plan.graph, cluster).blevel).tolist()

    def ready(self, v: int, d: int, t: float) -> None:
        """Op ``v`` on device ``d`` became ready: queue it by its negated upward rank."""
        heapq.heappush(self.queues[d], (self.prio[v], v))


POLICIES = {"plan": PlanOrder, "fifo": FifoOrder, "rank": RankOrder}
"""``simulate(order=...)`` value -> policy class."""

ORDERS = tuple(POLICIES)
"""The order policies: ``("plan", "fifo", "rank")``."""


def resolve_order(plan, order: str | None) -> str:
    """The order policy to use: ``order`` checked, or by default (``None``) the plan's own
    order if it has one, else ``"fifo"``.

    >>> from workbench import samples, Plan
    >>> g = samples.diamond()
    >>> resolve_order(Plan(g, {v: "gpu0" for v in g.ops}), None)
    'fifo'
    >>> resolve_order(Plan(g, {v: "gpu0" for v in g.ops}), "lifo")
    Traceback (most recent call last):
    ...
    workbench.errors.PlanError: order must be one of plan, fifo, rank, got 'lifo'
    >>> resolve_order(Plan(g, {v: "gpu0" for v in g.ops}), "plan")
    Traceback (most recent call last):
    ...
    workbench.errors.PlanError: plan 'manual' has no execution order; use order='fifo' or 'rank'
    """
    if order is None:
        order = "plan" if plan.order is not None else "fifo"
    if order not in POLICIES:
        raise PlanError(f"order must be one of {', '.join(POLICIES)}, got {order!r}")
    if order == "plan":
        _check_has_order(plan)
    return order


def make_policy(order: str | None, plan, cluster):
    """The policy object for ``order`` (see :func:`resolve_order`) on ``plan``.

    >>> from workbench import samples, Cluster, Plan
    >>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
    >>> make_policy(None, Plan(g, {v: "gpu0" for v in g.ops}), c).name
    'fifo'
    """
    return POLICIES[resolve_order(plan, order)](plan, cluster)
