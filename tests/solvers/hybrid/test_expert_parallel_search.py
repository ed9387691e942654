"""Expert parallelism in the hybrid searches: ``megatron``'s grid enumerates ``ep`` on models
with experts (and nothing more on dense ones), the strategy bound stays below every judged
step of an ``ep > 1`` strategy, and ``tarnawski`` takes megatron's candidates with them."""

import math

import pytest

from workbench.cluster import Cluster
from workbench.costs.llm import parse_spec
from workbench.judge.training import simulate_training
from workbench.solvers.hybrid import grid, megatron, strategy_bound, tarnawski
from workbench.solvers.hybrid.megatron import expert_degrees
from workbench.transforms.parallel import parallelize

MOE = "moe:layers=4,hidden=256,heads=4,kv_heads=2,seq=128,vocab=1000,ffn=512,experts=8,topk=2"
GPT = "gpt:layers=4,hidden=256,heads=4,seq=128,vocab=1000"
NODE = Cluster.preset("8xA100-80g")


def test_grid_enumerates_ep_only_for_models_with_experts():
    moe = grid(parse_spec(MOE), NODE, global_batch=16)
    base = [s for s in moe if s.ep == 1]
    eps = {(s.dp, s.ep) for s in moe}
    assert {e for _, e in eps} == {1, 2, 4, 8}
    assert all(d % e == 0 and 8 % e == 0 for d, e in eps)
    assert not any(s.ep > 1 and (s.zero == 3 or s.tp > 1 and not s.sp) for s in moe)
    # the ep = 1 strategies are the grid of the same model without ep, in the same order
    dense = grid(parse_spec(GPT), NODE, global_batch=16)
    assert len(dense) == 402 and all(s.ep == 1 for s in dense)
    assert len(moe) > len(base) and len(base) == len([s for s in moe if s.ep == 1])
    assert expert_degrees(parse_spec(MOE), 6) == [1, 2]
    assert expert_degrees(parse_spec(GPT), 8) == [1]


def test_bound_stays_below_every_judged_ep_strategy():
    """Every ``ep > 1`` strategy of the grid of a small MoE on 8 GPUs: the bound is below the
    judged step (or rules out only what the judge finds out of memory)."""
    cfg = parse_spec(MOE)
    checked = 0
    for s in grid(cfg, NODE, global_batch=16, schedules=("1f1b",)):
        if s.ep == 1:
            continue
        plan = parallelize(cfg, NODE, s)
        r = simulate_training(plan)
        lb = strategy_bound(plan)
        if math.isinf(lb):
            assert not r.feasible, s.describe()
        else:
            assert lb <= r.step_ms * (1 + 1e-9), s.describe()
        checked += 1
    assert checked > 40


def test_megatron_with_ep_never_worse_and_pruning_agrees():
    """ep only adds candidates: the best of the grid with them is no slower than the best
    without; pruning by the bound returns the same step; tarnawski is no worse."""
    full = megatron(MOE, NODE, global_batch=16, gpus=8)
    pruned = megatron(MOE, NODE, global_batch=16, gpus=8, prune=True)
    assert pruned.step_ms == pytest.approx(full.step_ms, rel=1e-12)
    judged = [simulate_training(parallelize(MOE, NODE, s))
              for s in grid(parse_spec(MOE), NODE, global_batch=16, gpus=8) if s.ep == 1]
    no_ep = min(r.step_ms for r in judged if r.feasible)
    assert full.step_ms <= no_ep * (1 + 1e-12)
    h = tarnawski(MOE, NODE, global_batch=16, gpus=8, baseline=full)
    assert h.step_ms <= full.step_ms * (1 + 1e-9)


def test_ddp_and_zero_keep_every_expert_on_every_gpu():
    """``ddp`` and ``zero`` are data parallelism without expert parallelism (every replica
    holds every expert); ``megatron`` may shard them."""
    from workbench.solvers.hybrid.methods import search_strategy

    for m in ("ddp", "zero"):
        r = search_strategy(m, MOE, NODE, global_batch=64)
        assert r.plan.strategy.ep == 1 and r.plan.strategy.dp == 8, m
