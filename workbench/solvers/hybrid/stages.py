"""The stage-splitting dynamic program of Tarnawski et al. on a transformer's op chain, and
where a chain may be cut: shared by :mod:`.tarnawski` (cuts at op granularity) and
:func:`.megatron.megatron` with ``layout=True`` (cuts at block boundaries).

Examples
--------
>>> import numpy as np
>>> from workbench.solvers.hybrid.costs import OpVectors
>>> v = OpVectors(np.array([2., 1., 1.]), np.zeros(3), np.zeros(3), np.zeros(3), 0.)
>>> stage_split(v, pp=2, n_micro=2, capacity=1e9, per_param=16.)
(6.0, [0, 1])
"""

from __future__ import annotations

import numpy as np

__all__ = ["cut_points", "stage_split"]


def stage_split(vectors, *, pp: int, n_micro: int, capacity: float, per_param: float,
                virtual: int = 1, cut_ok=None, send_ms=None) -> tuple[float, list] | None:
    """Tarnawski et al.'s DP on a chain: the cuts (``[0, c1, ...]``, ``pp x virtual``
    chunks) with every stage in memory and the least objective; ``(objective, cuts)``, or None
    when no split fits.

    One chunk a stage (1F1B): stage ``k`` holds ``min(pp - k, n_micro)`` stashes, and the
    objective is the pipeline's ``max_k (S_k + m w_k)`` (``S_k`` the work before stage ``k``,
    ``w_k`` its own -- the quantity :mod:`.bound` bounds: earlier stages wait less, so they may
    take more). Interleaved (``virtual > 1``, chunk ``c`` on stage ``c mod pp``): the largest
    chunk's work, each chunk held to ``1 / virtual`` of the memory with ``min(pp, n_micro)``
    stashes. ``cut_ok[j]``: a chunk may start at op ``j``; ``send_ms[j]``: the time of the
    activation sent across a cut at ``j`` (added to both chunks beside it).

    >>> import numpy as np
    >>> from workbench.solvers.hybrid.costs import OpVectors
    >>> v = OpVectors(np.array([1., 1., 1., 3.]), np.zeros(4), np.zeros(4), np.zeros(4), 0.)
    >>> stage_split(v, pp=2, n_micro=4, capacity=1e9, per_param=16.)
    (15.0, [0, 3])
    >>> stage_split(v, pp=2, n_micro=4, capacity=1e9, per_param=16., virtual=2)
    (3.0, [0, 1, 2, 3])
    """
    n = len(vectors.work)
    n_chunks = pp * virtual
    if n_chunks > n:
        return None
    m = n_micro
    P = np.concatenate([[0.0], np.cumsum(vectors.work)])
    S = np.concatenate([[0.0], np.cumsum(vectors.params)])
    A = np.concatenate([[0.0], np.cumsum(vectors.stash)])
    send = np.zeros(n + 1) if send_ms is None else np.asarray(send_ms, dtype=float)
    w = P[None, :] - P[:, None] + send[:, None] + send[None, :]
    static = (S[None, :] - S[:, None]) * per_param
    stash = A[None, :] - A[:, None]
    ok_pos = np.ones(n + 1, dtype=bool) if cut_ok is None else np.asarray(cut_ok, dtype=bool)
    ok_pos[0] = ok_pos[n] = True
    upper = np.triu(np.ones((n + 1, n + 1), dtype=bool), 1) & ok_pos[:, None] & ok_pos[None, :]
    best = np.full(n + 1, np.inf)
    best[0] = 0.0
    back = []
    cols = np.arange(n + 1)
    for k in range(n_chunks):
        if virtual == 1:
            mem = static + min(pp - k, m) * stash + vectors.transient
            val = np.maximum(best[:, None], P[:, None] + m * w)
        else:
            mem = virtual * (static + min(pp, m) * stash) + vectors.transient
            val = np.maximum(best[:, None], w)
        val = np.where(upper & (mem <= capacity), val, np.inf)
        arg = val.argmin(axis=0)
        best = val[arg, cols]
        back.append(arg)
    if not np.isfinite(best[n]):
        return None
    cuts, j = [], n
    for k in range(n_chunks - 1, -1, -1):
        j = int(back[k][j])
        cuts.append(j)
    return float(best[n]), cuts[::-1]


def cut_points(plan, vec) -> tuple:
    """Where a chunk may start (after an op whose output is no larger than a block's
    activation: never inside the attention matrices) and what crossing there costs."""
    from ...judge.collectives import p2p_ms

    s = plan.strategy
    link = plan.cluster.inter_host if s.tp * s.dp >= 8 else plan.cluster.intra_host
    n = len(vec.out)
    ok = np.zeros(n + 1, dtype=bool)
    send = np.zeros(n + 1)
    most = np.array([(o.resid + o.carry) / s.tp for o in plan.ops])
    ok[1:] = vec.out <= most * (1 + 1e-9)
    send[1:n] = [p2p_ms(b, link) for b in vec.out[:-1]]
    return ok, send
