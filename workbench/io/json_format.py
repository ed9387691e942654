"""The workbench's own JSON schema (version 1), documented in ``docs/formats.md``.

Every file is an object with ``"format"`` (``placement-workbench.graph``, ``.cluster`` or
``.plan``) and ``"version"``. Files may be gzip-compressed (``.gz``). Writes are atomic
(temporary file + rename), so an interrupted save never destroys an existing result.

Examples
--------
>>> import tempfile, os
>>> from workbench import samples
>>> from workbench.io import save_graph, load_graph
>>> d = tempfile.mkdtemp()
>>> save_graph(samples.diamond(), os.path.join(d, "g.json"))
>>> load_graph(os.path.join(d, "g.json")).fingerprint == samples.diamond().fingerprint
True
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

from ..cluster import Cluster
from ..errors import FormatError, OutputError, PlanError, WorkbenchError
from ..graph import OpGraph
from ..plan import Plan, fingerprint_differences, graph_fingerprint
from . import _outputs
from .schema import validate

__all__ = ["SCHEMA_VERSION", "dump_graph", "dump_cluster", "dump_plan", "load_graph",
           "load_cluster", "load_plan", "load_problem", "save_graph", "save_cluster",
           "save_plan", "read_json", "write_atomic", "jsonable", "graph_from_dict",
           "plan_from_dict", "MAX_INPUT_BYTES"]

SCHEMA_VERSION = 1
_PREFIX = "placement-workbench."
_CORE = ("compute", "memory", "kind", "colocate", "op_type", "splits")


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


def _check_header(data: Any, kind: str, where: str) -> None:
    """Format and version first (the clearest message for a file of another kind), then the
    schema of ``kind`` (every type, one line naming the JSON path)."""
    if not isinstance(data, dict):
        raise FormatError(f"{where}: expected a JSON object, got {type(data).__name__}")
    fmt = data.get("format")
    if fmt != _PREFIX + kind:
        raise FormatError(f"{where}: format is {fmt!r}, expected {_PREFIX + kind!r}")
    ver = data.get("version")
    if type(ver) is not int or ver != SCHEMA_VERSION:
        raise FormatError(f"{where}: schema version {ver!r} is not supported (this workbench "
                          f"reads version {SCHEMA_VERSION})")
    validate(data, kind, where)


# ---------------------------------------------------------------------- graphs
def dump_graph(graph: OpGraph) -> dict:
    nodes = []
    for v in graph.ops:
        a = graph.op(v)
        d = {"name": v, "compute": a["compute"], "memory": a["memory"], "kind": a["kind"],
             "colocate": a["colocate"], "op_type": a["op_type"]}
        if a["splits"]:
            d["splits"] = a["splits"]
        extra = {k: val for k, val in a.items() if k not in _CORE}
        if extra:
            d["attrs"] = jsonable(extra)
        nodes.append(d)
    edges = []
    for u, v in graph.edges():
        e = graph.edge(u, v)
        d = {"src": u, "dst": v, "bytes": e["bytes"]}
        if e.get("comm") is not None:
            d["comm"] = e["comm"]
        edges.append(d)
    return {"format": _PREFIX + "graph", "version": SCHEMA_VERSION, "name": graph.name,
            "meta": jsonable(graph.meta), "nodes": nodes, "edges": edges}


def graph_from_dict(data: dict, where: str = "graph") -> OpGraph:
    """An OpGraph from the parsed JSON of a graph file (validated against its schema first).

    >>> graph_from_dict({"format": "placement-workbench.graph", "version": 1, "edges": [],
    ...                  "nodes": [{"name": "a", "compute": {"gpu": "1"}}]}, "g.json")
    Traceback (most recent call last):
    ...
    workbench.errors.FormatError: g.json: nodes[0].compute.gpu: must be number (got '1')
    """
    _check_header(data, "graph", where)
    ops = []
    for n in data["nodes"]:
        attrs = dict(n.get("attrs") or {})
        attrs.update({k: n[k] for k in _CORE if k in n and n[k] is not None})
        ops.append((n["name"], attrs))
    edges = [(e["src"], e["dst"], {k: e[k] for k in ("bytes", "comm") if e.get(k) is not None})
             for e in data["edges"]]
    try:
        return OpGraph.from_ops(ops, edges, name=data.get("name", "graph"),
                                meta=data.get("meta"))
    except WorkbenchError as e:
        raise type(e)(f"{where}: {e}") from None


def save_graph(graph: OpGraph, path) -> None:
    write_atomic(path, json.dumps(dump_graph(graph)))


def load_graph(path) -> OpGraph:
    """Load a graph from the workbench's JSON, an MSR workload or a plan embedding its graph
    (detected from the content)."""
    return load_problem(path)[0]


# ---------------------------------------------------------------------- clusters
def dump_cluster(cluster: Cluster) -> dict:
    return {"format": _PREFIX + "cluster", "version": SCHEMA_VERSION,
            **jsonable(cluster.to_dict())}


def save_cluster(cluster: Cluster, path) -> None:
    write_atomic(path, json.dumps(dump_cluster(cluster), indent=1))


def load_cluster(path) -> Cluster:
    """Load a cluster file (validated against its schema)."""
    data = read_json(path)
    _check_header(data, "cluster", str(path))
    try:
        return Cluster.from_dict(data)
    except WorkbenchError as e:
        raise type(e)(f"{path}: {e}") from None


# ---------------------------------------------------------------------- plans
def dump_plan(plan: Plan, *, embed_graph: bool = False) -> dict:
    d = {"format": _PREFIX + "plan", "version": SCHEMA_VERSION, "method": plan.method,
         "status": plan.status, "placement": plan.placement, "order": plan.order,
         "predicted": jsonable(plan.predicted), "stats": jsonable(plan.stats),
         "info": jsonable(plan.info),
         "graph": {"name": plan.graph.name, "fingerprint": plan.graph.fingerprint,
                   "n_ops": plan.graph.n_ops, "hashes": plan.graph_fingerprint()}}
    if embed_graph:
        d["graph_data"] = dump_graph(plan.graph)
    return d


def _check_plan_graph(ref, graph: OpGraph, where: str, force: bool) -> None:
    """Compare the graph a plan was made for (``ref``, from the plan file) with ``graph``:
    the ``hashes`` of :func:`workbench.plan.graph_fingerprint` name the parts that differ;
    plan files written before them carry only ``fingerprint`` (ops and edges), and older ones
    nothing to compare. A difference is a PlanError, or with ``force`` a warning."""
    import warnings

    if not isinstance(ref, dict):
        return
    hashes = ref.get("hashes")
    diff = []
    if isinstance(hashes, dict):
        diff = fingerprint_differences(hashes, graph_fingerprint(graph))
    if ref.get("fingerprint") and ref["fingerprint"] != graph.fingerprint and \
            not {"ops", "edges"} & set(diff):
        diff.append("ops or edges")
    if not diff:
        return
    msg = (f"{where}: the plan is for graph {ref.get('name')!r} ({ref.get('n_ops')} ops), not "
           f"for graph {graph.name!r} ({graph.n_ops} ops): they differ in their "
           f"{' and '.join(diff)}")
    if not force:
        raise PlanError(f"{msg}; pass --force (force=True) to replay the plan anyway")
    warnings.warn(f"{msg}; replayed anyway (--force)", UserWarning, stacklevel=3)


def plan_from_dict(data: dict, graph: OpGraph | None = None, where: str = "plan", *,
                   force: bool = False) -> Plan:
    """A Plan from its JSON form, on ``graph`` (else the graph the file embeds). The graph
    must be the one the plan was made for (see :func:`_check_plan_graph`; ``force=True``
    replays it on another graph with a warning)."""
    _check_header(data, "plan", where)
    if graph is None:
        if "graph_data" not in data:
            raise FormatError(f"{where}: the plan does not embed its graph; pass the graph")
        graph = graph_from_dict(data["graph_data"], where)
    _check_plan_graph(data.get("graph", {}), graph, where, force)
    try:
        return Plan(graph, data["placement"], method=data.get("method", "manual"),
                    order=data.get("order"), status=data.get("status", "heuristic"),
                    predicted=data.get("predicted") or {}, stats=data.get("stats") or {},
                    info=data.get("info") or {})
    except WorkbenchError as e:
        raise type(e)(f"{where}: {e}") from None


def save_plan(plan: Plan, path, *, embed_graph: bool = False) -> None:
    write_atomic(path, json.dumps(dump_plan(plan, embed_graph=embed_graph)))


def load_plan(path, graph: OpGraph | None = None, *, force: bool = False) -> Plan:
    """Load a plan file; against ``graph`` when given (its ops, edges and costs must be those
    the plan was made for, unless ``force``: then a warning), else against the graph it
    embeds."""
    return plan_from_dict(read_json(path), graph, str(path), force=force)


# ---------------------------------------------------------------------- detection
def load_problem(path) -> tuple[OpGraph, Cluster | None]:
    """Load a graph and, for formats that carry one (MSR workloads), its cluster."""
    data = read_json(path)
    if isinstance(data, dict) and "format" not in data and "nodes" in data:
        from .msr import msr_from_dict

        return msr_from_dict(data, name=Path(path).name.split(".")[0])
    if isinstance(data, dict) and data.get("format") == _PREFIX + "plan":
        plan = plan_from_dict(data, None, str(path))
        return plan.graph, None
    return graph_from_dict(data, str(path)), None
