"""Format detection: which reader a file needs, from its content (not its name).

:func:`load_problem` reads the workbench's own JSON (graph, or a plan that embeds its graph)
and MSR workloads of Tarnawski et al. (which carry their cluster); :func:`load_graph` keeps the
graph only. :func:`workbench.workloads.resolve` adds ONNX, PyTorch and names on top.

Examples
--------
>>> import tempfile, os
>>> from workbench import samples
>>> from workbench.io import save_graph, load_problem
>>> p = os.path.join(tempfile.mkdtemp(), "g.json")
>>> save_graph(samples.diamond(), p)
>>> g, cluster = load_problem(p)
>>> g.n_ops, cluster
(4, None)
"""

from __future__ import annotations

from pathlib import Path

from ..cluster import Cluster
from ..graph import OpGraph
from .files import read_json
from .json_format import PREFIX, graph_from_dict, plan_from_dict
from .msr import msr_from_dict

__all__ = ["FORMATS", "file_format", "load_graph", "load_problem"]

FORMATS = ("workbench-json", "onnx")
"""What :func:`file_format` tells apart: the workbench's JSON family (its graphs, clusters and
plans and the MSR workloads, all read by :func:`load_problem`, gzip or not) and ONNX models
(:func:`workbench.io.onnx.read_onnx`)."""


def file_format(path) -> str:
    """The format of the file at ``path``, from its first bytes (the name only breaks ties):
    ``"workbench-json"`` for JSON (plain or gzip), ``"onnx"`` for an ONNX protobuf.

    ONNX files have no magic number; a ``ModelProto`` starts with field 1 (``ir_version``,
    byte ``0x08``) as ``torch.onnx.export`` and ``onnx.save`` write it, or with another field
    tag where a producer orders fields differently, so a ``.onnx`` name is trusted for any
    content that is not JSON.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> open(os.path.join(d, "a.bin"), "wb").write(b"\x08\x08\x12\x07pytorch") and None
    >>> file_format(os.path.join(d, "a.bin"))
    'onnx'
    >>> open(os.path.join(d, "g.txt"), "w").write(' {"format": 1}') and None
    >>> file_format(os.path.join(d, "g.txt"))
    'workbench-json'
    """
    path = Path(path)
    with open(path, "rb") as f:
        head = f.read(64)
    if head[:2] == b"\x1f\x8b" or head.lstrip()[:1] in (b"{", b"["):
        return "workbench-json"
    if path.suffix.lower() == ".onnx" or head[:1] == b"\x08":
        return "onnx"
    return "workbench-json"  # the JSON reader names what is wrong with the file


def load_graph(path) -> OpGraph:
    """Load a graph from the workbench's JSON, an MSR workload or a plan embedding its graph
    (detected from the content)."""
    return load_problem(path)[0]


def load_problem(path) -> tuple[OpGraph, Cluster | None]:
    """Load a graph and, for formats that carry one (MSR workloads), its cluster."""
    data = read_json(path)
    if isinstance(data, dict) and "format" not in data and "nodes" in data:
        return msr_from_dict(data, name=Path(path).name.split(".")[0])
    if isinstance(data, dict) and data.get("format") == PREFIX + "plan":
        plan = plan_from_dict(data, None, str(path))
        return plan.graph, None
    return graph_from_dict(data, str(path)), None
