"""Plans explained side by side: what moved between two plans and what it did to the schedule.

:func:`diff` simulates both plans with the judge and reports

* the ops that moved (present in both plans' graphs, on another device), each with its compute
  time in A and in B, and the moves summed by device pair;
* each device's busy time and each link's bytes in A and B, and the change;
* how each plan's realised critical path splits into compute, transfer and idle time
  (:func:`critical_breakdown`), and the ops on one critical path and not on the other.

Examples
--------
>>> import workbench as wb
>>> g, c = wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie")
>>> a = wb.Plan(g, {v: "gpu0" for v in g.ops}, method="one")
>>> b = wb.Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"}, method="two")
>>> d = wb.diff(a, b, c)
>>> d.moved[["op", "from", "to"]].values.tolist()
[['c', 'gpu0', 'gpu1']]
>>> d.busy.set_index("device")["delta_ms"].round(3).to_dict()
{'gpu0': -2.0, 'gpu1': 2.0}
>>> d.critical["only_a"], d.critical["only_b"]
(['b'], [])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import PlanError

__all__ = ["PlanDiff", "critical_breakdown", "diff", "training_diff"]


def critical_breakdown(schedule) -> dict:
    """Split the realised critical path of ``schedule`` into compute per device, transfer per
    link and idle time (waiting between chain items, charged to the lane that waited).

    The three totals add up to the makespan.

    >>> import workbench as wb
    >>> g, c = wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie")
    >>> s = wb.simulate(wb.Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"}), c)
    >>> b = critical_breakdown(s)
    >>> round(b["compute_ms"] + b["transfer_ms"] + b["idle_ms"], 6) == round(s.makespan, 6)
    True
    >>> sorted(b["compute"])
    ['gpu0', 'gpu1']
    """
    g = schedule.graph
    names = list(schedule.cluster.names)
    comp, tran, idle = {}, {}, {}
    t = 0.0
    for kind, item in schedule.critical_path:
        if kind == "op":
            i = g.index[item]
            lane, a, b = names[int(schedule.device[i])], schedule.start[i], schedule.end[i]
            comp[lane] = comp.get(lane, 0.0) + float(b - a)
        else:
            k = int(item)
            lane, a, b = schedule.link_name(k), schedule.t_start[k], schedule.t_end[k]
            tran[lane] = tran.get(lane, 0.0) + float(b - a)
        if a > t + 1e-12:
            idle[lane] = idle.get(lane, 0.0) + float(a - t)
        t = max(t, float(b))
    if schedule.makespan > t + 1e-12:
        idle["end"] = idle.get("end", 0.0) + float(schedule.makespan - t)
    return {"compute": comp, "transfer": tran, "idle": idle,
            "compute_ms": sum(comp.values()), "transfer_ms": sum(tran.values()),
            "idle_ms": sum(idle.values()), "bytes": float(schedule.t_bytes.sum()),
            "makespan": float(schedule.makespan)}


@dataclass
class PlanDiff:
    """What :func:`diff` found (DataFrames unless said otherwise).

    ``moved``: op, from, to, compute_a_ms, compute_b_ms (largest A compute first);
    ``moves``: by device pair: from, to, ops, compute_a_ms; ``busy``: device, busy_a_ms,
    busy_b_ms, delta_ms; ``links``: link, bytes_a, bytes_b, delta; ``breakdown``: one row per
    plan with makespan, compute, transfer and idle ms of its critical path; ``critical``
    (dict): ``a``/``b`` the critical ops, ``only_a``/``only_b`` those on one path only;
    ``schedule_a``/``schedule_b`` the judge's schedules; ``only_in_a``/``only_in_b`` (lists):
    ops of one plan's graph only (a split or coarsened graph).
    """

    name_a: str
    name_b: str
    moved: object
    moves: object
    busy: object
    links: object
    breakdown: object
    critical: dict
    schedule_a: object
    schedule_b: object
    only_in_a: list
    only_in_b: list

    def summary(self) -> str:
        """A few lines in words.

        >>> import workbench as wb
        >>> g, c = wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie")
        >>> a = wb.Plan(g, {v: "gpu0" for v in g.ops}, method="one")
        >>> print(wb.diff(a, wb.solve(g, c, method="m_topo"), c).summary().splitlines()[0])
        one 6 ms -> m_topo 5.02 ms (-16.3 %)
        """
        ma, mb = self.schedule_a.makespan, self.schedule_b.makespan
        rel = f" ({100 * (mb / ma - 1):+.1f} %)" if ma > 0 else ""
        lines = [f"{self.name_a} {ma:.4g} ms -> {self.name_b} {mb:.4g} ms{rel}"]
        n = len(self.moved)
        if n:
            top = self.moves.head(3)
            pairs = ", ".join(f"{r['from']}->{r['to']} {r['ops']} ops "
                              f"({r['compute_a_ms']:.3g} ms)" for _, r in top.iterrows())
            lines.append(f"{n} ops moved: {pairs}")
        else:
            lines.append("no op moved (same placement)")
        for _, r in self.breakdown.iterrows():
            lines.append(f"critical path of {r['plan']}: compute {r['compute_ms']:.3g}, "
                         f"transfer {r['transfer_ms']:.3g}, idle {r['idle_ms']:.3g} ms")
        lines.append(f"{len(self.critical['only_a'])} critical ops only in {self.name_a}, "
                     f"{len(self.critical['only_b'])} only in {self.name_b}")
        return "\n".join(lines)


def _busy(schedule) -> dict:
    names = schedule.cluster.names
    busy = np.bincount(schedule.device, weights=schedule.end - schedule.start,
                       minlength=len(names))
    return {names[i]: float(busy[i]) for i in range(len(names))}


def diff(plan_a, plan_b, cluster, *, congestion: bool = True, order: str | None = None,
         names: tuple | None = None, schedules: tuple | None = None) -> PlanDiff:
    """Compare two plans of one problem on ``cluster`` (both simulated by the judge, or the
    simulations given in ``schedules``).

    Parameters
    ----------
    plan_a, plan_b : Plan
    cluster : Cluster
    congestion, order
        Passed to :func:`workbench.simulate`.
    names : (str, str), optional
        Labels of the two plans (default: their methods; ``A``/``B`` appended when equal).
    schedules : (Schedule, Schedule), optional
        Simulations of ``plan_a`` and ``plan_b`` already made (a ``Comparison``'s
        ``schedules``): used as they are, so the diff shows what the comparison judged.

    Raises
    ------
    PlanError
        If either is not a Plan, or the plans share no op (plans of different graphs).
    """
    import pandas as pd

    from .plan import Plan
    from .simulate import simulate

    for what, p in (("plan_a", plan_a), ("plan_b", plan_b)):
        if not isinstance(p, Plan):
            raise PlanError(f"diff: {what} must be a Plan, got {type(p).__name__}")
    na, nb = names or (plan_a.method, plan_b.method)
    if na == nb:
        na, nb = f"{na} (A)", f"{nb} (B)"
    common = [v for v in plan_a.graph.ops if v in plan_b.graph.index]
    if not common:
        raise PlanError(f"diff: plans {na!r} and {nb!r} share no op (graphs "
                        f"{plan_a.graph.name!r} and {plan_b.graph.name!r})")
    if schedules is not None:
        sa, sb = schedules
        for what, sch, p in (("a", sa, plan_a), ("b", sb, plan_b)):
            if sch.graph is not p.graph and sch.graph.fingerprint != p.graph.fingerprint:
                raise PlanError(f"diff: schedules[{'ab'.index(what)}] is not a simulation of "
                                f"plan_{what} (graph {sch.graph.name!r})")
    else:
        sa = simulate(plan_a, cluster, congestion=congestion, order=order)
        sb = simulate(plan_b, cluster, congestion=congestion, order=order)
    ta, tb = cluster.op_times(plan_a.graph), cluster.op_times(plan_b.graph)
    idx = cluster.index
    rows = []
    for v in common:
        da, db = plan_a.placement[v], plan_b.placement[v]
        if da != db:
            rows.append({"op": v, "from": da, "to": db,
                         "compute_a_ms": float(ta[plan_a.graph.index[v], idx[da]]),
                         "compute_b_ms": float(tb[plan_b.graph.index[v], idx[db]])})
    moved = pd.DataFrame(rows, columns=["op", "from", "to", "compute_a_ms", "compute_b_ms"])
    moved = moved.sort_values(["compute_a_ms", "op"], ascending=[False, True],
                              kind="stable").reset_index(drop=True)
    moves = (moved.groupby(["from", "to"], as_index=False)
             .agg(ops=("op", "size"), compute_a_ms=("compute_a_ms", "sum"))
             .sort_values(["compute_a_ms", "from", "to"], ascending=[False, True, True],
                          kind="stable").reset_index(drop=True))
    ba, bb = _busy(sa), _busy(sb)
    busy = pd.DataFrame({"device": list(cluster.names),
                         "busy_a_ms": [ba[d] for d in cluster.names],
                         "busy_b_ms": [bb[d] for d in cluster.names]})
    busy["delta_ms"] = busy["busy_b_ms"] - busy["busy_a_ms"]
    lk = sorted(set(sa.link_bytes) | set(sb.link_bytes))
    links = pd.DataFrame({"link": lk, "bytes_a": [sa.link_bytes.get(k, 0.0) for k in lk],
                          "bytes_b": [sb.link_bytes.get(k, 0.0) for k in lk]})
    links["delta"] = links["bytes_b"] - links["bytes_a"]
    crit_a, crit_b = critical_breakdown(sa), critical_breakdown(sb)
    breakdown = pd.DataFrame([
        {"plan": n, "makespan_ms": b["makespan"], "compute_ms": b["compute_ms"],
         "transfer_ms": b["transfer_ms"], "idle_ms": b["idle_ms"], "bytes": b["bytes"]}
        for n, b in ((na, crit_a), (nb, crit_b))])
    ca, cb = sa.critical_ops(), sb.critical_ops()
    sca, scb = set(ca), set(cb)
    critical = {"a": ca, "b": cb, "only_a": [v for v in ca if v not in scb],
                "only_b": [v for v in cb if v not in sca]}
    return PlanDiff(na, nb, moved, moves, busy, links, breakdown, critical, sa, sb,
                    [v for v in plan_a.graph.ops if v not in plan_b.graph.index],
                    [v for v in plan_b.graph.ops if v not in plan_a.graph.index])


def training_diff(a, b):
    """Two judged training plans (:class:`workbench.judge.training.TrainingResult`) explained:
    the strategy fields that differ, the step time and each part of it (the slowest rank's
    :meth:`~workbench.judge.training.TrainingResult.breakdown`), and the peak memory.

    Returns a pandas DataFrame indexed by item with columns ``a``, ``b`` and ``delta`` (b - a,
    numbers only).

    >>> from workbench.cluster import Cluster
    >>> from workbench.judge.training import simulate_training
    >>> from workbench.transforms.parallel import Strategy, parallelize
    >>> run = lambda **kw: simulate_training(parallelize(
    ...     "gpt:layers=4,hidden=256,heads=4,seq=128", Cluster.preset("8xA100-80g"),
    ...     Strategy(global_batch=8, **kw)))
    >>> d = training_diff(run(pp=2), run(pp=2, recompute="full"))
    >>> d.loc["recompute", ["a", "b"]].tolist()
    ['none', 'full']
    >>> bool(d.loc["recompute_ms", "delta"] > 0), bool(d.loc["peak_gib", "delta"] < 0)
    (True, True)
    """
    import pandas as pd

    sa, sb = a.plan.strategy.to_dict(), b.plan.strategy.to_dict()
    rows = {k: (sa[k], sb[k]) for k in sa if sa[k] != sb[k]}
    if a.plan.config != b.plan.config:
        rows["model"] = (a.plan.config.spec, b.plan.config.spec)
    ba, bb = a.breakdown(), b.breakdown()
    rows["step_ms"] = (a.step_ms, b.step_ms)
    rows.update({f"{k}_ms": (ba[k], bb[k]) for k in ba if k != "step"})
    rows["peak_gib"] = (max(a.peak.values()) / 2**30, max(b.peak.values()) / 2**30)
    rows["feasible"] = (a.feasible, b.feasible)
    out = pd.DataFrame.from_dict(rows, orient="index", columns=["a", "b"])
    out["delta"] = [y - x if isinstance(x, float) and isinstance(y, float) else None
                    for x, y in zip(out.a, out.b)]
    return out
