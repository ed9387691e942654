"""The runner: apply a :class:`~workbench.plan.Plan` to the real TensorFlow program and measure it.

Applying a plan means rewriting the ``device`` of every node of the step's GraphDef (forward,
gradient and update ops alike) from the plan's placement; an execution order, when the plan has
one, is enforced with control dependencies between consecutive ops of each device (FastT's first
implementation). The rewritten graph runs in a ``tf.compat.v1.Session`` on local devices -- GPUs
when present, otherwise logical CPU devices created for the session with
``ConfigProto(device_count={"CPU": n})`` -- or, with ``target=``, on a ``tf.distribute.Server``
cluster (:mod:`workbench.runtime.distributed`). Grappler is off so the executed graph is the
placed one.

A measurement is ``warmup`` untimed steps, then ``steps`` timed ones (wall clock of
``Session.run``): mean, standard deviation and the samples, in ms.

One op at a time per device
---------------------------
TensorFlow's CPU devices have no stream of their own: every ready op of every device goes to
one shared inter-op thread pool, so two ops "on" one logical CPU device run at once whenever
two threads are free, and a placement on logical CPU devices would barely matter. The
simulator's device runs one op at a time (as a GPU stream does). So, by default on CPU
devices (``serialize=None``), the runner chains the ops of each device with control
dependencies: in ``plan.order`` when the plan has one; otherwise in the order the simulator
runs them (first-ready-first, :func:`workbench.simulate`) when a ``cluster`` is given, else in
topological order. ``Measurement.order_source`` says which ("plan", "simulated",
"topological", or None when nothing was chained).

Failures are reported per plan: a plan that does not fit the program (op names of another graph,
unplaced ops, an unknown device name, a variable split from its reads/updates, an order that
contradicts the dependencies, an op on a device kind TensorFlow has no kernel of it for, or an
op TensorFlow refuses to place on its device) raises :class:`~workbench.errors.PlanError`
before any step runs;
a device that does not exist or a step that fails (out of memory, kernel error) raises
:class:`~workbench.errors.RuntimeBridgeError`. :func:`measure_plans` turns either into a
``Measurement`` with ``error`` set and no timing, so the other plans still run and nothing
partial is reported as complete.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import pairwise
from numbers import Integral

import networkx as nx

from ..errors import PlanError, RuntimeBridgeError, WorkbenchError
from ..plan import Plan
from ._tf import new_session, op_error_message, tf, tf_device
from .extraction import program_for
from .gpu import is_gpu_device, sync_op
from .program import Program, _input_name, step_dag
from .realtime import realtime as realtime_scheduling
from .steady_memory import minor_faults

__all__ = [
    "Decision",
    "Measurement",
    "PlanSession",
    "apply_if_faster",
    "execution_chains",
    "measure_plans",
    "parse_step_stats",
    "placed_graph_def",
    "run_plan",
    "with_run_order",
]


@dataclass
class Measurement:
    """Measured step time of one plan (ms). ``error`` is set (and timings are NaN) on failure.

    ``trace`` (when requested) maps node -> ``(tf_device, start_ms, end_ms)`` of one traced step,
    times relative to the step's first op. ``realtime``: every timed and traced step ran under
    real-time scheduling (:mod:`workbench.runtime.realtime`). ``faults``: the process's minor page
    faults during the timed steps (:mod:`workbench.runtime.steady_memory`: a warm step that
    takes hundreds is one whose memory goes back to the system and is faulted in again).
    """

    method: str
    mean_ms: float = math.nan
    std_ms: float = math.nan
    samples: list = field(default_factory=list)
    steps: int = 0
    warmup: int = 0
    devices: list = field(default_factory=list)
    ordered: bool = False
    trace: dict | None = None
    error: str | None = None
    order_source: str | None = None
    realtime: bool = False
    faults: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples) if self.samples else math.nan

    @property
    def faults_per_step(self) -> float:
        """Minor page faults per timed step (NaN without timed steps).

        >>> Measurement("x", samples=[1.0, 1.1], faults=6).faults_per_step
        3.0
        """
        return self.faults / len(self.samples) if self.samples else math.nan

    def to_dict(self) -> dict:
        return {"method": self.method, "mean_ms": self.mean_ms, "std_ms": self.std_ms,
                "median_ms": self.median_ms, "samples": list(self.samples), "steps": self.steps,
                "warmup": self.warmup, "devices": list(self.devices), "ordered": self.ordered,
                "order_source": self.order_source, "error": self.error,
                "realtime": self.realtime, "faults": self.faults}


@dataclass
class Decision:
    """Outcome of :func:`apply_if_faster`: the plan to keep and both measurements."""

    plan: Plan
    switched: bool
    current: Measurement
    candidate: Measurement


# ---------------------------------------------------------------------- graph rewriting
def placed_graph_def(program: Program, placement: Mapping[str, str], *,
                     order: Mapping[str, list] | None = None, default: str | None = None):
    """A copy of the program's GraphDef with every node on a TensorFlow device.

    ``placement`` maps step nodes to full TF device strings; nodes outside the step (variable
    initialisers) follow the variable they initialise (``_class`` colocation or a resource
    input), else ``default``. ``order`` (TF device -> nodes) adds a control edge from each node
    to the next one on its device, skipping the nodes the initialiser also needs (variable
    handles: they do no work). ``_class`` attributes are dropped (the plan decides).
    """
    t = tf()
    gd = t.compat.v1.GraphDef()
    gd.CopyFrom(program.graph_def)
    default = default or next(iter(placement.values()))
    res_src = {}
    for a, b in program.resource_edges:
        res_src.setdefault(b, a)
    dev: dict = dict(placement)
    for n in gd.node:
        if n.name in dev:
            continue
        target = None
        if "_class" in n.attr:
            for s in n.attr["_class"].list.s:
                s = s.decode()
                if s.startswith("loc:@") and s[5:] in dev:
                    target = dev[s[5:]]
                    break
        if target is None and n.name in res_src and res_src[n.name] in dev:
            target = dev[res_src[n.name]]
        dev[n.name] = target or default
    prev: dict = {}
    if order:
        # nodes the initialiser needs (variable handles) are left out of the chains, or
        # initialising would wait for ops that read uninitialised variables
        nodes = {n.name: n for n in gd.node}
        needed: set = set()
        stack = [program.init_op]
        while stack:
            v = stack.pop()
            if v not in needed and v in nodes:
                needed.add(v)
                stack.extend(_input_name(s)[0] for s in nodes[v].input)
        for ops in order.values():
            for a, b in pairwise([v for v in ops if v not in needed]):
                prev.setdefault(b, []).append(a)
    for n in gd.node:
        n.device = dev[n.name]
        if "_class" in n.attr:
            del n.attr["_class"]
        for a in prev.get(n.name, ()):
            n.input.append("^" + a)
    return gd


def parse_step_stats(step_stats) -> dict:
    """Node -> ``(device, start_us, end_us, alloc_bytes)`` of one traced step (absolute µs).

    A node recorded several times (e.g. on two devices) keeps its first start and last end.
    """
    out: dict = {}
    for ds in step_stats.dev_stats:
        for ns in ds.node_stats:
            name = ns.node_name
            if name in ("_SOURCE", "_SINK"):
                continue
            start = ns.all_start_micros
            end = start + max(ns.all_end_rel_micros, ns.op_end_rel_micros)
            alloc = sum(m.total_bytes for m in ns.memory)
            if name in out:
                d0, s0, e0, a0 = out[name]
                out[name] = (d0, min(s0, start), max(e0, end), a0 + alloc)
            else:
                out[name] = (ds.device, start, end, alloc)
    return out


def _check_plan(plan: Plan, program: Program) -> None:
    if not isinstance(plan, Plan):
        raise PlanError(f"expected a Plan, got {type(plan).__name__}")
    step = set(program.step_nodes)
    extra = [v for v in plan.placement if v not in step]
    if extra:
        raise PlanError(
            f"plan {plan.method!r} places {len(extra)} ops that are not in the TensorFlow "
            f"program {program.spec.get('model') or 'custom'!r} (e.g. {extra[0]!r}): is it a "
            f"plan for another graph?")
    missing = [v for v in program.step_nodes if v not in plan.placement]
    if missing:
        raise PlanError(f"plan {plan.method!r} leaves {len(missing)} ops of the program "
                        f"unplaced (e.g. {missing[0]!r}): is it a plan for another graph?")
    for a, b in program.resource_edges:
        if a in step and b in step and plan.placement[a] != plan.placement[b]:
            raise PlanError(
                f"plan {plan.method!r} puts op {b!r} on {plan.placement[b]!r} but the variable "
                f"it uses, {a!r}, on {plan.placement[a]!r}: TensorFlow runs resource ops where "
                f"the resource lives (respect the graph's colocation groups)")
    if plan.order is not None:
        for d, ops in plan.order.items():
            for v in ops:
                if plan.placement.get(v) != d:
                    raise PlanError(f"plan {plan.method!r} orders op {v!r} on {d!r} but places "
                                    f"it on {plan.placement.get(v)!r}")


def _check_order_acyclic(plan: Plan, program: Program) -> None:
    G = step_dag(program)
    for ops in plan.order.values():
        G.add_edges_from(pairwise(ops))
    if not nx.is_directed_acyclic_graph(G):
        cyc = nx.find_cycle(G)
        path = " -> ".join(u for u, _ in cyc[:6])
        raise PlanError(f"plan {plan.method!r}: its execution order contradicts the graph's "
                        f"dependencies (cycle {path} ...); it would deadlock")


def _check_kernels(plan: Plan, program: Program, dmap: Mapping[str, str]) -> None:
    """PlanError naming the first op placed on a device type that TensorFlow has no kernel of
    that op for (in this build): TensorFlow would refuse to place it there."""
    t = tf()
    from tensorflow.python.framework import kernels

    nodes = program.nodes
    types = {d: (t.compat.v1.DeviceSpec.from_string(full).device_type or "CPU").upper()
             for d, full in dmap.items()}
    known: dict = {}
    for v in program.step_nodes:
        d = plan.placement[v]
        key = (nodes[v].op, types[d])
        if key not in known:
            try:
                reg = kernels.get_registered_kernels_for_op(key[0]).kernel
            except Exception:  # noqa: BLE001 - an op type without kernels
                reg = []
            known[key] = any(k.device_type.upper() in (key[1], "DEFAULT") for k in reg)
        if not known[key]:
            raise PlanError(f"plan {plan.method!r} puts op {v!r} ({key[0]}) on {d!r}, but this "
                            f"TensorFlow has no {key[1]} kernel for {key[0]}: it cannot run "
                            f"there (place it on a device of another kind)")


def _placement_error(plan: Plan, e: BaseException) -> PlanError | None:
    """TensorFlow's refusal to place an op ("Cannot assign a device for operation", "No
    OpKernel was registered ... used by {{node X}}"), as a PlanError naming the op (else None).
    """
    import re

    text = str(getattr(e, "message", None) or e)
    m = (re.search(r"Cannot assign a device for operation '?([^\s:']+)'?", text)
         or re.search(r"No OpKernel was registered to support Op '\w+' used by \{\{node "
                      r"([^}]+)\}\}", text))
    if m is None:
        return None
    return PlanError(f"plan {plan.method!r}: TensorFlow will not place op {m.group(1)!r} on its "
                     f"planned device: {op_error_message(e)}")


def _resolve_devices(plan: Plan, devices: Mapping[str, str] | None) -> dict:
    names = sorted(set(plan.placement.values()))
    out = {}
    for d in names:
        if devices is not None and d in devices:
            out[d] = devices[d]
        elif devices is not None and not d.startswith("/"):
            raise PlanError(f"plan {plan.method!r} uses device {d!r}, which is not in the device "
                            f"map ({', '.join(devices) or 'empty'})")
        else:
            out[d] = tf_device(d)
    return out


def _canonical(dev: str) -> str:
    t = tf()
    return t.compat.v1.DeviceSpec.from_string(dev).to_string()


def _open_session(graph, tf_devs: Iterable[str], *, target: str, inter_op: int | None,
                  intra_op: int, spinning: bool = True):
    t = tf()
    tf_devs = list(tf_devs)
    cpus = 1
    for d in tf_devs:
        spec = t.compat.v1.DeviceSpec.from_string(d)
        if spec.job == "localhost" and (spec.device_type or "").upper() == "CPU":
            cpus = max(cpus, int(spec.device_index or 0) + 1)
    if not target and cpus > 256:
        raise RuntimeBridgeError(f"a plan on {cpus} logical CPU devices is not supported "
                                 f"(at most 256)")
    sess = new_session(graph, target=target or "", cpus=cpus,
                       inter_op=inter_op or len(set(tf_devs)), intra_op=intra_op,
                       spinning=spinning)
    have = {_canonical(d.name) for d in sess.list_devices()}
    for d in tf_devs:
        if _canonical(d) not in have:
            sess.close()
            raise RuntimeBridgeError(f"device {d!r} does not exist; available: "
                                     f"{', '.join(sorted(have))}")
    return sess


def _is_cpu(tf_dev: str) -> bool:
    return (tf().compat.v1.DeviceSpec.from_string(tf_dev).device_type or "").upper() == "CPU"


def execution_chains(plan: Plan, *, cluster=None, enforce_order: bool = True) -> tuple:
    """The per-device op sequences the runner enforces when it serialises devices, and their
    source: ``(plan.order, "plan")`` if the plan has one (and ``enforce_order``), else the
    simulator's first-ready-first order on ``cluster`` (``"simulated"``), else each device's
    ops in topological order (``"topological"``).

    >>> from workbench import samples, Plan, Cluster
    >>> g = samples.diamond()
    >>> p = Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"})
    >>> execution_chains(p)
    ({'gpu0': ['a', 'b', 'd'], 'gpu1': ['c']}, 'topological')
    >>> execution_chains(p, cluster=Cluster.preset("2xV100-pcie"))[1]
    'simulated'
    """
    if enforce_order and plan.order is not None:
        return plan.order, "plan"
    if cluster is not None:
        from ..simulate import simulate

        chains = simulate(plan, cluster, order="fifo").device_order()
        return {d: ops for d, ops in chains.items() if ops}, "simulated"
    return {d: plan.ops_on(d) for d in plan.devices_used()}, "topological"


def with_run_order(plan: Plan, cluster) -> Plan:
    """``plan`` with its per-device order fixed: its own order when it has one, else the order
    the runner would chain on ``cluster`` (:func:`execution_chains`). A plan without an order
    is chained in the simulator's FIFO order *on the cluster it is run with*, and fitted
    clusters differ between a calibration and the rounds that follow, so the same placement can
    run in different orders (lstm_seq2seq's probe: 10 ms in one order, 15 ms in another);
    with the order fixed, every run of it and every prediction of it use one order.

    >>> from workbench import samples, Plan, Cluster
    >>> g = samples.diamond()
    >>> p = with_run_order(Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"}),
    ...                    Cluster.preset("2xV100-pcie"))
    >>> p.order
    {'gpu0': ['a', 'b', 'd'], 'gpu1': ['c']}
    """
    if plan.order is not None:
        return plan
    return replace(plan, order=execution_chains(plan, cluster=cluster)[0])


class PlanSession:
    """One plan applied to its program in an open ``Session``, ready to time steps.

    :func:`run_plan` is ``PlanSession`` + warm-up + :meth:`time` + :meth:`close`;
    :func:`measure_plans` keeps several open to interleave their timed steps. Arguments are
    those of :func:`run_plan`. Use as a context manager or call :meth:`close`.
    """

    def __init__(self, plan: Plan, *, program: Program | None = None,
                 devices: Mapping[str, str] | None = None, target: str = "",
                 enforce_order: bool = True, inter_op: int | None = None, intra_op: int = 1,
                 serialize: bool | None = None, cluster=None, realtime: bool = False):
        self.plan = plan
        self.realtime = bool(realtime)
        self._granted: list = []
        program = program or program_for(plan.graph)
        _check_plan(plan, program)
        self.ordered = bool(enforce_order and plan.order is not None)
        if self.ordered:
            _check_order_acyclic(plan, program)
        dmap = _resolve_devices(plan, devices)
        self.devices = sorted(dmap)
        placement = {v: dmap[d] for v, d in plan.placement.items()}
        # which devices get chained: all (True), none (False), or by default the CPU devices
        # only (a GPU's compute stream already runs its kernels one at a time)
        if serialize is None:
            chained = {d for d, full in dmap.items() if _is_cpu(full)}
        else:
            chained = set(dmap) if serialize else set()
        self.order_source = None
        order = None
        if self.ordered or chained:
            chains, self.order_source = execution_chains(plan, cluster=cluster,
                                                         enforce_order=enforce_order)
            order = {dmap[d]: ops for d, ops in chains.items()
                     if d in dmap and (self.ordered or d in chained)}
        gd = placed_graph_def(program, placement, order=order,
                              default=dmap[plan.placement[program.train_op]])
        t = tf()
        graph = t.Graph()
        with graph.as_default():
            t.graph_util.import_graph_def(gd, name="")
            train = graph.get_operation_by_name(program.train_op)
            # GPU kernels run asynchronously: end each step with a SyncDevice per GPU so
            # the wall-clock step time includes the last kernels of every stream
            gpus = sorted(full for full in dmap.values() if is_gpu_device(full))
            self.synced = bool(gpus)
            step_op = t.group(*[sync_op(g, after=[train]) for g in gpus]) if gpus else train
        self._sess = _open_session(graph, dmap.values(), target=target, inter_op=inter_op,
                                   intra_op=intra_op, spinning=not self.realtime)
        self.samples: list = []
        self.faults = 0  # minor page faults during the timed steps
        self.warmup = 0
        try:
            _check_kernels(plan, program, dmap)  # after the devices are known to exist
            self._train = step_op
            self._run(graph.get_operation_by_name(program.init_op),
                      feed_dict=program.init_feed or None)
        except BaseException:
            self.close()
            raise

    def _run(self, op, **kw):
        try:
            return self._sess.run(op, **kw)
        except Exception as e:  # noqa: BLE001 - any TF error (OOM, kernel, placement)
            placement = _placement_error(self.plan, e)
            if placement is not None:
                raise placement from None
            raise RuntimeBridgeError(f"plan {self.plan.method!r} failed while running: "
                                     f"{op_error_message(e)}") from None

    @contextmanager
    def _scheduled(self):
        """The block under real-time scheduling when the session was opened with
        ``realtime=True`` (see :mod:`workbench.runtime.realtime`); records whether it was."""
        with realtime_scheduling(self.realtime) as granted:
            if self.realtime:
                self._granted.append(granted)
            yield

    def warm(self, steps: int) -> None:
        """Run ``steps`` untimed steps."""
        with self._scheduled():
            for _ in range(steps):
                self._run(self._train)
        self.warmup += steps

    def time(self, steps: int) -> list:
        """Run ``steps`` timed steps; their wall times (ms) are added to :attr:`samples`."""
        out = []
        with self._scheduled():
            f0 = minor_faults()
            for _ in range(steps):
                t0 = time.perf_counter()
                self._run(self._train)
                out.append((time.perf_counter() - t0) * 1e3)
            self.faults += minor_faults() - f0
        self.samples.extend(out)
        return out

    def trace(self) -> dict:
        """One FULL_TRACE step: node -> ``(tf_device, start_ms, end_ms)`` from the first op."""
        t = tf()
        ro = t.compat.v1.RunOptions(trace_level=t.compat.v1.RunOptions.FULL_TRACE)
        md = t.compat.v1.RunMetadata()
        with self._scheduled():
            self._run(self._train, options=ro, run_metadata=md)
        raw = parse_step_stats(md.step_stats)
        t0 = min((s for _, s, _, _ in raw.values()), default=0)
        return {v: (d, (s - t0) / 1e3, (e - t0) / 1e3) for v, (d, s, e, _) in raw.items()}

    def measurement(self, trace: dict | None = None) -> Measurement:
        """The :class:`Measurement` of the timed steps so far."""
        s = self.samples
        mean = statistics.fmean(s) if s else math.nan
        std = statistics.pstdev(s) if len(s) > 1 else 0.0
        return Measurement(self.plan.method, mean, std, list(s), len(s), self.warmup,
                           self.devices, self.ordered, trace, order_source=self.order_source,
                           realtime=bool(self._granted) and all(self._granted),
                           faults=self.faults)

    def close(self) -> None:
        sess, self._sess = getattr(self, "_sess", None), None
        if sess is not None:
            sess.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def run_plan(plan: Plan, *, steps: int = 10, warmup: int = 3, program: Program | None = None,
             devices: Mapping[str, str] | None = None, target: str = "",
             enforce_order: bool = True, trace: bool = False, inter_op: int | None = None,
             intra_op: int = 1, serialize: bool | None = None, cluster=None,
             realtime: bool = False) -> Measurement:
    """Apply ``plan`` to its TensorFlow program and measure the step time.

    Parameters
    ----------
    plan : Plan
        Placement of every op of the program's step; ``plan.order`` (if any) is enforced.
    steps, warmup : int
        Timed and untimed steps.
    program : Program, optional
        The program; by default rebuilt from ``plan.graph.meta["program"]``.
    devices : mapping, optional
        Workbench device name -> TensorFlow device string (default: see
        :func:`workbench.runtime._tf.tf_device`: ``cpuN``, ``gpuN``, ``wT/cpuN``).
    target : str
        Session target, e.g. ``grpc://127.0.0.1:port`` of a ``tf.distribute.Server``.
    enforce_order : bool
        Add control dependencies for ``plan.order``.
    trace : bool
        Also run one traced step (FULL_TRACE) and return ``Measurement.trace``.
    inter_op, intra_op : int
        Thread pools (default: one inter-op thread per device used, one thread per op).
    serialize : bool, optional
        Run one op at a time per device by chaining each device's ops (see the module
        docstring); default: the CPU devices of the plan are chained, GPUs are not (a GPU's
        compute stream runs one kernel at a time; ``plan.order`` is enforced on every device).
        Steps on GPUs end with a ``SyncDevice`` per GPU, so their times include the kernels.
    cluster : Cluster, optional
        The cluster the plan was simulated on: a plan without an order is serialised in the
        simulator's order on it (else in topological order).
    realtime : bool
        Run the warm-up, timed and traced steps with every thread of the process under
        ``SCHED_FIFO`` (:func:`workbench.runtime.realtime.realtime`), so that a woken thread
        runs at once instead of waiting for the scheduler's tick on a loaded machine; refused
        (no permission), a warning and normal priority (``Measurement.realtime`` False).

    Raises
    ------
    PlanError
        The plan does not fit the program (see module docstring).
    RuntimeBridgeError
        A device does not exist or a step fails.
    """
    if not isinstance(plan, Plan):  # issue 41
        raise RuntimeBridgeError(f"run_plan needs a Plan, got {type(plan).__name__}")
    _check_steps(steps, warmup)
    with PlanSession(plan, program=program, devices=devices, target=target,
                     enforce_order=enforce_order, inter_op=inter_op, intra_op=intra_op,
                     serialize=serialize, cluster=cluster, realtime=realtime) as ps:
        ps.warm(warmup)
        ps.time(steps)
        return ps.measurement(ps.trace() if trace else None)


def _check_steps(steps: int, warmup: int, **more: tuple) -> None:
    """``steps >= 1`` and ``warmup >= 0``, and each of ``more`` (``name=(value, least)``), as
    whole numbers (issue 41: a text count was a TypeError, ``rounds=0`` and ``steps=0`` of a
    profile passed or divided by zero).

    >>> _check_steps(10, 3, rounds=(0, 1))
    Traceback (most recent call last):
    ...
    workbench.errors.RuntimeBridgeError: need steps >= 1 and warmup >= 0 (whole numbers), and rounds >= 1; got steps=10, warmup=3, rounds=0
    """
    checks = {"steps": (steps, 1), "warmup": (warmup, 0), **more}
    if any(isinstance(v, bool) or not isinstance(v, Integral) or v < lo
           for v, lo in checks.values()):
        extra = "".join(f", and {k} >= {lo}" for k, (_v, lo) in more.items())
        got = ", ".join(f"{k}={v!r}" for k, (v, _lo) in checks.items())
        raise RuntimeBridgeError(f"need steps >= 1 and warmup >= 0 (whole numbers){extra}; "
                                 f"got {got}")


def measure_plans(graph, plans, *, steps: int = 10, warmup: int = 3,
                  program: Program | None = None, rounds: int = 1, **run_kw) -> dict:
    """Measure several plans of one graph; failures are reported per plan, never raised.

    Parameters
    ----------
    graph : OpGraph
        The graph the plans refer to (extracted by :func:`workbench.runtime.extract`).
    plans : mapping name -> Plan, or iterable of Plan (keyed by ``plan.method``)
    steps, warmup, program, **run_kw : passed to :func:`run_plan`.
    rounds : int
        With ``rounds > 1`` every plan's session stays open and the timed steps are
        interleaved: ``rounds`` passes over the plans, each timing ``ceil(steps / rounds)``
        steps of every plan, so that a machine whose speed drifts (other jobs, a shared VM)
        slows all plans alike instead of whichever ran last. Uses one open session per plan;
        the warm-up steps are interleaved the same way (one on opening, the rest in passes),
        so the heap the sessions share has grown to what all of them need before any step is
        timed (:mod:`~workbench.runtime.steady_memory`).

    Returns
    -------
    dict
        Name -> :class:`Measurement`; a failed plan has ``error`` set and NaN timings.
    """
    _check_steps(steps, warmup, rounds=(rounds, 1))
    if isinstance(plans, Mapping):
        items = list(plans.items())
    else:
        items, used = [], set()
        for p in plans:
            key, k = p.method, 1
            while key in used:
                k += 1
                key = f"{p.method}#{k}"
            used.add(key)
            items.append((key, p))
    out: dict = {}
    prog_error = None
    if program is None:
        try:
            program = program_for(graph)
        except WorkbenchError as e:
            prog_error = str(e)

    def failed(name, e):
        out[name] = Measurement(name, error=f"{type(e).__name__}: {e}")

    def check(name, plan):
        if prog_error is not None:
            out[name] = Measurement(name, error=prog_error)
            return False
        if plan is None or getattr(plan, "placement", None) is None:
            failed(name, PlanError(f"no plan to measure for {name!r}"))
            return False
        return True

    if rounds <= 1:
        for name, plan in items:
            if not check(name, plan):
                continue
            try:
                m = run_plan(plan, steps=steps, warmup=warmup, program=program, **run_kw)
                m.method = name
                out[name] = m
            except WorkbenchError as e:
                failed(name, e)
        return out
    trace = run_kw.pop("trace", False)
    open_: dict = {}
    try:
        for name, plan in items:
            if not check(name, plan):
                continue
            try:
                ps = PlanSession(plan, program=program, **run_kw)
                open_[name] = ps
                ps.warm(min(warmup, 1))
            except WorkbenchError as e:
                failed(name, e)
                if name in open_:
                    open_.pop(name).close()
        # the rest of the warm-up interleaved too: the sessions' steps share the process's
        # heap, which grows until every plan has run among the others (measured: GNMT's HEFT
        # plan took 13,000 page faults a step in its first timed round after warming alone)
        def each_open(run):  # one pass over the open sessions; a failure closes its session
            for name in list(open_):
                try:
                    run(open_[name])
                except WorkbenchError as e:
                    failed(name, e)
                    open_.pop(name).close()

        for _ in range(warmup - 1):
            each_open(lambda ps: ps.warm(1))
        per_round = max(1, math.ceil(steps / rounds))
        for _ in range(rounds):
            each_open(lambda ps: ps.time(per_round))
        for name, ps in open_.items():
            try:
                m = ps.measurement(ps.trace() if trace else None)
                m.method = name
                out[name] = m
            except WorkbenchError as e:
                failed(name, e)
    finally:
        for ps in open_.values():
            ps.close()
    return {name: out[name] for name, _ in items}


def apply_if_faster(current: Plan, candidate: Plan, *, current_measurement: Measurement | None
                    = None, tolerance: float = 0.0, steps: int = 10, warmup: int = 3,
                    **run_kw) -> Decision:
    """FastT's rollback guard: switch to ``candidate`` only if it measures faster.

    The candidate is kept when its mean step time is below ``(1 - tolerance)`` times the
    current plan's; otherwise (also when it fails to run) the current plan stays.

    Raises
    ------
    PlanError, RuntimeBridgeError
        Only when the *current* plan cannot be measured.
    """
    cur = current_measurement
    if cur is None or not cur.ok:
        cur = run_plan(current, steps=steps, warmup=warmup, **run_kw)
    try:
        cand = run_plan(candidate, steps=steps, warmup=warmup, **run_kw)
    except WorkbenchError as e:
        cand = Measurement(candidate.method, error=f"{type(e).__name__}: {e}")
    better = cand.ok and cand.mean_ms < (1.0 - tolerance) * cur.mean_ms
    return Decision(candidate if better else current, better, cur, cand)
