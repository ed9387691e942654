"""Run a sweep on Dask distributed and keep its results in a resumable Parquet dataset.

The client (this process) expands the spec into cells, skips the cells whose key is already in
the results folder, and submits one task per remaining cell (the task key is the cell's key, so
Dask never holds two copies of a cell). What travels to a worker is the cell: a small dict of
names and numbers; the worker builds the graph and cluster itself (``workbench`` must be
importable there) and sends back one row (a dict). The client writes the rows in chunks, each
an atomic Parquet file (temporary file + rename), so a crash loses at most the rows not yet
flushed, and a rerun resumes. When a worker dies, Dask reruns its cells elsewhere; a cell whose
worker dies ``distributed.scheduler.allowed-failures`` times is recorded as an error.

Examples
--------
>>> import pathlib, tempfile, workbench.sweep as sw
>>> from distributed import Client, LocalCluster
>>> spec = {"workloads": ["diamond"], "clusters": {"presets": ["2xV100-pcie"]},
...         "methods": {"single": {}, "m_topo": {}}}
>>> with LocalCluster(n_workers=1, processes=False, dashboard_address="127.0.0.1:0") as lc:
...     with Client(lc) as client, tempfile.TemporaryDirectory() as d:
...         df = sw.run(spec, d, client=client, isolate=False, progress=False, echo=None)
...         again = sw.run(spec, d, client=client, isolate=False, progress=False, echo=None)
...         n_files = len(list(pathlib.Path(d).glob("part-*.parquet")))
>>> sorted(df["method"]), len(again), n_files
(['m_topo', 'single'], 2, 1)
"""

from __future__ import annotations

import logging
import math
import os
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path

from ..errors import SweepError
from .cell import RESULT_COLUMNS, error_row
from .spec import KEY_COLUMNS, load_spec

__all__ = ["QUARANTINE", "SCHEMA_COLUMNS", "SweepWarning", "connect", "done_keys", "load",
           "max_workers", "quarantine", "run"]

_STR = {"workload", "preset", "method", "solver", "params", "family", "objective", "status",
        "error", "violations", "key", "host", "wb_version", "versions", "measure_error"}
_INT = {"devices", "seed", "n_devices", "graph_ops", "devices_used", "pid", "peak_rss_bytes"}
_BOOL = {"measure", "congestion", "feasible"}


def _columns() -> list[str]:
    from ..compare import COLUMNS

    extra = ["measured_ms", "measured_std_ms", "sim_error", "measure_error"]
    cols = list(KEY_COLUMNS)
    cols += [c for c in COLUMNS + extra + RESULT_COLUMNS if c not in cols]
    return cols


SCHEMA_COLUMNS = _columns()
"""Every column of a sweep's results, in order."""


def _schema():
    import pyarrow as pa

    def typ(c):
        if c in _STR:
            return pa.string()
        if c in _INT:
            return pa.int64()
        if c in _BOOL:
            return pa.bool_()
        return pa.float64()

    return pa.schema([(c, typ(c)) for c in SCHEMA_COLUMNS])


def _clean(c: str, v):
    missing = v is None or (isinstance(v, float) and math.isnan(v))
    if c in _STR:
        return "" if missing else str(v)
    if c in _INT:
        return None if missing else int(v)
    if c in _BOOL:
        return None if missing else bool(v)
    return math.nan if missing else float(v)


def _write_chunk(out: Path, rows: list[dict]) -> Path:
    """Write rows as one Parquet file, atomically (hidden temporary file, then rename)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = {c: [_clean(c, r.get(c)) for r in rows] for c in SCHEMA_COLUMNS}
    table = pa.Table.from_pydict(data, schema=_schema())
    name = f"part-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
    tmp = out / f".{name}.tmp"
    pq.write_table(table, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, out / name)
    return out / name


def _parts(path: Path) -> list[Path]:
    return sorted(path.glob("part-*.parquet"))


QUARANTINE = "quarantine"
"""Folder inside a results folder where :func:`run` moves the chunks it cannot read."""

_REQUIRED = ("key", "method", "status")


class SweepWarning(UserWarning):
    """A sweep went on past a problem it reports: a damaged results chunk set aside."""


def _read_part(p: Path):
    """The chunk's table, or the reason it is not a readable chunk of sweep results."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        size = p.stat().st_size
        if size == 0:
            return "empty file (0 bytes)"
        table = pq.read_table(p)
    except (pa.ArrowException, OSError, ValueError) as e:
        return f"not a readable Parquet file ({_one_line(e)[:160]})"
    missing = [c for c in _REQUIRED if c not in table.column_names]
    if missing:
        return f"not sweep results (no column {missing[0]!r})"
    if table.num_rows and table.column("key").null_count:
        return "not sweep results (rows without a cell key)"
    return table


def _one_line(e) -> str:
    return " ".join(str(e).split())


def _read_parts(path: Path) -> tuple[list, list[tuple[Path, str]]]:
    """``(tables, damaged)``: the readable chunks of folder ``path`` and ``(file, reason)``
    of each chunk that is not (truncated, empty, foreign content)."""
    tables, damaged = [], []
    for p in _parts(path):
        got = _read_part(p)
        if isinstance(got, str):
            damaged.append((p, got))
        else:
            tables.append(got)
    return tables, damaged


def quarantine(path) -> list[Path]:
    """Move the damaged chunks of results folder ``path`` into ``path/quarantine/`` with a
    one-line :class:`SweepWarning` each; return where they went (their cells are no longer
    done, so the next :func:`run` runs them again).

    >>> import tempfile, pathlib, warnings
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "part-0.parquet").write_bytes(b"not parquet")
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     moved = quarantine(d)
    >>> [p.relative_to(d).as_posix() for p in moved], len(w)
    (['quarantine/part-0.parquet'], 1)
    """
    path = Path(path)
    return _set_aside(path, _read_parts(path)[1])


def _set_aside(path: Path, damaged: list[tuple[Path, str]]) -> list[Path]:
    moved = []
    for p, why in damaged:
        dest_dir = path / QUARANTINE
        dest_dir.mkdir(exist_ok=True)
        dest, k = dest_dir / p.name, 1
        while dest.exists():
            dest, k = dest_dir / f"{p.name}.{k}", k + 1
        os.replace(p, dest)
        moved.append(dest)
        warnings.warn(f"sweep results {str(path)!r}: damaged chunk {p.name} ({why}) moved to "
                      f"{QUARANTINE}/{dest.name}; its cells run again", SweepWarning,
                      stacklevel=3)
    return moved


def done_keys(path) -> set[str]:
    """Keys of the cells in the readable chunks of results folder ``path`` (empty if it does
    not exist; damaged chunks count as not done)."""
    return _keys(_read_parts(Path(path))[0])


def _keys(tables) -> set[str]:
    keys: set[str] = set()
    for t in tables:
        keys.update(t.column("key").to_pylist())
    return keys


def load(path):
    """The results in folder ``path`` as one pandas DataFrame (one row per cell).

    Rows keep their write order; ``params`` is the JSON of the solver parameters. Chunks that
    cannot be read (truncated, empty, foreign content) are skipped with a one-line
    :class:`SweepWarning` each and listed in ``df.attrs["skipped"]`` (``file``, ``reason``).

    >>> load("/nonexistent/sweep")
    Traceback (most recent call last):
    ...
    workbench.errors.SweepError: no sweep results in '/nonexistent/sweep' (no part-*.parquet files)
    """
    import pandas as pd
    import pyarrow as pa

    path = Path(path)
    tables, damaged = _read_parts(path)
    if not tables and not damaged:
        raise SweepError(f"no sweep results in {str(path)!r} (no part-*.parquet files)")
    for p, why in damaged:
        warnings.warn(f"sweep results {str(path)!r}: skipped damaged chunk {p.name} ({why})",
                      SweepWarning, stacklevel=2)
    if not tables:
        raise SweepError(f"no readable sweep results in {str(path)!r}: all {len(damaged)} "
                         f"chunks are damaged (first: {damaged[0][0].name}: {damaged[0][1]})")
    df = pa.concat_tables(tables, promote_options="default").to_pandas()
    df = df.reset_index(drop=True) if len(df) else pd.DataFrame(columns=SCHEMA_COLUMNS)
    df.attrs["skipped"] = [{"file": str(p), "reason": why} for p, why in damaged]
    return df


def _probe(address: str, timeout: float) -> None:
    """Fail fast (refused, unknown host, silent address) before Dask's own retry loop."""
    import socket
    from urllib.parse import urlsplit

    u = urlsplit(address if "://" in address else f"tcp://{address}")
    if u.scheme not in ("tcp", "tls"):
        return  # other transports (inproc, ucx): let Dask decide
    try:
        host, port = u.hostname, u.port or 8786
    except ValueError as e:
        raise SweepError(f"bad scheduler address {address!r}: {e}") from None
    if not host:
        raise SweepError(f"bad scheduler address {address!r}: expected tcp://HOST:PORT")
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        raise SweepError(f"no Dask scheduler answered at {address!r} within {timeout:g} s "
                         f"({e.strerror or type(e).__name__}); start one with 'dask scheduler' "
                         f"or leave out --scheduler for a local cluster") from None


def max_workers() -> int:
    """The most worker processes a local cluster may start: 4 per core of this machine."""
    return 4 * (os.cpu_count() or 1)


def check_workers(workers) -> int:
    """``workers`` if it is a worker count from 1 to :func:`max_workers`, else a SweepError.

    >>> check_workers(1)
    1
    >>> check_workers(0)
    Traceback (most recent call last):
    ...
    workbench.errors.SweepError: workers must be an integer from 1 to ... (4 per core), got 0
    """
    top = max_workers()
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= top:
        raise SweepError(f"workers must be an integer from 1 to {top} (4 per core), got "
                         f"{workers!r}")
    return workers


def connect(scheduler: str | None = None, *, workers: int | None = None,
            timeout: float = 8.0, dashboard: str = "127.0.0.1:0", host: str = "127.0.0.1"):
    """``(client, local_cluster or None)``: an existing scheduler, or a local cluster of
    worker processes (one thread each). An address that does not answer raises SweepError
    within ``timeout`` seconds.

    The local cluster's scheduler, workers and dashboard listen on ``host`` and
    ``dashboard`` (loopback by default: nothing the workbench starts is reachable from
    another machine unless the caller names another address)."""
    from distributed import Client, LocalCluster

    if scheduler:

        _probe(scheduler, min(timeout, 5.0))
        try:
            return Client(scheduler, timeout=f"{timeout}s"), None
        except (OSError, TimeoutError, ValueError) as e:
            raise SweepError(f"no Dask scheduler answered at {scheduler!r} within {timeout:g} s "
                             f"({type(e).__name__}: {e}); start one with 'dask scheduler' or "
                             f"leave out --scheduler for a local cluster") from None
        except Exception as e:  # noqa: BLE001  (it answered, but does not speak Dask)
            raise SweepError(f"the address {scheduler!r} answered but is not a Dask scheduler "
                             f"({type(e).__name__}: {str(e)[:120]})") from None
    n = max(1, min(os.cpu_count() or 1, 8)) if workers is None else check_workers(workers)
    cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host=host,
                           dashboard_address=dashboard, silence_logs=logging.ERROR)
    return Client(cluster), cluster


def _import_model_files(spec, workloads: set) -> None:
    """The model files (``FILE.py:Class``) of the cells to run, imported and built here, once:
    the user asked to run the sweep (loading a spec or ``--dry-run`` never imports them), and
    a file that fails is one error naming it, not a failed row per cell."""
    from ..errors import WorkbenchError
    from ..workloads import check, is_code_file

    for w in sorted(w for w in workloads if is_code_file(w)):
        try:
            check(w, run_code=True)
        except WorkbenchError as e:
            raise SweepError(f"spec {spec.source}, workloads: workload {w!r}: {e}") from None


def run(spec, out, *, scheduler: str | None = None, workers: int | None = None, client=None,
        isolate: bool = True, progress: bool = True, flush_rows: int | None = None,
        flush_s: float = 10.0, on_result: Callable | None = None,
        echo: Callable | None = print, max_cells: int | None = None):
    """Run every cell of ``spec`` not yet in ``out``; return the spec's rows as a DataFrame.

    Parameters
    ----------
    spec : Spec, dict, path or bundled spec name
    out : path
        Results folder (created); a Parquet file per flushed chunk.
    scheduler : str, optional
        ``tcp://HOST:8786`` of a running Dask scheduler; default a local cluster.
    workers : int, optional
        Worker processes of the local cluster (default: the machine's cores, at most 8).
    client : distributed.Client, optional
        Use this client (neither started nor closed here).
    isolate : bool
        Run each cell in a child process of the worker so ``cell_timeout`` can stop it
        (default); False runs cells in the worker itself (no hard limit).
    flush_rows, flush_s
        Write a chunk after this many rows or seconds (default rows: 4 per worker, min 8).
    on_result : callable, optional
        ``on_result(row, done, total, client)`` after each finished cell.
    echo : callable or None
        Where the dashboard address and summary lines go.
    max_cells : int, optional
        Largest grid accepted (default :data:`~workbench.sweep.spec.MAX_CELLS`), counted
        before any cell is built.

    Everything is checked before the first cell runs (the spec, ``workers``, the grid's size);
    damaged chunks already in ``out`` are moved to ``out/quarantine/`` (see
    :func:`quarantine`) and their cells run again.
    """
    spec = load_spec(spec)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise SweepError(f"results folder {str(out)!r} is a file")
    if workers is not None:
        check_workers(workers)
    cells, seen = [], set()
    for c in spec.cells(max_cells=max_cells):
        if c.key not in seen:
            seen.add(c.key)
            cells.append(c)
    if not cells:
        raise SweepError(f"spec {spec.source}: no cells left after the filters")
    _import_model_files(spec, {c.workload for c in cells})
    tables, damaged = _read_parts(out)
    _set_aside(out, damaged)
    done = _keys(tables)
    del tables
    todo = [c for c in cells if c.key not in done]
    say = echo or (lambda *a, **k: None)
    say(f"sweep {spec.name}: {len(cells)} cells, {len(cells) - len(todo)} already in {out}, "
        f"{len(todo)} to run")
    own, made = None, False
    if todo:
        if client is None:
            client, own = connect(scheduler, workers=workers)
            made = True
        try:
            out.mkdir(parents=True, exist_ok=True)
            n_workers = len(client.scheduler_info().get("workers", {}))
            say(f"dask: {n_workers} workers, dashboard {client.dashboard_link}"
                + ("" if n_workers else " (no worker yet: the cells wait for one to join)"))
            n_workers = max(n_workers, 1)
            _run_cells(client, todo, out, isolate=isolate, progress=progress,
                       flush_rows=flush_rows or max(8, 4 * n_workers), flush_s=flush_s,
                       on_result=on_result, name=spec.name)
        finally:
            if made:
                client.close()
            if own is not None:
                own.close()
    df = load(out)
    keys = {c.key for c in cells}
    return df[df["key"].isin(keys)].reset_index(drop=True)


def _result_row(fut, cell) -> dict:
    """The row of a completed future; its task's exception as an error row.

    The result is read with ``fut.result()``, whatever ``fut.status`` said when
    ``as_completed`` yielded it: a result held by a worker that died since is "lost", and
    ``result()`` waits for the scheduler to compute it again (``exception()`` would return
    None, and the cell was once recorded as an error "NoneType: None").
    """
    from asyncio import CancelledError

    try:
        return fut.result()
    except (Exception, CancelledError) as exc:  # noqa: BLE001  (KilledWorker, a cancel, ...)
        return error_row(cell.as_dict(), f"{type(exc).__name__}: {exc}")


def _run_cells(client, todo, out: Path, *, isolate, progress, flush_rows, flush_s, on_result,
               name):
    from distributed import as_completed

    from .runner import execute

    by_key = {f"cell-{c.key}": c for c in todo}
    futures = client.map(execute, [c.as_dict() for c in todo], isolate=isolate,
                         key=list(by_key), pure=False)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo), desc=f"sweep {name}", unit="cell")
    buf: list[dict] = []
    written: set[str] = set()
    last = time.monotonic()
    n = 0
    try:
        for fut in as_completed(futures):
            cell = by_key[fut.key]
            row = _result_row(fut, cell)
            fut.release()
            row["key"] = cell.key  # the client's key, whatever version the worker runs
            if row["key"] in written:  # a task delivered twice is kept once
                continue
            written.add(row["key"])
            buf.append(row)
            n += 1
            if bar is not None:
                bar.update(1)
                bar.set_postfix_str(f"{row['method']} {row['status']}")
            if on_result is not None:
                on_result(row, n, len(todo), client)
            if len(buf) >= flush_rows or time.monotonic() - last >= flush_s:
                _write_chunk(out, buf)
                buf, last = [], time.monotonic()
    finally:
        if buf:
            _write_chunk(out, buf)
        if bar is not None:
            bar.close()
        for f in futures:
            if not f.done():
                f.cancel()
