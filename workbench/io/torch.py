"""PyTorch models in: the training step as PyTorch runs it, captured at ATen level.

:func:`from_torch` traces a ``torch.nn.Module`` with AOTAutograd
(``torch._functorch.aot_autograd.aot_export_module``; with ``training=True`` the *joint*
graph: the forward, autograd's own backward ops and the loss in one functional ATen graph, as
``torch.compile`` sees it) and turns it into an :class:`~workbench.graph.OpGraph`:

* **ops**: one per ATen call (``op_type`` the ATen op, e.g. ``aten::convolution_backward``),
  kind ``fwd`` (the ops the loss depends on), ``bwd`` (the ops after the loss) and, with
  ``training=True``, one ``update`` op per parameter for the optimizer (``optimizer="sgd"``,
  ``"momentum"`` or ``"adam"``: the element-wise update PyTorch's optimizers run, one op per
  parameter as ``foreach=False`` does);
* **names** ``<module path>/<aten node>`` (``layer1.0.conv1/convolution_3``): forward ops
  take the innermost module that was running when they were traced (module hooks during the
  trace); backward ops the module of the parameter they read, else of the latest forward op
  whose saved output they read, else of the backward op that feeds them;
* **views folded**: ``view``/``t``/``permute``/``expand``/``alias``/``getitem`` ... create no
  kernel (``OpOverload.is_view``): they are not ops; their consumers read the viewed tensor's
  producer directly, so the graph is what runs;
* **edges** with the bytes of the tensors passed (read through a view: at most the bytes of
  the viewed tensor, so a broadcast ``expand`` does not count its virtual size);
* **shapes and split dimensions**: each op's output ``shapes`` (from the trace's fake tensors),
  ``data_input`` on the ops that read the model's inputs and ``weight_grad`` on the ops that
  produce a parameter's gradient; from them
  :func:`~workbench.transforms.split_dims.with_split_dims` derives FastT's ``splits`` (batch,
  conv channels, matmul columns), ``batch_out`` and the edges' ``batch``, as for TensorFlow
  and ONNX graphs;
* **memory**: each parameter (its bytes) on the first forward op that reads it, its gradient
  on the backward op that produces it, optimizer state (momentum: 1x, Adam: 2x the parameter)
  on its update op, and the output of every forward op that a backward op reads (activations
  kept for backward) on that forward op; a parameter's first reader and its update op share a
  ``colocate`` group (the parameter stays where it is updated);
* **costs**: ``flops`` from torch's own registrations (``torch.utils.flop_counter``: mm,
  addmm, bmm, convolution and their backward, attention) and formulas for the rest
  (:func:`aten_flops`), ``bytes_moved`` inputs + outputs; ``compute["cpu"]`` **measured** per op
  on this machine when ``profile="cpu"`` (the captured graph is run op by op ``repeats`` times,
  median kept), ``compute["gpu"]`` measured with CUDA events when ``profile="gpu"``, else the
  roofline of :mod:`workbench.costs.roofline` (``gpu``: ``device``, ``cpu``: ``cpu-local``).
  ``profile=None`` captures on fake tensors: a model built on the ``meta`` device (no weights
  allocated, :func:`workbench.io.torch_models.build_model` ``device="meta"``) captures as well.

The trace runs with ``torch.compiler.is_compiling()`` true, as torch.compile's own does, so
that libraries take their trace-safe paths: transformers' default attention (SDPA) captures as
built, as one fused attention op where PyTorch runs one. Parameters that the loss does not reach
(a pooler whose output the model does not return) get no gradient and no update, as in eager
PyTorch (``meta["params_without_grad"]``); a parameter shared by two modules (tied embedding
and decoder) gets one update op. A model that cannot be traced (data-dependent control flow,
an op without a fake/meta kernel) raises :class:`~workbench.errors.CaptureError` naming the
construct, the module that was running, and what to try instead.

Examples
--------
>>> import torch
>>> net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
>>> g = from_torch(net, (torch.randn(32, 8),), profile=None)
>>> [(v, g.op(v)["kind"]) for v in g.ops if g.op(v)["op_type"] == "aten::addmm"]
[('0/addmm', 'fwd'), ('2/addmm_1', 'fwd')]
>>> sorted({g.op(v)["kind"] for v in g.ops}), g.meta["param_bytes"]
(['bwd', 'fwd', 'update'], 848.0)
>>> g.op("0/addmm")["flops"], g.op("0.weight/update")["op_type"]
(8192.0, 'optim::sgd')
"""

from __future__ import annotations

import contextlib
import math
import operator
import statistics
import time
from collections.abc import Mapping, Sequence

from .._native import import_torch
from ..errors import CaptureError
from ..graph import OpGraph

__all__ = ["OPTIMIZERS", "aten_flops", "capture", "from_torch"]

OPTIMIZERS = {"sgd": (2, 0), "momentum": (4, 1), "adam": (12, 2)}
"""Optimizer -> (FLOPs per parameter element, state tensors per parameter)."""

_NORM = ("native_batch_norm", "_native_batch_norm_legit", "native_layer_norm",
         "native_group_norm", "_fused_rms_norm")
_SOFTMAX = ("_softmax", "_log_softmax", "nll_loss", "cross_entropy")
_REDUCE = ("sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "norm",
           "max_pool", "avg_pool", "adaptive_avg_pool", "adaptive_max_pool", "argmax",
           "argmin", "cumsum", "logsumexp", "topk", "sort")
_MOVE = ("clone", "copy", "_to_copy", "cat", "stack", "slice_scatter", "select_scatter",
         "index", "index_select", "gather", "scatter", "embedding", "embedding_dense_backward",
         "constant_pad_nd", "repeat", "flip", "roll", "new_zeros", "new_empty", "zeros",
         "ones", "full", "empty", "zeros_like", "ones_like", "full_like", "empty_like",
         "arange", "masked_fill", "_unsafe_index", "index_put", "tril", "triu", "fill",
         "scalar_tensor", "lift_fresh_copy", "as_strided_scatter", "split_with_sizes_copy")
_VIEW_LIKE = frozenset({"aten::_unsafe_view", "aten::lift_fresh", "aten::_reshape_alias"})
_SAME_FLOPS_AS = {  # fused attention kernels torch's counter has no formula for -> the twin it has
    "_scaled_dot_product_flash_attention_for_cpu": "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu_backward":
        "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_fused_attention_overrideable": "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_fused_attention_overrideable_backward":
        "_scaled_dot_product_efficient_attention_backward",
}


def _torch():
    return import_torch(CaptureError, "capturing a PyTorch model needs the optional dependency "
                                      "torch (pip install placement-workbench[torch])")


def _nbytes(val) -> float:
    if isinstance(val, (list, tuple)):
        return float(sum(_nbytes(v) for v in val))
    numel = getattr(val, "numel", None)
    if numel is None or not hasattr(val, "element_size"):
        return 0.0
    return float(val.numel() * val.element_size())


def _shapes(val) -> list:
    """Output shapes of a traced value (``node.meta["val"]``): one entry per output, ``None``
    where an output is not a tensor (a missing gradient of a tuple-returning backward op)."""
    if isinstance(val, (list, tuple)):
        return [[int(d) for d in v.shape] if hasattr(v, "shape") else None for v in val]
    return [[int(d) for d in val.shape]] if hasattr(val, "shape") else []


def _numel(val) -> int:
    if isinstance(val, (list, tuple)):
        return sum(_numel(v) for v in val)
    return int(val.numel()) if hasattr(val, "numel") else 0


def aten_flops(node, vals: Mapping) -> float:
    """FLOPs of one ATen call of an FX graph (``vals``: node -> its fake/real value).

    torch's own formula where ``torch.utils.flop_counter`` registers one (and for the CPU
    and backend-overridable fused attention kernels, which it does not register, the formula
    of their CUDA twin: ``_scaled_dot_product_flash_attention_for_cpu`` and its backward
    count as ``_scaled_dot_product_flash_attention``'s, ``4 B H Sq Sk D`` forward); else norms
    ``8 n(x)`` (backward ``10 n(x)``), softmax/log-softmax/NLL ``5 n(x)``, reductions and
    pooling ``n(x)``, copies/indexing 0, other element-wise ops one per output element and
    tensor input beyond the first (the roofline families of :mod:`workbench.costs.roofline`).
    """
    torch = _torch()
    from torch.utils.flop_counter import flop_registry

    packet = getattr(node.target, "overloadpacket", None)

    def val(a):
        return vals.get(a) if isinstance(a, torch.fx.Node) else a

    args = torch.utils._pytree.tree_map(val, node.args)
    kwargs = torch.utils._pytree.tree_map(val, node.kwargs)
    out = vals.get(node)
    name = node.target._schema.name.split("::")[-1] if packet is not None else ""
    if name in _SAME_FLOPS_AS:
        packet = getattr(torch.ops.aten, _SAME_FLOPS_AS[name])
    if packet in flop_registry:
        return float(flop_registry[packet](*args, **kwargs, out_val=out))
    tensors = [a for a in torch.utils._pytree.tree_leaves(args) if isinstance(a, torch.Tensor)]
    n_in = _numel(tensors[0]) if tensors else 0
    n_out = _numel(out)
    if name.startswith(_NORM):
        return float((10 if "backward" in name else 8) * max(n_in, n_out))
    if name.startswith(_SOFTMAX):
        return 5.0 * max(n_in, n_out)
    if name.startswith(_MOVE):
        return 0.0
    if name.startswith(_REDUCE) or name.endswith("_backward"):
        return float(max(n_in, n_out))
    return float(max(n_out, n_in) * max(1, len(tensors) - 1))


# ---------------------------------------------------------------------- capture
class _ModuleSpans:
    """Forward hooks that note, while AOTAutograd traces, which module created each node."""

    def __init__(self, model):
        from torch.fx.experimental.proxy_tensor import get_proxy_mode

        self._get_mode = get_proxy_mode
        self.owner: dict = {}      # fx node name -> module path
        self.open: list = []       # modules whose forward is running
        self._starts: list = []
        self._handles = []
        for name, mod in model.named_modules():
            self._handles.append(mod.register_forward_pre_hook(self._pre(name)))
            self._handles.append(mod.register_forward_hook(self._post(name)))

    def _nodes(self):
        mode = self._get_mode()
        return None if mode is None else list(mode.tracer.graph.nodes)

    def _pre(self, name):
        def hook(mod, args):
            nodes = self._nodes()
            self.open.append(name)
            self._starts.append(len(nodes) if nodes is not None else None)
        return hook

    def _post(self, name):
        def hook(mod, args, out):
            start = self._starts.pop() if self._starts else None
            if self.open:
                self.open.pop()
            nodes = self._nodes()
            if nodes is not None and start is not None:
                for n in nodes[start:]:               # by name: AOTAutograd copies the graph
                    self.owner.setdefault(n.name, name)   # the innermost module ends first
        return hook

    def remove(self):
        for h in self._handles:
            h.remove()


def _loss_fn(loss, torch):
    if loss is None:
        def mean_of_outputs(out):
            leaves = [t for t in torch.utils._pytree.tree_leaves(out)
                      if isinstance(t, torch.Tensor) and t.is_floating_point()]
            if not leaves:
                raise CaptureError("the model returns no floating-point tensor to take a loss "
                                   "of; pass loss=")
            return sum(t.float().mean() for t in leaves)
        return mean_of_outputs
    if loss == "cross_entropy":
        def cross_entropy(out):
            logits = out if isinstance(out, torch.Tensor) else out[0]
            target = torch.zeros(logits.shape[:-1], dtype=torch.long, device=logits.device)
            return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                     target.reshape(-1))
        return cross_entropy
    if callable(loss):
        return loss
    raise CaptureError(f"loss must be None, 'cross_entropy' or a callable output -> scalar, "
                       f"got {loss!r}")


def _wrapper(model, loss, training, torch):
    lf = _loss_fn(loss, torch) if training else None

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *inputs):
            out = self.model(*inputs)
            if lf is not None:
                return (lf(out),)
            return tuple(torch.utils._pytree.tree_leaves(out))

    return Step()


_ADVICE = {
    "data-dependent": "data-dependent control flow (a Python `if`/loop on a tensor value): "
                      "rewrite it with torch.where / torch.cond, or capture a model whose "
                      "shapes do not depend on values",
    "datadependent": "data-dependent control flow or a value-dependent shape (a Python "
                     "`if` on a tensor value, .item()): rewrite it with torch.where / torch.cond",
    "dynamicoutputshape": "an output shape that depends on tensor values (nonzero, "
                          "boolean-mask indexing, unique): use fixed-shape ops (torch.where, "
                          "masked sums) in the captured step",
    "guard": "data-dependent control flow (a Python `if`/loop on a tensor value): rewrite it "
             "with torch.where / torch.cond",
    "meta": "an op without a fake/meta kernel: capture with real tensors (profile='cpu')",
    "did not receive a gradient": "a parameter that the forward reads gets no gradient "
                                  "(read only through a non-differentiable op): set its "
                                  "requires_grad to False, or pass training=False",
}


@contextlib.contextmanager
def _traced_as_compiled(torch):
    """``torch.compiler.is_compiling()`` True while AOTAutograd traces, as torch.compile and
    torch.export set it around their own traces: libraries then take their trace-safe paths
    instead of reading tensor values (transformers' packed-sequence and padding checks, which
    call ``.all()`` on a mask and fail on fake tensors with ``aten._local_scalar_dense``).
    A model's own data-dependent branch still fails, as it does under torch.compile."""
    if not hasattr(torch.compiler, "_is_compiling_flag"):
        yield
        return
    old = torch.compiler._is_compiling_flag
    torch.compiler._is_compiling_flag = True
    try:
        yield
    finally:
        torch.compiler._is_compiling_flag = old


def _export_step(aot_export_module, step, inputs, training):
    """``aot_export_module`` of the step; parameters that the loss does not reach (a BERT
    pooler when the wrapper returns the hidden states) get no gradient, as in eager PyTorch:
    AOTAutograd refuses them in a joint graph, so they are traced with ``requires_grad``
    off (and listed in ``gm.meta["params_without_grad"]``; they get no update op)."""
    try:
        gm, sig = aot_export_module(step, inputs, trace_joint=training,
                                    output_loss_index=0 if training else None)
        gm.meta["params_without_grad"] = []
        return gm, sig
    except AssertionError as e:
        if not training or "did not receive a gradient" not in str(e):
            raise
    fwd, fsig = aot_export_module(step, inputs, trace_joint=False)
    used = {n.name for n in fwd.graph.nodes if n.op == "placeholder" and n.users}
    unused = [p for ph, p in fsig.inputs_to_parameters.items() if ph not in used]
    params = dict(step.named_parameters())
    frozen = [params[p] for p in unused if p in params and params[p].requires_grad]
    for t in frozen:
        t.requires_grad_(False)
    try:
        gm, sig = aot_export_module(step, inputs, trace_joint=True, output_loss_index=0)
    finally:
        for t in frozen:
            t.requires_grad_(True)
    gm.meta["params_without_grad"] = [_rel(p) for p in unused]
    return gm, sig


def capture(model, example_inputs: Sequence, *, training: bool = True, loss=None):
    """``(fx.GraphModule, graph signature, node -> module path)`` of the (joint) step.

    The ATen graph of :func:`from_torch`, before it becomes an OpGraph.

    Raises
    ------
    CaptureError
        The construct that failed, the module that was running, what to try instead.
    """
    torch = _torch()
    from torch._functorch.aot_autograd import aot_export_module

    if not isinstance(model, torch.nn.Module):
        raise CaptureError(f"from_torch needs a torch.nn.Module, got {type(model).__name__}")
    if isinstance(example_inputs, torch.Tensor) or not isinstance(example_inputs, Sequence):
        raise CaptureError("example_inputs must be a tuple of tensors, e.g. (x,)")
    step = _wrapper(model, loss, training, torch)
    spans = _ModuleSpans(step)
    try:
        with _traced_as_compiled(torch):
            gm, sig = _export_step(aot_export_module, step, tuple(example_inputs), training)
    except CaptureError:
        raise
    except Exception as e:  # noqa: BLE001 - torch raises many types while tracing
        inner = next((m for m in reversed(spans.open) if m), "")
        where = _rel(inner) or "the top-level module"
        if inner:
            where = f"{where}' ({type(step.get_submodule(inner)).__name__})"
        else:
            where += "'"
        msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
        low = f"{type(e).__name__} {e}".lower()
        advice = next((a for k, a in _ADVICE.items() if k in low),
                      "check that the model runs on these inputs; try training=False or "
                      "smaller inputs to locate the construct")
        raise CaptureError(f"capturing {type(model).__name__} failed in module '{where}: "
                           f"{type(e).__name__}: {msg}. Cause: {advice}") from None
    finally:
        spans.remove()
    gm.meta["tied_params"] = _tied(step)
    return gm, sig, spans.owner


def _tied(module) -> dict:
    """Second (and later) names of a parameter shared by several modules -> its first name."""
    first: dict = {}
    tied = {}
    for n, t in module.named_parameters(remove_duplicate=False):
        if first.setdefault(id(t), n) != n:
            tied[n] = first[id(t)]
    return tied


# ---------------------------------------------------------------------- the graph
def _is_view(node, torch) -> bool:
    if node.target is operator.getitem:
        return True
    tgt = node.target
    return isinstance(tgt, torch._ops.OpOverload) and (
        tgt.is_view or tgt._schema.name in _VIEW_LIKE)


def _rel(path: str) -> str:
    """A module/parameter path of the capture wrapper, relative to the user's model."""
    return path[6:] if path.startswith("model.") else ("" if path == "model" else path)


def _module_path(owner, node) -> str:
    return _rel(owner.get(node.name, ""))


def _structure(gm, sig, owner, torch):
    """Real ops (views folded), their inputs (root producers) and fwd/bwd kinds."""
    nodes = list(gm.graph.nodes)
    vals = {n: n.meta.get("val") for n in nodes}
    param_of = dict(sig.inputs_to_parameters)      # placeholder name -> parameter name
    root: dict = {}
    real: list = []
    for n in nodes:
        if n.op == "placeholder":
            root[n] = n
        elif n.op == "call_function" and _is_view(n, torch):
            src = n.args[0] if n.args and isinstance(n.args[0], torch.fx.Node) else n
            root[n] = root.get(src, src)
        elif n.op == "call_function" and (vals.get(n) is not None or n.users):
            root[n] = n          # (assertions without an output are no ops)
            real.append(n)
    loss = None
    if sig.backward_signature is not None:
        # the user output (the wrapper returns (loss,)); backward_signature.loss_output
        # names output 0, a buffer update when the model mutates buffers (batch norm)
        loss = next(n for n in nodes if n.name == sig.user_outputs[0])
        loss = root[loss]
    bwd: set = set()
    if loss is not None:
        stack = list(loss.users)
        while stack:
            u = stack.pop()
            if u not in bwd:
                bwd.add(u)
                stack.extend(u.users)
    return nodes, vals, param_of, root, real, bwd


def _names(real, owner, bwd, param_of, root, grads) -> dict:
    """Op name per real node: ``<module path>/<node name>`` (see the module docstring);
    ``grads``: the node producing each parameter's gradient -> the parameter."""
    mod: dict = {}
    fwd_order = {n: i for i, n in enumerate(real) if n not in bwd}
    for n in real:
        ins = [root.get(a) for a in n.all_input_nodes]
        if n not in bwd:
            mod[n] = _module_path(owner, n)
            continue
        if n in grads:
            mod[n] = _rel(grads[n]).rpartition(".")[0]
            continue
        params = [param_of[a.name] for a in ins if a is not None and a.op == "placeholder"
                  and a.name in param_of]
        if params:
            mod[n] = _rel(params[0]).rpartition(".")[0]
            continue
        saved = [a for a in ins if a in fwd_order]
        if saved:
            mod[n] = mod[max(saved, key=fwd_order.__getitem__)]
            continue
        prev = [a for a in ins if a in mod]
        mod[n] = mod[prev[0]] if prev else ""
    return {n: (f"{mod[n]}/{n.name}" if mod[n] else n.name) for n in real}


def _ops_and_edges(gm, sig, owner, optimizer, torch):
    nodes, vals, param_of, root, real, bwd = _structure(gm, sig, owner, torch)
    tied = gm.meta.get("tied_params", {})
    param_of = {ph: tied.get(p, p) for ph, p in param_of.items()}
    grads = {}
    if sig.backward_signature is not None:
        by_name = {n.name: n for n in nodes}
        for gname, p in sig.backward_signature.gradients_to_parameters.items():
            grads.setdefault(root.get(by_name[gname]), p)
    names = _names(real, owner, bwd, param_of, root, grads)
    ops: dict = {}
    edges: dict = {}
    owner_op: dict = {}
    user = set(sig.user_inputs)
    for n in real:
        nm = names[n]
        out_b = _nbytes(vals.get(n))
        in_b = 0.0
        mem = 0.0
        data_in = False
        for a in n.all_input_nodes:
            r = root.get(a)
            b = _nbytes(vals.get(a))
            in_b += b
            data_in = data_in or (r is not None and r.op == "placeholder" and r.name in user)
            if r in names and r is not n:
                # through a view: at most the viewed tensor (an expand's view is larger)
                cap = _nbytes(vals.get(r)) if r is not a else b
                edges[(names[r], nm)] = min(edges.get((names[r], nm), 0.0) + b, cap)
            elif r is not None and r.op == "placeholder" and r.name in param_of:
                p = param_of[r.name]
                if p not in owner_op and n not in bwd:
                    owner_op[p] = nm
                    mem += _nbytes(vals.get(r))
        ops[nm] = {"compute": {}, "memory": mem, "kind": "bwd" if n in bwd else "fwd",
                   "op_type": n.target._schema.name if hasattr(n.target, "_schema")
                   else str(n.target), "flops": aten_flops(n, vals),
                   "bytes_moved": in_b + out_b, "out_bytes": out_b,
                   "module": names[n].rpartition("/")[0], "_node": n,
                   "shapes": _shapes(vals.get(n))}
        if data_in:
            ops[nm]["data_input"] = True      # reads the model's input (the batch enters)
        if n in grads and not isinstance(vals.get(n), (list, tuple)):
            ops[nm]["weight_grad"] = True     # a parameter's gradient: sums the batch away
    for (u, v) in edges:                     # activations kept for backward
        if ops[u]["kind"] == "fwd" and ops[v]["kind"] == "bwd" and not ops[u].get("_kept"):
            ops[u]["memory"] += ops[u]["out_bytes"]
            ops[u]["_kept"] = True
    if sig.backward_signature is not None:
        _add_updates(ops, edges, sig, nodes, vals, root, names, owner_op, optimizer, tied)
    for op in owner_op.values():
        ops[op]["colocate"] = f"params@{op}"
    return ops, edges


def _add_updates(ops, edges, sig, nodes, vals, root, names, owner_op, optimizer, tied):
    """One update op per parameter; a tied parameter (GPT-2's embedding and decoder) gets one
    update, which accumulates its gradients (one FLOP per element for each beyond the first)."""
    flops_per, states = OPTIMIZERS[optimizer]
    by_name = {n.name: n for n in nodes}
    for gname, p in sig.backward_signature.gradients_to_parameters.items():
        g = by_name[gname]
        gb = _nbytes(vals.get(g))
        src = root.get(g)
        p = tied.get(p, p)
        pname = _rel(p)
        up = f"{pname}/update"
        if up in ops:
            ops[up]["flops"] += float(_numel(vals[g]))
            ops[up]["bytes_moved"] += gb
        else:
            ops[up] = {"compute": {}, "memory": states * gb, "kind": "update",
                       "op_type": f"optim::{optimizer}",
                       "flops": float(flops_per * _numel(vals[g])),
                       "bytes_moved": (3 + 2 * states) * gb, "out_bytes": 0.0,
                       "module": pname.rpartition(".")[0], "param": pname, "_grad": g,
                       "colocate": f"params@{owner_op[p]}" if p in owner_op else None}
        if src in names:
            ops[names[src]]["memory"] += gb        # the gradient lives where it is produced
            edges[(names[src], up)] = edges.get((names[src], up), 0.0) + gb
        if p in owner_op:
            edges.setdefault((owner_op[p], up), 0.0)   # the update writes the parameter read


# ---------------------------------------------------------------------- profiling
def _real_inputs(model, sig, example_inputs, torch):
    named = dict(model.named_parameters(remove_duplicate=False))
    named.update(model.named_buffers(remove_duplicate=False))
    flat = []
    for n in sig.parameters + sig.buffers:
        flat.append(named[_rel(n)])
    flat.extend(torch.utils._pytree.tree_leaves(tuple(example_inputs)))
    return flat


def _spread(ts: list) -> float | None:
    """Sample standard deviation (ms) of repeated times, None for fewer than two."""
    return statistics.stdev(ts) if len(ts) >= 2 else None


def _profile(gm, inputs, repeats, warmup, device, torch, spread: dict | None = None) -> dict:
    """Median time (ms) of every call_function node over ``repeats`` runs of the graph; with
    ``spread``, also fill it with each node's standard deviation over the runs (ms)."""
    times: dict = {}
    sync = torch.cuda.synchronize if device == "gpu" else (lambda: None)

    class Timer(torch.fx.Interpreter):
        def run_node(self, n):
            if n.op != "call_function":
                return super().run_node(n)
            args, kwargs = self.fetch_args_kwargs_from_env(n)   # not timed: the
            sync()                                               # interpreter's own work
            t = time.perf_counter()
            out = n.target(*args, **kwargs)                      # the ATen call, as eager
            sync()
            times.setdefault(n, []).append((time.perf_counter() - t) * 1e3)
            return out

    with _one_thread(torch):
        _run_timed(Timer, gm, inputs, warmup, repeats, times, torch)
    if spread is not None:
        spread.update({n: _spread(ts) for n, ts in times.items()})
    return {n: statistics.median(ts) for n, ts in times.items()}


@contextlib.contextmanager
def _one_thread(torch):
    """One intra-op thread, as the workbench's CPU device kind is profiled (several threads
    on a loaded machine also time their spin-waits)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _run_timed(timer, gm, inputs, warmup, repeats, times, torch):
    with torch.no_grad():
        for i in range(warmup + repeats):
            if i == warmup:
                times.clear()
            timer(gm).run(*inputs)


def _profile_updates(ops, vals_of, optimizer, repeats, device, torch,
                     spread: dict | None = None) -> dict:
    """Median time of each parameter's update, run as ``torch.optim`` runs it (foreach=False);
    with ``spread``, also each update's standard deviation (ms)."""
    out = {}
    dev = "cuda" if device == "gpu" else "cpu"
    for name, a in ops.items():
        if a["kind"] != "update":
            continue
        g = vals_of(a["_grad"])
        shape = tuple(g.shape) if g is not None else (1,)
        p = torch.randn(shape, device=dev)
        grad = torch.randn(shape, device=dev)
        st = [torch.zeros(shape, device=dev) for _ in range(OPTIMIZERS[optimizer][1])]
        ts = []
        for _ in range(repeats + 1):
            if device == "gpu":
                torch.cuda.synchronize()
            t = time.perf_counter()
            if optimizer == "sgd":
                p.add_(grad, alpha=-0.01)
            elif optimizer == "momentum":
                st[0].mul_(0.9).add_(grad)
                p.add_(st[0], alpha=-0.01)
            else:
                st[0].lerp_(grad, 0.1)
                st[1].mul_(0.999).addcmul_(grad, grad, value=0.001)
                p.addcdiv_(st[0], st[1].sqrt().add_(1e-8), value=-0.01)
            if device == "gpu":
                torch.cuda.synchronize()
            ts.append((time.perf_counter() - t) * 1e3)
        out[name] = statistics.median(ts[1:])
        if spread is not None:
            spread[name] = _spread(ts[1:])
    return out


def _check_inputs(example_inputs, training, torch) -> None:
    """``training`` a bool (``"no"`` is truthy: it captured a training step) and no example
    input without elements (a zero batch has no work: every cost came out 0)."""
    if not isinstance(training, bool):
        raise CaptureError(f"training must be True or False, got {training!r}")
    try:
        leaves = torch.utils._pytree.tree_leaves(tuple(example_inputs))
    except TypeError:
        raise CaptureError(f"example_inputs must be a tuple of tensors, got "
                           f"{type(example_inputs).__name__}") from None
    for i, x in enumerate(leaves):
        if isinstance(x, torch.Tensor) and x.numel() == 0:
            raise CaptureError(f"example input {i} has no elements (shape {tuple(x.shape)}): "
                               f"a batch of 0 has no work to place; give at least one example")


def _check_args(optimizer, profile, repeats, batch, name):
    if optimizer not in OPTIMIZERS:
        raise CaptureError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    if profile not in ("cpu", "gpu", None):
        raise CaptureError(f"profile must be 'cpu', 'gpu' or None, got {profile!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise CaptureError(f"repeats must be a positive integer, got {repeats!r}")
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise CaptureError(f"batch must be a positive integer, got {batch!r}")
    if name is not None and not isinstance(name, str):
        raise CaptureError(f"name must be a string, got {name!r}")


def from_torch(model, example_inputs: Sequence, *, training: bool = True, loss=None,
               optimizer: str = "sgd", batch: int | None = None, profile: str | None = "cpu",
               name: str | None = None, device="V100", repeats: int = 5,
               warmup: int = 1) -> OpGraph:
    """The (training) step of a PyTorch model as an OpGraph (see the module docstring).

    Parameters
    ----------
    model : torch.nn.Module
    example_inputs : tuple of tensors
        Positional inputs of ``model`` (their shapes set every tensor size of the graph).
    training : bool
        Capture forward, backward and optimizer updates (True) or the forward only.
    loss : None, "cross_entropy" or callable
        Scalar loss of the model's output: the mean of its floating-point outputs (None),
        cross-entropy of the logits against class 0, or ``loss(output) -> scalar``.
    optimizer : {"sgd", "momentum", "adam"}
    batch : int, optional
        Recorded in ``meta["batch"]`` (default: dimension 0 of the first input).
    profile : {"cpu", "gpu", None}
        Measure op times on this machine's CPU, on its CUDA GPU, or not at all (roofline
        only; works on fake/meta tensors).
    name : str, optional
    device : str or DeviceModel
        Roofline model for kind ``gpu`` (when not measured).
    repeats, warmup : int
        Runs of the graph whose per-op median is kept, and runs discarded before them; the
        spread of those runs (sample standard deviation, ms, ``repeats >= 2``) is kept per op
        as ``compute_std`` (``{kind: ms}``), the ``"profiled"`` noise of
        :func:`workbench.robustness`.

    Raises
    ------
    CaptureError
        Bad arguments, a model that cannot be traced (naming the construct and module).
    """
    torch = _torch()
    from ..costs.roofline import DEVICE_MODELS, with_device_costs

    _check_args(optimizer, profile, repeats, batch, name)
    _check_inputs(example_inputs, training, torch)
    if profile is not None and isinstance(model, torch.nn.Module) and \
            any(p.device.type == "meta" for p in model.parameters()):
        raise CaptureError(f"{type(model).__name__} is on the meta device: no real tensors "
                           f"to time; capture it with profile=None (roofline costs)")
    t0 = time.perf_counter()
    gm, sig, owner = capture(model, example_inputs, training=training, loss=loss)
    t_capture = time.perf_counter() - t0
    ops, edges = _ops_and_edges(gm, sig, owner, optimizer, torch)
    measured: dict = {}
    std: dict = {}
    kind = {"cpu": "cpu", "gpu": "gpu"}.get(profile)
    if profile is not None:
        if profile == "gpu" and not torch.cuda.is_available():
            raise CaptureError("profile='gpu' needs a CUDA device visible to torch")
        inputs = _real_inputs(model, sig, example_inputs, torch)
        if profile == "gpu":
            inputs = [x.cuda() for x in inputs]
            gm = gm.cuda()
        node_std: dict = {}
        by_node = _profile(gm, inputs, repeats, warmup, profile, torch, spread=node_std)
        measured = {nm: by_node.get(a["_node"], 0.0) for nm, a in ops.items() if "_node" in a}
        std = {nm: node_std.get(a["_node"]) for nm, a in ops.items() if "_node" in a}
        vals = {n: n.meta.get("val") for n in gm.graph.nodes}
        with _one_thread(torch):
            measured.update(_profile_updates(ops, vals.get, optimizer, repeats, profile, torch,
                                             spread=std))
    first = next((x for x in torch.utils._pytree.tree_leaves(tuple(example_inputs))
                  if isinstance(x, torch.Tensor)), None)
    out_ops = []
    for nm, a in ops.items():
        attrs = {k: v for k, v in a.items() if not k.startswith("_")}
        attrs["compute"] = {kind: float(measured[nm])} if kind else {"gpu": 0.0}
        if kind and std.get(nm) is not None:
            attrs["compute_std"] = {kind: float(std[nm])}
        out_ops.append((nm, attrs))
    n_params = sum(_nbytes(p) for p in model.parameters())
    meta = {"source": "torch", "capture": "aot_autograd", "training": bool(training),
            "optimizer": optimizer if training else None,
            "batch": batch or (int(first.shape[0]) if first is not None and first.dim() else 1),
            "param_bytes": float(n_params), "capture_s": round(t_capture, 3),
            "torch": torch.__version__, "profile": profile,
            "model": type(model).__name__,
            "params_without_grad": list(gm.meta.get("params_without_grad", []))}
    if kind:
        meta.update(device_kind=kind, profile_repeats=repeats)
    g = OpGraph.from_ops(out_ops, [(u, v, {"bytes": b}) for (u, v), b in edges.items()],
                         name=name or type(model).__name__, meta=meta)
    if kind != "gpu":
        g = with_device_costs(g, device, kind="gpu")
    if kind != "cpu":
        g = with_device_costs(g, DEVICE_MODELS["cpu-local"], kind="cpu")
    if not math.isfinite(g.total_compute()):
        raise CaptureError(f"{g.name}: a measured op time is not finite")
    from ..transforms.split_dims import with_split_dims

    return with_split_dims(g)

