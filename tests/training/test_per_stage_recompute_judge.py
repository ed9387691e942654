"""The training judge executes a recomputation setting per pipeline stage: each stage's time
and memory follow its own setting (``Strategy.stage_recompute``)."""

import pytest

from workbench.cluster import Cluster
from workbench.errors import PlanError
from workbench.judge.training import chunk_program, simulate_training
from workbench.transforms.parallel import Strategy, parallelize

SPEC = "gpt:layers=4,hidden=256,heads=4,seq=128,vocab=1000"
NODE = Cluster.preset("8xA100-80g")


def _run(**kw):
    plan = parallelize(SPEC, NODE, Strategy(tp=2, pp=2, dp=2, global_batch=16, **kw))
    return plan, simulate_training(plan)


def test_each_stage_runs_and_holds_what_its_own_setting_says():
    mixed, rm = _run(stage_recompute=("full", "none"))
    full, rf = _run(recompute="full")
    none, rn = _run(recompute="none")
    # the programs: stage 0's chunk is the full-recompute one, stage 1's the plain one
    assert chunk_program(mixed, 0) == chunk_program(full, 0)
    assert chunk_program(mixed, 1) == chunk_program(none, 1)
    assert chunk_program(full, 0)["stash"] < chunk_program(none, 0)["stash"]
    first, last = mixed.rank(0), mixed.rank(1)
    # time: stage 0 recomputes as under full recomputation, stage 1 not at all
    assert rm.breakdown(first)["recompute"] == pytest.approx(rf.breakdown(first)["recompute"])
    assert rm.breakdown(first)["recompute"] > 0
    assert rm.breakdown(last)["recompute"] == 0 and rf.breakdown(last)["recompute"] > 0
    # memory: stage 0 peaks as under full recomputation, stage 1 as without it
    assert rm.peak[first] == pytest.approx(rf.peak[first])
    assert rm.peak[last] == pytest.approx(rn.peak[last])
    assert rn.peak[first] > rm.peak[first]
    # every rank simulated gives the same
    ra = simulate_training(mixed, ranks="all")
    assert ra.step_ms == pytest.approx(rm.step_ms) and ra.peak[first] == rm.peak[first]
    assert rn.step_ms < rm.step_ms < rf.step_ms


def test_stage_recompute_is_checked_and_spelled_once():
    s = Strategy(pp=2, stage_recompute=("selective", "none"))
    assert s.recompute == "selective" and s.recompute_label == "selective/none"
    assert "recompute=selective/none" in s.describe()
    assert Strategy(pp=2, stage_recompute=("none", "none")) == Strategy(pp=2)
    for bad in (("full",), ("full", "some"), "full"):
        with pytest.raises(PlanError, match="stage_recompute"):
            Strategy(pp=2, stage_recompute=bad)
