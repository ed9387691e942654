"""Profiling: measured per-op compute times written into an OpGraph's costs.

The program runs on one device (``cpu0`` by default: one logical CPU device, one intra-op
thread, one inter-op thread, so ops run one at a time as the simulator assumes); after
``warmup`` steps, ``steps`` steps are traced with ``RunOptions.FULL_TRACE`` and each node's
time (``all_end_rel_micros`` of its step stats) is averaged over them. Memory allocated per op
in the trace is kept as the node attribute ``alloc_bytes``, and the spread of an op's traced
times over the ``steps`` steps (sample standard deviation, ms, for ``steps >= 2``) as
``compute_std`` (``{kind: ms}``, the kind its ``compute`` is written for), which
:func:`workbench.robustness` reads for its ``"profiled"`` noise.

The executor's own per-op cost and the ``Session.run`` overhead are not in any op's step
stats, and tracing itself adds a few microseconds to every op. With ``overhead=True`` the
difference between the median untraced step time and the sum of the op times is charged evenly
to the ops, so that simulating the single-device plan gives the measured single-device step
time; ``meta["profile"]`` records the raw figures.

With ``realtime=True`` the warm-up, traced and timed steps run with every thread of the process
under ``SCHED_FIFO`` (:mod:`workbench.runtime.realtime`): on a loaded machine the profile then
holds the ops' times, not the scheduler's 4 ms ticks; ``meta["profile"]["realtime"]`` says
whether it was granted.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

import networkx as nx

from ..errors import RuntimeBridgeError
from ..graph import OpGraph
from ._tf import closing_reported, new_session, tf, tf_device, timed_runs
from .extraction import Program, program_for, program_of, program_to_opgraph
from .gpu import gpu_capable, gpu_kernel_times, is_gpu_device, sync_op
from .realtime import realtime as realtime_scheduling
from .runner import _check_steps, parse_step_stats, placed_graph_def, step_dag

__all__ = ["profile", "profile_program"]


def profile_program(program: Program, *, device: str = "cpu0", steps: int = 10,
                    warmup: int = 3, timed_steps: int = 20, intra_op: int = 1,
                    target: str = "", serialize: bool = True, realtime: bool = False) -> dict:
    """Run a program on one device and return per-node mean times and the step figures.

    With ``serialize`` the ops are chained in a topological order, as the runner chains a
    device's ops (:mod:`workbench.runtime.runner`): with one op ready at a time the executor
    runs it inline instead of through its thread pool, which changes the per-op overhead that
    the untraced step time calibrates. ``realtime``: the steps under ``SCHED_FIFO`` (see the
    module docstring).

    Returns
    -------
    dict
        ``times`` (node -> mean ms), ``alloc`` (node -> mean bytes allocated), ``std``
        (node -> sample standard deviation of its traced times, ms; empty when ``steps < 2``),
        ``step_ms`` (mean untraced step), ``traced_sum_ms`` (sum of op means), ``steps``,
        ``warmup``, ``realtime`` (whether the steps ran under real-time scheduling).
    """
    t = tf()
    dev = tf_device(device)
    on_gpu = is_gpu_device(dev)
    host = tf_device("cpu0")
    # on a GPU, ops without a GPU kernel run on the host CPU (as TensorFlow's placer would)
    placement = {v: dev if not on_gpu or gpu_capable(program.nodes[v].op) else host
                 for v in program.step_nodes}
    order = None
    if serialize:
        topo = list(nx.lexicographical_topological_sort(step_dag(program),
                                                        key=_position(program)))
        order = {}
        for v in topo:
            order.setdefault(placement[v], []).append(v)
    gd = placed_graph_def(program, placement, default=dev, order=order)
    graph = t.Graph()
    with graph.as_default():
        t.graph_util.import_graph_def(gd, name="")
        train = graph.get_operation_by_name(program.train_op)
        step_op = t.group(sync_op(dev, after=[train])) if on_gpu else train
    sess = new_session(graph, target=target, what="profiling session",
                       cpus=1 + int(dev.rsplit(":", 1)[1]) if "CPU" in dev else 1,
                       inter_op=1, intra_op=intra_op, spinning=not realtime)
    with closing_reported(sess, "profiling"), realtime_scheduling(realtime) as granted:
        sess.run(graph.get_operation_by_name(program.init_op),
                 feed_dict=program.init_feed or None)
        for _ in range(warmup):
            sess.run(step_op)
        sums: dict = {}
        samples: dict = {}
        allocs: dict = {}
        kernel_steps = 0
        ro = t.compat.v1.RunOptions(trace_level=t.compat.v1.RunOptions.FULL_TRACE)
        for _ in range(steps):
            md = t.compat.v1.RunMetadata()
            sess.run(step_op, options=ro, run_metadata=md)
            raw = parse_step_stats(md.step_stats)
            kernels = gpu_kernel_times(md.step_stats) if on_gpu else {}
            kernel_steps += bool(kernels)
            for v, (_, s, e, a) in raw.items():
                # a GPU op's executor record ends at the kernel launch: use its kernel time
                ms = kernels[v] if v in kernels else (e - s) / 1e3
                sums[v] = sums.get(v, 0.0) + ms
                samples.setdefault(v, []).append(ms)
                allocs[v] = allocs.get(v, 0.0) + a
        wall = timed_runs(sess, step_op, timed_steps)
    if on_gpu and not kernel_steps:
        raise RuntimeBridgeError(
            "profiling on a GPU found no kernel records in the trace: TensorFlow's GPU tracer "
            "needs CUPTI (the 'gpu' extra installs it with tensorflow[and-cuda])")
    step_set = set(program.step_nodes)
    times = {v: sums.get(v, 0.0) / steps for v in program.step_nodes}
    alloc = {v: allocs.get(v, 0.0) / steps for v in program.step_nodes}
    # an op traced in fewer steps than asked counts 0 ms in the others, as in its mean
    std = {v: statistics.stdev(samples[v] + [0.0] * (steps - len(samples[v])))
           for v in program.step_nodes if v in samples and steps >= 2}
    missing = [v for v in program.step_nodes if v not in sums]
    return {"times": times, "alloc": alloc, "std": std, "step_ms": statistics.median(wall),
            "step_mean_ms": statistics.fmean(wall),
            "traced_sum_ms": sum(times[v] for v in step_set), "steps": steps,
            "warmup": warmup, "untraced_nodes": missing, "realtime": granted,
            "host_nodes": sorted(v for v, d in placement.items() if d != dev)}


def _position(program: Program):
    pos = {v: i for i, v in enumerate(program.step_nodes)}
    return pos.__getitem__


def _match_step(times: dict, step_ms: float) -> dict:
    """Shift every op time by one constant (clamped at 0), then rescale, so the times add up
    to ``step_ms``: the executor's per-op overhead (untraced step longer than the sum) or the
    tracer's per-op overhead (traced sum longer than the untraced step) is charged equally to
    every op.

    >>> _match_step({"a": 1.0, "b": 3.0}, 6.0)
    {'a': 2.0, 'b': 4.0}
    >>> _match_step({"a": 0.1, "b": 3.0}, 1.5)
    {'a': 0.0, 'b': 1.5}
    """
    n = len(times)
    shift = (step_ms - sum(times.values())) / n
    out = {v: max(0.0, ms + shift) for v, ms in times.items()}
    total = sum(out.values())
    if total > 0:
        out = {v: ms * step_ms / total for v, ms in out.items()}
    return out


def profile(graph_or_model: OpGraph | str | Callable, batch: int | None = None, *,
            kind: str | None = None, steps: int = 10, warmup: int = 3, overhead: bool = True,
            device: str = "cpu0", program: Program | None = None, intra_op: int = 1,
            name: str | None = None, timed_steps: int = 20, realtime: bool = False,
            **sizes) -> OpGraph:
    """An OpGraph whose compute costs (for device kind ``kind``) are measured times.

    Parameters
    ----------
    graph_or_model : OpGraph, str, callable, Keras model or tf.function
        A graph from :func:`~workbench.runtime.extract` (its program is rebuilt from
        ``meta["program"]`` unless ``program`` is given), or anything
        :func:`~workbench.runtime.extract` takes, with ``batch`` and ``**sizes`` (``inputs``,
        ``input_shape``, ``loss``, ``optimizer`` for Keras models and ``tf.function`` steps).
    kind : str, optional
        Device kind the measured times are written for (other kinds' costs are kept);
        default ``"gpu"`` when ``device`` is a GPU, else ``"cpu"``. On a GPU, ops that have no
        GPU kernel run on ``cpu0`` and get a ``cpu`` cost only (CPU-only ops); GPU ops get
        their CUDA kernel time (:func:`workbench.runtime.gpu.gpu_kernel_times`).
    steps, warmup : int
        Traced steps averaged, after untimed warm-up steps; their spread per op is kept as the
        node attribute ``compute_std`` (``{kind: ms}``, the raw traced standard deviation, not
        rescaled by ``overhead``; absent when ``steps < 2``).
    overhead : bool
        Make the op times add up to the measured untraced single-device step time (see
        :func:`_match_step`); the raw traced sum is kept in ``meta["profile"]``.
    device : str
        Device to profile on (``cpu0``, ``gpu0``, ...).
    timed_steps : int
        Untraced steps whose median is the measured step time.
    realtime : bool
        Run the steps under ``SCHED_FIFO`` (see the module docstring; refused: a warning and
        normal priority).

    Examples
    --------
    >>> from workbench.runtime import extract, profile
    >>> g = profile(extract("mlp", 8, layers=1, width=16, in_dim=16), steps=2, warmup=1)
    >>> g.meta["costs"], g.op("fc0/MatMul")["compute"]["cpu"] > 0
    ('profiled', True)
    """
    _check_steps(steps, warmup, timed_steps=(timed_steps, 1))
    if isinstance(graph_or_model, OpGraph):
        base = graph_or_model
        program = program or program_for(base)
    else:
        program = program or program_of(graph_or_model, batch, **sizes)
        base = None
    if kind is None:
        kind = "gpu" if is_gpu_device(device) else "cpu"
    res = profile_program(program, device=device, steps=steps, warmup=warmup,
                          intra_op=intra_op, timed_steps=timed_steps, realtime=realtime)
    times = dict(res["times"])
    n = len(times)
    extra = (res["step_ms"] - res["traced_sum_ms"]) if overhead and n else 0.0
    if extra:
        times = _match_step(times, res["step_ms"])
    info = {"steps": steps, "warmup": warmup, "timed_steps": timed_steps, "device": device,
            "step_ms": res["step_ms"],
            "traced_sum_ms": res["traced_sum_ms"], "per_op_adjust_ms": extra / n if n else 0.0,
            "calibrated_to_step": bool(extra),
            "untraced_nodes": len(res["untraced_nodes"]), "intra_op_threads": intra_op,
            "host_nodes": len(res.get("host_nodes", ())), "realtime": res["realtime"]}
    g = program_to_opgraph(program, kind=kind, times=times,
                           name=name or (base.name if base is not None else None),
                           meta={"profile": info})
    # keep other device kinds' costs of the input graph, add the profiled allocations
    G = g.to_networkx()
    host_nodes = set(res.get("host_nodes", ()))
    for v in G.nodes:
        G.nodes[v]["alloc_bytes"] = float(res["alloc"].get(v, 0.0))
        on = "cpu" if v in host_nodes else kind
        if v in host_nodes and kind != "cpu":
            # no GPU kernel: the op ran on the host CPU and cannot run on the GPU
            G.nodes[v]["compute"] = {"cpu": G.nodes[v]["compute"].pop(kind)}
        if v in res["std"] and on in G.nodes[v]["compute"]:
            G.nodes[v]["compute_std"] = {on: float(res["std"][v])}
        if base is not None and v in base.index:
            for k, ms in base.op(v)["compute"].items():
                if k != kind:
                    G.nodes[v]["compute"][k] = ms
    meta = dict(g.meta)
    if base is not None:
        meta = {**base.meta, **meta}
    return OpGraph(G, name=g.name, meta=meta)
