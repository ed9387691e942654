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
                virtual: int = 1, cut_ok=None, send_ms=None, alternatives=()):
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

    ``alternatives`` (1F1B; an extension, named as such: **per-stage recomputation**): other
    costings of the same chain (each a recomputation setting's :class:`.costs.OpVectors`);
    each stage then takes the costing that minimises the objective within its memory, the DP
    charging every stage its own choice exactly (its work, stash and recomputed bytes;
    ``S_k`` is counted with ``vectors``' work, the lightest). Returns ``(objective, cuts,
    choice)``, ``choice[k]`` the index of stage ``k``'s costing (0: ``vectors``).

    >>> import numpy as np
    >>> from workbench.solvers.hybrid.costs import OpVectors
    >>> v = OpVectors(np.array([1., 1., 1., 3.]), np.zeros(4), np.zeros(4), np.zeros(4), 0.)
    >>> stage_split(v, pp=2, n_micro=4, capacity=1e9, per_param=16.)
    (15.0, [0, 3])
    >>> stage_split(v, pp=2, n_micro=4, capacity=1e9, per_param=16., virtual=2)
    (3.0, [0, 1, 2, 3])
    >>> big = OpVectors(v.work, v.params, np.full(4, 10.), v.out, 0.)     # stashes 10 B an op
    >>> light = OpVectors(1.5 * v.work, v.params, np.ones(4), v.out, 0.)  # recomputed
    >>> stage_split(big, pp=2, n_micro=4, capacity=25., per_param=16., alternatives=[light])
    (18.0, [0, 2], [1, 0])
    """
    n = len(vectors.work)
    n_chunks = pp * virtual
    if n_chunks > n:
        return None
    m = n_micro
    modes = [vectors] + (list(alternatives) if virtual == 1 else [])
    P = np.concatenate([[0.0], np.cumsum(vectors.work)])
    S = np.concatenate([[0.0], np.cumsum(vectors.params)])
    send = np.zeros(n + 1) if send_ms is None else np.asarray(send_ms, dtype=float)
    static = (S[None, :] - S[:, None]) * per_param
    ok_pos = np.ones(n + 1, dtype=bool) if cut_ok is None else np.asarray(cut_ok, dtype=bool)
    ok_pos[0] = ok_pos[n] = True
    upper = np.triu(np.ones((n + 1, n + 1), dtype=bool), 1) & ok_pos[:, None] & ok_pos[None, :]
    costs = []
    for v in modes:
        Pv = np.concatenate([[0.0], np.cumsum(v.work)])
        A = np.concatenate([[0.0], np.cumsum(v.stash)])
        costs.append((Pv[None, :] - Pv[:, None] + send[:, None] + send[None, :],
                      A[None, :] - A[:, None], v.transient))
    best = np.full(n + 1, np.inf)
    best[0] = 0.0
    back, picks = [], []
    cols = np.arange(n + 1)
    for k in range(n_chunks):
        val, pick = None, None
        for i, (w, stash, transient) in enumerate(costs):
            if virtual == 1:
                mem = static + min(pp - k, m) * stash + transient
                cand = np.maximum(best[:, None], P[:, None] + m * w)
            else:
                mem = virtual * (static + min(pp, m) * stash) + transient
                cand = np.maximum(best[:, None], w)
            cand = np.where(upper & (mem <= capacity), cand, np.inf)
            if val is None:
                val, pick = cand, np.zeros(cand.shape, dtype=int)
            else:
                better = cand < val
                val, pick = np.where(better, cand, val), np.where(better, i, pick)
        arg = val.argmin(axis=0)
        best = val[arg, cols]
        back.append(arg)
        picks.append(pick[arg, cols])
    if not np.isfinite(best[n]):
        return None
    cuts, choice, j = [], [], n
    for k in range(n_chunks - 1, -1, -1):
        choice.append(int(picks[k][j]))
        j = int(back[k][j])
        cuts.append(j)
    if alternatives:
        return float(best[n]), cuts[::-1], choice[::-1]
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
