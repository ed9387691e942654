"""Real-time scheduling of the measuring process: measure the model, not the kernel's scheduler.

On a loaded Linux machine (more runnable threads than cores) a thread that sleeps -- the
``Session.run`` caller waiting for its step, an inter-op thread waiting for a tensor from
another logical device -- is woken but not run until the scheduler's next tick or until a
running thread's slice ends (``CONFIG_HZ=250``: 4 ms). Timed steps then cluster at multiples
of 4 ms, and per-op profiles inherit the same delays. Under ``SCHED_FIFO`` a woken thread
preempts every normal (``SCHED_OTHER``) thread at once.

:func:`realtime` is a context manager that puts *every thread of this process* (TensorFlow's
thread pools included; threads created inside inherit it) under ``SCHED_FIFO`` (or
``SCHED_RR``) at a modest priority, and puts each back on exit. The runner
(``run_plan(realtime=True)``, :class:`~workbench.runtime.runner.PlanSession`), the profiler
(``profile(realtime=True)``), :func:`~workbench.runtime.calibrate.calibrate_links`,
:func:`~workbench.runtime.calibrate.calibrate_model` and ``bench/fidelity.py --realtime`` use it
around their warm-up, timed and traced steps only (never around solving or building graphs),
so it covers bounded runs. The kernel's real-time throttling (``sched_rt_runtime_us``, 95 % of
each second by default) is left as it is: real-time threads can never take the whole machine.

While the block runs it also holds a PM QoS request for zero CPU wake-up latency (writing 0 to
``/dev/cpu_dma_latency`` and keeping the file open; ``idle_poll``): an idle CPU then polls
instead of entering a sleep state. On a virtual machine whose idle virtual CPU halts (this
project's build machine: the ``haltpoll`` cpuidle driver with ``guest_halt_poll_ns=0``), a
thread woken on a halted CPU waits for the hypervisor to run that CPU again, so every hand-off
to an idle logical device costs a variable exit-and-reschedule; polling removes it (measured:
every plan 5-22 % faster, the cross-device ones most; ``docs/runtime.md``). The request is
dropped when the block ends. Refused (no such file, no permission) it is skipped with a
warning; :data:`IDLE_POLL` (default True) or ``idle_poll=False`` switches it off.

It is off by default in every library call: a machine may refuse it (no root, no
``CAP_SYS_NICE``, ``RLIMIT_RTPRIO`` 0, a container without real-time bandwidth, a platform
without ``sched_setscheduler``). Refused, :func:`realtime` warns once and measures at normal
priority (yielding ``False``), or with ``required=True`` raises
:class:`~workbench.errors.RuntimeBridgeError`.

>>> with realtime(False) as granted:   # switched off: nothing changes
...     granted
False
>>> realtime(policy="idle").__enter__()
Traceback (most recent call last):
...
workbench.errors.RuntimeBridgeError: realtime: policy must be 'fifo' or 'rr', got 'idle'
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import RuntimeBridgeError

__all__ = ["DEFAULT_PRIORITY", "IDLE_POLL", "idle_poll", "realtime", "thread_ids"]

DEFAULT_PRIORITY = 10
"""Real-time priority used (1-99): above every normal thread, below the kernel's own threads
(``migration``, interrupt threads at 50 and up)."""

IDLE_POLL = True
"""Whether :func:`realtime` blocks also hold the zero wake-up latency request (:func:`idle_poll`)
unless told otherwise (``bench/fidelity.py --no-idle-poll`` sets it False)."""

_QOS = "/dev/cpu_dma_latency"
_POLICIES = {"fifo": "SCHED_FIFO", "rr": "SCHED_RR"}
_WARNED: set = set()


def thread_ids() -> list[int]:
    """The ids of this process's threads (``/proc/self/task``; ``[0]``, the calling thread,
    where that directory does not exist)."""
    try:
        return sorted(int(t) for t in os.listdir("/proc/self/task"))
    except OSError:
        return [0]


def _refused(what: str, required: bool) -> None:
    msg = (f"realtime: {what}; the steps are measured at normal priority, where a woken thread "
           f"can wait for the scheduler's next tick (run as root, or give the interpreter "
           f"CAP_SYS_NICE or an RLIMIT_RTPRIO of at least the priority: ulimit -r 10)")
    if required:
        raise RuntimeBridgeError(msg)
    if what not in _WARNED:
        _WARNED.add(what)
        warnings.warn(msg, RuntimeWarning, stacklevel=4)


def _set_all(policy: int, priority: int) -> tuple[dict, str | None]:
    """Put every thread under ``policy``; returns the previous (policy, priority) per thread
    id, and why it was refused (None when granted). On refusal the threads already set are
    put back."""
    saved: dict = {}
    for tid in thread_ids():
        try:
            prev = (os.sched_getscheduler(tid), os.sched_getparam(tid).sched_priority)
            os.sched_setscheduler(tid, policy, os.sched_param(priority))
        except ProcessLookupError:  # the thread ended between listing and setting
            continue
        except OSError as e:  # EPERM (PermissionError), EINVAL: refused
            _restore(saved, None)
            return {}, f"sched_setscheduler refused ({type(e).__name__}: {e.strerror or e})"
        saved[tid] = prev
    return saved, None


def _restore(saved: dict, base: tuple | None) -> None:
    """Put the threads of ``saved`` back; threads created meanwhile that inherited a real-time
    policy get ``base`` (the calling thread's previous policy)."""
    rt = (os.SCHED_FIFO, os.SCHED_RR)
    for tid in thread_ids() if base is not None else list(saved):
        prev = saved.get(tid, base)
        try:
            if tid not in saved and os.sched_getscheduler(tid) not in rt:
                continue
            os.sched_setscheduler(tid, prev[0], os.sched_param(prev[1]))
        except OSError:  # ended meanwhile, or a policy we may no longer set: leave it
            continue


@contextmanager
def idle_poll(enabled: bool = True, *, path: str = _QOS) -> Iterator[bool]:
    """Hold a PM QoS request for zero CPU wake-up latency for the block: idle CPUs poll
    instead of sleeping (see the module docstring). Yields whether the request is held; a
    machine without the device file, or a process without permission to write it, gets a
    warning (once) and an unchanged machine.

    >>> with idle_poll(False) as held:   # switched off: nothing changes
    ...     held
    False
    """
    if not enabled:
        yield False
        return
    import struct

    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError as e:
        why = f"idle_poll: {path} refused ({type(e).__name__}: {e.strerror or e})"
        if why not in _WARNED:
            _WARNED.add(why)
            warnings.warn(why + "; idle CPUs may sleep between ops", RuntimeWarning,
                          stacklevel=3)
        yield False
        return
    try:
        os.write(fd, struct.pack("i", 0))
        yield True
    finally:
        os.close(fd)


@contextmanager
def realtime(enabled: bool = True, *, priority: int = DEFAULT_PRIORITY, policy: str = "fifo",
             required: bool = False, poll: bool | None = None) -> Iterator[bool]:
    """Run the block with every thread of this process under a real-time policy.

    Parameters
    ----------
    enabled : bool
        False: a no-op (yields False), so callers can pass their ``realtime=`` flag through.
    priority : int
        Real-time priority, 1-99 (default :data:`DEFAULT_PRIORITY`).
    policy : ``"fifo"`` or ``"rr"``
        ``SCHED_FIFO`` (a thread runs until it blocks or a higher priority wakes) or
        ``SCHED_RR`` (the same, with round-robin slices among equal priorities).
    required : bool
        Raise :class:`~workbench.errors.RuntimeBridgeError` when the machine refuses; by
        default warn (once per reason) and run at normal priority.
    poll : bool, optional
        Also hold the zero wake-up latency request (:func:`idle_poll`) while the policy is
        granted; default :data:`IDLE_POLL`.

    Yields
    ------
    bool
        Whether the block runs under the real-time policy.
    """
    if policy not in _POLICIES:
        raise RuntimeBridgeError(f"realtime: policy must be 'fifo' or 'rr', got {policy!r}")
    if not isinstance(priority, int) or isinstance(priority, bool) or not 1 <= priority <= 99:
        raise RuntimeBridgeError(f"realtime: priority must be an integer 1-99, got {priority!r}")
    if not enabled:
        yield False
        return
    pol = getattr(os, _POLICIES[policy], None)
    if pol is None or not hasattr(os, "sched_setscheduler"):
        _refused(f"{_POLICIES[policy]} is not available on this platform", required)
        yield False
        return
    saved, why = _set_all(pol, priority)
    if why is not None:
        _refused(why, required)
        yield False
        return
    base = saved.get(threading.get_native_id()) or saved.get(0) or (os.SCHED_OTHER, 0)
    try:
        with idle_poll(IDLE_POLL if poll is None else bool(poll)):
            yield True
    finally:
        _restore(saved, base)

