"""Link calibration: time tensor transfers between device pairs and fit the linear model.

For every ordered pair ``(a, b)`` of devices and every size ``s``, float32 variables of ``s``
bytes live on ``a`` and ``Identity`` ops on ``b`` read them, which makes TensorFlow send the
tensors from ``a`` to ``b``. A step that moves ``k`` tensors and one that moves a single tensor
are timed (median ``Session.run`` time); their difference divided by ``k - 1`` is the cost of
one more transfer, free of the fixed cost of running a step on two devices. A least-squares line ``latency + bytes / bandwidth`` is fitted per pair (FastT and
Pesto do the same from their traces), with its coefficient of determination stored in
``Link.r2``; a non-positive slope gives an infinite bandwidth and the mean as latency.

A tensor that crosses devices also costs the *receiving* device time (TensorFlow's ``_Recv``
completion and hand-off to the waiting op: LogP's overhead *o*), which the marginal-transfer
step above does not see because the receiver is idle there. With ``recv_overhead=True`` each
pair of devices also runs a ping-pong chain of elementwise ops (every op reads its input and
writes its output) alternating between the two devices and the same chain on one device;
per size, the extra time per hop minus the fitted link time is the receive overhead, and the
median over sizes becomes ``Device.recv_overhead`` (averaged over the pairs a device is in).

Logical CPU devices of one process pass tensors by reference, so their fitted bandwidth is
(nearly) infinite and only the per-transfer latency of the rendezvous is real; devices of
different ``tf.distribute.Server`` processes move the bytes over gRPC (see ``docs/runtime.md``).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..cluster import Cluster, Device, Link
from ..errors import ClusterError, RuntimeBridgeError
from ._tf import closing_reported, new_session, tf, tf_device, timed_runs
from .contention import reference_plan
from .gpu import is_gpu_device, sync_op
from .realtime import realtime as realtime_scheduling

__all__ = [
    "DEFAULT_SIZES",
    "MODEL_CHANGES",
    "OPTIONAL_CHANGES",
    "PROBES",
    "REFERENCES",
    "SPLIT_PROBES",
    "STEP_PROBES",
    "JudgeModel",
    "calibrate_links",
    "calibrate_model",
    "contention_factor",
    "fit_link",
    "fit_recv_overhead",
    "fit_wakeup",
    "idle_probe_plan",
    "last_level_cache_bytes",
    "local_cluster",
    "one_op_probe",
    "one_op_probes",
    "order_probe",
    "probe_plan",
    "reference_live_bytes",
    "reference_plan",
    "split_order_probes",
]

DEFAULT_SIZES = (1 << 10, 1 << 14, 1 << 17, 1 << 19, 1 << 21, 1 << 22)
"""Transfer sizes in bytes (1 KiB to 4 MiB)."""


def fit_link(nbytes: Sequence[float], ms: Sequence[float]) -> Link:
    """Least-squares fit of ``ms = latency + nbytes / bandwidth`` with its R^2.

    >>> lk = fit_link([0, 1e6, 2e6, 3e6], [0.1, 1.1, 2.1, 3.1])
    >>> round(lk.latency, 3), round(lk.bandwidth), round(lk.r2, 3)
    (0.1, 1000000, 1.0)
    >>> fit_link([1e3, 1e6], [0.2, 0.1]).bandwidth
    inf
    """
    x = np.asarray(nbytes, dtype=float)
    y = np.asarray(ms, dtype=float)
    if len(x) < 2 or len(x) != len(y):
        raise RuntimeBridgeError("fit_link needs at least two (bytes, ms) samples of equal length")
    A = np.vstack([np.ones_like(x), x]).T
    (a, b), *_ = np.linalg.lstsq(A, y, rcond=None)
    if b <= 0:
        lat = max(0.0, float(y.mean()))
        pred = np.full_like(y, lat)
        bw = math.inf
    else:
        lat = max(0.0, float(a))
        pred = lat + b * x
        bw = 1.0 / float(b)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    ss_res = float(((y - pred) ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)
    return Link(latency=lat, bandwidth=bw, r2=float(r2))


def _host_of(name: str) -> str:
    return name.split("/", 1)[0] if "/" in name else "host0"


def _done(t, ys: list, tfd: dict, pair: tuple):
    """The op whose completion means the tensors ``ys`` have arrived: a group of them, then a
    SyncDevice on each GPU end of ``pair`` (GPU copies and kernels run asynchronously)."""
    grp = t.group(*ys)
    gpus = sorted({tfd[d] for d in pair if is_gpu_device(tfd[d])})
    return t.group(*[sync_op(g, after=[grp]) for g in gpus]) if gpus else grp


def local_cluster(n: int = 2, *, kind: str = "cpu", memory: float = math.inf,
                  links: dict | None = None, name: str | None = None) -> Cluster:
    """A cluster of ``n`` local devices ``cpu0..`` (or ``gpu0..`` with ``kind='gpu'``) whose
    names the runner maps to TensorFlow devices; default links unless ``links`` are given.

    >>> local_cluster(3).names
    ['cpu0', 'cpu1', 'cpu2']
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ClusterError(f"a local cluster needs a whole number of devices >= 1, got {n!r}")
    devices = [Device(f"{kind}{i}", kind, memory) for i in range(int(n))]
    return Cluster(devices, links=links, name=name or f"local-{n}x{kind}",
                   intra_host=Link(0.02, math.inf))


def calibrate_links(devices: int | Iterable[str] | Cluster = 2, *,
                    sizes: Sequence[int] = DEFAULT_SIZES, repeats: int = 7, transfers: int = 8,
                    target: str = "", recv_overhead: bool = True, hops: int = 16,
                    kind: str | None = None, memory: float = math.inf,
                    return_samples: bool = False, realtime: bool = False):
    """Measure transfers between every ordered device pair and return the fitted Cluster.

    Parameters
    ----------
    devices : int, list of names, or Cluster
        ``n`` local devices ``cpu0..cpu{n-1}``, device names (``cpuN``, ``wT/cpuN``, ...), or a
        cluster whose devices are kept (its links are replaced by the fitted ones).
    sizes : sequence of int
        Transfer sizes in bytes.
    repeats : int
        Runs per (pair, size); the median is used.
    transfers : int
        Tensors moved by the many-transfer step (at least 2).
    target : str
        Session target for devices of a ``tf.distribute.Server`` cluster.
    recv_overhead : bool
        Also measure each device's receive overhead with ping-pong chains of ``hops`` hops
        (see the module docstring); otherwise devices keep their ``recv_overhead``.
    kind, memory : device kind and memory of devices created from names (default kind: from
        the name, ``gpuN`` -> ``"gpu"``, else ``"cpu"``; so ``["cpu0", "gpu0", "gpu1"]``
        calibrates GPU<->host and GPU<->GPU links in one go). Transfers into a GPU end with a
        ``SyncDevice`` on it, so their times include the copy, not only its launch.
    return_samples : bool
        Also return the raw samples as a list of dicts (src, dst, bytes, ms).
    realtime : bool
        Time the transfers and ping-pong chains with every thread under ``SCHED_FIFO``
        (:mod:`workbench.runtime.realtime`; refused: a warning and normal priority).

    Returns
    -------
    Cluster, or (Cluster, list) with ``return_samples``.
        ``links`` has one fitted :class:`~workbench.cluster.Link` per ordered pair (with
        ``r2``); the intra-/inter-host defaults are the means of the fitted links; devices
        carry the measured ``recv_overhead``. Samples of the ping-pong chains have
        ``"kind": "pingpong"`` and ``ms`` per hop.
    """
    if isinstance(devices, Cluster):
        devs = list(devices.devices)
    elif isinstance(devices, int):
        devs = list(local_cluster(devices, kind=kind or "cpu", memory=memory).devices)
    else:
        devs = [Device(d, kind or ("gpu" if is_gpu_device(d) else "cpu"), memory,
                       host=_host_of(d)) for d in devices]
    if len(devs) < 2:
        raise ClusterError("link calibration needs at least two devices")
    twice = sorted({d.name for d in devs if [e.name for e in devs].count(d.name) > 1})
    if twice:  # issue 41: TensorFlow's variable scope refused them with a traceback
        raise ClusterError(f"link calibration: device name(s) {', '.join(twice)} given twice")
    if repeats < 1 or len(sizes) < 2:
        raise RuntimeBridgeError("calibration needs repeats >= 1 and at least two sizes")
    t = tf()
    tf1 = t.compat.v1
    names = [d.name for d in devs]
    tfd = {d: tf_device(d) for d in names}
    graph = t.Graph()
    targets: dict = {}
    k = max(2, int(transfers))
    with graph.as_default():
        reads: dict = {}
        for a in names:
            for s in sizes:
                for i in range(k):
                    with t.device(tfd[a]):
                        v = tf1.get_variable(f"x_{len(reads)}", shape=[max(1, int(s) // 4)],
                                             initializer=tf1.zeros_initializer(),
                                             use_resource=True)
                        reads[(a, s, i)] = v.read_value()
        for a in names:
            for b in names:
                if a == b:
                    continue
                for s in sizes:
                    with t.device(tfd[b]):
                        ys = [t.identity(reads[(a, s, i)]) for i in range(k)]
                    targets[(a, b, s, 1)] = _done(t, [ys[0]], tfd, (a, b))
                    targets[(a, b, s, k)] = _done(t, ys, tfd, (a, b))
        init = tf1.global_variables_initializer()
    cpus = 1 + max((int(tfd[d].rsplit(":", 1)[1]) for d in names if "localhost" in tfd[d]
                    and "CPU" in tfd[d]), default=0)
    sess = new_session(graph, target=target, what="calibration session", cpus=cpus, inter_op=1,
                       spinning=not realtime)

    def timed(op) -> float:
        sess.run(op)
        return statistics.median(timed_runs(sess, op, repeats))

    samples = []
    links = {}
    with closing_reported(sess, "calibration"), realtime_scheduling(realtime):
        sess.run(init)
        for a in names:
            for b in names:
                if a == b:
                    continue
                xs, ys = [], []
                for s in sizes:
                    one = timed(targets[(a, b, s, 1)])
                    ms = max(0.0, (timed(targets[(a, b, s, k)]) - one) / (k - 1))
                    xs.append(float(s))
                    ys.append(ms)
                    samples.append({"src": a, "dst": b, "bytes": float(s), "ms": ms})
                links[(a, b)] = fit_link(xs, ys)

    if recv_overhead:
        with realtime_scheduling(realtime):
            over = _receive_overheads(devs, tfd, links, sizes, repeats=repeats, hops=hops,
                                      target=target, cpus=cpus, samples=samples,
                                      spinning=not realtime)
        devs = [replace(d, recv_overhead=over[d.name]) for d in devs]

    def mean_link(pairs) -> Link | None:
        ls = [links[p] for p in pairs]
        if not ls:
            return None
        inv = statistics.fmean(0.0 if math.isinf(lk.bandwidth) else 1.0 / lk.bandwidth
                               for lk in ls)
        return Link(statistics.fmean(lk.latency for lk in ls), math.inf if inv <= 0 else 1 / inv)

    host = {d.name: d.host for d in devs}
    intra = mean_link([p for p in links if host[p[0]] == host[p[1]]])
    inter = mean_link([p for p in links if host[p[0]] != host[p[1]]])
    cluster = Cluster(devs, intra_host=intra, inter_host=inter, links=links,
                      name=f"calibrated-{len(devs)}x{devs[0].kind}")
    return (cluster, samples) if return_samples else cluster


def _receive_overheads(devs, tfd: dict, links: dict, sizes, *, repeats: int, hops: int,
                       target: str, cpus: int, samples: list, spinning: bool = True) -> dict:
    """Device name -> receive overhead (ms) from ping-pong chains (see the module docstring)."""
    t = tf()
    tf1 = t.compat.v1
    names = [d.name for d in devs]
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    hops = max(2, int(hops))
    graph = t.Graph()
    chains: dict = {}
    with graph.as_default():
        for a, b in pairs:
            for s in sizes:
                with t.device(tfd[a]):
                    x = tf1.get_variable(f"p_{len(chains)}", shape=[max(1, int(s) // 4)],
                                         initializer=tf1.ones_initializer(), use_resource=True)
                    x0 = x.read_value()
                for key, seq in (("same", (a,)), ("alt", (b, a))):
                    y = x0
                    for i in range(hops):
                        with t.device(tfd[seq[i % len(seq)]]):
                            y = y * 1.0001  # reads and writes every byte
                    chains[(a, b, s, key)] = _done(t, [y], tfd, (a, b))
        init = tf1.global_variables_initializer()
    sess = new_session(graph, target=target, what="calibration session", cpus=cpus, inter_op=2,
                       spinning=spinning)

    def timed(op, runs: int) -> float:
        return statistics.median(timed_runs(sess, op, runs))

    per_pair: dict = {}
    with closing_reported(sess, "calibration"):
        sess.run(init)
        for a, b in pairs:
            extra = []
            for s in sizes:
                same, alt = chains[(a, b, s, "same")], chains[(a, b, s, "alt")]
                sess.run(same)
                sess.run(alt)
                # interleaved rounds: a drifting machine slows both chains alike
                diffs = [(timed(alt, 3) - timed(same, 3)) / hops for _ in range(repeats)]
                hop = statistics.median(diffs)
                link = 0.5 * (links[(a, b)].time(s) + links[(b, a)].time(s))
                extra.append(hop - link)
                samples.append({"src": a, "dst": b, "bytes": float(s), "ms": hop,
                                "kind": "pingpong"})
            per_pair[(a, b)] = max(0.0, statistics.median(extra))
    return {d: statistics.fmean(v for p, v in per_pair.items() if d in p) for d in names}


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


def fit_recv_overhead(graph, cluster: Cluster, *, probe=None, steps: int = 20, warmup: int = 5,
                      seed: int = 0, program=None, max_ms: float = 1.0, return_details: bool = False,
                      **run_kw):
    """Fit the devices' receive overhead to a measured run of the real program (FastT-style:
    communication costs from profiling the program itself).

    A probe plan (default :func:`probe_plan`, a random placement with many cross-device
    tensors; keep it out of the plans you evaluate) is measured with the runner, and one
    ``recv_overhead`` for every device is found by bisection such that simulating the probe
    on the cluster gives the measured step time. The micro-benchmark of
    :func:`calibrate_links` measures the hand-off on an otherwise idle pair of devices; in a
    real step the receiving thread is more often asleep or queued behind other work, which
    this fit includes.

    Returns
    -------
    Cluster, or (Cluster, dict) with ``return_details``: ``overhead_ms``, ``probe_measured_ms``,
    ``probe_simulated_ms`` (with the fitted overhead) and ``probe_transfers``.

    Raises
    ------
    RuntimeBridgeError
        The probe cannot be measured, or moves no tensor between devices.
    """
    from ..simulate import simulate
    from .runner import run_plan

    probe = probe or probe_plan(graph, cluster, seed=seed)
    if simulate(probe, cluster).n_transfers == 0:
        raise RuntimeBridgeError(f"the probe plan {probe.method!r} moves no tensor between "
                                 f"devices, so it says nothing about the receive overhead; use "
                                 f"a cluster of two or more devices and a plan that splits the "
                                 f"graph")
    meas = run_plan(probe, steps=steps, warmup=warmup, program=program, cluster=cluster,
                    **run_kw).median_ms

    def with_overhead(o: float) -> Cluster:
        return cluster.with_devices([replace(d, recv_overhead=o) for d in cluster.devices])

    def sim(o: float) -> float:
        return simulate(probe, with_overhead(o)).makespan

    hi = _fit_overhead(sim, meas, max_ms)
    out = with_overhead(hi)
    if not return_details:
        return out
    s = simulate(probe, out)
    return out, {"overhead_ms": hi, "probe_measured_ms": meas, "probe_simulated_ms": s.makespan,
                 "probe_transfers": s.n_transfers}


# ---------------------------------------------------------------------- the calibrated model
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

MODEL_CHANGES = ("contention_bench", "handoff", "rescale", "live_memory", "step_cost")
"""The model changes :func:`calibrate_model` makes by default, applied in this order, each
switchable (see ``docs/runtime.md``). ``rescale``, ``live_memory`` and ``step_cost`` are fitted
to probe runs that :meth:`JudgeModel.reanchor` refits to the same probes timed in the plans'
interleaved rounds (:meth:`JudgeModel.probe_plans`):

``contention_bench``
    Two logical devices on a shared machine do not run ops at single-device speed (cores, memory
    bandwidth and caches are shared): an op is slowed by the time another device computes
    while it runs, ``t * (1 + s * x)``, ``x`` its overlap fraction in the simulated schedule
    (fixed point, :func:`~workbench.runtime.judging.simulate_overlap`), ``s`` measured untraced
    by :func:`~workbench.runtime.contention.measure_contention`: the single-device reference step
    timed alone and while every other device runs it too, ``s`` = their ratio - 1. A plan whose
    devices seldom compute at once is barely slowed. Default since round six
    (``docs/runtime.md``): with the slope fitted from traced op times (``overlap``) GNMT's HEFT
    plan was predicted 6-19 % fast in every paper-sized run of rounds four and five but one
    (5.8 %; traced slope 0-0.15, untraced 0.03-0.29). On a cluster that is not local logical
    CPU devices (a GPU cluster's first device is the host, which cannot run every op) the traced
    ``overlap`` slope is fitted instead, and ``changes`` names ``overlap``.
``handoff``
    Logical devices of one process (local CPU devices) pass a tensor as a pointer: no copy of
    its bytes and no FIFO link on which transfers queue (links of infinite bandwidth, no link
    congestion). What a cross-device tensor costs is measured by micro-benchmarks of the
    runner's execution regime (:func:`~workbench.runtime.handoff.measure_handoff`, about
    30 s): ``send_ms`` on the sender per tensor it sends, ``recv_ms`` on the receiver per
    tensor, and a hand-off latency that grows with the time the receiving device idled
    (``latency_ms + slope * idle``, idle capped at 1 ms, its points the median of three passes;
    :func:`~workbench.runtime.judging.handoff_idle`, fixed point). Nothing is fitted to a probe.
    Default since round seven (``docs/runtime.md``), in place of ``shared_memory`` and
    ``recv_fit``: the random probe those fit the receive overhead to runs in two states on
    lstm_seq2seq (7.6-7.8 ms, or 11.6-12.1 ms for a whole run), and from the slow state the
    fitted overhead put its two-device plans 48-63 % too slow; with the measured costs the
    worst plan of three runs was 15.6-17.2 %. On a cluster that is not local logical CPU
    devices (the micro-benchmarks run between two of them) ``shared_memory`` and ``recv_fit``
    are made instead, and ``changes`` names them.
``rescale``
    Every device's speed scaled so that a single-device run (:func:`reference_plan`) is
    predicted at its measured step (:meth:`JudgeModel.rescale`): the profile's costs follow the
    machine's speed at the time of measuring, not of profiling (measured: the single-device
    plan 5-29 % away from its own profile within one run). Local logical CPU devices only,
    like ``step_cost`` (elsewhere the first device need not run every op).
``live_memory``
    An op's cost depends on the order the ops run in, through the memory live when it starts: ``t *
    (1 + m * (live - live_ref) / 1 MB)``, ``live`` the bytes of tensors produced and not yet
    consumed (:func:`~workbench.runtime.judging.live_bytes`, all devices: logical devices share the
    memory) and ``live_ref`` the same op's in :func:`reference_plan` (whose costs the profile and
    ``rescale`` anchor; fixed point over the simulated schedule). ``m`` is fitted to
    :func:`order_probe`, the reference's placement in list-scheduling (upward rank) order, against
    the reference timed in the same rounds (:meth:`JudgeModel.fit_live_memory`), whichever way
    the probe's order moves the live memory. Measured: resnet_small's single-device step in HEFT's
    global order ran 15.2-16.4 ms against 13.9-14.4 ms in the reference's order, its backward
    convolutions 15-17 % slower each, with 17.6 MB live at the peak against 10.7 MB. Both live
    figures are capped at the last-level cache (:attr:`JudgeModel.live_cap`: 32 MiB on the VM
    of rounds five and six, 260 MiB on round seven's): ResNet-50 and GNMT keep hundreds of MB
    live in any order, and their slopes fit 0. Tried uncapped in round seven (the bench's
    ``uncapped`` rung): GNMT's order probe (230 MB less live on time average) ran 8-10 ms
    faster than its reference in runs of its own, but in three bench runs its FIFO order (120
    MB more live) ran 1-8 % faster than the reference too, and the uncapped fit put that plan
    8.9 and 13.9 % off against 4.5 and 8.1 % capped. Since round eight plans on several
    devices have a slope of their own (``JudgeModel.memory_slope_multi``), fitted the same way
    to :func:`split_order_probes` (on one VM resnet_small's list-scheduled two-device plans
    did not slow with their order as its single-device step did). Local logical CPU devices
    only. Default since round five (``docs/runtime.md``).
``step_cost``
    A step on two or more devices costs a constant more than its ops and transfers
    (:meth:`JudgeModel.fit_step_cost`): TensorFlow runs a single-device step synchronously in
    the caller's thread and a multi-device one as executors on the thread pool. Fitted from
    :func:`reference_plan` (three sessions, their median) and :func:`one_op_probes` (three
    probes, each one op moved to a second device: the median of their differences).
"""

OPTIONAL_CHANGES = ("shared_memory", "recv_fit", "overlap", "contention", "wakeup")
"""Model changes that are off unless named (other models of the same effect, and extensions
under evaluation, ``docs/runtime.md``):

``shared_memory``
    Logical devices of one process (local CPU devices) pass a tensor as a pointer: no copy of
    its bytes and no FIFO link on which transfers queue. Their links become a per-tensor
    latency (bandwidth infinite), fitted as the median measured delay of the probe's binding
    cross-device tensors, and the simulation runs without link congestion. With ``recv_fit``
    the default of rounds one to six; the default still where ``handoff`` cannot be measured.
``recv_fit``
    The devices' receive overhead fitted by bisection so that the model predicts the probe's
    measured step (as :func:`fit_recv_overhead`, but on the model with the other changes);
    refitted by :meth:`JudgeModel.reanchor` to the probe timed in the plans' rounds.
``overlap``
    Two logical devices on a shared machine do not run ops at single-device speed (cores, memory
    bandwidth and caches are shared): an op is slowed by the time another device computes
    while it runs, ``t * (1 + s * x)``, ``x`` its overlap fraction in the simulated schedule
    (fixed point, :func:`~workbench.runtime.judging.simulate_overlap`), ``s`` fitted from the
    probe's and a single-device run's traced op times
    (:func:`~workbench.runtime.judging.overlap_slope`). A plan whose devices seldom compute at
    once is barely slowed (measured: GNMT with one op moved to a second device ran 195.9 and
    199.0 ms against 195.5 and 198.0 ms on one device; ``contention``'s one factor predicted
    it 9-17 % slower).
    The default of rounds four and five, in place of ``contention_bench`` (excludes it and
    ``contention``).
``contention``
    The default before round four (``docs/runtime.md``), in place of ``overlap``: every op of a
    plan on as many devices as the probe runs slower by one factor. The slowdown is the ratio
    of the probe's op times (median timeline, traced) to the same ops' times in a traced
    single-device run (median over ops, :func:`contention_factor`); plans on as many devices
    as the probe uses run at ``1 / factor`` speed. Excludes ``overlap``.
``wakeup``
    A tensor that reaches a device whose thread has idled at least
    :data:`~workbench.runtime.judging.WAKEUP_IDLE_MS` (0.1 ms), and the first op of every
    device but the one that starts the step, cost ``w`` ms more (:func:`~workbench.runtime.
    judging.woken_ops`, fixed point over the simulated schedule). ``w`` is fitted by
    :func:`fit_wakeup` to a second probe, :func:`idle_probe_plan` (the graph in eight contiguous
    chunks of topological order alternating over the devices: few hand-offs, each after a long
    idle period), then the receive overhead is refitted to the random probe.
"""


@dataclass
class JudgeModel:
    """A cluster plus the simulator settings that model a real machine.

    ``congestion``: FIFO links (False under ``shared_memory``); ``contention``: devices used ->
    compute slowdown factor (plans on that many devices run at ``1 / factor`` speed);
    ``changes``: the names of :data:`MODEL_CHANGES` applied; ``details``: the fitted figures;
    ``probe``: the probe plan it was fitted to; ``overlap``: the slope of the ``overlap``
    change, ``wakeup`` the ms of the ``wakeup`` change and ``idle_probe`` the plan it was fitted
    to (0 / None: off, see :data:`OPTIONAL_CHANGES`); ``multi_device_ms`` the ``step_cost``
    change's constant and ``memory_slope`` the ``live_memory`` change's slope (per MB) for plans
    on one device, ``memory_slope_multi`` for plans on several (None: ``memory_slope``; fitted
    to :func:`split_order_probes` where ``live_split``, else ``memory_slope`` serves all: round
    seven);
    ``anchor_sessions`` (1-3) how many sessions time the single-device reference
    (:data:`REFERENCES`) and how many one-op probes (:data:`STEP_PROBES`) the anchoring
    changes are fitted to (medians: one session in a slow state no longer sets the speed or
    the step cost of every plan; 1: round seven's fits).

    >>> from workbench import samples, Plan
    >>> m = JudgeModel(local_cluster(2), congestion=False, contention={2: 2.0})
    >>> g = samples.diamond()
    >>> one = Plan(g, {v: "cpu0" for v in g.ops}); two = Plan(g, {"a": "cpu0", "b": "cpu0",
    ...     "c": "cpu1", "d": "cpu0"})
    >>> m.makespan(one) == JudgeModel(local_cluster(2)).makespan(one)
    True
    >>> m.cluster_for(two).devices[0].speed
    0.5
    """

    cluster: Cluster
    congestion: bool = True
    contention: dict = field(default_factory=dict)
    changes: tuple = ()
    details: dict = field(default_factory=dict)
    probe: object = None
    overlap: float = 0.0
    wakeup: float = 0.0
    idle_probe: object = None
    send_overhead: float = 0.0
    handoff_slope: float = 0.0
    multi_device_ms: float = 0.0
    anchor_sessions: int = 3
    memory_slope: float = 0.0
    memory_cap: float | None = None
    memory_slope_multi: float | None = None
    live_split: bool = True

    @property
    def live_cap(self) -> float:
        """The bytes at which the ``live_memory`` change caps live memory: ``memory_cap``, or
        where it is None (the default) the last-level cache (:func:`last_level_cache_bytes`);
        ``math.inf`` for none (the bench's ``uncapped`` rung).

        >>> JudgeModel(local_cluster(2), memory_cap=math.inf).live_cap
        inf
        >>> JudgeModel(local_cluster(2)).live_cap == last_level_cache_bytes()
        True
        """
        return last_level_cache_bytes() if self.memory_cap is None else float(self.memory_cap)

    def cluster_for(self, plan) -> Cluster:
        """The cluster a plan is simulated on: devices slowed by the contention of its device
        count (unchanged for a count without a factor)."""
        f = self.contention.get(len(plan.devices_used()), 1.0)
        if f == 1.0:
            return self.cluster
        return self.cluster.with_devices([replace(d, speed=d.speed / f)
                                          for d in self.cluster.devices])

    def memory_slope_for(self, plan) -> float:
        """The ``live_memory`` slope (per MB) ``plan`` is simulated with: ``memory_slope`` on one
        device, ``memory_slope_multi`` (where set) on several.

        >>> from workbench import samples, Plan
        >>> g = samples.diamond(); m = JudgeModel(local_cluster(2), memory_slope=0.03)
        >>> two = Plan(g, {"a": "cpu0", "b": "cpu0", "c": "cpu1", "d": "cpu0"})
        >>> m.memory_slope_for(two), replace(m, memory_slope_multi=0.01).memory_slope_for(two)
        (0.03, 0.01)
        """
        if self.memory_slope_multi is not None and len(plan.devices_used()) > 1:
            return float(self.memory_slope_multi)
        return float(self.memory_slope)

    def simulate(self, plan, **kw):
        """:func:`workbench.simulate` of ``plan`` under this model."""
        from ..simulate import simulate
        from .judging import simulate_overlap

        mem = self.memory_slope_for(plan)
        if (self.overlap > 0 or self.wakeup > 0 or self.send_overhead > 0
                or self.handoff_slope > 0 or mem > 0):
            base = reference_live_bytes(plan.graph) if mem > 0 else None
            s = simulate_overlap(plan, self.cluster_for(plan), self.overlap,
                                 wakeup_ms=self.wakeup, send_ms=self.send_overhead,
                                 handoff_slope=self.handoff_slope,
                                 memory_slope=mem, memory_base=base,
                                 memory_cap=self.live_cap,
                                 congestion=self.congestion, **kw)
        else:
            s = simulate(plan, self.cluster_for(plan), congestion=self.congestion, **kw)
        if self.multi_device_ms > 0 and len(plan.devices_used()) > 1:
            c = self.multi_device_ms  # the step_cost change: the whole step starts c later
            s = replace(s, start=s.start + c, end=s.end + c, t_start=s.t_start + c,
                        t_end=s.t_end + c, makespan=s.makespan + c)
        return s

    def with_overlap(self) -> JudgeModel:
        """This model with ``overlap`` in place of ``contention`` or ``contention_bench``, its
        slope read from ``details["overlap_slope"]`` (fitted by :func:`calibrate_model` whenever
        it traces the single-device reference run), so both can be judged on the same
        measurements.

        >>> m = JudgeModel(local_cluster(2), overlap=0.25, details={"overlap_slope": 0.05},
        ...                changes=("shared_memory", "contention_bench", "recv_fit"))
        >>> o = m.with_overlap()
        >>> o.overlap, o.changes
        (0.05, ('shared_memory', 'overlap', 'recv_fit'))
        """
        if "overlap_slope" not in self.details:
            raise RuntimeBridgeError("with_overlap: this model has no fitted overlap slope "
                                     "(calibrate it with 'contention' or 'overlap')")
        slot = ("contention", "overlap", "contention_bench")  # the slowdown keeps its place
        changes = tuple(dict.fromkeys("overlap" if c in slot else c for c in self.changes))
        changes += () if "overlap" in changes else ("overlap",)
        return replace(self, contention={}, overlap=float(self.details["overlap_slope"]),
                       changes=changes)

    def with_contention(self) -> JudgeModel:
        """This model with ``contention`` in place of ``overlap`` (the default before round
        four), its factor read from ``details["contention_factor"]`` (fitted by
        :func:`calibrate_model` from the same traces as the overlap slope).

        >>> from workbench import samples
        >>> g = samples.diamond(); cl = local_cluster(2)
        >>> m = JudgeModel(cl, overlap=0.3, changes=("overlap", "recv_fit"),
        ...                details={"contention_factor": 1.2}, probe=probe_plan(g, cl, seed=1))
        >>> c = m.with_contention()
        >>> c.overlap, c.contention, c.changes
        (0.0, {2: 1.2}, ('recv_fit', 'contention'))
        """
        if "contention_factor" not in self.details or self.probe is None:
            raise RuntimeBridgeError("with_contention: this model has no fitted contention "
                                     "factor (calibrate it with 'overlap' or 'contention')")
        changes = tuple(c for c in self.changes if c not in ("overlap", "contention_bench"))
        k = len(self.probe.devices_used())
        return replace(self, overlap=0.0, contention={k: float(self.details["contention_factor"])},
                       changes=changes + ("contention",))

    def makespan(self, plan) -> float:
        return self.simulate(plan).makespan

    def fit_step_cost(self, reference, reference_ms: float, one_op, one_op_ms,
                      ) -> JudgeModel:
        """This model with the ``step_cost`` change: a step that uses two or more devices costs
        ``c`` more than its ops and transfers, ``c`` = the measured difference between a
        one-op probe (:func:`one_op_probes`: one op moved off the reference's device) and the
        single-device ``reference``, minus the difference this model predicts for them (the
        moved op's transfers). ``one_op`` / ``one_op_ms``: one probe and its measured step, or
        sequences of several; then ``c`` is the median of their differences (one probe session
        in a slow state set GNMT's step cost at 42.7 ms where the other plans' sessions showed
        a few ms). A single-device step runs TensorFlow's synchronous executor in the caller's
        thread; a step on several devices starts one executor per device on the thread pool
        and waits for them (measured: one op moved to a second device adds 0.05 ms to mlp's
        step, 0.15-0.22 ms to lstm_seq2seq's and transformer_small's, and 4 or 16 moved ops
        barely more). Plans on one device are unchanged. ``details``: ``step_cost_ms`` (c),
        ``one_op_probe_measured_ms`` (the probes' median step) and ``step_cost_range_ms``
        (highest minus lowest difference: 0 for one probe).

        >>> from workbench import samples
        >>> g = samples.diamond(); m = JudgeModel(local_cluster(2))
        >>> ref, one = reference_plan(g, m.cluster), one_op_probe(g, m.cluster)
        >>> f = m.fit_step_cost(ref, 10.0, one, 10.5 + m.makespan(one) - m.makespan(ref))
        >>> round(f.multi_device_ms, 6), f.makespan(ref) == m.makespan(ref)
        (0.5, True)
        >>> round(f.makespan(one) - m.makespan(one), 6)
        0.5
        >>> ps = one_op_probes(g, m.cluster)   # one slow session of three: the median holds
        >>> ms = [10 + extra + m.makespan(p) - m.makespan(ref) for p, extra in zip(ps, (.5, 9, .4))]
        >>> f = m.fit_step_cost(ref, 10.0, ps, ms)
        >>> round(f.multi_device_ms, 6), round(f.details["step_cost_range_ms"], 6)
        (0.5, 8.6)
        """
        if isinstance(one_op_ms, (int, float, np.floating)) or hasattr(one_op_ms, "median_ms"):
            one_op, one_op_ms = [one_op], [one_op_ms]
        if len(one_op) != len(one_op_ms) or not len(one_op):
            raise RuntimeBridgeError(f"fit_step_cost: {len(one_op)} probes and "
                                     f"{len(one_op_ms)} measurements; give one of each")
        base = replace(self, multi_device_ms=0.0)
        ref_ms = base.makespan(reference)
        cs = [(float(ms) - reference_ms) - (base.makespan(p) - ref_ms)
              for p, ms in zip(one_op, one_op_ms)]
        cs = [c for c in cs if np.isfinite(c)]
        c = max(0.0, float(np.median(cs))) if cs else 0.0
        changes = self.changes + (() if "step_cost" in self.changes else ("step_cost",))
        return replace(self, multi_device_ms=c, changes=changes,
                       details={**self.details, "step_cost_ms": c,
                                "one_op_probe_measured_ms": float(np.median(one_op_ms)),
                                "step_cost_range_ms": float(max(cs) - min(cs)) if cs else 0.0})

    def fit_live_memory(self, reference, reference_ms: float, probe, probe_ms: float,
                        *, min_gap_ms: float = 0.0, max_slope: float = 0.2,
                        multi: bool = False) -> JudgeModel:
        """This model with the ``live_memory`` change: the slope ``m`` (fractional slowdown of
        an op per MB more live memory than in ``reference``'s order) for which the model
        predicts the measured difference between :func:`order_probe` (``probe``: the
        reference's placement in another order) and the ``reference`` (bisection, at least 0,
        at most ``max_slope``: 20 % per MB; fitted 4-10 % on the convolutional samples): a
        probe that keeps more memory live than the reference must be measured slower, one that
        keeps less faster, or it is no signal (``m`` = 0). Live bytes are capped at
        :attr:`live_cap` (the last-level cache unless ``memory_cap`` says otherwise). A gap
        of at most ``min_gap_ms`` (e.g. the two runs' spreads) is no signal: ``m`` = 0 (on
        lstm_seq2seq a gap within the spread fitted 100 % per MB), and so is a gap no slope
        reproduces within ``max(min_gap_ms, 5 %)`` (where some ops hold more memory live than
        in the reference and others less) or only ``max_slope`` comes near. The reference's own
        prediction is unchanged (its ops have the reference's live memory). ``multi``: fit
        ``memory_slope_multi`` instead, the slope of plans on several devices, to the pair of
        :func:`split_order_probes` (``reference``: the split in topological order, whose
        prediction moves with the slope too, ``probe``: in list-scheduling order).

        >>> from workbench import samples
        >>> g = samples.load_sample("resnet_small"); m = JudgeModel(local_cluster(2))
        >>> ref, probe = reference_plan(g, m.cluster), order_probe(g, m.cluster)
        >>> abs(m.makespan(probe) - m.makespan(ref)) < 1e-9      # the same ops, unfitted
        True
        >>> gap = replace(m, memory_slope=0.05).makespan(probe) - m.makespan(ref)
        >>> f = m.fit_live_memory(ref, 10.0, probe, 10.0 + gap)
        >>> round(f.memory_slope, 6), f.makespan(ref) == m.makespan(ref), f.changes
        (0.05, True, ('live_memory',))
        >>> m.fit_live_memory(ref, 10.0, probe, 10.0 + gap, min_gap_ms=gap).memory_slope
        0.0
        >>> m.fit_live_memory(ref, 10.0, probe, 10.0 + gap, max_slope=0.05).memory_slope
        0.0
        >>> m.fit_live_memory(ref, 10.0, probe, 10.0 - gap).memory_slope   # faster: other way
        0.0
        """
        cap = self.live_cap
        field = "memory_slope_multi" if multi else "memory_slope"
        base = replace(self, memory_cap=cap, **{field: 0.0})
        ref0 = None if multi else base.makespan(reference)   # the split's moves with the slope

        def delta(x: float) -> float:
            mm = replace(base, **{field: x})
            return mm.makespan(probe) - (mm.makespan(reference) if multi else ref0)

        target = probe_ms - reference_ms
        # the probe's order keeps more memory live than the reference's (the slope slows it) or
        # less (the slope speeds it up: GNMT's order probe, 230 MB less live on time average,
        # ran 8-10 ms faster than its reference in three runs of its own); no signal where it
        # keeps as much, where the measured gap goes the other way (the same probe ran 8 ms
        # slower in a bench run), or where it is within the runs' spread. The way is read at a
        # slope small enough for every op to stay linear (0.01 % per MB: no op's extra time
        # near its floor of -1/2 for under 5 GB less live); at the bound hundreds of MB more
        # live on some ops outweigh less on the others (GNMT's order probe, 8 ms slower, then
        # fitted 2 % per MB, and its plans predicted 2.7x their step)
        # the gap beyond the one predicted without the slope (none for the single-device pair,
        # whose ops are the same; the split pair's orders differ in parallelism too)
        d0 = delta(0.0)
        excess = target - d0 if multi else target
        way = delta(min(1e-4, max_slope)) - d0
        sign = float(np.sign(way))
        signal = abs(way) > 1e-12 and abs(excess) > min_gap_ms and np.sign(excess) == sign
        x = (_fit_overhead(lambda y: sign * delta(y), sign * target, max_slope)
             if signal and np.isfinite(target) else 0.0)
        # no fit where no slope reproduces the gap: where some ops hold more memory live than
        # in the reference and others less, the gap need not grow with the slope (GNMT: 44 ms
        # measured, 1.3 ms predicted at the slope bisection found, its plans then predicted 3x)
        if x > 0 and abs(delta(x) - target) > max(min_gap_ms, 0.05 * abs(excess)):
            x = 0.0
        # nor where only the bound comes near it: the probe is slower for another reason, and
        # the bound's slope extrapolates (ResNet-50 once fitted 20 % per MB to its order probe,
        # 4.8 % slower than its reference, and its two-device plans were predicted 8-17 % slow)
        if x >= max_slope:
            x = 0.0
        changes = self.changes + (() if "live_memory" in self.changes else ("live_memory",))
        details = {**self.details, "memory_cap_mb": cap / 1e6}
        if multi:
            details.update(memory_slope_multi_per_mb=x, split_order_probe_measured_ms=probe_ms)
        else:
            details.update(memory_slope_per_mb=x, order_probe_measured_ms=probe_ms)
        return replace(self, memory_cap=cap, changes=changes, details=details, **{field: x})

    def with_overlap_slope(self, slope: float) -> JudgeModel:
        """This model with the ``overlap`` slowdown at ``slope`` in place of ``contention`` (the
        ``contention_bench`` change: the slope measured untraced by
        :func:`~workbench.runtime.contention.measure_contention` instead of fitted from traced
        op times).

        >>> m = JudgeModel(local_cluster(2), contention={2: 1.3}, changes=("contention",))
        >>> o = m.with_overlap_slope(0.2)
        >>> o.contention, o.overlap, o.changes
        ({}, 0.2, ('contention_bench',))
        >>> JudgeModel(local_cluster(2), changes=("shared_memory", "overlap", "recv_fit")
        ...            ).with_overlap_slope(0.1).changes
        ('shared_memory', 'contention_bench', 'recv_fit')
        """
        slot = ("contention", "overlap", "contention_bench")  # the slowdown keeps its place
        changes = tuple(dict.fromkeys("contention_bench" if c in slot else c
                                      for c in self.changes))
        changes += () if "contention_bench" in changes else ("contention_bench",)
        return replace(self, contention={}, overlap=float(slope), changes=changes,
                       details={**self.details, "contention_bench_slope": float(slope)})

    def rescale(self, reference, measured_ms: float) -> JudgeModel:
        """This model with every device's speed scaled so that it predicts ``measured_ms`` for
        the single-device ``reference`` plan (:func:`reference_plan`) -- the ``rescale``
        change: the profile's op costs are measured seconds to minutes before the plans, and a
        shared machine's speed drifts by 10-30 % on that scale, so a single-device run timed in
        the *same interleaved rounds* as the plans re-anchors them. A single-device plan has no
        transfer, so its makespan is inversely proportional to the speed and one division
        fits it. Scales compose (``details["rescale"]``).

        >>> from workbench import samples
        >>> g = samples.diamond(); m = JudgeModel(local_cluster(2))
        >>> ref = reference_plan(g, m.cluster)
        >>> r = m.rescale(ref, 2 * m.makespan(ref))
        >>> round(r.makespan(ref) / m.makespan(ref), 6), r.details["rescale"], r.changes
        (2.0, 2.0, ('rescale',))
        """
        pred = self.makespan(reference)
        if not (pred > 0 and measured_ms > 0 and math.isfinite(measured_ms)):
            return self
        f = measured_ms / pred
        cl = self.cluster.with_devices([replace(d, speed=d.speed / f)
                                        for d in self.cluster.devices])
        changes = self.changes + (() if "rescale" in self.changes else ("rescale",))
        return replace(self, cluster=cl, changes=changes,
                       details={**self.details, "rescale": self.details.get("rescale", 1.0) * f,
                                "reference_measured_ms": measured_ms})

    def with_handoff(self, costs) -> JudgeModel:
        """This model with the ``handoff`` change: the per-tensor costs of
        :class:`~workbench.runtime.handoff.HandoffCosts` (measured by micro-benchmarks, not
        fitted to probes) in place of ``shared_memory``'s latency and ``recv_fit``'s overhead:
        links of ``costs.latency_ms`` (infinite bandwidth, no congestion), ``recv_ms`` per
        received tensor, ``send_ms`` per sent tensor, and ``slope * idle`` more per hand-off
        to a device idle for ``idle`` ms. Contention and the other fitted figures are kept.

        >>> from workbench.runtime.handoff import HandoffCosts
        >>> m = JudgeModel(local_cluster(2)).with_handoff(HandoffCosts(0.001, 0.002, 0.003, 0.04))
        >>> m.cluster.devices[0].recv_overhead, m.send_overhead, m.handoff_slope, m.changes
        (0.002, 0.001, 0.04, ('handoff',))
        """
        devs = [replace(d, recv_overhead=costs.recv_ms) for d in self.cluster.devices]
        cl = _pointer_cluster(devs, costs.latency_ms, self.cluster.name)
        kept = set(self.changes) - {"shared_memory", "recv_fit"} | {"handoff"}
        changes = tuple(c for c in MODEL_CHANGES + OPTIONAL_CHANGES if c in kept)
        return replace(self, cluster=cl, congestion=False, send_overhead=costs.send_ms,
                       handoff_slope=costs.slope, changes=changes,
                       details={**{k: v for k, v in self.details.items()
                                   if k not in ("tensor_latency_ms", "recv_overhead_ms")},
                                **costs.to_dict()})

    def refit_recv(self, probe, measured_ms: float, *, max_ms: float = 1.0,
                   latency: bool = True) -> JudgeModel:
        """This model with the receive overhead refitted so that it predicts ``measured_ms``
        for ``probe`` (``recv_fit``); e.g. the probe timed in the same interleaved rounds as
        the evaluated plans, so that the machine's drift does not enter the fit.

        ``latency``: where the model has ``shared_memory`` and even no receive overhead
        predicts the probe too slow, the links' per-tensor latency is lowered instead
        (bisection, down to 0; ``details["tensor_latency_fitted_ms"]``). That latency is the
        median delay of the probe's binding tensors in a *traced* run, which tracing lengthens
        (measured: the overhead fit hit 0 in 11 of 36 model runs). Every refit starts from the
        traced latency (``details["tensor_latency_ms"]``).

        >>> from workbench import Plan, samples
        >>> g = samples.diamond(); cl = local_cluster(2)
        >>> probe = Plan(g, {"a": "cpu0", "b": "cpu1", "c": "cpu0", "d": "cpu0"})
        >>> m = JudgeModel(_pointer_cluster(cl.devices, 0.05, cl.name), congestion=False,
        ...                changes=("shared_memory",), details={"tensor_latency_ms": 0.05})
        >>> fast = m.refit_recv(probe, m.makespan(probe) - 0.06)   # two tensors on its path
        >>> fast.details["recv_overhead_ms"], round(fast.details["tensor_latency_fitted_ms"], 6)
        (0.0, 0.02)
        >>> slow = fast.refit_recv(probe, m.makespan(probe) + 0.02)  # starts from 0.05 again
        >>> round(slow.details["recv_overhead_ms"], 6), "tensor_latency_fitted_ms" in slow.details
        (0.01, False)
        """
        lat = self.details.get("tensor_latency_ms")
        pointer = "shared_memory" in self.changes and lat is not None
        base = self
        if "tensor_latency_fitted_ms" in self.details:
            base = replace(self._with_latency(lat) if pointer else self,
                           details={k: v for k, v in self.details.items()
                                    if k != "tensor_latency_fitted_ms"})

        def with_o(o: float) -> JudgeModel:
            cl = base.cluster.with_devices([replace(d, recv_overhead=o)
                                            for d in base.cluster.devices])
            return replace(base, cluster=cl)

        o = _fit_overhead(lambda x: with_o(x).makespan(probe), measured_ms, max_ms)
        out, details = with_o(o), {**base.details, "recv_overhead_ms": o,
                                   "probe_measured_ms": measured_ms}
        if latency and pointer and o == 0.0 and out.makespan(probe) > measured_ms:
            x = _fit_overhead(lambda y: out._with_latency(y).makespan(probe), measured_ms, lat)
            out, details["tensor_latency_fitted_ms"] = out._with_latency(x), x
        changes = self.changes + (() if "recv_fit" in self.changes else ("recv_fit",))
        return replace(out, changes=changes,
                       details={**details, "probe_predicted_ms": out.makespan(probe)})

    def _with_latency(self, latency_ms: float) -> JudgeModel:
        """This model's devices linked as logical devices by ``latency_ms`` per tensor."""
        return replace(self, cluster=_pointer_cluster(self.cluster.devices, latency_ms,
                                                       self.cluster.name))

    def probe_plans(self) -> dict:
        """The probe runs this model's ``rescale``, ``step_cost`` and ``recv_fit`` figures are
        fitted to, by name (:data:`PROBES`): time them in the same interleaved rounds as the
        plans you judge (:func:`~workbench.runtime.runner.measure_plans`) and pass the
        measurements to :meth:`reanchor`, so that the machine's drift between calibration and
        measurement does not enter the model. Only the probes its changes need.

        >>> from workbench import samples
        >>> g = samples.diamond(); cl = local_cluster(2)
        >>> m = JudgeModel(cl, changes=("rescale", "step_cost", "recv_fit"),
        ...                probe=probe_plan(g, cl))
        >>> list(m.probe_plans())  # doctest: +NORMALIZE_WHITESPACE
        ['(probe)', '(reference)', '(reference 2)', '(reference 3)', '(one-op probe)',
         '(one-op probe 2)', '(one-op probe 3)']
        >>> list(replace(m, anchor_sessions=1).probe_plans())
        ['(probe)', '(reference)', '(one-op probe)']
        >>> list(JudgeModel(cl, changes=("rescale",), probe=probe_plan(g, cl)).probe_plans())
        ['(reference)', '(reference 2)', '(reference 3)']
        """
        if self.probe is None:
            raise RuntimeBridgeError("probe_plans: the model has no probe (use calibrate_model)")
        g, out = self.probe.graph, {}
        if "recv_fit" in self.changes:
            out["(probe)"] = self.probe
        k = max(1, min(self.anchor_sessions, len(REFERENCES)))
        if {"rescale", "step_cost", "live_memory"} & set(self.changes):
            ref = reference_plan(g, self.cluster)
            out.update((name, ref) for name in REFERENCES[:k])
        if "step_cost" in self.changes:
            out.update(zip(STEP_PROBES, one_op_probes(g, self.cluster, k)))
        if "live_memory" in self.changes:
            out["(order probe)"] = order_probe(g, self.cluster)
            if self.live_split:
                out.update(zip(SPLIT_PROBES, split_order_probes(g, self.cluster)))
        return out

    def unanchored(self) -> JudgeModel:
        """This model without its ``rescale`` and ``step_cost`` changes (speeds as profiled, no
        multi-device step cost); the other changes and figures are kept.

        >>> from workbench import samples
        >>> g = samples.diamond(); m = JudgeModel(local_cluster(2))
        >>> ref = reference_plan(g, m.cluster)
        >>> r = m.rescale(ref, 3 * m.makespan(ref))
        >>> r.unanchored().makespan(ref) == m.makespan(ref), r.unanchored().changes
        (True, ())
        """
        f = self.details.get("rescale", 1.0)
        cl = self.cluster if f == 1.0 else self.cluster.with_devices(
            [replace(d, speed=d.speed * f) for d in self.cluster.devices])
        drop = ("rescale", "reference_measured_ms", "step_cost_ms", "one_op_probe_measured_ms",
                "step_cost_range_ms", "reference_range_ms")
        return replace(self, cluster=cl, multi_device_ms=0.0,
                       changes=tuple(c for c in self.changes if c not in ("rescale", "step_cost")),
                       details={k: v for k, v in self.details.items() if k not in drop})

    def reanchor(self, measured, *, changes: Iterable[str] | None = None,
                 max_ms: float = 1.0, latency: bool = True) -> JudgeModel:
        """This model with ``rescale``, ``live_memory``, ``step_cost`` and ``recv_fit`` (those
        of ``changes``, default this model's own) refitted, in that order, to ``measured`` (the
        step cost and the receive overhead alternately, to their fixed point, as each enters
        the other's fit): the :meth:`probe_plans` by name -> measured step (ms, or a
        :class:`~workbench.runtime.runner.Measurement`). Changes not named are left out (an
        ablation: ``changes=("recv_fit",)`` is the model without ``rescale`` and
        ``step_cost``); the other changes are kept. ``latency``: as in :meth:`refit_recv`.
        The reference's time is the median of its sessions (:data:`REFERENCES`, the first
        :attr:`anchor_sessions`; ``details["reference_range_ms"]``: their highest minus lowest),
        the step cost the median over the one-op probes (:meth:`fit_step_cost`).
        ``live_memory`` is fitted only where the order probe and the reference differ by more
        than their two spreads (:func:`~workbench.runtime.judging.step_spread` of the
        Measurements' samples, the reference's the median of its sessions'; bare numbers have
        none).

        Raises
        ------
        RuntimeBridgeError
            A probe a change needs is missing from ``measured`` or its run failed.

        >>> from workbench import samples
        >>> g = samples.diamond(); cl = local_cluster(2)
        >>> m = JudgeModel(cl, changes=("rescale", "step_cost"), probe=probe_plan(g, cl))
        >>> ref = reference_plan(g, cl)
        >>> times = {"(reference)": 2 * m.makespan(ref), "(reference 2)": 9.0,
        ...          "(reference 3)": 2 * m.makespan(ref) + 0.1, "(one-op probe)": 20.0,
        ...          "(one-op probe 2)": 20.5, "(one-op probe 3)": 19.0}
        >>> r = m.reanchor(times)    # the second reference session far off: the median holds
        >>> r.details["rescale"], r.makespan(ref) == 2 * m.makespan(ref), r.changes
        (2.0, True, ('rescale', 'step_cost'))
        >>> m.reanchor({"(reference)": 1.0})
        Traceback (most recent call last):
        ...
        workbench.errors.RuntimeBridgeError: reanchor: no measurement of '(reference 2)' (needed by rescale)
        """
        changes = set(self.changes if changes is None else changes)
        model = self.unanchored()
        if "recv_fit" in changes:  # refitted last, so named last
            model = replace(model, changes=tuple(c for c in model.changes if c != "recv_fit"))
        probes = replace(self, changes=tuple(changes)).probe_plans()

        def ms(name: str, change: str) -> float:
            m = measured.get(name)
            if m is None:
                raise RuntimeBridgeError(f"reanchor: no measurement of {name!r} (needed by "
                                         f"{change})")
            if getattr(m, "ok", True) is False:
                raise RuntimeBridgeError(f"reanchor: the {name} run failed: {m.error}")
            return float(getattr(m, "median_ms", m))

        ref = probes.get("(reference)")
        refs = [k for k in REFERENCES if k in probes]
        anchors = [c for c in ("rescale", "live_memory", "step_cost") if c in changes]
        ref_ms = math.nan
        if anchors:  # the median of the reference's sessions
            times = [ms(k, anchors[0]) for k in refs]
            ref_ms = float(np.median(times))
            model = replace(model, details={**model.details,
                                            "reference_range_ms": max(times) - min(times)})
        if "rescale" in changes:
            model = model.rescale(ref, ref_ms)
        model = replace(model, memory_slope=0.0, memory_slope_multi=None,
                        changes=tuple(c for c in model.changes if c != "live_memory"))
        if "live_memory" in changes:
            model = model.fit_live_memory(ref, ref_ms,
                                          probes["(order probe)"],
                                          ms("(order probe)", "live_memory"),
                                          min_gap_ms=float(np.median([_spread(measured, k)
                                                                      for k in refs]))
                                          + _spread(measured, "(order probe)"))
            if self.live_split:  # plans on several devices: their own slope, from the split
                split, probe2 = SPLIT_PROBES
                model = model.fit_live_memory(probes[split], ms(split, "live_memory"),
                                              probes[probe2], ms(probe2, "live_memory"),
                                              min_gap_ms=_spread(measured, split)
                                              + _spread(measured, probe2), multi=True)
        for _ in range(8):  # the step cost and the receive overhead each enter the other's fit
            c = model.multi_device_ms
            if "step_cost" in changes:
                steps = [k for k in STEP_PROBES if k in probes]
                model = model.fit_step_cost(ref, ref_ms,
                                            [probes[k] for k in steps],
                                            [ms(k, "step_cost") for k in steps])
            if "recv_fit" in changes:
                model = model.refit_recv(self.probe, ms("(probe)", "recv_fit"), max_ms=max_ms,
                                         latency=latency)
            if "step_cost" not in changes or "recv_fit" not in changes \
                    or abs(model.multi_device_ms - c) < 1e-6:
                break
        return model


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
    return replace(ref, order={cluster.names[0]: _list_order(graph, cluster)},
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
            replace(split, order=by_device(_list_order(graph, cluster)),
                    method="split-order-probe"))


def _list_order(graph, cluster: Cluster) -> list:
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


@functools.cache
def last_level_cache_bytes(default: float = 32 * 2**20) -> float:
    """The size of this machine's last-level CPU cache (bytes, from
    ``/sys/devices/system/cpu/cpu0/cache``; ``default`` where it cannot be read): the
    ``live_memory`` change's cap -- live memory beyond it evicts nothing more.

    >>> last_level_cache_bytes() > 0
    True
    """
    from pathlib import Path

    best = (0, 0.0)
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    for d in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            level = int((d / "level").read_text())
            size = (d / "size").read_text().strip()
            n = float(size[:-1]) * units[size[-1]] if size[-1] in units else float(size)
        except (OSError, ValueError, IndexError):
            continue
        best = max(best, (level, n))
    return best[1] if best[1] > 0 else float(default)


def reference_live_bytes(graph) -> np.ndarray:
    """Per op, the bytes live when it starts in :func:`reference_plan`'s order (one device,
    topological order: the ``live_memory`` change's baseline). Serial, so independent of the
    op times.

    >>> from workbench import samples
    >>> reference_live_bytes(samples.diamond()).tolist()
    [0.0, 10000000.0, 20000000.0, 20000000.0]
    """
    from .judging import live_bytes

    pos = np.empty(graph.n_ops)
    for k, v in enumerate(graph.topological_order()):
        pos[graph.c.index[v]] = k
    return live_bytes(graph, pos, pos + 1.0)


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


def fit_wakeup(model: JudgeModel, graph, *, steps: int = 10, warmup: int = 3, program=None,
               max_ms: float = 2.0, realtime: bool = False, measured_ms: float | None = None,
               probe_ms: float | None = None) -> JudgeModel:
    """``model`` with the ``wakeup`` change: ``w`` fitted by bisection so that the model
    predicts the measured :func:`idle_probe_plan` (timed here unless ``measured_ms`` is given),
    then the receive overhead refitted to the random probe (``probe_ms``, default
    ``details["probe_measured_ms"]``) when the model has ``recv_fit``, and ``w`` once more.
    Fitted from probes only, never from the plans it judges.

    Raises
    ------
    RuntimeBridgeError
        A model without a probe, or a failed run.
    """
    from .runner import run_plan, with_run_order

    if model.probe is None:
        raise RuntimeBridgeError("fit_wakeup: the model has no probe (use calibrate_model)")
    idle = model.idle_probe or with_run_order(idle_probe_plan(graph, model.cluster),
                                              model.cluster)
    if measured_ms is None:
        measured_ms = run_plan(idle, steps=steps, warmup=warmup, program=program,
                               cluster=model.cluster, realtime=realtime).median_ms
    probe_ms = model.details.get("probe_measured_ms") if probe_ms is None else probe_ms

    def fit_w(m: JudgeModel) -> JudgeModel:
        w = _fit_overhead(lambda x: replace(m, wakeup=x).makespan(idle), measured_ms, max_ms)
        return replace(m, wakeup=w)

    out = fit_w(replace(model, idle_probe=idle))
    if "recv_fit" in model.changes and probe_ms is not None:
        out = fit_w(out.refit_recv(model.probe, probe_ms))
    changes = out.changes + (() if "wakeup" in out.changes else ("wakeup",))
    return replace(out, changes=changes,
                   details={**out.details, "wakeup_ms": out.wakeup,
                            "idle_probe_measured_ms": measured_ms,
                            "idle_probe_predicted_ms": out.makespan(idle)})


def contention_factor(busy: dict, alone: dict, *, min_ms: float = 0.01) -> float:
    """Median over ops of (time in ``busy``) / (time in ``alone``), at least 1: two traces (node
    -> (device, start, end)) of the same ops, e.g. a multi-device probe and a single-device
    run. Ops shorter than ``min_ms`` alone are left out (their times are mostly the tracer's);
    a median of ratios, not a ratio of sums, so one preempted op does not set the factor.

    >>> contention_factor({"a": ("d", 0, 1.5), "b": ("d", 2, 5.0), "c": ("d", 5, 95.0)},
    ...                   {"a": ("d", 0, 1.0), "b": ("d", 1, 3.0), "c": ("d", 3, 4.0)})
    1.5
    """
    ratios = [(busy[v][2] - busy[v][1]) / (alone[v][2] - alone[v][1]) for v in busy
              if v in alone and alone[v][2] - alone[v][1] >= min_ms]
    return max(1.0, float(statistics.median(ratios))) if ratios else 1.0


def _pointer_cluster(devices, latency_ms: float, name: str) -> Cluster:
    """``devices`` linked as logical devices of one process pass tensors: every pair by a
    per-tensor ``latency_ms`` with infinite bandwidth (the ``shared_memory`` and ``handoff``
    changes)."""
    links = {(a.name, b.name): Link(latency_ms, math.inf) for a in devices for b in devices
             if a.name != b.name}
    return Cluster(devices, intra_host=Link(latency_ms, math.inf), links=links, name=name)


def _same_process(cluster: Cluster) -> bool:
    """True when every device is a local logical CPU device of this process (``cpuN``)."""
    return all(d.kind == "cpu" and "/" not in d.name for d in cluster.devices)


def _measurable(changes: tuple, cluster: Cluster) -> tuple:
    """``changes`` as they can be measured on ``cluster``: unless every device is a local
    logical CPU device, ``contention_bench`` becomes ``overlap`` (the traced slope: the
    benchmark runs every op on each device, and a GPU cluster's host, or a GPU, cannot run every
    op) and ``handoff`` becomes ``shared_memory`` and ``recv_fit`` (its micro-benchmarks run
    between two logical CPU devices of this process).

    >>> from workbench import Cluster
    >>> _measurable(("contention_bench", "handoff"), local_cluster(2))
    ('contention_bench', 'handoff')
    >>> _measurable(("contention_bench", "handoff", "step_cost"), Cluster.preset("2xV100-pcie"))
    ('overlap', 'shared_memory', 'step_cost', 'recv_fit')
    """
    if _same_process(cluster):
        return tuple(changes)
    out = tuple({"contention_bench": "overlap", "handoff": "shared_memory"}.get(c, c)
                for c in changes)
    return out + ("recv_fit",) if "handoff" in changes else out


def _spread(measured, name: str) -> float:
    """The spread (:func:`~workbench.runtime.judging.step_spread`) of a measurement given as a
    :class:`~workbench.runtime.runner.Measurement`; 0 for a bare number."""
    from .judging import step_spread

    samples = getattr(measured.get(name), "samples", None)
    return step_spread(samples) if samples else 0.0


def _fit_overhead(predict, measured_ms: float, max_ms: float) -> float:
    """The smallest receive overhead ``o`` (bisection) with ``predict(o) >= measured_ms``."""
    lo, hi = 0.0, 1e-3
    if predict(lo) >= measured_ms:
        return 0.0
    while predict(hi) < measured_ms and hi < max_ms:
        lo, hi = hi, min(2 * hi, max_ms)
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        if predict(mid) < measured_ms:
            lo = mid
        else:
            hi = mid
    return hi


def calibrate_model(graph, cluster: Cluster, *, changes: Iterable[str] = MODEL_CHANGES,
                    probe=None, seed: int = 0, steps: int = 10, warmup: int = 3,
                    traces: int = 5, program=None, max_ms: float = 1.0,
                    realtime: bool = False, handoff=None) -> JudgeModel:
    """Fit a :class:`JudgeModel` to traced probe runs of the real program.

    The probe (default :func:`probe_plan`: a random placement, many cross-device tensors; keep
    it out of the plans you evaluate) is measured with
    :func:`workbench.runtime.judging.traced_measurement` (traces: the tensor latency), a
    single-device run too where the slowdown is fitted from traces (``overlap``,
    ``contention``); the default slowdown (``contention_bench``) is measured untraced by
    :func:`~workbench.runtime.contention.measure_contention`; the default per-tensor costs
    (``handoff``) by :func:`~workbench.runtime.handoff.measure_handoff` unless ``handoff``
    (:class:`~workbench.runtime.handoff.HandoffCosts`) gives them; the single-device reference,
    the order probe, the one-op probe and the random probe (``recv_fit`` only) are then timed
    together in three interleaved rounds (the speed, live-memory slope, step cost and receive
    overhead). Each change of ``changes`` (of :data:`MODEL_CHANGES` and
    :data:`OPTIONAL_CHANGES`) is fitted from them. The model's ``rescale``, ``live_memory``,
    ``step_cost`` and ``recv_fit`` figures then follow the machine at calibration time: to
    judge plans, time :meth:`JudgeModel.probe_plans` in the plans' rounds and
    :meth:`JudgeModel.reanchor` the model to them (as ``bench/fidelity.py`` does).
    ``realtime``: every run under ``SCHED_FIFO`` (see
    :func:`~workbench.runtime.runner.run_plan`).

    Raises
    ------
    RuntimeBridgeError
        An unknown change name, a probe that moves no tensor, or a failed run.

    Examples
    --------
    >>> calibrate_model(None, local_cluster(2), changes=["bogus"])
    Traceback (most recent call last):
    ...
    workbench.errors.RuntimeBridgeError: calibrate_model: unknown model change 'bogus' (known: contention_bench, handoff, rescale, live_memory, step_cost, shared_memory, recv_fit, overlap, contention, wakeup)
    """
    from ..plan import Plan
    from .judging import overlap_slope, residuals, traced_measurement
    from .runner import with_run_order

    changes = tuple(changes)
    known = MODEL_CHANGES + OPTIONAL_CHANGES
    bad = [c for c in changes if c not in known]
    if bad:
        raise RuntimeBridgeError(f"calibrate_model: unknown model change {bad[0]!r} (known: "
                                 f"{', '.join(known)})")
    if "handoff" in changes and {"shared_memory", "recv_fit"} & set(changes):
        raise RuntimeBridgeError("calibrate_model: change 'handoff' replaces 'shared_memory' and "
                                 "'recv_fit'; name it without them")
    slowdowns = [c for c in ("contention", "overlap", "contention_bench") if c in changes]
    if len(slowdowns) > 1:
        raise RuntimeBridgeError(f"calibrate_model: changes {slowdowns[0]!r} and "
                                 f"{slowdowns[1]!r} model the same slowdown; name one of them")
    changes = _measurable(changes, cluster)
    # the probe keeps one order in every run of it (calibration, interleaved rounds, predictions)
    probe = with_run_order(probe or probe_plan(graph, cluster, seed=seed), cluster)
    run = {"steps": steps, "warmup": warmup, "traces": traces, "program": program,
           "cluster": cluster, "realtime": realtime}
    meas = traced_measurement(probe, **run)
    details: dict = {"probe_measured_ms": meas.median_ms}
    model = JudgeModel(cluster, changes=(), probe=probe)
    res = residuals(probe, meas, schedule=model.simulate(probe))
    if not len(res.transfers):
        raise RuntimeBridgeError(f"the probe plan {probe.method!r} moves no tensor between "
                                 f"devices; use a cluster of two or more devices")
    if "shared_memory" in changes and _same_process(cluster):
        bind = res.transfers[res.transfers["binding"]]["meas_ms"]
        lat = float(max(0.0, bind.median())) if len(bind) else 0.0
        cl = _pointer_cluster(cluster.devices, lat, cluster.name)
        model = replace(model, cluster=cl, congestion=False,
                        changes=model.changes + ("shared_memory",))
        details["tensor_latency_ms"] = lat
    if "contention" in changes or "overlap" in changes:
        first = cluster.names[0]
        single = Plan(probe.graph, {v: first for v in probe.graph.ops}, method="probe-single")
        ref = traced_measurement(single, **run)
        factor = contention_factor(meas.trace, ref.trace)
        slope = overlap_slope(meas.trace, ref.trace)
        k = len(probe.devices_used())
        if "contention" in changes:
            model = replace(model, contention={k: factor},
                            changes=model.changes + ("contention",))
        else:
            model = replace(model, overlap=slope, changes=model.changes + ("overlap",))
        details.update(contention_factor=factor, overlap_slope=slope,
                       single_measured_ms=ref.median_ms)
    model = replace(model, details=details)
    if "contention_bench" in changes:
        from .contention import measure_contention

        cont = measure_contention(graph, cluster, steps=steps, warmup=warmup, program=program,
                                  realtime=realtime)
        model = model.with_overlap_slope(cont["slope"])
    if "handoff" in changes:  # before the anchors: step_cost is fitted with these costs
        from .handoff import measure_handoff

        model = model.with_handoff(handoff or measure_handoff(cluster.names[:2],
                                                              realtime=realtime))
    # rescale and step_cost time all ops on the first device: logical CPU devices only (a GPU
    # cluster's first device is the host, and not every op has a kernel on every device)
    anchors = [c for c in ("rescale", "live_memory", "step_cost", "recv_fit") if c in changes
               and (c == "recv_fit" or _same_process(cluster))]
    timed = {"(probe)": meas.median_ms}
    if {"rescale", "step_cost", "live_memory"} & set(anchors):
        from .runner import measure_plans

        # the anchoring probes timed together, in interleaved rounds: a drift between them
        # would enter the fits (the random probe alone swung 2.3-3.4 ms on transformer_small)
        timed.update(measure_plans(graph, replace(model, changes=tuple(anchors)).probe_plans(),
                                   steps=steps, warmup=warmup, program=program, rounds=3,
                                   realtime=realtime))
    model = model.reanchor(timed, changes=anchors, max_ms=max_ms)
    if "recv_fit" not in changes:
        model.details["probe_predicted_ms"] = model.makespan(probe)
    if "wakeup" in changes:
        model = fit_wakeup(model, graph, steps=steps, warmup=warmup, program=program,
                           realtime=realtime)
    return model
