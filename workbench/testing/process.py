"""Child processes that start as from a terminal, whatever signal dispositions the parent has.

A process started in the background without a terminal (``setsid make test </dev/null &``,
``nohup``, a CI runner) may have SIGINT ignored, and an ignored disposition is inherited
through ``fork`` and ``exec``. Python installs its ``KeyboardInterrupt`` handler at startup only
when SIGINT is at its default, so a child of such a process ignores Ctrl-C: a test that sends
SIGINT to a command and expects exit status 130 then sees 0. :func:`default_signals` prefixes
a command with a small Python wrapper that puts the signals a test sends back to their default
disposition in the child and then ``exec``s the command, so the command starts as it would
from a shell (the parent's own dispositions are never touched; unlike ``preexec_fn`` this is
safe in a threaded parent).

Examples
--------
>>> import signal, subprocess, sys
>>> old = signal.signal(signal.SIGINT, signal.SIG_IGN)    # as in a job without a terminal
>>> probe = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
>>> plain = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
>>> reset = subprocess.run(default_signals([sys.executable, "-c", probe]), capture_output=True,
...                        text=True)
>>> _ = signal.signal(signal.SIGINT, old)
>>> plain.stdout.strip(), reset.stdout.strip()
('False', 'True')
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

__all__ = ["DEFAULT_SIGNALS", "default_signals", "signal_handlers_kept"]

DEFAULT_SIGNALS = ("SIGINT", "SIGTERM", "SIGQUIT", "SIGHUP")
"""Signals whose disposition :func:`default_signals` resets in the child."""

_WRAPPER = ("import os, signal, sys\n"
            "for name in sys.argv[1].split(','):\n"
            "    signal.signal(getattr(signal, name), signal.SIG_DFL)\n"
            "os.execv(sys.argv[2], sys.argv[2:])\n")


def default_signals(argv: list, signals=DEFAULT_SIGNALS) -> list[str]:
    """``argv`` wrapped so its process starts with ``signals`` at their default disposition.

    ``argv[0]`` must be a path to an executable (as ``sys.executable``); the wrapper replaces
    itself with it (``os.execv``), so the process id, pipes and exit status are the command's.

    >>> default_signals(["/bin/true"])[-1]
    '/bin/true'
    >>> default_signals(["true"])
    Traceback (most recent call last):
    ...
    ValueError: default_signals: argv[0] must be a path to an executable, got 'true'
    >>> default_signals(["/bin/true"], signals=["SIGNOPE"])
    Traceback (most recent call last):
    ...
    ValueError: default_signals: unknown signal 'SIGNOPE'
    """
    argv = [os.fspath(a) for a in argv]
    if not argv or os.sep not in argv[0]:
        raise ValueError(f"default_signals: argv[0] must be a path to an executable, "
                         f"got {argv[0] if argv else None!r}")
    names = [str(s) for s in signals]
    for s in names:
        if not isinstance(getattr(signal, s, None), signal.Signals):
            raise ValueError(f"default_signals: unknown signal {s!r}")  # noqa: TRY004
    return [sys.executable, "-c", _WRAPPER, ",".join(names), *argv]


@contextlib.contextmanager
def signal_handlers_kept(signals=DEFAULT_SIGNALS):
    """Run a block and put the handlers of ``signals`` back as they were before it.

    For library calls that install a handler of their own and leave it behind (nbclient's
    kernel start leaves SIGINT changed when the process began with SIGINT ignored), so that a
    later test, or a child it starts, does not inherit it. Only in the main thread, where
    handlers can be set.

    >>> before = signal.getsignal(signal.SIGTERM)
    >>> with signal_handlers_kept():
    ...     _ = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    >>> signal.getsignal(signal.SIGTERM) == before
    True
    """
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {getattr(signal, s): signal.getsignal(getattr(signal, s)) for s in signals}
    try:
        yield
    finally:
        for s, h in saved.items():
            if h is not None:
                signal.signal(s, h)
