"""Operation splitting (FastT, Algorithm 2, ``SplitOperation``) and FastT's data-parallel
starting graph.

:func:`split_op` replaces an op by ``n`` sub-ops along one of its splittable dimensions (its
``splits`` attribute), with a split node per predecessor and a concatenate node per successor:

* sub-op ``k`` gets the share ``size_k / size`` of the dimension (sizes as even as possible);
  its compute time is the op's times that share (linear: FastT's sub-op costs are measured,
  ours are scaled); its memory too, except along ``batch`` on graphs without derived split
  dimensions, where an op's memory is its weights and every sub-op holds them (on extracted
  graphs, :mod:`~workbench.transforms.split_dims`, an op's memory is its stashed output, which
  is partitioned when the output carries the batch);
* inputs: along ``batch`` a tensor that carries the batch (edge attribute ``batch``, True when
  absent) is cut, each sub-op receiving its share of the bytes, while a tensor without it (a
  weight) is **broadcast** whole to every sub-op; along a model dimension (channels, out) each
  sub-op needs the whole batch-carrying input (broadcast) and its slice of the weights;
* outputs: partitioned (sub-op ``k`` sends its share to the concatenate node feeding each
  successor), except along ``batch`` for an output that does not carry the batch (op attribute
  ``batch_out`` False: a weight gradient), where every sub-op sends a whole partial gradient to
  a **sum** node (``AddN``) -- so a batch split of an op with weights pays the weight
  broadcast and the gradient sum, FastT's reason not to split Fc6 (its Table 5);
* split and concatenate nodes copy their tensor once: ``_COPY_LATENCY_MS + bytes / _COPY_BW``
  (times the op's own slowdown on each device kind); a sum node reads its ``n`` inputs.

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
    bout = a.get("batch_out", "batch" in splits)
    derived = "batch_out" in a
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
        keep_mem = batch and not (derived and bout)
        attrs.update(compute={kd: t * sh for kd, t in a["compute"].items()},
                     memory=a["memory"] if keep_mem else a["memory"] * sh,
                     splits={**splits, dim: sz}, colocate=None)
        G.add_node(name, **attrs)
        subs.append(name)
    extra = {"kind": a["kind"], "colocate": None, "memory": 0.0, "splits": {}}

    def part(e: dict, share: float) -> dict:
        out = {"bytes": e["bytes"] * share, "batch": e.get("batch", True)}
        if e.get("comm") is not None:
            out["comm"] = e["comm"] * share
        return out

    for u, e in preds:
        sp = _fresh(G, f"{op}/split_in:{u}")
        G.add_node(sp, compute=_copy_cost(a["compute"], e["bytes"]), op_type="Split", **extra)
        G.add_edge(u, sp, **e)
        cut = e.get("batch", True) == batch      # batch input along batch, weight along model
        for name, sh in zip(subs, shares):
            G.add_edge(sp, name, **part(e, sh if cut else 1.0))
    for v, e in succs:
        total = batch and not bout               # partial weight gradients: summed
        cn = _fresh(G, f"{op}/{'sum' if total else 'concat'}:{v}")
        G.add_node(cn, compute=_copy_cost(a["compute"], e["bytes"] * (n if total else 1)),
                   op_type="AddN" if total else "ConcatV2", **extra)
        for name, sh in zip(subs, shares):
            G.add_edge(name, cn, **part(e, 1.0 if total else sh))
        G.add_edge(cn, v, **e)
    meta = dict(graph.meta)
    meta["splits"] = list(meta.get("splits", [])) + [(op, dim, n)]
    return OpGraph(G, name=graph.name, meta=meta)


def data_parallel_graph(graph: OpGraph, replicas: int, **kwargs) -> OpGraph:
    """FastT's data-parallel starting graph; see
    :func:`workbench.transforms.data_parallel.data_parallel_graph` (kept here for callers of
    the split module)."""
    from .data_parallel import data_parallel_graph as dp

    return dp(graph, replicas, **kwargs)
