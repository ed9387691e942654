"""Imports of code from outside the workbench: heavy frameworks whose native libraries clash in
one process, and a user's own model file.

Kept at the bottom layer (imports nothing of the workbench) so the TensorFlow bridge, the Keras
step and the PyTorch capture can all call it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

__all__ = ["block_triton", "import_torch", "load_user_file", "physical_memory"]


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


def import_torch(error: type[Exception] = ImportError, message: str = "torch is not installed"):
    """Import and return ``torch``, with Triton blocked first when TensorFlow is already loaded.

    A user who imported TensorFlow (or Keras) before capturing a PyTorch model would otherwise
    crash at torch's first Triton import (see :func:`block_triton`). When torch is not
    installed, raises ``error(message)``.

    >>> import_torch(ValueError, "no torch") if False else None  # doctest: +SKIP
    """
    if "tensorflow" in sys.modules:
        block_triton()
    try:
        import torch
    except ImportError:
        raise error(message) from None
    return torch


def load_user_file(path: str, error: type[Exception], *, expected: str = "FILE.py"):
    """Import a user's Python file as a module; a missing file or an exception while importing
    it is ``error`` naming the file (never a traceback from inside the user's code).

    >>> load_user_file("/nonexistent/net.py", ValueError, expected="FILE.py:Class")
    Traceback (most recent call last):
    ...
    ValueError: model file '/nonexistent/net.py' does not exist (expected FILE.py:Class)
    """
    p = Path(path)
    if not p.is_file():
        raise error(f"model file {path!r} does not exist (expected {expected})")
    name = f"_wb_user_{abs(hash(str(p.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, p)
    mod = importlib.util.module_from_spec(spec)
    # registered while it runs, as the import system does: a dataclass under
    # ``from __future__ import annotations`` looks its module up in sys.modules (issue 41)
    previous = sys.modules.get(name)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException as e:  # the user's code may raise anything, SystemExit included
        if previous is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = previous
        if isinstance(e, KeyboardInterrupt):
            raise
        raise error(f"loading {path!r} failed: {type(e).__name__}: {e}") from None
    return mod


def physical_memory() -> float:
    """Bytes of physical memory of this machine (``2**40`` where the system does not say):
    what a request for example tensors or cost draws is checked against before allocating.

    >>> physical_memory() > 2**20
    True
    """
    import os

    try:
        return float(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not a POSIX system
        return float(2**40)
