"""What solvers return (:class:`Plan`) and what the simulator makes of it (:class:`Schedule`,
:class:`Metrics`).

Examples
--------
>>> from workbench import samples, Cluster
>>> from workbench.plan import Plan
>>> g = samples.diamond()
>>> p = Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"}, method="manual")
>>> p.devices_used()
['gpu0', 'gpu1']
>>> p.validate(Cluster.preset("2xV100-pcie"))
>>> Plan(g, {"a": "gpu0"}).validate(Cluster.preset("2xV100-pcie"))
Traceback (most recent call last):
...
workbench.errors.PlanError: plan 'manual' leaves 3 ops unplaced (e.g. 'b')
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import PlanError

__all__ = ["Plan", "Schedule", "Metrics", "STATUSES", "FINGERPRINT_PARTS", "check_schedule",
           "fingerprint_differences", "graph_fingerprint", "order_from_starts"]

STATUSES = ("optimal", "feasible", "time_limit", "heuristic", "infeasible", "out_of_memory",
            "error")
"""Plan statuses: proven optimal; feasible (MILP stopped with a gap); time_limit (stopped by the
limit, best found kept); heuristic; infeasible (could not respect a constraint, e.g. memory —
the plan is still returned so it can be inspected); out_of_memory (the method respected its own
memory model, the papers' static sum, but the judge's live model finds a device over its
capacity: :func:`workbench.solve` sets it and keeps the method's status in
``stats["solver_status"]``); error (used by :func:`workbench.compare`)."""


FINGERPRINT_PARTS = ("ops", "edges", "costs")
"""What :func:`graph_fingerprint` hashes, each part on its own."""


def _digest(*chunks) -> str:
    import hashlib

    h = hashlib.sha256()
    for c in chunks:
        h.update(c if isinstance(c, bytes) else np.ascontiguousarray(c).tobytes())
        h.update(b"\0")
    return h.hexdigest()[:16]


def graph_fingerprint(graph) -> dict:
    """Stable hashes of what a plan was made for, one per part of :data:`FINGERPRINT_PARTS`:
    ``ops`` (names, forward/backward kinds, colocation groups), ``edges`` (producer/consumer
    pairs) and ``costs`` (compute per device kind, memory, bytes and fixed ``comm`` of every
    edge). Independent of the order in which the graph was built; any change of a cost, however
    small, changes ``costs``.

    >>> from workbench import samples
    >>> a = graph_fingerprint(samples.diamond())
    >>> sorted(a), a == graph_fingerprint(samples.diamond())
    (['costs', 'edges', 'ops'], True)
    >>> b = graph_fingerprint(samples.diamond().map_ops(lambda v, at: {**at, "memory": 1.0}))
    >>> fingerprint_differences(a, b)
    ['costs']
    """
    gc = graph.c
    names = np.array(gc.names, dtype=object)
    perm = np.argsort(names, kind="stable") if gc.n else np.zeros(0, dtype=np.int64)
    kinds = sorted(gc.kinds)
    cols = [gc.kind_index[k] for k in kinds]
    groups = np.array(list(gc.coloc_groups) + [""], dtype=object)[gc.coloc]
    ops = "\0".join(f"{names[i]}\1{int(gc.op_kind[i])}\1{groups[i]}" for i in perm.tolist())
    pairs = [(gc.names[u], gc.names[v]) for u, v in zip(gc.src.tolist(), gc.dst.tolist())]
    eperm = sorted(range(len(pairs)), key=pairs.__getitem__)
    edges = "\0".join(f"{u}\1{v}" for u, v in (pairs[e] for e in eperm))
    comp = gc.compute[perm][:, cols] if gc.n else np.zeros((0, len(cols)))
    costs = _digest("\0".join(kinds).encode(), comp.astype(float), gc.memory[perm].astype(float),
                    gc.bytes[eperm].astype(float), gc.comm[eperm].astype(float))
    return {"ops": _digest(ops.encode()), "edges": _digest(edges.encode()), "costs": costs}


def fingerprint_differences(stored: dict, current: dict) -> list:
    """The parts (of :data:`FINGERPRINT_PARTS`) in which two fingerprints differ; parts that
    ``stored`` lacks are not compared.

    >>> fingerprint_differences({"ops": "a", "edges": "b"}, {"ops": "a", "edges": "c", "costs": "d"})
    ['edges']
    """
    return [k for k in FINGERPRINT_PARTS if k in stored and stored[k] != current.get(k)]


def check_schedule(plan, schedule, what: str = "schedule") -> None:
    """Raise PlanError unless ``schedule`` is a simulation of ``plan`` (its ``plan_key``, or
    for a schedule without one, its graph and each op's device), naming what differs.

    >>> import workbench as wb
    >>> g, c = wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie")
    >>> a = wb.Plan(g, {v: "gpu0" for v in g.ops}, method="one")
    >>> b = wb.Plan(g, {**a.placement, "c": "gpu1"}, method="two")
    >>> check_schedule(a, wb.simulate(a, c))
    >>> check_schedule(a, wb.simulate(b, c), "schedules[0]")
    Traceback (most recent call last):
    ...
    workbench.errors.PlanError: schedules[0] is not a simulation of plan 'one': it simulates plan 'two', which puts 1 op elsewhere (e.g. 'c' on gpu1, not gpu0)
    """
    sg = schedule.graph
    if sg is not plan.graph and sg.fingerprint != plan.graph.fingerprint:
        raise PlanError(f"{what} is not a simulation of plan {plan.method!r}: it simulates "
                        f"graph {sg.name!r} ({sg.n_ops} ops), the plan is for graph "
                        f"{plan.graph.name!r} ({plan.graph.n_ops} ops)")
    names = schedule.cluster.names
    placed = {v: names[int(d)] for v, d in zip(sg.ops, schedule.device.tolist())}
    moved = [v for v in plan.graph.ops if placed.get(v) != plan.placement.get(v)]
    if not moved and (not schedule.plan_key or schedule.plan_key == plan.key):
        return
    other = f"plan {schedule.method!r}" if schedule.method else "another plan"
    if moved:
        v = moved[0]
        why = (f"which puts {len(moved)} op{'s' if len(moved) > 1 else ''} elsewhere (e.g. "
               f"{v!r} on {placed.get(v)}, not {plan.placement.get(v)})")
    else:
        why = "with the same placement but another order on some device"
    raise PlanError(f"{what} is not a simulation of plan {plan.method!r}: it simulates "
                    f"{other}, {why}")


def order_from_starts(graph, device_names, device, start, tie=None) -> dict:
    """Per-device execution order from start times (ties by ``tie``, else by op index).

    ``tie``: a rank per op breaking equal starts, e.g. ``Schedule.run_rank`` (the order in
    which the simulator started them: zero-duration ops share a start time but not a rank).

    ``device`` holds each op's device index into ``device_names``; every device gets a list,
    empty when nothing runs on it.

    >>> from workbench import samples
    >>> order_from_starts(samples.diamond(), ["d0", "d1"], [0, 0, 1, 0], [0.0, 2.0, 1.0, 3.0])
    {'d0': ['a', 'b', 'd'], 'd1': ['c']}
    """
    names = graph.c.names
    out: dict = {d: [] for d in device_names}
    dev = np.asarray(device).tolist()
    key2 = np.arange(graph.n_ops) if tie is None else np.asarray(tie)
    for i in np.lexsort((key2, np.asarray(start, dtype=float))).tolist():
        out[device_names[int(dev[i])]].append(names[i])
    return out


@dataclass
class Plan:
    """A placement (op -> device name) with an optional per-device execution order.

    Attributes
    ----------
    graph : OpGraph
        The graph the plan refers to (after splitting or coarsening expansion).
    placement : dict
        Op name -> device name, every op exactly once.
    method : str
        The solver that made it.
    order : dict or None
        Device name -> list of its ops in execution order (``None``: no order is enforced).
    status : str
        One of :data:`STATUSES`.
    predicted : dict
        The solver's own objective values, e.g. ``{"makespan_ms": 12.0}``.
    stats : dict
        Solve seconds, MIP gap, sizes, ...
    info : dict
        Method-specific details (splits applied, replicas, stages, coarsening map).
    """

    graph: Any
    placement: dict
    method: str = "manual"
    order: dict | None = None
    status: str = "heuristic"
    predicted: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.status, str) or self.status not in STATUSES:
            raise PlanError(f"plan status {self.status!r} is not one of {', '.join(STATUSES)}")
        if not isinstance(self.method, str):
            raise PlanError(f"plan method must be a string, got {self.method!r}")
        if not hasattr(self.placement, "items"):
            raise PlanError(f"plan {self.method!r}: placement must be a dict op -> device, got "
                            f"{type(self.placement).__name__}")
        self.placement = {str(k): str(v) for k, v in self.placement.items()}
        if self.order is not None:
            if not hasattr(self.order, "items"):
                raise PlanError(f"plan {self.method!r}: order must be a dict device -> ops or "
                                f"None, got {type(self.order).__name__}")
            for d, ops in self.order.items():
                if isinstance(ops, (str, bytes)) or not hasattr(ops, "__iter__"):
                    raise PlanError(f"plan {self.method!r}: order of device {d!r} must be a "
                                    f"list of ops, got {ops!r}")
            self.order = {str(d): [str(v) for v in ops] for d, ops in self.order.items()}
        for what in ("predicted", "stats", "info"):
            if not isinstance(getattr(self, what), dict):
                raise PlanError(f"plan {self.method!r}: {what} must be a dict")

    def __repr__(self) -> str:
        return (f"Plan(method={self.method!r}, status={self.status!r}, graph={self.graph.name!r},"
                f" devices={self.devices_used()})")

    def devices_used(self) -> list[str]:
        return sorted(set(self.placement.values()))

    def ops_on(self, device: str) -> list[str]:
        """Ops placed on ``device`` in the plan's order (or topological order)."""
        if self.order is not None and device in self.order:
            return list(self.order[device])
        return [v for v in self.graph.ops if self.placement.get(v) == device]

    def graph_fingerprint(self) -> dict:
        """:func:`graph_fingerprint` of the plan's graph (saved with the plan)."""
        return graph_fingerprint(self.graph)

    @property
    def key(self) -> str:
        """A short hash of what this plan is: its graph (op names and edges), the device of
        every op and each device's order. A :class:`Schedule` carries the key of the plan it
        simulates (``plan_key``), so a schedule is never taken for another plan's.

        >>> from workbench import samples
        >>> g = samples.diamond()
        >>> a = Plan(g, {"a": "cpu0", "b": "cpu0", "c": "cpu1", "d": "cpu0"})
        >>> a.key == Plan(g, dict(a.placement), method="other").key
        True
        >>> a.key == a.with_placement({**a.placement, "c": "cpu0"}).key
        False
        """
        import hashlib

        h = hashlib.sha1(self.graph.fingerprint.encode())
        h.update("\0".join(str(self.placement.get(v)) for v in self.graph.ops).encode())
        for d in sorted(self.order or {}):
            h.update(f"\1{d}\2".encode() + "\0".join(self.order[d]).encode())
        return h.hexdigest()[:16]

    @property
    def problem(self) -> str:
        """The fingerprint of the graph the plan was made for: the graph given to
        :func:`workbench.solve` (``info["problem"]``), which a method may have transformed
        (replicated, split) into :attr:`graph`; else the plan's own graph."""
        return self.info.get("problem") or self.graph.fingerprint

    def validate(self, cluster) -> None:
        """Raise PlanError unless every op is placed exactly once on a device of ``cluster``
        that can run it, and the order (if any) lists exactly each device's ops."""
        self._checked_devices(cluster)

    def _checked_devices(self, cluster) -> np.ndarray:
        """Device index of every op (graph order) of a valid plan; :meth:`_explain` raises the
        first fault otherwise. One vectorised pass: the judge validates every plan it runs."""
        g = self.graph
        gc, idx, pl = g.c, cluster.index, self.placement
        dev = None
        if len(pl) == gc.n:
            try:
                dev = np.array(list(map(idx.__getitem__, map(pl.__getitem__, gc.names))),
                               dtype=np.int64)
            except KeyError:
                dev = None
        if dev is not None and gc.n:
            kcol = np.array([gc.kind_index.get(d.kind, -1) for d in cluster.devices] + [-1])
            col = kcol[dev]
            runs = (col >= 0) & np.isfinite(gc.compute[np.arange(gc.n), col])
            if not runs.all():
                dev = None
        if dev is not None and self.order is not None:
            dev = dev if self._order_fits(dev, idx, g.index) else None
        if dev is None:
            self._explain(cluster)
            raise PlanError(f"plan {self.method!r} is not valid on cluster {cluster.name!r}")
        return dev

    def _order_fits(self, dev: np.ndarray, idx: dict, gidx: dict) -> bool:
        """Whether the order lists each op once, on the device that the placement gives it."""
        seen = np.zeros(len(dev), dtype=bool)
        total = 0
        for d, ops in self.order.items():
            di = idx.get(d)
            if di is None:
                return False
            try:
                pos = np.array(list(map(gidx.__getitem__, ops)), dtype=np.int64)
            except KeyError:
                return False
            if (dev[pos] != di).any() or seen[pos].any():
                return False
            seen[pos] = True
            if len(np.unique(pos)) != len(pos):
                return False
            total += len(pos)
        return total == len(dev)

    def _explain(self, cluster) -> None:
        """Raise the PlanError naming the first fault of an invalid plan."""
        g = self.graph
        missing = [v for v in g.ops if v not in self.placement]
        if missing:
            raise PlanError(f"plan {self.method!r} leaves {len(missing)} ops unplaced "
                            f"(e.g. {missing[0]!r})")
        extra = [v for v in self.placement if v not in g.index]
        if extra:
            raise PlanError(f"plan {self.method!r} places {len(extra)} ops that are not in graph "
                            f"{g.name!r} (e.g. {extra[0]!r}): is it a plan for another graph?")
        for v, d in self.placement.items():
            if d not in cluster.index:
                raise PlanError(f"plan {self.method!r} puts op {v!r} on unknown device {d!r}; "
                                f"cluster {cluster.name!r} has {', '.join(cluster.index)}")
            kind = cluster.devices[cluster.index[d]].kind
            if kind not in g.nx.nodes[v]["compute"]:
                raise PlanError(f"plan {self.method!r} puts op {v!r} on {d!r} of kind {kind!r}, "
                                f"where it cannot run")
        if self.order is not None:
            seen: set = set()
            for d, ops in self.order.items():
                if d not in cluster.index:
                    raise PlanError(f"plan {self.method!r} orders unknown device {d!r}")
                for v in ops:
                    if v in seen:
                        raise PlanError(f"plan {self.method!r} orders op {v!r} twice")
                    seen.add(v)
                    if self.placement.get(v) != d:
                        raise PlanError(f"plan {self.method!r} orders op {v!r} on {d!r} but "
                                        f"places it on {self.placement.get(v)!r}")
            if len(seen) != g.n_ops:
                lost = next(v for v in g.ops if v not in seen)
                raise PlanError(f"plan {self.method!r} has an order that omits op {lost!r}")

    def device_array(self, cluster) -> np.ndarray:
        """Device index of every op, in the graph's op order (validates the plan first)."""
        return self._checked_devices(cluster)

    def with_placement(self, placement: dict, **changes) -> "Plan":
        """A copy with another placement (order dropped unless given)."""
        kw = dict(graph=self.graph, placement=placement, method=self.method, order=None,
                  status=self.status, predicted={}, stats=dict(self.stats), info=dict(self.info))
        kw.update(changes)
        return Plan(**kw)


@dataclass
class Schedule:
    """A realised timeline produced by :func:`workbench.simulate`.

    Per op (arrays in the graph's op order): ``device`` index, ``start`` and ``end`` ms.
    Per transfer (arrays of equal length): ``t_op`` (index of the producing op), ``t_src`` and
    ``t_dst`` (device indices; in host mode one of them is ``-1`` for host DRAM),
    ``t_start``, ``t_end``, ``t_bytes``. ``critical_path`` lists the realised chain of
    ``("op", name)`` and ``("transfer", k)`` items that ends at the makespan. ``run_rank``
    (optional): the order in which the ops were started, which breaks ties of ``start``
    (zero-duration ops run at one instant in a definite order). ``peak_memory``: per device the
    static sum of its ops' ``memory``; ``peak_live_memory``: per device the peak of live memory
    over the step (parameters resident, activations and stashes only while live; see
    :mod:`workbench.judge.liveness`).
    """

    graph: Any
    cluster: Any
    device: np.ndarray
    start: np.ndarray
    end: np.ndarray
    t_op: np.ndarray
    t_src: np.ndarray
    t_dst: np.ndarray
    t_start: np.ndarray
    t_end: np.ndarray
    t_bytes: np.ndarray
    makespan: float
    critical_path: list
    peak_memory: dict
    link_bytes: dict
    method: str = ""
    run_rank: np.ndarray | None = None
    peak_live_memory: dict = field(default_factory=dict)
    plan_key: str = ""  # Plan.key of the plan simulated ("" when unknown)

    def link_name(self, k: int) -> str:
        """Name of the channel used by transfer ``k``, e.g. ``gpu0->gpu1`` or ``gpu0->host``."""
        names = self.cluster.names
        s, d = int(self.t_src[k]), int(self.t_dst[k])
        return f"{names[s] if s >= 0 else 'host'}->{names[d] if d >= 0 else 'host'}"

    @property
    def n_transfers(self) -> int:
        return len(self.t_op)

    def critical_ops(self) -> list[str]:
        return [x for kind, x in self.critical_path if kind == "op"]

    def device_order(self) -> dict:
        """Device name -> its ops in the order they ran (a ``Plan.order``; unused devices get
        empty lists). ``plan.with_placement(plan.placement, order=s.device_order())`` fixes the
        order the simulator chose."""
        return order_from_starts(self.graph, self.cluster.names, self.device, self.start,
                                 self.run_rank)

    def ops_frame(self):
        """One row per op: op, device, start_ms, end_ms, duration_ms, kind, op_type."""
        import pandas as pd

        g = self.graph
        names = self.cluster.names
        crit = set(self.critical_ops())
        return pd.DataFrame({
            "op": g.ops,
            "device": [names[i] for i in self.device.tolist()],
            "start_ms": self.start,
            "end_ms": self.end,
            "duration_ms": self.end - self.start,
            "kind": [g.nx.nodes[v]["kind"] for v in g.ops],
            "op_type": [g.nx.nodes[v]["op_type"] for v in g.ops],
            "critical": [v in crit for v in g.ops],
        })

    def transfers_frame(self):
        """One row per transfer: op (producer), link, start_ms, end_ms, bytes."""
        import pandas as pd

        crit = {x for kind, x in self.critical_path if kind == "transfer"}
        return pd.DataFrame({
            "op": [self.graph.c.names[i] for i in self.t_op.tolist()],
            "link": [self.link_name(k) for k in range(self.n_transfers)],
            "start_ms": self.t_start,
            "end_ms": self.t_end,
            "duration_ms": self.t_end - self.t_start,
            "bytes": self.t_bytes,
            "critical": [k in crit for k in range(self.n_transfers)],
        })

    def to_pandas(self):
        """Ops and transfers in one frame with a ``lane`` (device or link) and ``type`` column."""
        import pandas as pd

        ops = self.ops_frame().rename(columns={"device": "lane"}).assign(type="op")
        tr = self.transfers_frame().rename(columns={"link": "lane"}).assign(type="transfer")
        return pd.concat([ops, tr], ignore_index=True, sort=False)

    def to_chrome_trace(self) -> dict:
        """Chrome-trace / Perfetto JSON object (open in ui.perfetto.dev or chrome://tracing):
        devices are one process, links another, each device or link a thread (lane); times in
        microseconds. :func:`workbench.io.save_chrome_trace` writes it to a file."""
        schedule = self
        names = schedule.cluster.names
        events = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "devices"}},
                  {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "links"}}]
        for i, d in enumerate(names):
            events.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": i, "args": {"name": d}})
        g = schedule.graph
        crit = set(schedule.critical_ops())
        for i, v in enumerate(g.ops):
            a = g.nx.nodes[v]
            events.append({"ph": "X", "pid": 1, "tid": int(schedule.device[i]), "name": v,
                           "cat": a["kind"], "ts": float(schedule.start[i]) * 1e3,
                           "dur": float(schedule.end[i] - schedule.start[i]) * 1e3,
                           "args": {"op_type": a["op_type"], "critical": v in crit}})
        lanes: dict = {}
        for k in range(schedule.n_transfers):
            lane = schedule.link_name(k)
            if lane not in lanes:
                lanes[lane] = len(lanes)
                events.append({"ph": "M", "name": "thread_name", "pid": 2, "tid": lanes[lane],
                               "args": {"name": lane}})
            events.append({"ph": "X", "pid": 2, "tid": lanes[lane],
                           "name": g.c.names[int(schedule.t_op[k])], "cat": "transfer",
                           "ts": float(schedule.t_start[k]) * 1e3,
                           "dur": float(schedule.t_end[k] - schedule.t_start[k]) * 1e3,
                           "args": {"bytes": float(schedule.t_bytes[k])}})
        return {"traceEvents": events, "displayTimeUnit": "ms",
                "otherData": {"graph": g.name, "method": schedule.method,
                              "makespan_ms": schedule.makespan}}


@dataclass
class Metrics:
    """Both objectives of a plan, its resources, feasibility and gaps to lower bounds."""

    makespan_ms: float
    max_load_ms: float
    comm_ms: float
    comm_bytes: float
    peak_memory: dict
    memory_fraction: float
    devices_used: int
    feasible: bool
    violations: list
    makespan_lb: float = 0.0
    max_load_lb: float = 0.0
    peak_live_memory: dict = field(default_factory=dict)
    live_memory_fraction: float = 0.0

    @property
    def makespan_gap(self) -> float:
        """Relative distance of the makespan to its lower bound (0 = provably optimal)."""
        return _gap(self.makespan_ms, self.makespan_lb)

    @property
    def max_load_gap(self) -> float:
        return _gap(self.max_load_ms, self.max_load_lb)

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["makespan_gap"] = self.makespan_gap
        d["max_load_gap"] = self.max_load_gap
        return d


def _gap(value: float, bound: float) -> float:
    if bound <= 0:
        return 0.0 if value <= 0 else math.inf
    g = value / bound - 1.0
    return 0.0 if g < 1e-9 else g  # float noise below a billionth is no gap
