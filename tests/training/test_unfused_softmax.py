"""Megatron's fused softmax where its kernel accepts the shape, PyTorch's five ops elsewhere."""

from dataclasses import replace

import pytest

from workbench.cluster import Cluster
from workbench.costs.llm import GPUS, fused_softmax_available, parse_spec
from workbench.errors import PlanError
from workbench.judge.training import chunk_program, simulate_training
from workbench.transforms.parallel import Strategy, parallelize

SPEC = "gpt:layers=2,hidden=256,heads=16,seq={seq},mbs={mbs},vocab=1000"
GPU = replace(GPUS["A100-80G"], op_floor_ms=0.05, host_op_ms=0.06)


def _plan(tp, mbs, softmax, recompute="full"):
    return parallelize(SPEC.format(mbs=mbs, seq=256), Cluster.preset("8xA100-80g"),
                       Strategy(tp=tp, dp=8 // tp, mbs=mbs, global_batch=8 // tp * mbs * 2,
                                recompute=recompute, softmax=softmax), gpu=GPU)


@pytest.mark.parametrize("tp, mbs, seq, fused", [
    (1, 1, 256, True), (4, 1, 256, True), (8, 1, 256, False), (8, 2, 256, True),
    (8, 3, 256, False),                     # 16 heads: mbs x 16 / tp batches, a multiple of 4
    (8, 2, 128, False), (8, 4, 128, True),  # up to 128 keys a block takes 8 rows
    (1, 1, 16, False), (1, 1, 8192, False), (1, 1, 4096, True)])  # keys in (16, 4096]
def test_the_kernel_needs_its_batches_and_keys_as_megatron_checks_them(tp, mbs, seq, fused):
    assert fused_softmax_available(parse_spec(SPEC.format(mbs=mbs, seq=seq)), tp) is fused


def test_an_unfused_softmax_is_five_ops_each_issued_by_the_host():
    fused, megatron = (chunk_program(_plan(8, 1, s), 0) for s in ("fused", "megatron"))
    count = [sum(len(x[2]) for x in p["fwd"] + p["bwd"] if x[0] in "cr") for p in (fused, megatron)]
    # forward, its recomputation and the backward: four more kernels each, in each of 2 blocks
    assert count[1] - count[0] == 3 * 4 * 2
    slow = simulate_training(_plan(8, 1, "megatron")).step_ms
    assert slow > simulate_training(_plan(8, 1, "fused")).step_ms + 3 * 4 * 2 * 0.05


@pytest.mark.parametrize("recompute", ["none", "selective"])
def test_where_the_kernel_runs_megatron_and_fused_judge_alike(recompute):
    a, b = (simulate_training(_plan(4, 1, s, recompute)) for s in ("fused", "megatron"))
    assert a.step_ms == pytest.approx(b.step_ms, rel=1e-12)


def test_an_unknown_softmax_setting_is_refused():
    with pytest.raises(PlanError, match="softmax must be one of fused, megatron"):
        Strategy(softmax="flash")
