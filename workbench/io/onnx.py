"""ONNX models in: how a PyTorch (``torch.onnx.export``) or other user brings a model.

:func:`read_onnx` turns an ONNX model into an :class:`~workbench.graph.OpGraph` of its forward
pass:

* ops: one per ONNX node (named by the node's name, else ``<op_type>_<index>``), ``op_type``
  the ONNX operator, kind ``fwd``;
* shapes: the symbolic dimensions of the graph inputs are bound first -- dimension 0 to
  ``batch``, any other to ``seq``, or each by its name from ``dims`` (a dimension fixed at export
  keeps its value; a ``batch``/``seq`` that contradicts it is an error) -- then ONNX shape
  inference with data propagation (``onnx.shape_inference.infer_shapes(data_prop=True)``) and
  a fold of the shape computations: every node whose inputs are all known constants (initialisers,
  ``Constant``, ``Shape``/``Size`` of a tensor of known shape) is evaluated with ONNX's reference
  implementation and becomes a constant, and inference runs again until nothing changes. This
  resolves the ``Shape -> Gather -> Concat -> Reshape`` chains of attention that inference alone
  leaves symbolic. Folded nodes compute constants, not tensors of the step: they are left out
  of the graph (``meta["folded_ops"]`` counts them). A node whose output shape stays unknown is an
  error naming it;
* ``flops`` and ``bytes_moved`` per op from :func:`workbench.costs.roofline.op_work`, with the ONNX op
  types the roofline families do not list mapped to their family (:data:`ONNX_FAMILIES`) and own
  formulas for the ops that are more than one family (:func:`onnx_op_flops`): the recurrent ops
  (``LSTM``, ``GRU``, ``RNN``: matrix products of every step), ``Einsum`` and the attention ops.
  An op type without a formula is an error naming it, or -- ``unknown="elementwise"`` -- costed
  as element-wise and listed in ``meta["cost_fallback_types"]``;
* ``memory``: initialisers (weights) are parameter memory on the ops that read them (an
  initialiser read by several ops is charged to the first one), plus the op's output bytes
  when ``training`` (activations kept for the backward pass);
* ``compute``: roofline times on ``device`` (default V100) for kind ``gpu`` and on the fitted
  ``cpu-local`` model for kind ``cpu``;
* edges: one per producer/consumer pair, ``bytes`` the size of the tensors passed.

Weights are never read: :func:`read_onnx` loads the model without its external-data files
(``torch.onnx.export(dynamo=True)`` writes ``model.onnx.data`` beside the model) and reads
from them only the small tensors that shape computations need; a missing data file is an error
naming it. Opsets 13 to 21 (what ``torch.onnx.export`` writes) are tested.

``training=True`` derives the training step with :func:`workbench.samples.to_training`
(backward ops mirrored, memory kept on the forward ops): an ONNX file holds no backward graph.
:func:`workbench.io.torch.from_torch` captures autograd's own one from a PyTorch model.

``onnx`` is an optional dependency (``pip install placement-workbench[onnx]``).

Examples
--------
>>> from onnx import TensorProto, helper, numpy_helper
>>> import numpy as np
>>> w = numpy_helper.from_array(np.zeros((16, 8), np.float32), "w")
>>> g = helper.make_graph(
...     [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
...      helper.make_node("Relu", ["h"], ["y"], name="relu")], "tiny",
...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])], [w])
>>> og = onnx_to_opgraph(helper.make_model(g), batch=4)
>>> og.ops, og.op("mm")["flops"], og.op("mm")["memory"], og.edge("mm", "relu")["bytes"]
(['mm', 'relu'], 1024.0, 512.0, 128.0)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from numbers import Integral
from pathlib import Path

from ..errors import FormatError, GraphError
from ..graph import OpGraph

__all__ = ["MAX_DIM", "MAX_ELEMENTS", "ONNX_FAMILIES", "bind_input_dims", "check_tensor_bounds", "infer_onnx_shapes", "onnx_op_flops",
           "onnx_to_opgraph", "read_onnx"]

_DTYPE_SIZE = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8,
               16: 2}  # ONNX TensorProto element types -> bytes

ONNX_FAMILIES: dict[str, frozenset] = {
    "elementwise": frozenset({
        "HardSwish", "Mish", "IsNaN", "IsInf", "GreaterOrEqual", "LessOrEqual", "Celu",
        "ThresholdedRelu", "Softsign", "Shrink", "Xor", "BitShift", "Atan", "Asin", "Acos",
        "Tan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Trilu", "BitwiseAnd", "BitwiseOr",
        "BitwiseXor", "BitwiseNot", "FastGelu", "BiasGelu", "QuickGelu", "Bernoulli",
        "RandomNormal", "RandomNormalLike", "RandomUniformLike"}),
    "move": frozenset({
        "ScatterElements", "ScatterND", "GatherND", "Compress", "NonZero", "CastLike",
        "ReverseSequence", "EyeLike", "SplitToSequence", "ConcatFromSequence", "Scatter",
        "RotaryEmbedding"}),
    "reduce": frozenset({
        "CumSum", "TopK", "ReduceLogSumExp", "ReduceSumSquare", "ReduceL1", "ReduceLogSum",
        "LpPool", "GlobalLpPool", "LpNormalization", "ArgMax", "ArgMin"}),
    "norm": frozenset({
        "GroupNormalization", "SkipLayerNormalization", "SimplifiedLayerNormalization",
        "SkipSimplifiedLayerNormalization", "RMSNormalization", "MeanVarianceNormalization"}),
    "view": frozenset({"Optional", "OptionalGetElement", "OptionalHasElement"}),
}
"""ONNX op types beyond :data:`workbench.costs.roofline.FAMILIES`, by cost family (element-wise ops
cost one FLOP per output element and extra input, as ``Relu`` or ``Tanh`` do there)."""

_REPRESENTATIVE = {"elementwise": "Relu", "move": "Transpose", "reduce": "ReduceSum",
                   "norm": "LayerNormalization", "view": "Identity"}
_ONNX_FAMILY = {t: fam for fam, types in ONNX_FAMILIES.items() for t in types}
_RECURRENT_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
_RECURRENT_CELL = {"LSTM": 5, "GRU": 5, "RNN": 0}   # point-wise ops per hidden unit and step
_ATTENTION = frozenset({"Attention", "MultiHeadAttention", "GroupQueryAttention"})
_NEVER_FOLD = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike",
                         "RandomUniformLike", "Bernoulli", "Multinomial", "Dropout"})
FOLD_MAX_ELEMENTS = 1 << 16
"""Largest constant (elements) the shape fold computes or reads from an external-data file."""
MAX_DIM = 2**31 - 1
"""Largest tensor dimension read from an ONNX model (larger ones are damage or a typo)."""
MAX_ELEMENTS = 2**36
"""Largest tensor (elements, ~275 GB in float32, above any accelerator's memory), as generated
samples are bounded (:data:`workbench.samples.MAX_SAMPLE_OPS`): beyond it, costs and memory
figures would be numbers without meaning."""


def _onnx():
    try:
        import onnx
    except ImportError:
        raise FormatError("reading ONNX models needs the optional dependency onnx "
                          "(pip install onnx)") from None
    return onnx


def _n(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


# ---------------------------------------------------------------------- formulas
def _need(shapes, idx, op, what):
    s = shapes[idx] if idx < len(shapes) else None
    if s is None:
        raise GraphError(f"ONNX op {op}: needs the shape of {what} (input {idx})")
    return s


def _recurrent_flops(op_type, ins, attrs, op, has_bias) -> float:
    x = _need(ins, 0, op, "X")
    w = _need(ins, 1, op, "W")
    r = _need(ins, 2, op, "R")
    seq, b = (x[1], x[0]) if attrs.get("layout", 0) else (x[0], x[1])
    ndir, gh, n_in = w
    h = r[-1]
    per_step = 2.0 * gh * (n_in + h) + gh * (1 + 2 * bool(has_bias)) + _RECURRENT_CELL[op_type] * h
    return float(ndir * seq * b) * per_step


def _einsum_flops(ins, attrs, op) -> float:
    eq = attrs.get("equation", b"")
    eq = eq.decode() if isinstance(eq, bytes) else str(eq)
    lhs = eq.replace(" ", "").split("->")[0].split(",")
    if len(lhs) != len(ins) or any(s is None for s in ins):
        raise GraphError(f"ONNX op {op}: Einsum {eq!r} needs the shapes of its {len(lhs)} inputs")
    size: dict = {}
    ellipsis = 1
    for term, shp in zip(lhs, ins):
        letters = term.replace("...", "")
        n_ell = len(shp) - len(letters)
        if "..." in term:
            ellipsis = max(ellipsis, _n(shp[term.index("..."):term.index("...") + n_ell]))
        dims = [d for i, d in enumerate(shp) if not ("..." in term and
                term.index("...") <= i < term.index("...") + n_ell)]
        for c, d in zip(letters, dims):
            size[c] = max(size.get(c, 1), int(d))
    total = float(ellipsis * _n(size.values()))
    return total if len(ins) == 1 else 2.0 * total * (len(ins) - 1)


def _attention_flops(op_type, domain, ins, attrs, op) -> float:
    """Scores, softmax and weighted sum of scaled dot-product attention (+ the input projection
    of ``com.microsoft.Attention``)."""
    q = _need(ins, 0, op, "the query")
    proj = 0.0
    if op_type == "Attention" and domain == "com.microsoft":
        w = _need(ins, 1, op, "the weights")
        heads = int(attrs.get("num_heads", 1))
        b, s, hidden = q
        proj = 2.0 * b * s * hidden * w[-1]
        qh = w[-1] // 3
        return proj + heads * b * s * s * (4.0 * qh / heads + 5.0)
    k = _need(ins, 1, op, "the key")
    v = _need(ins, 2, op, "the value")
    if len(q) == 4:                                  # (B, heads, S, head_size)
        b, hq, sq, dq = q
        sk, dv = k[-2], v[-1]
    else:                                            # (B, S, heads * head_size)
        hq = int(attrs.get("q_num_heads", attrs.get("num_heads", 1)))
        hkv = int(attrs.get("kv_num_heads", hq))
        b, sq, hidden = q
        dq = hidden // hq
        sk = k[-2] if len(k) == 4 else k[1]
        dv = v[-1] if len(v) == 4 else v[-1] // hkv
    return float(b * hq * sq * sk) * (2.0 * dq + 2.0 * dv + 5.0)


def onnx_op_flops(op_type: str, in_shapes, attrs: Mapping | None = None, *, domain: str = "",
                  op: str = "?", n_inputs: int | None = None) -> float | None:
    """FLOPs of the ONNX ops that no single roofline family describes, else None.

    * ``LSTM``/``GRU``/``RNN``: per step, sample and direction ``2 G H (I + H)`` (the input and
      recurrent matrix products, G = 4/3/1 gates) plus ``G H`` per bias and activation and
      ``5 H`` for the cell's point-wise ops (LSTM, GRU);
    * ``Einsum``: ``2 (n - 1) prod(sizes of all indices)`` for n >= 2 operands, the
      input size for one;
    * attention (``Attention``, ``MultiHeadAttention``, ``GroupQueryAttention``):
      ``B H Sq Sk (2 Dq + 2 Dv + 5)`` (scores, weighted sum, softmax), plus the packed input
      projection of ``com.microsoft.Attention``.

    >>> onnx_op_flops("LSTM", [(16, 2, 128), (1, 512, 128), (1, 512, 128)], {}, n_inputs=3)
    8425472.0
    >>> onnx_op_flops("Einsum", [(2, 8, 4), (2, 4, 5)], {"equation": "bij,bjk->bik"})
    640.0
    >>> onnx_op_flops("Relu", [(4,)]) is None
    True
    """
    attrs = dict(attrs or {})
    if op_type in _RECURRENT_GATES:
        n_in = len(in_shapes) if n_inputs is None else n_inputs
        return _recurrent_flops(op_type, in_shapes, attrs, op, n_in > 3)
    if op_type == "Einsum":
        return _einsum_flops(in_shapes, attrs, op)
    if op_type in _ATTENTION:
        return _attention_flops(op_type, domain, in_shapes, attrs, op)
    return None


def _node_work(node, nm, in_shapes, out_shapes, in_sizes, out_sizes, attrs, unknown):
    from ..costs.roofline import op_family, op_work

    where = f"{nm!r} (type {node.op_type!r})"
    flops = onnx_op_flops(node.op_type, in_shapes, attrs, domain=node.domain, op=where)
    if flops is not None:
        return flops, float(sum(in_sizes) + sum(out_sizes))
    op_type = node.op_type
    if op_family(op_type) is None and op_type in _ONNX_FAMILY:
        op_type = _REPRESENTATIVE[_ONNX_FAMILY[op_type]]
    try:
        return op_work(op_type, in_shapes, out_shapes, in_sizes=in_sizes, out_sizes=out_sizes,
                       attrs={"transA": attrs.get("transA", 0)}, unknown=unknown, op=nm)
    except GraphError as e:
        raise GraphError(f"ONNX model: {e}") from None


# ---------------------------------------------------------------------- shapes
def bind_input_dims(model, *, batch: int | None = None, seq: int | None = None,
                    dims: Mapping | None = None) -> dict:
    """Fix the symbolic dimensions of ``model``'s graph inputs in place; the bindings.

    Dimension 0 takes ``batch`` (1 when None), any other ``seq``; ``dims`` binds dimensions by
    their symbolic name first. A dimension fixed at export keeps its value, and a ``batch`` or
    ``seq`` that contradicts it is an error.

    >>> from onnx import TensorProto, helper
    >>> g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    >>> m = helper.make_model(g)
    >>> bind_input_dims(m, batch=2, seq=16)
    {'batch': 2, 'seq': 16}
    >>> bind_input_dims(helper.make_model(g), batch=2)
    Traceback (most recent call last):
    ...
    workbench.errors.GraphError: ONNX input 'x': dimension 1 ('seq') is symbolic: pass seq= (--seq) or dims={'seq': N}
    """
    for what, v in [("batch", batch), ("seq", seq), *((f"dims[{k!r}]", v)
                                                     for k, v in (dims or {}).items())]:
        if v is not None and (isinstance(v, bool) or not isinstance(v, Integral) or v < 1):
            raise GraphError(f"{what} must be a positive integer, got {v!r}")
        if v is not None and v > MAX_DIM:
            raise GraphError(f"{what}={v} is above the limit of {MAX_DIM} for a dimension")
    bound = {str(k): int(v) for k, v in (dims or {}).items()}
    inits = {t.name for t in model.graph.initializer}
    for vi in model.graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        for i, d in enumerate(vi.type.tensor_type.shape.dim):
            want = batch if i == 0 else seq
            if d.HasField("dim_value"):
                if want is not None and i == 0 and d.dim_value != want:
                    raise GraphError(f"ONNX input {vi.name!r} was exported with a fixed batch "
                                     f"of {d.dim_value}, not {want}: export it with a dynamic "
                                     f"batch dimension (dynamic_axes / dynamic_shapes)")
                continue
            key = d.dim_param or f"{vi.name}:{i}"
            if key not in bound:
                if want is None and i > 0:
                    raise GraphError(f"ONNX input {vi.name!r}: dimension {i} ({key!r}) is "
                                     f"symbolic: pass seq= (--seq) or dims={{{key!r}: N}}")
                bound[key] = int(want or 1)
            d.dim_value = bound[key]
    return bound


def check_tensor_bounds(model, shapes: Mapping) -> None:
    """GraphError naming the op and tensor when a tensor an op reads or writes has a negative
    dimension, one above :data:`MAX_DIM`, or more than :data:`MAX_ELEMENTS` elements.

    ``shapes``: tensor name -> ``(shape or None, bytes per element)`` (see
    :func:`infer_onnx_shapes`; the graph inputs' bound shapes are enough before inference).

    >>> from onnx import TensorProto, helper
    >>> g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="act")], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2**40, 8])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    >>> check_tensor_bounds(helper.make_model(g), {"x": ((2**40, 8), 4)})
    Traceback (most recent call last):
    ...
    workbench.errors.GraphError: ONNX op 'act' (type 'Relu'): tensor 'x' has shape (1099511627776, 8): dimension 0 is 1099511627776, above the limit of 2147483647
    """
    names, _producer = _node_names(model.graph)
    for nm, node in zip(names, model.graph.node):
        for x in [*node.input, *node.output]:
            shp = shapes.get(x, (None,))[0] if x else None
            if shp is None:
                continue
            where = f"ONNX op {nm!r} (type {node.op_type!r}): tensor {x!r} has shape {tuple(shp)}"
            for i, d in enumerate(shp):
                if d < 0 or d > MAX_DIM:
                    raise GraphError(f"{where}: dimension {i} is {d}, "
                                     + ("negative" if d < 0 else f"above the limit of {MAX_DIM}"))
            if _n(shp) > MAX_ELEMENTS:
                raise GraphError(f"{where}: {_n(shp):,} elements, above the limit of "
                                 f"{MAX_ELEMENTS:,} (2**36) for one tensor")


def _input_shapes(model) -> dict:
    """Shapes of the graph inputs whose dimensions are all known (after binding)."""
    out = {}
    for vi in model.graph.input:
        dims = vi.type.tensor_type.shape.dim if vi.type.HasField("tensor_type") else []
        if dims and all(d.HasField("dim_value") for d in dims):
            out[vi.name] = (tuple(int(d.dim_value) for d in dims), 4)
    return out


def _shape_map(model, onnx):
    shapes: dict = {}
    gr = model.graph
    for vi in list(gr.input) + list(gr.value_info) + list(gr.output):
        if vi.type.HasField("tensor_type"):
            tt = vi.type.tensor_type
            shp = None
            if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
                shp = tuple(int(d.dim_value) for d in tt.shape.dim)
            shapes[vi.name] = (shp, _DTYPE_SIZE.get(tt.elem_type, 4))
    for t in gr.initializer:
        shapes[t.name] = (tuple(int(d) for d in t.dims), _DTYPE_SIZE.get(t.data_type, 4))
    return shapes


def _infer(model, onnx):
    try:
        return onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception as e:  # noqa: BLE001 - onnx raises several types
        raise FormatError(f"ONNX shape inference failed: {type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}") from None


def _evaluate(node, values, opset, onnx):
    """The outputs of one node on known inputs (ONNX's reference implementation), or None."""
    import numpy as np
    from onnx.reference import ReferenceEvaluator

    feeds = {x: values[x] for x in node.input if x}
    try:
        outs = ReferenceEvaluator(node, opsets={"": opset}).run(None, feeds)
    except Exception:  # noqa: BLE001 - an op the reference cannot run stays a node
        return None
    outs = [np.asarray(o) for o in outs]
    if any(o.size > FOLD_MAX_ELEMENTS for o in outs):
        return None
    return outs


def _fold_round(model, values, shapes, opset, onnx, weights) -> int:
    """One pass over the nodes: evaluate those whose inputs are known (and read no weight:
    a float initializer of more than one element); the count folded."""
    import numpy as np

    found = 0
    for node in model.graph.node:
        outs = [o for o in node.output if o]
        if not outs or all(o in values for o in outs) or node.domain not in ("", "ai.onnx"):
            continue
        res = None
        if node.op_type in ("Shape", "Size") and node.input[0] in shapes and \
                shapes[node.input[0]][0] is not None:
            shp = shapes[node.input[0]][0]
            if node.op_type == "Size":
                res = [np.array(_n(shp), np.int64)]
            else:
                a = {x.name: onnx.helper.get_attribute_value(x) for x in node.attribute}
                res = [np.array(shp, np.int64)[a.get("start", 0):a.get("end", len(shp))]]
        elif node.op_type not in _NEVER_FOLD and all(x in values for x in node.input if x) \
                and not any(x in weights for x in node.input):
            res = _evaluate(node, values, opset, onnx)
        if res is not None:
            values.update(zip(node.output, res))
            found += 1
    return found


def infer_onnx_shapes(model, *, max_rounds: int = 12):
    """Shapes of every tensor after inference with data propagation and the shape fold.

    Returns ``(shapes, folded)``: tensor name -> ``(shape or None, bytes per element)``, and
    the names of the nodes whose outputs are all constants (see the module docstring).
    ``model`` must have its input dimensions bound (:func:`bind_input_dims`).
    """
    onnx = _onnx()
    from onnx import numpy_helper

    opset = max([o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] or [17])
    values, weights = {}, set()
    for t in model.graph.initializer:
        if t.data_type in (1, 10, 11, 16) and _n(t.dims) > 1:
            weights.add(t.name)
        if t.data_location != onnx.TensorProto.EXTERNAL and _n(t.dims) <= FOLD_MAX_ELEMENTS:
            values[t.name] = numpy_helper.to_array(t)
    work = model
    for _ in range(max_rounds):
        inferred = _infer(work, onnx)
        shapes = _shape_map(inferred, onnx)
        before = len(values)
        if not _fold_round(model, values, shapes, opset, onnx, weights) or len(values) == before:
            break
        work = onnx.ModelProto()
        work.CopyFrom(model)
        keep = [n for n in model.graph.node if not all(o in values for o in n.output if o)]
        del work.graph.node[:]
        work.graph.node.extend(keep)
        have = {t.name for t in work.graph.initializer}
        for name, val in values.items():
            if name not in have:
                work.graph.initializer.append(numpy_helper.from_array(val, name))
    folded = {n.name or f"{n.op_type}_{i}" for i, n in enumerate(model.graph.node)
              if all(o in values for o in n.output if o) and n.output}
    for name, val in values.items():
        if shapes.get(name, (None,))[0] is None:
            shapes[name] = (tuple(int(d) for d in val.shape), val.dtype.itemsize)
    return shapes, folded


# ---------------------------------------------------------------------- the graph
def _node_names(gr):
    names, seen, producer = [], set(), {}
    for i, node in enumerate(gr.node):
        nm = node.name or f"{node.op_type}_{i}"
        if nm in seen:
            nm = f"{nm}_{i}"
        seen.add(nm)
        names.append(nm)
        if not node.output:
            raise FormatError(f"ONNX node {nm!r} ({node.op_type}) has no outputs")
        for o in node.output:
            producer[o] = nm
    return names, producer


def onnx_to_opgraph(model, *, batch: int | None = None, seq: int | None = None,
                    dims: Mapping | None = None, training: bool = False, device="V100",
                    unknown: str = "error", name: str | None = None) -> OpGraph:
    """An OpGraph from an in-memory ``onnx.ModelProto`` (see the module docstring).

    Parameters
    ----------
    model : onnx.ModelProto
    batch, seq : int, optional
        Bind the symbolic dimensions of the inputs (dimension 0, the others).
    dims : dict, optional
        Symbolic dimension name -> value (takes precedence over batch/seq).
    training : bool
        Derive the training step (:func:`workbench.samples.to_training`).
    device : str or DeviceModel
        Roofline model of kind ``gpu``.
    unknown : {"error", "elementwise"}
        An op type without a formula: an error naming it, or costed as element-wise.

    Raises
    ------
    FormatError
        A model that shape inference rejects, a node without outputs.
    GraphError
        An op type without a cost formula (``unknown="error"``), a symbolic dimension left
        unbound, a node whose output shape cannot be resolved.
    """
    onnx = _onnx()
    from ..costs.roofline import DEVICE_MODELS, op_family, with_device_costs

    model = onnx.ModelProto.FromString(model.SerializeToString())
    bound = bind_input_dims(model, batch=batch, seq=seq, dims=dims)
    check_tensor_bounds(model, _input_shapes(model))  # before inference works on them
    # the exporter's own annotations keep symbolic dims ("Min(64, seq)") that inference would
    # merge instead of replacing: infer every shape afresh from the bound inputs
    del model.graph.value_info[:]
    for vi in model.graph.output:
        if vi.type.HasField("tensor_type"):
            vi.type.tensor_type.ClearField("shape")
    shapes, folded = infer_onnx_shapes(model)
    check_tensor_bounds(model, shapes)
    gr = model.graph
    inits = {t.name: float(_n(t.dims) * _DTYPE_SIZE.get(t.data_type, 4)) for t in gr.initializer}

    def nbytes(tname):
        shp, size = shapes.get(tname, (None, 4))
        return 0.0 if shp is None else float(_n(shp) * size)

    names, producer = _node_names(gr)
    charged: set = set()
    ops, edges, fallback = [], {}, set()
    for nm, node in zip(names, gr.node):
        if nm in folded:
            continue
        ins = [x for x in node.input if x]
        in_shapes = [shapes.get(x, (None, 4))[0] for x in ins]
        out_shapes = [shapes.get(x, (None, 4))[0] for x in node.output if x]
        fam = op_family(node.op_type) or _ONNX_FAMILY.get(node.op_type)
        if fam != "view" and any(s is None for s in out_shapes):
            bad = next(o for o in node.output if o and shapes.get(o, (None,))[0] is None)
            raise GraphError(f"ONNX op {nm!r} (type {node.op_type!r}): the shape of its output "
                             f"{bad!r} is unknown after shape inference (bound dims: {bound}); "
                             f"a data-dependent shape cannot be costed")
        if fam is None and node.op_type not in {*_RECURRENT_GATES, "Einsum"} and \
                node.op_type not in _ATTENTION and unknown == "elementwise":
            fallback.add(node.op_type)
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        flops, moved = _node_work(node, nm, in_shapes, out_shapes, [nbytes(x) for x in ins],
                                  [nbytes(x) for x in node.output if x], attrs, unknown)
        mem = 0.0
        for x in ins:
            if x in inits and x not in charged:
                mem += inits[x]
                charged.add(x)
        out_b = sum(nbytes(x) for x in node.output if x)
        if training:
            mem += out_b
        ops.append((nm, {"compute": {"gpu": 0.0}, "memory": mem, "kind": "fwd",
                         "op_type": node.op_type, "flops": flops, "bytes_moved": moved,
                         "shapes": [list(s) if s else None for s in out_shapes],
                         "out_bytes": out_b}))
        for x in ins:
            if x in producer and producer[x] not in folded:
                key = (producer[x], nm)
                edges[key] = edges.get(key, 0.0) + nbytes(x)
    g = OpGraph.from_ops(ops, [(u, v, {"bytes": b}) for (u, v), b in edges.items()],
                         name=name or gr.name or "onnx",
                         meta={"source": "onnx", "batch": _batch_of(gr, inits),
                               "dims": bound, "param_bytes": sum(inits[x] for x in charged),
                               "folded_ops": len(folded),
                               "cost_fallback_types": sorted(fallback),
                               "opset": [o.version for o in model.opset_import]})
    g = with_device_costs(g, device, kind="gpu")
    g = with_device_costs(g, DEVICE_MODELS["cpu-local"], kind="cpu")
    from ..transforms.split_dims import with_split_dims

    g = with_split_dims(g)          # FastT's split dimensions from op types and shapes
    if training:
        from ..transforms.training import to_training

        g = to_training(g)
    return g


def _batch_of(gr, inits) -> int:
    for vi in gr.input:
        if vi.name not in inits and vi.type.tensor_type.shape.dim:
            return int(vi.type.tensor_type.shape.dim[0].dim_value or 1)
    return 1


def _load(p: Path, onnx):
    """The model without its weights: external data stays on disk except the small tensors
    that shape computations read."""
    from onnx.external_data_helper import load_external_data_for_tensor, uses_external_data

    try:
        model = onnx.load(str(p), load_external_data=False)
    except Exception as e:  # noqa: BLE001 - protobuf DecodeError and friends
        raise FormatError(f"{p}: not an ONNX model ({type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else 'cannot parse'})") from None
    for t in model.graph.initializer:
        if not uses_external_data(t):
            continue
        _check_external(p, t)
        if _n(t.dims) <= FOLD_MAX_ELEMENTS:
            try:
                load_external_data_for_tensor(t, str(p.parent))
            except Exception as e:  # noqa: BLE001 - onnx's checker and numpy raise many kinds
                raise FormatError(f"{p}: reading initializer {t.name!r} from its external data "
                                  f"failed: {type(e).__name__}: {_first(e)}") from None
            t.data_location = onnx.TensorProto.DEFAULT
            del t.external_data[:]
    return model


def _first(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [""])[0][:300]


def _check_external(p: Path, t) -> None:
    """The external data of initializer ``t`` is a plain file inside the model's folder (a
    relative location, no ``..`` out of it, no symbolic link) holding the bytes the tensor
    names (offset + length within the file): a truncated, absolute or symlinked data file was
    a traceback from onnx's checker or numpy (issue 41), and weights are read from nowhere
    else than beside the model."""
    info = {e.key: e.value for e in t.external_data}
    loc = info.get("location", "")
    where = f"{p}: initializer {t.name!r} is stored in {loc!r}"
    if not loc or Path(loc).is_absolute():
        raise FormatError(f"{where}: the location must be a file name relative to the model's "
                          f"folder")
    folder = p.parent.resolve()
    f = p.parent / loc
    if f.is_symlink() or any(q.is_symlink() for q in f.parents if q != p.parent and
                             str(q).startswith(str(p.parent))):
        raise FormatError(f"{where}, a symbolic link; keep the data file itself beside the "
                          f"model")
    if folder not in f.resolve().parents:
        raise FormatError(f"{where}, outside the model's folder {str(folder)!r}")
    if not f.is_file():
        raise FormatError(f"{where}, which is not beside the model (keep the .onnx.data file "
                          f"next to it)")
    try:
        offset = int(info.get("offset") or 0)
        length = int(info["length"]) if info.get("length") else None
    except ValueError:
        raise FormatError(f"{where} with a bad offset or length {info}") from None
    if length is None:
        if t.data_type not in _DTYPE_SIZE:  # an element type of no fixed size: no check
            return
        length = _n(t.dims) * _DTYPE_SIZE[t.data_type]
    size = f.stat().st_size
    if offset < 0 or length < 0 or offset + length > size:
        raise FormatError(f"{where}, which holds {size:,} bytes: the tensor needs bytes "
                          f"{offset:,} to {offset + length:,} (truncated data file?)")


def read_onnx(path, *, batch: int | None = None, seq: int | None = None,
              dims: Mapping | None = None, training: bool = False, device="V100",
              unknown: str = "error") -> OpGraph:
    """Read an ONNX model file into an OpGraph (see :func:`onnx_to_opgraph`).

    Raises
    ------
    FormatError
        A missing file, a file that does not parse as ONNX, a missing external-data file.
    """
    onnx = _onnx()
    p = Path(path)
    if not p.is_file():
        raise FormatError(f"ONNX file {str(p)!r} does not exist")
    model = _load(p, onnx)
    if not model.graph.node:
        raise FormatError(f"{p}: the ONNX model has no nodes")
    return onnx_to_opgraph(model, batch=batch, seq=seq, dims=dims, training=training,
                           device=device, unknown=unknown, name=re.split(r"\.", p.name)[0])
