"""Issue 41, confident wrong answers: objects that belong together carry what ties them (the plan
key, the problem fingerprint) and a mismatch is an error naming what differs."""

from __future__ import annotations

import math

import pytest

import workbench as wb
from workbench import sweep
from workbench.budget import Budget
from workbench.cli import main
from workbench.errors import CaptureError, FormatError, PlanError, SolverError

C2 = "2xV100-pcie"


@pytest.fixture(scope="module")
def cmp():
    return wb.compare(wb.samples.load_sample("transformer", n_ops=60), wb.Cluster.preset(C2),
                      methods=["single", "m_topo", "heft"], time_limit=2, progress=False)


def test_robustness_refuses_plans_of_two_graphs():
    c = wb.Cluster.preset(C2)
    g, h = wb.samples.load_sample("transformer", n_ops=60), wb.samples.load_sample("cnn", n_ops=60)
    plans = {"a": wb.solve(g, c, method="m_topo"), "b": wb.solve(h, c, method="single")}
    with pytest.raises(SolverError, match=r"plans 'a' and 'b' are for different problems.*"
                                          r"transformer.*cnn"):
        wb.robustness(plans, c, samples=10)
    # a method that transformed the graph (data parallel replicas) still ranks with the rest
    dp = wb.solve(g, c, method="data_parallel")
    assert dp.graph.fingerprint != g.fingerprint and dp.problem == g.fingerprint
    r = wb.robustness({"a": plans["a"], "dp": dp}, c, samples=10)
    assert set(r.table["method"]) == {"a", "dp"}


def test_diff_refuses_swapped_schedules(cmp):
    a, b = cmp.plans["single"], cmp.plans["heft"]
    sa, sb = cmp.schedules["single"], cmp.schedules["heft"]
    d = wb.diff(a, b, cmp.cluster, schedules=(sa, sb))
    assert d.schedule_a.makespan == sa.makespan
    with pytest.raises(PlanError, match=r"schedules\[0\] is not a simulation of plan 'single': "
                                        r"it simulates plan 'heft'"):
        wb.diff(a, b, cmp.cluster, schedules=(sb, sa))


def test_same_placement_other_order_is_another_plan(cmp):
    p = cmp.plans["heft"]
    assert p.order
    s = wb.simulate(p, cmp.cluster)
    q = wb.Plan(p.graph, dict(p.placement), method="fifo")  # the same placement, no order
    assert p.key != q.key
    with pytest.raises(PlanError, match="same placement but another order"):
        wb.plan.check_schedule(q, s)
    wb.plan.check_schedule(p, s)
    with pytest.raises(PlanError, match="evaluate: schedule"):
        wb.evaluate(q, cmp.cluster, schedule=s)


@pytest.mark.tf
def test_residuals_refuse_another_plans_schedule():
    pytest.importorskip("tensorflow")
    import workbench.runtime as rt
    from workbench.cluster import local_cluster
    from workbench.fidelity.probes import probe_plan
    from workbench.fidelity.trace_residuals import residuals

    g = rt.profile(rt.extract("mlp", 8, **rt.TINY["mlp"]), steps=2, warmup=1)
    cl = local_cluster(2)
    plan = probe_plan(g, cl, seed=1)
    other = probe_plan(g, cl, seed=2)
    m = rt.traced_measurement(plan, cluster=cl, steps=2, warmup=1, traces=2)
    assert residuals(plan, m, schedule=wb.simulate(plan, cl)).method == plan.method
    with pytest.raises(PlanError, match="residuals: schedule is not a simulation of plan"):
        residuals(plan, m, schedule=wb.simulate(other, cl))


def test_compare_figure_refuses_another_comparisons_robustness(cmp):
    from widgets.figures import compare_figure

    other = wb.compare(wb.samples.load_sample("cnn", n_ops=60), wb.Cluster.preset(C2),
                       methods=["single", "m_topo", "heft"], time_limit=2, progress=False)
    mine, theirs = wb.robustness(cmp, samples=10), wb.robustness(other, samples=10)
    compare_figure(cmp, robust=mine)
    with pytest.raises(SolverError, match="compare_figure: robust is not of these plans"):
        compare_figure(cmp, robust=theirs)
    # a bare table (no plans): the nominal makespans tie them
    compare_figure(cmp.table, robust=mine)
    with pytest.raises(SolverError, match="robust is not of this comparison: its method"):
        compare_figure(cmp.table, robust=theirs)


def test_dag_view_refuses_a_plan_of_another_graph(cmp):
    pytest.importorskip("ipywidgets")
    from widgets import DagView

    g = cmp.graph
    h = wb.samples.load_sample("cnn", n_ops=60)
    foreign = wb.solve(h, cmp.cluster, method="m_topo")
    with pytest.raises(PlanError, match=r"made for graph 'cnn60' \(60 ops\), not for graph"):
        DagView(g, cluster=cmp.cluster, plan=foreign)
    with pytest.raises(PlanError, match="not a simulation of plan 'single'"):
        DagView(g, cluster=cmp.cluster, plan=cmp.plans["single"],
                schedule=cmp.schedules["heft"])
    DagView(g, cluster=cmp.cluster, plan=cmp.plans["heft"], schedule=cmp.schedules["heft"])
    from widgets import HeatmapView

    with pytest.raises(PlanError, match="made for graph 'cnn60'"):
        HeatmapView(g, {"mine": cmp.plans["heft"], "foreign": foreign}, cmp.cluster)
    HeatmapView(g, {"mine": cmp.plans["heft"]}, cmp.cluster)


def test_plan_to_torch_refuses_a_data_parallel_plan():
    torch = pytest.importorskip("torch")
    from workbench.io.torch import from_torch
    from workbench.io.torch_export import plan_to_torch

    net = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(4)])
    g = from_torch(net, (torch.randn(4, 8),), profile=None)
    c = wb.Cluster.preset("4xV100-nvlink")
    dp = wb.solve(g, c, method="data_parallel")
    with pytest.raises(PlanError, match=r"replicates the model 4 times .*gpu0, gpu1, gpu2, "
                                        r"gpu3.*DistributedDataParallel"):
        plan_to_torch(dp)
    out = plan_to_torch(wb.solve(g, c, method="m_topo"))
    assert set(out["devices"]) == {"0", "1", "2", "3"}


def test_from_torch_refuses_a_non_bool_training_and_an_empty_batch():
    torch = pytest.importorskip("torch")
    from workbench.io.torch import from_torch
    from workbench.io.torch_models import model_graph

    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    for bad in ("no", None, 1):
        with pytest.raises(CaptureError, match="training must be True or False"):
            from_torch(net, (torch.randn(4, 8),), training=bad, profile=None)
    with pytest.raises(CaptureError, match=r"example input 0 has no elements \(shape \(0, 8\)\)"):
        from_torch(net, (torch.randn(0, 8),), profile=None)
    with pytest.raises(CaptureError, match="batch must be a positive integer"):
        from_torch(net, (torch.randn(4, 8),), batch=0, profile=None)
    with pytest.raises(FormatError, match="training must be True, False or None"):
        model_graph("lstm-lm", batch=2, seq=4, training="no")
    assert from_torch(net, (torch.randn(4, 8),), training=False, profile=None).meta[
        "training"] is False


def test_hf_sequence_longer_than_its_positions_is_refused(capsys):
    pytest.importorskip("transformers")
    from workbench.io.torch_models import build_model

    assert main(["info", "hf:gpt2", "--seq", "2048", "--json"]) == 2
    assert "seq=2048 is longer than the model's 1024 positions" in capsys.readouterr().err
    with pytest.raises(FormatError, match="512 positions"):
        build_model("hf:bert-base", seq=513, layers=1, device="meta")
    build_model("hf:gpt2", seq=1024, layers=1, device="meta")  # exactly n_positions is fine
    # the config's own table counts (a smaller model, a smaller limit)
    with pytest.raises(FormatError, match="64 positions"):
        build_model("hf:gpt2", seq=65, layers=1, device="meta", config={"n_positions": 64})


def _spec(tmp_path, time_limit: str, **extra) -> str:
    path = tmp_path / "s.toml"
    lines = ['name = "t"', 'workloads = ["cnn:50"]', f"time_limit = {time_limit}"]
    lines += [f"{k} = {v}" for k, v in extra.items()]
    path.write_text("\n".join(lines) + '\n[clusters]\npresets = ["2xV100-pcie"]\n'
                    'memory_fraction = [0.3]\n[methods]\nsingle = {}\n')
    return str(path)


@pytest.mark.parametrize("value,shown", [("1e12", "1000000000000.0"), ("true", "True"),
                                         ("nan", "nan"), ("inf", "inf"), ("-1", "-1")])
def test_sweep_time_limit_must_be_seconds_the_os_can_wait(tmp_path, capsys, value, shown):
    assert main(["sweep", _spec(tmp_path, value), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert f"line 3, time_limit: must be a positive number of seconds (at most 604800, a " \
           f"week), got {shown}" in err
    assert main(["sweep", _spec(tmp_path, "10", cell_timeout="1e12"), "--dry-run"]) == 2
    assert "cell_timeout" in capsys.readouterr().err
    assert main(["sweep", _spec(tmp_path, "10"), "--dry-run", "--time-limit", "1e12"]) == 2


def test_sweep_time_limit_override_moves_the_default_cell_timeout():
    s = sweep.Spec.from_dict({"workloads": ["diamond"], "methods": {"single": {}},
                                 "time_limit": 10})
    assert s.cell_timeout == 50
    s.with_time_limit(100)
    assert (s.time_limit, s.cell_timeout) == (100.0, 230.0)
    fixed = sweep.Spec.from_dict({"workloads": ["diamond"], "methods": {"single": {}},
                                     "time_limit": 10, "cell_timeout": 500})
    fixed.with_time_limit(100)
    assert fixed.cell_timeout == 500


def test_sweep_whose_every_cell_failed_exits_2(tmp_path, capsys):
    # 'single' cannot place a model 3x larger than a device: every cell is an error row
    out = tmp_path / "res"
    assert main(["sweep", _spec(tmp_path, "5"), "--out", str(out), "--workers", "1",
                 "--no-isolate", "--json"]) == 2
    captured = capsys.readouterr()
    assert "error: every cell of the sweep failed (1 cells)" in captured.err
    assert sweep.load(out)["status"].eq("error").all()  # the rows are kept


@pytest.mark.parametrize("bad", [math.nan, -1, 0, math.inf, True, "10"])
def test_budget_refuses_what_is_not_seconds(bad):
    with pytest.raises(SolverError, match="time_limit must be a positive number of seconds"):
        Budget(bad)
    with pytest.raises(SolverError, match="time_limit must be a positive number of seconds"):
        Budget.of(bad)
    assert Budget(None).left() == math.inf and Budget(2.5).limit == 2.5


@pytest.mark.parametrize("extra,where", [
    ({"measure": "no"}, "measure: must be true or false, got 'no'"),
    ({"congestion": "false"}, "congestion: must be true or false, got 'false'"),
    ({"seeds": [True]}, "seeds: expected integers"),
    ({"seeds": [1.7]}, "seeds: expected integers"),
    ({"clusters": {"devices": [2.5]}}, "clusters.devices: expected integers"),
    ({"clusters": {"devices": [True]}}, "clusters.devices: expected integers"),
    ({"clusters": {"bandwidth_scale": [True]}}, "clusters.bandwidth_scale: expected numbers"),
])
def test_sweep_spec_takes_no_truthy_string_or_bool_for_a_flag_or_number(extra, where):
    from workbench.errors import SweepError

    with pytest.raises(SweepError, match=where):
        sweep.Spec.from_dict({"workloads": ["diamond"], "methods": {"single": {}}, **extra})
    ok = sweep.Spec.from_dict({"workloads": ["diamond"], "methods": {"single": {}},
                               "measure": False, "congestion": False, "seeds": [0, 2.0],
                               "clusters": {"devices": [2], "memory_fraction": [0, 0.5]}})
    assert (ok.measure, ok.congestion, ok.seeds, ok.devices) == (False, False, [0, 2], [2])
