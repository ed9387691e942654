"""One truth about memory (issue 42): the judge's feasibility is the live model, and no method
claims a feasibility the judge denies."""

from __future__ import annotations

import pytest

from workbench import Cluster, Plan, evaluate, samples, simulate, solve
from workbench.testing.contract import make_case, run_method

MEMORY_METHODS = ["single", "round_robin", "m_topo", "m_etf", "dpos", "celeritas", "order_place",
                  "greedy_latency", "metis", "dpl"]


def _differs(case) -> bool:
    """Live peak and static sum of one plan differ on the case (and memory is finite)."""
    g, c = case.graph, case.cluster
    if all(d.memory == float("inf") for d in c.devices):
        return False
    plan = solve(g, c, method="round_robin")
    s = simulate(plan, c)
    return any(abs(s.peak_live_memory[d] - s.peak_memory[d]) > 1e-6 * max(1.0, s.peak_memory[d])
               for d in c.names)


CASES = [s for s in range(60) if _differs(make_case(s, max_ops=40))][:8]


def test_cases_where_liveness_and_static_sum_differ_exist():
    assert len(CASES) == 8


@pytest.mark.parametrize("seed", CASES)
def test_no_method_claims_feasibility_the_judge_denies(seed):
    case = make_case(seed, max_ops=40)
    for m in MEMORY_METHODS:
        out = run_method(case, m, time_limit=5.0)
        assert out.verdict in ("pass", "error"), f"{m} on seed {seed}: {out.detail}"
        if out.verdict == "pass":
            plan = solve(case.graph, case.cluster, method=m, seed=0)
            met = evaluate(plan, case.cluster)
            mem = [v for v in met.violations if v.startswith("memory")]
            assert bool(mem) == (plan.status == "out_of_memory") or plan.status == "infeasible"
            assert plan.stats["memory_model"] in ("static", "none")


def test_the_cases_hold_plans_the_static_sum_passes_and_the_judge_denies():
    """The clause above is exercised: some static-feasible plans are out of memory."""
    denied = 0
    for seed in CASES:
        case = make_case(seed, max_ops=40)
        for m in ("m_topo", "m_etf", "dpos"):
            try:
                plan = solve(case.graph, case.cluster, method=m, seed=0)
            except Exception:  # noqa: BLE001 - no split fits (an InfeasibleError)
                continue
            denied += plan.status == "out_of_memory"
    assert denied >= 3


def test_out_of_memory_plans_are_marked_and_ranked_last():
    """mlp's single-device step needs 1.23x its static sum live (activations in flight): at
    1.05x the static sum the single-device plan is out of memory, and ranked after the plans
    that fit."""
    g = samples.load_sample("mlp")
    c = Cluster.preset("2xV100-pcie").with_memory(g.total_memory() * 1.05)
    plan = solve(g, c, method="single")
    met = evaluate(plan, c)
    assert met.memory_fraction < 1.0 < met.live_memory_fraction
    assert plan.status == "out_of_memory" and plan.stats["solver_status"] == "heuristic"
    assert not met.feasible and "live at" in met.violations[0]
    import workbench as wb

    cmp = wb.compare(g, c, methods=["single", "m_topo"], progress=False)
    flags = cmp.flags()
    assert "infeasible" in flags["single"]
    from widgets.figures.compare import ranked

    order = [str(cmp.table["method"].iloc[i]) for i in ranked(cmp.table, "makespan_ms", flags)]
    fits = [m for m in order if "infeasible" not in flags[m]]
    assert order[:len(fits)] == fits


def test_the_plan_file_format_accepts_the_status():
    from workbench.io import dump_plan
    from workbench.io.json_format import plan_from_dict

    g = samples.diamond()
    c = Cluster.preset("2xV100-pcie").with_memory(15e6)
    plan = solve(g, c, method="single")
    assert plan.status == "out_of_memory"
    back = plan_from_dict(dump_plan(plan), g)
    assert back.status == "out_of_memory"
    assert isinstance(back, Plan)


def test_memory_model_live_re_solves_until_the_judge_accepts():
    """resnet50 on 4xV100 under the suite's pressure: DPOS on the static sum is out of memory
    by the live model; re-solved with the over device's capacity tightened, it fits."""
    from workbench.workloads import workload

    g, c = workload("resnet50-4xV100").build()
    static = solve(g, c, method="dpos")
    assert static.status == "out_of_memory" and static.stats["memory_model"] == "static"
    live = solve(g, c, method="dpos", memory_model="live")
    met = evaluate(live, c)
    assert live.status == "heuristic" and met.feasible
    assert live.stats["memory_rounds"] >= 1
    assert live.stats["memory_model"] == "static, tightened by the live judge"
    tight = live.stats["memory_capacity"]
    assert min(tight.values()) < c.devices[0].memory  # some device was given less
    with pytest.raises(Exception, match="memory_model"):
        solve(g, c, method="dpos", memory_model="peak")


def test_the_battery_fails_a_method_that_claims_a_plan_fits_when_the_judge_denies(monkeypatch):
    """With ``solve``'s memory judgement switched off (as if a method reported its static rule's
    verdict), the contract battery fails the plans the live model finds over a device's memory,
    on the cases where liveness and the static sum differ; and it fails a plan marked
    ``out_of_memory`` that fits."""
    from workbench.solvers import registry

    monkeypatch.setattr(registry, "judge_memory", lambda plan, cluster, **kw: None)
    caught, fits = 0, []
    for seed in CASES:
        case = make_case(seed, max_ops=40)
        for m in ("m_topo", "m_etf", "dpos"):
            out = run_method(case, m, time_limit=5.0)
            if out.verdict == "error":
                continue
            met = evaluate(out.plan, case.cluster)
            over = any(v.startswith("memory") for v in met.violations)
            assert (out.verdict == "fail") == over, (seed, m, out.detail)
            if over:
                assert "with memory on" in out.detail
                caught += 1
            else:
                fits.append((case, m))
    assert caught >= 3 and fits

    def always_oom(plan, cluster, **kw):
        plan.status = "out_of_memory"

    monkeypatch.setattr(registry, "judge_memory", always_oom)
    for case, m in fits[:3]:
        out = run_method(case, m, time_limit=5.0)
        assert out.verdict == "fail" and "every device within its memory" in out.detail


def test_memory_model_live_leaves_an_anytime_method_time_to_re_solve():
    """The paper's latency IP on BERT-3 (CP-SAT, runs to its limit) sizes its plan by the static
    sum: the live judge finds a GPU over (a 358 MiB activation beside the weights). With
    ``memory_model="live"`` the first solve gets half the limit, so a re-solve happens within
    the limit; the tightened allowance holds for all four identical GPUs (else the IP moves
    the same ops to a twin), and the plan it returns fits."""
    from pathlib import Path

    from workbench.io.msr import read_msr
    from workbench.testing.timing import slowdown

    g, c = read_msr(Path(__file__).resolve().parents[2] / "sample_graphs/msr/latency/"
                    "op_bert3_inference.json")
    limit = min(20.0, 6.0 * slowdown())
    live = solve(g, c, method="latency_ip", time_limit=limit, memory_model="live")
    assert live.stats["memory_model"] == "static, tightened by the live judge"   # a re-solve
    assert live.status != "out_of_memory" and evaluate(live, c).feasible
    caps = {n: m for n, m in live.stats["memory_capacity"].items() if n.startswith("gpu")}
    assert len(set(caps.values())) == 1 and min(caps.values()) < c.devices[0].memory
    assert live.stats["solve_s"] <= limit + 2.0 * slowdown()


def test_memory_model_live_asks_a_heuristic_to_move_off_the_overshoot():
    """bert_base on 4xV100 at the suite's pressure: Celeritas's plan is under its static rule
    but over by the live model (activations). Scaling the allowance by capacity / live peak
    did not fit it in three re-solves (docs/results-memory.md); lowering it by the overshoot
    on every identical GPU fits it in one."""
    from workbench.workloads import workload

    g, c = workload("bert_base-4xV100").build()
    assert solve(g, c, method="celeritas").status == "out_of_memory"
    live = solve(g, c, method="celeritas", memory_model="live")
    assert live.status == "heuristic" and evaluate(live, c).feasible
    assert live.stats["memory_rounds"] == 1
