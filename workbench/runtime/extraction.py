"""Extraction: the operator DAG of one full TensorFlow training step as an :class:`OpGraph`.

:func:`build_program` builds a training step in a ``tf.compat.v1`` graph: the model's loss,
its gradients (``tf.gradients``, scope ``gradients/``) and plain SGD updates (scope ``train/``),
with the input batch held in variables so the step needs no feed. Because the whole step is one
GraphDef, every node of it -- forward, gradient and update ops alike -- can be given a device by
rewriting ``NodeDef.device`` (``tf.device`` scopes in a TF2 ``tf.function`` leave gradient ops
unplaced). :func:`extract` turns the step into an :class:`~workbench.graph.OpGraph`:

* ops: every node the train op depends on (data and control inputs), named as in the GraphDef,
  with ``op_type`` the TensorFlow op and ``kind`` ``bwd`` (``gradients/``), ``update``
  (``train/``), ``other`` (variables and the input batch) or ``fwd``;
* edges: data and control dependencies; ``bytes`` is the total size of the distinct output
  tensors the consumer reads (static shapes: the batch is fixed), 0 for control edges and
  resource handles;
* ``memory``: parameter bytes on variable nodes, plus, on forward ops, the bytes of outputs
  that a gradient op reads (activations stashed until the backward pass);
* ``colocate``: a variable, its reads and its updates form one group (TensorFlow runs resource
  ops where the resource lives), as do nodes tied by ``_class`` colocation attributes;
* ``compute``: an analytic estimate (FLOPs at a nominal rate) until :func:`~workbench.runtime.
  profile.profile` replaces it with measured times; ``graph.meta["costs"]`` says which;
* ``flops``, ``bytes_moved`` and ``shapes`` (output shapes): the work of the op for the device
  cost model (:mod:`workbench.costs.roofline`): TensorFlow's registered ``flops`` statistics
  (``ops.get_stats_for_node_def``) where the op type has one, the formulas of
  :func:`workbench.costs.roofline.op_work` otherwise; op types without a formula are costed as
  element-wise and listed in ``graph.meta["cost_fallback_types"]``.

``graph.meta["program"]`` records how to rebuild the program (model name, batch, sizes, seed,
learning rate), which is what the runner uses to apply plans to the saved sample graphs.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Callable
from numbers import Integral
from typing import Any

import networkx as nx

from ..errors import GraphError, RuntimeBridgeError
from ..graph import OpGraph
from ._tf import tf
from .program import Program, _input_name, finish_program

__all__ = [
    "Program",
    "build_program",
    "cpu_name",
    "extract",
    "finish_program",
    "program_for",
    "program_of",
    "program_to_opgraph",
]

_NOMINAL_FLOPS_PER_MS = 5e6  # 5 GFLOP/s: one core, used only for pre-profiling estimates


def cpu_name() -> str:
    """A short description of this machine's CPU (model name from /proc/cpuinfo if present)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def build_program(model_or_fn: str | Callable, batch: int, *, seed: int = 0, lr: float = 0.01,
                  **sizes) -> Program:
    """Build the training step of a model.

    Parameters
    ----------
    model_or_fn : str or callable
        A name of :data:`workbench.runtime.models.MODELS`, or a function
        ``fn(batch, **sizes) -> loss`` that builds a model with TensorFlow ops and
        ``tf.compat.v1.get_variable(..., use_resource=True)`` variables in the current graph.
    batch : int
        Batch size (fixed, so every tensor shape is static).
    seed, lr : graph-level random seed and SGD learning rate.
    **sizes : keyword arguments of the builder (layers, width, ...).

    Raises
    ------
    RuntimeBridgeError
        Unknown model name, or a builder that fails or returns no scalar loss.
    """
    from .models import MODELS

    t = tf()
    tf1 = t.compat.v1
    if isinstance(model_or_fn, str):
        if model_or_fn not in MODELS:
            raise RuntimeBridgeError(f"unknown model {model_or_fn!r}; known models: "
                                     f"{', '.join(MODELS)}")
        fn, model = MODELS[model_or_fn], model_or_fn
    elif callable(model_or_fn):
        fn, model = model_or_fn, ""
        if hasattr(model_or_fn, "trainable_variables") and hasattr(model_or_fn, "layers"):
            raise RuntimeBridgeError(
                "build_program takes tf.compat.v1 builders; for a Keras model use "
                "extract/program_of(model, batch, loss=..., optimizer=...)")
    else:
        raise RuntimeBridgeError(f"extract needs a model name or a builder function, got "
                                 f"{type(model_or_fn).__name__}")
    if isinstance(batch, bool) or not isinstance(batch, Integral) or batch < 1:
        raise RuntimeBridgeError(f"batch must be a positive integer, got {batch!r}")
    graph = t.Graph()
    try:
        with graph.as_default():
            tf1.set_random_seed(seed)
            loss = fn(int(batch), **sizes)
            if not isinstance(loss, t.Tensor) or loss.shape.rank != 0:
                raise RuntimeBridgeError(f"the model builder must return a scalar loss tensor, "
                                         f"got {loss!r}")
            variables = tf1.trainable_variables()
            if not variables:
                raise RuntimeBridgeError("the model has no trainable variables")
            grads = t.gradients(loss, variables)
            pairs = [(g, v) for g, v in zip(grads, variables) if g is not None]
            train = tf1.train.GradientDescentOptimizer(lr).apply_gradients(pairs, name="train")
            init = tf1.global_variables_initializer()
    except RuntimeBridgeError:
        raise
    except Exception as e:  # noqa: BLE001 - user builder or TF error
        raise RuntimeBridgeError(f"building model {model or fn!r} failed: "
                                 f"{type(e).__name__}: {e}") from None
    spec = {"model": model, "batch": int(batch), "sizes": dict(sizes), "seed": int(seed),
            "lr": float(lr)}
    return finish_program(graph, train.name, init.name, loss.name.split(":")[0], spec)


_PROGRAMS: dict[str, Program] = {}
_GIVEN_FILES: set[str] = set()  # model files the user named in this process (program_of)


def _remember(program: Program) -> Program:
    _PROGRAMS[json.dumps(program.spec, sort_keys=True)] = program
    return program


def program_for(graph: OpGraph) -> Program:
    """The program of an extracted graph, from ``graph.meta["program"]``: the one extracted in
    this process, else rebuilt (and cached) for a model of
    :data:`~workbench.runtime.models.MODELS` or a Keras spec (``keras:`` names, model files).

    Raises
    ------
    RuntimeBridgeError
        If the graph comes from a user's builder, Keras model or ``tf.function`` extracted in
        another process (pass ``program=`` to the runner, or re-extract it here).
    """
    spec = (graph.meta or {}).get("program")
    key = json.dumps(spec, sort_keys=True) if spec else None
    if key in _PROGRAMS:
        return _PROGRAMS[key]
    if spec is not None and not isinstance(spec, dict):
        raise RuntimeBridgeError(f"graph {graph.name!r}: meta['program'] must be a table, got "
                                 f"{type(spec).__name__}")
    _check_named_code(graph, spec)
    if spec and spec.get("keras"):
        from .keras_step import spec_program

        return _remember(spec_program(spec))
    if not spec or not spec.get("model"):
        raise RuntimeBridgeError(
            f"graph {graph.name!r} does not record a rebuildable model in meta['program'] (a "
            f"user's builder, Keras model or tf.function extracted in another process); "
            f"extract it again in this process or pass program=program_of(...)")
    _PROGRAMS[key] = build_program(spec["model"], spec["batch"], seed=spec.get("seed", 0),
                                   lr=spec.get("lr", 0.01), **(spec.get("sizes") or {}))
    return _PROGRAMS[key]


def _check_named_code(graph: OpGraph, spec: dict | None) -> None:
    """Refuse a ``meta['program']`` that names code to execute (a model file), unless the user
    gave that file to :func:`program_of` / ``extract`` in this process: a graph file is data,
    and data never chooses a program to run (built-in names -- :data:`MODELS`, ``keras:``
    application names and ``TransformerEncoder`` -- are not code and are rebuilt)."""
    ref = (spec or {}).get("keras")
    if not ref:
        return
    if isinstance(ref, str) and ref.isidentifier():
        return
    path = ref.rpartition(":")[0] if isinstance(ref, str) else ""
    if path and path in _GIVEN_FILES:
        return
    raise RuntimeBridgeError(
        f"graph {graph.name!r} names a model program {ref!r} in meta['program']: a graph file "
        f"is data and never chooses code to run; give the model yourself (workbench run "
        f"FILE.py:FUNCTION, or program=program_of('keras:FILE.py:FUNCTION', batch) in the API)")


def program_of(model_or_fn, batch: int | None = None, *, seed: int = 0, lr: float = 0.01,
               inputs=None, input_shape=None, loss=None, optimizer=None, **sizes) -> Program:
    """The :class:`Program` of any supported model (remembered for :func:`program_for`):

    * a name of :data:`~workbench.runtime.models.MODELS` or a v1 builder ``fn(batch, **sizes)``
      (:func:`build_program`; ``lr`` is its SGD rate);
    * ``"keras:NAME"`` (``NAME``: a ``keras.applications`` constructor, ``TransformerEncoder``
      or ``FILE.py:FUNCTION``), built with ``input_shape``, ``classes`` and ``**sizes``,
      compiled with ``loss`` (default sparse categorical cross-entropy) and ``optimizer``
      (default ``"sgd"``);
    * a Keras 3 model: compiled with ``loss`` and ``optimizer`` when given, else as it is;
      ``batch`` random examples of ``input_shape`` or ``inputs=(x, y)``;
    * a ``tf.function`` training step with its example ``inputs``.
    """
    from .keras_step import function_program, is_keras_model, is_tf_function, keras_program

    if isinstance(model_or_fn, str) and model_or_fn.startswith("keras:"):
        if batch is None:
            raise RuntimeBridgeError(f"{model_or_fn}: batch is required")
        classes = int(sizes.pop("classes", 10))
        ref = model_or_fn[len("keras:"):]
        if ".py" in ref:  # a model file: its absolute path, so other processes rebuild it
            from pathlib import Path

            path, _, fn = ref.partition(".py")
            ref = f"{Path(path + '.py').resolve()}:{fn.lstrip(':') or 'build'}"
            _GIVEN_FILES.add(ref.rpartition(":")[0])  # named by the user: may be rebuilt
        spec = {"keras": ref, "batch": int(batch),
                "input_shape": None if input_shape is None else [int(d) for d in input_shape],
                "classes": classes, "loss": loss or "sparse_categorical_crossentropy",
                "optimizer": optimizer or "sgd", "seed": int(seed), "sizes": dict(sizes)}
        from .keras_step import spec_program

        return _remember(spec_program(spec))
    if is_keras_model(model_or_fn):
        return _remember(keras_program(model_or_fn, batch, input_shape=input_shape, loss=loss,
                                       optimizer=optimizer, inputs=inputs, seed=seed))
    if is_tf_function(model_or_fn):
        if inputs is None:
            raise RuntimeBridgeError("a tf.function training step needs its example inputs: "
                                     "inputs=(x, y, ...)")
        return _remember(function_program(model_or_fn, inputs))
    if inputs is not None:
        raise RuntimeBridgeError(f"inputs= are for a tf.function training step or a Keras "
                                 f"model, got {type(model_or_fn).__name__} (decorate the step "
                                 f"with @tf.function)")
    if batch is None:
        raise RuntimeBridgeError("batch is required for a model name or builder")
    program = build_program(model_or_fn, batch, seed=seed, lr=lr, **sizes)
    return _remember(program) if program.spec.get("model") else program


ONEDNN_WORKSPACE = {"MaxPool": 0.25}
"""Op types whose oneDNN (MKL) kernel, in a training step, writes a workspace beside its
output that the gradient reads (bytes per output byte): oneDNN's max pooling keeps the
position of each window's maximum, one ``u8`` per float32 output element. Measured on
inception_small (TF's tracking allocator): a MaxPool of 786,432 output bytes allocates
983,040 (docs/results-memory.md)."""


def onednn_enabled() -> bool:
    """Does this TensorFlow run its CPU kernels through oneDNN (the ``mklcpu`` allocator)?"""
    try:
        from tensorflow.python.util import _pywrap_util_port
    except ImportError:  # pragma: no cover - a TensorFlow build without the port module
        return False
    return bool(_pywrap_util_port.IsMklEnabled())


def _op_kind(name: str, op_type: str, train_op: str) -> str:
    if name.startswith("gradients/"):
        return "bwd"
    if name == train_op or name.startswith(train_op + "/"):
        return "update"
    if op_type in ("VarHandleOp", "VariableV2") or name.startswith("data/"):
        return "other"
    return "fwd"


def _estimate_ms(node, out: list, shapes_in: list) -> float:
    """FLOP-based compute estimate of one node (used until the graph is profiled)."""
    n_out = sum(out) / 4.0
    flops = n_out
    t = node.op
    if t in ("MatMul", "BatchMatMulV2", "BatchMatMul", "BatchMatMulV3") and shapes_in:
        k = shapes_in[0]
        flops = 2.0 * n_out * max(k, 1)
    elif t.startswith("Conv2D") and shapes_in:
        flops = 2.0 * n_out * max(shapes_in[0], 1)
    return 0.002 + flops / _NOMINAL_FLOPS_PER_MS


def _shape(t) -> list | None:
    """Static shape of a tensor as a list (None: unknown rank or a resource handle)."""
    if t.shape.rank is None:
        return None
    return [(-1 if d is None else int(d)) for d in t.shape.as_list()]


def op_work_tf(op, out_bytes: list, fallback: set) -> tuple[float, float]:
    """FLOPs (TensorFlow's registered statistics first) and bytes moved of one tf.Operation."""
    from tensorflow.python.framework import ops as tf_ops

    from ..costs.roofline import op_family, op_work

    t = tf()
    flops = None
    try:
        stat = tf_ops.get_stats_for_node_def(op.graph, op.node_def, "flops")
        flops = None if stat.value is None else float(stat.value)
    except Exception:  # noqa: BLE001 - a statistic that cannot evaluate its shapes
        flops = None
    in_shapes, in_sizes = [], []
    for x in op.inputs:
        if x.dtype in (t.resource, t.variant):
            in_shapes.append(None), in_sizes.append(0)
            continue
        shp = _shape(x)
        n = 1
        for d in shp or [-1]:
            n = n * d if d >= 0 else 0
        in_shapes.append(shp), in_sizes.append(n * x.dtype.size)
    out_shapes = [None if o.dtype in (t.resource, t.variant) else _shape(o) for o in op.outputs]
    attrs = {}
    for a in ("transpose_a", "adj_x"):
        try:
            attrs[a] = bool(op.get_attr(a))
        except (ValueError, TypeError):
            pass
    if op.type.startswith("ResourceApply") and op.inputs:
        # the update reads and writes the variable: its size is the gradient's
        in_shapes = [s for s in in_shapes if s is not None]
    if op_family(op.type) is None:
        fallback.add(op.type)
    try:
        f, b = op_work(op.type, in_shapes, out_shapes, in_sizes=in_sizes,
                       out_sizes=list(out_bytes), attrs=attrs, unknown="elementwise",
                       op=op.name)
    except GraphError:  # a matmul/conv of unknown shape: bytes only
        f, b = 0.0, float(sum(in_sizes) + sum(out_bytes))
    if flops is None or op_family(op.type) == "update":
        flops = f
    return float(flops), float(b)


def _with_split_dims(graph: OpGraph) -> OpGraph:
    """The extracted graph with FastT's split dimensions on every op (batch, conv channels,
    matmul columns), derived from op types and shapes by
    :func:`workbench.transforms.split_dims.with_split_dims`."""
    from ..transforms.split_dims import with_split_dims

    return with_split_dims(graph)


def program_to_opgraph(program: Program, *, kind: str = "cpu", times: dict | None = None,
                       name: str | None = None, meta: dict | None = None) -> OpGraph:
    """The OpGraph of a program's step; ``times`` (node -> ms) replaces the estimates."""
    t = tf()
    nodes = program.nodes
    step = set(program.step_nodes)
    # contraction lengths for the FLOP estimate: inner dimension of matmuls / kernel volume
    inner: dict = {}
    g = t.Graph()
    with g.as_default():
        t.graph_util.import_graph_def(program.graph_def, name="")
    work: dict = {}
    shapes: dict = {}
    fallback: set = set()
    for op in g.get_operations():
        if op.name not in step:
            continue
        work[op.name] = op_work_tf(op, program.out_bytes.get(op.name, []), fallback)
        shapes[op.name] = [None if o.dtype == t.resource else _shape(o) for o in op.outputs]
        if op.type in ("MatMul",) and op.inputs[0].shape.rank == 2:
            ta = op.get_attr("transpose_a")
            inner[op.name] = [int(op.inputs[0].shape[0 if ta else 1])]
        elif op.type.startswith("BatchMatMul") and op.inputs[0].shape.rank:
            adj = op.get_attr("adj_x")
            inner[op.name] = [int(op.inputs[0].shape[-2 if adj else -1])]
        elif op.type.startswith("Conv2D") and op.type == "Conv2D":
            ks = op.inputs[1].shape
            inner[op.name] = [int(ks[0]) * int(ks[1]) * int(ks[2])]
    # colocation groups: resource edges and _class attributes
    uf = nx.utils.UnionFind(program.step_nodes)
    for a, b in program.resource_edges:
        if a in step and b in step:
            uf.union(a, b)
    for v in program.step_nodes:
        nd = nodes[v]
        if "_class" in nd.attr:
            for s in nd.attr["_class"].list.s:
                s = s.decode()
                if s.startswith("loc:@") and s[5:] in step:
                    uf.union(v, s[5:])
    groups: dict = {}
    for members in uf.to_sets():
        if len(members) > 1:
            ms = sorted(members)
            var = next((m for m in ms if nodes[m].op in ("VarHandleOp", "VariableV2")), ms[0])
            for m in ms:
                groups[m] = f"var:{var}"
    # edges
    edges: dict = {}
    for v in program.step_nodes:
        nd = nodes[v]
        used: dict = {}
        for s in nd.input:
            u, k, ctrl = _input_name(s)
            if u not in step:
                continue
            used.setdefault(u, set())
            if not ctrl:
                used[u].add(k)
        for u, ks in used.items():
            outs = program.out_bytes.get(u, [])
            edges[(u, v)] = float(sum(outs[k] for k in ks if k < len(outs)))
    kinds = program.kinds or {v: _op_kind(v, nodes[v].op, program.train_op)
                              for v in program.step_nodes}
    layers = program.layers or {}
    memory = {v: 0.0 for v in program.step_nodes}
    for v in program.step_nodes:
        nd = nodes[v]
        if nd.op == "VarHandleOp":
            shape = [d.size for d in nd.attr["shape"].shape.dim]
            n = 1
            for d in shape:
                n *= max(int(d), 0)
            memory[v] = float(n * t.as_dtype(nd.attr["dtype"].type).size)
    workspace: dict = {}
    for (u, v), b in edges.items():
        # a variable read is a view of the variable, already charged on the variable's node
        if kinds[u] == "fwd" and kinds[v] == "bwd" and nodes[u].op != "ReadVariableOp":
            memory[u] = max(memory[u], sum(program.out_bytes.get(u, [0])))
            if nodes[u].op in ONEDNN_WORKSPACE and onednn_enabled():
                workspace[u] = ONEDNN_WORKSPACE[nodes[u].op] * sum(program.out_bytes.get(u, [0]))
    ops = []
    for v in program.step_nodes:
        nd = nodes[v]
        if times is not None and v in times:
            ms = float(times[v])
        else:
            ms = _estimate_ms(nd, program.out_bytes.get(v, []), inner.get(v, []))
        ops.append((v, {"compute": {kind: ms}, "memory": memory[v], "kind": kinds[v],
                        "colocate": groups.get(v), "op_type": nd.op,
                        "out_bytes": float(sum(program.out_bytes.get(v, []))),
                        "flops": work[v][0], "bytes_moved": work[v][1],
                        "shapes": shapes[v],
                        **({"workspace_bytes": workspace[v]} if v in workspace else {}),
                        **({"layer": layers[v]} if v in layers else {})}))
    spec = program.spec
    param_bytes = sum(memory[v] for v in program.step_nodes
                      if nodes[v].op == "VarHandleOp" and kinds[v] == "other"
                      and not v.startswith("data/"))
    m = {"source": "tensorflow",
         "model": spec.get("model") or (f"keras:{spec['keras']}" if spec.get("keras")
                                        else "custom"),
         "batch": spec.get("batch"), "tf_version": t.__version__, "device": cpu_name(),
         "device_kind": kind, "costs": "profiled" if times is not None else "estimated",
         "param_bytes": float(param_bytes), "program": spec,
         "unknown_shapes": program.unknown_shapes,
         "cost_fallback_types": sorted(fallback)}
    m.update(meta or {})
    try:
        return _with_split_dims(OpGraph.from_ops(
            ops, [(u, v, {"bytes": b}) for (u, v), b in edges.items()],
            name=name or m["model"], meta=m))
    except GraphError as e:  # pragma: no cover - a TF graph is always a DAG
        raise RuntimeBridgeError(f"the extracted step is not a valid op graph: {e}") from None


def extract(model_or_fn: Any, batch: int | None = None, *, kind: str = "cpu", seed: int = 0,
            lr: float = 0.01, name: str | None = None, inputs=None, input_shape=None,
            loss=None, optimizer=None, **sizes) -> OpGraph:
    """The OpGraph of one full training step (forward, backward, update) of a model.

    Costs are FLOP estimates (``meta["costs"] == "estimated"``); pass the result to
    :func:`workbench.runtime.profile` for measured times.

    Parameters
    ----------
    model_or_fn : str, callable, Keras model or tf.function
        Model name (see :mod:`workbench.runtime.models`), builder ``fn(batch, **sizes)``,
        ``"keras:NAME"``, a Keras 3 model or a ``tf.function`` training step (see
        :func:`program_of` and :mod:`workbench.runtime.keras_step`).
    batch : int
        Batch size (not needed for a ``tf.function`` or a Keras model given ``inputs``).
    kind : str
        Device kind the compute costs are written for.
    inputs, input_shape, loss, optimizer : for Keras models and ``tf.function`` steps.
    **sizes : builder keyword arguments (``classes=`` for ``keras:`` names).

    Examples
    --------
    >>> from workbench.runtime import extract
    >>> g = extract("mlp", 8, layers=1, width=16, in_dim=16)
    >>> sorted(set(g.op(v)["kind"] for v in g.ops))
    ['bwd', 'fwd', 'other', 'update']
    >>> g.op("fc0/w")["memory"], g.op("fc0/w")["colocate"]
    (1024.0, 'var:fc0/w')
    >>> g.op("train/update_fc0/w/ResourceApplyGradientDescent")["colocate"]
    'var:fc0/w'
    """
    program = program_of(model_or_fn, batch, seed=seed, lr=lr, inputs=inputs,
                         input_shape=input_shape, loss=loss, optimizer=optimizer, **sizes)
    return program_to_opgraph(program, kind=kind, name=name)
