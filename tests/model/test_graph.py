import math

import networkx as nx
import numpy as np
import pytest

from workbench import GraphError, OpGraph, samples


def g_of(ops, edges):
    return OpGraph.from_ops(ops, edges)


def test_topological_index_and_compiled_arrays(diamond):
    c = diamond.c
    assert c.n == 4 and c.m == 4
    assert all(s < d for s, d in zip(c.src, c.dst))
    assert diamond.index == {"a": 0, "b": 1, "c": 2, "d": 3}
    assert c.succ[0] == (1, 2) and c.pred[3] == (1, 2)
    assert list(c.succ_ptr) == [0, 2, 3, 4, 4]
    assert sorted(c.pred_edge.tolist()) == list(range(4))
    assert c.compute[:, c.kind_index["cpu"]].tolist() == [4.0, 8.0, 8.0, 4.0]
    with pytest.raises(ValueError):
        c.compute[0, 0] = 5  # compiled arrays are read-only


def test_cycle_is_named():
    with pytest.raises(GraphError, match=r"cycle: (x -> y -> z -> x|y -> z -> x -> y|z -> x -> y -> z)"):
        g_of([(v, {"compute": {"gpu": 1}}) for v in "xyz"], [("x", "y"), ("y", "z"), ("z", "x")])


def test_self_loop():
    G = nx.DiGraph()
    G.add_node("a", compute={"gpu": 1})
    G.add_edge("a", "a")
    with pytest.raises(GraphError, match="self-loop on op 'a'"):
        OpGraph(G)


@pytest.mark.parametrize("bad,msg", [
    (float("nan"), "NaN"), (-1.0, "negative"), (float("inf"), "infinite"), ("x", "not a number")])
def test_bad_costs_are_named(bad, msg):
    with pytest.raises(GraphError, match=f"op 'a': compute time on 'gpu' is {msg}"):
        g_of([("a", {"compute": {"gpu": bad}})], [])


def test_bad_memory_bytes_kind_and_missing_compute():
    with pytest.raises(GraphError, match="op 'a': memory is negative"):
        g_of([("a", {"compute": {"gpu": 1}, "memory": -5})], [])
    with pytest.raises(GraphError, match=r"edge a -> b: bytes is NaN"):
        g_of([("a", {"compute": {"gpu": 1}}), ("b", {"compute": {"gpu": 1}})],
             [("a", "b", {"bytes": math.nan})])
    with pytest.raises(GraphError, match="kind 'forward' is not one of"):
        g_of([("a", {"compute": {"gpu": 1}, "kind": "forward"})], [])
    with pytest.raises(GraphError, match="op 'a': 'compute' must be a non-empty dict"):
        g_of([("a", {"compute": {}})], [])
    G = nx.DiGraph()
    G.add_node("a", compute={"gpu": 1})
    G.add_edge("a", "ghost")
    with pytest.raises(GraphError, match="op 'ghost' has no 'compute'"):
        OpGraph(G)


def test_dangling_and_duplicate_edges():
    ops = [("a", {"compute": {"gpu": 1}})]
    with pytest.raises(GraphError, match="unknown op 'b'"):
        g_of(ops, [("a", "b")])
    with pytest.raises(GraphError, match="defined twice"):
        g_of(ops + ops, [])


def test_split_sizes_validated():
    with pytest.raises(GraphError, match="split dimension 'batch' has size 0"):
        g_of([("a", {"compute": {"gpu": 1}, "splits": {"batch": 0}})], [])


def test_totals_ccr_and_queries(diamond):
    assert diamond.total_compute("gpu") == 6.0
    assert diamond.total_compute() == 6.0
    assert diamond.total_bytes() == 4e7
    assert diamond.ccr(bandwidth=1e7) == pytest.approx(4 / 6)
    assert diamond.sources() == ["a"] and diamond.sinks() == ["d"]
    assert diamond.predecessors("d") == ["b", "c"]
    with pytest.raises(GraphError, match="op 'zz' is not in graph"):
        diamond.successors("zz")
    with pytest.raises(GraphError, match="no op .* runs on device kind 'tpu'"):
        diamond.total_compute("tpu")


def test_graph_is_frozen(diamond):
    with pytest.raises(nx.NetworkXError):
        diamond.nx.add_node("new")


def test_fingerprint_changes_with_structure(diamond):
    assert diamond.fingerprint == samples.diamond().fingerprint
    assert diamond.fingerprint != samples.two_branch().fingerprint


def test_training_transform_is_acyclic_and_colocated():
    g = samples.to_training(samples.transformer(60, seed=2))
    assert g.is_training()
    assert g.n_ops == 120
    for v in samples.transformer(60, seed=2).ops:
        assert g.op(v)["colocate"] == g.op(f"{v}/grad")["colocate"]
        assert g.op(f"{v}/grad")["kind"] == "bwd"


@pytest.mark.parametrize("name", ["cnn", "inception", "transformer", "lstm"])
def test_generators_are_deterministic_and_sized(name):
    a = samples.load_sample(name, n_ops=300, seed=4)
    b = samples.load_sample(name, n_ops=300, seed=4)
    assert a.fingerprint == b.fingerprint
    assert np.array_equal(a.c.compute, b.c.compute)
    assert abs(a.n_ops - 300) <= 15
    assert a.ccr(bandwidth=samples.REF_BANDWIDTH) == pytest.approx(
        1.0 if name == "lstm" else 0.5)
