"""Megatron's softmaxes: its fused attention softmax where its kernel accepts the shape,
PyTorch's five ops elsewhere; its vocabulary-parallel cross-entropy kernel by kernel."""

from dataclasses import replace

import pytest

from workbench.cluster import Cluster
from workbench.costs.llm import (GPUS, MEGATRON_CROSS_ENTROPY_BYTES, fused_softmax_available,
                                 megatron_cross_entropy_ms, parse_spec)
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


def _kernels(program) -> int:
    return sum(len(x[2]) for x in program["fwd"] + program["bwd"] if x[0] in "cr")


def test_an_unfused_softmax_is_five_ops_each_issued_by_the_host():
    fused, megatron = (chunk_program(_plan(8, 1, s), 0) for s in ("fused", "megatron"))
    loss = (6 - 1) * 2 + (2 - 1)    # the cross-entropy's kernels: forward twice, backward
    # forward, its recomputation and the backward: four more kernels each, in each of 2 blocks
    assert _kernels(megatron) - _kernels(fused) == 3 * 4 * 2 + loss
    slow = simulate_training(_plan(8, 1, "megatron")).step_ms
    assert slow > simulate_training(_plan(8, 1, "fused")).step_ms + (3 * 4 * 2 + loss) * 0.05


@pytest.mark.parametrize("recompute", ["none", "selective"])
def test_where_the_kernel_runs_megatron_differs_from_fused_by_the_loss_alone(recompute):
    fused, megatron = (chunk_program(_plan(4, 1, s, recompute), 0) for s in ("fused", "megatron"))
    assert _kernels(megatron) - _kernels(fused) == (6 - 1) + (2 - 1)
    a, b = (simulate_training(_plan(4, 1, s, recompute)) for s in ("fused", "megatron"))
    assert b.step_ms > a.step_ms


def test_megatrons_cross_entropy_moves_each_fp32_logit_through_its_kernels():
    """Six kernels forward (cast, max, subtract, exp, sum, divide), two backward (scale, cast),
    each reading and writing the rank's logits: 38 and 14 bytes a logit, not one pass."""
    assert sum(MEGATRON_CROSS_ENTROPY_BYTES[False]) == 38
    assert sum(MEGATRON_CROSS_ENTROPY_BYTES[True]) == 14
    gpu = replace(GPUS["A100-80G"], launch_ms=0.0)
    logits = 1024 * 50257 / 2                       # a micro-batch's tokens x vocabulary / tp
    fwd = megatron_cross_entropy_ms(gpu, logits, False)
    assert len(fwd) == 6 and sum(fwd) == pytest.approx(38 * logits / gpu.mem_bw)
    assert len(megatron_cross_entropy_ms(gpu, logits, True, half=False)) == 1   # no cast
    program = chunk_program(_plan(2, 1, "megatron", "none"), 0)
    loss = [x for x in program["fwd"] if x[0] == "c"][-1][2][-6:]
    elements = 1 * 256 * 1000 / 2            # the plan's tokens x vocabulary over tp 2
    assert loss == pytest.approx(megatron_cross_entropy_ms(GPU, elements, False))


def test_an_unknown_softmax_setting_is_refused():
    with pytest.raises(PlanError, match="softmax must be one of fused, megatron"):
        Strategy(softmax="flash")
