"""A device cost model: FLOPs and bytes per op -> time on a device you may not have.

Two parts, both pure (no TensorFlow, no solver import):

**Per-op work** (:func:`op_work`): FLOPs and bytes moved from an op's type and tensor shapes,
for TensorFlow and ONNX op names. Extraction (:mod:`workbench.runtime.extraction`) prefers
TensorFlow's own registered ``flops`` statistics (``ops.get_stats_for_node_def``: MatMul,
BatchMatMul, Conv2D and its gradients, pooling, BiasAdd, Softmax, the common element-wise ops)
and falls back to these formulas; the ONNX reader (:mod:`workbench.io.onnx`) uses them for
everything. The result is stored on each op as ``flops`` and ``bytes_moved``. Families
(``n(x)`` = number of elements of tensor x, ``y`` = the first output):

==============  ====================================================  =====================
family          FLOPs                                                  bytes moved
==============  ====================================================  =====================
matmul          ``2 n(y) K`` (K = contracted dimension of input 0)     inputs + outputs
conv            ``2 n(y) K`` (K = kernel volume x input channels)      inputs + outputs
norm            ``8 n(x)`` (batch/layer norm, forward); grads ``10``   inputs + outputs
softmax         ``5 n(x)`` (softmax, log-softmax, cross-entropy)        inputs + outputs
reduce / pool   ``n(x)`` (every input element is read once)            inputs + outputs
update          ``2 n(g)`` SGD, ``4 n(g)`` momentum, ``12 n(g)`` Adam   ``3 n(g)`` x state
elementwise     ``n(y)`` per input beyond the first (at least ``n(y)``)  inputs + outputs
move            0 (concat, slice, transpose, gather, cast, ...)         inputs + outputs
view            0 (reshape, identity, variable handles, NoOp, ...)      0 (no kernel)
==============  ====================================================  =====================

An op type in none of the families raises :class:`~workbench.errors.GraphError` naming it
(``unknown="error"``), or is costed as element-wise (``unknown="elementwise"``, the documented
fallback; callers record which op types took it).

**Roofline** (:class:`DeviceModel`): ``time = max(flops / peak, bytes / bandwidth) + launch``
per op (ms), 0 for ``view`` ops. Presets in :data:`DEVICE_MODELS` (published peaks, see
:class:`DeviceModel`); ``cpu-local`` is fitted to this machine's profiled sample graphs by
:func:`fit_device`. :func:`with_device_costs` writes the estimated times into a graph's
``compute`` for a device model, or for every device kind of a cluster preset
(:data:`PRESET_DEVICE_MODELS`), so that a graph profiled on a CPU solves on ``4xV100-nvlink``.

Examples
--------
>>> op_work("MatMul", [(64, 256), (256, 128)], [(64, 128)])
(4194304.0, 229376.0)
>>> v100 = DEVICE_MODELS["V100"]
>>> round(v100.time(4194304.0, 229376.0), 4)             # launch-bound on a V100
0.0053
>>> round(v100.time(2e12, 1e6), 1), round(v100.time(2e12, 1e6, precision="tensor"), 1)
(127.4, 16.0)
>>> op_work("FancyOp", [(4,)], [(4,)])
Traceback (most recent call last):
...
workbench.errors.GraphError: no cost formula for op type 'FancyOp' (pass unknown='elementwise' to cost it as an element-wise op)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ClusterError, GraphError

__all__ = [
    "DEVICE_MODELS",
    "FAMILIES",
    "PRESET_DEVICE_MODELS",
    "DeviceModel",
    "costs_for_cluster",
    "fit_device",
    "op_family",
    "op_work",
    "roofline_times",
    "with_device_costs",
]

_T = 1e9   # 1 TFLOP/s in FLOP per millisecond
_G = 1e6   # 1 GB/s in bytes per millisecond


@dataclass(frozen=True)
class DeviceModel:
    """Roofline figures of one device.

    Attributes
    ----------
    name : str
    peak_flops : float
        FP32 peak without tensor cores, FLOP per ms.
    tensor_flops : float
        Tensor-core peak for training maths (TF32 on A100/H100, FP16 on V100), FLOP per ms.
    mem_bw : float
        Memory bandwidth, bytes per ms.
    launch_ms : float
        Fixed cost of every kernel (launch and executor overhead), ms.
    memory : float
        Device memory in bytes.
    source : str
        Where the figures come from.

    Published figures used by the presets (dense, SXM boards):

    * V100: 15.7 TFLOP/s FP32, 125 TFLOP/s FP16 tensor, 900 GB/s HBM2, 16 GB
      (NVIDIA Tesla V100 datasheet, 2017).
    * A100: 19.5 TFLOP/s FP32, 156 TFLOP/s TF32 tensor, 1,555 GB/s HBM2, 40 GB
      (NVIDIA A100 Tensor Core GPU datasheet, 2020).
    * H100: 67 TFLOP/s FP32, 495 TFLOP/s TF32 tensor (989 with sparsity), 3,350 GB/s HBM3,
      80 GB (NVIDIA H100 Tensor Core GPU datasheet, SXM5, 2022).

    GPU launch overhead is 5 us per op (a CUDA kernel launch plus TensorFlow's executor,
    commonly measured at 3-10 us).

    >>> round(DEVICE_MODELS["A100"].time(1e9, 0.0), 4)   # 1 GFLOP at 19.5 TFLOP/s + launch
    0.0563
    """

    name: str
    peak_flops: float
    tensor_flops: float
    mem_bw: float
    launch_ms: float
    memory: float = math.inf
    source: str = ""

    def __post_init__(self):
        for f in ("peak_flops", "tensor_flops", "mem_bw"):
            x = getattr(self, f)
            if not (isinstance(x, (int, float)) and x > 0):
                raise ClusterError(f"device model {self.name!r}: {f} must be positive, got {x!r}")
        if not (self.launch_ms >= 0 and math.isfinite(self.launch_ms)):
            raise ClusterError(f"device model {self.name!r}: launch_ms must be finite and >= 0")

    def time(self, flops: float, nbytes: float, *, precision: str = "fp32") -> float:
        """Roofline time (ms) of one kernel; ``precision`` is ``fp32`` or ``tensor``."""
        return float(roofline_times(np.array([flops]), np.array([nbytes]), self,
                                    precision=precision)[0])


_GIB = float(2**30)
DEVICE_MODELS: dict[str, DeviceModel] = {
    "V100": DeviceModel("V100", 15.7 * _T, 125 * _T, 900 * _G, 0.005, 16 * _GIB,
                        "NVIDIA Tesla V100 SXM2 datasheet"),
    "A100": DeviceModel("A100", 19.5 * _T, 156 * _T, 1555 * _G, 0.005, 40 * _GIB,
                        "NVIDIA A100 SXM4 40GB datasheet"),
    "H100": DeviceModel("H100", 67 * _T, 495 * _T, 3350 * _G, 0.005, 80 * _GIB,
                        "NVIDIA H100 SXM5 datasheet"),
    # fitted by `python bench/cost_model.py --fit` on the profiled sample_graphs/ (one core)
    "cpu-local": DeviceModel("cpu-local", 0.0338 * _T, 0.0338 * _T, 5.57 * _G, 0.0397,
                             8 * _GIB, "fitted to this machine's profiled samples"),
}
"""Name -> :class:`DeviceModel`."""

PRESET_DEVICE_MODELS: dict[str, dict[str, str]] = {
    "1xV100": {"gpu": "V100"}, "2xV100-pcie": {"gpu": "V100"},
    "4xV100-nvlink": {"gpu": "V100"}, "2x4xV100": {"gpu": "V100"},
    "8xA100-nvlink": {"gpu": "A100"},
    "4xcpu": {"cpu": "cpu-local"}, "2xcpu": {"cpu": "cpu-local"},
}
"""Cluster preset name -> device kind -> device model name (see :func:`with_device_costs`)."""

# ---------------------------------------------------------------------- op families
FAMILIES: dict[str, frozenset] = {
    "matmul": frozenset({"MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Gemm",
                         "Einsum"}),
    "conv": frozenset({"Conv2D", "Conv", "Conv2DBackpropInput", "Conv2DBackpropFilter",
                       "DepthwiseConv2dNative", "ConvTranspose"}),
    "norm": frozenset({"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3",
                       "BatchNormalization", "LayerNormalization", "InstanceNormalization"}),
    "norm_grad": frozenset({"FusedBatchNormGrad", "FusedBatchNormGradV2",
                            "FusedBatchNormGradV3"}),
    "softmax": frozenset({"Softmax", "LogSoftmax", "SoftmaxCrossEntropyWithLogits",
                          "SparseSoftmaxCrossEntropyWithLogits"}),
    "reduce": frozenset({"Sum", "Mean", "Max", "Min", "Prod", "ArgMax", "ArgMin", "L2Loss",
                         "BiasAddGrad", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
                         "ReduceProd", "ReduceL2", "MaxPool", "AvgPool", "MaxPoolGrad",
                         "AvgPoolGrad", "MaxPoolV2", "AveragePool", "GlobalAveragePool",
                         "GlobalMaxPool", "MaxPool3D", "AvgPool3D", "Moments"}),
    "update": frozenset({"ResourceApplyGradientDescent", "ApplyGradientDescent",
                         "ResourceApplyMomentum", "ResourceApplyKerasMomentum",
                         "ResourceApplyAdam", "ApplyAdam", "AssignAddVariableOp",
                         "AssignSubVariableOp", "AssignVariableOp", "AssignAdd", "AssignSub",
                         "ResourceScatterAdd", "ResourceScatterSub", "ScatterAdd"}),
    "elementwise": frozenset({
        "Add", "AddV2", "AddN", "Sub", "Mul", "Div", "RealDiv", "DivNoNan", "FloorDiv",
        "Maximum", "Minimum", "Pow", "SquaredDifference", "Neg", "Abs", "Sign", "Exp", "Log",
        "Log1p", "Erfc", "MatrixBandPart", "Sqrt", "Rsqrt", "RsqrtGrad", "SqrtGrad", "Square", "Reciprocal", "Tanh",
        "TanhGrad", "Sigmoid", "SigmoidGrad", "Relu", "ReluGrad", "Relu6", "Relu6Grad", "Elu",
        "EluGrad", "Selu", "Gelu", "Erf", "Softplus", "LeakyRelu", "LeakyReluGrad", "BiasAdd",
        "Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual", "LogicalAnd",
        "LogicalOr", "LogicalNot", "Floor", "Ceil", "Round", "ClipByValue", "Clip",
        "Select", "SelectV2", "Where", "Dropout", "Mod", "FloorMod", "Cos", "Sin",
        "HardSigmoid", "PRelu", "Not", "And", "Or", "Min", "Max",
        "Sum", "Mean", "BroadcastTo", "Expand", "ZerosLike", "OnesLike", "Fill",
        "RandomUniform", "RandomStandardNormal", "TruncatedNormal", "Range", "OneHot"}),
    "move": frozenset({
        "ConcatV2", "Concat", "Slice", "StridedSlice", "StridedSliceGrad", "Transpose",
        "Pad", "PadV2", "MirrorPad", "Tile", "Gather", "GatherV2", "GatherNd",
        "GatherElements", "ResourceGather", "Split", "SplitV", "Pack", "Unpack", "Cast",
        "Reverse", "ReverseV2", "UnsortedSegmentSum", "ScatterNd", "TensorScatterUpdate",
        "DynamicStitch", "Copy", "Resize", "Upsample", "DepthToSpace", "SpaceToDepth",
        "ConcatOffset", "BroadcastGradientArgs", "InvertPermutation"}),
    "view": frozenset({
        "NoOp", "VarHandleOp", "VariableV2", "Variable", "Const", "Constant", "Placeholder",
        "PlaceholderWithDefault", "Identity", "IdentityN", "Reshape", "Squeeze", "ExpandDims",
        "Unsqueeze", "Flatten", "Shape", "ShapeN", "Size", "Rank", "StopGradient",
        "PreventGradient", "Snapshot", "ConstantOfShape", "ReadVariableOp"}),
}
"""Family name -> op types (TensorFlow and ONNX spellings). An op type found in several
families (ONNX ``Max``/``Sum`` are element-wise, TensorFlow's are reductions) takes the first
in this order."""

_FAMILY_OF: dict[str, str] = {}
for _fam, _types in FAMILIES.items():
    for _t in _types:
        _FAMILY_OF.setdefault(_t, _fam)
# ReadVariableOp is a view: the read hands out the variable's buffer (no copy) in the
# graphs we extract.
_UPDATE_FLOPS = {"ResourceApplyMomentum": 4, "ResourceApplyKerasMomentum": 4,
                 "ResourceApplyAdam": 12, "ApplyAdam": 12}
_UPDATE_STATE = {"ResourceApplyMomentum": 5, "ResourceApplyKerasMomentum": 5,
                 "ResourceApplyAdam": 9, "ApplyAdam": 9}


def op_family(op_type: str) -> str | None:
    """The cost family of an op type, or None when it has no formula.

    >>> op_family("Conv2DBackpropFilter"), op_family("Reshape"), op_family("Nope")
    ('conv', 'view', None)
    """
    return _FAMILY_OF.get(op_type)


def _n(shape) -> int | None:
    if shape is None:
        return None
    n = 1
    for d in shape:
        if d is None or d < 0:
            return None
        n *= int(d)
    return n


def op_work(op_type: str, in_shapes: Sequence, out_shapes: Sequence, *, dtype_size: int = 4,
            in_sizes: Sequence | None = None, out_sizes: Sequence | None = None,
            attrs: Mapping | None = None, unknown: str = "error",
            op: str | None = None) -> tuple[float, float]:
    """FLOPs and bytes moved of one op (see the module docstring for the formulas).

    Parameters
    ----------
    op_type : str
        TensorFlow or ONNX op type.
    in_shapes, out_shapes : sequence of shapes
        Each a tuple of ints, or None for a tensor of unknown shape or a resource handle.
    dtype_size : int
        Bytes per element when ``in_sizes``/``out_sizes`` are not given.
    in_sizes, out_sizes : sequence of float, optional
        Tensor sizes in bytes (to account for mixed dtypes).
    attrs : dict, optional
        ``transpose_a``/``adj_x``/``transA`` (matmul), ``kernel_elems`` (conv: the
        contracted size per output element when the weight is not input 1).
    unknown : {"error", "elementwise"}
        What to do with an op type in no family.
    op : str, optional
        Op name, for error messages.

    Raises
    ------
    GraphError
        Unknown op type with ``unknown="error"``; a matmul/conv whose shapes are unknown.

    >>> op_work("Conv2D", [(8, 32, 32, 16), (3, 3, 16, 32)], [(8, 32, 32, 32)])[0]
    75497472.0
    >>> op_work("Reshape", [(8, 4)], [(32,)])
    (0.0, 0.0)
    >>> op_work("Relu", [(10,)], [(10,)])
    (10.0, 80.0)
    """
    attrs = dict(attrs or {})
    fam = _FAMILY_OF.get(op_type)
    where = f"op {op!r} (type {op_type!r})" if op else f"op type {op_type!r}"
    if fam is None:
        if unknown == "elementwise":
            fam = "elementwise"
        elif unknown == "error":
            raise GraphError(f"no cost formula for {where} (pass unknown='elementwise' to cost "
                             f"it as an element-wise op)")
        else:
            raise GraphError(f"unknown must be 'error' or 'elementwise', got {unknown!r}")
    if fam == "view":
        return 0.0, 0.0
    ins = [_n(s) for s in in_shapes]
    outs = [_n(s) for s in out_shapes]
    if in_sizes is None:
        in_sizes = [(n or 0) * dtype_size for n in ins]
    if out_sizes is None:
        out_sizes = [(n or 0) * dtype_size for n in outs]
    nbytes = float(sum(in_sizes) + sum(out_sizes))
    n_out = next((n for n in outs if n), 0) or 0
    n_in = next((n for n in ins if n), 0) or 0
    if fam == "matmul":
        if not in_shapes or in_shapes[0] is None or not len(in_shapes[0]) or not n_out:
            raise GraphError(f"{where}: matmul needs the shape of input 0 and of the output")
        a = in_shapes[0]
        trans = bool(attrs.get("transpose_a") or attrs.get("adj_x") or attrs.get("transA"))
        k = a[-2] if (trans and len(a) >= 2) else a[-1]
        if op_type == "Einsum":
            k = attrs.get("contracted", k)
        return 2.0 * n_out * int(k), nbytes
    if fam == "conv":
        k = attrs.get("kernel_elems")
        if k is None:
            w = in_shapes[1] if len(in_shapes) > 1 else None
            if w is None or _n(w) is None or not n_out:
                raise GraphError(f"{where}: conv needs the weight shape (input 1) and output")
            # TF HWIO: K = kh*kw*cin = n(w)/cout; ONNX OIHW: K = n(w)/cout as well
            cout = w[-1] if op_type in ("Conv2D", "DepthwiseConv2dNative") else w[0]
            k = _n(w) // max(int(cout), 1)
        return 2.0 * n_out * float(k), nbytes
    if fam == "norm":
        return 8.0 * n_in, nbytes
    if fam == "norm_grad":
        return 10.0 * n_in, nbytes
    if fam == "softmax":
        return 5.0 * n_in, nbytes
    if fam == "reduce":
        return float(max(n_in, n_out)), nbytes
    if fam == "update":
        g = next((n for n in reversed(ins) if n), 0) or 0
        state = _UPDATE_STATE.get(op_type, 3)
        return float(_UPDATE_FLOPS.get(op_type, 2) * g), float(state * g * dtype_size)
    if fam == "move":
        return 0.0, nbytes
    # elementwise: one operation per output element per extra input
    arity = max(1, len([n for n in ins if n]) - 1)
    return float(max(n_out, n_in) * arity), nbytes


# ---------------------------------------------------------------------- roofline
def roofline_times(flops: np.ndarray, nbytes: np.ndarray, device: DeviceModel, *,
                   precision: str = "fp32", view: np.ndarray | None = None) -> np.ndarray:
    """Vectorised roofline: ``max(flops / peak, bytes / bw) + launch`` (0 where ``view``).

    >>> roofline_times(np.array([0.0, 1e9]), np.array([0.0, 0.0]), DEVICE_MODELS["V100"],
    ...                view=np.array([True, False])).round(4).tolist()
    [0.0, 0.0687]
    """
    if precision not in ("fp32", "tensor"):
        raise ClusterError(f"precision must be 'fp32' or 'tensor', got {precision!r}")
    peak = device.peak_flops if precision == "fp32" else device.tensor_flops
    t = np.maximum(np.asarray(flops, float) / peak, np.asarray(nbytes, float) / device.mem_bw)
    t = t + device.launch_ms
    if view is not None:
        t = np.where(view, 0.0, t)
    return t


def _model(m) -> DeviceModel:
    if isinstance(m, DeviceModel):
        return m
    if m not in DEVICE_MODELS:
        raise ClusterError(f"unknown device model {m!r}; known: {', '.join(DEVICE_MODELS)}")
    return DEVICE_MODELS[m]


def _work_arrays(graph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-op FLOPs, bytes and view flags in graph order; GraphError naming an op without."""
    n = graph.n_ops
    flops, nbytes, view = np.zeros(n), np.zeros(n), np.zeros(n, bool)
    for i, v in enumerate(graph.ops):
        a = graph.op(v)
        if a.get("flops") is None or a.get("bytes_moved") is None:
            raise GraphError(
                f"op {v!r} (type {a.get('op_type') or '?'}) of graph {graph.name!r} has no "
                f"FLOP/byte figures: device costs need op shapes (extract the model with "
                f"workbench.runtime.extract, or import it with workbench.io.onnx)")
        flops[i], nbytes[i] = float(a["flops"]), float(a["bytes_moved"])
        view[i] = _FAMILY_OF.get(a.get("op_type") or "") == "view"
    return flops, nbytes, view


def with_device_costs(graph, target="V100", *, kind: str = "gpu", precision: str = "fp32",
                      speed: float = 1.0):
    """A copy of ``graph`` whose compute costs on ``kind`` come from the roofline.

    Parameters
    ----------
    graph : OpGraph
        Every op needs ``flops`` and ``bytes_moved`` (set at extraction / ONNX import).
    target : str, DeviceModel or Cluster
        A device model (name in :data:`DEVICE_MODELS`), or a cluster (object or preset name
        in :data:`PRESET_DEVICE_MODELS`): then every device kind of the cluster gets the
        times of its device model, multiplied by the devices' ``speed`` (the simulator divides
        by it), so simulating gives the model's times.
    kind : str
        Device kind written when ``target`` is a device model.
    precision : {"fp32", "tensor"}
        Which peak to use (tensor cores: TF32 on A100/H100, FP16 on V100).
    speed : float
        Multiplier of the written times (use the ``speed`` of the cluster's devices).

    Raises
    ------
    GraphError
        An op without FLOP/byte figures (the message names it).
    ClusterError
        An unknown device model, or a cluster without a device model for one of its kinds.

    Examples
    --------
    >>> from workbench import OpGraph
    >>> g = OpGraph.from_ops([("mm", {"compute": {"cpu": 3.0}, "op_type": "MatMul",
    ...                               "flops": 2e9, "bytes_moved": 1e7})])
    >>> round(with_device_costs(g, "V100").op("mm")["compute"]["gpu"], 4)
    0.1324
    >>> a100 = with_device_costs(g, "8xA100-nvlink")
    >>> round(a100.op("mm")["compute"]["gpu"] / 1.7, 4), a100.op("mm")["compute"]["cpu"]
    (0.1076, 3.0)
    >>> with_device_costs(OpGraph.from_ops([("x", {"compute": {"cpu": 1}})]), "A100")
    Traceback (most recent call last):
    ...
    workbench.errors.GraphError: op 'x' (type ?) of graph 'graph' has no FLOP/byte figures: device costs need op shapes (extract the model with workbench.runtime.extract, or import it with workbench.io.onnx)
    """
    from ..cluster import Cluster

    jobs: list[tuple[str, DeviceModel, float]] = []
    if isinstance(target, Cluster) or (isinstance(target, str) and target not in DEVICE_MODELS
                                       and target in PRESET_DEVICE_MODELS):
        cluster = target if isinstance(target, Cluster) else Cluster.preset(target)
        models = PRESET_DEVICE_MODELS.get(cluster.name)
        if models is None:
            raise ClusterError(f"cluster {cluster.name!r} has no device models; pass a device "
                               f"model ({', '.join(DEVICE_MODELS)}) and kind= instead")
        for k in cluster.kinds:
            if k not in models:
                raise ClusterError(f"cluster {cluster.name!r}: no device model for kind {k!r}")
            speeds = {d.speed for d in cluster.devices if d.kind == k}
            if len(speeds) != 1:
                raise ClusterError(f"cluster {cluster.name!r}: devices of kind {k!r} differ in "
                                   f"speed; give each kind one device model")
            jobs.append((k, _model(models[k]), speeds.pop()))
    else:
        jobs.append((kind, _model(target), float(speed)))
    flops, nbytes, view = _work_arrays(graph)
    times = {k: roofline_times(flops, nbytes, m, precision=precision, view=view) * s
             for k, m, s in jobs}
    idx = graph.index

    def upd(v, a):
        comp = dict(a["compute"])
        for k, t in times.items():
            comp[k] = float(t[idx[v]])
        return {**a, "compute": comp}

    meta = dict(graph.meta)
    dc = dict(meta.get("device_costs") or {})
    dc.update({k: f"roofline:{m.name}:{precision}" for k, m, _ in jobs})
    meta["device_costs"] = dc
    out = graph.map_ops(upd)
    return type(graph)(out.to_networkx(), name=graph.name, meta=meta)


def costs_for_cluster(graph, cluster):
    """``graph`` with roofline costs for the device kinds of a preset cluster it was not
    measured on; unchanged when it has no FLOP figures or the cluster is no known preset.

    Measured costs (``meta["device_kind"]``, the kind a graph was profiled on) are kept, so a
    CPU-profiled sample on ``4xcpu`` keeps its profile and on ``8xA100-nvlink`` gets A100
    roofline times. The command line applies this to every graph it loads.

    >>> from workbench import Cluster, OpGraph
    >>> g = OpGraph.from_ops([("mm", {"compute": {"cpu": 3.0}, "op_type": "MatMul",
    ...                               "flops": 2e9, "bytes_moved": 1e7})],
    ...                      meta={"device_kind": "cpu"})
    >>> round(costs_for_cluster(g, Cluster.preset("2x4xV100")).op("mm")["compute"]["gpu"], 4)
    0.1324
    >>> costs_for_cluster(g, Cluster.preset("4xcpu")) is g
    True
    """
    models = PRESET_DEVICE_MODELS.get(getattr(cluster, "name", None))
    measured = (graph.meta or {}).get("device_kind")
    if not models or any(graph.op(v).get("flops") is None for v in graph.ops):
        return graph
    out = graph
    for k in cluster.kinds:
        if k == measured or k not in models:
            continue
        speeds = sorted({d.speed for d in cluster.devices if d.kind == k})
        out = with_device_costs(out, models[k], kind=k, speed=speeds[0])
    return out


# ---------------------------------------------------------------------- fitting
def fit_device(graphs: Iterable, *, kind: str = "cpu", name: str = "fitted",
               memory: float = math.inf, rounds: int = 24, weight: str = "ops") -> DeviceModel:
    """Fit ``peak_flops``, ``mem_bw`` and ``launch_ms`` to profiled graphs.

    Minimises the squared error of ``log(time)`` over every op with a measured time on
    ``kind`` and a kernel (not a view op), each op weighted by its share of its graph's
    measured time (``weight="time"``: what matters for a step; every graph counts equally)
    or all ops equally (``weight="ops"``): a grid over
    the logarithms of the three figures,
    then coordinate descent with golden-section searches around the best grid point
    (deterministic). The fitted model has one peak (``tensor_flops == peak_flops``).

    >>> from workbench import OpGraph
    >>> truth = DeviceModel("t", 0.05 * _T, 0.05 * _T, 8 * _G, 0.01)
    >>> rng = np.random.default_rng(0)
    >>> f, b = rng.uniform(1e3, 1e9, 300), rng.uniform(1e3, 1e8, 300)
    >>> t = roofline_times(f, b, truth)
    >>> g = OpGraph.from_ops([(f"o{i}", {"compute": {"cpu": t[i]}, "op_type": "MatMul",
    ...                                  "flops": f[i], "bytes_moved": b[i]}) for i in range(300)])
    >>> m = fit_device([g])
    >>> [round(x, 2) for x in (m.peak_flops / _T, m.mem_bw / _G, m.launch_ms)]
    [0.05, 8.0, 0.01]
    """
    fs, bs, ts, share = [], [], [], []
    for g in graphs:
        flops, nbytes, view = _work_arrays(g)
        first = len(ts)
        for i, v in enumerate(g.ops):
            t = g.op(v)["compute"].get(kind)
            if t is not None and t > 0 and not view[i] and (flops[i] > 0 or nbytes[i] > 0):
                fs.append(flops[i]), bs.append(nbytes[i]), ts.append(t)
        total = sum(ts[first:])
        share.extend(t / total for t in ts[first:])
    if len(ts) < 3:
        raise GraphError(f"fit_device needs at least 3 ops with a measured time on {kind!r} "
                         f"and FLOP/byte figures, got {len(ts)}")
    f, b, lt = np.array(fs), np.array(bs), np.log(np.array(ts))
    if weight not in ("time", "ops"):
        raise GraphError(f"weight must be 'time' or 'ops', got {weight!r}")
    w = np.array(share) if weight == "time" else np.ones_like(lt)
    w = w / w.sum()

    def loss(x):
        pred = np.maximum(f / math.exp(x[0]), b / math.exp(x[1])) + math.exp(x[2])
        return float(np.sum(w * (np.log(pred) - lt) ** 2))

    grids = [np.linspace(math.log(1e3), math.log(1e12), 28),   # FLOP/ms: 1 MFLOP/s .. 1 PF
             np.linspace(math.log(1e2), math.log(1e10), 25),   # bytes/ms: 0.1 MB/s .. 10 TB/s
             np.linspace(math.log(1e-6), math.log(10.0), 18)]  # ms
    best, x = math.inf, [0.0, 0.0, 0.0]
    for la in grids[2]:
        for pf in grids[0]:
            comp = f[None, :] / np.exp(pf)
            pred = np.maximum(comp, b[None, :] / np.exp(grids[1])[:, None]) + math.exp(la)
            err = ((np.log(pred) - lt[None, :]) ** 2) @ w
            j = int(np.argmin(err))
            if err[j] < best:
                best, x = float(err[j]), [float(pf), float(grids[1][j]), float(la)]
    steps = [g[1] - g[0] for g in grids]
    phi = (math.sqrt(5) - 1) / 2
    for r in range(rounds):
        for j in range(3):
            lo, hi = x[j] - steps[j] * 0.8 ** r, x[j] + steps[j] * 0.8 ** r
            for _ in range(40):
                a, c = hi - phi * (hi - lo), lo + phi * (hi - lo)
                xa, xc = list(x), list(x)
                xa[j], xc[j] = a, c
                if loss(xa) < loss(xc):
                    hi = c
                else:
                    lo = a
            cand = list(x)
            cand[j] = (lo + hi) / 2
            if loss(cand) <= loss(x):
                x = cand
    pf, bw, la = (math.exp(v) for v in x)
    return DeviceModel(name, pf, pf, bw, la, memory, f"fitted to {len(ts)} profiled ops")
