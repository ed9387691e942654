"""Sweeps that survive damaged results, refuse oversized or unsafe specs before the first cell,
and take every workload the command line takes (issue 23, part 2)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

import workbench as wb
import workbench.sweep as sw
from workbench.cli import load_graph_arg, main
from workbench.errors import GraphError, SweepError
from workbench.io import save_graph
from workbench.sweep.cell import run_cell
from workbench.testing.timing import Stopwatch
from workbench.workloads import resolve

SPEC = {"name": "robust", "workloads": ["diamond", "pesto_fig2"],
        "clusters": {"presets": ["2xV100-pcie"], "bandwidth_scale": [0.5, 1.0]},
        "methods": {"single": {}, "m_topo": {}}, "time_limit": 5}

TOML = """\
name = "robust"
workloads = ["diamond", "pesto_fig2"]
time_limit = 5

[clusters]
presets = ["2xV100-pcie"]
bandwidth_scale = [0.5, 1.0]

[methods]
single = {}
m_topo = {}
"""


def _toml(tmp_path, text=TOML, name="s.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _keys_on_disk(path) -> list[str]:
    return [k for f in sorted(Path(path).glob("part-*.parquet"))
            for k in pq.read_table(f, columns=["key"]).column("key").to_pylist()]


def _stderr_lines(capsys) -> list[str]:
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]


# ------------------------------------------------------------------ damaged results
@pytest.fixture(scope="module")
def scheduler():
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address="127.0.0.1:0") as cluster:
        yield cluster.scheduler_address


def _damage(parts: list[Path], folder: Path) -> dict[str, str]:
    """Truncate one chunk, empty another, replace a third with foreign content, add a foreign
    Parquet file named like a chunk; return file name -> the reason the warning must give."""
    data = parts[0].read_bytes()
    parts[0].write_bytes(data[: len(data) // 2])
    parts[1].write_bytes(b"")
    parts[2].write_text("this is not a Parquet file\n")
    foreign = folder / "part-99999999999999999999-foreign.parquet"
    pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}).to_parquet(foreign)
    return {parts[0].name: "not a readable Parquet file", parts[1].name: "empty file (0 bytes)",
            parts[2].name: "not a readable Parquet file", foreign.name: "no column 'key'"}


def test_damaged_chunks_are_quarantined_reported_and_their_cells_run_again(
        tmp_path, scheduler, capsys):
    from distributed import Client

    out = tmp_path / "r"
    cells = sw.Spec.from_dict(SPEC).cells()
    with Client(scheduler) as client:  # one chunk per cell
        sw.run(SPEC, out, client=client, isolate=False, progress=False, flush_rows=1,
               echo=None)
    parts = sorted(out.glob("part-*.parquet"))
    assert len(parts) == len(cells) == 8
    damaged = _damage(parts, out)
    lost = {k for p in parts[:3] for k in [c.key for c in cells] if k not in
            {kk for q in parts[3:] for kk in pq.read_table(q, columns=["key"])
             .column("key").to_pylist()}}
    assert len(lost) == 3

    # load reads the rest and says what it skipped
    with pytest.warns(sw.SweepWarning) as caught:
        df = sw.load(out)
    assert len(df) == 5 and sorted(df["key"]) == sorted({c.key for c in cells} - lost)
    skipped = {Path(s["file"]).name: s["reason"] for s in df.attrs["skipped"]}
    assert set(skipped) == set(damaged)
    for name, why in damaged.items():
        assert why in skipped[name]
        assert any(name in str(w.message) for w in caught)
    assert sw.done_keys(out) == {c.key for c in cells} - lost

    # the resume (through the command line) sets the chunks aside and reruns their cells
    argv = ["sweep", str(_toml(tmp_path)), "--out", str(out), "--scheduler", scheduler,
            "--no-isolate"]
    assert main(argv) == 0
    warnings = [ln for ln in _stderr_lines(capsys) if ln.startswith("warning: ")]
    assert len(warnings) == 4, warnings
    for name, why in damaged.items():
        line = next(w for w in warnings if name in w)
        assert why in line and "moved to quarantine/" in line and "run again" in line
    quarantined = sorted(p.name for p in (out / sw.QUARANTINE).iterdir())
    assert quarantined == sorted(damaged)
    on_disk = _keys_on_disk(out)
    assert sorted(on_disk) == sorted(c.key for c in cells)  # every cell exactly once
    df = sw.load(out)
    assert df.attrs["skipped"] == [] and len(df) == 8
    assert set(df["status"]) == {"heuristic"}
    # a second resume has nothing to do and warns about nothing
    assert main(argv) == 0
    assert "0 to run" in capsys.readouterr().out


def test_load_with_only_damaged_chunks_says_so(tmp_path):
    (tmp_path / "part-1.parquet").write_bytes(b"")
    with pytest.warns(sw.SweepWarning, match="part-1.parquet"), \
            pytest.raises(SweepError, match="all 1 chunks are damaged"):
        sw.load(tmp_path)


def test_a_quarantined_name_is_never_overwritten(tmp_path):
    for _ in range(2):
        (tmp_path / "part-1.parquet").write_bytes(b"junk")
        with pytest.warns(sw.SweepWarning):
            sw.quarantine(tmp_path)
    assert sorted(p.name for p in (tmp_path / sw.QUARANTINE).iterdir()) == [
        "part-1.parquet", "part-1.parquet.1"]


# ------------------------------------------------------------------ oversized grids
def _big_toml(tmp_path) -> Path:
    seeds = ", ".join(map(str, range(100_000)))
    scales = ", ".join(f"{1 + i / 1000:g}" for i in range(1000))
    return _toml(tmp_path, f'name = "big"\nworkloads = ["diamond"]\nseeds = [{seeds}]\n'
                           f'[clusters]\npresets = ["2xV100-pcie"]\nbandwidth_scale = [{scales}]'
                           f'\n[methods]\nsingle = {{}}\n', "big.toml")


def test_a_1e8_cell_grid_is_refused_at_once_with_its_count(tmp_path, capsys):
    spec = _big_toml(tmp_path)
    times = []
    for _ in range(3):  # the best of three, load-scaled: the machine running the suite is shared
        with Stopwatch() as watch:
            assert main(["sweep", str(spec), "--out", str(tmp_path / "r")]) == 2
        times.append(watch.scaled)
    lines = _stderr_lines(capsys)
    assert len(lines) == 3 and lines[0].startswith("error: ")
    assert "100,000,000 cells" in lines[0] and "limit of 100,000" in lines[0]
    assert "--max-cells" in lines[0]
    assert min(times) < 1.0, times
    assert not (tmp_path / "r").exists()
    with pytest.raises(SweepError, match="100,000,000 cells"):
        sw.run(spec, tmp_path / "r", echo=None, progress=False)


def test_max_cells_counts_before_the_filters_and_can_be_raised(tmp_path, capsys):
    spec = _toml(tmp_path)  # 8 cells
    assert sw.Spec.from_toml(spec).n_cells() == 8
    assert main(["sweep", str(spec), "--dry-run", "--max-cells", "7"]) == 2
    assert "the grid has 8 cells" in capsys.readouterr().err
    assert main(["sweep", str(spec), "--dry-run", "--max-cells", "8"]) == 0
    assert capsys.readouterr().out.startswith("sweep robust: 8 cells")
    only = {**SPEC, "methods": {"single": {}, "m_topo": {"workloads": ["diamond"]}}}
    assert sw.Spec.from_dict(only).n_cells() == len(sw.Spec.from_dict(only).cells()) == 6
    assert main(["sweep", str(spec), "--dry-run", "--max-cells", "0"]) == 2


# ------------------------------------------------------------------ workers
@pytest.mark.parametrize("n", ["0", "-2", "100000", "two"])
def test_bad_worker_counts_are_refused(tmp_path, capsys, n):
    assert main(["sweep", str(_toml(tmp_path)), f"--workers={n}",
                 "--out", str(tmp_path / "r")]) == 2
    lines = _stderr_lines(capsys)
    assert len(lines) == 1 and lines[0].startswith("error: ") and "--workers" in lines[0]
    assert not (tmp_path / "r").exists()


def test_worker_bound_is_tied_to_the_machine(tmp_path):
    top = 4 * (os.cpu_count() or 1)
    assert sw.max_workers() == top and sw.check_workers(top) == top
    for bad in (0, -2, top + 1, 1.5, True):
        with pytest.raises(SweepError, match=f"from 1 to {top}"):
            sw.check_workers(bad)
    with pytest.raises(SweepError, match="got 100000"):
        sw.run(SPEC, tmp_path / "r", workers=100000, echo=None, progress=False)
    with pytest.raises(SweepError, match="got 0"):
        sw.connect(workers=0)


# ------------------------------------------------------------------ names
@pytest.mark.parametrize("name", ["../../../tmp/escaped", "", ".", "..", "a/b", "a..b",
                                  "x y", "r\u00e9sultats", "a\\b"])
def test_unsafe_spec_names_are_refused(tmp_path, capsys, name):
    with pytest.raises(SweepError, match="cannot name a results folder"):
        sw.Spec.from_dict({**SPEC, "name": name})
    spec = _toml(tmp_path, TOML.replace('name = "robust"', f"name = {json.dumps(name)}"))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert main(["sweep", str(spec)]) == 2
    finally:
        os.chdir(cwd)
    err = _stderr_lines(capsys)
    assert len(err) == 1 and ", line 1, name: spec name" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]


def test_safe_names_make_the_results_folder(tmp_path):
    s = sw.Spec.from_dict({**SPEC, "name": "bw_v2.1-a"})
    assert s.results_path(tmp_path) == tmp_path / "bw_v2.1-a"
    s.name = "../x"  # changed after validation: still refused before use as a path
    with pytest.raises(SweepError, match="cannot name"):
        s.results_path()


# ------------------------------------------------------------------ up-front validation
@pytest.mark.parametrize("edit, words", [
    (("m_topo = {}", 'pesto = { gap = "abc" }'), ["methods.pesto", "method 'pesto'",
                                                  "parameter gap", "'abc'"]),
    (("m_topo = {}", "local_search = { restarts = 0 }"), ["methods.local_search",
                                                          "parameter restarts", ">= 1"]),
    (("m_topo = {}", 'heft = { insertion = "no" }'), ["methods.heft", "parameter insertion"]),
    (('"pesto_fig2"', '"transformer:100000000"'), ["transformer:100000000",
                                                    "above the limit of 1000000"]),
    (('"pesto_fig2"', '"random:5000"'), ["random:5000", "edges"]),
    (('"pesto_fig2"', '"graphs/missing.json"'), ["graphs/missing.json", "no such graph file"]),
    (('"pesto_fig2"', '"model.onnx"'), ["model.onnx", "no such graph file"]),
    (('"pesto_fig2"', '"suite:nope"'), ["unknown workload 'nope'"]),
])
def test_everything_is_checked_before_the_first_cell(tmp_path, capsys, edit, words):
    spec = _toml(tmp_path, TOML.replace(*edit))
    with Stopwatch() as watch:  # load-scaled (issue 41)
        assert main(["sweep", str(spec), "--out", str(tmp_path / "r")]) == 2
    assert watch.within(30), watch
    err = _stderr_lines(capsys)
    assert len(err) == 1 and err[0].startswith(f"error: spec {spec}, line "), err
    for w in words:
        assert w in err[0], err[0]
    assert not (tmp_path / "r").exists()


def test_seeds_must_not_be_negative():
    with pytest.raises(SweepError, match="seeds must be >= 0"):
        sw.Spec.from_dict({**SPEC, "seeds": [0, -1]})


# ------------------------------------------------------------------ one resolver
def _onnx_model(path: Path) -> Path:
    onnx = pytest.importorskip("onnx")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((16, 16), np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w"], ["y"], name="mm2")]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, ["N", 16])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, ["N", 16])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_a_sweep_takes_model_and_graph_files_as_the_cli_does(tmp_path):
    model = _onnx_model(tmp_path / "model.onnx")
    graph = tmp_path / "g.json"
    save_graph(wb.samples.transformer(40), graph)
    for w in (str(model), str(graph), "msr:op_bert3_inference", "suite:layered300-4xV100",
              "cnn:60"):
        g, own = resolve(w)
        g2, own2 = load_graph_arg(w)
        g3, own3 = sw.load_workload(w)
        assert g.n_ops == g2.n_ops == g3.n_ops > 0
        assert sorted(g.ops) == sorted(g2.ops) == sorted(g3.ops)
        assert (own is None) == (own2 is None) == (own3 is None)
    spec = sw.Spec.from_dict({"workloads": [str(model), str(graph)],
                              "clusters": {"presets": ["2xV100-pcie"]},
                              "methods": {"m_topo": {}}})
    rows = [run_cell(c.as_dict()) for c in spec.cells()]
    assert [r["status"] for r in rows] == ["heuristic", "heuristic"], [r["error"] for r in rows]
    assert [r["graph_ops"] for r in rows] == [resolve(str(model))[0].n_ops, 40]


def test_resolve_names_what_is_wrong(tmp_path):
    (tmp_path / "d").mkdir()
    empty = tmp_path / "empty.json"
    save_graph(wb.OpGraph.from_ops([], [], name="e"), empty)
    cases = {str(tmp_path / "d"): "is a directory", "cnn:abc": "bad sample size",
             "cnn:3000000": "above the limit", "diamond:5": "does not take a size",
             "nope": "unknown sample 'nope'", "": "expected a graph file"}
    for spec, words in cases.items():
        with pytest.raises(GraphError, match=words):
            resolve(spec)
    with pytest.raises(GraphError, match="has no ops"):
        resolve(str(empty))
