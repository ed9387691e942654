"""Tests of the device-level boundaries of Celeritas (workbench/solvers/celeritas_boundaries.py)."""

from __future__ import annotations

import itertools
import random

import pytest

from workbench import Cluster, SolverError, samples, simulate, solve
from workbench.solvers.celeritas.boundaries import segment_devices, segment_devices_tensors


def _cut(seq, edges, dev):
    return sum(b for u, v, b in edges if dev[u] != dev[v])


def _brute_force(K, nd, mem, cap, cut):
    """Least ``cut(dev)`` over every way to cut K nodes into s <= nd contiguous non-empty
    segments within memory (None when none fits)."""
    best = None
    for s in range(1, nd + 1):
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
                c = cut(dev)
                best = c if best is None else min(best, c)
    return best


def test_dp_matches_brute_force_on_random_chains():
    rng = random.Random(0)
    for _ in range(60):
        K, nd = rng.randint(1, 7), rng.randint(1, 3)
        edges = [(u, v, float(rng.randint(1, 9))) for u in range(K) for v in range(u + 1, K)
                 if rng.random() < 0.4]
        mem = [float(rng.randint(1, 4)) for _ in range(K)]
        cap = [float(rng.randint(3, 9)) for _ in range(nd)]
        got = segment_devices(list(range(K)), edges, mem, cap)
        best = _brute_force(K, nd, mem, cap, lambda dev: _cut(None, edges, dev))
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
    assert p.stats.get("solver_status", p.status) == "heuristic" and len(p.devices_used()) >= 3
    assert simulate(p, c).makespan > 0


def _tensor_cut(tensors, dev):
    """Bytes received per device, each tensor once per destination device."""
    return sum(b * len({dev[v] for v in cs} - {dev[u]}) for u, cs, b in tensors)


def test_tensor_dp_matches_brute_force_on_random_chains():
    rng = random.Random(1)
    for _ in range(60):
        K, nd = rng.randint(1, 7), rng.randint(1, 3)
        tensors = []
        for u in range(K - 1):
            for _ in range(rng.randint(0, 2)):
                cs = sorted(rng.sample(range(u + 1, K), rng.randint(1, min(3, K - u - 1))))
                tensors.append((u, cs, float(rng.randint(1, 9))))
        mem = [float(rng.randint(1, 4)) for _ in range(K)]
        cap = [float(rng.randint(3, 9)) for _ in range(nd)]
        got = segment_devices_tensors(list(range(K)), tensors, mem, cap)
        best = _brute_force(K, nd, mem, cap, lambda dev: _tensor_cut(tensors, dev))
        if best is None:
            assert got is None
        else:
            assert got is not None and _tensor_cut(tensors, got) == best
            assert got == sorted(got)


def test_tensor_cost_counts_a_tensor_once_per_device():
    # node 0's 5-byte tensor is read by nodes 2 and 3 (one tensor, two fused edges);
    # 0 -> 1 carries 1 byte, 2 -> 3 carries 3. Two devices of room for three nodes each.
    tensors = [(0, [2, 3], 5.0), (0, [1], 1.0), (2, [3], 3.0)]
    edges = [(0, 2, 5.0), (0, 3, 5.0), (0, 1, 1.0), (2, 3, 3.0)]
    seq, mem, cap = [0, 1, 2, 3], [1.0] * 4, [3.0, 3.0]
    # per fused edge: cut at 1 = 5 + 5 + 1 = 11, at 2 = 5 + 5 = 10, at 3 = 5 + 3 = 8
    assert segment_devices(seq, edges, mem, cap) == [0, 0, 0, 1]
    # per tensor and device: at 1 = 5 + 1 = 6, at 2 = 5 (the tensor goes to device 1 once)
    assert segment_devices_tensors(seq, tensors, mem, cap) == [0, 0, 1, 1]


def test_celeritas_boundary_cost_options():
    g = samples.inception(300, ccr=1.5)
    c = Cluster.preset("4xV100-nvlink").with_memory(g.total_memory() * 0.4)
    for cost in ("edges", "tensors"):
        p = solve(g, c, method="celeritas", anchor="segments", boundaries=cost)
        # the method's own status (the live judge may add out_of_memory, issue 42)
        assert p.stats.get("solver_status", p.status) == "heuristic"
        assert simulate(p, c).makespan > 0
    with pytest.raises(SolverError, match="boundaries must be"):
        solve(g, c, method="celeritas", anchor="segments", boundaries="links")
