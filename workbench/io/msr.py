"""The MSR workload format of Tarnawski et al. (NeurIPS 2020), see
``sample_graphs/msr/README.md``.

The published workloads ship with the repository in ``sample_graphs/msr/`` (MIT licence,
``sample_graphs/msr/LICENSE.txt``) and load by name: ``read_msr("msr:op_bert3_inference")``
(``throughput/`` first, then ``latency/``; ``msr:latency/op_bert3_inference`` picks the folder);
:func:`msr_names` lists them.

A workload becomes an :class:`~workbench.graph.OpGraph` and its :class:`~workbench.cluster.Cluster`:

* node ``id`` -> op name ``str(id)`` (the original ``name`` is kept as attribute ``label``);
  ``fpgaLatency`` -> compute on kind ``gpu`` (only if ``supportedOnFpga``), ``cpuLatency`` ->
  kind ``cpu``; ``size`` -> memory; ``isBackwardNode`` -> kind ``bwd``; ``colorClass`` ->
  colocation group ``cc<k>``.
* edge ``cost`` -> the edge's fixed ``comm`` (ms per hop to/from host DRAM), ``size`` -> bytes.
* cluster: ``maxFPGAs`` accelerators ``gpu0..`` with ``maxSizePerFPGA`` bytes each and
  ``maxCPUs`` CPU cores ``cpu0..`` in ``host`` mode (tensors staged through DRAM).

Examples
--------
>>> from workbench.io.msr import msr_from_dict
>>> g, c = msr_from_dict({"maxFPGAs": 2, "maxCPUs": 1, "maxSizePerFPGA": 1e9, "nodes": [
...     {"id": 1, "supportedOnFpga": 1, "cpuLatency": 9.0, "fpgaLatency": 1.0, "size": 10},
...     {"id": 2, "supportedOnFpga": 0, "cpuLatency": 3.0, "fpgaLatency": 0, "colorClass": 7}],
...     "edges": [{"sourceId": 1, "destId": 2, "cost": 0.25, "size": 4096}]})
>>> g.op("1")["compute"], g.op("2")["compute"], g.op("2")["colocate"], g.edge("1", "2")["comm"]
({'cpu': 9.0, 'gpu': 1.0}, {'cpu': 3.0}, 'cc7', 0.25)
>>> c.names, c.mode, c.transfer_ms("gpu0", "gpu1", 0, comm=0.25)
(['gpu0', 'gpu1', 'cpu0'], 'host', 0.5)
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..cluster import Cluster, Device, Link
from ..errors import FormatError, PlanError
from ..graph import OpGraph
from ..plan import Plan
from .files import read_json, write_atomic
from .schema import validate

__all__ = [
    "MSR_DIR",
    "msr_from_dict",
    "msr_names",
    "msr_path",
    "read_expert",
    "read_msr",
    "write_msr_plan",
    "expert_plan",
]

MSR_DIR = Path(__file__).resolve().parents[2] / "sample_graphs" / "msr"
"""The published workloads bundled with the repository."""

_FOLDERS = ("throughput", "latency", "experts")


def msr_names() -> list[str]:
    """Names accepted by :func:`msr_path` (``folder/name`` for every bundled file).

    >>> "throughput/op_bert3_inference" in msr_names()
    True
    """
    return sorted(f"{d}/{p.name[:-5]}" for d in _FOLDERS for p in (MSR_DIR / d).glob("*.json"))


def msr_path(name: str) -> Path:
    """The file of a bundled workload: ``NAME``, ``msr:NAME`` or ``msr:FOLDER/NAME``.

    A bare name is looked up in ``throughput/``, then ``latency/``, then ``experts/``.

    >>> msr_path("msr:op_bert3_inference").relative_to(MSR_DIR).as_posix()
    'throughput/op_bert3_inference.json'
    >>> msr_path("latency/op_bert3_inference").parent.name
    'latency'
    >>> msr_path("msr:nope")
    Traceback (most recent call last):
    ...
    workbench.errors.FormatError: unknown MSR workload 'nope'; known: experts/bert24_inference_expert, ...
    """
    key = name.removeprefix("msr:")
    key = key.removesuffix(".json")
    if "/" in key:
        candidates = [MSR_DIR / f"{key}.json"]
    else:
        candidates = [MSR_DIR / d / f"{key}.json" for d in _FOLDERS]
    for c in candidates:
        if c.is_file() and c.resolve().is_relative_to(MSR_DIR):
            return c
    known = msr_names()
    shown = ", ".join(known[:1]) + (", ..." if len(known) > 1 else "")
    raise FormatError(f"unknown MSR workload {key!r}; known: {shown}"
                      + ("" if known else f" (no workloads found in {MSR_DIR})"))


def _flag(x) -> bool:
    return bool(int(x)) if not isinstance(x, bool) else x


def msr_from_dict(data: dict, name: str = "msr") -> tuple[OpGraph, Cluster]:
    validate(data, "msr", name)  # every type and range, one line naming the item
    try:
        nodes = data["nodes"]
        edges = data.get("edges", [])
        k = int(data.get("maxFPGAs", 0))
        l_ = int(data.get("maxCPUs", 0))
        cap = float(data.get("maxSizePerFPGA", math.inf))
    except (KeyError, TypeError, ValueError) as e:
        raise FormatError(f"{name}: malformed MSR workload, missing or bad field {e}") from None
    ops = []
    for n in nodes:
        try:
            comp = {"cpu": float(n["cpuLatency"])}
            if _flag(n.get("supportedOnFpga", 1)):
                comp["gpu"] = float(n["fpgaLatency"])
            cc = n.get("colorClass")
            ops.append((str(n["id"]), {
                "compute": comp, "memory": float(n.get("size", 0.0)),
                "kind": "bwd" if _flag(n.get("isBackwardNode", 0)) else "fwd",
                "colocate": None if cc is None else f"cc{cc}",
                "label": str(n.get("name", n["id"])),
                **({"layer": n["layerId"]} if "layerId" in n else {})}))
        except (KeyError, TypeError, ValueError) as e:
            raise FormatError(f"{name}: malformed node {n!r}: {e}") from None
    merged: dict = {}
    for e in edges:
        try:
            key = (str(e["sourceId"]), str(e["destId"]))
            cost = float(e.get("cost", 0.0))
            size = float(e.get("size", 0.0))
        except (KeyError, TypeError, ValueError) as err:
            raise FormatError(f"{name}: malformed edge {e!r}: {err}") from None
        if key in merged:  # duplicate edges carry the same output: keep the largest
            cost = max(cost, merged[key]["comm"])
            size = max(size, merged[key]["bytes"])
        merged[key] = {"comm": cost, "bytes": size}
    graph = OpGraph.from_ops(ops, [(u, v, a) for (u, v), a in merged.items()], name=name,
                             meta={"format": "msr", "maxFPGAs": k, "maxCPUs": l_,
                                   "maxSizePerFPGA": cap})
    devices = [Device(f"gpu{i}", "gpu", cap) for i in range(k)]
    devices += [Device(f"cpu{i}", "cpu") for i in range(l_)]
    if not devices:
        raise FormatError(f"{name}: the workload has neither accelerators nor CPUs")
    cluster = Cluster(devices, mode="host", host_link=Link(0.0, math.inf), name=f"{name}-cluster")
    return graph, cluster


def read_msr(path) -> tuple[OpGraph, Cluster]:
    """Read an MSR workload file (or a bundled one, ``"msr:NAME"``): the graph and its cluster.

    >>> g, c = read_msr("msr:op_bert3_inference")
    >>> g.name, g.n_ops, c.mode
    ('op_bert3_inference', 235, 'host')
    """
    if isinstance(path, str) and path.startswith("msr:"):
        path = msr_path(path)
    data = read_json(path)
    if not isinstance(data, dict) or "nodes" not in data:
        raise FormatError(f"{path} is not an MSR workload (no 'nodes')")
    return msr_from_dict(data, name=Path(path).name.split(".")[0])


def read_expert(path, graph: OpGraph, cluster: Cluster) -> Plan:
    """Read an expert split (``fpgas[i].nodes`` and ``cpus[i].nodes``) as a Plan.

    Ops the file does not list (e.g. backward ops of a training graph) follow their colour
    class; an op that is neither listed nor colocated with a listed op is an error.
    """
    data = read_json(path)
    validate(data, "expert", str(path))
    try:
        parts = [("gpu", p["nodes"]) for p in data.get("fpgas", [])]
        parts += [("cpu", p["nodes"]) for p in data.get("cpus", [])]
    except (KeyError, TypeError, AttributeError) as e:
        raise FormatError(f"{path}: malformed expert split: {e}") from None
    gpus = [d.name for d in cluster.devices if d.kind == "gpu"]
    cpus = [d.name for d in cluster.devices if d.kind == "cpu"]
    placement: dict = {}
    counters = {"gpu": 0, "cpu": 0}
    for kind, ops in parts:
        pool = gpus if kind == "gpu" else cpus
        i = counters[kind]
        counters[kind] += 1
        if not ops:
            continue
        if i >= len(pool):
            raise PlanError(f"{path}: the split uses more {kind} devices than cluster "
                            f"{cluster.name!r} has ({len(pool)})")
        for v in ops:
            if str(v) not in graph.index:
                raise PlanError(f"{path}: op {v!r} of the split is not in graph {graph.name!r}")
            placement[str(v)] = pool[i]
    group_dev: dict = {}
    for v, d in placement.items():
        g = graph.nx.nodes[v]["colocate"]
        if g is not None:
            group_dev.setdefault(g, d)
    for v in graph.ops:
        if v not in placement:
            g = graph.nx.nodes[v]["colocate"]
            if g is None or g not in group_dev:
                raise PlanError(f"{path}: op {v!r} is not in the split and has no colour class "
                                f"with a placed member to follow")
            placement[v] = group_dev[g]
    plan = Plan(graph, placement, method="expert", info={"source": str(path)})
    plan.validate(cluster)
    return plan


def write_msr_plan(plan: Plan, cluster: Cluster, path, loads) -> None:
    """Write a plan in the MSR split format (accelerators and CPUs in cluster order) with the
    per-device ``loads`` it records (one per device of ``cluster``, in its order; the judge's
    :func:`workbench.simulate.device_loads` gives them). The writer computes nothing itself.
    """
    import numpy as np

    loads = np.asarray(loads, dtype=float)
    if loads.shape != (len(cluster.devices),):
        raise PlanError(f"write_msr_plan: {loads.size} loads for the {len(cluster.devices)} "
                        f"devices of cluster {cluster.name!r}")

    def ident(v: str):
        return int(v) if v.lstrip("-").isdigit() else v

    out = {"fpgas": [], "cpus": []}
    for i, d in enumerate(cluster.devices):
        entry = {"load": float(loads[i]),
                 "nodes": [ident(v) for v in plan.graph.ops if plan.placement[v] == d.name]}
        out["cpus" if d.kind == "cpu" else "fpgas"].append(entry)
    out["maxLoad"] = float(loads.max())
    write_atomic(path, json.dumps(out, indent=1))


def expert_plan(path, graph: OpGraph, cluster: Cluster) -> Plan:
    """An MSR expert split as a Plan; backward ops the file does not list follow their colour
    class (as the authors do for training graphs).

    >>> import json, os, tempfile
        >>> from workbench import max_load
    >>> g, c = msr_from_dict({"maxFPGAs": 2, "maxCPUs": 1, "maxSizePerFPGA": 1e9, "nodes": [
    ...     {"id": i, "supportedOnFpga": 1, "cpuLatency": 10.0, "fpgaLatency": 2.0,
    ...      "isBackwardNode": int(i >= 2), "colorClass": i % 2, "size": 0} for i in range(4)],
    ...     "edges": [{"sourceId": 0, "destId": 1, "cost": 0.5}, {"sourceId": 1, "destId": 3, "cost": 0.5},
    ...               {"sourceId": 3, "destId": 2, "cost": 0.5}]})
    >>> path = os.path.join(tempfile.mkdtemp(), "expert.json")
    >>> with open(path, "w") as f:
    ...     json.dump({"fpgas": [{"nodes": [0]}, {"nodes": [1]}], "cpus": [{"nodes": []}]}, f)
    >>> plan = expert_plan(path, g, c)   # backward ops 2 and 3 follow colour classes 0 and 1
    >>> plan.placement["2"], plan.placement["3"], max_load(plan, c)
    ('gpu0', 'gpu1', 5.0)
    """
    plan = read_expert(path, graph, cluster)
    plan.method = "expert"
    return plan
