"""A killable process that runs cells, so a hanging cell can be stopped and recorded.

Each Dask worker thread keeps one child Python process (``python -m workbench.sweep.runner``)
and sends it cells over a pipe (length-prefixed pickles). The child keeps its graph cache
between cells, so the per-cell cost is one round trip. When a cell runs past its
``cell_timeout`` the child is killed, the cell is recorded with status ``timeout`` and the next
cell starts a fresh child. A child that dies (out of memory, a crash in native code) is
recorded as an error. On Linux the child dies with its worker (``PR_SET_PDEATHSIG``).

Examples
--------
>>> from workbench.sweep import Spec
>>> from workbench.sweep.runner import CellProcess
>>> cell = Spec.from_dict({"workloads": ["diamond"], "clusters": {"presets": ["2xV100-pcie"]},
...                        "methods": {"single": {}}}).cells()[0]
>>> p = CellProcess()
>>> p.run(cell.as_dict())["makespan_ms"]
6.0
>>> p.close()
"""

from __future__ import annotations

import math
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

__all__ = ["CellProcess", "execute"]

from ..errors import SweepError

_HDR = struct.Struct(">Q")
_STARTUP_S = 120.0


def _send(fd: int, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    buf = _HDR.pack(len(data)) + data
    view = memoryview(buf)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes | None:
    """``n`` bytes from ``fd``; None at EOF; TimeoutError past ``deadline`` (monotonic)."""
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise TimeoutError
        b = os.read(fd, min(n - got, 1 << 20))
        if not b:
            return None
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def _recv(fd: int, deadline: float | None = None):
    hdr = _read_exact(fd, _HDR.size, deadline)
    if hdr is None:
        return None
    body = _read_exact(fd, _HDR.unpack(hdr)[0], None)
    return None if body is None else pickle.loads(body)


class CellProcess:
    """One child process running cells one at a time (see the module docstring)."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None

    def _start(self) -> None:
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"]
                                    if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen([sys.executable, "-m", "workbench.sweep.runner"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                     close_fds=True)
        try:  # the clock of a cell starts once the child has imported the workbench
            ok = _recv(self.proc.stdout.fileno(), time.monotonic() + _STARTUP_S)
        except TimeoutError:
            ok = None
        if ok != "ready":
            code = self._kill()
            raise SweepError(f"the cell process did not start within {_STARTUP_S:g} s "
                             f"(exit code {code}); is the workbench importable on this worker?")

    def run(self, cell: dict) -> dict:
        """The cell's row; status ``timeout`` past ``cell["cell_timeout"]`` seconds."""
        from .cell import error_row

        if self.proc is None or self.proc.poll() is not None:
            self._start()
        limit = float(cell.get("cell_timeout", math.inf))
        t0 = time.monotonic()
        try:
            _send(self.proc.stdin.fileno(), cell)
            row = _recv(self.proc.stdout.fileno(),
                        None if math.isinf(limit) else t0 + limit)
        except TimeoutError:
            self._kill()
            return error_row(cell, f"cell stopped after its hard limit of {limit:g} s "
                             f"(cell_timeout)", status="timeout",
                             wall_s=time.monotonic() - t0)
        except (BrokenPipeError, OSError, EOFError, pickle.UnpicklingError) as e:
            row, why = None, f"{type(e).__name__}: {e}"
        else:
            why = ""
        if row is None:
            code = self._kill()
            return error_row(cell, f"cell process died (exit code {code}) {why}".strip(),
                             wall_s=time.monotonic() - t0)
        return row

    def _kill(self):
        p, self.proc = self.proc, None
        if p is None:
            return None
        if p.poll() is None:
            p.kill()
        try:
            return p.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            return None

    def close(self) -> None:
        """Stop the child (it also exits by itself when its input closes)."""
        p = self.proc
        if p is not None and p.poll() is None:
            try:
                p.stdin.close()
                p.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._kill()


_local = threading.local()


def execute(cell: dict, isolate: bool = True) -> dict:
    """The Dask task: run one cell in this worker thread's child process (or in-process)."""
    if not isolate:
        from .cell import run_cell

        return run_cell(cell)
    proc = getattr(_local, "proc", None)
    if proc is None:
        proc = _local.proc = CellProcess()
    return proc.run(cell)


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def _child_main() -> None:
    _die_with_parent()
    out = os.dup(1)          # results go to the real stdout only
    os.dup2(2, 1)            # anything a solver prints goes to stderr
    inp = sys.stdin.fileno()
    from .cell import run_cell

    _send(out, "ready")
    while True:
        cell = _recv(inp)
        if cell is None:
            return
        _send(out, run_cell(cell))


if __name__ == "__main__":
    _child_main()
