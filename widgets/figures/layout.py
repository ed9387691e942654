"""Layered (Sugiyama-style) layout of a DAG computed with numpy: no graphviz.

Layers are longest-path levels from the sources; the order inside a layer is refined by a few
barycenter sweeps (alternately towards predecessors and successors), all vectorised.

Examples
--------
>>> import numpy as np
>>> x, y, layer = layered_layout(4, np.array([0, 0, 1, 2]), np.array([1, 2, 3, 3]))
>>> layer.tolist()
[0, 1, 1, 2]
>>> x.tolist(), sorted(y[[1, 2]].tolist())
([0.0, 1.0, 1.0, 2.0], [-0.5, 0.5])
"""

from __future__ import annotations

from collections import deque

import numpy as np

__all__ = ["auto_wrap", "layered_layout", "topological_positions", "wrap_layers"]


def topological_positions(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Position of every node in a topological order (Kahn, lowest index first among ties).

    Nodes on a cycle, which a DAG never has but a careless contraction may create, are placed
    after the others in index order rather than raising.

    >>> topological_positions(3, np.array([2, 1]), np.array([1, 0])).tolist()
    [2, 1, 0]
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if len(src) == 0 or bool(np.all(src < dst)):
        return np.arange(n)
    indeg = np.bincount(dst, minlength=n)
    order_e = np.argsort(src, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    succ_sorted = dst[order_e].tolist()
    ptr_l = ptr.tolist()
    indeg_l = indeg.tolist()
    queue = deque(i for i in range(n) if indeg_l[i] == 0)
    pos = [-1] * n
    k = 0
    while queue:
        i = queue.popleft()
        pos[i] = k
        k += 1
        for j in succ_sorted[ptr_l[i]:ptr_l[i + 1]]:
            indeg_l[j] -= 1
            if indeg_l[j] == 0:
                queue.append(j)
    for i in range(n):
        if pos[i] < 0:
            pos[i] = k
            k += 1
    return np.array(pos, dtype=np.int64)


def _rank_within(layer: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Rank of every node inside its layer when sorted by ``key`` (stable)."""
    order = np.lexsort((key, layer))
    rank = np.empty(len(layer), dtype=np.int64)
    lay_sorted = layer[order]
    starts = np.r_[0, np.flatnonzero(np.diff(lay_sorted)) + 1]
    counts = np.diff(np.r_[starts, len(order)])
    rank[order] = np.arange(len(order)) - np.repeat(starts, counts)
    return rank


def layered_layout(n: int, src, dst, *, sweeps: int = 4) -> tuple[np.ndarray, np.ndarray,
                                                                  np.ndarray]:
    """Coordinates of a layered drawing: ``x`` = layer, ``y`` = centred position in the layer.

    Parameters
    ----------
    n : int
        Number of nodes.
    src, dst : array of int
        Edge endpoints (node indices).
    sweeps : int
        Barycenter refinement passes (each pass is one vectorised numpy step).

    Returns
    -------
    x, y : ndarray of float
    layer : ndarray of int
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if n == 0:
        return np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64)
    pos = topological_positions(n, src, dst)
    forward = pos[src] < pos[dst]
    s, d = src[forward], dst[forward]
    # longest-path layering: process edges by the topological position of their head
    order = np.argsort(pos[d], kind="stable")
    layer_l = [0] * n
    for a, b in zip(s[order].tolist(), d[order].tolist()):
        la = layer_l[a] + 1
        if la > layer_l[b]:
            layer_l[b] = la
    layer = np.array(layer_l, dtype=np.int64)
    rank = _rank_within(layer, pos.astype(float))
    indeg = np.bincount(d, minlength=n)
    outdeg = np.bincount(s, minlength=n)
    for k in range(max(0, sweeps)):
        if k % 2 == 0:   # towards predecessors
            tot = np.bincount(d, weights=rank[s], minlength=n)
            bary = np.where(indeg > 0, tot / np.maximum(indeg, 1), rank)
        else:            # towards successors
            tot = np.bincount(s, weights=rank[d], minlength=n)
            bary = np.where(outdeg > 0, tot / np.maximum(outdeg, 1), rank)
        rank = _rank_within(layer, bary + 1e-6 * rank)
    width = np.bincount(layer)
    y = rank - (width[layer] - 1) / 2.0
    return layer.astype(float), y.astype(float), layer


def wrap_layers(x: np.ndarray, y: np.ndarray, layer: np.ndarray,
                per_band: int) -> tuple[np.ndarray, np.ndarray]:
    """Fold a deep drawing into bands of ``per_band`` layers stacked top to bottom (reading
    order: left to right, then the next band), so long chains stay legible.

    >>> x, y = wrap_layers(np.arange(5.0), np.zeros(5), np.arange(5), 2)
    >>> x.tolist(), y.tolist()
    ([0.0, 1.0, 0.0, 1.0, 0.0], [0.0, 0.0, -2.0, -2.0, -4.0])
    """
    layer = np.asarray(layer, dtype=np.int64)
    if per_band <= 0 or len(layer) == 0 or layer.max() < per_band:
        return np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    y = np.asarray(y, dtype=float)
    height = float(y.max() - y.min()) + 2.0
    band = layer // per_band
    return (layer % per_band).astype(float), y - band * height


def auto_wrap(y: np.ndarray, layer: np.ndarray, *, aspect: float = 2.0,
              min_layers: int = 40) -> int:
    """Layers per band that make a deep, narrow drawing about ``aspect`` times wider than
    tall; 0 (no wrapping) when the drawing is not much deeper than it is wide.

    >>> auto_wrap(np.zeros(200), np.arange(200))
    29
    >>> auto_wrap(np.zeros(10), np.arange(10))
    0
    """
    if len(layer) == 0:
        return 0
    depth = int(np.max(layer)) + 1
    height = float(np.max(y) - np.min(y)) + 2.0
    if depth <= min_layers or depth <= 3 * aspect * height:
        return 0
    per_band = int(np.ceil(np.sqrt(aspect * depth * height)))
    return per_band if per_band < depth else 0
