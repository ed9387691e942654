"""The DP over ideals for the GPipe objective (Tarnawski et al., Appendix A).

Under a GPipe schedule all forward passes of a batch run, pipelined, before all backward
passes, so the time per sample is ``max_i FW_i + max_i BW_i`` rather than PipeDream's
``max_i (FW_i + BW_i)`` (the objective of :func:`~workbench.solvers.pipeline.dp.dp`). The sum of
two maxima does not decompose like one maximum, so every DP state ``(a, b, I)`` keeps the
*Pareto front* of the pairs (largest forward load, largest backward load) reachable with ``a``
accelerators and ``b`` CPUs on ideal ``I``; a new stage maps each pair to the componentwise
maximum with its own loads, dominated pairs are dropped, and the answer is the smallest
``F + B`` at the full ideal. This is exact over the same contiguous splits as ``dp`` (the
forward part split into ideals, backward ops following their colour class).

A stage's forward (backward) load is the compute of its forward (backward) ops plus the
transfers of tensors produced by forward (backward) ops, combined as ``interleave`` says
(Appendix C.1); :func:`workbench.judge.pipelined.pipelined_time` with ``objective="gpipe"`` is the judge.
Written in Python for clarity (fronts have variable size): meant for lattices of up to about a
thousand ideals; larger ones are refused with a SolverError naming the count.

Examples
--------
>>> from workbench import samples, solve
>>> from workbench.cluster import Cluster, Device, Link
>>> from workbench.judge.pipelined import pipelined_time
>>> g = samples.to_training(samples.random_dag(6, edge_prob=0.4, seed=1))
>>> c = Cluster([Device("gpu0"), Device("gpu1"), Device("cpu0", "cpu")], mode="host",
...             host_link=Link(0.0, 1e7))
>>> p = solve(g, c, method="dp", objective="gpipe")
>>> abs(p.predicted["time_per_sample_ms"] - pipelined_time(p, c, objective="gpipe")) < 1e-9
True
>>> p.predicted["time_per_sample_ms"] <= pipelined_time(solve(g, c, method="dp"), c,
...                                                     objective="gpipe") + 1e-9
True
"""

from __future__ import annotations

import time

import numpy as np

from ...budget import Budget
from ...errors import InfeasibleError, TimeLimitError
from ...costs.pipeline_costs import transfer_tiers
from ...plan import Plan
from .contraction import contract_for_dp, device_kinds
from .ideals import enumerate_ideals
from .kernel import interleave_mode

__all__ = ["solve_gpipe"]


def _combine(mode: int, p: float, i: float, o: float) -> float:
    return (p + i + o, max(p, i + o), max(p, i, o))[mode]


def _pareto(points: list) -> list:
    """Nondominated (F, B, ...) tuples, sorted by F."""
    out: list = []
    for pt in sorted(points, key=lambda x: (x[0], x[1])):
        if not out or pt[1] < out[-1][1]:
            out.append(pt)
    return out


def solve_gpipe(graph, cluster, *, interleave=False, max_ideals: int = 1_000,
                time_limit=None, method: str = "dp") -> Plan:
    """Split minimising ``max FW + max BW`` (see the module text). ``time_limit``: seconds or a
    :class:`~workbench.budget.Budget`; TimeLimitError when it runs out (the DP over Pareto
    fronts has no complete split before its last ideal)."""
    t0 = time.perf_counter()
    budget = Budget.of(time_limit, name=method)
    mode = interleave_mode(interleave)
    _kind, acc_devs, cpu_devs, cap = device_kinds(cluster)
    K, L = len(acc_devs), len(cpu_devs)
    p = contract_for_dp(graph, cluster)
    ideals = enumerate_ideals(p.pred, p.succ, limit=max_ideals)
    gc, cc = graph.c, cluster.c
    n, N = gc.n, len(ideals)
    bwd = np.isin(gc.op_kind, [1, 2])
    times = cluster.op_times(graph)
    pays = cc.staged if cc.host_mode else np.ones(cc.n, dtype=bool)
    tiers = [(u, np.array(cons, dtype=np.int64), c, int(bwd[u]))
             for u, cons, c in transfer_tiers(graph, cluster)]
    members = [np.array(m, dtype=np.int64) for m in p.members]

    def loads(S: int, d: int):
        """(forward, backward) load of supernode set S on device d, or None if it cannot."""
        mask = np.zeros(n, dtype=bool)
        for s in range(p.n):
            if (S >> s) & 1:
                mask[members[s]] = True
        t = times[mask, d]
        if not np.isfinite(t).all():
            return None
        if cluster.devices[d].kind != "cpu" and float(gc.memory[mask].sum()) > cap * (1 + 1e-12):
            return None
        comp = [float(t[~bwd[mask]].sum()), float(t[bwd[mask]].sum())]
        cin, cout = [0.0, 0.0], [0.0, 0.0]
        if pays[d]:
            for u, cons, c, ph in tiers:
                inside = mask[cons]
                if mask[u]:
                    if not inside.all():
                        cout[ph] += c
                elif inside.any():
                    cin[ph] += c
        return tuple(_combine(mode, comp[x], cin[x], cout[x]) for x in (0, 1))

    # front[(a, b, I)]: list of (F, B, parent state, parent point index, stage)
    front: dict = {(a, b, 0): [(0.0, 0.0, None, -1, None)] for a in range(K + 1)
                   for b in range(L + 1)}
    pairs = 0
    for i in range(1, N):
        if budget.over():
            raise TimeLimitError(f"{method}: the GPipe DP ran out of its time limit "
                                 f"({budget.limit:.3g} s) after {i:,} of {N:,} ideals")
        I = ideals[i]
        subs = [j for j in range(i) if not ideals[j] & ~I]
        pairs += len(subs)
        st_acc = {j: loads(I & ~ideals[j], acc_devs[0]) for j in subs} if K else {}
        st_cpu = {j: loads(I & ~ideals[j], cpu_devs[0]) for j in subs} if L else {}
        for a in range(K + 1):
            for b in range(L + 1):
                if a == b == 0:
                    continue
                pts: list = []
                if a > 0:
                    pts += [(f, bb, (a - 1, b, i), q, None)
                            for q, (f, bb, *_r) in enumerate(front.get((a - 1, b, i), []))]
                if b > 0:
                    pts += [(f, bb, (a, b - 1, i), q, None)
                            for q, (f, bb, *_r) in enumerate(front.get((a, b - 1, i), []))]
                for j in subs:
                    for on, st, src in (("acc", st_acc.get(j), (a - 1, b, j)),
                                        ("cpu", st_cpu.get(j), (a, b - 1, j))):
                        if st is None or min(src[:2]) < 0:
                            continue
                        pts += [(max(f, st[0]), max(bb, st[1]), src, q, (j, on))
                                for q, (f, bb, *_r) in enumerate(front.get(src, []))]
                front[a, b, i] = _pareto(pts)
    final = front[K, L, N - 1]
    if not final:
        raise InfeasibleError(f"{method}: no contiguous split of graph {graph.name!r} over "
                              f"{K} accelerators and {L} CPUs of cluster {cluster.name!r} "
                              f"respects the memory caps")
    q = min(range(len(final)), key=lambda x: (final[x][0] + final[x][1], x))
    value = final[q][0] + final[q][1]
    stages = []
    state = (K, L, N - 1)
    while True:
        _f, _bb, parent, pq, stage = front[state][q]
        if stage is not None:
            j, on = stage
            stages.append((ideals[state[2]] & ~ideals[j], on))
        if parent is None:
            break
        state, q = parent, pq
    stages.reverse()
    names = cluster.names
    placement: dict = {}
    ai = ci = 0
    for S, on in stages:
        if on == "acc":
            d, ai = acc_devs[ai], ai + 1
        else:
            d, ci = cpu_devs[ci], ci + 1
        for s in range(p.n):
            if (S >> s) & 1:
                for op in p.members[s]:
                    placement[gc.names[op]] = names[d]
    return Plan(graph, placement, method=method, status="optimal",
                predicted={"time_per_sample_ms": value, "max_forward_ms": final[q][0],
                           "max_backward_ms": final[q][1]},
                stats={"ideals": N, "ideal_pairs": pairs, "pareto_points": len(final),
                       "solve_s": time.perf_counter() - t0},
                info={"objective": "gpipe", "stages": len(stages), "contraction": p.info})
