"""Steady memory for measured steps: memory a step frees stays in the process.

A training step allocates and frees the same tensors every step. glibc's ``malloc`` serves a
large block with its own ``mmap`` (above a threshold that it raises as it sees blocks freed) and
hands free memory at the top of its heap back to the system (above a trim threshold). Which
blocks land where depends on what the process allocated before, so one ``Session`` may reuse its
memory step after step while another, running the same plan, gives a few MB back at the end of
every step and takes them again, page by page, in the next one. Measured (round six,
``docs/runtime.md``): of eight sessions of transformer_small's single-device step timed in
interleaved rounds, seven took 0 minor page faults a step at 1.70-1.80 ms and one took about 930
at 3.1 ms, in every one of its 30 rounds; the bench's "machine in two states" (one plan's
sessions 35-80 % slower than its twin's, same placement, same rounds) was this.

:func:`hold_freed_memory` sets glibc's thresholds once for the process (``mallopt``): no block
is served by its own ``mmap`` (``M_MMAP_MAX`` 0: every block comes from a heap) and the heap is
trimmed only when more than 2 GiB lie free at its top (``M_TRIM_THRESHOLD``). A step then reuses
what the previous step freed and takes no page fault once warm (measured: 0-64 faults per four
steps in every round after the first, every session, against 3,700 in the one that faulted).
The process keeps the memory its largest step needed, as TensorFlow's own pool allocators do.
The settings cannot be undone in a running process; they change where memory comes from, not
what any op computes.

Every session the runtime opens for a measured, profiled or traced step calls it
(:func:`workbench.runtime._tf.new_session`) while :data:`HOLD_FREED_MEMORY` is True (the
default). On a C library other than glibc it does nothing and says why.
:func:`minor_faults` counts the process's minor page faults, which the runner records per timed
step (:attr:`~workbench.runtime.runner.Measurement.faults_per_step`).

>>> hold_freed_memory(False)   # switched off: nothing changes
'off'
>>> isinstance(minor_faults(), int)
True
"""

from __future__ import annotations

import ctypes
import ctypes.util
import resource
import threading

__all__ = ["HOLD_FREED_MEMORY", "hold_freed_memory", "minor_faults"]

HOLD_FREED_MEMORY = True
"""Whether sessions opened by the runtime hold freed memory in the process (see the module)."""

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_TRIM_BYTES = (1 << 31) - 1  # mallopt takes an int: 2 GiB - 1

_lock = threading.Lock()
_state: str | None = None  # 'held' or the reason it could not be


def hold_freed_memory(enabled: bool | None = None) -> str:
    """Make glibc's ``malloc`` keep freed memory in this process (once; see the module).

    ``enabled`` None follows :data:`HOLD_FREED_MEMORY`. Returns ``'held'`` once the settings
    are in force, ``'off'`` when not asked for, or why they could not be set (another C
    library, ``mallopt`` refused).
    """
    global _state
    if not (HOLD_FREED_MEMORY if enabled is None else enabled):
        return "off"
    with _lock:
        if _state is None:
            _state = _apply()
        return _state


def _apply() -> str:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt, get_version = libc.mallopt, libc.gnu_get_libc_version  # glibc only
        get_version.restype = ctypes.c_char_p
        version = get_version().decode()
    except (OSError, AttributeError, TypeError, UnicodeDecodeError):
        return f"not held: the C library ({name or 'unknown'}) is not glibc"
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    if mallopt(_M_MMAP_MAX, 0) != 1 or mallopt(_M_TRIM_THRESHOLD, _TRIM_BYTES) != 1:
        return f"not held: glibc {version!r} refused mallopt"
    return "held"


def minor_faults() -> int:
    """Minor page faults this process has taken so far (``getrusage``)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)
