"""Device boundaries for Celeritas: the fusion DP applied once more at device level.

The CPD-TOPO sequence of the fused graph is cut into at most one contiguous segment per
device, segment ``s`` on device ``s`` and within its memory, with the fewest bytes crossing
between segments. Adjusting Placement (``celeritas(anchor="segments")``) then starts each node
from its segment's device instead of the previous node's, so the boundaries fall where the
graph is thin rather than where a device's memory runs out (which cut residual blocks: two
tensors on one link).

Cost of a cut set: an edge from position ``a`` to ``b > a`` crosses when some boundary ``j``
has ``a < j <= b``; it is charged at the first such boundary, so adding boundary ``j`` after
boundary ``i`` costs the bytes of the edges with ``i <= a < j <= b``. With ``S[a][j]`` the bytes
from ``a`` to positions ``>= j`` and ``P[i][j] = sum_{a < i} S[a][j]`` this is
``P[j][j] - P[i][j]``; the DP over (boundary, segments used) costs ``O(K^2 k)`` for ``K`` nodes.

:func:`segment_devices_tensors` counts instead each tensor once per destination segment (a
tensor read by several fused nodes of one device travels there once); Celeritas uses it with
``boundaries="tensors"``. On the hard suite the two cuts give the same makespans on 10 of 12
pairs, the per-edge count is better on gnmt and the per-tensor one on rnnlm
(docs/results-celeritas.md); the fused graph's edges stay the default.

Examples
--------
>>> from workbench.solvers.celeritas.boundaries import segment_devices
>>> # a chain 0-1-2-3 with a thin edge 1->2: two devices of room for two nodes each
>>> segment_devices([0, 1, 2, 3], [(0, 1, 9.0), (1, 2, 1.0), (2, 3, 9.0)], [1, 1, 1, 1], [2, 2])
[0, 0, 1, 1]
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["segment_devices", "segment_devices_tensors"]


def segment_devices(seq, edges, memory, capacity) -> list[int] | None:
    """Device index per node (segment ``s`` -> device ``s``), or None when no cut fits.

    Parameters
    ----------
    seq : sequence of int
        Nodes in processing (CPD-TOPO) order; every edge goes forward in it.
    edges : iterable of (src, dst, bytes)
    memory : sequence of float
        Memory of each node.
    capacity : sequence of float
        Memory of each device, in the order segments are given to them.
    """
    K = len(seq)
    nd = len(capacity)
    if K == 0:
        return []
    pos = {v: p for p, v in enumerate(seq)}
    W = np.zeros((K, K + 1))
    for u, v, b in edges:
        a, c = pos[u], pos[v]
        if a < c:
            W[a, c] += b
        elif c < a:
            W[c, a] += b
    # S[a][j] = bytes from a to positions >= j ; P[i][j] = sum_{a < i} S[a][j]
    S = np.cumsum(W[:, ::-1], axis=1)[:, ::-1]
    P = np.vstack([np.zeros(K + 1), np.cumsum(S, axis=0)])
    def cost(ii, j):  # boundary at j (none at the end) charged given the previous boundary i
        return np.zeros(j) if j == K else P[j][j] - P[ii, j]

    return _segments(seq, memory, capacity, cost)


def segment_devices_tensors(seq, tensors, memory, capacity) -> list[int] | None:
    """As :func:`segment_devices`, but the cost counts each tensor once per destination
    segment: ``tensors`` is an iterable of ``(src, consumers, bytes)`` (a tensor read by
    several nodes of one later segment travels to that device once, as in the simulator).

    The cost of segment ``[i, j)`` is ``T[i][j]``, the bytes of the tensors made before ``i``
    with a consumer in ``[i, j)``; the DP over (end, segments used) is ``O(K^2 k)``.

    >>> # node 0 feeds 1 and 2 (4 bytes, one tensor); 1 -> 2 -> 3 carry 3 bytes each
    >>> t = [(0, [1, 2], 4.0), (1, [2], 3.0), (2, [3], 3.0)]
    >>> segment_devices_tensors([0, 1, 2, 3], t, [1, 1, 1, 1], [1, 3])
    [0, 1, 1, 1]
    """
    K = len(seq)
    nd = len(capacity)
    if K == 0:
        return []
    pos = {v: p for p, v in enumerate(seq)}
    # D[i][c + 1] += b: for a cut at i, the tensor's next consumer at or after i is c
    D = np.zeros((K + 1, K + 2))
    for u, consumers, b in tensors:
        a = pos[u]
        cs = sorted({pos[v] for v in consumers if pos[v] > a})
        lo = a + 1
        for c in cs:
            D[lo:c + 1, c + 1] += b
            lo = c + 1
    T = np.cumsum(D, axis=1)          # T[i][j]: tensors made before i, a consumer in [i, j)
    return _segments(seq, memory, capacity, lambda ii, j: T[ii, j])


def _segments(seq, memory, capacity, cost) -> list[int] | None:
    """The DP shared by both costs: at most one contiguous segment of ``seq`` per device, each
    within its device's memory, least total ``cost(ii, j)`` (an array over the starts ``ii``
    of a segment ending at ``j``); device per node, or None when no cover fits."""
    K = len(seq)
    nd = len(capacity)
    mem = np.concatenate([[0.0], np.cumsum([float(memory[v]) for v in seq])])
    INF = math.inf
    # best[s][j]: least cost with s segments covering positions [0, j); arg for the backtrack
    best = np.full((nd + 1, K + 1), INF)
    arg = np.full((nd + 1, K + 1), -1, dtype=np.int64)
    best[0][0] = 0.0
    for s in range(1, nd + 1):
        cap = capacity[s - 1] * (1 + 1e-12)
        for j in range(1, K + 1):
            # segment [i, j) on device s-1: fits in memory; boundary at i (none when i == 0)
            ii = np.arange(0, j)
            ok = (mem[j] - mem[ii] <= cap) & np.isfinite(best[s - 1][ii])
            if not ok.any():
                continue
            c_ = np.where(ok, best[s - 1][ii] + cost(ii, j), INF)
            k_ = int(np.argmin(c_))
            if math.isfinite(c_[k_]):
                best[s][j] = c_[k_]
                arg[s][j] = k_
    # the cheapest s with a cover of all K positions
    s_best = min(range(1, nd + 1), key=lambda s: (best[s][K], s))
    if not math.isfinite(best[s_best][K]):
        return None
    out = [0] * K
    j, s = K, s_best
    while s > 0:
        i = int(arg[s][j])
        for p in range(i, j):
            out[p] = s - 1
        j, s = i, s - 1
    res = [0] * K
    for p, v in enumerate(seq):
        res[v] = out[p]
    return res
