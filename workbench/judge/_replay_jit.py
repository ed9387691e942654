"""The compiled (numba, ``cache=True``) longest-path kernel of :mod:`workbench.robustness`.

Imported only when a replay runs: importing numba costs about 0.1 s.

>>> import numpy as np
>>> from workbench.judge._replay_jit import replay
>>> # a -> b and a -> c, c after b on one device: b, c take 2 and 3 ms after a's 1 ms
>>> order = np.array([0, 1, 2]); indptr = np.array([0, 0, 1, 3]); preds = np.array([0, 0, 1])
>>> ms, end = replay(order, indptr, preds, np.array([[1.0, 2.0, 3.0]]), 3)
>>> ms.tolist(), end.tolist()
([6.0], [1.0, 3.0, 6.0])
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def replay(order, indptr, preds, dur, n_ops):  # pragma: no cover - compiled
    """Per draw ``s``: every node starts at the latest end of its predecessors (0 without any)
    and ends ``dur[s, node]`` later, nodes visited in the topological ``order``; returns the
    largest end over the first ``n_ops`` nodes per draw and the ends of the last draw."""
    n_draws, n_nodes = dur.shape
    end = np.zeros(n_nodes)
    out = np.zeros(n_draws)
    for s in range(n_draws):
        for i in order:
            t = 0.0
            for k in range(indptr[i], indptr[i + 1]):
                e = end[preds[k]]
                t = max(t, e)
            end[i] = t + dur[s, i]
        m = 0.0
        for i in range(n_ops):
            m = max(m, end[i])
        out[s] = m
    return out, end
