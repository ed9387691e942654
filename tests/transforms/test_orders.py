"""Topological orders of Celeritas: m-TOPO (BFS), DFS-TOPO, CPD-TOPO."""

import numpy as np
import pytest

from workbench import Cluster, GraphError, samples
from workbench.analysis import levels
from workbench.graph import OpGraph
from workbench.orders import (
    ORDERS,
    bfs_topo_order,
    check_topological,
    cpath,
    cpd_topo_order,
    dfs_topo_order,
    mtopo_order,
    positions,
    split_cut,
)
from workbench.solvers.baselines import simple as baselines


def _ops(*names, t=1.0):
    return [(v, {"compute": {"gpu": t}}) for v in names]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("fn", ["bfs", "dfs", "cpd"])
def test_orders_are_topological_permutations(seed, fn):
    g = samples.random_dag(40, seed=seed, edge_prob=0.1)
    order = ORDERS[fn](g)
    check_topological(g, order)
    assert sorted(order) == list(range(g.n_ops))


def test_mtopo_reuses_baechi_bfs():
    assert bfs_topo_order is baselines.bfs_topo_order
    g = samples.inception(80)
    assert mtopo_order(g) == baselines.bfs_topo_order(g)


def test_fig3_dfs_keeps_chains_together():
    # three independent chains: a BFS order interleaves them, DFS follows each to its end
    names = [f"{c}{i}" for i in range(4) for c in "abc"]
    edges = [(f"{c}{i}", f"{c}{i + 1}") for c in "abc" for i in range(3)]
    g = OpGraph.from_ops(_ops(*names), edges)
    dfs = [g.c.names[i] for i in dfs_topo_order(g)]
    assert dfs == [f"a{i}" for i in range(4)] + [f"b{i}" for i in range(4)] + \
        [f"c{i}" for i in range(4)]
    assert split_cut(g, dfs_topo_order(g), 3) == 0
    assert split_cut(g, bfs_topo_order(g), 3) > 0


def test_dfs_pushes_children_to_the_head():
    # a -> (b, c); b -> d; the queue also holds the other source z, which must wait
    g = OpGraph.from_ops(_ops("a", "z", "b", "c", "d"), [("a", "b"), ("a", "c"), ("b", "d")])
    assert [g.c.names[i] for i in dfs_topo_order(g)] == ["a", "b", "d", "c", "z"]
    assert [g.c.names[i] for i in bfs_topo_order(g)] == ["a", "z", "b", "c", "d"]


def test_cpd_follows_the_critical_path():
    # source s feeds a short branch x and a long branch y1 -> y2; both join at t
    ops = [("s", {"compute": {"gpu": 1.0}}), ("x", {"compute": {"gpu": 1.0}}),
           ("y1", {"compute": {"gpu": 5.0}}), ("y2", {"compute": {"gpu": 5.0}}),
           ("t", {"compute": {"gpu": 1.0}})]
    g = OpGraph.from_ops(ops, [("s", "x"), ("s", "y1"), ("y1", "y2"), ("x", "t"), ("y2", "t")])
    c = np.zeros(g.n_edges)
    assert [g.c.names[i] for i in cpd_topo_order(g, c=c)] == ["s", "y1", "y2", "x", "t"]
    # DFS-TOPO without cpath takes the first child in index order
    assert [g.c.names[i] for i in dfs_topo_order(g)][:2] == ["s", "x"]


def test_cpd_sorts_sources_by_decreasing_cpath():
    g = OpGraph.from_ops([("a", {"compute": {"gpu": 1.0}}), ("b", {"compute": {"gpu": 9.0}}),
                          ("c", {"compute": {"gpu": 2.0}})], [])
    assert [g.c.names[i] for i in cpd_topo_order(g)] == ["b", "c", "a"]


def test_cpath_is_tlevel_plus_blevel_of_analysis():
    g, c = samples.inception(120, seed=2), Cluster.preset("4xV100-nvlink")
    lv = levels(g, c)
    np.testing.assert_allclose(cpath(g, c), lv.tlevel + lv.blevel)
    assert cpd_topo_order(g, c) == cpd_topo_order(g, cp=lv.tlevel + lv.blevel)
    # the first op of the order is a source of largest cpath
    first = cpd_topo_order(g, c)[0]
    src = [g.index[v] for v in g.sources()]
    assert first in src and np.isclose(cpath(g, c)[first], cpath(g, c)[src].max())


def test_many_sources_dfs_cuts_less_than_bfs():
    # each layer reads its own weight variable (an in-degree-0 op), as in TF graphs
    ops, edges = [], []
    prev = None
    for i in range(30):
        ops += _ops(f"w{i}", f"op{i}")
        edges.append((f"w{i}", f"op{i}"))
        if prev:
            edges.append((prev, f"op{i}"))
        prev = f"op{i}"
    g = OpGraph.from_ops(ops, edges)
    assert split_cut(g, dfs_topo_order(g), 4) < split_cut(g, bfs_topo_order(g), 4)
    assert split_cut(g, cpd_topo_order(g), 4) <= split_cut(g, dfs_topo_order(g), 4)


def test_bad_orders_and_weights_are_named():
    g = samples.diamond()
    with pytest.raises(GraphError, match="not topological: edge a -> b"):
        check_topological(g, [1, 0, 2, 3])
    with pytest.raises(GraphError, match="not each of the 4 ops"):
        check_topological(g, [0, 1, 1, 3])
    with pytest.raises(GraphError, match="node weights have shape"):
        cpath(g, w=np.ones(3), c=np.ones(g.n_edges))
    with pytest.raises(GraphError, match="cpath has shape"):
        cpd_topo_order(g, cp=np.ones(2))
    assert positions([2, 0, 1]).tolist() == [1, 2, 0]
