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

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import replace

from ..cluster import Cluster, Device, Link, local_cluster
from ..errors import ClusterError, RuntimeBridgeError
from ..fidelity.changes import MODEL_CHANGES, fit_wakeup_ms
from ..fidelity.fitting import fit_link, fit_overhead
from ..fidelity.model import JudgeModel
from ..fidelity.probes import idle_probe_plan, probe_plan
from ..fidelity.named_changes import anchored_changes, check_changes, fit_measured
from ._tf import closing_reported, new_session, tf, tf_device, timed_runs
from .gpu import is_gpu_device, sync_op
from .realtime import realtime as realtime_scheduling

__all__ = ["DEFAULT_SIZES", "calibrate_links", "calibrate_model", "fit_recv_overhead",
           "fit_wakeup"]

DEFAULT_SIZES = (1 << 10, 1 << 14, 1 << 17, 1 << 19, 1 << 21, 1 << 22)
"""Transfer sizes in bytes (1 KiB to 4 MiB)."""


def _host_of(name: str) -> str:
    return name.split("/", 1)[0] if "/" in name else "host0"


def _done(t, ys: list, tfd: dict, pair: tuple):
    """The op whose completion means the tensors ``ys`` have arrived: a group of them, then a
    SyncDevice on each GPU end of ``pair`` (GPU copies and kernels run asynchronously)."""
    grp = t.group(*ys)
    gpus = sorted({tfd[d] for d in pair if is_gpu_device(tfd[d])})
    return t.group(*[sync_op(g, after=[grp]) for g in gpus]) if gpus else grp


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

    hi = fit_overhead(sim, meas, max_ms)
    out = with_overhead(hi)
    if not return_details:
        return out
    s = simulate(probe, out)
    return out, {"overhead_ms": hi, "probe_measured_ms": meas, "probe_simulated_ms": s.makespan,
                 "probe_transfers": s.n_transfers}



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
    return fit_wakeup_ms(model, idle, measured_ms, probe_ms=probe_ms, max_ms=max_ms)


def calibrate_model(graph, cluster: Cluster, *, changes: Iterable[str] = MODEL_CHANGES,
                    probe=None, seed: int = 0, steps: int = 10, warmup: int = 3,
                    traces: int = 5, program=None, max_ms: float = 1.0,
                    realtime: bool = False, handoff=None) -> JudgeModel:
    """Fit a :class:`JudgeModel` to traced probe runs of the real program.

    The probe (default :func:`probe_plan`: a random placement, many cross-device tensors; keep
    it out of the plans you evaluate) is measured with
    :func:`workbench.runtime.tracing.traced_measurement` (traces: the tensor latency), a
    single-device run too where the slowdown is fitted from traces (``overlap``,
    ``contention``); the default slowdown (``contention_bench``) is measured untraced by
    :func:`~workbench.runtime.contention.measure_contention`; the default per-tensor costs
    (``handoff``) by :func:`~workbench.runtime.handoff.measure_handoff` unless ``handoff``
    (:class:`~workbench.fidelity.extras.HandoffCosts`) gives them; the single-device reference,
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
    from ..simulate import simulate
    from .runner import with_run_order
    from .tracing import traced_measurement

    changes = check_changes(changes, cluster)
    # the probe keeps one order in every run of it (calibration, interleaved rounds, predictions)
    probe = with_run_order(probe or probe_plan(graph, cluster, seed=seed), cluster)
    if simulate(probe, cluster).n_transfers == 0:
        raise RuntimeBridgeError(f"the probe plan {probe.method!r} moves no tensor between "
                                 f"devices; use a cluster of two or more devices")
    run = {"steps": steps, "warmup": warmup, "traces": traces, "program": program,
           "cluster": cluster, "realtime": realtime}
    meas, single, slope = traced_measurement(probe, **run), None, None
    if "contention" in changes or "overlap" in changes:
        first = cluster.names[0]
        single = traced_measurement(Plan(probe.graph, {v: first for v in probe.graph.ops},
                                         method="probe-single"), **run)
    if "contention_bench" in changes:
        from .contention import measure_contention

        slope = measure_contention(graph, cluster, steps=steps, warmup=warmup, program=program,
                                   realtime=realtime)["slope"]
    if "handoff" in changes:  # before the anchors: step_cost is fitted with these costs
        from .handoff import measure_handoff

        handoff = handoff or measure_handoff(cluster.names[:2], realtime=realtime)
    model = fit_measured(cluster, probe, changes, probe_run=meas, single_run=single,
                         contention_slope=slope, handoff=handoff)
    anchors = anchored_changes(changes, cluster)
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
