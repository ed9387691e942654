"""Sweeps: spec validation, cells, the killable cell process, Dask runs that resume and survive
a killed worker, the analysis and the command line."""

from __future__ import annotations

import json
import math
import os
import signal
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import workbench as wb
import workbench.sweep as sw
from workbench.cli import main
from workbench.errors import SweepError
from workbench.sweep.cell import make_cluster, run_cell
from workbench.sweep.runner import CellProcess
from workbench.testing.timing import Stopwatch
from workbench.workloads import memory_footprint

ROOT = Path(__file__).resolve().parents[2]

TOML = """\
name = "t"
workloads = ["diamond", "pesto_fig2"]
seeds = [0]
time_limit = 5

[clusters]
presets = ["2xV100-pcie"]
bandwidth_scale = [0.5, 1.0]

[methods]
single = {}
heft = {}
"""


def _write(tmp_path, text, name="s.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


# ------------------------------------------------------------------ specs and cells
@pytest.mark.parametrize("edit, line, words", [
    (('"pesto_fig2"', '"pesto_fig2", "nosuch:40"'), 2, ["workload 'nosuch:40'", "unknown sample"]),
    (('presets = ["2xV100-pcie"]', 'presets = ["2xV100-pcie", "9xTPU"]'), 7, ["9xTPU", "preset"]),
    (("heft = {}", "heft = {}\nnope = {}"), 13, ["unknown method 'nope'", "valid methods"]),
    (("heft = {}", "heft = {insertion = true, depth = 2}"), 12, ["no parameter 'depth'",
                                                                "insertion"]),
    (("seeds = [0]", "seeds = [0]\nmeasures = true"), 4, ["unknown key 'measures'"]),
    (('bandwidth_scale = [0.5, 1.0]', 'bandwidth_scale = [0.0]'), 8, ["bandwidth_scale"]),
])
def test_bad_spec_is_rejected_naming_the_line(tmp_path, edit, line, words):
    p = _write(tmp_path, TOML.replace(*edit))
    with pytest.raises(SweepError) as e:
        sw.Spec.from_toml(p)
    msg = str(e.value)
    assert f"{p}, line {line}," in msg, msg
    for w in words:
        assert w in msg


def test_bad_spec_runs_no_cell(tmp_path):
    p = _write(tmp_path, TOML.replace("heft = {}", "heft = {}\nnope = {}"))
    assert main(["sweep", str(p), "--out", str(tmp_path / "r")]) == 2
    assert not (tmp_path / "r").exists()


def test_expert_needs_its_split_and_own_needs_a_cluster():
    with pytest.raises(SweepError, match="needs parameter 'split'"):
        sw.Spec.from_dict({"workloads": ["diamond"], "methods": {"expert": {}}})
    with pytest.raises(SweepError, match="preset 'own' needs"):
        sw.Spec.from_dict({"workloads": ["diamond"], "clusters": {"presets": ["own"]},
                           "methods": {"single": {}}})


def test_cells_are_the_filtered_cartesian_product(monkeypatch):
    spec = {"workloads": ["diamond", "pesto_fig2"],
            "clusters": {"presets": ["2xV100-pcie", "4xV100-nvlink"], "devices": [0, 3],
                         "bandwidth_scale": [1, 2]},
            "methods": {"single": {}, "heft": {}, "h2": {"method": "heft", "insertion": False,
                                                         "workloads": ["diamond"]}},
            "seeds": [0, 1],
            "exclude": [{"preset": "4xV100-nvlink", "devices": 3}, {"method": "single",
                                                                    "seed": 1}]}
    s = sw.Spec.from_dict(spec)
    cells = s.cells()
    full = [(w, p, n, b, m, seed) for w in spec["workloads"] for p in spec["clusters"]["presets"]
            for n in (0, 3) for b in (1.0, 2.0) for m in ("single", "heft", "h2")
            for seed in (0, 1)]
    keep = [t for t in full if not (t[1] == "4xV100-nvlink" and t[2] == 3)
            and not (t[4] == "single" and t[5] == 1) and not (t[4] == "h2" and t[0] != "diamond")]
    assert sorted((c.workload, c.preset, c.devices, c.bandwidth_scale, c.method, c.seed)
                  for c in cells) == sorted(keep)
    assert len({c.key for c in cells}) == len(cells)
    h2 = next(c for c in cells if c.method == "h2")
    assert h2.solver == "heft" and json.loads(h2.params) == {"insertion": False}
    s2 = sw.Spec.from_dict({**spec, "filter": lambda c: c.seed == 0})
    assert {c.seed for c in s2.cells()} == {0}
    # the key holds the workbench version: a new version reruns every cell
    k = cells[0].key
    monkeypatch.setattr(wb, "__version__", "99.0")
    assert cells[0].key != k


def test_cluster_variations():
    g = wb.samples.transformer(60, seed=0)
    base = wb.Cluster.preset("4xV100-nvlink")
    slow = make_cluster("4xV100-nvlink", g, bandwidth_scale=0.25, latency_scale=2.0)
    assert slow.transfer_ms("gpu0", "gpu1", 45e6) == pytest.approx(
        2 * 0.01 + 4 * base.transfer_ms("gpu0", "gpu1", 45e6) - 4 * 0.01)
    assert len(make_cluster("4xV100-nvlink", g, devices=2)) == 2
    big = make_cluster("2x4xV100", g, devices=12)
    assert len(set(big.names)) == 12 and len(big.hosts()) == 3
    capped = make_cluster("4xV100-nvlink", g, memory_fraction=0.3)
    # a fraction of the live footprint (the judge's memory model), not of the static sum
    need = memory_footprint(g, wb.Cluster.preset("4xV100-nvlink"))
    assert need != pytest.approx(g.total_memory())
    assert all(d.memory == pytest.approx(0.3 * need) for d in capped.devices)


def test_a_cell_has_compare_columns_and_the_sweep_columns():
    cell = sw.Spec.from_dict({"workloads": ["transformer:80"],
                              "clusters": {"presets": ["2xV100-pcie"],
                                           "memory_fraction": [0.6]},
                              "methods": {"m_etf": {}}}).cells()[0]
    row = run_cell(cell.as_dict())
    g = wb.samples.transformer(80)
    c = wb.Cluster.preset("2xV100-pcie")
    c = c.with_memory(0.6 * memory_footprint(g, c))
    ref = wb.compare(g, c, ["m_etf"], progress=False).table.iloc[0]
    for col in wb.compare.__globals__["COLUMNS"]:
        if col in ("solve_s",):
            continue
        a, b = row[col], ref[col]
        assert a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)), col
    assert row["key"] == cell.key and row["n_devices"] == 2 and row["graph_ops"] == 80
    assert row["peak_rss_bytes"] > 10e6 and row["wall_s"] > 0 and row["host"]
    assert json.loads(row["versions"])["numpy"] == np.__version__


def test_a_failing_cell_records_its_error():
    cell = sw.Spec.from_dict({"workloads": ["transformer:80"],
                              "clusters": {"presets": ["2xV100-pcie"],
                                           "memory_fraction": [0.2]},
                              "methods": {"m_etf": {}}}).cells()[0]
    row = run_cell(cell.as_dict())  # 2 devices x 0.2 of the model cannot hold it
    assert row["status"] == "error" and "memory" in row["error"].lower()


def test_a_hanging_cell_is_stopped_and_the_process_reused():
    spec = sw.Spec.from_dict({"workloads": ["transformer:300"], "time_limit": 600,
                              "cell_timeout": 2.0,
                              "clusters": {"presets": ["4xV100-nvlink"]},
                              "methods": {"pesto_ilp": {}, "single": {}}})
    slow, quick = spec.cells()
    p = CellProcess()
    quick = {**quick.as_dict(), "cell_timeout": 120.0}
    try:
        assert p.run(quick)["status"] == "heuristic"  # the child is up and has the graph
        with Stopwatch() as watch:  # load-scaled (issue 41)
            row = p.run(slow.as_dict())
        assert watch.within(8), watch
        assert row["status"] == "timeout" and "2 s" in row["error"]
        assert row["key"] == slow.key
        assert p.proc is None  # killed with its cell
        assert p.run(quick)["status"] == "heuristic"  # a fresh child
    finally:
        p.close()


# ------------------------------------------------------------------ on Dask
def _keys_on_disk(path):
    return [k for f in sorted(Path(path).glob("part-*.parquet"))
            for k in pq.read_table(f, columns=["key"]).column("key").to_pylist()]


@pytest.mark.slow  # about 10 s alone; 25-80 s when the 2 shared cores are busy
def test_a_killed_worker_loses_and_duplicates_nothing_and_a_rerun_resumes(tmp_path):
    spec = {"name": "kill", "workloads": ["transformer:1500"], "time_limit": 20,
            "clusters": {"presets": ["4xV100-nvlink"], "bandwidth_scale": [0.5, 1, 2, 4]},
            "methods": {"heft": {}, "dpos": {}, "m_etf": {}}}
    cells = sw.Spec.from_dict(spec).cells()
    out = tmp_path / "r"
    client, cluster = sw.connect(workers=2)  # one local cluster of 2 worker processes
    try:
        # first an interrupted sweep: only half of the cells
        part = sw.run({**spec, "filter": lambda c: c.bandwidth_scale < 1.5}, out, client=client,
                      progress=False, echo=None)
        assert len(part) == 6
        killed = []

        def kill_one(row, done, total, client):
            if killed:
                return
            busy = [w for w, tasks in client.processing().items() if tasks]
            if not busy or done >= total:
                return
            pid = client.run(os.getpid, workers=[busy[0]])[busy[0]]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

        lines = []
        df = sw.run(spec, out, client=client, progress=False, on_result=kill_one, flush_rows=2,
                    echo=lines.append)
    finally:
        client.close()
        cluster.close()
    assert killed, "no worker was killed"
    assert lines[0].startswith("sweep kill: 12 cells, 6 already in")
    assert any("dashboard http" in ln for ln in lines)
    on_disk = _keys_on_disk(out)
    assert sorted(on_disk) == sorted(c.key for c in cells)  # each cell exactly once
    bad = df[df["status"] != "heuristic"]
    assert bad.empty, bad[["method", "status", "error"]].to_dict("records")
    # a rerun has nothing to do (and starts no cluster)
    again = sw.run(spec, out, progress=False, echo=lines.append)
    assert lines[-1].endswith("0 to run") and len(again) == 12
    assert sorted(_keys_on_disk(out)) == sorted(on_disk)
    assert sorted(sw.load(out)["key"]) == sorted(on_disk)


@pytest.mark.slow  # a local cluster of 2 workers: about 5 s
def test_a_result_lost_with_its_worker_is_computed_again_not_recorded_as_an_error():
    from distributed import wait

    from workbench.sweep.engine import _result_row
    from workbench.sweep.runner import execute

    cell = sw.Spec.from_dict({"workloads": ["diamond"], "clusters": {"presets": ["2xV100-pcie"]},
                              "methods": {"single": {}}}).cells()[0]
    def slow_cell(c):  # a nested function: sent by value; slow enough to be seen "lost"
        import time

        row = execute(c, isolate=False)
        time.sleep(1.0)
        return row

    client, cluster = sw.connect(workers=2)
    try:
        fut = client.submit(slow_cell, cell.as_dict(), pure=False)
        wait(fut)
        (holder,) = client.who_has(fut)[fut.key]
        os.kill(client.run(os.getpid, workers=[holder])[holder], signal.SIGKILL)
        deadline = time.monotonic() + 60
        while fut.status == "finished" and time.monotonic() < deadline:
            time.sleep(0.002)  # until the client hears the data is lost
        assert fut.status == "lost"
        row = _result_row(fut, cell)  # as `as_completed` hands it over: computed again
    finally:
        client.close()
        cluster.close()
    assert row["status"] != "error", row["error"]
    assert row["makespan_ms"] == 6.0


def test_an_address_that_does_not_answer_fails_fast(tmp_path):
    with Stopwatch() as watch, pytest.raises(
            SweepError, match="no Dask scheduler answered at 'tcp://127.0.0.1:1'"):
        sw.run({"workloads": ["diamond"], "methods": {"single": {}}}, tmp_path / "r",
               scheduler="tcp://127.0.0.1:1", echo=None, progress=False)
    assert watch.within(10), watch


def test_an_existing_scheduler_and_the_command_line(tmp_path, capsys):
    from distributed import LocalCluster

    spec = _write(tmp_path, TOML)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address="127.0.0.1:0") as cluster:
        argv = ["sweep", str(spec), "--out", str(tmp_path / "r"), "--scheduler",
                cluster.scheduler_address, "--no-isolate"]
        rc = main(argv)
        out = capsys.readouterr().out
        assert rc == 0, out
        assert main(argv) == 0  # the results folder exists now: a rerun resumes into it
        assert "8 already in" in capsys.readouterr().out
    assert "results in" in out and "within x1" in out
    df = sw.load(tmp_path / "r")
    assert len(df) == 8 and set(df["method"]) == {"single", "heft"}
    assert list(df.columns) == sw.SCHEMA_COLUMNS
    assert main(["sweep", str(spec), "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("sweep t: 8 cells")


# ------------------------------------------------------------------ analysis
def _fake():
    rows = []
    vals = {"g1": {"a": 10.0, "b": 12.0, "c": 30.0}, "g2": {"a": 8.0, "b": 8.0, "c": 4.0},
            "g3": {"a": 5.0, "b": math.nan, "c": 6.0}}
    for w, d in vals.items():
        for m, v in d.items():
            rows.append({"workload": w, "method": m, "makespan_ms": v, "feasible": True,
                         "status": "error" if math.isnan(v) else "heuristic",
                         "bandwidth_scale": 1.0})
    return pd.DataFrame(rows)


def test_win_tie_loss_is_antisymmetric_and_counts_failures_as_losses():
    t = sw.win_tie_loss(_fake()).set_index(["method", "opponent"])
    assert tuple(t.loc[("a", "b")]) == (2, 1, 0)  # b failed on g3
    assert tuple(t.loc[("a", "c")]) == (2, 0, 1)
    for (m, o), r in t.iterrows():
        assert tuple(t.loc[(o, m)]) == (r["losses"], r["ties"], r["wins"])
    assert sw.wtl_table(_fake()).loc["a", "c"] == "2/0/1"


def test_performance_profile_is_dolan_more():
    p = sw.performance_profile(_fake())
    f = {m: g.set_index("tau")["fraction"] for m, g in p.groupby("method")}
    assert f["a"][1.0] == pytest.approx(2 / 3)  # best on g1 and g3
    assert f["c"][1.0] == pytest.approx(1 / 3)
    assert f["a"][2.0] == 1.0 and f["b"][2.0] == pytest.approx(2 / 3)  # a failure never counts
    for s in f.values():
        assert (np.diff(s.to_numpy()) >= 0).all()
    assert f["c"].max() == 1.0  # 30/10 = 3 is the largest ratio


def test_figures_of_a_sweep():
    from widgets.figures.sweep import parameter_figure, profile_figure, wtl_figure

    df = _fake()
    fig = profile_figure(df)
    assert sorted(t.name for t in fig.data) == ["a", "b", "c"]
    assert fig.data[0].line.shape == "hv"
    fig = wtl_figure(df)
    assert fig.data[0].type == "heatmap"
    df2 = pd.concat([df.assign(bandwidth_scale=1.0), df.assign(bandwidth_scale=2.0,
                                                             workload=df.workload + "x")])
    fig = parameter_figure(df2, "bandwidth_scale")
    assert sorted(t.name for t in fig.data) == ["a", "b", "c"]
    assert list(fig.data[0].x) == [1.0, 2.0]


def test_bundled_specs_are_valid():
    names = sorted(p.stem for p in (ROOT / "sweeps").glob("*.toml"))
    assert {"tarnawski_table1", "pesto_table", "celeritas_table", "bandwidth"} <= set(names)
    for n in names:
        assert sw.load_spec(n).cells(), n


@pytest.mark.tf
@pytest.mark.slow  # importing TensorFlow takes 10-20 s on the shared machine
def test_a_cell_can_measure_on_tensorflow():
    pytest.importorskip("tensorflow")
    spec = sw.Spec.from_dict({"workloads": ["mlp"], "clusters": {"presets": ["2xcpu"]},
                              "methods": {"m_topo": {}}, "measure": True,
                              "measure_options": {"steps": 3, "warmup": 1}})
    row = run_cell(spec.cells()[0].as_dict())
    assert row["status"] == "heuristic", row["error"]
    assert row["measured_ms"] > 0 and row["sim_error"] >= 0 and row["measure_error"] == ""
