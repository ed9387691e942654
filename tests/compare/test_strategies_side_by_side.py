"""`workbench compare gpt:...` on a GPU-node preset: the strategy methods side by side with their
breakdown, in the table, the command line, the HTML report and the board (issues 43 and 48)."""

from __future__ import annotations

import json
import math

import pytest

import workbench as wb
from workbench.cli import main
from workbench.errors import SolverError
from workbench.workloads import resolve

SPEC = "gpt:layers=4,hidden=512,heads=8,seq=512,vocab=8000"
PARTS = ("compute", "recompute", "tp", "pp", "bubble", "dp", "optimizer")


@pytest.fixture(scope="module")
def problem():
    g, own = resolve(SPEC)
    assert own is None
    return g, wb.Cluster.preset("8xA100-80g")


@pytest.fixture(scope="module")
def cmp(problem):
    g, c = problem
    return wb.compare(g, c, methods=["megatron", "tarnawski", "ddp", "zero", "heft"],
                      global_batch=16, progress=False)


def test_compare_runs_the_strategy_methods_on_a_training_problem(problem, cmp):
    g, c = problem
    t = cmp.table
    assert t["method"].tolist() == ["megatron", "tarnawski", "ddp", "zero"]
    assert "op-placing method" in cmp.left_out["heft"] and "16 sequences" in cmp.left_out["heft"]
    assert cmp.settings["training"] == {"model": g.meta["model"], "gpu": "A100-80G",
                                        "global_batch": 16}
    assert set(cmp.training) == set(t["method"]) and cmp.schedules == {}
    for _, r in t.iterrows():
        res = cmp.training[r["method"]]
        s = res.plan.strategy
        # the row is the judged strategy: its knobs, its step and the step's parts
        assert (r["tp"], r["pp"], r["dp"], r["mbs"], r["schedule"], r["recompute"], r["zero"]) \
            == (s.tp, s.pp, s.dp, s.mbs, s.schedule, s.recompute, s.zero)
        assert r["strategy"] == s.describe() and s.devices == 8 and s.global_batch == 16
        assert r["makespan_ms"] == pytest.approx(res.step_ms, abs=1e-6)
        assert sum(r[f"{p}_ms"] for p in PARTS) == pytest.approx(res.step_ms, rel=1e-9)
        assert r["peak_mem_bytes"] == max(res.peak.values()) and bool(r["feasible"])
        # the kept result was judged with its links (the views draw them)
        assert res.links and res.step_ms == pytest.approx(
            wb.judge.training.simulate_training(res.plan, record_links=False).step_ms)
        # the op-level plan of one micro-batch records the strategy
        assert cmp.plans[r["method"]].info["strategy"]["dp"] == s.dp
        assert cmp.plans[r["method"]].method == r["method"]
    step = t.set_index("method")["makespan_ms"]
    assert step["megatron"] <= min(step["ddp"], step["zero"]) + 1e-9  # their spaces are in its
    assert step["tarnawski"] <= step["megatron"] + 1e-9                # megatron is a candidate
    lb = cmp.bounds["makespan_ms"]
    assert lb == min(t["space_bound_ms"])
    assert t["makespan_lb"].tolist() == pytest.approx([lb] * len(t), abs=1e-6)
    assert (t["makespan_ms"] >= lb - 1e-9).all()
    assert t["makespan_gap"].tolist() == pytest.approx((t["makespan_ms"] / lb - 1).tolist(),
                                                       abs=1e-6)
    v = cmp.verdict()
    assert v[0]["winner"] == t.sort_values("makespan_ms", kind="stable")["method"].iloc[0]
    assert "training step" in v[0]["why"] and "compute" in v[0]["why"]
    by = t.set_index("method")["strategy"]
    if v[0]["runner_up"] is not None:  # the runner-up is the best *other* strategy
        assert by[v[0]["runner_up"]] != by[v[0]["winner"]]
    same = [m for m in by.index if m != v[0]["winner"] and by[m] == by[v[0]["winner"]]]
    assert (f"({', '.join(same)}: the same strategy)" in v[0]["why"]) == bool(same)


def test_a_method_whose_strategies_do_not_fit_shows_where_it_runs_out(problem):
    g, c = problem
    small = c.with_memory(0.25 * 2**30)
    cmp = wb.compare(g, small, methods=["ddp", "zero"], global_batch=16, progress=False)
    t = cmp.table.set_index("method")
    assert not t.loc["ddp", "feasible"] and bool(t.loc["zero", "feasible"])
    res = cmp.training["ddp"]
    assert res.oom is not None
    assert t.loc["ddp", "violations"].startswith(f"out of memory on {res.oom['device']} at ")
    assert t.loc["ddp", "peak_mem_bytes"] > t.loc["ddp", "capacity_bytes"] == 0.25 * 2**30
    assert cmp.flags()["ddp"] == ["infeasible"]
    assert cmp.verdict()[0]["winner"] == "zero"


def test_strategy_methods_on_other_problems_are_left_out_with_the_reason(problem):
    g, _c = problem
    d = wb.samples.diamond()
    cmp = wb.compare(d, wb.Cluster.preset("2xV100-pcie"), methods=["single", "megatron"],
                     progress=False)
    assert cmp.table["method"].tolist() == ["single"]
    assert "LLM training step" in cmp.left_out["megatron"]
    cmp = wb.compare(g, wb.Cluster.preset("4xV100-nvlink"), methods=["megatron"],
                     progress=False)  # an LLM, but no GPU the training judge knows
    assert len(cmp.table) == 0 and "8xA100-80g" in cmp.left_out["megatron"]
    with pytest.raises(SolverError, match="global_batch applies to an LLM training problem"):
        wb.compare(d, wb.Cluster.preset("2xV100-pcie"), methods=["single"], global_batch=8,
                   progress=False)
    with pytest.raises(SolverError, match="take no parameters"):
        wb.compare(g, wb.Cluster.preset("8xA100-80g"), methods=["ddp"],
                   params={"ddp": {"x": 1}}, progress=False)
    with pytest.raises(SolverError, match="positive number of sequences"):
        wb.compare(g, wb.Cluster.preset("8xA100-80g"), global_batch=0, progress=False)
    with pytest.raises(SolverError, match="unknown method"):
        wb.compare(g, wb.Cluster.preset("8xA100-80g"), methods=["nope"], progress=False)
    from workbench.compare import default_methods

    assert default_methods(g, wb.Cluster.preset("8xA100-80g")) == \
        ["megatron", "tarnawski", "ddp", "zero"]
    assert default_methods(g, wb.Cluster.preset("8xA100-80g"), candidates=["heft", "ddp"]) \
        == ["ddp"]


def test_cli_prints_strategies_side_by_side_and_writes_the_report(tmp_path, capsys):
    rep, csv = tmp_path / "r.html", tmp_path / "r.csv"
    assert main(["compare", SPEC, "--cluster", "8xA100-80g", "--global-batch", "16",
                 "--methods", "megatron,ddp,heft", "--report", str(rep), "--csv",
                 str(csv)]) == 0
    out = capsys.readouterr().out.splitlines()
    head = out[1].split()
    assert head == ["megatron", "ddp"]
    rows = {line[:16].strip(): line[16:].split() for line in out[2:]}
    for key in ("tp", "pp", "dp", "micro-batch", "schedule", "recompute", "zero",
                "step (ms)", "gap to bound", "compute", "TP", "PP", "bubble", "DP",
                "fits"):
        assert key in rows, key
    assert rows["fits"] == ["yes", "yes"] and rows["dp"][1] == "8"
    assert any(line.startswith("left out heft: places the ops") for line in out)
    html = rep.read_text()
    for text in ("Strategies side by side", "breakdown of the step (ms)", "bubble",
                 '"figure":"training_breakdown"', '"figure":"training_gantt"',
                 '"figure":"training_memory"', "id='train-pick'", "Left out heft"):
        assert text in html, text
    assert "Operator graph" not in html  # the op-level views are not drawn for strategies
    assert "megatron" in csv.read_text().splitlines()[1]
    assert main(["compare", SPEC, "--cluster", "8xA100-80g", "--global-batch", "16",
                 "--methods", "ddp", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["strategy"].startswith("tp1 pp1 dp8") and row["bubble_ms"] == 0
    assert main(["compare", "diamond", "--global-batch", "4"]) == 2
    assert "global_batch applies" in capsys.readouterr().err


def test_report_escapes_and_picks_any_row(cmp, tmp_path):
    from widgets.report import report_html

    html = report_html(graph=cmp.graph, cluster=cmp.cluster, table=cmp,
                       title="<script>alert(1)</script>")
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)" in html
    for m in cmp.training:  # one hidden block of figures per row, the winner shown
        assert f"class='wb-train' data-m='{m}'" in html
    first = html.index("class='wb-train'")
    assert "display:block" in html[first:first + 80]


def test_strategy_table_holds_every_row_and_names_the_oom(problem):
    from widgets.strategies import strategy_table_html

    g, c = problem
    cmp = wb.compare(g, c.with_memory(0.25 * 2**30), methods=["ddp", "zero"], global_batch=16,
                     progress=False)
    html = strategy_table_html(cmp)
    assert html.index(">zero<") < html.index(">ddp<")  # the fitting row first
    assert "out of memory" in html and "<sup>1</sup>" in html
    assert cmp.table.set_index("method").loc["ddp", "violations"] in html
    for label in ("micro-batches", "ZeRO", "gap to bound", "optimizer", "peak memory a GPU",
                  "judged / grid"):
        assert f">{label}<" in html, label


def test_board_shows_the_strategies_and_their_training_views(tmp_path):
    from widgets.board import CompareBoard

    board = CompareBoard({"diamond": "diamond", "gpt": SPEC}, preset="2xV100-pcie",
                         methods=["single"], time_limit=10)
    board.graph_picker.value = "gpt"  # an LLM: a GPU-node preset, the strategy methods
    assert board.preset_picker.value in wb.transforms.parallel.PRESET_GPUS
    assert board.method_picker.value == ("megatron", "tarnawski", "ddp", "zero")
    board.preset_picker.value = "8xA100-80g"
    board.method_picker.value = ("megatron", "ddp")
    board.batch_box.value = 16
    df = board.run()
    assert df["method"].tolist() == ["megatron", "ddp"]
    assert board.comparison.settings["training"]["global_batch"] == 16
    assert "breakdown of the step (ms)" in board.table_view.value
    assert board.bars.layout.meta["figure"] == "training_breakdown"
    fast = df.sort_values("makespan_ms", kind="stable")["method"].iloc[0]
    assert board.gantt_a.method == fast
    assert board.gantt_a.figure.layout.meta["figure"] == "training_gantt"
    assert board.gantt_a.memory.layout.meta["figure"] == "training_memory"
    xa, xb = board.gantt_a.figure.layout.xaxis.range, board.gantt_b.figure.layout.xaxis.range
    assert tuple(xa) == tuple(xb)  # one time axis for both
    d = board.show_diff("megatron", "ddp")
    assert "step_ms" in d.index and "step_ms" in board.diff_view.value
    with pytest.raises(ValueError, match="no op-level schedule"):
        board.export_trace("ddp")
    assert "Strategies side by side" in board.export_report(tmp_path / "b.html").read_text()
    board.gantt_b_picker.value = "megatron"
    assert board.gantt_b.method == "megatron"
    assert math.isfinite(board.comparison.bounds["makespan_ms"])


def test_a_training_problem_with_every_method_left_out_still_prints_and_reports(tmp_path,
                                                                                 capsys):
    rep = tmp_path / "r.html"
    assert main(["compare", SPEC, "--cluster", "8xA100-80g", "--global-batch", "16",
                 "--methods", "heft", "--report", str(rep)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("global batch 16 sequences") and out[1].startswith("left out heft")
    html = rep.read_text()
    assert "nothing wins" in html and "Left out heft" in html
