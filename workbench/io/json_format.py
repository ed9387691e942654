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
from pathlib import Path
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..errors import FormatError, PlanError, WorkbenchError
from ..graph import OpGraph
from ..plan import Plan

__all__ = ["SCHEMA_VERSION", "dump_graph", "dump_cluster", "dump_plan", "load_graph",
           "load_cluster", "load_plan", "load_problem", "save_graph", "save_cluster",
           "save_plan", "read_json", "write_atomic", "jsonable", "graph_from_dict",
           "plan_from_dict"]

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


def write_atomic(path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        data = text.encode()
        if path.suffix == ".gz":
            data = gzip.compress(data)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes files private; results are for sharing
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_json(path) -> Any:
    """Parse a (possibly gzipped) JSON file; FormatError naming the file on failure."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise FormatError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        return json.loads(raw.decode())
    except (ValueError, OSError, UnicodeDecodeError) as e:
        raise FormatError(f"{path} is not valid JSON: {e}") from None


def _check_header(data: Any, kind: str, where: str) -> None:
    if not isinstance(data, dict):
        raise FormatError(f"{where}: expected a JSON object")
    fmt = data.get("format")
    if fmt != _PREFIX + kind:
        raise FormatError(f"{where}: format is {fmt!r}, expected {_PREFIX + kind!r}")
    ver = data.get("version")
    if ver != SCHEMA_VERSION:
        raise FormatError(f"{where}: schema version {ver!r} is not supported (this workbench "
                          f"reads version {SCHEMA_VERSION})")


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
    _check_header(data, "graph", where)
    try:
        ops = []
        for n in data["nodes"]:
            attrs = dict(n.get("attrs") or {})
            attrs.update({k: n[k] for k in _CORE if k in n and n[k] is not None})
            ops.append((n["name"], attrs))
        edges = [(e["src"], e["dst"], {k: e[k] for k in ("bytes", "comm") if k in e})
                 for e in data["edges"]]
    except (KeyError, TypeError) as e:
        raise FormatError(f"{where}: malformed graph, missing or bad field {e}") from None
    return OpGraph.from_ops(ops, edges, name=data.get("name", "graph"), meta=data.get("meta"))


def save_graph(graph: OpGraph, path) -> None:
    write_atomic(path, json.dumps(dump_graph(graph)))


def load_graph(path) -> OpGraph:
    """Load a graph from the workbench's JSON or an MSR workload file (detected)."""
    data = read_json(path)
    if isinstance(data, dict) and "nodes" in data and "format" not in data:
        from .msr import msr_from_dict

        return msr_from_dict(data, name=Path(path).name.split(".")[0])[0]
    return graph_from_dict(data, str(path))


# ---------------------------------------------------------------------- clusters
def dump_cluster(cluster: Cluster) -> dict:
    return {"format": _PREFIX + "cluster", "version": SCHEMA_VERSION,
            **jsonable(cluster.to_dict())}


def save_cluster(cluster: Cluster, path) -> None:
    write_atomic(path, json.dumps(dump_cluster(cluster), indent=1))


def load_cluster(path) -> Cluster:
    data = read_json(path)
    _check_header(data, "cluster", str(path))
    return Cluster.from_dict(data)


# ---------------------------------------------------------------------- plans
def dump_plan(plan: Plan, *, embed_graph: bool = False) -> dict:
    d = {"format": _PREFIX + "plan", "version": SCHEMA_VERSION, "method": plan.method,
         "status": plan.status, "placement": plan.placement, "order": plan.order,
         "predicted": jsonable(plan.predicted), "stats": jsonable(plan.stats),
         "info": jsonable(plan.info),
         "graph": {"name": plan.graph.name, "fingerprint": plan.graph.fingerprint,
                   "n_ops": plan.graph.n_ops}}
    if embed_graph:
        d["graph_data"] = dump_graph(plan.graph)
    return d


def plan_from_dict(data: dict, graph: OpGraph | None = None, where: str = "plan") -> Plan:
    _check_header(data, "plan", where)
    if graph is None:
        if "graph_data" not in data:
            raise FormatError(f"{where}: the plan does not embed its graph; pass the graph")
        graph = graph_from_dict(data["graph_data"], where)
    ref = data.get("graph", {})
    if ref.get("fingerprint") and ref["fingerprint"] != graph.fingerprint:
        raise PlanError(f"{where}: the plan is for graph {ref.get('name')!r} "
                        f"({ref.get('n_ops')} ops, fingerprint {ref['fingerprint']}), not for "
                        f"graph {graph.name!r} ({graph.n_ops} ops, {graph.fingerprint})")
    try:
        return Plan(graph, data["placement"], method=data.get("method", "manual"),
                    order=data.get("order"), status=data.get("status", "heuristic"),
                    predicted=data.get("predicted") or {}, stats=data.get("stats") or {},
                    info=data.get("info") or {})
    except (KeyError, TypeError, AttributeError) as e:
        raise FormatError(f"{where}: malformed plan, missing or bad field {e}") from None


def save_plan(plan: Plan, path, *, embed_graph: bool = False) -> None:
    write_atomic(path, json.dumps(dump_plan(plan, embed_graph=embed_graph)))


def load_plan(path, graph: OpGraph | None = None) -> Plan:
    return plan_from_dict(read_json(path), graph, str(path))


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
    try:
        return graph_from_dict(data, str(path)), None
    except WorkbenchError:
        raise
