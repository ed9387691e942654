"""Local search for the max-load (pipelined) objective, the baseline of Tarnawski et al.
(NeurIPS 2020, after [MKA07]): random restarts; from a random split of the colour classes over
the accelerators, repeatedly apply the single class move that lowers the max load most, until
no move improves it. Unlike the authors' program, moves that break a memory cap are not taken.
Loads are the judge's (``Device.speed``, nested transfer tiers); ``predicted`` is
:func:`workbench.simulate.max_load` of the result. Inside :func:`workbench.solve` every
improvement of the incumbent (the best max load seen so far, any restart, any move) is recorded
in ``plan.stats["progress"]`` (:mod:`workbench.solvers.progress`, engine ``"local_search"``,
objective the search's max load in ms, no bound).

Examples
--------
>>> from workbench import samples, Cluster, solve, max_load
>>> from workbench.cluster import Device, Link
>>> c = Cluster([Device(f"gpu{i}", "gpu", 1e9) for i in range(3)], mode="host",
...             host_link=Link(0.0, 1e6))
>>> p = solve(samples.transformer(40), c, method="local_search", seed=1, restarts=2)
>>> abs(p.predicted["max_load_ms"] - max_load(p, c)) < 1e-6
True
"""

from __future__ import annotations

import numpy as np

from ...budget import Budget
from ...errors import InfeasibleError
from ...plan import Plan
from ..registry import MAX_MODEL_OPS, register
from .units import class_units

__all__ = ["local_search"]


@register("local_search", max_ops=MAX_MODEL_OPS,
          family="pipeline", paper="Tarnawski et al. NeurIPS'20 (baseline)",
          objective="max_load", contract_params={"restarts": 2},
          description="Random restarts + best single colour-class move (max-load)")
def local_search(graph, cluster, *, restarts: int = 10, max_moves: int = 10_000,
                 seed: int | None = None, time_limit: float | Budget | None = None) -> Plan:
    """Best-improvement local search over colour classes; ``restarts`` random starts (the paper
    used 10), deterministic for a fixed ``seed``. Loads use the paper's accounting.

    ``time_limit`` (seconds or a :class:`~workbench.budget.Budget`) bounds the whole call:
    when it runs out the search stops after the current move and returns the best assignment
    seen (every state of the search is a complete split), with status ``time_limit``.
    """
    from ...simulate import max_load

    budget = Budget.of(time_limit, name="local_search")
    stopped = False

    U = class_units(graph, cluster)
    acc = [i for i, d in enumerate(cluster.devices) if d.kind != "cpu"]
    cpus = [i for i, d in enumerate(cluster.devices) if d.kind == "cpu"]
    rng = np.random.default_rng(seed)
    devs = acc if acc else cpus
    nd = len(cluster)
    # who pays for transfers: accelerators in host mode, every device in direct mode (where,
    # with more than two devices, the search's loads only approximate the judge's)
    staged = np.array([cluster.mode == "direct" or d.kind != "cpu" for d in cluster.devices])
    caps = np.array([d.memory for d in cluster.devices])
    # hyperedge incidence
    H = len(U.hyper)
    hw = np.array([w for *_x, w in U.hyper]) if H else np.zeros(0)
    hsize = np.array([1 + len(T) for _a, T, _w in U.hyper], dtype=np.int64)
    inc: list = [[] for _ in range(U.n)]
    for h, (a, T, _w) in enumerate(U.hyper):
        for v in [a, *T]:
            inc[v].append(h)
    inc = [np.array(x, dtype=np.int64) for x in inc]
    ok = np.isfinite(U.comp)
    allowed = [[d for d in devs if ok[v, d]] or [d for d in cpus if ok[v, d]]
               for v in range(U.n)]
    if any(not a for a in allowed):
        bad = next(v for v in range(U.n) if not allowed[v])
        raise InfeasibleError(f"local_search: op {graph.c.names[int(np.flatnonzero(U.owner == bad)[0])]!r}"
                              f" can run on none of the devices")
    comp = np.where(ok, U.comp, 0.0)

    def loads_of(asg):
        cnt = np.zeros((H, nd), dtype=np.int64)
        for h, (a, T, _w) in enumerate(U.hyper):
            for v in [a, *T]:
                cnt[h, asg[v]] += 1
        split = (cnt > 0) & (cnt < hsize[:, None])
        load = np.bincount(asg, weights=comp[np.arange(U.n), asg], minlength=nd)
        load += np.where(staged, hw @ split, 0.0)
        mem = np.bincount(asg, weights=U.mem, minlength=nd)
        return load, cnt, mem

    from ..progress import new_call

    rec = new_call("local_search")
    incumbent = np.inf

    def improved(val):
        nonlocal incumbent
        if val < incumbent:
            incumbent = val
            if rec is not None:
                rec(float(val), float("nan"))  # no bound: recorded as None

    best_val, best_asg = np.inf, None
    moves_total = 0
    for _r in range(max(1, restarts)):
        if stopped:
            break
        asg = np.empty(U.n, dtype=np.int64)
        mem = np.zeros(nd)
        for v in rng.permutation(U.n):
            opts = [d for d in allowed[v] if mem[d] + U.mem[v] <= caps[d]] or allowed[v]
            d = opts[int(rng.integers(len(opts)))]
            asg[v] = d
            mem[d] += U.mem[v]
        load, cnt, mem = loads_of(asg)
        cur = load.max()
        improved(cur)
        for _m in range(max_moves):
            if budget.over():
                stopped = True
                break
            best = (cur - 1e-5, -1, -1, None)
            for v in range(U.n):
                a = asg[v]
                hs = inc[v]
                for b in allowed[v]:
                    if b == a or mem[b] + U.mem[v] > caps[b] * (1 + 1e-12):
                        continue
                    new = load.copy()
                    new[a] -= comp[v, a]
                    new[b] += comp[v, b]
                    if len(hs):
                        ca, cb = cnt[hs, a], cnt[hs, b]
                        sz = hsize[hs]
                        w = hw[hs]
                        old_sa = (ca > 0) & (ca < sz)
                        old_sb = (cb > 0) & (cb < sz)
                        new_sa = (ca - 1 > 0) & (ca - 1 < sz)
                        new_sb = (cb + 1 > 0) & (cb + 1 < sz)
                        if staged[a]:
                            new[a] += float(w @ (new_sa.astype(float) - old_sa))
                        if staged[b]:
                            new[b] += float(w @ (new_sb.astype(float) - old_sb))
                    val = new.max()
                    if val < best[0]:
                        best = (val, v, b, new)
            if best[1] < 0:
                break
            val, v, b, new = best
            a = asg[v]
            hs = inc[v]
            cnt[hs, a] -= 1
            cnt[hs, b] += 1
            mem[a] -= U.mem[v]
            mem[b] += U.mem[v]
            asg[v] = b
            load, cur = new, val
            moves_total += 1
            improved(cur)
        if cur < best_val:
            best_val, best_asg = cur, asg.copy()
    dev = best_asg[U.owner]
    names = cluster.names
    placement = {graph.c.names[j]: names[int(d)] for j, d in enumerate(dev.tolist())}
    load, _cnt, mem = loads_of(best_asg)
    status = "heuristic" if (mem <= caps * (1 + 1e-12)).all() else "infeasible"
    if stopped and status == "heuristic":
        status = "time_limit"
    plan = Plan(graph, placement, method="local_search", status=status,
                stats={"restarts": restarts, "moves": moves_total, "units": U.n,
                       "search_max_load_ms": float(load.max()), "stopped_by_time_limit": stopped})
    plan.predicted = {"max_load_ms": max_load(plan, cluster)}
    return plan
