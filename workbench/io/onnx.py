"""ONNX models in: how a PyTorch (``torch.onnx.export``) or other user brings a model.

:func:`read_onnx` turns an ONNX model into an :class:`~workbench.graph.OpGraph` of its forward
pass:

* ops: one per ONNX node (named by the node's name, else ``<op_type>_<index>``), ``op_type``
  the ONNX operator, kind ``fwd``;
* shapes from ONNX shape inference (``onnx.shape_inference.infer_shapes``); graph inputs with
  symbolic dimensions take ``batch`` for their first dimension;
* ``flops`` and ``bytes_moved`` per op from :func:`workbench.roofline.op_work` (an op type
  without a formula is an error naming it, or -- ``unknown="elementwise"`` -- costed as
  element-wise and listed in ``meta["cost_fallback_types"]``);
* ``memory``: initialisers (weights) are parameter memory on the ops that read them (an
  initialiser read by several ops is charged to the first one), plus the op's output bytes
  when ``training`` (activations kept for the backward pass);
* ``compute``: roofline times on ``device`` (default V100) for kind ``gpu`` and on the fitted
  ``cpu-local`` model for kind ``cpu``;
* edges: one per producer/consumer pair, ``bytes`` the size of the tensors passed.

``training=True`` derives the training step with :func:`workbench.samples.to_training`
(backward ops mirrored, memory kept on the forward ops).

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

from pathlib import Path

from ..errors import FormatError, GraphError
from ..graph import OpGraph

__all__ = ["onnx_to_opgraph", "read_onnx"]

_DTYPE_SIZE = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8,
               16: 2}  # ONNX TensorProto element types -> bytes


def _onnx():
    try:
        import onnx
    except ImportError:
        raise FormatError("reading ONNX models needs the optional dependency onnx "
                          "(pip install onnx)") from None
    return onnx


def _shape(tensor_type, batch: int):
    dims = []
    for i, d in enumerate(tensor_type.shape.dim):
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif i == 0:
            dims.append(int(batch))
        else:
            return None
    return tuple(dims)


def onnx_to_opgraph(model, *, batch: int = 1, training: bool = False, device="V100",
                    unknown: str = "error", name: str | None = None) -> OpGraph:
    """An OpGraph from an in-memory ``onnx.ModelProto`` (see the module docstring).

    Raises
    ------
    FormatError
        A model that shape inference rejects, a node without outputs.
    GraphError
        An op type without a cost formula (``unknown="error"``) or with missing shapes.
    """
    onnx = _onnx()
    from ..roofline import DEVICE_MODELS, op_work, with_device_costs

    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise GraphError(f"batch must be a positive integer, got {batch!r}")
    # fix symbolic batch dimensions of the inputs, then infer every shape
    model = onnx.ModelProto.FromString(model.SerializeToString())
    for vi in model.graph.input:
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.shape.dim:
            d0 = vi.type.tensor_type.shape.dim[0]
            if not d0.HasField("dim_value"):
                d0.dim_value = int(batch)
    try:
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    except Exception as e:  # noqa: BLE001 - onnx raises several types
        raise FormatError(f"ONNX shape inference failed: {type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}") from None
    gr = model.graph
    info: dict = {}
    for vi in list(gr.input) + list(gr.value_info) + list(gr.output):
        if vi.type.HasField("tensor_type"):
            tt = vi.type.tensor_type
            info[vi.name] = (_shape(tt, batch), _DTYPE_SIZE.get(tt.elem_type, 4))
    inits = {}
    for t in gr.initializer:
        n = 1
        for d in t.dims:
            n *= int(d)
        info[t.name] = (tuple(int(d) for d in t.dims), _DTYPE_SIZE.get(t.data_type, 4))
        inits[t.name] = float(n * _DTYPE_SIZE.get(t.data_type, 4))

    def nbytes(tname):
        shp, size = info.get(tname, (None, 4))
        if shp is None:
            return 0.0
        n = 1
        for d in shp:
            n *= d
        return float(n * size)

    producer: dict = {}
    names: list = []
    seen: set = set()
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
    charged: set = set()
    ops, edges, fallback = [], {}, set()
    for nm, node in zip(names, gr.node):
        ins = [x for x in node.input if x]
        in_shapes = [info.get(x, (None, 4))[0] for x in ins]
        out_shapes = [info.get(x, (None, 4))[0] for x in node.output]
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        from ..roofline import op_family

        if op_family(node.op_type) is None and unknown == "elementwise":
            fallback.add(node.op_type)
        try:
            flops, moved = op_work(node.op_type, in_shapes, out_shapes,
                                   in_sizes=[nbytes(x) for x in ins],
                                   out_sizes=[nbytes(x) for x in node.output],
                                   attrs={"transA": attrs.get("transA", 0)}, unknown=unknown,
                                   op=nm)
        except GraphError as e:
            raise GraphError(f"ONNX model: {e}") from None
        mem = 0.0
        for x in ins:
            if x in inits and x not in charged:
                mem += inits[x]
                charged.add(x)
        out_b = sum(nbytes(x) for x in node.output)
        if training:
            mem += out_b
        ops.append((nm, {"compute": {"gpu": 0.0}, "memory": mem, "kind": "fwd",
                         "op_type": node.op_type, "flops": flops, "bytes_moved": moved,
                         "shapes": [list(s) if s else None for s in out_shapes],
                         "out_bytes": out_b}))
        for x in ins:
            if x in producer:
                key = (producer[x], nm)
                edges[key] = edges.get(key, 0.0) + nbytes(x)
    params = sum(inits.values())
    g = OpGraph.from_ops(ops, [(u, v, {"bytes": b}) for (u, v), b in edges.items()],
                         name=name or gr.name or "onnx",
                         meta={"source": "onnx", "batch": batch, "param_bytes": params,
                               "cost_fallback_types": sorted(fallback),
                               "opset": [o.version for o in model.opset_import]})
    g = with_device_costs(g, device, kind="gpu")
    g = with_device_costs(g, DEVICE_MODELS["cpu-local"], kind="cpu")
    from ..transforms.split_dims import with_split_dims

    g = with_split_dims(g)          # FastT's split dimensions from op types and shapes
    if training:
        from ..samples import to_training

        g = to_training(g)
    return g


def read_onnx(path, *, batch: int = 1, training: bool = False, device="V100",
              unknown: str = "error") -> OpGraph:
    """Read an ONNX model file into an OpGraph (see :func:`onnx_to_opgraph`).

    Raises
    ------
    FormatError
        A missing file, a file that does not parse as ONNX, or a model that fails checks.
    """
    onnx = _onnx()
    p = Path(path)
    if not p.is_file():
        raise FormatError(f"ONNX file {str(p)!r} does not exist")
    try:
        model = onnx.load(str(p))
    except Exception as e:  # noqa: BLE001 - protobuf DecodeError and friends
        raise FormatError(f"{p}: not an ONNX model ({type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else 'cannot parse'})") from None
    if not model.graph.node:
        raise FormatError(f"{p}: the ONNX model has no nodes")
    return onnx_to_opgraph(model, batch=batch, training=training, device=device,
                           unknown=unknown, name=p.name.split(".")[0])
