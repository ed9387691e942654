"""Every registered solver against the contract, over random cases as wide as the data model.

The cases and the checker live in :mod:`workbench.testing.contract` (also used by
``bench/contract_soak.py``): heterogeneous speeds and memories, several accelerator kinds, CPUs
with finite or unlimited memory, host and direct modes with 1-8 accelerators and 0-2 CPUs,
CPU-only and zero-cost ops, zero-byte and fixed-comm edges, colocation groups, training graphs,
chains/trees/fans/layered/dense DAGs of 1-300 ops, tight to loose memory, 1e15 ms costs.

``N_CASES`` seeds are drawn by hypothesis (derandomized) and each case is solved once by every
method, so that the cross-method clause -- no feasible plan beats an ``optimal`` one -- sees them
all; each method's test then reports every case where that method breaks the contract. The MILP
methods run on every ``MILP_EVERY``-th case with a short time limit to keep the file fast.
Below: the regression tests of the failures this contract found.
"""

from __future__ import annotations

import gc
import inspect
import math
from functools import cache

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import workbench as wb
from workbench import Cluster, Device, InfeasibleError, Link, Plan, samples, simulate
from workbench.errors import PlanError
from workbench.solvers import SOLVERS
from workbench.solvers.common import order_by_start
from workbench.testing.contract import (
    MILP_METHODS,
    check_case,
    contract_methods,
    make_case,
    reproducer,
    run_method,
)
from workbench.testing.timing import Stopwatch, slowdown

METHODS = contract_methods()
N_CASES = 300
MILP_EVERY = 6
TIME_LIMIT = 0.5


def outcomes(seed: int, milp: bool) -> dict:
    case = make_case(seed)
    run = [m for m in METHODS if m not in MILP_METHODS or milp]
    outs = check_case(case, run, time_limit=TIME_LIMIT)
    for o in outs:
        o.plan = None  # keep the cache small
    return {o.method: (case, o) for o in outs}


PARTS = 3
"""The sweep's cases are dealt to this many parts, each computed by one worker, so that `make
test`'s two workers share the battery. Part 0 (a third of the cases, every method, 23 s of CPU)
runs in `make check`; the others are marked ``slow`` (`make test` runs the whole battery)."""


@cache
def sweep(part: int) -> dict:
    """method -> [(case, outcome)] over this part's hypothesis-drawn seeds (computed once)."""
    got: dict = {m: [] for m in METHODS}
    seen: list = []

    @settings(max_examples=N_CASES, deadline=None, derandomize=True, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(seed=st.integers(0, 2**20))
    def run(seed):
        if seed in seen:
            return
        milp = len(seen) % MILP_EVERY == 0
        seen.append(seed)
        if (len(seen) - 1) // MILP_EVERY % PARTS != part:  # blocks of MILP_EVERY cases, dealt
            return                                          # in turn: each holds one MILP case
        for m, pair in outcomes(seed, milp).items():
            got[m].append(pair)

    run()
    return got


# one worker computes a part (a @cache per process); each part in a group of its own
@pytest.mark.parametrize("part", [pytest.param(p, marks=[pytest.mark.xdist_group(f"contract{p}"),
                                                         *([pytest.mark.slow] if p else [])])
                                  for p in range(PARTS)])
@pytest.mark.parametrize("method", METHODS)
def test_contract_random(method, part):
    runs = sweep(part)[method]
    cases = N_CASES // MILP_EVERY if method in MILP_METHODS else N_CASES
    assert len(runs) >= cases / PARTS * 0.95
    bad = [(c, o) for c, o in runs if o.verdict not in ("pass", "error")]
    assert not bad, f"{len(bad)} of {len(runs)} cases break the contract:\n" + "\n".join(
        f"{c!r}: {o.verdict}: {o.detail[:300]}\n  python -c \"{reproducer(c, method, TIME_LIMIT)}\""
        for c, o in bad[:5])


def test_cases_cover_the_data_model():
    cases = [make_case(s) for s in range(200)]
    d = [c.desc for c in cases]
    assert {x["mode"] for x in d} == {"host", "direct"}
    assert {x["n_acc"] for x in d} == {1, 2, 3, 4, 8} and {x["n_cpu"] for x in d} == {0, 1, 2}
    assert {x["memory"] for x in d} == {"starved", "tight", "medium", "loose", "unlimited"}
    pressure = [c for c in cases if c.desc.get("family") == "pressure"]  # issue 23
    assert any(c.desc["training"] and c.desc["memory"] == "starved" for c in pressure)
    assert any(x["training"] for x in d) and any(x["acc_kinds"] == 2 for x in d)
    assert any(x["scale"] > 1e12 for x in d)
    sizes = [c.graph.n_ops for c in cases]
    assert min(sizes) == 1 and max(sizes) > 150
    assert any(c.graph.colocation_groups for c in cases)
    assert any(np.isinf(c.cluster.c.memory).any() for c in cases)
    assert any(len({dv.speed for dv in c.cluster.devices}) > 1 for c in cases)
    assert any((c.graph.c.bytes == 0).any() and (~np.isnan(c.graph.c.comm)).any() for c in cases)
    assert any((c.graph.c.min_compute() == 0).any() for c in cases)
    assert any(np.isinf(c.graph.c.compute[:, c.graph.c.kind_index["gpu"]]).any()
               for c in cases if "gpu" in c.graph.c.kind_index)


@pytest.mark.parametrize("method", [m for m in METHODS if m not in MILP_METHODS])
def test_deterministic_for_a_fixed_seed(method):
    for seed in (0, 5, 12, 31):
        case = make_case(seed, max_ops=40)
        a = run_method(case, method, time_limit=None)
        if a.plan is None:
            continue
        b = run_method(case, method, time_limit=None)
        assert a.plan.placement == b.plan.placement, f"{method} on {case!r}"


@pytest.mark.parametrize("method", [m for m, i in SOLVERS.items() if not i.needs])
@pytest.mark.parametrize("sample", ["pesto_fig2", "two_branch", "cnn:40", "lstm:40"])
def test_contract_samples(method, sample):
    name, _, size = sample.partition(":")
    g = samples.load_sample(name, **({"n_ops": int(size)} if size else {}))
    c = Cluster.preset("2xV100-pcie")
    if g.total_memory() > 0:
        c = c.with_memory(g.total_memory() * 0.75)
    from workbench.testing.contract import Case

    o = run_method(Case(0, g, c, {"shape": sample}), method, time_limit=2.0)
    assert o.verdict in ("pass", "error"), o.detail


# ---------------------------------------------------------------------- regressions
def _msr_shape(g, *, mode="host"):
    """8 accelerators with a quarter of the model each and one unlimited host CPU."""
    devs = [Device(f"gpu{i}", "gpu", g.total_memory() / 4) for i in range(8)]
    return Cluster(devs + [Device("cpu0", "cpu")], intra_host=Link(0.01, 1e7), mode=mode,
                   name="8gpu+cpu")


def test_m_sct_zero_transfer_edge():
    g = wb.OpGraph.from_ops([("a", {"compute": {"gpu": 1.0}}), ("b", {"compute": {"gpu": 2.0}})],
                            [("a", "b", {"bytes": 0.0})])
    c = Cluster([Device("gpu0"), Device("gpu1")], intra_host=Link(0.0, 1e6))
    p = wb.solve(g, c, method="m_sct")
    assert p.predicted["makespan_ms"] == simulate(p, c, congestion=False).makespan == 3.0


def test_m_sct_lp_is_bounded_and_scaled():
    dense = make_case(168)  # 297 ops, dense: the LP took 6 s through PuLP at a 2 s limit
    assert dense.graph.n_ops == 297 and dense.graph.n_edges > 3000
    p = wb.solve(dense.graph, dense.cluster, method="m_sct", time_limit=2.0)
    lp = p.info["lp_seconds"]  # the LP's wall time: load-scaled when over (issue 41)
    # its status: the method's own (the live judge may add out_of_memory, issue 42)
    assert (lp < 1.5 or lp / slowdown() < 1.5) and \
        p.stats.get("solver_status", p.status) == "heuristic"
    huge = make_case(345)  # 1e15 ms costs: PuLP's HiGHS glue failed with an IndexError
    assert huge.desc["scale"] > 1e12
    p = wb.solve(huge.graph, huge.cluster, method="m_sct", time_limit=2.0)
    assert p.info["lp_solved"] and p.info["favourites"] > 0


@pytest.mark.parametrize("method", ["pesto_ilp", "pesto", "m_sct"])
def test_milp_methods_with_huge_costs(method):
    g = samples.pesto_fig2().map_ops(
        lambda v, a: {**a, "compute": {k: t * 1e15 for k, t in a["compute"].items()}})
    c = Cluster.preset("2xV100-pcie")
    p = wb.solve(g, c, method=method, time_limit=10, **_milp(method))
    ms = simulate(p, c).makespan
    assert math.isfinite(ms) and ms == pytest.approx(8e15, rel=1e-6)
    if p.status == "optimal":
        assert p.predicted["makespan_ms"] == pytest.approx(ms, rel=1e-6)


def _milp(method: str) -> dict:
    """Select the MILP engine of the Pesto solvers where they offer several."""
    params = inspect.signature(SOLVERS[method].func).parameters
    return {"engine": "milp"} if "engine" in params else {}


def test_pesto_ilp_host_mode_is_not_claimed_optimal():
    g = samples.random_dag(6, seed=3, edge_prob=0.5, ccr=2.0)
    c = Cluster([Device("gpu0"), Device("gpu1"), Device("cpu0", kind="cpu")], mode="host",
                host_link=Link(0.05, 1e6))
    p = wb.solve(g, c, method="pesto_ilp", time_limit=20, gap=1e-9, **_milp("pesto_ilp"))
    simulate(p, c)  # its order does not deadlock
    assert p.stats["ilp_status"] == "optimal"
    assert p.status == "feasible" and "congestion" in p.stats["not_optimal_because"]


def test_order_by_start_never_deadlocks():
    # MILP start times a hair out of order: b "starts" before its input a on one device
    g = samples.diamond()
    c = Cluster.preset("2xV100-pcie")
    order = order_by_start(g, c, [0, 0, 1, 0], [1e-7, 0.0, 1.0, 3.0])
    assert order == {"gpu0": ["a", "b", "d"], "gpu1": ["c"]}
    simulate(Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"}, order=order), c)


@pytest.mark.parametrize("method", ["pesto_ilp", "pesto"])
def test_pesto_time_limit_bounds_the_whole_call(method):
    case = make_case(5, max_ops=60)  # 60 ops on 8 accelerators + 2 CPUs: a huge model
    assert case.graph.n_ops == 60 and len(case.cluster) == 10
    # the worker's garbage from earlier tests is collected now, not by a full collection that
    # falls inside this 2.2 s bound (2.73 s wall in one suite run, 0.6-0.9 s alone); not in
    # Stopwatch itself: a collection per timed call made the contract sweep many times slower
    gc.collect()
    with Stopwatch() as sw:
        p = wb.solve(case.graph, case.cluster, method=method, time_limit=1.0, **_milp(method))
    assert sw.within(2.2), sw
    assert p.stats.get("solver_status", p.status) in ("time_limit", "feasible")  # its own status


def test_celeritas_keeps_work_off_a_slow_cpu():
    g = samples.transformer(600, seed=0)
    c = _msr_shape(g)
    cel, op = wb.solve(g, c, method="celeritas"), wb.solve(g, c, method="order_place")
    assert "cpu0" not in cel.devices_used()
    assert simulate(cel, c).makespan <= simulate(op, c).makespan * (1 + 1e-9)
    raw = wb.solve(g, c, method="celeritas", slow_factor=None, keep_start=False,
                   relief=None, split_start=False)  # the rule as written
    assert simulate(raw, c).makespan > 3 * simulate(cel, c).makespan


@pytest.mark.parametrize("method", ["etf", "m_etf", "m_sct"])
def test_etf_family_keeps_work_off_a_slow_cpu(method):
    g = samples.transformer(600, seed=0)
    c = _msr_shape(g)
    p, heft = wb.solve(g, c, method=method), wb.solve(g, c, method="heft")
    assert "cpu0" not in p.devices_used()
    assert simulate(p, c).makespan <= 1.2 * simulate(heft, c).makespan
    raw = wb.solve(g, c, method=method, slow_factor=None)
    assert simulate(raw, c).makespan > 3 * simulate(p, c).makespan


def test_slow_device_still_used_when_memory_forces_it():
    g = samples.random_dag(12, seed=2, memory=1e6)
    c = Cluster([Device("gpu0", memory=g.total_memory() * 0.6),
                 Device("cpu0", kind="cpu", memory=g.total_memory())])
    for method in ("m_etf", "m_sct", "celeritas"):
        p = wb.solve(g, c, method=method)
        assert p.stats.get("solver_status", p.status) == "heuristic", method  # (issue 42)
        assert "cpu0" in p.devices_used(), method


def test_single_respects_memory_of_the_devices_cpu_only_ops_go_to():
    g = samples.random_dag(10, seed=1, cpu_only_fraction=0.5, memory=1e6)
    cpu_need = sum(g.op(v)["memory"] for v in g.ops if "gpu" not in g.op(v)["compute"])
    assert cpu_need > 0
    c = Cluster([Device("gpu0", memory=1e9), Device("cpu0", kind="cpu", memory=cpu_need / 2)])
    p = wb.solve(g, c, method="single")
    assert p.status == "infeasible"
    assert wb.evaluate(p, c).violations


def test_expert_overfull_split_is_infeasible_and_split_groups_are_errors():
    g = samples.diamond().map_ops(lambda v, a: {**a, "memory": 1e6})
    c = Cluster.preset("2xV100-pcie").with_memory(2.5e6)
    p = wb.solve(g, c, method="expert", split={v: "gpu0" for v in g.ops})
    assert p.status == "infeasible" and p.info["memory_over"] == ["gpu0"]
    g2 = g.map_ops(lambda v, a: {**a, "colocate": "x" if v in "ab" else None})
    with pytest.raises(PlanError, match="colocation group 'x'"):
        wb.solve(g2, c, method="expert", split={"a": "gpu0", "b": "gpu1", "c": "gpu0",
                                                "d": "gpu1"})


def test_metis_with_two_accelerator_kinds():
    case = make_case(5)  # 192 ops, gpu and tpu accelerators, some ops without a tpu cost
    assert case.desc["acc_kinds"] == 2
    o = run_method(case, "metis", time_limit=None)
    assert o.verdict == "pass", o.detail


def test_infeasible_memory_is_a_clear_error():
    g = samples.diamond().map_ops(lambda v, a: {**a, "memory": 6e9})
    c = Cluster.preset("2xV100-pcie").with_memory(1e9)
    for method in ("m_etf", "dpos", "single", "pesto_ilp"):
        with pytest.raises(InfeasibleError):
            wb.solve(g, c, method=method, **({"time_limit": 2} if "pesto" in method else {}))
