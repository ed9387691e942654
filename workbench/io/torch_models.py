"""PyTorch models by the names a user types: ``torchvision:resnet50``, ``hf:gpt2``, ``mymodel.py:Net``.

:func:`build_model` returns ``(model, example_inputs)`` with random weights; nothing is ever
downloaded (torchvision builders get ``weights=None``; transformers architectures are built from
their config classes). Names:

* ``torchvision:<name>``: any of ``torchvision.models.list_models()``; input
  ``(batch, 3, 224, 224)`` (``image=`` changes the side);
* ``hf:gpt2`` (GPT-2 small, 124 M), ``hf:bert-base`` (the BERT-base encoder), ``hf:vit``
  (ViT-B/16), ``hf:llama`` (a Llama-2-7B configuration with 2 of its 32 layers, ~0.9 B
  parameters; ``layers=`` sets how many): token inputs ``(batch, seq)``, images
  ``(batch, 3, 224, 224)``; ``config=`` overrides fields of the config (small sizes in tests);
  attention is transformers' ``"eager"`` implementation (its matrix products and softmax as
  separate ops) unless ``config={"attn_implementation": "sdpa"}`` asks for the library's
  default;
* ``lstm-lm``: an embedding, an LSTM and a linear decoder (:class:`LSTMLM`);
* ``path/to/file.py:Class``: the class (a ``torch.nn.Module``) of a Python file, built without
  arguments; its example input is ``(batch, seq)`` token ids when the class has an integer
  attribute ``vocab_size``, else what its optional ``example_inputs(batch, seq)`` classmethod or
  function returns, else ``(batch, in_features)`` of its first ``Linear``.

Language models return their logits (one tensor, so that exporters and losses take it as is).

``device="meta"`` builds without allocating weights (for capture with ``profile=None``).

Examples
--------
>>> model, (x,) = build_model("lstm-lm", batch=2, seq=8)
>>> type(model).__name__, tuple(x.shape), tuple(model(x).shape)
('LSTMLM', (2, 8), (2, 8, 1000))
>>> build_model("hf:nope")
Traceback (most recent call last):
...
workbench.errors.FormatError: unknown model 'hf:nope'; hf: models are gpt2, bert-base, vit, llama
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from .._native import import_torch, load_user_file
from .._native import physical_memory
from ..errors import FormatError

__all__ = ["HF_MODELS", "build_model", "is_model_spec", "model_graph"]

HF_MODELS = ("gpt2", "bert-base", "vit", "llama")
"""The transformers architectures ``hf:<name>`` builds."""


def _torch():
    return import_torch(FormatError, "PyTorch models need the optional dependency torch "
                                     "(pip install placement-workbench[torch])")


def is_model_spec(spec) -> bool:
    """Whether ``spec`` names a PyTorch model (``torchvision:``, ``hf:``, ``lstm-lm``, ``*.py:``).

    >>> is_model_spec("hf:gpt2"), is_model_spec("net.py:Net"), is_model_spec("cnn:50")
    (True, True, False)
    """
    if not isinstance(spec, str):
        return False
    head, _, tail = spec.partition(":")
    return head in ("torchvision", "hf") or spec == "lstm-lm" or (
        head.endswith(".py") and bool(tail))


@functools.cache
def _lstm_lm_class():
    torch = _torch()

    class LSTMLM(torch.nn.Module):
        """Embedding -> LSTM -> linear decoder (a word-level language model)."""

        def __init__(self, vocab_size: int = 1000, hidden: int = 128, layers: int = 2):
            super().__init__()
            self.vocab_size = vocab_size
            self.embedding = torch.nn.Embedding(vocab_size, hidden)
            self.lstm = torch.nn.LSTM(hidden, hidden, layers, batch_first=True)
            self.decoder = torch.nn.Linear(hidden, vocab_size)

        def forward(self, tokens):
            h, _ = self.lstm(self.embedding(tokens))
            return self.decoder(h)

    return LSTMLM


def __getattr__(name):  # LSTMLM is defined when torch is imported
    if name == "LSTMLM":
        return _lstm_lm_class()
    raise AttributeError(name)


def _logits_module(inner, key: str, arg: str, mask: bool = False):
    torch = _torch()

    class Logits(torch.nn.Module):
        """``inner(**{arg: x})[key]``: one tensor out (with an all-ones attention mask when
        ``mask``: transformers then skips its data-dependent packed-sequence checks, which
        fake/meta tensors cannot answer)."""

        def __init__(self):
            super().__init__()
            self.model = inner

        def forward(self, x):
            kw = {"attention_mask": torch.ones_like(x)} if mask else {}
            return getattr(self.model(**{arg: x}, **kw), key)

    return Logits()


def _hf(name: str, config: Mapping, layers: int | None):
    try:
        import transformers as tr
    except ImportError:
        raise FormatError("hf: models need the optional dependency transformers "
                          "(pip install placement-workbench[torch])") from None
    if layers is not None and (isinstance(layers, bool) or not isinstance(layers, int)
                               or layers < 1):
        raise FormatError(f"hf:{name}: layers must be a positive integer, got {layers!r}")
    if not isinstance(config, Mapping):
        raise FormatError(f"hf:{name}: config must be a dict of config fields, got "
                          f"{type(config).__name__}")
    cls = getattr(tr, {"gpt2": "GPT2Config", "bert-base": "BertConfig", "vit": "ViTConfig",
                       "llama": "LlamaConfig"}[name])
    known = cls()
    unknown = [k for k in config if not isinstance(k, str) or not (
        hasattr(known, k) or k == "attn_implementation")]
    if unknown:  # transformers keeps any keyword as an attribute: a typo changed nothing
        fields = sorted(k for k in known.to_dict() if not k.startswith("_"))
        raise FormatError(f"hf:{name}: unknown config field(s) {unknown}; {cls.__name__} "
                          f"has {', '.join(fields)}")
    try:
        return _hf_build(tr, name, config, layers)
    except FormatError:
        raise
    except Exception as e:  # noqa: BLE001 - transformers rejects bad sizes with anything
        raise FormatError(f"hf:{name}: building the model with config {dict(config)} "
                          f"failed: {type(e).__name__}: {_first_line(e)}") from None


def _hf_build(tr, name: str, config: Mapping, layers: int | None):
    # a training step keeps no KV cache; attention as matmul-softmax-matmul ops ("eager"),
    # each an op a solver can place; the library's default, one fused SDPA op, captures as
    # well (config={"attn_implementation": "sdpa"}) with the same FLOPs within 2 %
    cfg = {"use_cache": False, "attn_implementation": "eager", **dict(config)}
    if name == "gpt2":
        c = tr.GPT2Config(**({"n_layer": layers} if layers else {}), **cfg)
        return _logits_module(tr.GPT2LMHeadModel(c), "logits", "input_ids", True), "tokens", c
    if name == "bert-base":
        c = tr.BertConfig(**({"num_hidden_layers": layers} if layers else {}), **cfg)
        m = tr.BertModel(c, add_pooling_layer=False)
        return _logits_module(m, "last_hidden_state", "input_ids"), "tokens", c
    if name == "vit":
        c = tr.ViTConfig(**({"num_hidden_layers": layers} if layers else {}), **cfg)
        m = tr.ViTModel(c, add_pooling_layer=False)
        return _logits_module(m, "last_hidden_state", "pixel_values"), "image", c
    c = tr.LlamaConfig(**{"num_hidden_layers": layers or 2, **cfg})
    return _logits_module(tr.LlamaForCausalLM(c), "logits", "input_ids", True), "tokens", c


_LEARNED_POSITIONS = {"gpt2": "n_positions", "bert-base": "max_position_embeddings"}


def _check_positions(spec: str, cfg, kind: str, seq: int) -> None:
    """A token model with a learned position table takes at most its config's positions
    (GPT-2's ``n_positions``, BERT's ``max_position_embeddings``): a longer sequence indexes
    past the table (on meta tensors nothing notices, and the graph is that of a model that
    cannot run). Llama's rotary positions have no table and no such limit."""
    field = _LEARNED_POSITIONS.get(spec.partition(":")[2])
    limit = getattr(cfg, field, None) if field else None
    if kind == "tokens" and isinstance(limit, int) and seq > limit:
        raise FormatError(f"{spec}: seq={seq} is longer than the model's {limit} positions "
                          f"(config {field}); use --seq {limit} or less")


def _from_file(path: str, cls_name: str):
    mod = load_user_file(path, FormatError, expected="FILE.py:Class")
    cls = getattr(mod, cls_name, None)
    torch = _torch()
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise FormatError(f"{path} defines no torch.nn.Module class {cls_name!r}")
    try:
        return cls(), mod
    except TypeError as e:
        raise FormatError(f"{path}:{cls_name} must be constructible without arguments ({e})") \
            from None
    except Exception as e:  # noqa: BLE001 - the user's __init__ may raise anything
        raise FormatError(f"constructing {path}:{cls_name}() failed: "
                          f"{type(e).__name__}: {_first_line(e)}") from None


def _first_line(e: BaseException) -> str:
    """The first line of an exception's message (torch's allocator errors run to many)."""
    return (str(e).strip().splitlines() or [""])[0][:300]


def _check_size(spec: str, what: str, shape: tuple, itemsize: int,
                on_meta: bool = False) -> None:
    """Refuse an example tensor larger than this machine's memory before allocating it
    (``--profile cpu`` on an 8 TB input was an allocator traceback, issue 41), and on the meta
    device one beyond :data:`~workbench.io.onnx.MAX_ELEMENTS` elements (the bound of ONNX
    files; torch overflowed on larger ones).

    >>> _check_size("lstm-lm", "input", (2, 4), 8)
    >>> _check_size("lstm-lm", "input", (10**9, 10**6), 8, on_meta=True)
    Traceback (most recent call last):
    ...
    workbench.errors.FormatError: lstm-lm: the input of shape (1000000000, 1000000) has 1e+15 elements, beyond the limit of 68,719,476,736
    """
    from .onnx import MAX_ELEMENTS

    numel = 1.0
    for d in shape:
        numel *= float(d)
    if numel > MAX_ELEMENTS:
        raise FormatError(f"{spec}: the {what} of shape {tuple(int(d) for d in shape)} has "
                          f"{numel:.3g} elements, beyond the limit of {MAX_ELEMENTS:,}")
    nbytes = numel * itemsize
    if not on_meta and nbytes > physical_memory():
        raise FormatError(f"{spec}: the {what} of shape {tuple(int(d) for d in shape)} needs "
                          f"{nbytes:.3g} bytes, more than this machine's memory; use a smaller "
                          f"batch or size, or profile=None (roofline costs, no tensors "
                          f"allocated)")


def _file_inputs(model, mod, batch, seq):
    torch = _torch()
    maker = getattr(type(model), "example_inputs", None) or getattr(mod, "example_inputs", None)
    name = type(model).__name__
    if callable(maker):
        try:
            out = maker(batch, seq)
        except Exception as e:  # noqa: BLE001 - the user's function may raise anything
            raise FormatError(f"{name}: example_inputs({batch}, {seq}) failed: "
                              f"{type(e).__name__}: {_first_line(e)}") from None
        out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        bad = [type(x).__name__ for x in out if not isinstance(x, torch.Tensor)]
        if not out or bad:
            raise FormatError(f"{name}: example_inputs({batch}, {seq}) must return a tensor "
                              f"or a tuple of tensors, got {bad or 'an empty tuple'}")
        return out
    vocab = getattr(model, "vocab_size", None)
    if isinstance(vocab, int) and not isinstance(vocab, bool):
        if vocab < 1:
            raise FormatError(f"{name}: vocab_size must be a positive integer, got {vocab}")
        _check_size(name, "input", (batch, seq), 8)
        return (torch.randint(0, vocab, (batch, seq)),)
    lin = next((m for m in model.modules() if isinstance(m, torch.nn.Linear)), None)
    if lin is None:
        raise FormatError(f"{name}: cannot guess its input; define "
                          f"example_inputs(batch, seq) in the model file")
    _check_size(name, "input", (batch, lin.in_features), 4)
    return (torch.randn(batch, lin.in_features),)


def build_model(spec: str, *, batch: int = 1, seq: int = 128, image: int = 224,
                layers: int | None = None, config: Mapping | None = None,
                device: str = "cpu", seed: int = 0):
    """``(model, example_inputs)`` for a model name (see the module docstring).

    Parameters
    ----------
    spec : str
    batch, seq, image : int
        Example input sizes (``seq`` for token models, ``image`` the side of image inputs).
    layers : int, optional
        Number of blocks of an ``hf:`` model (``hf:llama``: default 2).
    config : dict, optional
        Config fields of an ``hf:`` model (e.g. ``{"n_embd": 64}``).
    device : {"cpu", "meta"}
        ``meta``: no weights allocated.

    Raises
    ------
    FormatError
        An unknown name, a missing optional dependency, a model file that fails.
    """
    torch = _torch()
    from .onnx import MAX_DIM

    for what, v in (("batch", batch), ("seq", seq), ("image", image)):
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_DIM:
            raise FormatError(f"{spec}: {what} must be an integer in [1, {MAX_DIM}], got {v!r}")
    head, _, tail = str(spec).partition(":")
    if head == "hf" and tail not in HF_MODELS:
        raise FormatError(f"unknown model {spec!r}; hf: models are {', '.join(HF_MODELS)}")
    torch.manual_seed(seed)
    with torch.device(device):
        if head == "torchvision":
            import torchvision

            if tail not in torchvision.models.list_models():
                raise FormatError(f"unknown model {spec!r}: not in torchvision.models."
                                  f"list_models()")
            model, kind = torchvision.models.get_model(tail, weights=None), "image"
        elif head == "hf":
            model, kind, cfg = _hf(tail, config or {}, layers)
            _check_positions(spec, cfg, kind, seq)
        elif spec == "lstm-lm":
            model, kind = _lstm_lm_class()(), "tokens"
        elif head.endswith(".py") and tail:
            model, mod = _from_file(head, tail)
            return model, _file_inputs(model, mod, batch, seq)
        else:
            raise FormatError(f"unknown model {spec!r}: expected torchvision:NAME, "
                              f"hf:{{{','.join(HF_MODELS)}}}, lstm-lm or FILE.py:CLASS")
        on_meta = str(device) == "meta"
        if kind == "image":
            _check_size(spec, "input", (batch, 3, image, image), 4, on_meta)
            x = torch.randn(batch, 3, image, image)
        else:
            vocab = getattr(getattr(model, "model", model), "config", None)
            vocab = getattr(vocab, "vocab_size", None) or getattr(model, "vocab_size", 1000)
            _check_size(spec, "input", (batch, seq), 8, on_meta)
            x = torch.randint(0, vocab, (batch, seq))
    return model, (x,)


def model_graph(spec: str, *, batch: int | None = None, seq: int | None = None,
                training: bool | None = None, profile: str | None = None,
                optimizer: str = "sgd", **build):
    """The OpGraph of a named model's step: :func:`build_model` + :func:`~workbench.io.torch.
    from_torch` (what ``workbench info hf:gpt2 --batch 8 --seq 512`` loads).

    ``batch`` defaults to 1, ``seq`` to 128, ``training`` to True (forward, backward and
    updates). ``profile=None`` builds the model on the meta device (no weights, roofline
    costs); ``"cpu"`` builds it with random weights and measures every op.

    >>> g = model_graph("lstm-lm", batch=2, seq=4, training=False)
    >>> g.name, g.meta["batch"], {g.op(v)["kind"] for v in g.ops}
    ('lstm-lm', 2, {'fwd'})
    """
    from .torch import from_torch

    extra = sorted(set(build) - {"image", "layers", "config", "seed"})
    if extra:
        raise FormatError(f"{spec}: unknown keyword(s) {extra}; model_graph takes batch, seq, "
                          f"training, profile, optimizer, image, layers, config and seed")
    batch = 1 if batch is None else batch
    seq = 128 if seq is None else seq
    if training is not None and not isinstance(training, bool):
        raise FormatError(f"{spec}: training must be True, False or None, got {training!r}")
    device = "meta" if profile is None and not str(spec).split(":")[0].endswith(".py") \
        else "cpu"
    model, inputs = build_model(spec, batch=batch, seq=seq, device=device, **build)
    g = from_torch(model, inputs, training=True if training is None else training,
                   batch=batch, profile=profile, optimizer=optimizer, name=spec)
    g.meta.update(model_spec=spec, seq=seq)
    return g
