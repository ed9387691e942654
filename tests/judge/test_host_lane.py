"""The training judge's host lane: the host issues ops ahead of an asynchronous GPU."""

from __future__ import annotations

from dataclasses import replace

import pytest

from workbench.cluster import Cluster
from workbench.costs.llm import GPUS, parse_spec
from workbench.judge.training import chunk_program, simulate_training
from workbench.transforms.parallel import Strategy, parallelize

MODEL = parse_spec("gpt:layers=4,hidden=512,heads=8,seq=256,vocab=1000")


def _step(host_ms=0.0, floor_ms=0.0, **strategy):
    gpu = replace(GPUS["A100-80G"], launch_ms=0.0, op_floor_ms=floor_ms, host_op_ms=host_ms)
    s = Strategy(**{"mbs": 1, "global_batch": 4, **strategy})
    plan = parallelize(MODEL, Cluster.preset("8xA100-80g"), s, gpu=gpu)
    return plan, simulate_training(plan, record_links=False)


def _ops(plan) -> int:
    """Ops the host issues in one step (compute ops and collectives of every chunk)."""
    per_micro = sum(len(seg[2]) if seg[0] in "cr" else 1 for c in range(plan.n_chunks)
                    for seg in chunk_program(plan, c)["fwd"] + chunk_program(plan, c)["bwd"]
                    if seg[0] in "crx")
    return per_micro * plan.n_micro


def test_no_host_time_is_the_judge_without_a_lane():
    plan, plain = _step()
    assert _step(host_ms=0.0)[1].step_ms == plain.step_ms


def test_a_slow_host_sets_the_pace_of_small_ops():
    plan, r = _step(host_ms=1.0)                  # 1 ms to issue an op: far above any kernel
    _, gpu_only = _step()
    n = _ops(plan)
    assert n * 1.0 <= r.step_ms <= n * 1.0 + gpu_only.step_ms
    assert r.step_ms > 10 * gpu_only.step_ms


def test_the_host_overlaps_the_gpu_instead_of_adding_to_it():
    floor, host = 0.05, 0.04
    plan, r = _step(host_ms=host, floor_ms=floor, tp=2)
    _, gpu_only = _step(floor_ms=floor, tp=2)
    n = _ops(plan)
    assert r.step_ms >= gpu_only.step_ms                   # the GPU's work is all still there
    assert r.step_ms < gpu_only.step_ms + n * host / 4     # most host time is hidden
    assert r.step_ms == pytest.approx(gpu_only.step_ms + host, rel=0.05)


def test_pipeline_sends_make_the_host_wait_for_the_gpu():
    # Megatron synchronises host and GPU around each send: the host cannot run ahead into
    # the next micro-batch, so it pays its issue time again after every send
    host = 0.04
    _, no_pp = _step(host_ms=host, floor_ms=0.05, pp=1)
    _, free = _step(floor_ms=0.05, pp=2)
    _, lane = _step(host_ms=host, floor_ms=0.05, pp=2)
    assert lane.step_ms > free.step_ms + 4 * host
    assert no_pp.step_ms < _step(floor_ms=0.05, pp=1)[1].step_ms + 2 * host


def test_every_rank_simulated_agrees_with_one_rank_a_stage():
    plan, r = _step(host_ms=0.03, floor_ms=0.02, tp=2, pp=2, dp=2, global_batch=8)
    full = simulate_training(plan, ranks="all", record_links=False)
    assert full.step_ms == pytest.approx(r.step_ms, rel=1e-9)
    b = r.breakdown()
    assert sum(v for k, v in b.items() if k != "step") == pytest.approx(b["step"])
