"""Keras 3 models and ``tf.function`` training steps as runnable :class:`Program` s.

TensorFlow 2.16+ runs Keras 3 eagerly or inside ``tf.function``; a Keras model cannot be built
into a ``tf.compat.v1`` graph. What TensorFlow really executes for one training step is the
graph of the step's *concrete function* (``step.get_concrete_function(*inputs).graph``): the
forward ops, the gradient ops that ``GradientTape`` generated (scope ``gradient_tape/``) and the
optimizer's update ops, all in one ``FuncGraph`` whose variables enter as captured
resource-handle placeholders and whose inputs are placeholders. :func:`function_program` turns
that graph into a :class:`~workbench.runtime.extraction.Program` the runner can place op by op:

1. the concrete function's ``GraphDef`` is taken as is (function calls and ``If`` conditionals,
   if any, are first inlined and lowered by Grappler's function optimizer; loops are refused:
   the op graph is a DAG);
2. every captured variable placeholder becomes a ``VarHandleOp`` named by the Keras variable
   path (``Conv1/kernel``), initialised from a fed placeholder (``init/Conv1/kernel``) with the
   variable's current value, so the program starts from the model's own weights;
3. every input placeholder becomes a variable ``data/<input>`` holding the example batch, read
   by ``data/<input>/read`` (the step needs no feed, like the bundled models);
4. a ``NoOp`` ``train_step`` depends on the function's outputs and control outputs (the
   stateful ops ``tf.function`` runs automatically): the step is its closure.

The re-imported ``GraphDef`` is an ordinary v1 graph: the runner sets each node's device and the
control dependencies of its per-device order, and a ``Session`` creates the variables on the
devices of their update ops (resource ops are colocated with their variable).

Each op records its Keras layer (``layer`` attribute of the extracted graph): the innermost
component of its name scope that names a layer (Keras 3 suffixes scopes, ``Conv1_1`` for layer
``Conv1``), for a gradient op the layer of the forward op it differentiates, else the layer of
the variable it reads or updates.

Bundled Keras models for tests, notebooks and ``workbench run``: ``keras:<Application>``
(any ``keras.applications`` constructor, built with ``weights=None``) and
``keras:TransformerEncoder`` (:func:`transformer_encoder`, MultiHeadAttention layers); a
Python file ``path.py:fn`` whose ``fn(**kw)`` returns a Keras model is accepted the same way.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import networkx as nx
import numpy as np

from .._native import load_user_file
from ..errors import RuntimeBridgeError
from ._tf import tf
from .program import finish_program, step_dag

__all__ = [
    "function_program",
    "is_keras_model",
    "is_tf_function",
    "keras_model_from_spec",
    "keras_program",
    "layer_costs",
    "layer_of",
    "transformer_encoder",
]

_CALL_OPS = {"PartitionedCall", "StatefulPartitionedCall", "If", "StatelessIf", "Case",
             "StatelessCase", "While", "StatelessWhile"}
_LOOP_OPS = {"Enter", "Exit", "NextIteration", "LoopCond", "While", "StatelessWhile"}
_WRITE_OPS = re.compile(r"^(Assign(Add|Sub)?VariableOp|ResourceApply.*|ResourceScatter.*)$")


def is_keras_model(obj: Any) -> bool:
    """Whether ``obj`` is a Keras 3 model (without importing Keras when it is not loaded)."""
    import sys

    keras = sys.modules.get("keras")
    return keras is not None and isinstance(obj, keras.Model)


def is_tf_function(obj: Any) -> bool:
    """Whether ``obj`` is a ``tf.function`` (it has concrete functions to trace)."""
    return callable(getattr(obj, "get_concrete_function", None)) and not is_keras_model(obj)


# ---------------------------------------------------------------------- layer names
def _strip_suffix(component: str) -> str:
    m = re.match(r"^(.*)_\d+$", component)
    return m.group(1) if m else component


def layer_of(op_name: str, layers: set) -> str | None:
    """The Keras layer an op name belongs to: the scope components naming layers, outer to
    inner (``enc0_mha/query`` for a MultiHeadAttention's query projection).

    Keras 3 opens each layer's name scope inside the traced function with a ``_N`` suffix, so
    a component matches a layer after one trailing ``_N`` is stripped, else as it is.

    >>> layer_of("gradient_tape/model_1/Conv1_1/convolution/Conv2DBackpropFilter", {"Conv1"})
    'Conv1'
    >>> layer_of("model_1/mha_1/query_1/MatMul", {"mha", "query"})
    'mha/query'
    >>> layer_of("dense_1_1/MatMul", {"dense", "dense_1"}), layer_of("sgd_1/mul", {"dense"})
    ('dense_1', None)
    """
    found = []
    for comp in op_name.split("/")[:-1]:
        base = _strip_suffix(comp)
        if base in layers:
            found.append(base)
        elif comp in layers:
            found.append(comp)
    return "/".join(found) or None


def _op_layers(G: nx.DiGraph, step: Sequence, var_names: dict, layers: set,
               resource_src: dict, model_name: str | None) -> dict:
    """Op -> Keras layer: by name scope, else the variable it reads/updates, else the one layer
    of its consumers, producers or variable's users (the optimizer's arithmetic and slots)."""
    inner = layers - {model_name} if model_name else layers
    out: dict = {}
    for v in step:
        if v in var_names:
            out[v] = layer_of(var_names[v] + "/x", inner)
        elif v in resource_src:  # a read or an update: its variable's layer
            out[v] = layer_of(var_names.get(resource_src[v], "") + "/x", inner)
        else:
            out[v] = layer_of(v, inner)
    # the rest (optimizer arithmetic, slot variables): the one layer of their consumers, else
    # of their producers, else of the ops sharing their variable, until nothing changes
    producers, consumers = G.pred, G.succ
    users: dict = {}
    for b, a in resource_src.items():
        users.setdefault(a, []).append(b)
    changed = True
    while changed:
        changed = False
        for around, order in ((consumers, reversed(step)), (producers, step), (users, step)):
            for v in order:
                if out[v] is None:
                    got = {out[c] for c in around.get(v, ()) if out.get(c) is not None}
                    if len(got) == 1:
                        out[v] = got.pop()
                        changed = True
    return {v: lay for v, lay in out.items() if lay is not None}


def layer_costs(graph, kind: str = "cpu"):
    """Per Keras layer of an extracted graph: its ops and their compute (ms on ``kind``) split
    into forward, backward and update, largest total first (a pandas DataFrame). Ops without a
    layer (the loss, the batch) are summed under ``"(none)"``.

    >>> from workbench.graph import OpGraph
    >>> g = OpGraph.from_ops([("a", {"compute": {"cpu": 1.0}, "kind": "fwd", "layer": "fc"}),
    ...                       ("b", {"compute": {"cpu": 2.0}, "kind": "bwd", "layer": "fc"}),
    ...                       ("c", {"compute": {"cpu": 0.5}, "kind": "fwd"})])
    >>> layer_costs(g).to_dict("records")[0]
    {'layer': 'fc', 'ops': 2, 'fwd_ms': 1.0, 'bwd_ms': 2.0, 'update_ms': 0.0, 'total_ms': 3.0}
    """
    import pandas as pd

    rows: dict = {}
    for v in graph.ops:
        a = graph.op(v)
        r = rows.setdefault(a.get("layer") or "(none)", {"ops": 0, "fwd_ms": 0.0, "bwd_ms": 0.0,
                                                          "update_ms": 0.0, "total_ms": 0.0})
        ms = float(a["compute"].get(kind, 0.0))
        r["ops"] += 1
        r["total_ms"] += ms
        if f"{a.get('kind')}_ms" in r:
            r[f"{a['kind']}_ms"] += ms
    df = pd.DataFrame([{"layer": k, **r} for k, r in rows.items()])
    return df.sort_values("total_ms", ascending=False, kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------------- the concrete graph
def _inline(cf, gd):
    """The GraphDef with function calls inlined and conditionals lowered; loops refused."""
    if gd.library.function or any(n.op in _CALL_OPS for n in gd.node):
        from tensorflow.python.framework import convert_to_constants as c2c

        gd = c2c._run_inline_graph_optimization(cf, True, True)
    for n in gd.node:
        if n.op in _LOOP_OPS:
            raise RuntimeBridgeError(
                f"the training step contains a loop (op {n.name!r}, {n.op}): the workbench's op "
                f"graph is a DAG; unroll it (e.g. keras RNN layers with unroll=True)")
        if n.op in _CALL_OPS:
            raise RuntimeBridgeError(f"op {n.name!r} ({n.op}) calls a function that could not "
                                     f"be inlined into the step")
    return gd


def _unique(name: str, taken: set) -> str:
    out, k = name, 1
    while out in taken:
        k += 1
        out = f"{name}_{k}"
    taken.add(out)
    return out


def _state_nodes(entries: list, taken: set):
    """Scratch nodes for variables and data: ``(name, value, read)`` -> VarHandleOp, the init
    placeholder and assign, and a ReadVariableOp when ``read``. Returns (node_defs, init
    assign names, feed name -> value)."""
    t = tf()
    g = t.Graph()
    assigns, feed = [], {}
    with g.as_default():
        for name, value, read in entries:
            dt = t.as_dtype(value.dtype)
            h = t.raw_ops.VarHandleOp(dtype=dt, shape=value.shape, shared_name=name, name=name)
            ph_name = _unique(f"init/{name}", taken)
            ph = t.compat.v1.placeholder(dt, value.shape, name=ph_name)
            a = t.raw_ops.AssignVariableOp(resource=h, value=ph, name=_unique(f"{ph_name}/assign",
                                                                              taken))
            assigns.append(a.name)
            feed[ph.name] = value
            if read:
                t.raw_ops.ReadVariableOp(resource=h, dtype=dt, name=f"{name}/read")
    return list(g.as_graph_def().node), assigns, feed


def _captured_variables(cf, variables: Sequence) -> dict:
    """Captured placeholder name -> (variable name, variable) or (None, constant value)."""
    by_handle = {}
    for v in list(cf.variables) + list(variables):  # Keras variables (with a path) win
        by_handle[id(v.handle)] = v
    out = {}
    for ext, internal in cf.graph.captures:
        name = internal.op.name
        if ext.dtype == tf().resource:
            var = by_handle.get(id(ext))
            if var is None:
                raise RuntimeBridgeError(f"the step captures a resource {name!r} that is not a "
                                         f"variable of the model or the optimizer")
            out[name] = (getattr(var, "path", None) or var.name.split(":")[0], var)
        else:
            out[name] = (None, np.asarray(ext))
    return out


def _merge(gd, captured: dict, args: list, arg_values: list):
    """The step's GraphDef with variables and data inputs turned into state nodes (see the
    module docstring). Returns (graph_def, init assign names, feed, {node: variable path})."""
    t = tf()
    taken = {n.name for n in gd.node}
    rename: dict = {}
    entries, const_nodes = [], {}
    var_names: dict = {}
    for ph, (vname, obj) in captured.items():
        if vname is None:
            const_nodes[ph] = obj
            continue
        taken.discard(ph)
        name = _unique(vname, taken)
        rename[ph] = name
        var_names[name] = vname
        entries.append((name, np.asarray(obj.numpy()), False))
    for ph, value in zip(args, arg_values):
        taken.discard(ph)
        name = _unique(f"data/{ph}", taken)
        taken.add(f"{name}/read")
        rename[ph] = f"{name}/read"
        entries.append((name, np.asarray(value), True))
    extra, assigns, feed = _state_nodes(entries, taken)
    out = t.compat.v1.GraphDef()
    out.versions.CopyFrom(gd.versions)
    for n in gd.node:
        if n.name in rename:
            continue
        nd = out.node.add()
        nd.CopyFrom(n)
        if n.name in const_nodes:
            val = const_nodes[n.name]
            nd.op = "Const"
            nd.ClearField("attr")
            nd.attr["dtype"].type = t.as_dtype(val.dtype).as_datatype_enum
            nd.attr["value"].tensor.CopyFrom(t.make_tensor_proto(val))
            continue
        for i, s in enumerate(n.input):
            ctrl = s.startswith("^")
            base, _, port = s.lstrip("^").partition(":")
            if base in rename:
                nd.input[i] = ("^" if ctrl else "") + rename[base] + (f":{port}" if port else "")
    out.node.extend(extra)
    return out, assigns, feed, var_names


def _kinds(nodes: dict, step: Sequence, G: nx.DiGraph, var_nodes: set) -> dict:
    """fwd / bwd (``gradient_tape/``) / update (what consumes gradients, and the optimizer's
    own scope) / other (variables, the input batch). ``G``: the step's dependency DAG."""
    bwd = {v for v in step if "gradient_tape/" in v}
    after, stack = set(), list(bwd)  # everything downstream of a gradient op
    while stack:
        for w in G.successors(stack.pop()):
            if w not in after:
                after.add(w)
                stack.append(w)
    update = after - bwd
    scopes = {v.split("/", 1)[0] for v in update if "/" in v and _WRITE_OPS.match(nodes[v].op)}
    out = {}
    for v in step:
        if v in var_nodes or v.startswith("data/"):
            out[v] = "other"
        elif v in bwd:
            out[v] = "bwd"
        elif v in update or (v.split("/", 1)[0] in scopes and "/" in v):
            out[v] = "update"
        else:
            out[v] = "fwd"
    return out


def function_program(fn: Callable, inputs: Sequence, *, variables: Sequence = (),
                     spec: dict | None = None, layers: set | None = None,
                     model_name: str | None = None):
    """The :class:`Program` of the step a ``tf.function`` really runs on ``inputs``.

    Parameters
    ----------
    fn : tf.function
        The training step (forward, ``GradientTape`` gradients, optimizer update); it is traced
        once with ``inputs`` (``fn.get_concrete_function(*inputs)``).
    inputs : sequence
        Example arguments (tensors or arrays; their values become the program's input batch).
    variables : sequence, optional
        Variables the step uses, to name them (captured variables are found in any case).
    spec : dict, optional
        How to rebuild the program (``meta["program"]`` of the extracted graph); default: a
        unique key valid in this process only.
    layers, model_name : Keras layer names to map ops to, and the outer model's name.

    Examples
    --------
    >>> import tensorflow as tf
    >>> w = tf.Variable(tf.ones([4, 2]), name="w")
    >>> @tf.function
    ... def step(x):
    ...     with tf.GradientTape() as tape:
    ...         loss = tf.reduce_sum(tf.matmul(x, w) ** 2)
    ...     w.assign_sub(0.1 * tape.gradient(loss, w))
    ...     return loss
    >>> p = function_program(step, [tf.ones([3, 4])])
    >>> p.train_op, "w" in p.step_nodes, "data/x/read" in p.step_nodes
    ('train_step', True, True)
    """
    t = tf()
    if not is_tf_function(fn):
        raise RuntimeBridgeError(f"expected a tf.function training step, got "
                                 f"{type(fn).__name__} (decorate it with @tf.function)")
    flat = [x for x in t.nest.flatten(list(inputs)) if isinstance(x, (t.Tensor, np.ndarray))
            or hasattr(x, "__array__")]
    try:
        cf = fn.get_concrete_function(*inputs)
    except Exception as e:  # noqa: BLE001 - the user's step failed to trace
        raise RuntimeBridgeError(f"tracing the training step failed: {type(e).__name__}: "
                                 f"{e}") from None
    internal = {id(i) for _, i in cf.graph.captures}
    args = [x.op.name for x in cf.graph.inputs if id(x) not in internal]
    if len(args) != len(flat):
        raise RuntimeBridgeError(f"the step has {len(args)} tensor inputs but {len(flat)} "
                                 f"example tensors were given")
    gd = _inline(cf, cf.graph.as_graph_def())
    captured = _captured_variables(cf, variables)
    gd, assigns, feed, var_names = _merge(gd, captured, args, [np.asarray(x) for x in flat])
    taken = {n.name for n in gd.node}
    loss = ""
    for o in cf.graph.outputs:
        if o.shape.rank == 0 and o.dtype.is_floating:
            loss = o.op.name
            break
    graph = t.Graph()
    try:
        with graph.as_default():
            t.graph_util.import_graph_def(gd, name="")
            outs = [graph.get_operation_by_name(o.op.name) for o in cf.graph.outputs]
            ctrl = [graph.get_operation_by_name(o.name) for o in cf.graph.control_outputs
                    if o.name in taken]
            with t.control_dependencies(outs + ctrl):
                train = t.no_op(name=_unique("train_step", taken))
            with t.control_dependencies([graph.get_operation_by_name(a) for a in assigns]):
                init = t.no_op(name=_unique("init", taken))
    except RuntimeBridgeError:
        raise
    except Exception as e:  # noqa: BLE001 - a graph TF cannot re-import
        raise RuntimeBridgeError(f"re-importing the step's graph failed: {type(e).__name__}: "
                                 f"{e}") from None
    spec = dict(spec or {"model": "", "key": uuid.uuid4().hex})
    if "batch" not in spec and flat and np.ndim(flat[0]) >= 1:
        spec["batch"] = int(np.shape(flat[0])[0])  # the first input's leading dimension
    program = finish_program(graph, train.name, init.name, loss, spec, init_feed=feed)
    nodes, G = program.nodes, step_dag(program)
    var_nodes = set(var_names) | {n for n in program.step_nodes if nodes[n].op == "VarHandleOp"}
    program.kinds = _kinds(nodes, program.step_nodes, G, var_nodes)
    res_src = {b: a for a, b in program.resource_edges}
    # a Keras model names its layers; a bare step's variables name theirs (``dense/kernel``)
    names = set(layers) if layers else {p.rsplit("/", 1)[0].split("/")[-1]
                                        for p in var_names.values() if "/" in p}
    program.layers = _op_layers(G, program.step_nodes, var_names, names, res_src, model_name)
    return program


# ---------------------------------------------------------------------- Keras models
def _keras():
    tf()
    import keras

    return keras


def _example_batch(model, batch: int, input_shape, loss, seed: int):
    """A random input batch of the model's input shape and labels that fit its loss."""
    keras = _keras()
    rng = np.random.default_rng(seed)
    if input_shape is None:
        shp = getattr(model, "input_shape", None)
        if shp is None or isinstance(shp, list) or any(d is None for d in shp[1:]):
            raise RuntimeBridgeError(f"model {model.name!r}: pass input_shape= (its input "
                                     f"shape {shp} is not fully known)")
        input_shape = shp[1:]
    x = rng.standard_normal((int(batch), *[int(d) for d in input_shape])).astype("float32")
    y_pred = keras.ops.convert_to_numpy(model(x, training=False))
    name = loss if isinstance(loss, str) else getattr(loss, "name", "") or ""
    if "sparse" in str(name):
        y = rng.integers(0, y_pred.shape[-1], size=y_pred.shape[:-1]).astype("int32")
    elif "categorical" in str(name):
        y = np.eye(y_pred.shape[-1], dtype="float32")[rng.integers(0, y_pred.shape[-1],
                                                                   y_pred.shape[:-1])]
    else:
        y = rng.standard_normal(y_pred.shape).astype("float32")
    return x, y


def keras_program(model, batch: int | None = None, *, input_shape=None, loss=None,
                  optimizer=None, inputs: Sequence | None = None, seed: int = 0,
                  spec: dict | None = None):
    """The :class:`Program` of one ``model.train_step`` (what ``model.fit`` runs per batch).

    ``loss`` and ``optimizer`` (names or objects) compile the model with them; without them
    the model must already be compiled. ``inputs=(x, y)`` gives the batch, else a random batch
    of ``batch`` examples of ``input_shape`` (default: the model's) with labels fitting the loss.

    >>> import keras
    >>> m = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4, name="fc")], name="net")
    >>> p = keras_program(m, 2, loss="mse", optimizer="sgd")
    >>> p.layers["net/fc/kernel"], sorted(set(p.kinds.values()))
    ('fc', ['bwd', 'fwd', 'other', 'update'])
    """
    _keras()  # Keras loaded: is_keras_model can recognise the model
    if not is_keras_model(model):
        raise RuntimeBridgeError(f"expected a Keras model, got {type(model).__name__}")
    if loss is not None or optimizer is not None:
        if loss is None or optimizer is None:
            raise RuntimeBridgeError("pass both loss= and optimizer= (or a compiled model)")
        try:
            model.compile(loss=loss, optimizer=optimizer)
        except (ValueError, TypeError) as e:  # an unknown optimizer or loss name (issue 41)
            msg = (str(e).strip().splitlines() or [""])[0][:300]
            raise RuntimeBridgeError(f"compiling Keras model {model.name!r} with loss={loss!r} "
                                     f"and optimizer={optimizer!r} failed: {msg}") from None
    if getattr(model, "optimizer", None) is None or not getattr(model, "compiled", False):
        raise RuntimeBridgeError(f"Keras model {model.name!r} is not compiled: pass loss= and "
                                 f"optimizer= (e.g. loss='sparse_categorical_crossentropy', "
                                 f"optimizer='sgd')")
    if inputs is None:
        if batch is None or int(batch) < 1:
            raise RuntimeBridgeError(f"batch must be a positive integer, got {batch!r}")
        inputs = _example_batch(model, int(batch), input_shape, model.loss, seed)
    x, y = inputs
    if not model.built:
        model(x)
    if not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    step = tf().function(lambda x, y: model.train_step((x, y)))
    layers = {lay.name for lay in model._flatten_layers(include_self=True, recursive=True)}
    spec = dict(spec or {"model": "", "key": uuid.uuid4().hex})
    spec.setdefault("batch", int(np.shape(x)[0]))
    return function_program(step, [x, y], variables=model.variables + model.optimizer.variables,
                            spec=spec, layers=layers, model_name=model.name)


def transformer_encoder(*, seq: int = 16, d_model: int = 32, heads: int = 4, layers: int = 2,
                        ffn: int = 64, classes: int = 10):
    """A Keras transformer encoder classifier: ``layers`` post-LN blocks of MultiHeadAttention
    and a ReLU feed-forward network, mean-pooled into a dense softmax head (every layer named).

    >>> transformer_encoder(layers=1).count_params() > 0
    True
    """
    keras = _keras()
    inp = keras.Input((seq, d_model), name="tokens")
    h = inp
    for i in range(layers):
        a = keras.layers.MultiHeadAttention(heads, d_model // heads, name=f"enc{i}_mha")(h, h)
        h = keras.layers.LayerNormalization(name=f"enc{i}_ln1")(
            keras.layers.Add(name=f"enc{i}_res1")([h, a]))
        f = keras.layers.Dense(ffn, activation="relu", name=f"enc{i}_ffn1")(h)
        f = keras.layers.Dense(d_model, name=f"enc{i}_ffn2")(f)
        h = keras.layers.LayerNormalization(name=f"enc{i}_ln2")(
            keras.layers.Add(name=f"enc{i}_res2")([h, f]))
    pooled = keras.layers.GlobalAveragePooling1D(name="pool")(h)
    out = keras.layers.Dense(classes, activation="softmax", name="head")(pooled)
    return keras.Model(inp, out, name="transformer_encoder")


def _load_file_builder(ref: str) -> Callable:
    path, _, fn = ref.rpartition(":")
    mod = load_user_file(path, RuntimeBridgeError, expected="FILE.py:FUNCTION")
    builder = getattr(mod, fn or "build", None)
    if not callable(builder):
        raise RuntimeBridgeError(f"{path!r} has no function {fn or 'build'!r}")
    return builder


def keras_model_from_spec(name: str, *, input_shape=None, classes: int = 10, **kw):
    """A Keras model by name: ``TransformerEncoder``, a ``keras.applications`` constructor
    (``weights=None``), or ``FILE.py:FUNCTION`` (the function's keyword arguments: ``kw``).

    >>> keras_model_from_spec("MobileNetV2", input_shape=(32, 32, 3)).name
    'mobilenetv2_1.00_32'
    >>> keras_model_from_spec("NoSuchNet")
    Traceback (most recent call last):
    ...
    workbench.errors.RuntimeBridgeError: unknown Keras model 'NoSuchNet': use TransformerEncoder, a keras.applications name (e.g. MobileNetV2, ResNet50, EfficientNetB0) or FILE.py:FUNCTION
    """
    keras = _keras()
    if name.endswith(".py") or ".py:" in name:
        builder = _load_file_builder(name if ":" in name else name + ":build")
        model = _call_builder(name, builder, kw)
        if not is_keras_model(model):
            raise RuntimeBridgeError(f"{name!r} returned {type(model).__name__}, not a Keras "
                                     f"model")
        return model
    if name == "TransformerEncoder":
        if input_shape is not None:
            shape = [int(d) for d in input_shape]
            if len(shape) != 2 or min(shape) < 1:
                raise RuntimeBridgeError(f"TransformerEncoder takes an input of (sequence, "
                                         f"width), e.g. 16x32; got {'x'.join(map(str, shape))}")
            kw.update(seq=shape[0], d_model=shape[1])
        return _call_builder(name, transformer_encoder, {"classes": classes, **kw})
    public = name.isidentifier() and name[:1].isupper() and name in dir(keras.applications)
    ctor = getattr(keras.applications, name, None) if public else None
    if not callable(ctor):
        raise RuntimeBridgeError(f"unknown Keras model {name!r}: use TransformerEncoder, a "
                                 f"keras.applications name (e.g. MobileNetV2, ResNet50, "
                                 f"EfficientNetB0) or FILE.py:FUNCTION")
    shape = tuple(int(d) for d in input_shape) if input_shape is not None else (96, 96, 3)
    if len(shape) == 2:
        shape = (*shape, 3)
    return _call_builder(name, ctor, {"weights": None, "input_shape": shape,
                                      "classes": int(classes), **kw})


def _call_builder(name: str, fn: Callable, kw: dict):
    """``fn(**kw)``; what it raises (an unknown size keyword, an input Keras refuses, the
    user's own builder failing) is a :class:`RuntimeBridgeError` naming the model (issue 41).

    >>> _call_builder("TransformerEncoder", transformer_encoder, {"depth": 3})
    Traceback (most recent call last):
    ...
    workbench.errors.RuntimeBridgeError: building Keras model 'TransformerEncoder' failed: TypeError: transformer_encoder() got an unexpected keyword argument 'depth'
    """
    try:
        return fn(**kw)
    except Exception as e:  # noqa: BLE001 - Keras and the user's builder raise anything
        msg = (str(e).strip().splitlines() or [""])[0][:300]
        raise RuntimeBridgeError(f"building Keras model {name!r} failed: "
                                 f"{type(e).__name__}: {msg}") from None


def spec_program(spec: dict):
    """Build (or rebuild) the program of a Keras spec ``{"keras": name, "batch", "input_shape",
    "classes", "loss", "optimizer", "seed", "sizes"}`` with fresh Keras names and seeds, so that
    the same spec gives the same node names in any process."""
    keras = _keras()
    keras.backend.clear_session()
    keras.utils.set_random_seed(int(spec.get("seed", 0)))
    model = keras_model_from_spec(spec["keras"], input_shape=spec.get("input_shape"),
                                  classes=spec.get("classes", 10), **(spec.get("sizes") or {}))
    return keras_program(model, spec["batch"],
                         loss=spec.get("loss", "sparse_categorical_crossentropy"),
                         optimizer=spec.get("optimizer", "sgd"), seed=int(spec.get("seed", 0)),
                         spec=json.loads(json.dumps(spec)))
