"""Quality against solver time (issue 26, part 2): CP-SAT and HiGHS report their incumbents
and bounds into plan.stats["progress"]; the figure draws them beside the heuristics."""

from __future__ import annotations

import math
from itertools import pairwise

import pytest

import workbench as wb
from workbench.solvers.progress import new_call, recording
from workbench.testing.timing import slowdown
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


@pytest.fixture(scope="module")
def traced(problem):
    """Two heuristics and CP-SAT's ``pesto_ilp`` (traced, to its 2 s limit) compared once and
    read by the tests below (each ran the same comparison, or its ``pesto_ilp`` alone, before).
    The tests leave it as they found it."""
    g, c = problem
    return wb.compare(g, c, methods=["round_robin", "heft", "pesto_ilp"], progress=False,
                      time_limit=2, params={"pesto_ilp": {"engine": "cpsat"}})


@pytest.mark.parametrize("engine", ["cpsat", "milp"])
def test_engines_record_incumbents_and_bounds(problem, engine):
    g, c = problem
    # 3 s on a quiet machine (HiGHS's first incumbent at 0.2 s); scaled by the load, as a
    # loaded make check once left the MILP no time to start within 3 s (no events at all)
    limit = min(12.0, 3.0 * slowdown())
    p = wb.solve(g, c, method="pesto_ilp", time_limit=limit, engine=engine)
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


def test_progress_survives_a_plan_file(tmp_path, traced):
    from workbench.io import load_plan, save_plan

    p = traced.plans["pesto_ilp"]
    assert p.stats["progress"]
    save_plan(p, tmp_path / "p.json", embed_graph=True)
    q = load_plan(tmp_path / "p.json")
    assert q.stats["progress"] == p.stats["progress"]


def test_progress_figure_draws_exact_engines_heuristics_and_the_bound(traced):
    from dataclasses import replace
    from types import SimpleNamespace

    from widgets.figures.progress import progress_figure

    cmp = traced
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
    p = cmp.plans["pesto_ilp"]  # a bound of another problem: hidden
    hidden = replace(p, stats={**p.stats, "bound_valid": False})
    assert all(math.isnan(b) for b in progress_figure(SimpleNamespace(
        table=cmp.table, plans={**cmp.plans, "pesto_ilp": hidden})).data[1].y)


def test_report_and_board_show_progress_when_a_method_traced_it(tmp_path, problem, traced):
    from widgets.board import CompareBoard
    from widgets.report import write_report

    g, c = problem
    cmp = traced
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


@pytest.fixture(scope="module")
def pipelined():
    """A transformer on three GPUs behind a host link: the max-load methods' problem."""
    from workbench.cluster import Device, Link

    c = wb.Cluster([Device(f"gpu{i}", "gpu", 1e9) for i in range(3)], mode="host",
                   host_link=Link(0.0, 1e6))
    g = wb.samples.transformer(40)
    cmp = wb.compare(g, c, methods=["heft", "pesto_ilp", "local_search", "ip_contig", "dpl"],
                     progress=False, time_limit=5,
                     params={"pesto_ilp": {"engine": "cpsat"}, "local_search": {"restarts": 3}})
    return g, c, cmp


def test_progress_figure_draws_max_load_methods_on_their_own_panel(pipelined):
    from widgets.figures.progress import progress_figure

    _g, _c, cmp = pipelined
    fig = progress_figure(cmp)
    t = cmp.table.set_index("method")
    assert fig.layout.meta["panels"] == ["makespan", "max_load"]
    by = {tr.name: tr for tr in fig.data}
    # makespan methods in the top panel (y), max-load methods in the second (y2), one time axis
    assert {by[n].yaxis for n in ("pesto_ilp incumbent", "heuristics", "lower bound")} == {"y"}
    assert {by[n].yaxis for n in ("local_search incumbent", "ip_contig incumbent",
                                  "heuristics (max load)", "lower bound (max load)")} == {"y2"}
    assert fig.layout.xaxis.type == fig.layout.xaxis2.type == "log"
    assert fig.layout.xaxis.matches == "x2" or fig.layout.xaxis2.matches == "x"
    # local search: a line with one point per recorded event (+ its end at the solve time)
    ev = cmp.plans["local_search"].stats["progress"]
    ls = by["local_search incumbent"]
    assert len(ls.x) == len(ev) + 1 and ls.x[-1] == pytest.approx(t.loc["local_search",
                                                                          "solve_s"])
    assert list(ls.y[:-1]) == pytest.approx([e["objective"] for e in ev])  # each improves
    assert all(math.isnan(b) for b in by["local_search bound"].y)  # a heuristic proves none
    # heuristics as points at their solve time and judged value of their own objective
    heur, hml = by["heuristics"], by["heuristics (max load)"]
    assert list(heur.text) == ["heft"] and list(hml.text) == ["dpl"]
    assert hml.y[0] == t.loc["dpl", "max_load_ms"]
    assert hml.x[0] == pytest.approx(max(t.loc["dpl", "solve_s"], 1e-4))
    judged = by["judged (max load)"]
    assert dict(zip(judged.text, judged.y)) == {m: t.loc[m, "max_load_ms"]
                                                 for m in ("local_search", "ip_contig")}
    assert by["lower bound (max load)"].y[0] == t["max_load_lb"].iloc[0]
    assert fig.layout.meta["traced"] == ["pesto_ilp", "local_search", "ip_contig"]
    lo, hi = fig.layout.yaxis2.range  # the panel shows its lower bound and every incumbent
    assert lo <= t["max_load_lb"].iloc[0] and hi >= max(ls.y) >= min(ls.y) >= lo


def test_the_ips_progress_is_drawn_in_ms(pipelined):
    """The pipeline IPs' HiGHS models are written in units of a reference time; their progress
    is recorded in ms (solve_milp's progress_scale), ending at the plan's own MILP objective
    and bound."""
    from widgets.figures.progress import progress_figure, progress_in_ms

    _g, _c, cmp = pipelined
    p = cmp.plans["ip_contig"]
    raw = p.stats["progress"]
    assert {e["engine"] for e in raw} == {"highs"}
    assert raw[-1]["objective"] == pytest.approx(p.stats["milp_objective"], rel=1e-9)
    by = {tr.name: tr for tr in progress_figure(cmp).data}
    inc, bnd = by["ip_contig incumbent"], by["ip_contig bound"]
    assert inc.y[-1] == pytest.approx(p.stats["milp_objective"], rel=1e-9)
    assert bnd.y[-1] == pytest.approx(p.stats["bound"], rel=1e-9)
    assert max(b for b in bnd.y if not math.isnan(b)) <= inc.y[-1] * (1 + 1e-9)
    assert len(inc.x) == len(raw) + (inc.x[-1] > raw[-1]["s"])
    bare = wb.Plan(p.graph, dict(p.placement), stats={"progress": raw})
    assert progress_in_ms(bare, "max_load") == raw  # recorded in ms: nothing to infer


@pytest.mark.slow  # a 10 s CP-SAT run in a fresh interpreter
def test_pesto_window_rounds_are_drawn_as_its_incumbent_without_a_bound(tmp_path):
    """Pesto's CP-SAT engine on a coarsened graph: a first coarse solve, then window rounds,
    each a CP-SAT run (its own ``call``); the incumbent is the best so far over all of them,
    and no bound (those of coarse models bound nothing of the problem)."""
    import pickle
    import subprocess
    import sys

    from widgets.figures.progress import progress_figure

    # Solved in a fresh interpreter: in the full suite, in a process that earlier test files
    # had used (TensorFlow's thread pools are the likely culprit; not proven), no window round
    # could build its model within its share, three fresh-clone suites in a row; alone it passed.
    # 10 s and one CP-SAT worker: the suite gives each test worker one core. (16 s before:
    # 4-5 window rounds where one is checked; at 10 s, 2-3 rounds, about 4 s left to them.)
    # Issue 41: at load 17 on two cores no window round fitted in 16 s; the limit grows with
    # the machine's slowdown (a reference loop timed here), up to 8 times.
    from workbench.testing.timing import slowdown

    load = min(8.0, slowdown())
    out = tmp_path / "cmp.pkl"
    code = ("import pickle, sys\nimport workbench as wb\n"
            "from workbench.workloads import layered\n"
            "g, c = layered(120, seed=3), wb.Cluster.preset('4xV100-nvlink')\n"
            f"cmp = wb.compare(g, c, methods=['heft', 'pesto'], progress=False, "
            f"time_limit={10 * load:.1f},"
            " params={'pesto': {'engine': 'cpsat', 'target': 24, 'threads': 1}})\n"
            "pickle.dump(cmp, open(sys.argv[1], 'wb'))\n")
    r = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True,
                       timeout=300 * load, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    cmp = pickle.loads(out.read_bytes())
    p = cmp.plans["pesto"]
    ev = p.stats["progress"]
    assert p.stats["lns_rounds"] >= 1 and len({e["call"] for e in ev}) == 1 + \
        p.stats["lns_rounds"], (p.stats.get("budget"), {k: v for k, v in p.stats.items()
                                                         if k != "progress"})
    fig = progress_figure(cmp)
    by = {tr.name: tr for tr in fig.data}
    inc = by["pesto incumbent"]
    assert fig.layout.meta["traced"] == ["pesto"] and list(by["heuristics"].text) == ["heft"]
    assert len(inc.x) == len(ev) + (inc.x[-1] > ev[-1]["s"])
    best, expect = math.inf, []
    for e in ev:
        best = min(best, e["objective"]) if e["objective"] is not None else best
        expect.append(best)
    assert [y for y in inc.y[:len(ev)] if not math.isnan(y)] == \
        pytest.approx([y for y in expect if math.isfinite(y)])
    assert all(math.isnan(b) for b in by["pesto bound"].y)
    assert by["judged"].y[0] == cmp.table.set_index("method").loc["pesto", "makespan_ms"]


def test_a_run_without_an_incumbent_or_a_valid_bound_is_a_point(traced):
    """Pesto's coarse MILP can stop before its first solution: only a bound of the coarse
    model was recorded, which bounds nothing of the problem; the method is a point."""
    from types import SimpleNamespace

    from widgets.figures.progress import progress_figure

    # heft and pesto_ilp of the shared comparison
    cmp = SimpleNamespace(table=traced.table[traced.table["method"] != "round_robin"],
                          plans={m: p for m, p in traced.plans.items() if m != "round_robin"})
    p = cmp.plans["pesto_ilp"]
    bare = wb.Plan(p.graph, dict(p.placement), method="pesto_ilp", order=p.order,
                   stats={"progress": [{**e, "objective": None} for e in p.stats["progress"]],
                          "bound_valid": False})
    fig = progress_figure(SimpleNamespace(table=cmp.table,
                                          plans={**cmp.plans, "pesto_ilp": bare}))
    assert fig.layout.meta["traced"] == [] and fig.layout.meta["heuristics"] == ["heft",
                                                                                 "pesto_ilp"]
    bare.stats["bound_valid"] = True  # a valid bound alone is worth a line
    assert progress_figure(SimpleNamespace(table=cmp.table, plans={
        **cmp.plans, "pesto_ilp": bare})).layout.meta["traced"] == ["pesto_ilp"]
