"""Bad input of every class gets a library error naming the offending item.

Command line: exit status 2 and exactly one line ``error: ...`` on stderr (in-process through
``workbench.cli.main``; a handful through real subprocesses). API: a WorkbenchError subclass,
never a bare ValueError/TypeError. Also: bounded resources, outputs committed together,
SIGTERM, and loopback-only TensorFlow servers.
"""

from __future__ import annotations

import copy
import gzip
import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

import workbench as wb
from workbench import samples
from workbench.cli import main
from workbench.cluster import Cluster, Device, Link
from workbench.errors import (
    ClusterError,
    FormatError,
    GraphError,
    OutputError,
    SolverError,
    WorkbenchError,
)
from workbench.graph import OpGraph
from workbench.io import (
    dump_cluster,
    dump_graph,
    dump_plan,
    load_cluster,
    load_graph,
    load_plan,
    write_atomic,
)
from workbench.testing.process import default_signals
from workbench.testing.timing import Stopwatch, slowdown

ROOT = Path(__file__).resolve().parents[2]


def run_cli(argv, capsys) -> str:
    """Run the CLI in-process; assert status 2 and one ``error:`` line; return the line."""
    capsys.readouterr()
    status = main([str(a) for a in argv])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert status == 2, (status, err)
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


def write(tmp_path: Path, name: str, data) -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return p


# ------------------------------------------------------------------ graph files
def _graph():
    return dump_graph(samples.diamond())


def _node(k=0, **kv):
    def f(d):
        d["nodes"][k].update(kv)
    return f


def _edge(k=0, **kv):
    def f(d):
        d["edges"][k].update(kv)
    return f


def _set(key, value):
    def f(d):
        d[key] = value
    return f


def _del_node_key(key):
    def f(d):
        del d["nodes"][0][key]
    return f


GRAPH_CASES = {
    "nodes-dict": (_set("nodes", {}), "nodes"),
    "nodes-string": (_set("nodes", "abc"), "nodes"),
    "nodes-null": (_set("nodes", None), "nodes"),
    "edges-dict": (_set("edges", {"a": "b"}), "edges"),
    "edges-missing": (lambda d: d.pop("edges"), "edges"),
    "node-list": (lambda d: d["nodes"].__setitem__(0, ["a"]), "nodes[0]"),
    "node-name-int": (_node(name=5), "nodes[0].name"),
    "node-name-empty": (_node(name=""), "nodes[0].name"),
    "node-name-missing": (_del_node_key("name"), "nodes[0]"),
    "compute-missing": (_del_node_key("compute"), "nodes[0]"),
    "compute-list": (_node(compute=[1, 2]), "nodes[0].compute"),
    "compute-string": (_node(compute="fast"), "nodes[0].compute"),
    "compute-number": (_node(compute=3), "nodes[0].compute"),
    "compute-empty": (_node(compute={}), "nodes[0].compute"),
    "compute-value-string": (_node(compute={"gpu": "1"}), "nodes[0].compute.gpu"),
    "compute-value-negative": (_node(compute={"gpu": -1}), "nodes[0].compute.gpu"),
    "compute-value-bool": (_node(compute={"gpu": True}), "nodes[0].compute.gpu"),
    "compute-value-null": (_node(compute={"gpu": None}), "nodes[0].compute.gpu"),
    "compute-value-dict": (_node(compute={"gpu": {}}), "nodes[0].compute.gpu"),
    "compute-kind-empty": (_node(compute={"": 1.0}), "nodes[0].compute"),
    "memory-string": (_node(memory="16GB"), "nodes[0].memory"),
    "memory-negative": (_node(memory=-5), "nodes[0].memory"),
    "memory-bool": (_node(memory=True), "nodes[0].memory"),
    "memory-list": (_node(memory=[1]), "nodes[0].memory"),
    "kind-list": (_node(kind=["fwd"]), "nodes[0].kind"),
    "kind-unknown": (_node(kind="sideways"), "nodes[0].kind"),
    "kind-number": (_node(kind=1), "nodes[0].kind"),
    "colocate-true": (_node(colocate=True), "nodes[0].colocate"),
    "colocate-list": (_node(colocate=[1]), "nodes[0].colocate"),
    "colocate-float": (_node(colocate=1.5), "nodes[0].colocate"),
    "op-type-number": (_node(op_type=3), "nodes[0].op_type"),
    "splits-string": (_node(splits="batch"), "nodes[0].splits"),
    "splits-zero": (_node(splits={"batch": 0}), "nodes[0].splits.batch"),
    "splits-float": (_node(splits={"batch": 2.5}), "nodes[0].splits.batch"),
    "attrs-string": (_node(attrs="x"), "nodes[0].attrs"),
    "attrs-number": (_node(attrs=7), "nodes[0].attrs"),
    "attrs-list": (_node(attrs=[1]), "nodes[0].attrs"),
    "meta-string": (_set("meta", "resnet"), "meta"),
    "meta-number": (_set("meta", 3), "meta"),
    "meta-list": (_set("meta", []), "meta"),
    "name-number": (_set("name", 12), "name"),
    "edge-list": (lambda d: d["edges"].__setitem__(0, ["a", "b"]), "edges[0]"),
    "edge-src-int": (_edge(src=1), "edges[0].src"),
    "edge-dst-missing": (lambda d: d["edges"][0].pop("dst"), "edges[0]"),
    "edge-bytes-string": (_edge(bytes="4MB"), "edges[0].bytes"),
    "edge-bytes-negative": (_edge(bytes=-1), "edges[0].bytes"),
    "edge-comm-string": (_edge(comm="fast"), "edges[0].comm"),
    "edge-comm-negative": (_edge(comm=-0.5), "edges[0].comm"),
    "version-true": (_set("version", True), "version"),
    "version-string": (_set("version", "1"), "version"),
    "version-2": (_set("version", 2), "version"),
    "version-float": (_set("version", 1.5), "version"),
    "version-missing": (lambda d: d.pop("version"), "version"),
    "format-wrong": (_set("format", "placement-workbench.cluster"), "format"),
    "format-number": (_set("format", 1), "format"),
    "duplicate-op": (lambda d: d["nodes"].append(copy.deepcopy(d["nodes"][0])), "twice"),
    "dangling-edge": (lambda d: d["edges"].append({"src": "a", "dst": "zz"}), "'zz'"),
    "duplicate-edge": (lambda d: d["edges"].append(dict(d["edges"][0])), "twice"),
    "cycle": (lambda d: d["edges"].append({"src": "d", "dst": "a"}), "cycle"),
    "self-loop": (lambda d: d["edges"].append({"src": "a", "dst": "a"}), "self-loop"),
    "lone-surrogate-name": (lambda d: d["nodes"].append({"name": "x\ud800",
                                                         "compute": {"gpu": 1}}), "surrogate"),
    "deep-attrs": (_node(attrs=json.loads('{"a": ' * 80 + "1" + "}" * 80)), "nested deeper"),
    "empty-graph": (lambda d: (d.update(nodes=[], edges=[])), "no ops"),
}


@pytest.mark.parametrize("case", list(GRAPH_CASES), ids=list(GRAPH_CASES))
def test_graph_file_types(case, tmp_path, capsys):
    mutate, named = GRAPH_CASES[case]
    d = _graph()
    mutate(d)
    p = tmp_path / "g.json"
    p.write_text(json.dumps(d))  # ensure_ascii: lone surrogates survive as \ud800
    line = run_cli(["info", p], capsys)
    assert named in line and "g.json" in line


# ------------------------------------------------------------------ cluster files
def _cluster():
    return dump_cluster(Cluster.preset("2x4xV100"))


def _dev(**kv):
    def f(d):
        d["devices"][0].update(kv)
    return f


CLUSTER_CASES = {
    "devices-dict": (_set("devices", {"gpu0": {}}), "devices"),
    "devices-empty": (_set("devices", []), "devices"),
    "devices-string": (_set("devices", "gpu0"), "devices"),
    "device-string": (lambda d: d["devices"].__setitem__(0, "gpu0"), "devices[0]"),
    "memory-string": (_dev(memory="x"), "devices[0].memory"),
    "memory-negative": (_dev(memory=-1), "devices[0].memory"),
    "memory-bool": (_dev(memory=False), "devices[0].memory"),
    "speed-zero": (_dev(speed=0), "devices[0].speed"),
    "speed-string": (_dev(speed="fast"), "devices[0].speed"),
    "speed-null": (_dev(speed=None), "devices[0].speed"),
    "kind-list": (_dev(kind=["gpu"]), "devices[0].kind"),
    "name-number": (_dev(name=3), "devices[0].name"),
    "host-number": (_dev(host=0), "devices[0].host"),
    "recv-negative": (_dev(recv_overhead_ms=-1), "devices[0].recv_overhead_ms"),
    "unknown-field": (_dev(memroy=5), "devices[0]"),
    "duplicate-name": (lambda d: d["devices"][1].update(name="gpu0"), "used twice"),
    "intra-string": (_set("intra_host", "fast"), "intra_host"),
    "latency-string": (lambda d: d["intra_host"].update(latency_ms="x"), "intra_host.latency_ms"),
    "bandwidth-zero": (lambda d: d["inter_host"].update(bandwidth_bytes_per_ms=0),
                       "inter_host.bandwidth_bytes_per_ms"),
    "bandwidth-negative": (lambda d: d["host_link"].update(bandwidth_bytes_per_ms=-1),
                           "host_link.bandwidth_bytes_per_ms"),
    "links-dict": (_set("links", {}), "links"),
    "link-unknown-device": (_set("links", [{"src": "gpu0", "dst": "zz", "latency_ms": 1}]),
                            "'zz'"),
    "link-to-itself": (_set("links", [{"src": "gpu0", "dst": "gpu0"}]), "itself"),
    "link-twice": (_set("links", [{"src": "gpu0", "dst": "gpu1"}] * 2), "twice"),
    "mode-unknown": (_set("mode", "teleport"), "mode"),
    "version-true": (_set("version", True), "version"),
    "too-many-devices": (lambda d: d.update(devices=[{"name": f"g{i}"} for i in range(5000)]),
                         "devices"),
    "top-level-list": (lambda d: d.clear(), "format"),
}


@pytest.mark.parametrize("case", list(CLUSTER_CASES), ids=list(CLUSTER_CASES))
def test_cluster_file_types(case, tmp_path, capsys):
    mutate, named = CLUSTER_CASES[case]
    d = _cluster()
    mutate(d)
    p = write(tmp_path, "c.json", d)
    line = run_cli(["info", "diamond", "--cluster", p], capsys)
    assert named in line and "c.json" in line


# ------------------------------------------------------------------ plan files
def _plan():
    g = samples.diamond()
    plan = wb.solve(g, Cluster.preset("2xV100-pcie"), method="round_robin")
    return dump_plan(plan, embed_graph=True)


PLAN_CASES = {
    "graph-string": (_set("graph", "diamond"), "graph"),
    "graph-data-string": (_set("graph_data", "diamond"), "graph_data"),
    "graph-data-bad-node": (lambda d: d["graph_data"]["nodes"][0].update(memory="x"),
                            "graph_data.nodes[0].memory"),
    "placement-list": (_set("placement", ["gpu0"]), "placement"),
    "placement-int": (lambda d: d["placement"].update(a=0), "placement.a"),
    "order-list": (_set("order", ["a"]), "order"),
    "order-device-string": (_set("order", {"gpu0": "a"}), "order.gpu0"),
    "status-bogus": (_set("status", "great"), "status"),
    "stats-string": (_set("stats", "fast"), "stats"),
    "n-ops-string": (lambda d: d["graph"].update(n_ops="4"), "graph.n_ops"),
    "version-true": (_set("version", True), "version"),
    "fingerprint-other": (lambda d: d["graph"].update(fingerprint="0" * 16), "not for graph"),
    "unknown-device": (lambda d: d["placement"].update(a="tpu9"), "tpu9"),
    "unplaced-op": (lambda d: (d["placement"].pop("a"), d.update(order=None)), "unplaced"),
}


@pytest.mark.parametrize("case", list(PLAN_CASES), ids=list(PLAN_CASES))
def test_plan_file_types(case, tmp_path, capsys):
    mutate, named = PLAN_CASES[case]
    d = _plan()
    mutate(d)
    p = write(tmp_path, "p.json", d)
    line = run_cli(["simulate", p, "--plan", p, "--cluster", "2xV100-pcie"], capsys)
    assert named in line


# ------------------------------------------------------------------ MSR workloads
def _msr():
    return {"maxFPGAs": 2, "maxCPUs": 1, "maxSizePerFPGA": 1e9, "nodes": [
        {"id": 1, "supportedOnFpga": 1, "cpuLatency": 9.0, "fpgaLatency": 1.0, "size": 10},
        {"id": 2, "supportedOnFpga": 0, "cpuLatency": 3.0, "fpgaLatency": 0, "colorClass": 7}],
        "edges": [{"sourceId": 1, "destId": 2, "cost": 0.25, "size": 4096}]}


MSR_CASES = {
    "maxFPGAs-negative": (_set("maxFPGAs", -3), "maxFPGAs"),
    "maxFPGAs-string": (_set("maxFPGAs", "2"), "maxFPGAs"),
    "maxFPGAs-float": (_set("maxFPGAs", 2.5), "maxFPGAs"),
    "maxCPUs-bool": (_set("maxCPUs", True), "maxCPUs"),
    "maxCPUs-huge": (_set("maxCPUs", 10**6), "maxCPUs"),
    "maxSize-string": (_set("maxSizePerFPGA", "1GB"), "maxSizePerFPGA"),
    "nodes-dict": (_set("nodes", {"1": {}}), "nodes"),
    "cpuLatency-string": (_node(cpuLatency="9"), "nodes[0].cpuLatency"),
    "fpgaLatency-negative": (_node(fpgaLatency=-1), "nodes[0].fpgaLatency"),
    "supported-2": (_node(supportedOnFpga=2), "nodes[0].supportedOnFpga"),
    "backward-string": (_node(isBackwardNode="yes"), "nodes[0].isBackwardNode"),
    "id-list": (_node(id=[1]), "nodes[0].id"),
    "edge-source-list": (_edge(sourceId=[1]), "edges[0].sourceId"),
    "edge-cost-negative": (_edge(cost=-1), "edges[0].cost"),
    "no-devices": (lambda d: d.update(maxFPGAs=0, maxCPUs=0), "neither"),
}


@pytest.mark.parametrize("case", list(MSR_CASES), ids=list(MSR_CASES))
def test_msr_file_types(case, tmp_path, capsys):
    mutate, named = MSR_CASES[case]
    d = _msr()
    mutate(d)
    p = write(tmp_path, "w.json", d)
    line = run_cli(["info", p], capsys)
    assert named in line


# ------------------------------------------------------------------ damaged files
def _gz(tmp_path, name, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def _files(tmp_path):
    good = json.dumps(_graph()).encode()
    gz = gzip.compress(good)
    return {
        "truncated-gzip": (_gz(tmp_path, "t.json.gz", gz[: len(gz) // 2]), "truncated"),
        "corrupt-gzip": (_gz(tmp_path, "c.json.gz", gz[:10] + b"\0" * 40 + gz[50:]), "gzip"),
        "gzip-header-only": (_gz(tmp_path, "h.json.gz", b"\x1f\x8b"), "gzip"),
        "deep-json": (write(tmp_path, "deep.json", "[" * 100_000 + "]" * 100_000), "deep"),
        "nan-constant": (write(tmp_path, "nan.json", json.dumps(_graph()).replace(
            '"memory": 0.0', '"memory": NaN', 1)), "NaN"),
        "invalid-utf8": (_gz(tmp_path, "u.json", b'{"a": "\xff\xfe"}'), "UTF-8"),
        "empty-file": (write(tmp_path, "e.json", ""), "not valid JSON"),
        "not-json": (write(tmp_path, "n.json", "nodes: [a, b]"), "not valid JSON"),
        "json-list": (write(tmp_path, "l.json", "[1, 2]"), "JSON object"),
        "json-number": (write(tmp_path, "num.json", "42"), "JSON object"),
        "directory": (tmp_path, "directory"),
    }


FILE_CASES = ["truncated-gzip", "corrupt-gzip", "gzip-header-only", "deep-json", "nan-constant",
              "invalid-utf8", "empty-file", "not-json", "json-list", "json-number", "directory"]


@pytest.mark.parametrize("case", FILE_CASES)
def test_damaged_files(case, tmp_path, capsys):
    path, named = _files(tmp_path)[case]
    assert named in run_cli(["info", path], capsys)


def test_gzip_is_streamed_with_a_limit(tmp_path, monkeypatch, capsys):
    import workbench.io.files as jf

    bomb = gzip.compress(b'{"a": "' + b"x" * (8 << 20) + b'"}')  # 8 MiB in ~8 KB
    assert len(bomb) < 100_000
    p = _gz(tmp_path, "bomb.json.gz", bomb)
    monkeypatch.setattr(jf, "MAX_INPUT_BYTES", 4 << 20)
    assert "input limit of 4 MiB" in run_cli(["info", p], capsys)
    with pytest.raises(FormatError, match="exceeds the input limit"):
        jf.read_json(p)


# ------------------------------------------------------------------ solver parameters
PARAM_CASES = [
    ("pesto", "target=abc", "target"), ("pesto", "target=0", "target"),
    ("pesto_ilp", "gap=-1", "gap"), ("ip_contig", "gap=nan", "gap"),
    ("m_sct", "threshold=NaN", "threshold"), ("m_sct", "threshold=1.5", "threshold"),
    ("local_search", "restarts=0", "restarts"), ("local_search", "restarts=2.5", "restarts"),
    ("local_search", "seed=-1", "--seed"), ("metis", "seed=x", "--seed"),
    ("local_search", "time_limit=5", "--time-limit"),
    ("heft", "insertion=no", "insertion"), ("dpos", "insertion=1", "insertion"),
    ("expert", "split=5", "split"), ("expert", "split=true", "split"),
    ("expert", "split=[5]", "part 0"), ("expert", 'split=[["a", "b"], ["a"]]', "'a'"),
    ("expert", 'split={"a": 5}', "'a'"), ("pesto", 'warm_start=["nope"]', "nope"),
    ("dp", "max_ideals=0", "max_ideals"), ("dp", "allreduce_bandwidth=0", "allreduce_bandwidth"),
    ("latency_ip", "q=0", "q"), ("celeritas", "anchor=middle", "anchor"),
    ("celeritas", "R=0", "R"), ("order_place", "M=-1", "M"), ("pesto", "threads=0", "threads"),
    ("pesto", "balance=Infinity", "balance"), ("single", "device=3", "device"),
    ("heft", "nope=1", "no parameter 'nope'"), ("round_robin", "x=1", "no parameter 'x'"),
    ("heft", "insertion", "KEY=VALUE"), ("heft", "=1", "KEY=VALUE"),
]


@pytest.mark.parametrize("method,param,named", PARAM_CASES,
                         ids=[f"{m}-{p}" for m, p, _ in PARAM_CASES])
def test_solver_parameters(method, param, named, capsys):
    line = run_cli(["solve", "diamond", "-m", method, "-p", param,
                    "--cluster", "2xV100-pcie"], capsys)
    assert named in line


def test_parameter_given_twice(capsys):
    assert "twice" in run_cli(["solve", "diamond", "-m", "heft", "-p", "insertion=true", "-p",
                               "insertion=false"], capsys)


@pytest.mark.parametrize("methods", ["", ",", "single,,heft", "single,single", "nope",
                                     " , "])
def test_compare_methods(methods, capsys):
    run_cli(["compare", "diamond", "--methods", methods], capsys)


API_PARAM_CASES = [
    {"time_limit": "5"}, {"time_limit": -1}, {"time_limit": math.nan}, {"seed": -1},
    {"seed": "1"}, {"seed": 1.5}, {"method": 5}, {"method": "nope"},
    {"method": "heft", "insertion": "no"}, {"method": "local_search", "restarts": 0},
    {"method": "expert", "split": 5}, {"method": "m_sct", "threshold": math.nan},
    {"method": "single", "progress": "yes"},
]


@pytest.mark.parametrize("kw", API_PARAM_CASES, ids=[repr(k) for k in API_PARAM_CASES])
def test_api_solve_parameters(kw):
    kw = {"method": "round_robin", **kw}
    with pytest.raises(SolverError):
        wb.solve(samples.diamond(), Cluster.preset("2xV100-pcie"), **kw)


def test_solve_wrong_objects():
    with pytest.raises(SolverError, match="graph must be an OpGraph"):
        wb.solve("diamond", Cluster.preset("2xV100-pcie"), method="single")
    with pytest.raises(SolverError, match="cluster must be a Cluster"):
        wb.solve(samples.diamond(), "2xV100-pcie", method="single")


def test_methods_json_lists_parameter_declarations(capsys):
    assert main(["methods", "--json"]) == 0
    rows = {r["method"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["local_search"]["parameters"]["restarts"] == {"types": ["int"], "min": 1}
    assert rows["m_sct"]["parameters"]["threshold"] == {"types": ["float"], "min": 0, "max": 1}


def test_declarations_cover_every_solver():
    from workbench.solvers import SOLVERS

    for name, info in SOLVERS.items():
        for p, decl in info.parameters().items():
            assert decl.types != ("any",), (name, p)  # every parameter has a real type


# ------------------------------------------------------------------ the API
def _nx_one_and_string_one():
    G = nx.DiGraph()
    G.add_node(1, compute={"gpu": 1.0})
    G.add_node("1", compute={"gpu": 2.0})
    return OpGraph(G)


API_CASES = {
    "device-memory-string": (lambda: Device("g", memory="x"), ClusterError, "memory"),
    "device-memory-negative": (lambda: Device("g", memory=-1), ClusterError, "memory"),
    "device-speed-zero": (lambda: Device("g", speed=0), ClusterError, "speed"),
    "device-speed-string": (lambda: Device("g", speed="2"), ClusterError, "speed"),
    "device-name-empty": (lambda: Device(""), ClusterError, "name"),
    "device-name-number": (lambda: Device(5), ClusterError, "name"),
    "device-kind-list": (lambda: Device("g", kind=["gpu"]), ClusterError, "kind"),
    "device-host-none": (lambda: Device("g", host=None), ClusterError, "host"),
    "device-recv-nan": (lambda: Device("g", recv_overhead=math.nan), ClusterError, "recv"),
    "link-latency-string": (lambda: Link(latency="x"), ClusterError, "latency"),
    "link-latency-negative": (lambda: Link(latency=-1), ClusterError, "latency"),
    "link-bandwidth-zero": (lambda: Link(0.0, 0), ClusterError, "bandwidth"),
    "link-bandwidth-none": (lambda: Link(0.0, None), ClusterError, "bandwidth"),
    "cluster-empty": (lambda: Cluster([]), ClusterError, "no devices"),
    "cluster-string": (lambda: Cluster("gpu0"), ClusterError, "devices"),
    "cluster-not-devices": (lambda: Cluster([1, 2]), ClusterError, "not a Device"),
    "cluster-too-many": (lambda: Cluster([Device(f"g{i}") for i in range(5000)]),
                         ClusterError, "at most"),
    "cluster-mode": (lambda: Cluster([Device("g")], mode="x"), ClusterError, "mode"),
    "cluster-link-bad": (lambda: Cluster([Device("a"), Device("b")], links={("a", "b"): 5}),
                         ClusterError, "a -> b"),
    "cluster-from-dict-list": (lambda: Cluster.from_dict([]), ClusterError, "dict"),
    "preset-unknown": (lambda: Cluster.preset("nope"), ClusterError, "nope"),
    "from-ops-int-attrs": (lambda: OpGraph.from_ops([("a", 5)]), GraphError, "'a'"),
    "from-ops-single": (lambda: OpGraph.from_ops([("a",)]), GraphError, "pair"),
    "from-ops-string": (lambda: OpGraph.from_ops(["a"]), GraphError, "'a'"),
    "from-ops-none-name": (lambda: OpGraph.from_ops([(None, {"compute": {"gpu": 1}})]),
                           GraphError, "None"),
    "from-ops-edge-4": (lambda: OpGraph.from_ops([("a", {"compute": {"gpu": 1}})],
                                                 [("a", "a", {}, 1)]), GraphError, "edge"),
    "from-ops-edge-attrs": (lambda: OpGraph.from_ops(
        [("a", {"compute": {"gpu": 1}}), ("b", {"compute": {"gpu": 1}})],
        [("a", "b", 5)]), GraphError, "a -> b"),
    "compute-string-number": (lambda: OpGraph.from_ops([("a", {"compute": {"gpu": "1"}})]),
                              GraphError, "not a number"),
    "colocate-true": (lambda: OpGraph.from_ops([("a", {"compute": {"gpu": 1},
                                                       "colocate": True})]),
                      GraphError, "colocate"),
    "kind-list": (lambda: OpGraph.from_ops([("a", {"compute": {"gpu": 1}, "kind": ["fwd"]})]),
                  GraphError, "kind"),
    "memory-bool": (lambda: OpGraph.from_ops([("a", {"compute": {"gpu": 1}, "memory": True})]),
                    GraphError, "memory"),
    "meta-string": (lambda: OpGraph.from_ops([("a", {"compute": {"gpu": 1}})], meta="x"),
                    GraphError, "meta"),
    "surrogate-op": (lambda: OpGraph.from_ops([("a\udc80", {"compute": {"gpu": 1}})]),
                     GraphError, "surrogate"),
    "nx-1-and-string-1": (_nx_one_and_string_one, GraphError, "'1'"),
    "not-a-digraph": (lambda: OpGraph(nx.Graph()), GraphError, "DiGraph"),
    "op-unknown": (lambda: samples.diamond().op("zz"), GraphError, "'zz'"),
    "op-not-string": (lambda: samples.diamond().op(5), GraphError, "5"),
    "op-list": (lambda: samples.diamond().op(["a"]), GraphError, "['a']"),
    "edge-unknown": (lambda: samples.diamond().edge("a", "d"), GraphError, "a -> d"),
    "load-graph-none": (lambda: load_graph(None), FormatError, "None"),
    "load-graph-number": (lambda: load_graph(5), FormatError, "5"),
    "load-graph-missing": (lambda: load_graph("/nonexistent/g.json"), FormatError, "cannot read"),
    "load-cluster-none": (lambda: load_cluster(None), FormatError, "None"),
    "load-plan-none": (lambda: load_plan(None), FormatError, "None"),
    "sample-size-fixed": (lambda: samples.load_sample("diamond", n_ops=7), GraphError,
                          "does not take a size"),
    "sample-too-big": (lambda: samples.cnn(100_000_000), GraphError, "limit"),
    "sample-bool-size": (lambda: samples.cnn(True), GraphError, "n_ops"),
    "sample-random-dense": (lambda: samples.random_dag(100_000), GraphError, "edges"),
    "sample-random-prob": (lambda: samples.random_dag(10, edge_prob=2), GraphError, "edge_prob"),
    "sample-float-size": (lambda: samples.cnn(50.5), GraphError, "n_ops"),
    "sample-unknown": (lambda: samples.load_sample("nope"), GraphError, "nope"),
    "sample-path": (lambda: samples.load_sample("../README"), GraphError, "unknown sample"),
    "sample-not-string": (lambda: samples.load_sample(5), GraphError, "5"),
    "plan-bad-status": (lambda: wb.Plan(samples.diamond(), {}, status="great"), WorkbenchError,
                        "great"),
    "plan-placement-list": (lambda: wb.Plan(samples.diamond(), ["gpu0"]), WorkbenchError,
                            "placement"),
    "plan-order-string": (lambda: wb.Plan(samples.diamond(), {}, order={"gpu0": "a"}),
                          WorkbenchError, "gpu0"),
    "write-surrogate": (lambda: write_atomic("/tmp/never-written.json", "a\ud800"), OutputError,
                        "surrogate"),
    "write-directory": (lambda: write_atomic("/tmp", "x"), OutputError, "directory"),
    "write-under-file": (lambda: write_atomic(__file__ + "/x.json", "x"), OutputError,
                         "not a directory"),
}


@pytest.mark.parametrize("case", list(API_CASES), ids=list(API_CASES))
def test_api_errors(case):
    fn, exc, named = API_CASES[case]
    with pytest.raises(exc) as info:
        fn()
    assert isinstance(info.value, WorkbenchError)
    assert named in str(info.value)


def test_op_hands_out_copies():
    g = samples.diamond()
    g.op("b")["compute"]["gpu"] = 99.0
    g.op("b")["splits"]["x"] = 2
    g.edge("a", "b")["bytes"] = -1
    assert g.op("b")["compute"]["gpu"] == 2.0 and "x" not in g.op("b")["splits"]
    assert g.edge("a", "b")["bytes"] >= 0
    assert g.total_compute("gpu") == 6.0


def test_nx_integer_names_keep_every_op():
    G = nx.DiGraph()
    G.add_node(1, compute={"gpu": 1.0})
    G.add_node(2, compute={"gpu": 1.0})
    G.add_edge(1, 2)
    assert OpGraph(G).ops == ["1", "2"]


# ------------------------------------------------------------------ command-line arguments
CLI_CASES = {
    "no-command": [],
    "unknown-command": ["frobnicate"],
    "time-limit-word": ["solve", "diamond", "-m", "single", "--time-limit", "abc"],
    "time-limit-negative": ["solve", "diamond", "-m", "single", "--time-limit", "-1"],
    "time-limit-nan": ["solve", "diamond", "-m", "single", "--time-limit", "nan"],
    "time-limit-inf": ["compare", "diamond", "--time-limit", "inf"],
    "seed-negative": ["solve", "diamond", "-m", "single", "--seed", "-1"],
    "seed-word": ["compare", "diamond", "--seed", "x"],
    "memory-zero": ["info", "diamond", "--memory-gib", "0"],
    "memory-nan": ["info", "diamond", "--memory-gib", "nan"],
    "memory-fraction-negative": ["demo", "--memory-fraction", "-1"],
    "order-unknown": ["simulate", "diamond", "--plan", "p.json", "--order", "random"],
    "method-missing": ["solve", "diamond"],
    "method-unknown": ["solve", "diamond", "-m", "nope"],
    "sample-fixed-size": ["info", "diamond:7"],
    "sample-size-word": ["info", "cnn:abc"],
    "sample-size-empty": ["info", "cnn:"],
    "sample-size-huge": ["info", "cnn:100000000"],
    "sample-size-negative": ["info", "cnn:-5"],
    "sample-unknown": ["info", "nope:5"],
    "graph-empty-string": ["info", ""],
    "cluster-unknown": ["info", "diamond", "--cluster", "nope"],
    "cluster-directory": ["info", "diamond", "--cluster", "/tmp"],
    "plan-missing": ["simulate", "diamond", "--plan", "/nonexistent/p.json"],
    "run-devices-zero": ["run", "mlp", "--devices", "0"],
    "run-steps-zero": ["run", "mlp", "--steps", "0"],
}


@pytest.mark.parametrize("case", list(CLI_CASES), ids=list(CLI_CASES))
def test_cli_arguments(case, capsys):
    run_cli(CLI_CASES[case], capsys)


# ------------------------------------------------------------------ outputs
def test_output_paths_are_checked_first(tmp_path, capsys):
    base = ["solve", "diamond", "-m", "single"]
    assert "directory" in run_cli(base + ["--out", tmp_path], capsys)
    assert "directory" in run_cli(base + ["--trace", tmp_path], capsys)
    f = write(tmp_path, "file.txt", "x")
    assert "not a directory" in run_cli(base + ["--out", f / "plan.json"], capsys)
    assert "cannot write" in run_cli(base + ["--out", "/proc/forbidden.json"], capsys)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert "not a regular file" in run_cli(base + ["--out", fifo], capsys)
    with pytest.raises(OutputError, match="not a regular file"):
        write_atomic(fifo, "x")
    assert fifo.exists() and not fifo.is_file()
    fifo.unlink()
    same = tmp_path / "same.json"
    assert "same file" in run_cli(base + ["--out", same, "--trace", same], capsys)
    assert "directory" in run_cli(["compare", "diamond", "--methods", "single",
                                   "--csv", tmp_path], capsys)
    assert sorted(os.listdir(tmp_path)) == ["file.txt"]


def test_outputs_commit_together(tmp_path, capsys, monkeypatch):
    from workbench import cli

    csv, report = tmp_path / "out.csv", tmp_path / "out.html"
    csv.write_text("old")
    report.write_text("old")

    def fail_after_csv(cmp, graph, cluster, args, title):
        write_atomic(args.csv, "new")
        raise OutputError("report failed")

    monkeypatch.setattr(cli, "_write_outputs", fail_after_csv)
    run_cli(["compare", "diamond", "--methods", "single", "--csv", csv, "--report", report],
            capsys)
    assert csv.read_text() == "old" and report.read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["out.csv", "out.html"]  # no temporary left


_SIGNAL_SCRIPT = r"""
import os, signal, sys
import workbench.cli as cli
orig = cli._write_outputs
def write_then_signal(*a):
    orig(*a)
    os.kill(os.getpid(), getattr(signal, sys.argv[1]))
cli._write_outputs = write_then_signal
sys.exit(cli.main(["compare", "diamond", "--methods", "single", "--csv", sys.argv[2],
                   "--report", sys.argv[3]]))
"""


# the suite's own dispositions as a CI job without a terminal has them (SIGINT ignored)
_IGNORING_PARENT = [sys.executable, "-c",
                    ("import os, signal, sys\n"
                     "for s in (signal.SIGINT, signal.SIGTERM):\n"
                     "    signal.signal(s, signal.SIG_IGN)\n"
                     "os.execv(sys.argv[1], sys.argv[1:])\n")]


@pytest.mark.parametrize("inherited", ["as-started", "ignored"])
@pytest.mark.parametrize("sig,status", [("SIGTERM", 143), ("SIGINT", 130)])
def test_signal_removes_temporary_outputs(sig, status, inherited, tmp_path):
    csv, report = tmp_path / "o.csv", tmp_path / "o.html"
    csv.write_text("old")
    # the child starts with default dispositions even when the suite runs with SIGINT
    # ignored (a background job without a terminal), as a command started from a shell does
    cmd = default_signals([sys.executable, "-c", _SIGNAL_SCRIPT, sig, str(csv), str(report)])
    if inherited == "ignored":
        cmd = _IGNORING_PARENT + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300 * slowdown(), cwd=ROOT,
                       check=False)
    assert r.returncode == status, r.stderr
    assert "Traceback" not in r.stderr
    assert sorted(os.listdir(tmp_path)) == ["o.csv"] and csv.read_text() == "old"


_LEAKY_TESTS = r"""
import signal

def test_leaves_a_handler():
    signal.signal(signal.SIGUSR1, lambda *a: None)

def test_next_one_sees_the_default():
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
"""


@pytest.mark.slow
def test_suite_guard_fails_a_test_that_leaves_a_signal_handler(tmp_path):
    import shutil

    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_leaky.py").write_text(_LEAKY_TESTS)
    r = subprocess.run(default_signals([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly",
                                        "-p", "no:cacheprovider", str(tmp_path)]),
                       capture_output=True, text=True, timeout=300 * slowdown(), cwd=tmp_path,
                       check=False)
    assert r.returncode == 1, r.stdout
    assert "test_leaves_a_handler left the handler of SIGUSR1 changed" in r.stdout
    assert "2 passed, 1 error" in r.stdout  # the next test ran with the default restored


def test_successful_outputs_are_all_written(tmp_path, capsys):
    out, trace = tmp_path / "p.json", tmp_path / "t.json"
    assert main(["solve", "diamond", "-m", "single", "--out", str(out), "--trace",
                 str(trace)]) == 0
    assert load_plan(out).method == "single" and json.loads(trace.read_text())
    assert sorted(os.listdir(tmp_path)) == ["p.json", "t.json"]


# ------------------------------------------------------------------ real subprocesses
SUBPROCESS_CASES = [
    ["info", "GRAPH"],
    ["solve", "diamond", "-m", "local_search", "-p", "restarts=0"],
    ["compare", "diamond", "--methods", ""],
    ["info", "cnn:100000000"],
]


@pytest.mark.parametrize("argv", SUBPROCESS_CASES, ids=["nodes-dict", "restarts", "methods",
                                                         "huge"])
def test_real_subprocess(argv, tmp_path):
    d = _graph()
    d["nodes"] = {}
    g = write(tmp_path, "g.json", d)
    argv = [str(g) if a == "GRAPH" else a for a in argv]
    r = subprocess.run([sys.executable, "-m", "workbench", *argv], capture_output=True,
                       text=True, timeout=300 * slowdown(), cwd=ROOT,
                       check=False)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.stderr


# ------------------------------------------------------------------ bounded resources
def test_thousand_devices_load_fast(tmp_path):
    from workbench.io import save_cluster

    devs = [Device(f"gpu{i}", "gpu", 16e9, host=f"h{i // 8}") for i in range(1000)]
    c = Cluster(devs, intra_host=Link(0.01, 4.5e7), inter_host=Link(0.03, 1.1e7),
                links={("gpu0", "gpu9"): Link(0.5, 1e6)})
    p = tmp_path / "c.json"
    save_cluster(c, p)
    with Stopwatch() as sw:  # load-scaled (issue 41)
        c2 = load_cluster(p)
        cc = c2.c
        lat, _ = c2.mean_link()
        x = c2.transfer_ms("gpu0", "gpu999", 1e6)
    assert sw.within(1.0), sw
    assert x == pytest.approx(0.03 + 1e6 / 1.1e7)
    assert c2.transfer_ms("gpu0", "gpu9", 1e6) == pytest.approx(1.5)
    assert lat == pytest.approx(float(cc.lat[~__import__("numpy").eye(1000, dtype=bool)].mean()))
    assert cc.pair_lat_inv([0, 0, 5], [9, 1, 5])[0].tolist() == [0.5, 0.01, 0.0]


# ------------------------------------------------------------------ schemas
def test_published_schemas_match_and_are_valid():
    jsonschema = pytest.importorskip("jsonschema")
    from workbench.io.schema import SCHEMAS

    for kind, schema in SCHEMAS.items():
        published = json.loads((ROOT / "docs" / "schemas" / f"{kind}.schema.json").read_text())
        assert published == json.loads(json.dumps(schema)), kind
        jsonschema.Draft202012Validator.check_schema(schema)
    # the reference validator agrees with ours on a good and a bad graph
    v = jsonschema.Draft202012Validator(SCHEMAS["graph"])
    good = _graph()
    assert not list(v.iter_errors(good))
    good["nodes"][0]["memory"] = "x"
    assert list(v.iter_errors(good))


# ------------------------------------------------------------------ loopback servers
_BIND_SCRIPT = r"""
import socket
a = socket.socket(); a.bind(("0.0.0.0", 0)); a.listen()
b = socket.socket(socket.AF_INET6); b.bind(("::", 0)); b.listen()
print(a.getsockname()[0], b.getsockname()[0])
"""


def test_loopback_shim_rebinds_wildcard():
    from workbench.runtime.distributed import loopback_shim

    try:
        shim = loopback_shim()
    except WorkbenchError as e:
        pytest.skip(str(e))
    env = {**os.environ, "LD_PRELOAD": str(shim)}
    r = subprocess.run([sys.executable, "-c", _BIND_SCRIPT], capture_output=True, text=True,
                       env=env, timeout=60 * slowdown(), check=False)
    assert r.returncode == 0, r.stderr
    v4, v6 = r.stdout.split()
    assert v4 == "127.0.0.1" and v6 in ("::ffff:127.0.0.1", "::1")


def test_listening_addresses_reads_proc():
    from workbench.runtime.distributed import listening_addresses

    s = socket.socket()
    s.bind(("0.0.0.0", 0))
    s.listen()
    try:
        assert listening_addresses(s.getsockname()[1]) == ["0.0.0.0"]
    finally:
        s.close()


@pytest.mark.tf
@pytest.mark.slow
def test_local_servers_listen_on_loopback_only():
    pytest.importorskip("tensorflow")
    from workbench.runtime.distributed import LocalServers, listening_addresses

    with LocalServers(1, 1) as srv:
        port = int(srv.addresses[0].rsplit(":", 1)[1])
        addrs = listening_addresses(port)
    assert addrs and all(a in ("127.0.0.1", "::1") for a in addrs), addrs


def test_in_process_servers_need_consent():
    from workbench.runtime.distributed import LocalServers

    with pytest.raises(WorkbenchError, match="bind_all=True"):
        LocalServers(1, 1, processes=False)
