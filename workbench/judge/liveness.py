"""Memory over time in the judge: the peak of *live* memory per device of a simulated schedule,
beside the static sum (every op's ``memory`` on its device, :attr:`Schedule.peak_memory`).

Model (per device, over the simulated step ``[0, makespan]``)
-----------------------------------------------------------
* **Parameters** are resident the whole step: the ``memory`` of every op, except the parts below.
* **Stashes** (training graphs): a forward op read (over an edge with bytes) by a backward
  (``bwd``/``update``) successor keeps what those readers read (at most its ``memory`` and its
  ``out_bytes``, or its largest out-edge) from its start to the end of its last backward
  reader; what its ``memory`` holds beyond its outputs (the parameters PyTorch captures put on
  a layer's first op) stays resident; outputs no backward op reads are freed with the output
  tensor (TensorFlow extraction charges a batch norm's every output, though its gradient
  reads only the small reserve spaces: measured, docs/results-memory.md).
* **Gradients**: ``memory`` on a backward op (PyTorch captures put each parameter's gradient
  on the op that produces it) is allocated when the op starts and held to the end of the step
  (measured: docs/results-memory.md).
* **Activations**: an op's output tensor (the largest of its out-edges' ``bytes``) is live on
  the op's device from the op's start to the last of: the ends of its consumers there and the
  ends of the transfers that send it off; on every other device holding consumers of it, from
  the start of the first transfer that brings it there (when none is simulated, a CPU reading
  host DRAM: from the end of the op's upload, else from the op's end) to the end of its last
  consumer there (the tensor bytes there: the largest edge to those consumers). Edges of
  0 bytes (control dependencies) keep nothing alive. A stashing op's output and its stash are
  one buffer on its device: the larger of the two, for the longer of the two lifetimes.
* **Views** allocate nothing: an op whose type returns a view of its input's buffer
  (:data:`VIEW_OP_TYPES`: TensorFlow's ``ReadVariableOp`` of a resource variable, ``Identity``,
  ``Reshape``, ...) has no tensor of its own; the tensor it views stays live on the device
  until the view's consumers there end. (Counting each ``ReadVariableOp`` as a copy of the
  variable made an unrolled RNN's step look 17x its measured peak: docs/results-memory.md.)
* **Buffer forwarding**: an element-wise op (:data:`FORWARDING_OP_TYPES`) whose same-sized
  input on its device has no other reader (no stash, no view) writes its output into that
  input's buffer, as TensorFlow's kernels do: it owns nothing and the buffer lives on.
* **Workspaces**: an op's ``workspace_bytes`` (a buffer its kernel writes beside its output
  for its gradient: oneDNN's max pooling) lives from its start with its output or stash, on
  CPU devices (:func:`workspace_devices`: the kernels that write it).
* At one instant frees come before allocations (an op's input may be reused by the next op's
  output); a tensor live for no time is not counted.

So a device can fit by the static sum and not by liveness (activations in flight on top of its
parameters), or the reverse (stashes that are never all live at once).

Examples
--------
>>> from workbench import samples, Cluster, Plan, simulate
>>> from workbench.graph import OpGraph
>>> g = OpGraph.from_ops([("a", {"compute": {"gpu": 1.0}, "memory": 10.0}),
...                       ("b", {"compute": {"gpu": 2.0}}), ("c", {"compute": {"gpu": 1.0}})],
...                      [("a", "b", {"bytes": 100.0}), ("b", "c", {"bytes": 40.0})])
>>> c = Cluster.preset("2xV100-pcie")
>>> s = simulate(Plan(g, {v: "gpu0" for v in g.ops}), c)
>>> s.peak_memory["gpu0"], s.peak_live_memory["gpu0"]   # 10 resident + a's 100 + b's 40
(10.0, 150.0)
"""

from __future__ import annotations

import weakref

import numpy as np

__all__ = ["FORWARDING_OP_TYPES", "VIEW_OP_TYPES", "forwarded_inputs", "live_intervals", "live_peaks", "live_upper_bound",
           "memory_timeline", "peak_moment", "shared_memory", "view_ops", "workspace_devices"]

VIEW_OP_TYPES = frozenset({
    "ReadVariableOp", "Identity", "IdentityN", "Reshape", "Squeeze", "ExpandDims",
    "StopGradient", "PreventGradient", "EnsureShape", "CheckNumerics",
    "aten::view", "aten::_unsafe_view", "aten::reshape", "aten::t", "aten::transpose",
    "aten::permute", "aten::expand", "aten::detach", "aten::alias", "aten::squeeze",
    "aten::unsqueeze", "aten::slice", "aten::select", "aten::as_strided"})
"""Op types whose output is a view of an input's buffer (TensorFlow forwards the buffer;
PyTorch returns an aliasing tensor): they allocate no memory of their own."""

_VIEWS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def view_ops(graph) -> np.ndarray:
    """Boolean per op (topological index): is it a view (:data:`VIEW_OP_TYPES`)?

    >>> from workbench import samples
    >>> view_ops(samples.diamond()).tolist()
    [False, False, False, False]
    """
    gc = graph.c
    out = _VIEWS.get(gc)
    if out is None:
        out = np.array([t in VIEW_OP_TYPES for t in graph.op_values("op_type")], dtype=bool)
        _VIEWS[gc] = out
    return out


_OUT: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _out_bytes(graph) -> np.ndarray:
    """Per op its ``out_bytes`` attribute (all its outputs; 0 where the graph has none)."""
    gc = graph.c
    out = _OUT.get(gc)
    if out is None:
        out = np.array([float(x or 0.0) for x in graph.op_values("out_bytes", 0.0)])
        _OUT[gc] = out
    return out


def _workspace_bytes(graph) -> np.ndarray:
    """Per op its ``workspace_bytes`` attribute: a buffer the kernel writes beside its output
    and its gradient reads (oneDNN's max pooling: ``runtime.extraction.ONEDNN_WORKSPACE``)."""
    gc = graph.c
    out = _WS.get(gc)
    if out is None:
        out = np.array([float(x or 0.0) for x in graph.op_values("workspace_bytes", 0.0)])
        _WS[gc] = out
    return out


_WS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _tensor_bytes(gc) -> np.ndarray:
    size = np.zeros(gc.n)
    if gc.m:
        np.maximum.at(size, gc.src, gc.bytes)
    return size


FORWARDING_OP_TYPES = frozenset({
    "Relu", "Relu6", "Elu", "Selu", "Tanh", "Sigmoid", "Neg", "Exp", "Log", "Sqrt", "Rsqrt",
    "Square", "Abs", "ReluGrad", "Relu6Grad", "EluGrad", "TanhGrad", "SigmoidGrad",
    "AddN", "AddV2", "Add", "Sub", "Mul", "RealDiv", "Div", "Maximum", "Minimum",
    "SquaredDifference", "BiasAdd", "BiasAddGrad", "Softmax", "LogSoftmax"})
"""TensorFlow op types that write their output into an input's buffer when this op is the
input's only reader and the shapes match (``forward_input_or_allocate_output`` of the
element-wise kernels): measured, a ResNet-50 step allocates nothing for its Relu, ReluGrad,
AddN and AddV2 outputs (docs/results-memory.md)."""

_FORWARD: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def forwarded_inputs(graph) -> np.ndarray:
    """Per op: the in-edge whose buffer its output reuses, or -1 (:data:`FORWARDING_OP_TYPES`
    ops whose same-sized input has no other reader and is no stash or view), when both ops
    share a device (the caller checks that). The op's own output may be stashed: it is then
    that buffer that backward reads.

    >>> from workbench import samples
    >>> forwarded_inputs(samples.diamond()).tolist()
    [-1, -1, -1, -1]
    """
    gc = graph.c
    out = _FORWARD.get(gc)
    if out is not None:
        return out
    out = np.full(gc.n, -1, dtype=np.int64)
    types = graph.op_values("op_type")
    size = _tensor_bytes(gc)
    view = view_ops(graph)
    back = np.isin(gc.op_kind, [1, 2])
    kept = np.zeros(gc.n, dtype=bool)  # stashed for backward: read again later
    if gc.m:
        kept[gc.src[(gc.op_kind[gc.src] == 0) & back[gc.dst]]] = True
    kept |= gc.memory > 0
    nb, src = gc.bytes.tolist(), gc.src.tolist()
    taken: set = set()
    for v in range(gc.n):
        if size[v] <= 0 or types[v] not in FORWARDING_OP_TYPES:
            continue
        for e in gc.in_edges[v]:
            u = src[e]
            if (nb[e] == size[v] and size[u] == size[v] and not view[u] and not kept[u]
                    and u not in taken and len(gc.out_edges[u]) == 1):
                out[v] = e
                taken.add(u)
                break
    _FORWARD[gc] = out
    return out


def _through_aliases(gc, alias_edge, dev, local_end) -> None:
    """A tensor read by a view, or reused by an op that writes into it, lives until that op's
    own readers end: extend ``local_end`` of the producers over ``alias_edge`` (edge mask),
    aliases of aliases first (reverse topological order)."""
    src, dst = gc.src, gc.dst
    edges = np.flatnonzero(alias_edge)
    for e in edges[np.argsort(-dst[edges], kind="stable")].tolist():
        u, v = int(src[e]), int(dst[e])
        if local_end[v] > local_end[u]:
            local_end[u] = local_end[v]


def _largest_output_end(gc, size, end, local_end, read_end, alias_edge, local, t_op, t_end):
    """When an op's largest output (``size``) dies: the last end of the local readers of that
    many bytes (an aliasing reader: its own ``local_end``) and of its transfers; and ``small``,
    the most bytes a local reader of its other, smaller outputs reads (live until ``local_end``:
    a batch norm's output dies with its ReLU, its small saved statistics live on)."""
    src, dst = gc.src, gc.dst
    big_end = end.copy()
    small = np.zeros(len(end))
    if gc.m:
        edge_end = np.where(alias_edge, local_end[dst], read_end[dst])
        big = gc.bytes >= size[src] * (1 - 1e-9)
        np.maximum.at(big_end, src[local & big], edge_end[local & big])
        np.maximum.at(small, src[local & ~big], gc.bytes[local & ~big])
    if len(t_op):
        np.maximum.at(big_end, t_op, t_end)
    return big_end, small


def _staircase(dev, start, parts) -> list:
    """Rows ``(dev, t0, t1, bytes, op)`` of buffers that are parts of one op's outputs: each
    part ``(bytes, end)`` lives from the op's start to its end, the op holding the largest of
    the parts still live (they overlap: one buffer while both live)."""
    b = np.stack([p[0] for p in parts], axis=1)
    e = np.stack([np.maximum(p[1], start) for p in parts], axis=1)
    order = np.argsort(-e, axis=1, kind="stable")  # latest end first
    e = np.take_along_axis(e, order, axis=1)
    held = np.maximum.accumulate(np.take_along_axis(b, order, axis=1), axis=1)
    ops = np.arange(len(start))
    rows = []
    k = len(parts)
    for j in range(k - 1, -1, -1):  # [start or the next end, this end): parts ending here on
        t0 = start if j == k - 1 else e[:, j + 1]
        rows.append((dev, t0, e[:, j], held[:, j], ops))
    return rows


def workspace_devices(cluster) -> np.ndarray:
    """Per device: do its kernels keep the ops' ``workspace_bytes``? The workspaces recorded by
    TensorFlow extraction are oneDNN's, the CPU kernels' (a GPU's cuDNN pooling keeps none).

    >>> from workbench.cluster import Cluster, Device
    >>> workspace_devices(Cluster([Device("cpu0", "cpu"), Device("gpu0")])).tolist()
    [True, False]
    """
    return np.asarray(cluster.c.kind_of) == "cpu"


def shared_memory(cluster) -> np.ndarray:
    """``nd x nd`` booleans: does a consumer on device ``j`` read a tensor made on device ``i``
    in place (no copy)? True for two ``cpu`` devices of one host: TensorFlow hands a tensor
    between CPU devices of one process without copying it (measured: docs/results-memory.md).

    >>> from workbench.cluster import Cluster, Device
    >>> shared_memory(Cluster([Device("cpu0", "cpu"), Device("cpu1", "cpu"), Device("gpu0")])).astype(int).tolist()
    [[1, 1, 0], [1, 1, 0], [0, 0, 1]]
    """
    cc = cluster.c
    cpu = np.array([k == "cpu" for k in cc.kind_of], dtype=bool)
    out = (cpu[:, None] & cpu[None, :]) & (cc.host_id[:, None] == cc.host_id[None, :])
    np.fill_diagonal(out, True)
    return out


def live_upper_bound(graph, cluster, device) -> np.ndarray:
    """An upper bound of every device's live peak for any order and timing of a placement
    (``device``: device index per op): its ops' ``memory`` plus every tensor its ops make
    and every tensor it receives (once per producer), as if all were live at once.

    >>> from workbench import samples, Cluster
    >>> g = samples.diamond()
    >>> live_upper_bound(g, Cluster.preset("2xV100-pcie"), [0, 0, 1, 0]).tolist()
    [30000000.0, 20000000.0]
    """
    gc = graph.c
    nd = cluster.c.n
    dev = np.asarray(device, dtype=np.int64)
    size = np.where(view_ops(graph), 0.0, _tensor_bytes(gc))
    ub = np.bincount(dev, weights=gc.memory + size, minlength=nd)
    if gc.m:
        cross = (dev[gc.src] != dev[gc.dst]) & (gc.bytes > 0)
        if cross.any():
            key = gc.src[cross] * nd + dev[gc.dst[cross]]
            keys, inv = np.unique(key, return_inverse=True)
            kb = np.zeros(len(keys))
            np.maximum.at(kb, inv, gc.bytes[cross])
            ub += np.bincount(keys % nd, weights=kb, minlength=nd)
    return ub


def live_intervals(graph, device, start, end, t_op, t_dst, t_start, t_end, *, nd: int,
                   shared=None, ops: bool = False, workspace_on=None):
    """Live-memory intervals of a schedule: ``(resident, dev, t0, t1, nbytes)`` with
    ``resident[d]`` the parameter bytes of device ``d`` for the whole step and one row per
    transient buffer (stash or activation) on device ``dev``, live over ``[t0, t1)``.
    Arguments are a :class:`~workbench.plan.Schedule`'s arrays (``nd`` devices);
    ``shared`` (:func:`shared_memory`) the device pairs that read each other's tensors in
    place; ``ops=True`` adds a sixth array: the op whose tensor each row is;
    ``workspace_on`` (:func:`workspace_devices`) the devices whose kernels keep the ops'
    ``workspace_bytes`` (None: every device)."""
    gc = graph.c
    n = gc.n
    dev = np.asarray(device, dtype=np.int64)
    start, end = np.asarray(start, float), np.asarray(end, float)
    t_op, t_dst = np.asarray(t_op, np.int64), np.asarray(t_dst, np.int64)
    t_start, t_end = np.asarray(t_start, float), np.asarray(t_end, float)
    src, dst = gc.src, gc.dst
    back = np.isin(gc.op_kind, [1, 2])
    # stashes: forward ops (kind 0) read by a backward successor, until its end
    stash_end = np.full(n, -np.inf)
    read_back = np.zeros(n)  # the most a backward reader reads of the op's outputs
    if gc.m:
        sel = (gc.op_kind[src] == 0) & back[dst] & (gc.bytes > 0)
        np.maximum.at(stash_end, src[sel], end[dst[sel]])
        np.maximum.at(read_back, src[sel], gc.bytes[sel])
    size = _tensor_bytes(gc)
    stash = np.isfinite(stash_end) & (gc.memory > 0)
    out_b = _out_bytes(graph)
    out_b = np.where(out_b > 0, out_b, size)
    held = np.where(stash, np.minimum(np.minimum(gc.memory, out_b), read_back), 0.0)
    # what a stashing op's memory holds beyond its outputs is parameters (resident); the part
    # of its outputs no backward op reads is freed with the output tensor
    params = np.where(stash, np.maximum(gc.memory - out_b, 0.0), gc.memory)
    grad = (gc.op_kind == 1) & (gc.memory > 0)  # a gradient: from the op's start to the end
    if grad.any():
        held = np.where(grad, gc.memory, held)
        stash_end = np.where(grad, float(end.max()), stash_end)
        stash = stash | grad
    params = np.where(grad, 0.0, params)
    resident = np.bincount(dev, weights=params, minlength=nd)
    # the output on its producer's device: until local consumers and outgoing transfers end
    local_end = end.copy()
    same = dev[src] == dev[dst]
    data = gc.bytes > 0  # a control edge (0 bytes) keeps no tensor alive
    if shared is not None and gc.m:  # read in place from another device: no copy there
        inplace = np.asarray(shared, dtype=bool)[dev[src], dev[dst]] & ~same & data
    else:
        inplace = np.zeros(gc.m, dtype=bool)
    if gc.m:
        np.maximum.at(local_end, src[same & data], end[dst[same & data]])
    if len(t_op):
        np.maximum.at(local_end, t_op, t_end)
    if inplace.any():  # read in place on another device: the tensor lives until those readers end
        np.maximum.at(local_end, src[inplace], end[dst[inplace]])
    view = view_ops(graph)
    fw = forwarded_inputs(graph)
    fw_src = dev[src[np.maximum(fw, 0)]] if gc.m else dev
    fwd_ok = (fw >= 0) & ((fw_src == dev) | (np.asarray(shared, dtype=bool)[fw_src, dev]
                                             if shared is not None else False))
    alias = view | fwd_ok
    read_end = end  # until when a consumer reads its input: a view, until its own readers end
    alias_edge = np.zeros(gc.m, dtype=bool)
    if alias.any():  # a view (or an op writing into its input) owns nothing; that input lives on
        alias_edge = view[dst] & data & (same | inplace)
        alias_edge[fw[fwd_ok]] = True
        # an op writing into its input and stashing that output keeps the buffer for backward
        local_end = np.where(fwd_ok & stash, np.maximum(local_end, stash_end), local_end)
        held = np.where(alias, 0.0, held)  # a stashed view holds its input, not a copy
        _through_aliases(gc, alias_edge, dev, local_end)
        read_end = np.where(view, local_end, end)
    big_end, small = _largest_output_end(gc, size, end, local_end, read_end, alias_edge,
                                         data & (same | inplace), t_op, t_end)
    size = np.where(alias, 0.0, size)
    small = np.where(alias, 0.0, small)
    rows = _staircase(dev, start, [(size, big_end), (small, local_end),
                                   (held, np.where(stash, stash_end, -np.inf))])
    ws = _workspace_bytes(graph)
    if workspace_on is not None:
        ws = np.where(np.asarray(workspace_on, dtype=bool)[dev], ws, 0.0)
    if ws.any():  # a kernel's workspace lives with its output, or its stash when stashed
        rows.append((dev, start, np.where(stash, np.maximum(stash_end, big_end), big_end), ws,
                     np.arange(n)))
    # copies on consumer devices, one per (producer, device)
    if gc.m:
        cross = ~same & ~inplace & data
        u, b, v = src[cross], dev[dst[cross]], dst[cross]
        if len(u):
            key = u * nd + b
            keys, inv = np.unique(key, return_inverse=True)
            k_end = np.full(len(keys), -np.inf)
            np.maximum.at(k_end, inv, read_end[v])
            k_bytes = np.zeros(len(keys))
            np.maximum.at(k_bytes, inv, gc.bytes[cross])
            k_start = end[keys // nd].astype(float)
            if len(t_op):  # no transfer to the device (a CPU reading host DRAM): the upload's end
                up_end = np.full(n, np.inf)
                up = t_dst < 0
                np.minimum.at(up_end, t_op[up], t_end[up])
                k_start = np.where(np.isfinite(up_end[keys // nd]), up_end[keys // nd], k_start)
                arrive = (t_dst >= 0)
                tkey = t_op[arrive] * nd + t_dst[arrive]
                pos = np.searchsorted(keys, tkey)
                ok = (pos < len(keys)) & (keys[np.minimum(pos, len(keys) - 1)] == tkey)
                first = np.full(len(keys), np.inf)
                np.minimum.at(first, pos[ok], t_start[arrive][ok])
                k_start = np.where(np.isfinite(first), first, k_start)
            rows.append(((keys % nd).astype(np.int64), k_start, k_end, k_bytes, keys // nd))
    d_, t0, t1, nb, op = (np.concatenate(x) for x in zip(*rows))
    keep = (t1 > t0) & (nb > 0)
    out = (resident, d_[keep], t0[keep], t1[keep], nb[keep])
    return out + (op[keep],) if ops else out


def live_peaks(resident, dev, t0, t1, nbytes, nd: int) -> np.ndarray:
    """Peak live bytes per device: its resident bytes plus the highest sum of intervals live at
    one time (frees before allocations at equal times)."""
    peak = np.asarray(resident, dtype=float).copy()
    if len(dev) == 0:
        return peak
    d = np.concatenate([dev, dev])
    t = np.concatenate([t0, t1])
    delta = np.concatenate([nbytes, -nbytes])
    order = np.lexsort((delta, t, d))  # per device, by time, frees (negative) first
    d, delta = d[order], delta[order]
    level = np.cumsum(delta)
    starts = np.flatnonzero(np.r_[True, d[1:] != d[:-1]])
    base = np.repeat(level[starts] - delta[starts], np.diff(np.r_[starts, len(d)]))
    top = np.full(nd, 0.0)
    np.maximum.at(top, d, level - base)
    return peak + top


def memory_timeline(schedule) -> dict:
    """Live memory of every device over the step: device name -> ``(times, bytes)``, a step
    function (``bytes[i]`` from ``times[i]`` until ``times[i + 1]``), for plotting.

    >>> from workbench import samples, Cluster, Plan, simulate
    >>> g = samples.diamond()
    >>> s = simulate(Plan(g, {v: "gpu0" for v in g.ops}), Cluster.preset("2xV100-pcie"))
    >>> t, b = memory_timeline(s)["gpu0"]
    >>> float(b.max()) == s.peak_live_memory["gpu0"]
    True
    """
    res, dev, t0, t1, nb = _schedule_intervals(schedule)
    out = {}
    for i, name in enumerate(schedule.cluster.names):
        sel = dev == i
        t = np.concatenate([t0[sel], t1[sel]])
        delta = np.concatenate([nb[sel], -nb[sel]])
        order = np.lexsort((delta, t))
        t, level = t[order], np.cumsum(delta[order]) + res[i]
        times = np.r_[0.0, t]
        vals = np.r_[res[i], level]
        # one value per instant: the last at each time (frees come first, so it is the
        # instant's highest, as live_peaks counts it)
        last = np.r_[times[1:] != times[:-1], True]
        out[name] = (times[last], vals[last])
    return out


def _schedule_intervals(schedule, ops: bool = False):
    return live_intervals(
        schedule.graph, schedule.device, schedule.start, schedule.end, schedule.t_op,
        schedule.t_dst, schedule.t_start, schedule.t_end, nd=len(schedule.cluster.devices),
        shared=shared_memory(schedule.cluster), ops=ops,
        workspace_on=workspace_devices(schedule.cluster))


def peak_moment(schedule, device: str, *, top: int = 5) -> dict:
    """The moment of a device's live-memory peak and what is live then: ``time_ms``,
    ``bytes`` (the peak), ``resident`` (parameters, all step), ``transient`` and ``tensors``,
    the ``top`` largest live buffers as ``(op, bytes)`` (the op whose output or stash it is).

    >>> from workbench import samples, Cluster, Plan, simulate
    >>> from workbench.graph import OpGraph
    >>> g = OpGraph.from_ops([("a", {"compute": {"gpu": 1.0}, "memory": 10.0}),
    ...                       ("b", {"compute": {"gpu": 2.0}}), ("c", {"compute": {"gpu": 1.0}})],
    ...                      [("a", "b", {"bytes": 100.0}), ("b", "c", {"bytes": 40.0})])
    >>> m = peak_moment(simulate(Plan(g, {v: "gpu0" for v in g.ops}),
    ...                          Cluster.preset("2xV100-pcie")), "gpu0")
    >>> m["time_ms"], m["bytes"], m["tensors"]
    (1.0, 150.0, [('a', 100.0), ('b', 40.0)])
    """
    names = list(schedule.cluster.names)
    if device not in names:
        from ..errors import PlanError

        raise PlanError(f"unknown device {device!r}; the cluster has {', '.join(names)}")
    i = names.index(device)
    res, dev, t0, t1, nb, op = _schedule_intervals(schedule, ops=True)
    sel = dev == i
    t0, t1, nb, op = t0[sel], t1[sel], nb[sel], op[sel]
    out = {"time_ms": 0.0, "bytes": float(res[i]), "resident": float(res[i]),
           "transient": 0.0, "tensors": []}
    if not len(t0):
        return out
    t = np.concatenate([t0, t1])
    delta = np.concatenate([nb, -nb])
    order = np.lexsort((delta, t))
    level = np.cumsum(delta[order])
    k = int(np.argmax(level))
    when = float(t[order][k])
    live = (t0 <= when) & (t1 > when)
    idx = np.flatnonzero(live)[np.argsort(-nb[live], kind="stable")][:top]
    gnames = schedule.graph.c.names
    out.update(time_ms=when, bytes=float(res[i] + level[k]), transient=float(level[k]),
               tensors=[(gnames[int(op[j])], float(nb[j])) for j in idx])
    return out
