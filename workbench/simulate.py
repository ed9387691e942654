"""The judge: a discrete-event simulator of a plan on a cluster, the pipelined max-load, and
:func:`evaluate`, which reports both objectives with feasibility and gaps.

Model
-----
* Each device runs one op at a time; an op of compute time ``t`` on a device of speed ``s``
  takes ``t / s`` ms and starts once all of its inputs are on the device.
* A tensor is sent once per destination device (edges from one op to several consumers on one
  device share the transfer). In ``direct`` mode it travels over the directed link
  ``src -> dst``; in ``host`` mode it is uploaded once over ``src -> host`` and downloaded over
  ``host -> dst`` by each staged destination (see :mod:`workbench.cluster`).
* With ``congestion=True`` every channel is a capacity-1 FIFO resource (Pesto's model); with
  ``congestion=False`` transfers never wait for each other.
* A device with ``recv_overhead`` spends that time on every tensor it receives (LogP's *o*);
  it is added to the tensor's first consumer on the device (lowest topological index).
* Op order per device: ``"plan"`` follows ``plan.order`` exactly; ``"fifo"`` runs ready ops in
  the order they became ready (like TensorFlow's executor); ``"rank"`` runs the ready op of
  highest upward rank first. By default a plan's own order is used when it has one, else FIFO.

Events are kept in a heap of ``(time, priority, sequence, event)``; all events at one instant are
applied before devices and channels pick their next work, so results do not depend on the heap's
tie-breaking.

This module is the judge's public front; its parts live in :mod:`workbench.judge`: the event
core (:mod:`~workbench.judge.events`), the three order policies
(:mod:`~workbench.judge.policies`), the schedule built from a run
(:mod:`~workbench.judge.schedule`) and the pipelined loads (:mod:`~workbench.judge.loads`).

Examples
--------
>>> from workbench import samples, Cluster, Plan
>>> g = samples.diamond()
>>> c = Cluster.preset("2xV100-pcie")
>>> s = simulate(Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"}), c)
>>> round(s.makespan, 3)
6.04
>>> s.critical_ops()
['a', 'c', 'd']
"""

from __future__ import annotations

import math

import numpy as np

from .costs.pipeline_costs import plan_chain
from .errors import GraphError
from .judge.events import EventCore
from .judge.loads import device_loads, max_load, receive_overheads
from .judge.policies import ORDERS, POLICIES, resolve_order
from .judge.schedule import build_schedule
from .plan import Metrics, Plan, Schedule, check_schedule

__all__ = ["simulate", "max_load", "device_loads", "evaluate", "memory_violation",
           "receive_overheads", "ORDERS"]

def simulate(plan: Plan, cluster, *, congestion: bool = True, order: str | None = None,
             op_times=None) -> Schedule:
    """Simulate ``plan`` on ``cluster`` and return the realised :class:`Schedule`.

    Parameters
    ----------
    plan : Plan
    cluster : Cluster
    congestion : bool
        Transfers on one channel queue behind each other (FIFO) when True.
    order : {"plan", "fifo", "rank"} or None
        How each device picks its next op; None = the plan's order if it has one, else FIFO.
    op_times : array of float, optional
        Each op's compute time (ms, graph order ``plan.graph.ops``) on the device the plan puts
        it on, used in place of ``cluster.op_times`` (the cluster's links, receive overheads
        and the ``"rank"`` policy's priorities are kept): a calibrated judge hands the
        simulator the times its model gives (:func:`workbench.fidelity.extras.simulate_overlap`).

    Raises
    ------
    PlanError
        If the plan does not fit the graph/cluster, ``order="plan"`` without an order, or an
        order that deadlocks (an op waits for one queued after it on the same device).
    GraphError
        If a time overflows (costs near 1e308 ms add up to ``inf``), naming the op, or
        ``op_times`` is not one non-negative time per op.

    Notes
    -----
    Python's cyclic garbage collector is paused for the call (and restored after, whatever
    happens): the event loop allocates hundreds of thousands of small tuples that stay alive
    until the schedule is built and are then freed by reference counting, so every collection
    they triggered walked them for nothing (the simulator makes no reference cycles).
    """
    import gc

    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _simulate(plan, cluster, congestion, order, op_times)
    finally:
        if was_enabled:
            gc.enable()


def _simulate(plan: Plan, cluster, congestion: bool, order: str | None,
              op_times=None) -> Schedule:
    order = resolve_order(plan, order)
    g = plan.graph
    dev = plan.device_array(cluster)
    dur = (cluster.op_times(g)[np.arange(g.c.n), dev] if op_times is None
           else _given_times(g, op_times))
    if cluster.c.recv_overhead.any():
        dur = dur + receive_overheads(g, cluster, dev)
    dur = dur.tolist()
    policy = POLICIES[order](plan, cluster)
    core = EventCore(g, cluster, dev, dur, policy, congestion=congestion,
                     chain=plan_chain(plan, cluster))
    core.run()
    stuck = core.stuck()
    if stuck is not None:
        names = g.c.names
        policy.stalled(plan, cluster, core.devl[stuck], names[stuck], dur, names)
    return build_schedule(plan, cluster, dev, core)


def _given_times(g, op_times) -> np.ndarray:
    """``op_times`` checked: one time >= 0 per op of ``g`` (graph order), as ``Cluster.op_times``
    gives them.

    >>> from workbench import samples
    >>> _given_times(samples.diamond(), [1, 2, 3])
    Traceback (most recent call last):
    ...
    workbench.errors.GraphError: simulate: op_times has 3 times for a graph of 4 ops
    """
    t = np.asarray(op_times, dtype=float)
    if t.shape != (g.c.n,):
        raise GraphError(f"simulate: op_times has {t.size} times for a graph of {g.c.n} ops")
    bad = np.flatnonzero(np.isnan(t) | (t < 0))
    if len(bad):
        raise GraphError(f"simulate: op_times of op {g.c.names[bad[0]]!r} is {float(t[bad[0]])!r}; "
                         f"give a time >= 0")
    return t


def memory_violation(schedule: Schedule, device) -> str:
    """The violation text of ``device`` (a :class:`~workbench.cluster.Device`) out of memory
    in ``schedule``: its live peak, the moment, the capacity and the largest tensors live then.

    >>> from workbench import samples, Cluster, Plan
    >>> g = samples.diamond()
    >>> c = Cluster.preset("2xV100-pcie").with_memory(15e6)
    >>> print(memory_violation(simulate(Plan(g, {v: "gpu0" for v in g.ops}), c), c.devices[0]))
    memory on gpu0: 0.028 GiB live at 3.000 ms > 0.014 GiB capacity (resident 0.000 GiB, live then: a 9.5 MiB, b 9.5 MiB, c 9.5 MiB)
    """
    from .judge.liveness import peak_moment

    m = peak_moment(schedule, device.name, top=3)
    what = ", ".join(f"{op} {b / 2**20:.1f} MiB" for op, b in m["tensors"])
    return (f"memory on {device.name}: {m['bytes'] / 2**30:.3f} GiB live at "
            f"{m['time_ms']:.3f} ms > {device.memory / 2**30:.3f} GiB capacity (resident "
            f"{m['resident'] / 2**30:.3f} GiB" + (f", live then: {what})" if what else ")"))


def evaluate(plan: Plan, cluster, *, congestion: bool = True, order: str | None = None,
             schedule: Schedule | None = None, bounds: dict | None = None) -> Metrics:
    """Both objectives of ``plan`` with resources, named violations and gaps to lower bounds.

    Violations are memory over a device's capacity and colocation groups split over devices.
    Memory is judged by the live model (:mod:`workbench.judge.liveness`: parameters resident,
    activations, stashes and received tensors while live), the one validated against measured
    peaks (docs/results-memory.md); a violation names the device, the moment of its peak and
    the largest tensors live then. ``peak_memory``/``memory_fraction`` keep the papers' static
    sum of op memory for reference.
    ``schedule`` (a simulation of this plan already made) and ``bounds``
    (:func:`workbench.judge.bounds.lower_bounds` of the plan's graph on ``cluster``) are used as given
    instead of computed again: :func:`workbench.compare.compare` computes both once.

    >>> from workbench import samples, Cluster, Plan, evaluate
    >>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
    >>> m = evaluate(Plan(g, {v: "gpu0" for v in g.ops}), c)
    >>> m.makespan_ms, m.feasible, m.devices_used
    (6.0, True, 1)
    """
    from .judge.bounds import lower_bounds

    if schedule is not None:
        check_schedule(plan, schedule, "evaluate: schedule")
    s = schedule if schedule is not None else simulate(plan, cluster, congestion=congestion,
                                                       order=order)
    ml = max_load(plan, cluster)
    violations = []
    frac = live_frac = 0.0
    for d in cluster.devices:
        used = s.peak_memory.get(d.name, 0.0)
        live = s.peak_live_memory.get(d.name, 0.0)
        if d.memory > 0:
            frac = max(frac, used / d.memory)
            live_frac = max(live_frac, live / d.memory)
        else:
            frac = math.inf if used > 0 else frac
            live_frac = math.inf if live > 0 else live_frac
        if live > d.memory * (1 + 1e-9):
            violations.append(memory_violation(s, d))
    for grp, members in plan.graph.colocation_groups.items():
        devs = sorted({plan.placement[v] for v in members})
        if len(devs) > 1:
            violations.append(f"colocation group {grp!r} split over {', '.join(devs)}")
    lb = bounds if bounds is not None else lower_bounds(plan.graph, cluster)
    return Metrics(
        makespan_ms=s.makespan, max_load_ms=ml,
        comm_ms=float((s.t_end - s.t_start).sum()), comm_bytes=float(s.t_bytes.sum()),
        peak_memory=s.peak_memory, memory_fraction=frac,
        devices_used=len(plan.devices_used()), feasible=not violations, violations=violations,
        makespan_lb=lb["makespan_ms"], max_load_lb=lb["max_load_ms"],
        peak_live_memory=s.peak_live_memory, live_memory_fraction=live_frac)
