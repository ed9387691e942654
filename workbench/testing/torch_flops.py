"""torch's own FLOP count of a model's eager step, with the fused attention paths counted.

``torch.utils.flop_counter.FlopCounterMode`` counts the ops it registers a formula for (matrix
products, convolutions, the CUDA attention kernels) and nothing for the others. Two fused paths
that a model built with default settings takes on CPU have no formula there and count **0**:

* ``aten._native_multi_head_attention``: ``torch.nn.MultiheadAttention``'s inference fast path
  (eval mode under ``torch.no_grad()``), which holds the QKV projection, the attention and the
  output projection of the layer: torchvision's ``vit_b_16`` then counts 22.5 GFLOP instead of
  35.1 (the matrix products of its twelve layers are 2.9 GFLOP each);
* ``aten._scaled_dot_product_flash_attention_for_cpu`` (and its backward): what
  ``scaled_dot_product_attention`` runs on CPU without dropout (transformers' default SDPA
  attention of Llama and ViT).

:func:`torch_flops` counts with the fast path off and SDPA on its math backend, so that the
same maths runs as the matrix products torch counts: the reference of the tests and benches
that check the FLOPs of :func:`workbench.io.torch.from_torch` and :func:`workbench.io.onnx.
read_onnx`.

Examples
--------
>>> import torch
>>> mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
>>> x = torch.randn(1, 4, 8)
>>> from torch.utils.flop_counter import FlopCounterMode
>>> with torch.no_grad(), FlopCounterMode(display=False) as fc:
...     _ = mha(x, x, x, need_weights=False)
>>> fc.get_total_flops(), torch_flops(lambda: mha(x, x, x, need_weights=False))
(0, 2560)
"""

from __future__ import annotations

import contextlib

__all__ = ["torch_flops"]


@contextlib.contextmanager
def _counted_attention(torch):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    fast = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with sdpa_kernel(SDPBackend.MATH):
            yield
    finally:
        torch.backends.mha.set_fastpath_enabled(fast)


def torch_flops(step, *, grad: bool = False) -> int:
    """FLOPs ``FlopCounterMode`` counts over ``step()`` (a callable running the eager forward,
    and backward if wanted), with the fused attention paths counted (module docstring).

    ``grad=False`` runs ``step`` under ``torch.no_grad()`` (a forward pass as inference runs
    it); ``grad=True`` with autograd on (a training step calling ``.backward()``).
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    grad_ctx = contextlib.nullcontext() if grad else torch.no_grad()
    with _counted_attention(torch), grad_ctx, FlopCounterMode(display=False) as fc:
        step()
    return int(fc.get_total_flops())
