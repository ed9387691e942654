"""Pesto's MILP with the device-load rows (``load_cuts``, an extension of issue 46): the rows
hold for every integer solution, so the optimum is the paper's, and they lift the relaxation's
bound to at least the average device load."""

from __future__ import annotations

import pytest

from workbench import Cluster, samples, solve
from workbench.solvers.milp import solve_milp
from workbench.solvers.pesto.ilp import PestoModel


def _relaxation(graph, cluster, load_cuts: bool) -> float:
    m = PestoModel(graph, cluster, congestion=True, horizon=1e3, load_cuts=load_cuts)
    for v in m.prob.variables():
        v.cat = "Continuous"
    r = solve_milp(m.prob, time_limit=20)
    assert r.status == "optimal"
    return r.objective * m.unit


def test_load_rows_lift_the_relaxation_to_the_average_load():
    g, c = samples.layered(16, ccr=0.1, fanout=4), Cluster.preset("2xV100-pcie")  # wide
    fastest = c.op_times(g).min(axis=1).sum()
    without, with_ = _relaxation(g, c, False), _relaxation(g, c, True)
    assert with_ >= fastest / 2 - 1e-6          # the average load (2 devices)
    assert without < fastest / 2 - 1e-6         # the big-M rows alone do not reach it
    assert with_ > without


@pytest.mark.parametrize("name", ["diamond", "pesto_fig2"])
def test_load_rows_keep_the_optimum(name):
    g, c = getattr(samples, name)(), Cluster.preset("2xV100-pcie")
    runs = [solve(g, c, method="pesto", engine="milp", target=g.n_ops, time_limit=20,
                  load_cuts=lc, guard=False, threads=1) for lc in (False, True)]
    assert [p.stats["ilp_status"] for p in runs] == ["optimal", "optimal"]
    assert runs[1].stats["objective_ms"] == pytest.approx(runs[0].stats["objective_ms"])
    assert (runs[0].stats["load_rows"], runs[1].stats["load_rows"]) == (0, 2)
