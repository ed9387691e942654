"""Native-library clashes between the heavy frameworks the workbench may load in one process.

Kept at the bottom layer (imports nothing of the workbench) so the TensorFlow bridge and the
PyTorch capture can both call it.
"""

from __future__ import annotations

import sys

__all__ = ["block_triton"]


def block_triton() -> bool:
    """Make ``import triton`` fail cleanly (ImportError) unless Triton is already loaded.

    TensorFlow and Triton (which PyTorch's Linux wheel installs, and ``torch.utils.flop_counter``
    or ``torch.compile`` import) bundle clashing LLVM builds: importing ``triton`` after
    ``tensorflow`` kills the process with a segmentation fault (triton 3.x, TF 2.21; the reverse
    order works). The workbench never needs Triton (PyTorch capture and profiling run eager
    kernels, which fall back cleanly when Triton is missing), so before TensorFlow is loaded
    the name is blocked: a later import raises ImportError instead of crashing. Returns whether
    the block is in place (False when Triton was imported first, which is safe).

    >>> import sys
    >>> block_triton() == (sys.modules.get("triton", None) is None)
    True
    """
    if "triton" in sys.modules:
        return sys.modules["triton"] is None
    sys.modules["triton"] = None  # type: ignore[assignment]
    return True


def import_torch():
    """Import and return ``torch``, with Triton blocked first when TensorFlow is already loaded.

    A user who imported TensorFlow (or Keras) before capturing a PyTorch model would otherwise
    crash at torch's first Triton import (see :func:`block_triton`). Raises ImportError when
    torch is not installed.

    >>> torch = import_torch()  # doctest: +SKIP
    """
    if "tensorflow" in sys.modules:
        block_triton()
    import torch

    return torch
