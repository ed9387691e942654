"""Operation splitting (FastT, Algorithm 2, ``SplitOperation``) and FastT's data-parallel
starting graph.

:func:`split_op` replaces an op by ``n`` sub-ops along one of its splittable dimensions (its
``splits`` attribute), with a split node per predecessor and a concatenate node per successor:

* sub-op ``k`` gets the share ``size_k / size`` of the dimension (sizes as even as possible);
  its compute time is the op's times that share; its memory too, except along ``batch``, where
  every sub-op holds the op's weights (data parallelism replicates them);
* a split node cuts the input tensor along ``batch`` (each sub-op receives its share of the
  bytes); along a model dimension (channels, heads, hidden, ...) each sub-op needs the whole
  input, so the split node broadcasts it;
* outputs are always partitioned: sub-op ``k`` sends its share of each output to the
  concatenate node feeding that successor;
* split and concatenate nodes copy their tensor once: ``_COPY_LATENCY_MS + bytes / _COPY_BW``
  (times the op's own slowdown on each device kind).

Sub-ops keep the op's other split dimensions (they can be split again) and leave its
colocation group (a group would pin them to one device and defeat the split).

Examples
--------
>>> from workbench import samples
>>> from workbench.transforms.split import split_op
>>> g = samples.two_branch().map_ops(lambda v, a: {**a, "splits": {"batch": 32}})
>>> h = split_op(g, "conv3a", "batch", 2)
>>> [v for v in h.ops if v.startswith("conv3a")]
['conv3a/split_in:input', 'conv3a/split0', 'conv3a/split1', 'conv3a/concat:conv3b']
>>> h.op("conv3a/split0")["compute"]["gpu"], h.op("conv3a/split0")["splits"]
(1.0, {'batch': 16})
>>> h.meta["splits"]
[('conv3a', 'batch', 2)]
"""

from __future__ import annotations

import networkx as nx

from ..errors import GraphError
from ..graph import OpGraph

__all__ = ["BATCH_DIMS", "data_parallel_graph", "split_op", "split_sizes"]

BATCH_DIMS = ("batch",)
"""Dimensions along which a split is data parallel (weights replicated, inputs partitioned)."""

_COPY_BW = 2e8          # bytes per ms (200 GB/s device-memory copy)
_COPY_LATENCY_MS = 0.002


def split_sizes(size: int, n: int) -> list[int]:
    """``n`` sizes as even as possible that add up to ``size``.

    >>> split_sizes(10, 3)
    [4, 3, 3]
    """
    return [size // n + (1 if k < size % n else 0) for k in range(n)]


def _copy_cost(compute: dict, nbytes: float) -> dict:
    base = _COPY_LATENCY_MS + nbytes / _COPY_BW
    fastest = min(compute.values())
    if fastest <= 0:
        return {k: base for k in compute}
    return {k: base * (t / fastest) for k, t in compute.items()}


def _fresh(G: nx.DiGraph, name: str) -> str:
    out, k = name, 1
    while out in G:
        k += 1
        out = f"{name}#{k}"
    return out


def split_op(graph: OpGraph, op: str, dim: str, n: int) -> OpGraph:
    """A new graph where ``op`` is split into ``n`` sub-ops along dimension ``dim``.

    Parameters
    ----------
    graph : OpGraph
    op : str
        The op to split.
    dim : str
        One of the op's ``splits`` dimensions.
    n : int
        Number of sub-ops, ``2 <= n <=`` the dimension's size.

    Returns
    -------
    OpGraph
        With sub-ops ``{op}/split{k}``, split nodes ``{op}/split_in:{pred}`` and concatenate
        nodes ``{op}/concat:{succ}``; ``meta["splits"]`` lists every ``(op, dim, n)`` applied so
        far.

    Raises
    ------
    GraphError
        Unknown op, a dimension the op cannot be split along, or ``n`` out of range.

    Examples
    --------
    >>> from workbench import samples
    >>> g = samples.cnn(20)
    >>> split_op(g, "stem", "height", 2)
    Traceback (most recent call last):
    ...
    workbench.errors.GraphError: op 'stem' cannot be split along 'height'; its splittable dimensions: batch (32), channels (64)
    >>> split_op(g, "stem", "batch", 33)
    Traceback (most recent call last):
    ...
    workbench.errors.GraphError: op 'stem': cannot split dimension 'batch' of size 32 into 33 parts (need 2 <= n <= 32)
    """
    if op not in graph:
        raise GraphError(f"op {op!r} is not in graph {graph.name!r}")
    a = graph.op(op)
    splits = a.get("splits") or {}
    if dim not in splits:
        dims = ", ".join(f"{d} ({s})" for d, s in splits.items()) or "none"
        raise GraphError(f"op {op!r} cannot be split along {dim!r}; its splittable dimensions: "
                         f"{dims}")
    size = splits[dim]
    if isinstance(n, bool) or not isinstance(n, int) or not (2 <= n <= size):
        raise GraphError(f"op {op!r}: cannot split dimension {dim!r} of size {size} into {n!r} "
                         f"parts (need 2 <= n <= {size})")
    batch = dim in BATCH_DIMS
    G = graph.to_networkx()
    preds = [(u, dict(G.edges[u, op])) for u in graph.predecessors(op)]
    succs = [(v, dict(G.edges[op, v])) for v in graph.successors(op)]
    G.remove_node(op)
    sizes = split_sizes(size, n)
    shares = [s / size for s in sizes]
    subs = []
    for k, (sz, sh) in enumerate(zip(sizes, shares)):
        name = _fresh(G, f"{op}/split{k}")
        attrs = dict(a)
        attrs.update(compute={kd: t * sh for kd, t in a["compute"].items()},
                     memory=a["memory"] if batch else a["memory"] * sh,
                     splits={**splits, dim: sz}, colocate=None)
        G.add_node(name, **attrs)
        subs.append(name)
    extra = {"kind": a["kind"], "colocate": None, "memory": 0.0, "splits": {}}

    def part(e: dict, share: float) -> dict:
        out = {"bytes": e["bytes"] * share}
        if e.get("comm") is not None:
            out["comm"] = e["comm"] * share
        return out

    for u, e in preds:
        sp = _fresh(G, f"{op}/split_in:{u}")
        G.add_node(sp, compute=_copy_cost(a["compute"], e["bytes"]), op_type="Split", **extra)
        G.add_edge(u, sp, **e)
        for name, sh in zip(subs, shares):
            G.add_edge(sp, name, **part(e, sh if batch else 1.0))
    for v, e in succs:
        cn = _fresh(G, f"{op}/concat:{v}")
        G.add_node(cn, compute=_copy_cost(a["compute"], e["bytes"]), op_type="ConcatV2",
                   **extra)
        for name, sh in zip(subs, shares):
            G.add_edge(name, cn, **part(e, sh))
        G.add_edge(cn, v, **e)
    meta = dict(graph.meta)
    meta["splits"] = list(meta.get("splits", [])) + [(op, dim, n)]
    return OpGraph(G, name=graph.name, meta=meta)


def data_parallel_graph(graph: OpGraph, replicas: int) -> OpGraph:
    """FastT's data-parallel starting graph: ``replicas`` copies of the model, each on
    ``1 / replicas`` of the batch, plus gradient aggregation.

    Replica ``r`` of op ``v`` is ``v@r``. Ops with a ``batch`` dimension get that share of the
    batch (compute and output tensors scaled by it); other ops are replicated whole. Weights
    (op memory) are replicated. For a training graph, the gradient of every weight-holding
    forward op ``v`` (its backward ops in ``v``'s colocation group, else its backward
    successors) is summed by an ``AllReduce`` op ``allreduce:v`` that receives each replica's
    gradient (``memory(v)`` bytes) and, when update ops consume the gradient, sends the sum to
    every replica's update op instead. A colocation group stays within its replica.

    >>> from workbench import samples
    >>> g = samples.to_training(samples.cnn(12), update=True)
    >>> h = data_parallel_graph(g, 2)
    >>> h.n_ops - 2 * g.n_ops == len([v for v in h.ops if v.startswith("allreduce:")])
    True
    >>> h.meta["data_parallel"]
    2
    """
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise GraphError(f"replicas must be a positive integer, got {replicas!r}")
    R = replicas
    G = nx.DiGraph()
    src = graph.nx
    scale = {}
    for v in graph.ops:
        a = dict(src.nodes[v])
        sp = a.get("splits") or {}
        b = next((d for d in BATCH_DIMS if d in sp), None)
        share = 1.0
        new_sp = dict(sp)
        if b is not None:
            share = 1.0 / R
            new_sp[b] = max(1, sp[b] // R)
        scale[v] = share
        for r in range(R):
            grp = a.get("colocate")
            attrs = {**a, "compute": {k: t * share for k, t in a["compute"].items()},
                     "splits": new_sp, "colocate": None if grp is None else f"{grp}@{r}"}
            G.add_node(f"{v}@{r}", **attrs)
    for u, v, e in src.edges(data=True):
        e2 = dict(e)
        e2["bytes"] = e.get("bytes", 0.0) * scale[u]
        for r in range(R):
            G.add_edge(f"{u}@{r}", f"{v}@{r}", **e2)
    if R > 1 and graph.is_training():
        groups = graph.colocation_groups
        for v in graph.ops:
            a = src.nodes[v]
            if a["kind"] != "fwd" or a["memory"] <= 0:
                continue
            grp = a.get("colocate")
            grads = [x for x in (groups.get(grp, []) if grp is not None else [])
                     if src.nodes[x]["kind"] == "bwd"]
            if not grads:
                grads = [x for x in graph.successors(v) if src.nodes[x]["kind"] == "bwd"]
            if not grads:
                continue
            updates = [x for gname in grads for x in graph.successors(gname)
                       if src.nodes[x]["kind"] == "update"]
            nbytes = float(a["memory"])
            ar = f"allreduce:{v}"
            t = _COPY_LATENCY_MS + R * nbytes / _COPY_BW
            G.add_node(ar, compute={k: t for k in a["compute"]}, memory=0.0, kind="bwd",
                       op_type="AllReduce", splits={})
            for r in range(R):
                for gname in grads:
                    G.add_edge(f"{gname}@{r}", ar, bytes=nbytes)
                for x in updates:
                    for gname in grads:
                        if G.has_edge(f"{gname}@{r}", f"{x}@{r}"):
                            G.remove_edge(f"{gname}@{r}", f"{x}@{r}")
                    G.add_edge(ar, f"{x}@{r}", bytes=nbytes)
    meta = {**graph.meta, "data_parallel": R}
    return OpGraph(G, name=f"{graph.name}-dp{R}", meta=meta)
