"""The device cost model: per-op work formulas, roofline presets, device costs on graphs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workbench import Cluster, OpGraph, solve
from workbench.errors import ClusterError, GraphError
from workbench.io import load_graph
from workbench.costs.roofline import (
    DEVICE_MODELS,
    FAMILIES,
    costs_for_cluster,
    fit_device,
    op_family,
    op_work,
    roofline_times,
    with_device_costs,
)

SAMPLES = Path(__file__).resolve().parents[2] / "sample_graphs"


def test_matmul_and_conv_formulas():
    # [64 x 256] @ [256 x 128]: 2*M*N*K flops; bytes = inputs + output (fp32)
    f, b = op_work("MatMul", [(64, 256), (256, 128)], [(64, 128)])
    assert f == 2 * 64 * 128 * 256 and b == 4 * (64 * 256 + 256 * 128 + 64 * 128)
    f_t, _ = op_work("MatMul", [(256, 64), (256, 128)], [(64, 128)], attrs={"transpose_a": True})
    assert f_t == f
    # ONNX Conv: weight OIHW, K = I*H*W
    f, _ = op_work("Conv", [(1, 3, 8, 8), (16, 3, 3, 3)], [(1, 16, 8, 8)])
    assert f == 2 * 16 * 8 * 8 * 27
    # TF Conv2D: weight HWIO, same K
    f2, _ = op_work("Conv2D", [(1, 8, 8, 3), (3, 3, 3, 16)], [(1, 8, 8, 16)])
    assert f2 == f


def test_families_cover_views_updates_and_unknowns():
    assert op_work("Reshape", [(4, 4)], [(16,)]) == (0.0, 0.0)
    assert op_work("Transpose", [(4, 4)], [(4, 4)]) == (0.0, 128.0)
    f, b = op_work("ResourceApplyGradientDescent", [None, (), (10, 10)], [])
    assert f == 200 and b == 3 * 100 * 4
    assert op_family("Softmax") == "softmax" and op_work("Softmax", [(2, 5)], [(2, 5)])[0] == 50
    with pytest.raises(GraphError, match="'Frobnicate'"):
        op_work("Frobnicate", [(3,)], [(3,)], op="x")
    assert op_work("Frobnicate", [(3,)], [(3,)], unknown="elementwise") == (3.0, 24.0)
    with pytest.raises(GraphError, match="matmul needs"):
        op_work("MatMul", [None, None], [None], op="mm")
    # every family name maps back
    for types in FAMILIES.values():
        assert all(op_family(t) is not None for t in types)


def test_roofline_is_max_of_compute_and_memory_plus_launch():
    v100 = DEVICE_MODELS["V100"]
    t = roofline_times(np.array([15.7e9, 0.0]), np.array([0.0, 900e6]), v100)
    assert t == pytest.approx([1.0 + v100.launch_ms, 1.0 + v100.launch_ms])
    # faster devices are faster on the same work; tensor cores help compute-bound ops only
    work = (np.array([1e10]), np.array([1e6]))
    times = [roofline_times(*work, DEVICE_MODELS[m])[0] for m in ("V100", "A100", "H100")]
    assert times[0] > times[1] > times[2]
    assert roofline_times(*work, v100, precision="tensor")[0] < times[0]
    mem_bound = (np.array([1e3]), np.array([1e9]))
    assert roofline_times(*mem_bound, v100, precision="tensor")[0] == pytest.approx(
        roofline_times(*mem_bound, v100)[0])
    with pytest.raises(ClusterError, match="precision"):
        roofline_times(*work, v100, precision="fp8")


def _tiny():
    return OpGraph.from_ops(
        [("a", {"compute": {"cpu": 2.0}, "op_type": "MatMul", "flops": 1e9, "bytes_moved": 1e6}),
         ("r", {"compute": {"cpu": 0.1}, "op_type": "Reshape", "flops": 0.0,
                "bytes_moved": 0.0}),
         ("b", {"compute": {"cpu": 1.0}, "op_type": "Relu", "flops": 1e6, "bytes_moved": 8e6})],
        [("a", "r", {"bytes": 4e6}), ("r", "b", {"bytes": 4e6})], meta={"device_kind": "cpu"})


def test_with_device_costs_and_presets():
    g = _tiny()
    v = with_device_costs(g, "V100")
    assert v.op("a")["compute"]["cpu"] == 2.0                    # measured costs kept
    assert v.op("r")["compute"]["gpu"] == 0.0                    # views cost nothing
    assert v.op("a")["compute"]["gpu"] == pytest.approx(1e9 / 15.7e9 + 0.005)
    assert v.meta["device_costs"] == {"gpu": "roofline:V100:fp32"}
    a = with_device_costs(g, Cluster.preset("8xA100-nvlink"))
    assert a.op("a")["compute"]["gpu"] / 1.7 == pytest.approx(1e9 / 19.5e9 + 0.005)
    with pytest.raises(ClusterError, match="unknown device model 'TPU'"):
        with_device_costs(g, "TPU")
    custom = Cluster.preset("4xcpu").with_devices(Cluster.preset("2xV100-pcie").devices)
    with pytest.raises(ClusterError, match="no device models"):
        with_device_costs(g, Cluster(custom.devices, name="mine"))
    bare = OpGraph.from_ops([("x", {"compute": {"cpu": 1.0}, "op_type": "Conv2D"})])
    with pytest.raises(GraphError, match="op 'x' \\(type Conv2D\\).*no FLOP/byte figures"):
        with_device_costs(bare, "V100")
    # the CLI hook: unprofiled kinds get roofline costs, the profiled kind keeps its profile
    assert costs_for_cluster(g, Cluster.preset("4xcpu")) is g
    assert costs_for_cluster(bare, Cluster.preset("4xV100-nvlink")) is bare


def test_fit_device_recovers_a_known_device():
    truth = DEVICE_MODELS["V100"]
    rng = np.random.default_rng(1)
    f, b = rng.uniform(1e6, 1e12, 200), rng.uniform(1e4, 1e10, 200)
    t = roofline_times(f, b, truth)
    g = OpGraph.from_ops([(f"o{i}", {"compute": {"gpu": t[i]}, "op_type": "MatMul",
                                     "flops": f[i], "bytes_moved": b[i]}) for i in range(200)])
    m = fit_device([g], kind="gpu")
    assert m.peak_flops == pytest.approx(truth.peak_flops, rel=0.05)
    assert m.mem_bw == pytest.approx(truth.mem_bw, rel=0.05)
    with pytest.raises(GraphError, match="at least 3 ops"):
        fit_device([g], kind="cpu")


@pytest.fixture(scope="module")
def real_samples():
    files = sorted(SAMPLES.glob("*.json.gz"))
    assert len(files) >= 11
    return [load_graph(p) for p in files]


# every sample costed and solved: 2.2 s a preset alone (4-8 s in a loaded make check); the
# first preset in `make check`
@pytest.mark.parametrize("cluster", ["4xV100-nvlink",
                                     pytest.param("8xA100-nvlink", marks=pytest.mark.slow),
                                     pytest.param("2x4xV100", marks=pytest.mark.slow)])
def test_every_real_sample_solves_on_gpu_presets(cluster, real_samples):
    c = Cluster.preset(cluster)
    for g0 in real_samples:
        g = costs_for_cluster(g0, c)
        c.check_graph(g)                                  # every op runs on the GPUs
        times = c.op_times(g)
        assert np.isfinite(times).all() and (times >= 0).all()
        if g.n_ops <= 1200:                               # keep the suite fast
            plan = solve(g, c, method="m_topo")
            assert set(plan.placement) == set(g.ops)
            assert all(plan.placement[v].startswith("gpu") for v in g.ops)
