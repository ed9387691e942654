"""Tests of the operation-splitting transform and FastT's data-parallel graph."""

from __future__ import annotations

import pytest

from workbench import OpGraph, samples
from workbench.errors import GraphError
from workbench.transforms.split import data_parallel_graph, split_op, split_sizes


def _graph() -> OpGraph:
    ops = [("a", {"compute": {"gpu": 1.0}}),
           ("conv", {"compute": {"gpu": 6.0, "cpu": 30.0}, "memory": 8e6,
                     "splits": {"batch": 10, "channels": 64}, "colocate": "g"}),
           ("b", {"compute": {"gpu": 1.0}, "colocate": "g"}),
           ("c", {"compute": {"gpu": 1.0}})]
    edges = [("a", "conv", {"bytes": 4e6}), ("conv", "b", {"bytes": 2e6}),
             ("conv", "c", {"bytes": 2e6, "comm": 0.5})]
    return OpGraph.from_ops(ops, edges, name="t")


def test_split_sizes_even():
    assert split_sizes(10, 3) == [4, 3, 3]
    assert sum(split_sizes(64, 5)) == 64


def test_split_batch_structure_and_costs():
    g = _graph()
    h = split_op(g, "conv", "batch", 3)
    subs = [f"conv/split{k}" for k in range(3)]
    assert "conv" not in h
    for s, sz in zip(subs, [4, 3, 3]):
        a = h.op(s)
        assert a["compute"]["gpu"] == pytest.approx(6.0 * sz / 10)
        assert a["compute"]["cpu"] == pytest.approx(30.0 * sz / 10)
        assert a["memory"] == 8e6            # weights replicated along batch
        assert a["splits"] == {"batch": sz, "channels": 64}
        assert a["colocate"] is None
        # input partitioned along batch
        assert h.edge("conv/split_in:a", s)["bytes"] == pytest.approx(4e6 * sz / 10)
        assert h.edge(s, "conv/concat:b")["bytes"] == pytest.approx(2e6 * sz / 10)
        assert h.edge(s, "conv/concat:c")["comm"] == pytest.approx(0.5 * sz / 10)
    assert h.edge("a", "conv/split_in:a")["bytes"] == 4e6
    assert h.edge("conv/concat:b", "b")["bytes"] == 2e6
    assert h.edge("conv/concat:c", "c")["comm"] == 0.5
    assert h.op("conv/split_in:a")["op_type"] == "Split"
    assert h.op("conv/concat:b")["op_type"] == "ConcatV2"
    assert h.n_ops == g.n_ops - 1 + 3 + 1 + 2
    assert h.meta["splits"] == [("conv", "batch", 3)]
    # total compute of the op is preserved by its sub-ops
    assert sum(h.op(s)["compute"]["gpu"] for s in subs) == pytest.approx(6.0)


def test_split_model_dimension_broadcasts_input_and_splits_weights():
    h = split_op(_graph(), "conv", "channels", 4)
    for k in range(4):
        s = f"conv/split{k}"
        assert h.op(s)["memory"] == pytest.approx(2e6)
        assert h.edge("conv/split_in:a", s)["bytes"] == 4e6   # whole input to each part
        assert h.edge(s, "conv/concat:b")["bytes"] == pytest.approx(0.5e6)


def test_split_again_and_entry_exit_ops():
    g = samples.cnn(20)
    h = split_op(g, "stem", "batch", 2)
    h2 = split_op(h, "stem/split0", "batch", 2)
    assert h2.op("stem/split0/split1")["splits"]["batch"] == 8
    assert h2.meta["splits"] == [("stem", "batch", 2), ("stem/split0", "batch", 2)]
    # exit op (no successors): sub-ops become exits
    last = g.sinks()[0]
    h3 = split_op(g, last, "batch", 2)
    assert set(h3.sinks()) == {f"{last}/split0", f"{last}/split1"}


@pytest.mark.parametrize("dim,n,msg", [
    ("height", 2, "cannot be split along 'height'"),
    ("batch", 11, "size 10 into 11 parts"),
    ("batch", 1, "into 1 parts"),
])
def test_split_bad_requests(dim, n, msg):
    with pytest.raises(GraphError, match=msg):
        split_op(_graph(), "conv", dim, n)


def test_split_unknown_and_unsplittable_op():
    with pytest.raises(GraphError, match="not in graph"):
        split_op(_graph(), "zz", "batch", 2)
    with pytest.raises(GraphError, match="splittable dimensions: none"):
        split_op(_graph(), "a", "batch", 2)


def test_data_parallel_graph_training():
    """The all-reduce as an op on its device (``aggregation="device"``, the model before the
    ring moved to the links; tests/solvers/list/test_fastt.py covers the default)."""
    g = samples.to_training(samples.cnn(16, seed=0), update=True)
    h = data_parallel_graph(g, 3, aggregation="device")
    assert h.meta["data_parallel"] == 3 and h.meta["aggregation"] == "device"
    for v in g.ops:
        for r in range(3):
            assert f"{v}@{r}" in h
    ar = [v for v in h.ops if v.startswith("allreduce:")]
    weighted = [v for v in g.ops if g.op(v)["kind"] == "fwd" and g.op(v)["memory"] > 0]
    assert len(ar) == 3 * len(weighted)          # one per variable and replica
    v = weighted[0]
    grp = g.op(v)["colocate"]
    for r in range(3):
        a = f"allreduce:{grp}@{r}"
        # waits for the gradient of every replica: its own with the bytes, the others in sync
        assert sorted(h.predecessors(a)) == sorted(f"{v}/grad@{q}" for q in range(3))
        assert h.edge(f"{v}/grad@{r}", a)["bytes"] == g.op(v)["memory"]
        assert all(h.edge(f"{v}/grad@{q}", a)["comm"] == 0.0 for q in range(3) if q != r)
        assert h.successors(a) == [f"{v}/update@{r}"]
        assert h.op(a)["colocate"] == f"{grp}@{r}"
        # ring all-reduce of the variable's bytes over the default link
        assert h.op(a)["compute"]["gpu"] == pytest.approx(
            4 * (0.005 + g.op(v)["memory"] / 3 / 1e7))
    # batch ops get 1/3 of the batch
    op = next(x for x in g.ops if "batch" in g.op(x)["splits"])
    assert h.op(f"{op}@0")["compute"]["gpu"] == pytest.approx(g.op(op)["compute"]["gpu"] / 3)
    # colocation stays within a replica
    assert h.op(f"{v}@1")["colocate"] == f"{grp}@1"


def test_data_parallel_graph_inference_has_no_allreduce():
    h = data_parallel_graph(samples.diamond(), 2)
    assert h.n_ops == 8 and not any(v.startswith("allreduce") for v in h.ops)
    with pytest.raises(GraphError):
        data_parallel_graph(samples.diamond(), 0)
    with pytest.raises(GraphError, match="aggregation must be"):
        data_parallel_graph(samples.diamond(), 2, aggregation="ps")
