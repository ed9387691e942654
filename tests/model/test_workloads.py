"""Workloads where the methods differ: the hard-regime generator, the named suite, MSR names."""

from __future__ import annotations

import pytest

import workbench as wb
from workbench.cli import load_graph_arg
from workbench.cluster import REF_BANDWIDTH
from workbench.errors import FormatError, GraphError
from workbench.io.msr import MSR_DIR, msr_names, read_msr
from workbench.workloads import (HARD_DEFAULTS, apply_memory_pressure, hard_suite, layered,
                                 memory_footprint, workload)

METHODS = ["m_topo", "m_etf", "heft", "dpos", "celeritas"]


def test_layered_knobs():
    g = layered(200, ccr=5.0, fanout=3, seed=1)
    assert g.n_ops == 200
    assert g.ccr(bandwidth=REF_BANDWIDTH) == pytest.approx(5.0)
    wide = layered(200, fanout=10, seed=1)
    # joins gather a whole layer: the widest join reads `fanout` ops
    assert max(len(wide.predecessors(v)) for v in wide.ops) >= 10
    assert max(len(g.predecessors(v)) for v in g.ops) < 10
    flat = layered(100, cost_sigma=0.0)
    costs = {round(flat.op(v)["compute"]["gpu"], 9) for v in flat.ops if v.startswith("op")}
    assert len(costs) == 1
    a, b = layered(200, seed=3), layered(200, seed=3)
    assert a.fingerprint == b.fingerprint and a.total_compute() == b.total_compute()
    for bad in ({"ccr": -1.0}, {"fanout": 0}, {"skip": 2.0}, {"cost_sigma": float("nan")}):
        with pytest.raises(GraphError, match=next(iter(bad))):
            layered(100, **bad)


def test_memory_pressure():
    g = layered(100)
    c = apply_memory_pressure(g, wb.Cluster.preset("4xV100-nvlink"), 2.5)
    assert memory_footprint(g, c) / c.devices[0].memory == pytest.approx(2.5)
    c = apply_memory_pressure(g, wb.Cluster.preset("4xV100-nvlink"), 2.5, model="static")
    assert g.total_memory() / c.devices[0].memory == pytest.approx(2.5)
    with pytest.raises(GraphError, match="memory model"):
        apply_memory_pressure(g, c, 2.0, model="peak")
    with pytest.raises(GraphError, match="memory_pressure"):
        apply_memory_pressure(g, c, 0)


def test_suite_is_named_and_large_enough():
    suite = hard_suite()
    assert len(suite) >= 8 and len({w.name for w in suite}) == len(suite)
    assert {w.cluster for w in suite} >= {"4xV100-nvlink", "8xA100-nvlink", "2x4xV100"}
    assert workload(suite[0].name) is not None
    with pytest.raises(GraphError, match="unknown workload 'nope'"):
        workload("nope")
    assert HARD_DEFAULTS["memory_pressure"] > 1  # the model does not fit on one device


@pytest.mark.parametrize("name", ["layered300-4xV100", "layered300-2xV100"])
def test_suite_pairs_separate_the_methods(name, min_fit: int = 4):
    """The criteria of the issue, re-measured: best >= 5 % above the bound, spread >= 15 %,
    over the plans that fit by the judge's live model (issue 42: pressure on the live
    footprint; the memory-aware methods re-solve a plan the judge finds out of memory)."""
    g, c = workload(name).build()
    df = wb.compare(g, c, methods=METHODS, progress=False, time_limit=20,
                    params={m: {"memory_model": "live"} for m in METHODS}).table
    ok = df[(df["error"] == "") & df["feasible"]]
    assert len(ok) >= min_fit
    best, worst = ok["makespan_ms"].min(), ok["makespan_ms"].max()
    lb = df["makespan_lb"].iloc[0]
    assert best >= 1.05 * lb
    assert worst >= 1.15 * best


def test_cli_names_for_suite_and_msr():
    g, c = load_graph_arg("suite:layered300-4xV100")
    assert c.name == "4xV100-nvlink" and g.n_ops == 300
    g, c = load_graph_arg("msr:op_bert3_inference")
    assert c.mode == "host" and g.name == "op_bert3_inference"
    g2, _ = load_graph_arg("msr:latency/op_bert3_inference")
    assert g2.n_ops == g.n_ops
    with pytest.raises(FormatError, match="unknown MSR workload 'nope'"):
        read_msr("msr:nope")


def test_msr_workloads_ship_with_their_licence():
    assert (MSR_DIR / "LICENSE.txt").read_text().startswith("MIT") or \
        "MIT" in (MSR_DIR / "LICENSE.txt").read_text()
    assert (MSR_DIR / "README.md").is_file()
    names = msr_names()
    assert len(names) == 10 and "throughput/layer_gnmt_training" in names


def test_cli_solves_a_cpu_profiled_sample_on_gpu_presets(capsys):
    """The failure of the issue: `workbench solve sample_graphs/resnet_small.json.gz
    --cluster 4xV100-nvlink` said 'op can run on none of the devices'."""
    from pathlib import Path

    from workbench.cli import main

    path = Path(__file__).resolve().parents[2] / "sample_graphs" / "resnet_small.json.gz"
    for preset in ("4xV100-nvlink", "8xA100-nvlink", "2x4xV100"):
        assert main(["solve", str(path), "--cluster", preset, "-m", "heft"]) == 0
        assert "simulated makespan" in capsys.readouterr().out


TORCH_PAIRS = ["torch_gpt2-4xV100", "torch_bert_base-4xV100", "torch_vit_b16-4xV100",
               "torch_llama-4xV100", "torch_llama-8xA100"]


def test_suite_holds_the_bundled_pytorch_steps_with_preset_costs():
    """Issue 25: the PyTorch training steps join the suite, costed for the pair's GPUs and
    under its memory pressure."""
    names = [w.name for w in hard_suite()]
    assert [n for n in names if n.startswith("torch_")] == TORCH_PAIRS
    g, c = workload("torch_llama-8xA100").build()
    assert g.meta["source"] == "torch" and g.meta["model_spec"] == "hf:llama"
    assert c.name == "8xA100-nvlink"
    assert memory_footprint(g, c) / c.devices[0].memory == pytest.approx(
        HARD_DEFAULTS["memory_pressure"])
    assert g.meta["device_costs"]["gpu"].startswith("roofline:A100")  # re-costed for A100s
    g4, _ = workload("torch_llama-4xV100").build()
    assert g4.meta["device_costs"]["gpu"].startswith("roofline:V100")


@pytest.mark.parametrize("name", ["torch_llama-4xV100", "torch_llama-8xA100"])
def test_pytorch_suite_pairs_separate_the_methods(name):
    """The suite's criteria, re-measured on the smallest PyTorch step (312 ops). Under the live
    judge two of the five methods fit on 4xV100 (m_topo, DPOS re-solved; heft, m-ETF and
    Celeritas stay out of memory), four on 8xA100."""
    test_suite_pairs_separate_the_methods(name, min_fit=2 if name.endswith("4xV100") else 4)
