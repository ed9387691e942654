"""Celeritas stays fast on large graphs: one fusion per call, every candidate plan simulated at
most once, and the judge's plan check is one vectorised pass. Structural checks (calls counted),
not timings; bench/bench_scaling.py times it."""

import importlib

import pytest

import workbench as wb
from workbench import PlanError, samples

C4 = wb.Cluster.preset("4xV100-nvlink")
SIM = importlib.import_module("workbench.simulate")
FUSION = importlib.import_module("workbench.transforms.fusion")


@pytest.fixture
def counted(monkeypatch):
    """Count fusions (by graph) and simulations (by plan) during a solve."""
    seen = {"fuse": [], "sim": []}
    fuse, simulate = FUSION.fuse, SIM.simulate

    def fuse_counted(graph, *a, **kw):
        seen["fuse"].append(id(graph))
        return fuse(graph, *a, **kw)

    def simulate_counted(plan, cluster, **kw):
        key = (tuple(sorted(plan.placement.items())),
               None if plan.order is None else tuple(sorted((d, tuple(o)) for d, o in
                                                            plan.order.items())),
               kw.get("order", "plan"), kw.get("congestion", True))
        seen["sim"].append(key)
        return simulate(plan, cluster, **kw)

    monkeypatch.setattr(FUSION, "fuse", fuse_counted)
    monkeypatch.setattr(SIM, "simulate", simulate_counted)
    return seen


@pytest.mark.parametrize("mem", [1.0, 0.4])
def test_celeritas_fuses_once_and_simulates_each_candidate_once(counted, mem):
    g = samples.transformer(1500, seed=3)
    c = C4.with_memory(g.total_memory() * mem)
    # the method itself, not wb.solve: solve() judges the returned plan's live memory once more
    # (issue 42), which is the judge's simulation, not one of the method's candidates
    from workbench.solvers import SOLVERS

    p = SOLVERS["celeritas"].func(g, c, relief=1.0, keep_start=True, split_start=True)
    assert len(p.stats["candidates_ms"]) >= 3          # the extensions ran
    assert len(counted["fuse"]) == len(set(counted["fuse"]))   # one fusion per graph
    assert len(counted["sim"]) == len(set(counted["sim"]))     # no plan simulated twice
    best = min(p.stats["candidates_ms"].values())
    assert wb.simulate(p, c).makespan == pytest.approx(best)


def test_the_counters_see_a_second_fusion(counted):
    """The checks can fail: two calls fuse twice and simulate the same plan again."""
    g = samples.transformer(600, seed=1)
    wb.solve(g, C4, method="order_place")
    wb.solve(g, C4, method="order_place")
    p = wb.solve(g, C4, method="order_place")
    SIM.simulate(p, C4)
    SIM.simulate(p, C4)
    assert len(counted["fuse"]) == 3 and len(counted["sim"]) == 2
    assert len(set(counted["sim"])) == 1


def test_plan_check_names_each_fault():
    g = samples.diamond()
    c = wb.Cluster.preset("2xV100-pcie")
    ok = wb.Plan(g, {v: "gpu0" for v in g.ops}, order={"gpu0": g.ops})
    assert ok.device_array(c).tolist() == [0, 0, 0, 0]
    bad = [({v: "gpu0" for v in g.ops[:3]}, None, "leaves 1 ops unplaced"),
           ({**{v: "gpu0" for v in g.ops}, "zz": "gpu0"}, None, "not in graph"),
           ({**{v: "gpu0" for v in g.ops}, "d": "tpu9"}, None, "unknown device 'tpu9'"),
           ({v: "gpu0" for v in g.ops}, {"gpu0": g.ops[:3]}, "omits op 'd'"),
           ({v: "gpu0" for v in g.ops}, {"gpu0": g.ops + ["a"]}, "orders op 'a' twice"),
           ({v: "gpu0" for v in g.ops}, {"gpu0": g.ops[:3], "gpu1": ["d"]},
            "orders op 'd' on 'gpu1'"),
           ({v: "gpu0" for v in g.ops}, {"gpu0": g.ops[:3] + ["x"]}, "orders op 'x'")]
    for placement, order, msg in bad:
        with pytest.raises(PlanError, match=msg):
            wb.Plan(g, placement, order=order).validate(c)
    cpu_only = wb.Cluster([wb.Device("c0", kind="cpu")])
    g2 = g.map_ops(lambda op, a: {**a, "compute": {"gpu": 1.0}})
    with pytest.raises(PlanError, match="where it cannot run"):
        wb.Plan(g2, {v: "c0" for v in g2.ops}).validate(cpu_only)
