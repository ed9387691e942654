"""Strategy searches on models whose blocks differ: an encoder-decoder (T5) and a mixture of
experts alternating with dense blocks -- the judge, the stage DP's cut points, megatron's
balanced and layout splits, tarnawski, its anytime curve and robustness on their plans."""

import math

import pytest

import workbench as wb
from workbench.cluster import Cluster
from workbench.costs.llm import chain, parse_spec
from workbench.judge.training import simulate_training
from workbench.solvers.hybrid import megatron, op_vectors, strategy_bound, tarnawski
from workbench.solvers.hybrid.stages import cut_points
from workbench.transforms.parallel import Strategy, parallelize

T5 = "t5:layers=2,dec_layers=2,hidden=256,heads=4,seq=128,vocab=8000"
MOE = "moe:layers=4,hidden=256,heads=4,seq=128,vocab=8000,experts=4,moe_every=2"
CL = Cluster.preset("8xA100-80g")


def test_blocks_differ_and_balanced_cuts_follow_them():
    t5, moe = parse_spec(T5), parse_spec(MOE)
    ops = chain(t5)
    enc = sum(o.flops for o in ops if o.layer == 0)
    dec = sum(o.flops for o in ops if o.layer == 3)
    assert dec > 1.3 * enc                       # self- and cross-attention, MLP
    assert moe.is_moe(1) and not moe.is_moe(0)
    m_ops = chain(moe)
    assert sum(o.params for o in m_ops if o.layer == 1) > \
        3 * sum(o.params for o in m_ops if o.layer == 0)
    p = parallelize(t5, CL, Strategy(pp=2, global_batch=4))
    assert p.ops[p.cuts[1]].name == "decoder_embedding"      # 2 + 2 blocks, 2 a stage
    assert [p.chunk_layers(c) for c in range(2)] == [(0, 2), (2, 4)]
    q = parallelize(moe, CL, Strategy(pp=2, global_batch=4))
    assert q.ops[q.cuts[1]].name == "L2/rms1"


def test_decoder_cuts_pass_the_encoder_output_on():
    p = parallelize(T5, CL, Strategy(tp=2, pp=2, global_batch=4))
    ok, send = cut_points(p, op_vectors(p))
    dec = [i for i, o in enumerate(p.ops) if o.layer == 3]
    assert any(ok[i] for i in dec)               # cuts inside the decoder are allowed
    c = parse_spec(T5)
    xe = c.mbs * c.seq * c.hidden * c.act_bytes
    i = next(i for i in dec if ok[i + 1])
    assert p.ops[i].out == pytest.approx(p.ops[i].resid + xe)


@pytest.mark.parametrize("spec", [T5, MOE])
def test_judge_reduced_ranks_equal_all_ranks(spec):
    s = Strategy(tp=2, pp=2, dp=2, global_batch=8, recompute="full")
    p = parallelize(spec, CL, s)
    r, a = simulate_training(p), simulate_training(p, ranks="all")
    assert r.feasible and r.step_ms == pytest.approx(a.step_ms)
    assert 0 < strategy_bound(p) <= r.step_ms


@pytest.mark.parametrize("spec", [T5, MOE])
def test_searches_on_nonuniform_models(spec):
    m = megatron(spec, CL, global_batch=16, gpus=4, prune=True)
    lay = megatron(spec, CL, global_batch=16, gpus=4, prune=True, layout=True)
    h = tarnawski(spec, CL, global_batch=16, gpus=4, baseline=[m, lay])
    assert lay.method == "megatron-layout"
    assert h.step_ms <= min(m.step_ms, lay.step_ms) * (1 + 1e-9)
    assert h.bound <= h.step_ms and math.isfinite(h.gap)
    # the anytime curve: improvements only, ending at the answer
    steps = [x[1] for x in h.curve]
    assert steps == sorted(steps, reverse=True) and steps[-1] == pytest.approx(h.step_ms)


def test_layout_split_balances_the_decoder():
    """On a pipeline of the encoder-decoder, the block-boundary DP moves the cut off the
    middle (decoder blocks cost more) and the judged step drops; megatron-layout is never
    worse than megatron's even split on the same grid."""
    spec = "t5:layers=4,dec_layers=4,hidden=512,heads=8,seq=256,vocab=8000"
    s = Strategy(pp=2, dp=2, global_batch=32)
    balanced = parallelize(spec, CL, s)
    from workbench.solvers.hybrid.megatron import _layout_plan_of

    even, plan = _layout_plan_of(balanced.config, CL)(balanced, op_vectors(balanced))
    assert even is balanced                       # the even split is judged too
    assert plan.cuts[1] > balanced.cuts[1]        # more encoder blocks on the first stage
    assert plan.ops[plan.cuts[1]].name.endswith("/self_norm")     # at a block boundary
    assert simulate_training(plan).step_ms < simulate_training(balanced).step_ms
    m = megatron(spec, CL, global_batch=32, gpus=4)
    lay = megatron(spec, CL, global_batch=32, gpus=4, layout=True)
    assert lay.step_ms <= m.step_ms


def test_robustness_on_strategy_plans():
    """wb.robustness replays the op-level plans of the strategies (TrainingPlan.to_plan)."""
    plans = {"pp1": parallelize(T5, CL, Strategy(dp=2, global_batch=4)).to_plan(),
             "pp2": parallelize(T5, CL, Strategy(pp=2, global_batch=4)).to_plan(),
             "moe-pp2": parallelize(MOE, CL, Strategy(pp=2, global_batch=4)).to_plan()}
    rob = wb.robustness({k: v for k, v in plans.items() if k != "moe-pp2"}, CL, samples=20)
    assert rob.winner in ("pp1", "pp2") and 0 < rob.p_winner <= 1
    assert rob.makespans.shape == (20, 2)
    rob2 = wb.robustness({"moe-pp2": plans["moe-pp2"]}, CL, samples=10)
    assert rob2.p_winner == 1.0


def test_full_recompute_keeps_the_encoder_output_once():
    """Full recomputation keeps each decoder block's input and the encoder output they all
    read once (one tensor), as the chunk program counts it."""
    from workbench.judge.training import chunk_program

    p = parallelize(T5, CL, Strategy(pp=2, global_batch=4, recompute="full"))
    c = parse_spec(T5)
    x = c.mbs * c.seq * c.hidden * c.act_bytes        # dec_seq == seq here
    ends = sum(o.saved for o in p.chunk_ops(1) if not 0 <= o.layer < c.blocks)
    assert chunk_program(p, 1)["stash"] == pytest.approx(ends + 2 * x + x)
