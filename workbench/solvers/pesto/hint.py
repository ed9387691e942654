"""The warm start of the CP-SAT engine (:mod:`workbench.solvers.pesto.cpsat`) as an exact solution
of its model, and the runs of it that the model may fuse.

A simulated schedule is a float timeline; the model counts integer ticks with every duration
rounded down. :func:`integer_hint` re-times the schedule along its own decisions (device per
op, order per device, order per link) so that every constraint holds in ticks;
:func:`gapless_blocks` finds the runs of a coarsening group that the schedule executes back
to back, which the model turns into one interval per device.

Examples
--------
>>> from workbench import samples, Cluster, simulate, solve
>>> from workbench.solvers.pesto.hint import ranks
>>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
>>> sorted(ranks(simulate(solve(g, c, method="heft"), c)))
[0, 1, 2, 3]
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["gapless_blocks", "integer_hint", "ranks"]


def integer_hint(gc, hdev, hs, dur, classes, xfer, present, ticks, delay=None,
                 block_of=None, queue: bool = True) -> tuple:
    """The hint's schedule re-timed in the model's integer ticks.

    Flooring each float time of a simulated schedule on its own can break the model by a
    tick: a transfer that starts when the previous one on its link ends, at ``t1 + d1``,
    floors to ``floor(t1 + d1)``, which can lie below ``floor(t1) + floor(d1)``. Instead the
    hint keeps the simulated schedule's decisions (device per op, op order per device,
    transfer order per channel) and every item starts as early as those allow with the
    model's (floored) durations: a longest path over the order graph, so the hint is a
    solution of the model and its makespan is at most the simulated one's ticks.
    ``delay(u, ci, a, b)``: the ticks a consumer waits for class ``ci`` of ``u`` sent from
    ``a`` to ``b`` when transfers are plain delays (no transfer intervals).
    ``block_of``: op -> (head, offset per device) for the ops of fused runs, which move with
    their run's head (one item, its ops at fixed offsets). ``queue``: transfers of one
    channel follow each other (congestion modelled).

    ``hs``: per op its simulated ``(start, run rank)``.

    Returns ``(op start ticks per op, {transfer key: start ticks})``.
    """
    n = gc.n
    block_of = block_of or {}
    item = list(range(n))
    soff = [0] * n      # op start - its item's start
    ecorr = [0] * n     # op end - its item's end (<= 0)
    length = [dur[i][hdev[i]] for i in range(n)]
    run_len: dict = {}
    for v, (h, off) in block_of.items():
        run_len[h] = max(run_len.get(h, 0), off[hdev[h]] + dur[v][hdev[h]])
    for v, (h, off) in block_of.items():
        item[v] = h
        soff[v] = off[hdev[h]]
    for h, ln in run_len.items():
        length[h] = ln
    for v, (h, off) in block_of.items():
        ecorr[v] = soff[v] + dur[v][hdev[h]] - run_len[h]
    keys = list(present)
    nt = len(keys)
    kid = {k: n + j for j, k in enumerate(keys)}
    length += [xfer[k][3] for k in keys]
    deps: list = [[] for _ in range(n + nt)]
    when = [t for t, _ in hs] + [present[k] for k in keys]

    def op_dep(v, u, lag=0):  # op v starts after op u ends (+ lag)
        if item[v] != item[u]:
            deps[item[v]].append((item[u], lag + ecorr[u] - soff[v]))

    last: dict = {}
    for i in sorted(range(n), key=lambda i: hs[i]):
        if hdev[i] in last:
            op_dep(i, last[hdev[i]])
        last[hdev[i]] = i
    chan_last: dict = {}
    for j in sorted(range(nt), key=lambda j: (when[n + j], j)):
        key = keys[j]
        u = key[0]
        ch = ("up", key[3]) if key[2] == "up" else (
            ("down", key[3]) if key[2] == "down" else ("link", key[2], key[3]))
        deps[n + j].append((item[u], ecorr[u]))
        if key[2] == "down":
            up = kid.get((u, key[1], "up", hdev[u]))
            if up is not None:
                deps[n + j].append((up, 0))
        if queue and ch in chan_last:
            deps[n + j].append((chan_last[ch], 0))
        chan_last[ch] = n + j
    for u in range(n):
        for ci, (_, _, cons) in enumerate(classes[u]):
            a = hdev[u]
            for v in cons:
                op_dep(v, u)
                b = hdev[v]
                if b == a:
                    continue
                if delay is not None:
                    op_dep(v, u, delay(u, ci, a, b))
                    continue
                src = None
                for key in ((u, ci, a, b), (u, ci, "down", b)):
                    if key in kid:
                        src = kid[key]
                        break
                else:  # host mode, unstaged destination: the upload brings it
                    src = kid.get((u, ci, "up", a))
                if src is not None:
                    deps[item[v]].append((src, -soff[v]))
    # longest path in the order graph (Kahn); a cycle (zero-length ties) keeps floored times
    m_ = n + nt
    indeg = [0] * m_
    out: list = [[] for _ in range(m_)]
    for v in range(m_):
        for u, lag in deps[v]:
            out[u].append((v, lag))
            indeg[v] += 1
    start = [0] * m_
    queue = [v for v in range(m_) if indeg[v] == 0]
    seen = 0
    while queue:
        u = queue.pop()
        seen += 1
        end = start[u] + length[u]
        for v, lag in out[u]:
            if end + lag > start[v]:
                start[v] = end + lag
            indeg[v] -= 1
            if indeg[v] == 0:
                queue.append(v)
    if seen < m_:
        start = [ticks(t) for t in when]
        return start[:n], {k: start[kid[k]] for k in keys}
    return ([start[item[v]] + soff[v] for v in range(n)],
            {k: start[kid[k]] for k in keys})


def gapless_blocks(graph, hint, chains, rel_tol: float = 1e-9) -> list:
    """Runs of ``chains`` that ``hint`` executes back to back, as lists of op indices (>= 2).

    A chain (ops that share a device and keep their order) is cut before op ``b`` when the
    hint leaves its device idle before ``b`` or when an input of ``b`` from another device
    arrives after the run began: within a run every op then starts exactly when the one
    before it ends, so the run can be one interval with its ops at fixed offsets and the
    hint stays a solution (and no transfer loops from a run back into it).
    """
    if not chains or hint is None:
        return []
    st, en = np.asarray(hint.start).tolist(), np.asarray(hint.end).tolist()
    dev = np.asarray(hint.device).tolist()
    tol = rel_tol * max(1.0, float(hint.makespan))
    arrive: dict = {}
    for k in range(hint.n_transfers):
        u, b, te = int(hint.t_op[k]), int(hint.t_dst[k]), float(hint.t_end[k])
        arrive[u, b] = max(arrive.get((u, b), -math.inf), te)
    pred = graph.c.pred
    out = []
    for ch in chains:
        run = [ch[0]]
        for a, b in zip(ch, ch[1:]):
            head_t = st[run[0]]
            cut = st[b] > en[a] + tol or dev[a] != dev[b]
            if not cut:
                for u in pred[b]:
                    if dev[u] != dev[b]:
                        t_in = max(arrive.get((u, dev[b]), -math.inf),
                                   arrive.get((u, -1), -math.inf), en[u])
                        if t_in > head_t + tol:
                            cut = True
                            break
            if cut:
                if len(run) > 1:
                    out.append(run)
                run = [b]
            else:
                run.append(b)
        if len(run) > 1:
            out.append(run)
    return out


def ranks(schedule) -> list:
    """The order in which ``schedule`` started its ops (op index where it does not say)."""
    r = getattr(schedule, "run_rank", None)
    return list(range(len(schedule.start))) if r is None else np.asarray(r).tolist()
