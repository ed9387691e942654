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

__all__ = ["load_graph", "load_problem"]


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
