"""Tests of the device-level boundaries of Celeritas (workbench/solvers/celeritas_boundaries.py)."""

from __future__ import annotations

import itertools
import random

from workbench import Cluster, samples, simulate, solve
from workbench.solvers.celeritas_boundaries import segment_devices


def _cut(seq, edges, dev):
    return sum(b for u, v, b in edges if dev[u] != dev[v])


def test_dp_matches_brute_force_on_random_chains():
    rng = random.Random(0)
    for _ in range(60):
        K, nd = rng.randint(1, 7), rng.randint(1, 3)
        edges = [(u, v, float(rng.randint(1, 9))) for u in range(K) for v in range(u + 1, K)
                 if rng.random() < 0.4]
        mem = [float(rng.randint(1, 4)) for _ in range(K)]
        cap = [float(rng.randint(3, 9)) for _ in range(nd)]
        got = segment_devices(list(range(K)), edges, mem, cap)
        best = None
        for s in range(1, nd + 1):  # every way to cut into s contiguous non-empty segments
            for cuts in itertools.combinations(range(1, K), s - 1):
                bounds = (0, *cuts, K)
                dev = [0] * K
                ok = True
                for d in range(s):
                    a, b = bounds[d], bounds[d + 1]
                    ok &= sum(mem[a:b]) <= cap[d]
                    for p in range(a, b):
                        dev[p] = d
                if ok:
                    c = _cut(None, edges, dev)
                    best = c if best is None else min(best, c)
        if best is None:
            assert got is None
        else:
            assert got is not None and _cut(None, edges, got) == best
            for d in range(nd):
                assert sum(m for m, x in zip(mem, got) if x == d) <= cap[d]
            assert got == sorted(got)  # contiguous, device s after device s - 1


def test_celeritas_with_segment_anchor_respects_memory():
    g = samples.inception(300, ccr=1.5)
    c = Cluster.preset("4xV100-nvlink").with_memory(g.total_memory() * 0.4)
    p = solve(g, c, method="celeritas", anchor="segments")
    assert p.status == "heuristic" and len(p.devices_used()) >= 3
    assert simulate(p, c).makespan > 0
