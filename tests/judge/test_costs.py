"""Standard Evaluation: per-op regression over batch sizes and the Table 5 deviation metric."""

import numpy as np
import pytest

from workbench import GraphError, samples
from workbench.costs.standard import (
    Deviation,
    estimate_graph,
    fit_costs,
    relative_deviation,
    synthetic_profiles,
)
from workbench.graph import OpGraph


def linear_profiles(g, batches):
    """Profiles where every cost is exactly linear in the batch."""
    out = {}
    for b in batches:
        h = g.map_ops(lambda v, a, b=b: {
            **a, "memory": 1e6 + 3e4 * b * (1 + g.index[v]),
            "compute": {k: 0.1 + 0.01 * b * (1 + g.index[v]) for k in a["compute"]}})
        h = OpGraph.from_ops([(v, h.op(v)) for v in h.ops],
                             [(u, v, {"bytes": 1e3 * b}) for u, v in g.edges()], name="lin")
        out[b] = h
    return out


def test_linear_costs_are_recovered_exactly():
    g = samples.inception(60)
    prof = linear_profiles(g, [4, 8, 16])
    m = fit_costs(prof)
    assert m.batches == (4, 8, 16)
    np.testing.assert_allclose(m.mem_slope, 3e4 * (1 + np.arange(g.n_ops)))
    np.testing.assert_allclose(m.mem_r2, 1.0)
    est = m.predict(256)
    true = linear_profiles(g, [256])[256]
    d = relative_deviation(est, true)
    assert d.mean_memory < 1e-9 and d.mean_time < 1e-9
    assert est.edge(*g.edges()[0])["bytes"] == pytest.approx(256e3)
    assert est.meta["batch"] == 256 and est.meta["estimated_from"] == [4, 8, 16]
    assert est.op(g.ops[3])["op_type"] == g.op(g.ops[3])["op_type"]   # other attributes kept


def test_synthetic_profiles_give_paper_like_deviations():
    g = samples.transformer(400, seed=1)
    prof = synthetic_profiles(g, [8, 16, 32, 64, 512], seed=3)
    true = prof.pop(512)
    est = estimate_graph(prof, 512)
    d = relative_deviation(est, true)
    # Table 5 reports 1.5-6 % for memory and 8-14 % for time
    assert 0 < d.mean_memory < 0.06
    assert 0.03 < d.mean_time < 0.3
    cdf = d.cdf("memory")
    assert list(cdf.values()) == sorted(cdf.values()) and cdf[0.01] > 0.7
    assert d.kind == "gpu" and len(d.ops) == g.n_ops
    # the estimate is a plain OpGraph a solver can place
    assert est.total_memory() == pytest.approx(true.total_memory(), rel=0.06)


def test_deviation_zero_actual_values():
    d = relative_deviation(*(samples.diamond(),) * 2)   # memory 0 everywhere: deviation 0
    assert d.mean_memory == 0.0 and d.memory.tolist() == [0.0] * 4
    h = samples.diamond().map_ops(lambda v, a: {**a, "memory": 5.0})
    d = relative_deviation(h, samples.diamond())        # undefined ratio: NaN, left out
    assert np.isnan(d.memory).all() and d.mean_memory == 0.0
    with pytest.raises(ValueError, match="'memory' or 'time'"):
        Deviation([], np.zeros(0), np.zeros(0), "gpu").cdf("bytes")


def test_bad_profiles_are_named():
    g = samples.cnn(30)
    with pytest.raises(GraphError, match="at least two different batch sizes, got 1"):
        fit_costs({8: g})
    with pytest.raises(GraphError, match="at least two different batch sizes"):
        fit_costs({8: g, "8": g})
    with pytest.raises(GraphError, match="batch size -4 is not a positive number"):
        fit_costs({-4: g, 8: g})
    with pytest.raises(GraphError, match="not an OpGraph"):
        fit_costs({4: g, 8: "graph.json"})
    with pytest.raises(GraphError, match="dict batch size -> OpGraph"):
        fit_costs([g, g])
    other = samples.cnn(31)
    extra = min(set(other.ops) - set(g.ops))
    with pytest.raises(GraphError, match=f"disagree on the op set.*batch 16 has op '{extra}'"):
        fit_costs({8: g, 16: other})
    lost = g.ops[-1]
    sub = OpGraph(g.to_networkx().subgraph(g.ops[:-1]).copy(), name="sub")
    with pytest.raises(GraphError, match=f"lacks op '{lost}'"):
        fit_costs({8: g, 16: sub})
    u, v = g.edges()[0]
    cut = g.to_networkx()
    cut.remove_edge(u, v)
    with pytest.raises(GraphError, match=f"disagree on the edges.*lacks edge {u} -> {v}"):
        fit_costs({8: g, 16: OpGraph(cut)})
    gpu_only = g.map_ops(lambda o, a: {**a, "compute": {"gpu": a["compute"]["gpu"]}})
    with pytest.raises(GraphError, match="disagree on the device kinds of op"):
        fit_costs({8: g, 16: gpu_only})
    with pytest.raises(GraphError, match="not a positive number"):
        fit_costs({8: g, 16: g}).predict(0)
    with pytest.raises(GraphError, match="disagree on the op set"):
        relative_deviation(g, other)
    with pytest.raises(GraphError, match="not costed in both"):
        relative_deviation(g, g, kind="tpu")


@pytest.mark.tf
def test_profiles_from_the_tensorflow_extractor():
    pytest.importorskip("tensorflow")
    from workbench.runtime import extract

    prof = {b: extract("mlp", b, layers=2, width=32, in_dim=32) for b in (4, 8, 16)}
    est = estimate_graph(prof, 64)
    true = extract("mlp", 64, layers=2, width=32, in_dim=32)
    d = relative_deviation(est, true, kind="cpu")
    assert d.mean_memory < 0.01 and d.mean_time < 0.05
    assert set(est.ops) == set(true.ops)
