"""`compare` on an LLM training problem runs the op-placing methods where meaningful: the
pipeline and partitioning families place one micro-batch's ops on a node's GPUs and, when
their placement is a pipeline split, it is judged as pipeline stages with data parallelism;
the others, and placements that are no pipeline split, say why in one line."""

import pytest

import workbench as wb
from workbench.judge.training import simulate_training
from workbench.transforms.parallel import cuts_from_placement
from workbench.workloads import resolve

SPEC = "gpt:layers=4,hidden=256,heads=4,seq=128,vocab=1000"


@pytest.fixture(scope="module")
def cmp():
    g, _ = resolve(SPEC)
    return wb.compare(g, wb.Cluster.preset("8xA100-80g"),
                      methods=["megatron", "pipedream", "metis", "local_search", "heft"],
                      global_batch=16, progress=False, time_limit=2)


def test_pipeline_placements_are_judged_as_strategies(cmp):
    t = cmp.table.set_index("method")
    assert list(t.index) == ["megatron", "pipedream", "metis"]
    assert t.loc["pipedream", "family"] == "pipeline" and t.loc["metis", "family"] == "partitioning"
    for m in ("pipedream", "metis"):
        res = cmp.training[m]
        s = res.plan.strategy
        assert s.tp == 1 and s.pp * s.dp <= 8 and s.global_batch == 16
        assert t.loc[m, "makespan_ms"] == pytest.approx(simulate_training(res.plan).step_ms)
        assert t.loc[m, "makespan_ms"] >= t.loc[m, "makespan_lb"]
        assert cmp.plans[m].info["strategy"]["pp"] == s.pp
    # megatron's grid holds pure data parallelism, which wins on this small model
    assert t.loc["megatron", "makespan_ms"] <= t["makespan_ms"].min() + 1e-9


def test_the_others_say_why_in_one_line(cmp):
    assert set(cmp.left_out) == {"local_search", "heft"}
    assert "not one contiguous run of the chain" in cmp.left_out["local_search"]
    assert "op-placing method of the list family" in cmp.left_out["heft"]
    assert all("\n" not in why for why in cmp.left_out.values())


def test_a_pipeline_placement_maps_to_its_stages():
    from workbench.compare_training import as_pipeline
    from workbench.costs.llm import parse_spec

    g, _ = resolve(SPEC)
    cfg = parse_spec(g.meta["model"])
    found, result = as_pipeline("metis", g, wb.Cluster.preset("8xA100-80g"), (cfg, "A100-80G"), 16,
                           None)
    placed = wb.solve(g, wb.Cluster.preset("8xA100-80g"), method="metis")
    assert found.plan.cuts == cuts_from_placement(cfg, placed.placement)
    assert "pipeline stages" in found.notes and found.judged == 1
    assert result.step_ms == found.step_ms and result.plan is found.plan
