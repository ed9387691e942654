"""Every registered solver against the contract of DESIGN.md, over random and real graphs.

Each op placed exactly once on a device that can run it; colocation groups whole; memory within
capacity unless the plan's status says it could not be; the same plan for the same seed; and the
plan simulates without error. Solvers keep themselves quick here through ``contract_params``.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import workbench as wb
from workbench import Cluster, Device, InfeasibleError, Link, samples
from workbench.solvers import SOLVERS

RUNNABLE = [n for n, i in SOLVERS.items() if not i.needs]


def check_plan(plan, graph, cluster, info):
    plan.validate(cluster)  # every op once, known devices, kinds respected, order consistent
    if plan.graph is not graph:  # transformed (split / data-parallel) graphs keep every model op
        assert info.family == "list" and plan.graph.n_ops >= graph.n_ops
        graph = plan.graph
    assert set(plan.placement) == set(graph.ops)
    for grp, members in graph.colocation_groups.items():
        if info.colocation:
            assert len({plan.placement[v] for v in members}) == 1, f"group {grp} split"
    m = wb.evaluate(plan, cluster)
    if info.memory and plan.status != "infeasible":
        assert not [v for v in m.violations if v.startswith("memory")], m.violations
    assert np.isfinite(m.makespan_ms) and m.makespan_ms >= m.makespan_lb - 1e-6
    assert m.max_load_ms >= m.max_load_lb - 1e-6
    if info.orders:
        assert plan.order is not None
    return m


def problem(seed: int, n: int, ndev: int, coloc: float, cpu_only: float):
    g = samples.random_dag(n, seed=seed, colocate_fraction=coloc, cpu_only_fraction=cpu_only)
    cap_need = max(g.total_memory() / ndev * 1.6, 2 * max(
        [sum(g.op(v)["memory"] for v in mem) for mem in g.colocation_groups.values()] +
        [float(g.c.memory.max())]))
    devs = [Device(f"gpu{i}", "gpu", cap_need) for i in range(ndev)]
    devs.append(Device("cpu0", "cpu", cap_need * 4))
    return g, Cluster(devs, intra_host=Link(0.01, 1e7), name=f"{ndev}gpu+cpu")


@pytest.mark.parametrize("method", RUNNABLE)
@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(2, 18), ndev=st.integers(1, 3),
       coloc=st.sampled_from([0.0, 0.3]), cpu_only=st.sampled_from([0.0, 0.15]))
def test_contract_random(method, seed, n, ndev, coloc, cpu_only):
    info = SOLVERS[method]
    g, c = problem(seed, n, ndev, coloc, cpu_only)
    kw = dict(info.contract_params)
    try:
        plan = wb.solve(g, c, method=method, seed=7, **kw)
    except InfeasibleError:
        return  # allowed: a clear refusal (e.g. 'single' when ops need two kinds)
    check_plan(plan, g, c, info)
    again = wb.solve(g, c, method=method, seed=7, **kw)
    if "time_limit" not in (plan.status, again.status):  # a wall-clock stop is not repeatable
        assert again.placement == plan.placement, "not deterministic for a fixed seed"


@pytest.mark.parametrize("method", RUNNABLE)
@pytest.mark.parametrize("sample", ["pesto_fig2", "two_branch", "cnn:40", "lstm:40"])
def test_contract_samples(method, sample):
    info = SOLVERS[method]
    name, _, size = sample.partition(":")
    g = samples.load_sample(name, **({"n_ops": int(size)} if size else {}))
    c = Cluster.preset("2xV100-pcie")
    if g.total_memory() > 0:
        c = c.with_memory(g.total_memory() * 0.75)
    try:
        plan = wb.solve(g, c, method=method, seed=1, **info.contract_params)
    except InfeasibleError:
        return
    check_plan(plan, g, c, info)
