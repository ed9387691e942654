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

import json
from typing import Any

from ..cluster import Cluster
from ..errors import FormatError, PlanError, WorkbenchError
from ..graph import OpGraph
from ..plan import Plan, fingerprint_differences, graph_fingerprint
from .files import MAX_INPUT_BYTES, jsonable, read_json, write_atomic
from .schema import validate

__all__ = ["SCHEMA_VERSION", "PREFIX", "dump_graph", "dump_cluster", "dump_plan",
           "load_cluster", "load_plan", "save_graph", "save_cluster", "save_plan", "read_json",
           "write_atomic", "jsonable", "graph_from_dict", "plan_from_dict", "MAX_INPUT_BYTES"]

SCHEMA_VERSION = 1
PREFIX = "placement-workbench."
_PREFIX = PREFIX
_CORE = ("compute", "memory", "kind", "colocate", "op_type", "splits")


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
