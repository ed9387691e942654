"""The paper's replication in ``tarnawski`` against a brute force over the plans of per-stage
widths: on the case where the search used to miss a plan 1.5x as fast in its own space
(docs/results-hybrid.md, "The replication DP against brute force") and on random tiny ones,
the plan it returns is judged within 10 % of the best plan of a brute force over the stage
count, the widths, the micro-batch and the cuts at block boundaries."""

import itertools
import math

import numpy as np
import pytest

from workbench.cluster import Cluster, Device
from workbench.errors import PlanError
from workbench.judge.training import simulate_training
from workbench.solvers.hybrid import megatron, tarnawski
from workbench.transforms.parallel import Strategy, parallelize

TOLERANCE = 0.10
"""How far above the brute force's best the search's plan may be judged: the DP's closed
form (:func:`workbench.solvers.hybrid.replication.replication_split`) is exact for its own
objective, not for the judge, which also charges the sends on the 1F1B dependency path and
the later stages' gradient synchronisation where the drain does not hide it; the 5 best
splits by that objective are judged (docs/results-hybrid.md)."""


def _brute(spec, cl, gbs):
    """The least judged step over 2 or 3 stages of one tp (1 or 2) and 1, 2, 3, 4 or 6
    replicas each on at most the cluster's GPUs, every micro-batch the replicas divide,
    ZeRO 0 or 1, cuts at block boundaries (and the default split); no recomputation."""
    n = len(cl.devices)
    ops = parallelize(spec, cl, Strategy(global_batch=gbs), gpu="A100-80G").ops
    blocks = [i for i in range(1, len(ops)) if ops[i].layer != ops[i - 1].layer]
    best = math.inf
    for pp, t in itertools.product((2, 3), (1, 2)):
        for ds in itertools.product((1, 2, 3, 4, 6), repeat=pp):
            if t * sum(ds) > n:
                continue
            dmax = max(ds)
            for micro, zero in itertools.product(
                    [x for x in range(dmax, gbs + 1, dmax) if gbs % x == 0], (0, 1)):
                s = Strategy(pp=pp, mbs=micro // dmax, global_batch=gbs, zero=zero,
                             stage_widths=tuple((t, d) for d in ds))
                for cuts in [None] + [[0, *c] for c in itertools.combinations(blocks, pp - 1)]:
                    try:
                        plan = parallelize(spec, cl, s, gpu="A100-80G", cuts=cuts)
                    except PlanError:
                        continue
                    r = simulate_training(plan, record_links=False)
                    if r.feasible:
                        best = min(best, r.step_ms)
    return best


def _case(seed):
    if seed < 0:          # the counterexample of test_widths_bound.py
        return ("llama:layers=3,hidden=128,heads=4,seq=64,vocab=1000",
                Cluster([Device(f"g{i}", memory=50e6, host="n0") for i in range(4)],
                        name="tiny"), 12)
    rng = np.random.default_rng(seed)
    spec = (f"llama:layers={int(rng.choice([2, 3]))},hidden={int(rng.choice([128, 256]))},"
            f"heads=4,seq={int(rng.choice([64, 256]))},vocab={int(rng.choice([1000, 32000]))}")
    n = int(rng.choice([4, 6]))
    mem = float(rng.choice([50e6, 200e6, 80e9]))
    cl = Cluster([Device(f"g{i}", memory=mem, host=f"n{i // 4}") for i in range(n)],
                 name="tiny")
    return spec, cl, int(rng.choice([6, 12]))


@pytest.mark.parametrize("seed", [-1, 2, 5, 9])
def test_the_search_is_within_tolerance_of_the_brute_force(seed):
    spec, cl, gbs = _case(seed)
    m = megatron(spec, cl, global_batch=gbs, gpu="A100-80G")
    h = tarnawski(spec, cl, global_batch=gbs, gpu="A100-80G", baseline=m)
    best = min(_brute(spec, cl, gbs), m.step_ms)
    assert h.step_ms == simulate_training(h.plan).step_ms
    assert h.step_ms <= (1 + TOLERANCE) * best
    if seed < 0:          # the plan the search used to miss (1x1 / 1x3, six sequences)
        missed = simulate_training(parallelize(spec, cl, Strategy(
            pp=2, mbs=2, global_batch=12, zero=1, stage_widths=((1, 1), (1, 3))),
            gpu="A100-80G")).step_ms
        assert h.step_ms < missed
