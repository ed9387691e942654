"""Issue 41, security: data files never name code to run, code runs only where the user asked,
servers listen on loopback, and no user-controlled string reaches HTML unescaped."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

import workbench as wb
from workbench import sweep
from workbench.cli import main
from workbench.testing.timing import slowdown

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "<img src=x onerror=alert(1)>"
CLOSER = "</script><script>alert(2)</script>"


def _marker_file(tmp_path: Path, body: str = "") -> tuple[Path, Path]:
    """A Python file that leaves a marker when imported (and then exits 0, as an attacker's
    file would, to look like success)."""
    marker = tmp_path / "RAN"
    code = tmp_path / "payload.py"
    code.write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n{body}")
    return code, marker


# ------------------------------------------------------------------ data files name no code
@pytest.mark.tf
@pytest.mark.parametrize("command", [["run", "{g}", "--steps", "1", "--warmup", "0"],
                                     ["compare", "{g}", "--measure", "--methods", "single",
                                      "--time-limit", "1"]])
def test_graph_file_naming_a_model_file_runs_nothing(tmp_path, capsys, command):
    pytest.importorskip("tensorflow")
    from workbench.io import save_graph

    code, marker = _marker_file(tmp_path, "raise SystemExit(0)\n")
    g = wb.samples.diamond()
    g.meta["program"] = {"keras": f"{code}:build", "batch": 2}
    path = tmp_path / "g.json"
    save_graph(g, path)
    assert main([c.format(g=path) for c in command]) == 2
    err = capsys.readouterr().err
    assert not marker.exists()
    assert "never chooses code to run" in err and str(code) in err


@pytest.mark.tf
def test_program_of_a_graph_file_refuses_a_model_file_but_rebuilds_builtin_names(tmp_path):
    pytest.importorskip("tensorflow")
    from workbench.errors import RuntimeBridgeError
    from workbench.runtime.extraction import program_for

    code, marker = _marker_file(tmp_path)
    g = wb.samples.diamond()
    for spec in ({"keras": f"{code}:build", "batch": 2}, {"keras": str(code), "batch": 2},
                 {"keras": ["x"], "batch": 2}):
        g.meta["program"] = spec
        with pytest.raises(RuntimeBridgeError, match="never chooses code to run"):
            program_for(g)
    g.meta["program"] = "mlp"
    with pytest.raises(RuntimeBridgeError, match="must be a table"):
        program_for(g)
    assert not marker.exists()


@pytest.mark.tf
def test_a_model_file_the_user_named_is_rebuilt_from_its_saved_graph(tmp_path):
    pytest.importorskip("tensorflow")
    import workbench.runtime as rt
    from workbench.io import load_graph, save_graph
    from workbench.runtime import extraction

    f = tmp_path / "model.py"
    f.write_text("import keras\n\ndef build():\n    return keras.Sequential([keras.Input((6,)), "
                 "keras.layers.Dense(3, name='fc')])\n")
    g = rt.extract(f"keras:{f}:build", 4)  # named by the user in this process
    save_graph(g, tmp_path / "g.json")
    extraction._PROGRAMS.clear()
    program = extraction.program_for(load_graph(tmp_path / "g.json"))
    assert set(program.step_nodes) == set(g.ops)


# ------------------------------------------------------------------ sweeps: --dry-run imports nothing
def _torch_file(tmp_path: Path) -> tuple[Path, Path]:
    return _marker_file(tmp_path, "import torch\n\nclass Net(torch.nn.Module):\n"
                                  "    def __init__(self):\n        super().__init__()\n"
                                  "        self.fc = torch.nn.Linear(4, 3)\n\n"
                                  "    def forward(self, x):\n        return self.fc(x)\n")


def test_sweep_dry_run_imports_no_model_file(tmp_path, capsys):
    code, marker = _torch_file(tmp_path)
    spec = tmp_path / "s.toml"
    spec.write_text(f'name = "m"\nworkloads = ["{code}:Net"]\ntime_limit = 2\n'
                    f'[clusters]\npresets = ["2xV100-pcie"]\n[methods]\nsingle = {{}}\n')
    assert main(["sweep", str(spec), "--dry-run"]) == 0
    assert "1 cells" in capsys.readouterr().out
    assert not marker.exists()
    # a missing file or a bad class name is still refused without importing anything
    for bad, why in ((f"{tmp_path}/none.py:Net", "does not exist"),
                     (f"{code}:1x", "not a class name")):
        spec.write_text(spec.read_text().replace(spec.read_text().split('"')[3], bad))
        assert main(["sweep", str(spec), "--dry-run"]) == 2
        assert why in capsys.readouterr().err
    assert not marker.exists()


def test_sweep_run_imports_model_file_once_before_cells_and_names_a_failing_one(tmp_path):
    from workbench.errors import SweepError
    from workbench.sweep.engine import _import_model_files

    code, marker = _torch_file(tmp_path)
    spec = sweep.Spec.from_dict({"workloads": [f"{code}:Net"], "methods": {"single": {}}})
    assert not marker.exists()
    _import_model_files(spec, {f"{code}:Net"})  # what run() does first: the user asked to run
    assert marker.exists()
    broken = tmp_path / "broken.py"
    broken.write_text("raise ValueError('boom')\n")
    with pytest.raises(SweepError, match=r"broken\.py.*boom"):
        _import_model_files(spec, {f"{broken}:Net"})


def test_help_says_model_files_run_code():
    from workbench.cli import build_parser

    sub = build_parser()._subparsers._group_actions[0].choices
    text = {k: " ".join(p.format_help().split()) for k, p in sub.items()}
    assert "running its code" in text["sweep"] and "--dry-run never imports it" in text["sweep"]
    assert "imports no FILE.py:Class" in text["sweep"]
    assert "127.0.0.1" in text["sweep"]
    assert "running its code" in text["info"] and "running its code" in text["run"]
    assert "runs code" in (ROOT / "docs" / "sweeps.md").read_text()
    assert "its code runs" in (ROOT / "README.md").read_text()


# ------------------------------------------------------------------ servers on loopback only
_DASK = """
import json, sys
from urllib.parse import urlparse
from workbench.sweep.engine import connect
from workbench.runtime.distributed import listening_addresses
if __name__ == "__main__":
    client, lc = connect(workers=1)
    try:
        urls = [client.dashboard_link, lc.scheduler_address,
                *client.scheduler_info()["workers"]]
        ports = {urlparse(u).port for u in urls}
        print(json.dumps({"ports": {p: listening_addresses(p) for p in ports}}))
    finally:
        client.close()
        lc.close()
"""


def test_sweep_local_cluster_and_dashboard_listen_on_loopback_only(tmp_path):
    script = tmp_path / "dask_ports.py"
    script.write_text(_DASK)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=240 * slowdown(), check=False, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-2000:]
    ports = json.loads(r.stdout.strip().splitlines()[-1])["ports"]
    assert len(ports) >= 3  # dashboard, scheduler, a worker
    for port, addrs in ports.items():
        assert addrs and all(a in ("127.0.0.1", "::1") for a in addrs), (port, addrs)


# ------------------------------------------------------------------ no script injection
def _hostile_problem(tmp_path: Path):
    """A graph file whose name and op names are markup, one op too large for any device (so
    methods fail with errors naming it)."""
    from workbench.io import load_graph, save_graph

    G = nx.DiGraph()
    names = [f"{HOSTILE}{i}" for i in range(3)] + [CLOSER]
    for i, n in enumerate(names):
        G.add_node(n, compute={"gpu": 1.0 + i}, memory=1e12 if i == 2 else 1e6, kind="fwd",
                   op_type=HOSTILE)
    G.add_edges_from([(names[0], names[1]), (names[0], names[2]), (names[1], names[3]),
                      (names[2], names[3])], bytes=1e6)
    save_graph(wb.OpGraph(G, name=HOSTILE), tmp_path / "h.json")
    return load_graph(tmp_path / "h.json")


def _html_values(widget) -> list[str]:
    import ipywidgets as W

    out = []
    if isinstance(widget, (W.HTML, W.HTMLMath)):
        out.append(widget.value)
    for child in getattr(widget, "children", ()) or ():
        out.extend(_html_values(child))
    return out


def _no_markup(html: str, where: str) -> None:
    """No hostile tag outside the JSON of plotly's <script> blocks (where '<' in a string is
    inert and '</' is escaped)."""
    outside = re.sub(r"<script[^>]*>.*?</script>", "", html, flags=re.DOTALL)
    for bad in ("<img", "<script>alert"):
        assert bad not in outside, (where, outside[max(0, outside.find(bad) - 200):][:400])


def _register_op_refuser(monkeypatch) -> str:
    """A method, registered for one test, that fails with an error naming the graph's largest
    op: methods that cannot serve the hostile problem are left out of a comparison (no row) and
    the others' plans are judged ``infeasible``, so none of them raises any more."""
    from workbench.errors import SolverError
    from workbench.solvers.registry import SOLVERS, register

    name = "test_refuses_an_op"

    def refuse(graph, cluster, **_kw):
        big = max(graph.ops, key=lambda v: graph.op(v).get("memory", 0.0))
        raise SolverError(f"op {big!r} cannot be placed by this method")

    register(name, family="baseline", paper="-", description="fails naming an op")(refuse)
    monkeypatch.setitem(SOLVERS, name, SOLVERS.pop(name))  # removed again after the test
    return name


def test_hostile_names_are_escaped_in_every_view_and_the_report(tmp_path, monkeypatch):
    pytest.importorskip("ipywidgets")
    import widgets
    from widgets.board import CompareBoard
    from widgets.report import report_html

    g = _hostile_problem(tmp_path)
    c = wb.Cluster.preset("2xV100-pcie")
    refuser = _register_op_refuser(monkeypatch)
    board = CompareBoard({HOSTILE: str(tmp_path / "h.json")}, presets=["2xV100-pcie"],
                         methods=["single", "m_topo", "m_etf", "heft", refuser], time_limit=2)
    table = board.run()
    assert (table["status"] == "error").any()  # errors that name an op reach the status line
    assert "&lt;img" in board.status.value and "failed" in board.status.value
    board.show_diff()
    for v in _html_values(board):
        _no_markup(v, "board")
    cmp = board.comparison
    plans = {f"{HOSTILE}{m}": p for m, p in cmp.plans.items()}
    sched = next(iter(cmp.schedules.values()))
    views = [widgets.DagView(g, cluster=c, plan=next(iter(cmp.plans.values()))),
             widgets.GanttView(sched), widgets.CoarsenView(g, cluster=c),
             widgets.PipelineView(plans, c), widgets.HeatmapView(g, plans, c),
             widgets.ClusterView(g, {v: HOSTILE for v in g.ops}, cluster=c),
             widgets.WhatIfPanel(g, c, methods=("m_topo",), time_limit=1)]
    for view in views:
        for v in _html_values(view):
            _no_markup(v, type(view).__name__)
    robust = wb.robustness(cmp, samples=20)
    hostile_labels = wb.robustness(plans, c, samples=5)  # a dict of plans: labels are the user's
    for where, html in (("Robustness", hostile_labels._repr_html_()),
                        ("Comparison", cmp._repr_html_())):
        _no_markup(html, where)
    assert "&lt;img" in hostile_labels._repr_html_()
    html = report_html(graph=g, cluster=c, table=cmp, title=HOSTILE, notes=CLOSER,
                       robust=robust)
    _no_markup(html, "report")
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    out = tmp_path / "r.html"
    assert main(["compare", str(tmp_path / "h.json"), "--cluster", "2xV100-pcie", "--methods",
                 "single,m_topo", "--time-limit", "1", "--report", str(out)]) == 0
    _no_markup(out.read_text(), "cli report")
