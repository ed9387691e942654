"""File helpers of every format: bounded reads, atomic writes, JSON that round-trips numpy.

* :func:`read_json`: a JSON file, gzip-compressed or not, refused past ``MAX_INPUT_BYTES``
  (``WORKBENCH_MAX_INPUT_MB``), with errors that name the file.
* :func:`write_atomic`: a temporary file renamed over the target (an interrupted save never
  destroys an existing result), gzip when the name ends in ``.gz``; inside
  :func:`workbench.io.transaction` the renames wait for the transaction's end.
* :func:`jsonable`: numpy scalars and arrays, tuples and non-finite floats made JSON-safe.

Examples
--------
>>> import tempfile, os
>>> from workbench.io.files import read_json, write_atomic
>>> p = os.path.join(tempfile.mkdtemp(), "x.json.gz")
>>> write_atomic(p, '{"a": 1}')
>>> read_json(p)
{'a': 1}
"""

from __future__ import annotations

import gzip
import json
import math
import os
import tempfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FormatError, OutputError
from . import _outputs

__all__ = ["MAX_INPUT_BYTES", "jsonable", "read_json", "write_atomic"]


def jsonable(x: Any) -> Any:
    """Convert numpy scalars/arrays, tuples, sets and infinities to plain JSON values."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        f = float(x)
        return f if math.isfinite(f) else (None if math.isnan(f) else ("inf" if f > 0 else "-inf"))
    if isinstance(x, (np.bool_,)):
        return bool(x)
    if x is None or isinstance(x, (str, int, bool)):
        return x
    return repr(x)


MAX_INPUT_BYTES = int(os.environ.get("WORKBENCH_MAX_INPUT_MB", "256")) * 2**20
"""Largest input file accepted, after gzip decompression (``WORKBENCH_MAX_INPUT_MB``)."""


def _encode(text: str, path: Path) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError as e:
        bad = text[max(0, e.start - 30):e.end + 10]
        raise OutputError(f"cannot write {path}: the text holds a character that is not valid "
                          f"Unicode ({text[e.start]!r} near {bad!r}), e.g. a lone surrogate "
                          f"in an op or device name") from None


def _check_target(path: Path) -> None:
    if path.is_dir():
        raise OutputError(f"cannot write {path}: it is a directory")
    if path.exists() and not path.is_file():
        raise OutputError(f"cannot write {path}: it exists and is not a regular file")
    parent = path.parent
    if parent.exists() and not parent.is_dir():
        raise OutputError(f"cannot write {path}: {parent} is not a directory")


def write_atomic(path, text: str | bytes) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder and a rename.

    Raises OutputError (naming the path) when the path is a directory, its folder cannot be
    created or written, or the text cannot be encoded; an existing file is then left as it was.
    Inside :func:`workbench.io.transaction` the rename is deferred to the end of the block.

    >>> import tempfile
    >>> write_atomic(tempfile.mkdtemp(), "x")
    Traceback (most recent call last):
    ...
    workbench.errors.OutputError: cannot write /...: it is a directory
    """
    path = Path(path)
    data = text if isinstance(text, bytes) else _encode(text, path)
    if path.suffix == ".gz":
        data = gzip.compress(data)
    _check_target(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes files private; results are for sharing
        if not _outputs.defer(tmp, path):
            os.replace(tmp, path)
    except OSError as e:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise OutputError(f"cannot write {path}: {e.strerror or e}") from None
    except BaseException:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _read_limited(path: Path, limit: int) -> bytes:
    """The file's bytes, gunzipped by streaming when it is gzip, at most ``limit`` bytes."""
    with open(path, "rb") as f:
        head = f.read(2)
        f.seek(0)
        if head == b"\x1f\x8b":
            src = gzip.GzipFile(fileobj=f, mode="rb")
            what = "decompressed"
        else:
            src = f
            what = "file"
        chunks, total = [], 0
        while True:
            block = src.read(1 << 20)
            if not block:
                break
            total += len(block)
            if total > limit:
                raise FormatError(f"{path}: {what} size exceeds the input limit of "
                                  f"{limit // 2**20} MiB (set WORKBENCH_MAX_INPUT_MB to raise it)")
            chunks.append(block)
        return b"".join(chunks)


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def read_json(path, *, limit: int | None = None) -> Any:
    """Parse a (possibly gzipped) JSON file; FormatError naming the file on failure.

    Gzip input is decompressed by streaming and refused beyond ``limit`` bytes (default
    :data:`MAX_INPUT_BYTES`); truncated or corrupt gzip, invalid UTF-8, invalid JSON and
    JSON nested too deeply are all FormatErrors.

    >>> read_json(None)
    Traceback (most recent call last):
    ...
    workbench.errors.FormatError: expected a file path, got None
    """
    if not isinstance(path, (str, os.PathLike)):
        raise FormatError(f"expected a file path, got {path!r}")
    path = Path(path)
    try:
        raw = _read_limited(path, MAX_INPUT_BYTES if limit is None else limit)
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise FormatError(f"{path} is not a valid gzip file (truncated or corrupt): {e}") \
            from None
    except OSError as e:
        raise FormatError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        data = json.loads(raw.decode(), parse_constant=_no_constant)
    except RecursionError:
        raise FormatError(f"{path}: JSON nested too deeply") from None
    except UnicodeDecodeError as e:
        raise FormatError(f"{path} is not UTF-8 text: {e.reason} at byte {e.start}") from None
    except ValueError as e:
        raise FormatError(f"{path} is not valid JSON: {e}") from None
    return data


