"""Issue 23, part 3: inputs the command line used to accept or answer with a traceback.

Each case goes through the real command line (:func:`workbench.cli.main`): an ONNX file made
with the ``onnx`` library and damaged (a 2**40 input dimension, a 2**40-element tensor), a seed
beyond what the seeded solvers take, a plan replayed on a graph with other costs or edges,
``--memory-gib inf``, and costs of 1e308 ms whose times overflow.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import workbench as wb
from workbench.cli import main
from workbench.errors import GraphError, PlanError, SolverError
from workbench.graph import OpGraph
from workbench.io import load_plan, save_graph
from workbench.solvers.params import MAX_SEED

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper


def _cli(capsys, *argv):
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return rc, out.out, out.err


# ---------------------------------------------------------------------- (a) ONNX bounds
def _mlp(path, extra_nodes=(), extra_inits=(), out="y"):
    w = numpy_helper.from_array(np.zeros((16, 8), np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Relu", ["h"], ["y"], name="relu"), *extra_nodes]
    g = helper.make_graph(nodes, "mlp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
                          [w, *extra_inits])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def _damage_input_dim(path, dim: int, value: int) -> None:
    """Rewrite the saved model with input dimension ``dim`` of 'x' fixed at ``value``."""
    m = onnx.load(str(path))
    d = m.graph.input[0].type.tensor_type.shape.dim[dim]
    d.ClearField("dim_param")
    d.dim_value = value
    onnx.save(m, str(path))


def test_onnx_undamaged_file_reads(tmp_path, capsys):
    rc, out, _ = _cli(capsys, "info", _mlp(tmp_path / "m.onnx"), "--json")
    assert rc == 0 and json.loads(out)["ops"] == 2


@pytest.mark.parametrize("cmd", [["info"], ["compare", "--methods", "single"]])
def test_onnx_input_dimension_2_40_is_refused(tmp_path, capsys, cmd):
    path = _mlp(tmp_path / "m.onnx")
    _damage_input_dim(path, 0, 2**40)
    rc, out, err = _cli(capsys, cmd[0], path, *cmd[1:])
    assert rc == 2 and out == ""
    assert "ONNX op 'mm'" in err and "tensor 'x'" in err and "1099511627776" in err
    assert str(2**31 - 1) in err


def test_onnx_total_elements_bound_names_op_and_tensor(tmp_path, capsys):
    # Expand to (2**20, 2**20, 8): every dimension is fine, 2**43 elements are not
    shape = numpy_helper.from_array(np.array([2**20, 2**20, 8], np.int64), "big_shape")
    path = _mlp(tmp_path / "m.onnx", [helper.make_node("Expand", ["y", "big_shape"], ["z"],
                                                       name="blowup")], [shape], out="z")
    m = onnx.load(str(path))
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1  # (1, 16) -> (1, 8)
    onnx.save(m, str(path))
    rc, _, err = _cli(capsys, "info", path)
    assert rc == 2 and "ONNX op 'blowup' (type 'Expand')" in err and "tensor 'z'" in err
    assert "8,796,093,022,208 elements" in err


def test_onnx_negative_dimension_and_batch_bound(tmp_path):
    from workbench.io.onnx import read_onnx

    path = _mlp(tmp_path / "m.onnx")
    with pytest.raises(GraphError, match=r"batch=1099511627776 is above the limit"):
        read_onnx(path, batch=2**40)
    with pytest.raises(GraphError, match=r"dims\['N'\]"):
        read_onnx(path, dims={"N": 2**40})
    _damage_input_dim(path, 1, 2**40)
    with pytest.raises(GraphError, match="ONNX op 'mm'.*tensor 'x'.*dimension 1"):
        read_onnx(path)


# ---------------------------------------------------------------------- (b) seeds
def test_metis_seed_2_70_is_an_error_not_a_traceback(capsys):
    rc, out, err = _cli(capsys, "solve", "diamond", "-m", "metis", "--seed",
                        "1180591620717411303424")
    assert rc == 2 and out == "" and "--seed" in err and str(MAX_SEED) in err
    rc, _, err = _cli(capsys, "compare", "diamond", "--seed", str(MAX_SEED + 1))
    assert rc == 2 and "--seed" in err


def test_api_seed_range_checked_for_every_method():
    g, c = wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie")
    for method in ("metis", "heft"):  # a seeded method and one without a seed
        with pytest.raises(SolverError, match=rf"'{method}': parameter seed must be <= "
                                              rf"{MAX_SEED}, got {2**70}"):
            wb.solve(g, c, method=method, seed=2**70)


@pytest.mark.parametrize("method", ["metis", "pesto", "pesto_ilp", "local_search",
                                    "latency_ip"])
def test_every_seeded_solver_takes_the_largest_seed(method):
    g, c = wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie")
    plan = wb.solve(g, c, method=method, seed=MAX_SEED, time_limit=5)
    plan.validate(c)


# ---------------------------------------------------------------------- (c) fingerprints
def _chain(n=5, cost=1.0, extra_edge=False):
    ops = [(f"o{i}", {"compute": {"gpu": cost * (i + 1)}, "memory": 1e6}) for i in range(n)]
    edges = [(f"o{i}", f"o{i + 1}", {"bytes": 1e6}) for i in range(n - 1)]
    if extra_edge:
        edges.append(("o0", f"o{n - 1}", {"bytes": 1e6}))
    return OpGraph.from_ops(ops, edges, name="chain")


@pytest.fixture
def plan_files(tmp_path, capsys):
    save_graph(_chain(), tmp_path / "g.json")
    save_graph(_chain(cost=2.0), tmp_path / "costs.json")
    save_graph(_chain(extra_edge=True), tmp_path / "edges.json")
    rc, _, _ = _cli(capsys, "solve", tmp_path / "g.json", "-m", "round_robin", "--cluster",
                    "2xV100-pcie", "--out", tmp_path / "p.json")
    assert rc == 0
    return tmp_path


def test_plan_replays_on_its_own_graph(plan_files, capsys):
    rc, out, err = _cli(capsys, "simulate", plan_files / "g.json", "--plan",
                        plan_files / "p.json", "--cluster", "2xV100-pcie")
    assert rc == 0 and "makespan" in out and err == ""


@pytest.mark.parametrize("other, part", [("costs.json", "costs"), ("edges.json", "edges")])
def test_plan_for_another_graph_names_what_differs(plan_files, capsys, other, part):
    args = ["simulate", plan_files / other, "--plan", plan_files / "p.json",
            "--cluster", "2xV100-pcie"]
    rc, out, err = _cli(capsys, *args)
    assert rc == 2 and out == ""
    assert f"differ in their {part}" in err and "--force" in err
    rc, out, err = _cli(capsys, *args, "--force")
    assert rc == 0 and "makespan" in out
    assert err.startswith("warning:") and f"in their {part}" in err and "replayed anyway" in err


def test_plan_files_without_fingerprints_still_load(plan_files):
    data = json.loads((plan_files / "p.json").read_text())
    del data["graph"]["hashes"]
    old = plan_files / "old.json"
    old.write_text(json.dumps(data))  # before the hashes: ops and edges only
    assert load_plan(old, _chain(cost=2.0)).placement  # costs are not compared
    with pytest.raises(PlanError, match="in their ops or edges"):
        load_plan(old, _chain(extra_edge=True))
    del data["graph"]
    old.write_text(json.dumps(data))  # older still: nothing to compare
    assert load_plan(old, _chain(extra_edge=True)).placement


def test_api_force_warns(plan_files):
    with pytest.warns(UserWarning, match="in their costs; replayed anyway"):
        plan = load_plan(plan_files / "p.json", _chain(cost=2.0), force=True)
    assert plan.graph.op("o0")["compute"]["gpu"] == 2.0


# ---------------------------------------------------------------------- (d) unlimited memory
def test_memory_gib_inf_is_unlimited(capsys, tmp_path):
    g = _chain()
    save_graph(g, tmp_path / "g.json")
    base = ["solve", tmp_path / "g.json", "-m", "round_robin", "--cluster", "2xV100-pcie",
            "--json"]
    rc, out, _ = _cli(capsys, *base, "--memory-gib", "inf")
    assert rc == 0 and json.loads(out)["feasible"] is True
    rc, out, _ = _cli(capsys, *base, "--memory-gib", "0.000001")
    assert rc == 0 and json.loads(out)["violations"]  # the cap applies when finite
    rc, out, _ = _cli(capsys, "info", tmp_path / "g.json", "--memory-gib", "inf", "--json")
    assert rc == 0 and json.loads(out)["lb_min_devices"] == 1
    for bad in ("nan", "0"):
        rc, _, err = _cli(capsys, *base, "--memory-gib", bad)
        assert rc == 2 and "--memory-gib" in err


# ---------------------------------------------------------------------- (e) overflow
@pytest.mark.parametrize("method", ["heft", "m_topo", "round_robin"])
def test_costs_of_1e308_report_the_overflow(tmp_path, capsys, method):
    ops = [(f"o{i}", {"compute": {"gpu": 1e308, "cpu": 1e308}}) for i in range(6)]
    edges = [(f"o{i}", f"o{i + 1}", {"bytes": 1e6}) for i in range(5)]
    save_graph(OpGraph.from_ops(ops, edges), tmp_path / "big.json")
    rc, out, err = _cli(capsys, "solve", tmp_path / "big.json", "-m", method)
    assert rc == 2 and out == ""
    assert "overflow" in err and "'o1'" in err and "deadlock" not in err


def test_transfer_overflow_names_the_producer():
    g = OpGraph.from_ops([("a", {"compute": {"gpu": 1.0}}), ("b", {"compute": {"gpu": 1.0}})],
                         [("a", "b", {"bytes": 1.0, "comm": 1e308})])
    c = wb.Cluster.preset("2xV100-pcie")
    wb.simulate(wb.Plan(g, {"a": "gpu0", "b": "gpu1"}), c)  # 1 + 1e308 is finite
    g2 = OpGraph.from_ops([("a", {"compute": {"gpu": 1e308}}), ("b", {"compute": {"gpu": 1.0}})],
                          [("a", "b", {"bytes": 1.0, "comm": 1e308})])
    with pytest.raises(GraphError, match="overflow: op 'a': its output transfer"):
        wb.simulate(wb.Plan(g2, {"a": "gpu0", "b": "gpu1"}), c)
