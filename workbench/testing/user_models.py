"""Models built in code as their users build them, for the tests and benches of the front door.

:func:`user_model` builds each with its library's own classes and defaults (random weights,
small sizes through the config classes, the default attention implementation -- transformers'
SDPA -- unless ``attn`` overrides it) and wraps it as users do, returning one tensor:

* ``gpt2``: ``GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=256, n_head=4, use_cache=False))``
  (issue 50's model; GPT-2's vocabulary, tied embedding and decoder), tokens ``(2, 32)``;
* ``llama``: ``LlamaForCausalLM``, 2 layers of 128, 4 query and 2 key/value heads, tokens
  ``(2, 32)``;
* ``bert``: ``BertModel`` (with its pooler, which the returned hidden states skip), 2 layers of
  128, tokens ``(2, 32)``;
* ``vit``: transformers' ``ViTModel`` (pooler too), 2 layers of 128, images ``(2, 3, 64, 64)``;
* ``torchvision-vit``: ``torchvision.models.VisionTransformer`` with ``vit_b_16``'s structure
  (patch-16 convolution, class token, ``nn.MultiheadAttention``), 2 layers of 128, images
  ``(2, 3, 64, 64)``; ``torchvision-vit-b16``: ``vit_b_16`` itself, images ``(1, 3, 224, 224)``.

``mask=True`` passes an all-ones ``attention_mask`` to the transformers models (what the classic
ONNX exporter needs from a decoder: without a mask transformers checks for packed sequences with
``torch.diff``, which that exporter cannot export).

Examples
--------
>>> model, x = user_model("torchvision-vit")
>>> type(model).__name__, tuple(x.shape), tuple(model(x).shape)
('VisionTransformer', (2, 3, 64, 64), (2, 1000))
"""

from __future__ import annotations

import functools

__all__ = ["USER_MODELS", "user_model", "wrap"]

USER_MODELS = ("gpt2", "llama", "bert", "vit", "torchvision-vit", "torchvision-vit-b16")


@functools.cache
def _out_class():
    import torch

    class Out(torch.nn.Module):
        """``inner(x)`` (``.key`` of its output), with an all-ones attention mask if ``mask``."""

        def __init__(self, inner, key=None, mask=False):
            super().__init__()
            self.m, self.key, self.mask = inner, key, mask

        def forward(self, x):
            kw = {"attention_mask": torch.ones_like(x)} if self.mask else {}
            out = self.m(x, **kw)
            return out if self.key is None else getattr(out, self.key)

    return Out


def wrap(inner, key: str | None = None, *, mask: bool = False):
    """A module returning ``inner(x)`` (its field ``key``), as users wrap a transformers model
    for a loss or an exporter; ``mask``: pass an all-ones ``attention_mask``."""
    return _out_class()(inner, key, mask)


def _transformers(name, kw, mask, torch):
    import transformers as tr

    def out(m, key, mask=False):
        return wrap(m, key, mask=mask)
    if name == "gpt2":
        m = tr.GPT2LMHeadModel(tr.GPT2Config(n_layer=2, n_embd=256, n_head=4, use_cache=False,
                                             **kw))
        return out(m, "logits", mask), torch.randint(0, 50257, (2, 32))
    if name == "llama":
        m = tr.LlamaForCausalLM(tr.LlamaConfig(
            hidden_size=128, intermediate_size=344, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=1000, use_cache=False, **kw))
        return out(m, "logits", mask), torch.randint(0, 1000, (2, 32))
    if name == "bert":
        m = tr.BertModel(tr.BertConfig(hidden_size=128, intermediate_size=512,
                                       num_hidden_layers=2, num_attention_heads=4,
                                       vocab_size=1000, **kw))
        return out(m, "last_hidden_state", mask), torch.randint(0, 1000, (2, 32))
    m = tr.ViTModel(tr.ViTConfig(hidden_size=128, intermediate_size=512, num_hidden_layers=2,
                                 num_attention_heads=4, image_size=64, patch_size=16, **kw))
    return out(m, "last_hidden_state"), torch.randn(2, 3, 64, 64)


def user_model(name: str, *, attn: str | None = None, mask: bool = False, seed: int = 0):
    """``(model, x)``: the model ``name`` (:data:`USER_MODELS`) and an example input.

    ``attn`` sets transformers' ``attn_implementation`` (default: the library's, SDPA).
    """
    import torch

    if name not in USER_MODELS:
        raise ValueError(f"unknown model {name!r}; one of {', '.join(USER_MODELS)}")
    torch.manual_seed(seed)
    if name.startswith("torchvision-vit"):
        import torchvision

        if name.endswith("b16"):
            return torchvision.models.vit_b_16(weights=None), torch.randn(1, 3, 224, 224)
        m = torchvision.models.VisionTransformer(image_size=64, patch_size=16, num_layers=2,
                                                 num_heads=4, hidden_dim=128, mlp_dim=512)
        return m, torch.randn(2, 3, 64, 64)
    return _transformers(name, {} if attn is None else {"attn_implementation": attn}, mask,
                         torch)
