"""The lower bound over plans of per-stage widths (the paper's replication and the stage_tp
extension): below the judged step of every such plan of tiny cases, brute force, and the gap
tarnawski prints covers its whole space."""

import itertools
import math

import numpy as np
import pytest

from workbench.cluster import Cluster, Device
from workbench.errors import PlanError
from workbench.judge.training import simulate_training
from workbench.solvers.hybrid import megatron, tarnawski
from workbench.solvers.hybrid.bound import bubble_factor, fill_capacity, widths_bound
from workbench.transforms.parallel import Strategy, parallelize


def test_fill_capacity_holds_for_every_pipeline_of_the_widths():
    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(2, 17))
        widths = sorted({int(x) for x in rng.integers(1, n + 1, size=int(rng.integers(1, 5)))})
        m = int(rng.integers(1, 9))
        # a random pipeline: stage widths from the set, at most n GPUs, y_k within T = 1
        g, total = [], 0
        while True:
            w = int(rng.choice(widths))
            if total + w > n or len(g) >= 6:
                break
            g.append(w)
            total += w
        if not g:
            continue
        y, before = [], 0.0
        for _k in g:
            y.append(rng.uniform(0.5, 1.0) * (1.0 - before) / m)
            before += y[-1]
        assert sum(a * b for a, b in zip(g, y)) <= fill_capacity(set(widths), m, n) + 1e-12
    # equal stages, each as loaded as it may be: the bubble factor, reached
    assert 2 / fill_capacity({2}, 4, 8) == pytest.approx(bubble_factor(4, 4))


def _tiny(seed):
    rng = np.random.default_rng(seed)
    spec = (f"llama:layers={int(rng.choice([2, 3]))},hidden={int(rng.choice([128, 256]))},"
            f"heads=4,seq={int(rng.choice([64, 256]))},vocab={int(rng.choice([1000, 32000]))}")
    n = int(rng.choice([4, 6]))
    per_host = int(rng.choice([2, 4]))
    cl = Cluster([Device(f"g{i}", memory=80e9, host=f"n{i // per_host}") for i in range(n)],
                 name="tiny")
    return spec, cl, int(rng.choice([6, 12]))


@pytest.mark.parametrize("seed", [0, 1, 4, 6])
def test_the_bound_is_below_every_judged_plan_of_per_stage_widths(seed):
    spec, cl, gbs = _tiny(seed)
    n = len(cl.devices)
    paper = widths_bound(spec, cl, global_batch=gbs, gpu="A100-80G")
    extension = widths_bound(spec, cl, global_batch=gbs, gpu="A100-80G", stage_tp=True)
    assert 0 < extension <= paper < math.inf
    pairs = [(t, d) for t in (1, 2) for d in (1, 2, 3, 6)]
    rng = np.random.default_rng(seed)
    ops = len(parallelize(spec, cl, Strategy(global_batch=gbs), gpu="A100-80G").ops)
    judged = 0
    for pp in (2, 3):
        for widths in itertools.product(pairs, repeat=pp):
            if sum(t * d for t, d in widths) != n:
                continue
            dmax = max(d for _, d in widths)
            for micro, rec in itertools.product((x for x in (dmax, 2 * dmax)
                                                 if gbs % x == 0), ("none", "selective")):
                s = Strategy(pp=pp, mbs=micro // dmax, global_batch=gbs, recompute=rec,
                             zero=judged % 2, stage_widths=widths)
                for cuts in [None] + [sorted(rng.choice(np.arange(1, ops), pp - 1,
                                                        replace=False).tolist())
                                      for _ in range(2)]:
                    try:
                        plan = parallelize(spec, cl, s, gpu="A100-80G",
                                           cuts=None if cuts is None else [0] + cuts)
                    except PlanError:
                        continue
                    step = simulate_training(plan, record_links=False).step_ms
                    judged += 1
                    assert extension <= step
                    if len({t for t, _ in widths}) == 1:     # the paper's: one tp
                        assert paper <= step
    assert judged >= 40


def test_states_beyond_all_the_memory_make_it_infinite():
    cl = Cluster([Device(f"g{i}", memory=1e6, host="n0") for i in range(4)], name="tiny")
    assert widths_bound("gpt:layers=2,hidden=256,heads=4,seq=64,vocab=1000", cl,
                        global_batch=4, gpu="A100-80G") == math.inf


def test_tarnawski_prints_its_gap_over_plans_of_per_stage_widths_too():
    spec = "llama:layers=2,hidden=512,heads=8,seq=512,vocab=128000"
    node = Cluster.preset("8xA100-80g")
    m = megatron(spec, node, global_batch=24, gpus=4)
    uniform = tarnawski(spec, node, global_batch=24, gpus=4, baseline=m, replication=False)
    paper = tarnawski(spec, node, global_batch=24, gpus=4, baseline=m)
    assert uniform.bound <= m.bound      # the uniform space's bound, the same grid's least
    wb = widths_bound(spec, node, global_batch=24, gpus=4)
    assert paper.bound == min(uniform.bound, wb)
    # the head stage on three replicas (24 % faster than every uniform two-stage plan,
    # tests/training/test_per_stage_widths_judge.py) is above it too
    widths = simulate_training(parallelize(spec, node, Strategy(
        pp=2, mbs=2, global_batch=24, stage_widths=((1, 1), (1, 3))))).step_ms
    assert paper.bound <= widths and paper.gap >= 0


def test_a_plan_of_per_stage_widths_can_beat_the_uniform_grids_bound():
    """Why the uniform grid's bound is no certificate for tarnawski's space: on four 50 MB
    GPUs plans of per-stage widths (the second stage's three replicas running four or two
    sequences of each micro-batch: shares the grid's micro-batch sizes 1, 2, 4, 8 cannot give
    four replicas of 12 sequences) are judged below the least bound of every uniform
    strategy; the micro-batch of six is one :func:`.replication.replicate` tries."""
    spec = "llama:layers=3,hidden=128,heads=4,seq=64,vocab=1000"
    cl = Cluster([Device(f"g{i}", memory=50e6, host="n0") for i in range(4)], name="tiny")
    m = megatron(spec, cl, global_batch=12, gpu="A100-80G")
    uniform = tarnawski(spec, cl, global_batch=12, gpu="A100-80G", baseline=m,
                        replication=False)
    plan = parallelize(spec, cl, Strategy(pp=2, mbs=4, global_batch=12, zero=1,
                                          stage_widths=((1, 1), (1, 3))), gpu="A100-80G")
    r = simulate_training(plan)
    assert r.feasible and r.step_ms < 0.85 * min(m.bound, uniform.bound)
    six = simulate_training(parallelize(spec, cl, Strategy(
        pp=2, mbs=2, global_batch=12, zero=1, stage_widths=((1, 1), (1, 3))), gpu="A100-80G"))
    assert six.feasible and six.step_ms < min(m.bound, uniform.bound)
    paper = tarnawski(spec, cl, global_batch=12, gpu="A100-80G", baseline=m)
    assert paper.bound <= r.step_ms and paper.bound < uniform.bound
