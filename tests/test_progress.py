"""Quality against solver time (issue 26, part 2): CP-SAT and HiGHS report their incumbents
and bounds into plan.stats["progress"]; the figure draws them beside the heuristics."""

from __future__ import annotations

import math
from itertools import pairwise

import pytest

import workbench as wb
from workbench.solvers.progress import new_call, recording
from workbench.workloads import layered


def test_recording_dedupes_numbers_calls_and_nests():
    assert new_call("x") is None  # outside a recording: nothing to record into
    with recording() as outer:
        a = new_call("x")
        a(5.0, 1.0)
        with recording() as inner:
            b = new_call("y")
            b(math.inf, -math.inf)
            b(4.0, 2.0)
        a(5.0, 1.0)  # unchanged: not recorded again
        c = new_call("x")
        c(3.0, 3.0)
    assert [(e["objective"], e["bound"], e["call"]) for e in outer.events] == \
        [(5.0, 1.0, 0), (3.0, 3.0, 1)]
    assert [(e["objective"], e["bound"], e["engine"]) for e in inner.events] == \
        [(None, None, "y"), (4.0, 2.0, "y")]
    assert all(e2["s"] >= e1["s"] for e1, e2 in pairwise(outer.events))


@pytest.fixture(scope="module")
def problem():
    return layered(30, seed=2), wb.Cluster.preset("2xV100-pcie")


@pytest.mark.parametrize("engine", ["cpsat", "milp"])
def test_engines_record_incumbents_and_bounds(problem, engine):
    g, c = problem
    p = wb.solve(g, c, method="pesto_ilp", time_limit=3, engine=engine)
    ev = p.stats["progress"]
    assert len(ev) >= 2
    assert {e["engine"] for e in ev} == {"cpsat" if engine == "cpsat" else "highs"}
    s = [e["s"] for e in ev]
    assert s == sorted(s) and s[-1] <= p.stats["solve_s"]
    objs = [e["objective"] for e in ev if e["objective"] is not None]
    bounds = [e["bound"] for e in ev if e["bound"] is not None]
    assert objs and bounds
    assert all(b <= a * (1 + 1e-9) for a, b in pairwise(objs))      # never worse
    assert all(b >= a * (1 - 1e-9) for a, b in pairwise(bounds))  # never looser
    assert bounds[-1] <= objs[-1] * (1 + 1e-9)
    assert bounds[-1] == pytest.approx(p.stats["bound_ms"], rel=1e-6)  # the final figures


def test_methods_without_an_engine_have_no_progress(problem):
    g, c = problem
    assert "progress" not in wb.solve(g, c, method="heft").stats


def test_progress_survives_a_plan_file(tmp_path, problem):
    from workbench.io import load_plan, save_plan

    g, c = problem
    p = wb.solve(g, c, method="pesto_ilp", time_limit=2, engine="cpsat")
    save_plan(p, tmp_path / "p.json", embed_graph=True)
    q = load_plan(tmp_path / "p.json")
    assert q.stats["progress"] == p.stats["progress"]


def test_progress_figure_draws_exact_engines_heuristics_and_the_bound(problem):
    from widgets.figures.progress import progress_figure

    g, c = problem
    cmp = wb.compare(g, c, methods=["round_robin", "heft", "pesto_ilp"], progress=False,
                     keep=True, time_limit=2, params={"pesto_ilp": {"engine": "cpsat"}})
    fig = progress_figure(cmp)
    names = [t.name for t in fig.data]
    assert names == ["pesto_ilp incumbent", "pesto_ilp bound", "judged", "heuristics",
                     "lower bound"]
    heur = fig.data[3]
    assert list(heur.text) == ["round_robin", "heft"]
    t = cmp.table.set_index("method")
    assert list(heur.y) == [t.loc["round_robin", "makespan_ms"], t.loc["heft", "makespan_ms"]]
    assert fig.data[4].y[0] == t["makespan_lb"].iloc[0]
    inc = [y for y in fig.data[0].y if not math.isnan(y)]
    assert inc[-1] == pytest.approx(cmp.plans["pesto_ilp"].stats["progress"][-1]["objective"])
    assert fig.data[2].y[0] == t.loc["pesto_ilp", "makespan_ms"]  # judged, not predicted
    cmp.plans["pesto_ilp"].stats["bound_valid"] = False  # a bound of another problem: hidden
    assert all(math.isnan(b) for b in progress_figure(cmp).data[1].y)


def test_report_and_board_show_progress_when_a_method_traced_it(tmp_path, problem):
    from widgets.board import CompareBoard
    from widgets.report import write_report

    g, c = problem
    cmp = wb.compare(g, c, methods=["heft", "pesto_ilp"], progress=False, keep=True,
                     time_limit=2, params={"pesto_ilp": {"engine": "cpsat"}})
    html = write_report(tmp_path / "r.html", g, c, cmp.table, cmp.plans).read_text()
    assert "Quality against solver time" in html
    plain = write_report(tmp_path / "h.html", g, c, cmp.table,
                         {"heft": cmp.plans["heft"]}).read_text()
    assert "Quality against solver time" not in plain
    board = CompareBoard(graphs={"g": g}, presets=["2xV100-pcie"],
                         methods=["heft", "pesto_ilp"], time_limit=2)
    board.robust_check.value = False
    board.run()
    assert [w.layout.meta["figure"] for w in board._robust_box.children] == ["progress"]
