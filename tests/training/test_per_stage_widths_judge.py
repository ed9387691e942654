"""The training judge executes per-stage widths (``Strategy.stage_widths``: each pipeline
stage its own tensor- and data-parallel degree), resharding the activations between stages
of unequal widths; equal widths give the uniform strategy's step exactly."""

import pytest

from workbench.cluster import Cluster
from workbench.errors import PlanError
from workbench.judge.training import simulate_training
from workbench.transforms.parallel import Strategy, parallelize

NODE = Cluster.preset("8xA100-80g")
GPT = "gpt:layers=4,hidden=256,heads=4,seq=128,vocab=1000"
# a large vocabulary: the LM head and loss cost more than the two blocks together
HEAD = "llama:layers=2,hidden=512,heads=8,seq=512,vocab=128000"


@pytest.mark.parametrize("kw", [{}, {"zero": 3}, {"zero": 1, "recompute": "full"},
                                {"schedule": "interleaved", "virtual": 2}])
def test_equal_widths_run_the_uniform_step(kw):
    uniform = parallelize(GPT, NODE, Strategy(tp=2, pp=2, dp=2, global_batch=16, **kw))
    widths = parallelize(GPT, NODE, Strategy(pp=2, global_batch=16, mbs=uniform.strategy.mbs,
                                             stage_widths=((2, 2), (2, 2)), **kw))
    assert widths.strategy.stage_widths and widths.strategy.devices == 8
    for ranks in ("reduced", "all"):
        a, b = simulate_training(uniform, ranks=ranks), simulate_training(widths, ranks=ranks)
        assert b.step_ms == a.step_ms and b.peak == a.peak
        assert b.breakdown() == a.breakdown()


def test_more_replicas_on_the_head_stage_beat_every_uniform_two_stage_strategy():
    wide = parallelize(HEAD, NODE, Strategy(pp=2, mbs=2, global_batch=24,
                                            stage_widths=((1, 1), (1, 3))))
    r = simulate_training(wide)
    assert r.feasible and r.ranks == "all" and r.n_ranks_simulated == 4
    uniform = []
    for tp, dp in ((1, 2), (2, 1)):
        for mbs in (1, 2, 3, 4, 6):
            try:
                p = parallelize(HEAD, NODE, Strategy(tp=tp, pp=2, dp=dp, mbs=mbs,
                                                     global_batch=24))
            except PlanError:
                continue
            uniform.append(simulate_training(p).step_ms)
    assert len(uniform) >= 6
    assert r.step_ms < 0.8 * min(uniform)
    # each replica of the head stage runs a third of a micro-batch of 6 sequences
    assert [len(wide.stage_ops(k)) for k in (0, 1)] == [len(wide.ops)] * 2
    assert wide.stage_ops(1)[-1].flops == pytest.approx(wide.stage_ops(0)[-1].flops / 3)
    assert wide.stage_ops(0)[-1].flops == pytest.approx(
        parallelize(HEAD, NODE, Strategy(mbs=6, global_batch=6)).ops[-1].flops)


def test_the_resharding_sends_carry_the_whole_micro_batch():
    p = parallelize(HEAD, NODE, Strategy(pp=2, mbs=1, global_batch=12,
                                         stage_widths=((2, 1), (1, 4))))
    out = 1000.0                           # bytes of stage 0's replica output (4 sequences)
    fwd = p.route(0, 1, out, 4)
    assert sum(fwd.values()) == pytest.approx(out)
    # each of the four receiving replicas gets its sequence, half from each tp rank
    assert {y for _, y in fwd} == {p.rank(1, r) for r in range(4)}
    assert all(b == pytest.approx(out / 8) for b in fwd.values())
    back = p.route(1, 0, out / 4, 1)      # the gradients back: one sequence a replica
    assert sum(back.values()) == pytest.approx(out)
    assert {y for _, y in back} == {p.rank(0, 0, 0), p.rank(0, 0, 1)}


@pytest.mark.parametrize("widths, kw, match", [
    (((1, 1), (1, 3)), {"pp": 3}, "stage_widths gives 2 stages, pp=3"),
    (((1, 1), (1, 0)), {"pp": 2}, "pairs of integers >= 1"),
    (((1, 1), 2), {"pp": 2}, "pairs of integers >= 1"),
    ("1x1/1x3", {"pp": 2}, "tuple of one"),
])
def test_bad_widths_are_refused_by_the_strategy(widths, kw, match):
    with pytest.raises(PlanError, match=match):
        Strategy(stage_widths=widths, **kw)


@pytest.mark.parametrize("widths, kw, match", [
    (((4, 1), (1, 5)), {"mbs": 1, "global_batch": 20}, r"4 x 1 \+ 1 x 5 .* = 9 GPUs"),
    (((1, 2), (1, 3)), {"mbs": 1, "global_batch": 12}, "stage 0's dp=2 does not divide"),
    (((3, 1), (1, 2)), {"mbs": 1, "global_batch": 12}, r"tp=3 \(stage 0\) does not divide"),
    (((1, 1), (1, 3)), {"mbs": 1, "global_batch": 10}, "global batch 10 is not a multiple"),
])
def test_bad_widths_are_refused_by_the_plan(widths, kw, match):
    with pytest.raises(PlanError, match=match):
        parallelize(HEAD, NODE, Strategy(pp=2, stage_widths=widths, **kw))


def test_random_widths_run_to_the_end_on_every_rank():
    """Many-to-many resharding sends under every schedule, ZeRO stage and recomputation: no
    deadlock (the first version had one), every rank simulated, the parts add up."""
    import random

    rng = random.Random(1)
    cluster = Cluster.preset("64xA100-80g")
    ran = 0
    for _ in range(40):
        pp = rng.choice([2, 3, 4])
        widths = tuple((rng.choice([1, 2, 4]), rng.choice([1, 2, 3, 4, 6])) for _ in range(pp))
        sched = rng.choice(["1f1b", "gpipe", "interleaved"])
        mbs = rng.choice([1, 2])
        try:
            plan = parallelize(GPT, cluster, Strategy(
                pp=pp, mbs=mbs, global_batch=mbs * max(d for _, d in widths) * pp,
                stage_widths=widths, schedule=sched, virtual=2 if sched == "interleaved" else 1,
                zero=rng.choice([0, 1, 2, 3]), recompute=rng.choice(["none", "full"])))
        except PlanError:
            continue
        r = simulate_training(plan, record_links=False)
        b = r.breakdown()
        if len(set(widths)) > 1:
            assert r.ranks == "all" and len(r.tasks) == plan.strategy.devices
        assert sum(v for k, v in b.items() if k != "step") == pytest.approx(b["step"])
        ran += 1
    assert ran >= 20
