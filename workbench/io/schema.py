"""JSON Schemas of the workbench's file formats, and validation with one-line errors.

The schemas (JSON Schema draft 2020-12) are the single source of truth for the types in
``docs/formats.md``; ``docs/schemas/*.json`` are these dictionaries written out by
``python -m workbench.io.schema docs/schemas`` (a test checks that they agree). Every loader
validates the parsed JSON before building objects, so a wrong type anywhere (``nodes`` as a
dict, a memory given as a string, ``version: true``) is a :class:`~workbench.errors.FormatError`
whose one-line message names the file and the JSON path of the offending item.

Examples
--------
>>> from workbench.io.schema import validate
>>> validate({"format": "placement-workbench.graph", "version": 1, "nodes": {}, "edges": []},
...          "graph", "g.json")
Traceback (most recent call last):
...
workbench.errors.FormatError: g.json: nodes: must be array (got {})
>>> validate({"maxFPGAs": -3, "nodes": []}, "msr", "w.json")
Traceback (most recent call last):
...
workbench.errors.FormatError: w.json: maxFPGAs: must be >= 0 (got -3)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..errors import FormatError

__all__ = ["MAX_DEPTH", "MAX_DEVICES", "SCHEMAS", "check_depth", "validate", "write_schemas"]

MAX_DEVICES = 4096
"""Most devices a cluster may have (files and the API); see :class:`workbench.cluster.Cluster`."""

MAX_DEPTH = 64
"""Deepest nesting of JSON containers accepted in an input file."""

_ID = "https://placement-workbench.example/schemas/"
_NONNEG = {"type": "number", "minimum": 0}
_NAME = {"type": "string", "minLength": 1}


def _link() -> dict:
    return {"type": ["object", "null"], "additionalProperties": False, "properties": {
        "latency_ms": _NONNEG,
        "bandwidth_bytes_per_ms": {"type": ["number", "null"], "exclusiveMinimum": 0},
        "r2": {"type": ["number", "null"]},
        "call_ms": _NONNEG,
        "allreduce": {"type": "array", "items": {
            "type": "object", "required": ["ranks", "bytes", "ms"], "additionalProperties": False,
            "properties": {"ranks": {"type": "integer", "minimum": 2},
                           "bytes": {"type": "array", "minItems": 1, "items": _NONNEG},
                           "ms": {"type": "array", "minItems": 1, "items": _NONNEG}}}}}}


_NODE = {
    "type": "object", "required": ["name", "compute"],
    "properties": {
        "name": _NAME,
        "compute": {"type": "object", "minProperties": 1,
                    "propertyNames": {"minLength": 1}, "additionalProperties": _NONNEG},
        "memory": {"type": ["number", "null"], "minimum": 0},
        "kind": {"enum": ["fwd", "bwd", "update", "other", None]},
        "colocate": {"type": ["string", "integer", "null"]},
        "op_type": {"type": ["string", "null"]},
        "splits": {"type": ["object", "null"],
                   "additionalProperties": {"type": "integer", "minimum": 1}},
        "attrs": {"type": ["object", "null"]},
    },
}

GRAPH_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": _ID + "graph.json",
    "title": "placement-workbench.graph, version 1",
    "type": "object",
    "required": ["format", "version", "nodes", "edges"],
    "properties": {
        "format": {"const": "placement-workbench.graph"},
        "version": {"type": "integer", "const": 1},
        "name": {"type": "string"},
        "meta": {"type": ["object", "null"]},
        "nodes": {"type": "array", "items": _NODE},
        "edges": {"type": "array", "items": {
            "type": "object", "required": ["src", "dst"],
            "properties": {"src": _NAME, "dst": _NAME,
                           "bytes": {"type": ["number", "null"], "minimum": 0},
                           "comm": {"type": ["number", "null"], "minimum": 0}}}},
    },
}

CLUSTER_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": _ID + "cluster.json",
    "title": "placement-workbench.cluster, version 1",
    "type": "object",
    "required": ["format", "version", "devices"],
    "properties": {
        "format": {"const": "placement-workbench.cluster"},
        "version": {"type": "integer", "const": 1},
        "name": {"type": "string"},
        "mode": {"enum": ["direct", "host"]},
        "devices": {"type": "array", "minItems": 1, "maxItems": MAX_DEVICES, "items": {
            "type": "object", "required": ["name"], "additionalProperties": False,
            "properties": {
                "name": _NAME, "kind": _NAME, "host": _NAME,
                "memory": {"type": ["number", "null"], "minimum": 0},
                "speed": {"type": "number", "exclusiveMinimum": 0},
                "recv_overhead_ms": _NONNEG}}},
        "intra_host": _link(),
        "inter_host": _link(),
        "host_link": _link(),
        "links": {"type": "array", "items": {
            "type": "object", "required": ["src", "dst"], "additionalProperties": False,
            "properties": {"src": _NAME, "dst": _NAME, **_link()["properties"]}}},
    },
}

PLAN_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": _ID + "plan.json",
    "title": "placement-workbench.plan, version 1",
    "type": "object",
    "required": ["format", "version", "placement"],
    "properties": {
        "format": {"const": "placement-workbench.plan"},
        "version": {"type": "integer", "const": 1},
        "method": {"type": "string"},
        "status": {"enum": ["optimal", "feasible", "time_limit", "heuristic", "infeasible",
                            "out_of_memory", "error"]},
        "placement": {"type": "object", "additionalProperties": _NAME},
        "order": {"type": ["object", "null"],
                  "additionalProperties": {"type": "array", "items": _NAME}},
        "predicted": {"type": ["object", "null"]},
        "stats": {"type": ["object", "null"]},
        "info": {"type": ["object", "null"]},
        "graph": {"type": "object", "properties": {
            "name": {"type": "string"}, "fingerprint": {"type": "string"},
            "n_ops": {"type": "integer", "minimum": 0}}},
        "graph_data": {"$ref": "graph.json"},
    },
}

_FLAG = {"type": ["boolean", "integer"], "minimum": 0, "maximum": 1}
MSR_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": _ID + "msr.json",
    "title": "MSR workload of Tarnawski et al. (NeurIPS 2020)",
    "type": "object",
    "required": ["nodes"],
    "properties": {
        "maxFPGAs": {"type": "integer", "minimum": 0, "maximum": MAX_DEVICES},
        "maxCPUs": {"type": "integer", "minimum": 0, "maximum": MAX_DEVICES},
        "maxSizePerFPGA": _NONNEG,
        "nodes": {"type": "array", "items": {
            "type": "object", "required": ["id", "cpuLatency"],
            "properties": {
                "id": {"type": ["integer", "string"]},
                "name": {"type": "string"},
                "cpuLatency": _NONNEG, "fpgaLatency": _NONNEG, "size": _NONNEG,
                "supportedOnFpga": _FLAG, "isBackwardNode": _FLAG,
                "colorClass": {"type": ["integer", "string", "null"]},
                "layerId": {"type": ["integer", "string", "null"]}}}},
        "edges": {"type": "array", "items": {
            "type": "object", "required": ["sourceId", "destId"],
            "properties": {"sourceId": {"type": ["integer", "string"]},
                           "destId": {"type": ["integer", "string"]},
                           "cost": _NONNEG, "size": _NONNEG}}},
    },
}

EXPERT_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": _ID + "expert.json",
    "title": "MSR expert split (fpgas[i].nodes, cpus[i].nodes)",
    "type": "object",
    "properties": {part: {"type": "array", "items": {
        "type": "object", "required": ["nodes"],
        "properties": {"nodes": {"type": "array", "items": {"type": ["integer", "string"]}},
                       "load": {"type": "number"}}}} for part in ("fpgas", "cpus")},
}

SCHEMAS = {"graph": GRAPH_SCHEMA, "cluster": CLUSTER_SCHEMA, "plan": PLAN_SCHEMA,
           "msr": MSR_SCHEMA, "expert": EXPERT_SCHEMA}
"""Format name -> JSON Schema (a dict)."""

_validators: dict = {}


def _inline_refs(schema):
    """The schema with ``{"$ref": "<kind>.json"}`` replaced by that schema (for compiling)."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.endswith(".json") and ref[:-5] in SCHEMAS:
            inner = {k: v for k, v in SCHEMAS[ref[:-5]].items() if not k.startswith("$")}
            return _inline_refs(inner)
        return {k: _inline_refs(v) for k, v in schema.items() if k != "$id"}
    if isinstance(schema, list):
        return [_inline_refs(v) for v in schema]
    return schema


def _validator(kind: str):
    # fastjsonschema compiles the schema to Python: ~0.5 s for a 36,000-op graph, where the
    # reference validator (jsonschema) takes ~13 s; the tests check the schemas with jsonschema.
    if kind not in _validators:
        import fastjsonschema

        schema = _inline_refs(SCHEMAS[kind])
        schema["$schema"] = "http://json-schema.org/draft-07/schema#"
        _validators[kind] = fastjsonschema.compile(schema)
    return _validators[kind]


def _path(parts) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int) or (isinstance(p, str) and p.isdigit()):
            out += f"[{p}]"
        else:
            out += f".{p}" if out else str(p)
    return out or "(top level)"


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def check_depth(data: Any, where: str, limit: int = MAX_DEPTH) -> None:
    """FormatError when JSON containers nest deeper than ``limit`` (checked without recursion).

    >>> check_depth([[[1]]], "x.json", limit=2)
    Traceback (most recent call last):
    ...
    workbench.errors.FormatError: x.json: JSON nested deeper than 2 levels
    """
    stack = [(data, 1)]
    while stack:
        x, d = stack.pop()
        if isinstance(x, dict):
            children = x.values()
        elif isinstance(x, list):
            children = x
        else:
            continue
        if d > limit:
            raise FormatError(f"{where}: JSON nested deeper than {limit} levels")
        stack.extend((c, d + 1) for c in children if isinstance(c, (dict, list)))


def validate(data: Any, kind: str, where: str) -> None:
    """Check ``data`` against the schema of ``kind`` (a key of :data:`SCHEMAS`).

    Raises FormatError ``"<where>: <json path>: <what is wrong> (got <value>)"`` for the first
    offending item. Free-form fields (``meta``, ``attrs``, ``stats``, ...) are checked not to
    nest deeper than :data:`MAX_DEPTH`.
    """
    import fastjsonschema

    try:
        _validator(kind)(data)
    except fastjsonschema.JsonSchemaValueException as e:
        path = _path(e.path[1:] if e.path and e.path[0] == "data" else e.path)
        what = e.message
        if what.startswith(e.name or "data"):
            what = what[len(e.name or "data"):].strip()
        what = what.replace("must be bigger than or equal to", "must be >=")
        what = what.replace("must be bigger than", "must be >")
        what = what.replace("must be smaller than or equal to", "must be <=")
        got = _short(repr(e.value), 60)
        raise FormatError(f"{where}: {path}: {_short(what)} (got {got})") from None
    if isinstance(data, dict):
        for key in ("meta", "predicted", "stats", "info"):
            if data.get(key):
                check_depth(data[key], f"{where}: {key}")
        for k, node in enumerate(data.get("nodes") or ()):
            if isinstance(node, dict) and node.get("attrs"):
                check_depth(node["attrs"], f"{where}: nodes[{k}].attrs")


def write_schemas(folder) -> list[Path]:
    """Write every schema as ``<folder>/<kind>.schema.json``; return the paths."""
    from .files import write_atomic

    out = []
    for kind, schema in SCHEMAS.items():
        p = Path(folder) / f"{kind}.schema.json"
        write_atomic(p, json.dumps(schema, indent=2) + "\n")
        out.append(p)
    return out


if __name__ == "__main__":  # pragma: no cover
    for p in write_schemas(sys.argv[1] if len(sys.argv) > 1 else "docs/schemas"):
        print(p)
