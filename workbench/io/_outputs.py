"""Outputs of one command committed together: :func:`transaction`.

Inside ``with transaction():`` every :func:`~workbench.io.write_atomic` writes its temporary
file as usual but defers the rename; the renames all happen when the block ends without an
exception, and on an exception (an error, Ctrl-C, SIGTERM) every temporary file is removed and
no target is touched. So ``compare --csv out.csv --report out.html`` never leaves a new CSV
beside an old report.

Examples
--------
>>> import os, tempfile
>>> from workbench.io import transaction, write_atomic
>>> d = tempfile.mkdtemp()
>>> try:
...     with transaction():
...         write_atomic(os.path.join(d, "a.csv"), "x")
...         raise KeyboardInterrupt
... except KeyboardInterrupt:
...     pass
>>> os.listdir(d)
[]
>>> with transaction():
...     write_atomic(os.path.join(d, "a.csv"), "x")
...     write_atomic(os.path.join(d, "b.html"), "y")
...     sorted(n for n in os.listdir(d) if not n.startswith("."))
[]
>>> sorted(os.listdir(d))
['a.csv', 'b.html']
"""

from __future__ import annotations

import contextlib
import os
import threading

__all__ = ["defer", "transaction"]

_local = threading.local()


def _pending() -> list | None:
    return getattr(_local, "pending", None)


def defer(tmp: str, path) -> bool:
    """Record ``tmp -> path`` for the open transaction; False when none is open."""
    pending = _pending()
    if pending is None:
        return False
    # a later write to the same path replaces the earlier one
    for k, (old_tmp, old_path) in enumerate(pending):
        if os.fspath(old_path) == os.fspath(path):
            with contextlib.suppress(OSError):
                os.unlink(old_tmp)
            del pending[k]
            break
    pending.append((tmp, path))
    return True


@contextlib.contextmanager
def transaction():
    """Defer the renames of every atomic write in the block to its successful end."""
    if _pending() is not None:  # nested: the outer block commits
        yield
        return
    _local.pending = []
    try:
        yield
    except BaseException:
        for tmp, _ in _local.pending:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise
    else:
        pending = _local.pending
        _local.pending = None
        for k, (tmp, path) in enumerate(pending):
            try:
                os.replace(tmp, path)
            except BaseException as e:
                for t, _ in pending[k:]:
                    with contextlib.suppress(OSError):
                        os.unlink(t)
                if isinstance(e, OSError):
                    from ..errors import OutputError

                    raise OutputError(f"cannot write {path}: {e.strerror or e}") from None
                raise
    finally:
        _local.pending = None
