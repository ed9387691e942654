"""Split dimensions of real ops, derived from op type and shapes (FastT Section 5.2).

FastT splits an op "on the batch size dimension for fine-grained data parallelism within the
operation, and also on the channel dimension to achieve fine-grained model parallelism"; its
data-parallel starting graph cuts the batch of every op. Graphs extracted from TensorFlow
(:mod:`workbench.runtime.extraction`), read from ONNX (:mod:`workbench.io.onnx`) or captured from
PyTorch carry each op's type and output shapes but no ``splits``; :func:`with_split_dims` derives
them in one place for all three:

* **batch** -- where the sample dimension flows. It enters at the data inputs (TensorFlow: reads
  of the non-trained ``data/`` variables; ONNX: ops without predecessors whose first output
  starts with a multiple of the batch) and follows data edges. An edge carries the batch when its
  producer's first output does (``batch_out``) and the edge moves at least one byte per element
  of that output (so the per-channel mean/variance outputs of a batch norm do not). An op that
  reads a batch-carrying tensor gets ``splits["batch"] = batch`` (its share of the samples can
  run anywhere); its first output carries the batch when its leading dimension is the leading
  dimension of such an input (conv, matmul rows, element-wise, norm, pooling, reductions that
  keep it), or, for reshapes and other data-movement ops, a multiple of the batch. Weight
  gradients (``Conv2DBackpropFilter``, ``x^T dy`` matmuls, ``BiasAddGrad``) read the batch but
  sum it away: split along batch, their parts are added up.
* **channels** -- the output channels of a convolution and of its two gradients (TensorFlow
  NHWC: last dimension; ONNX NCHW: dimension 1).
* **out** -- the output (column) dimension of a matmul: each part holds a slice of the weights.

Edges get ``batch`` (bool) and ops ``batch_out`` (bool), which :func:`~workbench.transforms.
split.split_op` and :func:`~workbench.transforms.split.data_parallel_graph` use: along the
batch, batch-carrying inputs are partitioned, other inputs (weights) are broadcast to every
part, batch-carrying outputs are concatenated and the others (weight gradients) summed.

Examples
--------
>>> from workbench import OpGraph
>>> ops = [("data/x", {"compute": {"gpu": 0}, "op_type": "ReadVariableOp", "kind": "other",
...                    "shapes": [[8, 32, 32, 3]]}),
...        ("w", {"compute": {"gpu": 0}, "op_type": "ReadVariableOp", "kind": "other",
...               "shapes": [[3, 3, 3, 16]], "colocate": "var:w"}),
...        ("conv", {"compute": {"gpu": 1.0}, "op_type": "Conv2D", "shapes": [[8, 32, 32, 16]]}),
...        ("upd", {"compute": {"gpu": 0.1}, "op_type": "ResourceApplyGradientDescent",
...                 "kind": "update", "colocate": "var:w"})]
>>> g = OpGraph.from_ops(ops, [("data/x", "conv", {"bytes": 98304}),
...                            ("w", "conv", {"bytes": 1728}), ("conv", "upd", {"bytes": 0})],
...                      meta={"batch": 8})
>>> h = with_split_dims(g)
>>> h.op("conv")["splits"], h.op("conv")["batch_out"]
({'batch': 8, 'channels': 16}, True)
>>> h.edge("data/x", "conv")["batch"], h.edge("w", "conv")["batch"]
(True, False)
"""

from __future__ import annotations

from ..costs.roofline import op_family
from ..errors import GraphError
from ..graph import OpGraph

__all__ = ["BATCH_REDUCING", "derive_split_dims", "has_split_dims", "with_batch", "with_split_dims"]

BATCH_REDUCING = frozenset({"Conv2DBackpropFilter", "DepthwiseConv2dNativeBackpropFilter",
                            "BiasAddGrad", "L2Loss"})
"""Op types that read the batch and sum it away (weight gradients)."""

_VARIABLES = frozenset({"VarHandleOp", "VariableV2", "Variable"})
_NEVER_SOURCE = frozenset({"Const", "Constant", "Shape", "ShapeN", "Size", "Rank", "NoOp"})
_CONV = frozenset({"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "Conv",
                   "ConvTranspose", "DepthwiseConv2dNative", "aten::convolution"})
_MATMUL = frozenset({"MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Gemm",
                     "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"})


def _first_shape(a: dict, strict: bool = False):
    """The first known output shape (``strict``: output 0's, None when it is not a tensor)."""
    for s in a.get("shapes") or []:
        if s is not None or strict:
            return None if s is None else list(s)
    return None


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= max(int(d), 0)
    return n


def has_split_dims(graph: OpGraph) -> bool:
    """True when some op of ``graph`` already names a split dimension.

    >>> from workbench import samples
    >>> has_split_dims(samples.cnn(20)), has_split_dims(samples.diamond())
    (True, False)
    """
    return any(graph.op_values("splits"))


def _model_dim(op_type: str, shape, nchw: bool) -> tuple[str, int] | None:
    """The model-parallel split dimension of an op (channels of a conv, columns of a matmul)."""
    if not shape:
        return None
    if op_type in _CONV and len(shape) == 4:
        return "channels", int(shape[1] if nchw else shape[-1])
    if op_type in _MATMUL and len(shape) >= 2:
        return "out", int(shape[-1])
    return None


def _is_source(v: str, a: dict, graph: OpGraph, batch: int, trained: set) -> bool:
    """A data input: a read of a variable that is never updated, or (ONNX) an op without
    predecessors whose first output starts with a multiple of the batch."""
    shape = _first_shape(a)
    if not shape or shape[0] <= 0 or shape[0] % batch:
        return False
    t = a.get("op_type") or ""
    if t in _VARIABLES or t in _NEVER_SOURCE:
        return False
    if t == "ReadVariableOp" or a.get("kind") == "other":
        return a.get("colocate") not in trained
    return not graph.predecessors(v) and a.get("kind", "fwd") == "fwd"


def _spreads_loss(v: str, a: dict, graph: OpGraph, batch: int) -> bool:
    """A PyTorch backward op that spreads a scalar (the loss's gradient) over the samples: its
    output has the batch leading and every input it reads holds at most one element."""
    if a.get("kind") != "bwd" or batch < 2:
        return False
    nodes = graph.nx.nodes
    ins = [_first_shape(nodes[u], strict=True) for u in graph.nx.predecessors(v)]
    return all(s is not None and _numel(s) <= 1 for s in ins)


def derive_split_dims(graph: OpGraph, batch: int | None = None, *, nchw: bool | None = None):
    """Per-op ``(splits, batch_out)`` and per-edge ``batch`` flags of ``graph`` (see the module
    docstring); ``batch`` defaults to ``graph.meta["batch"]``, ``nchw`` to ONNX graphs.

    Returns
    -------
    (dict, dict, dict)
        op -> splits, op -> batch_out, (u, v) -> edge carries the batch.

    Raises
    ------
    GraphError
        When the batch is neither given nor in ``graph.meta["batch"]``, or not a positive int.
    """
    if batch is None:
        batch = (graph.meta or {}).get("batch")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise GraphError(f"split dimensions of graph {graph.name!r}: batch must be a positive "
                         f"integer (give batch= or meta['batch']), got {batch!r}")
    source = (graph.meta or {}).get("source")
    if nchw is None:
        nchw = source in ("onnx", "torch")
    aten = source == "torch"
    nodes = graph.nx.nodes
    trained = {nodes[v].get("colocate") for v in graph.ops
               if nodes[v].get("kind") == "update" and nodes[v].get("colocate") is not None}
    splits: dict = {}
    bout: dict = {}
    ebatch: dict = {}
    for v in graph.ops:              # topological order: producers first
        a = nodes[v]
        t = a.get("op_type") or ""
        shape = _first_shape(a, strict=aten)
        lead_in: set = set()
        second_in: set = set()
        for u in graph.nx.predecessors(v):
            su = _first_shape(nodes[u], strict=aten)
            e = graph.nx.edges[u, v]
            carries = bool(bout.get(u)) and su is not None and \
                e.get("bytes", 0.0) >= _numel(su) > 0
            ebatch[(u, v)] = carries
            if carries:
                lead_in.add(int(su[0]))
                second_in.add(int(su[1]) if len(su) > 1 else None)
        sp: dict = {}
        if lead_in:
            sp["batch"] = batch
            lead = shape[0] if shape else None
            fam = op_family(t)
            if t in BATCH_REDUCING or a.get("weight_grad") or lead is None:
                out = False
            elif lead in lead_in:
                # with one sample a keep-dims sum over the batch keeps a leading 1 too: such
                # a reduction keeps the batch only if it keeps the next dimension as well (a
                # sum over a batch of one is undecidable from shapes: counted as keeping it)
                out = not (batch == 1 and fam == "reduce" and lead == 1
                           and (len(shape) < 2 or int(shape[1]) not in second_in))
            elif aten:
                # views are folded into their readers, so the batch may sit in any dimension
                # of what they write: rows of a [B*S, H] matmul, a [B*heads, S, S] bmm, the
                # [S, B, H] of a batch_first=False attention (weight gradients marked apart)
                out = batch > 1 and any(int(d) > 0 and int(d) % batch == 0 for d in shape)
            else:
                out = fam in ("view", "move") and lead > 0 and lead % batch == 0
        elif aten:
            out = bool(shape) and shape[0] > 0 and shape[0] % batch == 0 and (
                bool(a.get("data_input")) or _spreads_loss(v, a, graph, batch))
            if out:
                sp["batch"] = batch
        else:
            out = _is_source(v, a, graph, batch, trained)
            if out:
                sp["batch"] = batch
        md = _model_dim(t, shape, nchw)
        if md is not None and md[1] >= 2:
            sp[md[0]] = md[1]
        splits[v], bout[v] = sp, out
    # a data variable holds the batch: its handle splits with its reads
    groups = graph.colocation_groups
    for v in graph.ops:
        a = nodes[v]
        if (a.get("op_type") or "") in _VARIABLES and a.get("colocate") not in trained:
            members = groups.get(a.get("colocate"), [])
            if any(bout.get(m) for m in members):
                splits[v], bout[v] = {"batch": batch}, True
    return splits, bout, ebatch


def with_split_dims(graph: OpGraph, batch: int | None = None, *,
                    nchw: bool | None = None) -> OpGraph:
    """``graph`` with ``splits`` and ``batch_out`` on every op and ``batch`` on every edge,
    derived from op types and shapes (:func:`derive_split_dims`); ``meta["split_dims"]``
    records the batch. Existing ``splits`` are replaced.

    >>> from workbench import samples
    >>> g = samples.load_sample("resnet_small")
    >>> h = with_split_dims(g)
    >>> sum("batch" in h.op(v)["splits"] for v in h.ops) > 0.5 * h.n_ops
    True
    """
    splits, bout, ebatch = derive_split_dims(graph, batch, nchw=nchw)
    G = graph.to_networkx()
    for v in G.nodes:
        G.nodes[v]["splits"] = splits[v]
        G.nodes[v]["batch_out"] = bout[v]
    for u, v in G.edges:
        G.edges[u, v]["batch"] = ebatch[(u, v)]
    b = batch if batch is not None else graph.meta.get("batch")
    return OpGraph(G, name=graph.name, meta={**graph.meta, "split_dims": {"batch": b}})


def _device_models(graph: OpGraph) -> dict:
    """Device kind -> (device model name, precision) of the roofline costs a graph records."""
    out = {}
    for kind, how in ((graph.meta or {}).get("device_costs") or {}).items():
        parts = str(how).split(":")
        if len(parts) == 3 and parts[0] == "roofline":
            out[kind] = (parts[1], parts[2])
    return out


def with_batch(graph: OpGraph, batch: int) -> OpGraph:
    """The same model at another batch, for strong-scaling studies on graphs extracted at a
    small one (the bundled samples hold 1-2 samples per step; FastT's Table 1 uses 16-64).

    Every op with a ``batch`` split dimension scales its per-sample work by ``f = batch /
    old batch``: FLOPs times ``f``; bytes moved times ``f`` except its batch-free part (weights
    read, weight gradients written); a batch-carrying output (``batch_out``) scales its bytes,
    its stashed memory and the leading dimension of its shape; batch-carrying edges scale their
    bytes. Compute times: kinds costed by the roofline (``meta["device_costs"]``, e.g. the V100
    costs of the samples) are re-costed from the new work (so the kernel launch cost is not
    scaled), other kinds (profiled CPU times) are scaled by ``f``. Ops without the batch
    (variables, updates, constants) are unchanged. Split dimensions are derived first when the
    graph has none.

    Raises
    ------
    GraphError
        ``batch`` not a positive integer, or a graph without a batch dimension.

    Examples
    --------
    >>> from workbench import samples
    >>> g = samples.load_sample("mlp")
    >>> h = with_batch(g, 128)
    >>> h.meta["batch"], h.op("fc0/MatMul")["flops"] == 2 * g.op("fc0/MatMul")["flops"]
    (128, True)
    >>> h.op("fc0/MatMul")["splits"]["batch"], h.op("fc0/w")["memory"] == g.op("fc0/w")["memory"]
    (128, True)
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise GraphError(f"with_batch: batch must be a positive integer, got {batch!r}")
    if not has_split_dims(graph):
        graph = with_split_dims(graph)
    nodes = graph.nx.nodes
    old = max((nodes[v]["splits"].get("batch", 0) for v in graph.ops), default=0)
    if old < 1:
        raise GraphError(f"with_batch: graph {graph.name!r} has no batch dimension")
    f = batch / old
    G = graph.to_networkx()
    for v in graph.ops:
        a = G.nodes[v]
        if "batch" not in a["splits"]:
            continue
        out = bool(a.get("batch_out"))
        a["splits"] = {**a["splits"], "batch": batch}
        a["compute"] = {k: t * f for k, t in a["compute"].items()}
        if a.get("flops") is not None:
            a["flops"] = float(a["flops"]) * f
        if a.get("bytes_moved") is not None:
            fixed = sum(e.get("bytes", 0.0) for _, _, e in graph.nx.in_edges(v, data=True)
                        if not e.get("batch", False))
            if not out:
                fixed += float(a.get("out_bytes") or 0.0)
            fixed = min(fixed, float(a["bytes_moved"]))
            a["bytes_moved"] = fixed + (float(a["bytes_moved"]) - fixed) * f
        if out:
            a["memory"] = a["memory"] * f
            if a.get("out_bytes") is not None:
                a["out_bytes"] = float(a["out_bytes"]) * f
            shapes = [list(s) if s is not None else None for s in a.get("shapes") or []]
            if shapes and shapes[0]:
                shapes[0][0] = round(shapes[0][0] * f)
                a["shapes"] = shapes
    for u, v, e in G.edges(data=True):
        if e.get("batch", False):
            e["bytes"] = e.get("bytes", 0.0) * f
    meta = {**graph.meta, "batch": batch, "split_dims": {"batch": batch},
            "rebatched_from": old}
    if isinstance(meta.get("program"), dict):
        meta["program"] = {**meta["program"], "batch": batch}
    h = OpGraph(G, name=f"{graph.name}-b{batch}", meta=meta)
    models = _device_models(graph)
    if models and all(h.nx.nodes[v].get("flops") is not None for v in h.ops):
        from ..costs.roofline import with_device_costs

        for kind, (model, precision) in models.items():
            h = with_device_costs(h, model, kind=kind, precision=precision)
    return h
