"""The judge against reality (``runtime.residuals``): a traced run of a plan lined up with
its simulated schedule.

The runner's traced step (``RunOptions.FULL_TRACE`` step stats, :meth:`PlanSession.trace`)
gives every op's measured start and end on its device. TensorFlow records no step stats for
the ``_Send``/``_Recv`` pair of a tensor that crosses logical CPU devices (checked on this
build: a two-device step lists only the placed ops), so a transfer is measured by what it
delays: from the producer's measured end to the first consumer's measured start on the other
device. That gap is exact when the tensor is the last thing the consumer waited for (the
transfer is *binding*; ``Residuals.transfers.binding``) and an upper bound otherwise.

:func:`residuals` reports, for one plan:

* ``ops``: per op, predicted and measured start, end and duration (the predicted duration is
  the compute cost; the receive overhead the simulator adds to a consumer is a transfer cost);
* ``transfers``: per simulated transfer (producer, destination device), the predicted delay
  from the producer's end to the tensor's arrival (queueing on a FIFO link included) against
  the measured gap;
* ``path``: the *measured* critical path, walked back from the op that ends last through the
  binding cause of each start (the previous op of the device, an input on the device, or an
  input from another device), cut into segments -- compute, transfer (per link) and waiting
  (a gap on a device that nothing predicted: executor dispatch, a thread that was asleep) --
  each with its measured and predicted time;
* ``groups``: the step-time error ``measured - predicted`` split into parts that add up to it
  exactly: per op type (compute on the measured path), per link (transfers on it), waiting per
  device, ``path shift`` (the predicted makespan is not the predicted time of the measured
  path: another path was critical in the simulation) and ``session`` (the timed median step
  against the traced step: ``Session.run`` overhead, tracing and noise), sorted by size, each
  with its share of the error.

Examples
--------
>>> from workbench import samples, Plan, Cluster, simulate
>>> from workbench.runtime.runner import Measurement
>>> g = samples.diamond()
>>> c = Cluster.preset("2xV100-pcie")
>>> p = Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"})
>>> s = simulate(p, c)
>>> tr = {v: ("gpu0" if p.placement[v] == "gpu0" else "gpu1", s.start[i], s.end[i])
...       for i, v in enumerate(g.ops)}
>>> tr["d"] = ("gpu0", s.start[3], s.end[3] + 1.0)        # d ran 1 ms longer
>>> m = Measurement("x", samples=[s.makespan + 1.0], trace=tr)
>>> r = residuals(p, m, schedule=s)
>>> round(r.error_ms, 3), r.groups.iloc[0]["group"], float(r.groups.iloc[0]["share"])
(1.0, 'compute: d', 1.0)
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass

import numpy as np

from ..errors import RuntimeBridgeError

__all__ = ["Residuals", "busy_overlap", "ladder_stats", "live_bytes", "median_timeline",
           "overlap_slope", "plan_key", "residuals", "simulate_overlap", "step_spread",
           "tick_share", "traced_measurement", "twin_pairs", "woken_ops"]

WAKEUP_IDLE_MS = 0.1
"""A device whose thread idled at least this long before a tensor from another device woke it
pays the ``wakeup`` change's latency (see :func:`woken_ops`)."""


@dataclass
class Residuals:
    """What :func:`residuals` returns (see the module docstring). Times in ms.

    ``predicted_ms``: simulated makespan; ``traced_ms``: makespan of the traced step;
    ``measured_ms``: median timed step; ``error_ms = measured_ms - predicted_ms``.
    ``ops``, ``transfers``, ``path``, ``groups``, ``by_type``, ``by_link`` are DataFrames.
    """

    method: str
    predicted_ms: float
    traced_ms: float
    measured_ms: float
    ops: object
    transfers: object
    path: object
    groups: object
    by_type: object
    by_link: object
    schedule: object = None

    @property
    def error_ms(self) -> float:
        return self.measured_ms - self.predicted_ms

    @property
    def rel_error(self) -> float:
        return self.error_ms / self.measured_ms if self.measured_ms else math.nan

    def table(self, n: int = 10) -> str:
        """The ``n`` largest groups as text lines (group, measured, predicted, residual, share)."""
        lines = [(f"{self.method}: predicted {self.predicted_ms:.3f} ms, traced "
                 f"{self.traced_ms:.3f} ms, measured {self.measured_ms:.3f} ms "
                 f"(error {self.error_ms:+.3f} ms, {100 * self.rel_error:+.1f} %)"),
                 (f"{'group':34s} {'measured':>9s} {'predicted':>9s} {'residual':>9s} "
                 f"{'share':>7s}")]
        for row in self.groups.head(n).itertuples():
            lines.append(f"{row.group[:34]:34s} {row.measured_ms:9.3f} {row.predicted_ms:9.3f} "
                         f"{row.residual_ms:+9.3f} {100 * row.share:+6.1f}%")
        return "\n".join(lines)


def traced_measurement(plan, *, traces: int = 5, steps: int = 10, warmup: int = 3,
                       program=None, **run_kw):
    """Time ``steps`` steps of ``plan`` and trace ``traces`` more; the Measurement's ``trace``
    is the *median timeline*: per op, the median over the traced steps of its start and of its
    end (each step's times from its first op). On a shared machine one traced step often has an
    op preempted for tens of ms; the median timeline ignores it unless most steps had it.

    ``**run_kw`` go to :class:`~workbench.runtime.runner.PlanSession` (``cluster=``,
    ``devices=``, ...). Raises what the runner raises (``PlanError``, ``RuntimeBridgeError``).
    """
    from .runner import PlanSession

    if traces < 1:
        raise RuntimeBridgeError(f"traced_measurement: traces must be >= 1, got {traces}")
    with PlanSession(plan, program=program, **run_kw) as ps:
        ps.warm(warmup)
        ps.time(steps)
        return ps.measurement(median_timeline([ps.trace() for _ in range(traces)]))


def median_timeline(traces: list) -> dict:
    """Per op, the median start and median end over several traces (node -> (device, start,
    end)); ops missing from some traces use the traces that have them.

    >>> median_timeline([{"a": ("d", 0.0, 1.0)}, {"a": ("d", 0.0, 9.0)}, {"a": ("d", 0.0, 2.0)}])
    {'a': ('d', 0.0, 2.0)}
    """
    out: dict = {}
    for v in {v for tr in traces for v in tr}:
        runs = [tr[v] for tr in traces if v in tr]
        out[v] = (runs[0][0], statistics.median(r[1] for r in runs),
                  statistics.median(r[2] for r in runs))
    return out


def _op_type(g, v: str) -> str:
    """The op's type (``op_type``), else its name (graphs built by hand have no types)."""
    return g.op(v).get("op_type") or v


def _device_names(plan, trace: dict) -> dict:
    """TF device string -> workbench device name, read off the plan's placement."""
    out: dict = {}
    for v, (tfd, _, _) in trace.items():
        if v in plan.placement:
            out.setdefault(tfd, plan.placement[v])
    return out


def _measured_ops(plan, trace: dict) -> dict:
    """Op -> (device, start, end) in ms for the plan's ops that the trace recorded."""
    names = _device_names(plan, trace)
    return {v: (names.get(d, plan.placement[v]), float(s), float(e))
            for v, (d, s, e) in trace.items() if v in plan.placement}


def _schedule_parts(plan, schedule):
    """Per op index: predicted compute (ms) and receive overhead (ms); per (producer, dst
    device index): predicted delay from the producer's end to the arrival, and link time."""
    g = plan.graph
    dev = schedule.device
    comp = schedule.cluster.op_times(g)[np.arange(g.n_ops), dev]
    dur = schedule.end - schedule.start
    over = np.maximum(0.0, dur - comp)
    xfer: dict = {}
    for k in range(len(schedule.t_op)):
        u, b = int(schedule.t_op[k]), int(schedule.t_dst[k])
        if b < 0:
            continue
        delay = float(schedule.t_end[k] - schedule.end[u])
        link = float(schedule.t_end[k] - schedule.t_start[k])
        prev = xfer.get((u, b))
        if prev is None or delay > prev[0]:
            xfer[(u, b)] = (delay, link, schedule.link_name(k), float(schedule.t_bytes[k]))
    return comp, over, xfer


def _binding(v: str, meas: dict, preds: dict, dev_prev: dict):
    """The measured cause of ``v``'s start: ``(kind, name, end)`` with kind ``device`` (the
    previous op on the device), ``local`` (an input on the device) or ``remote`` (an input from
    another device); None when nothing precedes ``v``."""
    d = meas[v][0]
    best = None
    p = dev_prev.get(v)
    if p is not None:
        best = ("device", p, meas[p][2])
    for u in preds[v]:
        kind = "local" if meas[u][0] == d else "remote"
        if best is None or meas[u][2] > best[2] or (meas[u][2] == best[2] and kind == "remote"):
            best = (kind, u, meas[u][2])
    return best


def _traced_preds(g, meas: dict) -> dict:
    """Op -> its nearest traced ancestors (an untraced op passes its inputs through)."""
    memo: dict = {}

    def up(v: str) -> set:
        if v in memo:
            return memo[v]
        memo[v] = set()
        out: set = set()
        for u in g.predecessors(v):
            out |= {u} if u in meas else up(u)
        memo[v] = out
        return out

    return {v: sorted(up(v)) for v in meas}


def _walk_path(plan, meas: dict, comp, over, xfer, cl_index: dict):
    """Segments of the measured critical path, last op first reversed to time order."""
    g = plan.graph
    preds = _traced_preds(g, meas)
    by_dev: dict = {}
    for v, (d, s, _) in meas.items():
        by_dev.setdefault(d, []).append((s, g.index[v], v))
    dev_prev: dict = {}
    for items in by_dev.values():
        items.sort()
        for (_, _, a), (_, _, b) in itertools.pairwise(items):
            dev_prev[b] = a
    segs: list = []
    v = max(meas, key=lambda x: (meas[x][2], g.index[x]))
    seen: set = set()
    while v is not None and v not in seen:
        seen.add(v)
        d, s, e = meas[v]
        i = g.index[v]
        segs.append({"kind": "compute", "group": f"compute: {_op_type(g, v)}", "name": v,
                     "device": d, "start_ms": s, "end_ms": e, "measured_ms": e - s,
                     "predicted_ms": float(comp[i])})
        cause = _binding(v, meas, preds, dev_prev)
        start_gap = s - (cause[2] if cause else 0.0)
        if cause is not None and cause[0] == "remote":
            u = cause[1]
            pred, _, link, _ = xfer.get((g.index[u], cl_index[d]),
                                        (0.0, 0.0, f"{meas[u][0]}->{d}", 0.0))
            segs.append({"kind": "transfer", "group": f"transfer: {link}", "name": f"{u} -> {v}",
                         "device": d, "start_ms": cause[2], "end_ms": s,
                         "measured_ms": start_gap, "predicted_ms": pred + float(over[i])})
        elif start_gap != 0.0 or over[i] > 0:
            what = "start-up" if cause is None else f"wait on {d}"
            segs.append({"kind": "wait", "group": what, "name": v, "device": d,
                         "start_ms": s - start_gap, "end_ms": s, "measured_ms": start_gap,
                         "predicted_ms": float(over[i])})
        v = cause[1] if cause is not None else None
    segs.reverse()
    return segs


def residuals(plan, measurement, cluster=None, *, schedule=None, **sim_kw) -> Residuals:
    """Line up a traced measurement of ``plan`` with its simulated schedule.

    Parameters
    ----------
    plan : Plan
    measurement : Measurement
        With ``trace`` (``run_plan(..., trace=True)`` or :func:`traced_measurement`) and
        timed samples (their median is the measured step).
    cluster : Cluster, optional
        Simulated on with ``workbench.simulate(plan, cluster, **sim_kw)`` unless ``schedule``
        (a :class:`~workbench.plan.Schedule` of ``plan``, e.g. from
        :meth:`workbench.runtime.calibrate.JudgeModel.simulate`) is given.

    Raises
    ------
    RuntimeBridgeError
        The measurement failed, has no trace, or its trace shares no op with the plan.
    PlanError
        ``schedule`` is not a simulation of ``plan`` (another plan's, naming what differs).
    """
    import pandas as pd

    from ..plan import Plan, check_schedule
    from ..simulate import simulate

    if not isinstance(plan, Plan):  # issue 41: None was an AttributeError
        raise RuntimeBridgeError(f"residuals: plan must be a Plan, got {type(plan).__name__}")
    if measurement is None or not getattr(measurement, "ok", False):
        raise RuntimeBridgeError(f"residuals: plan {plan.method!r} has no successful "
                                 f"measurement ({getattr(measurement, 'error', None)})")
    if not measurement.trace:
        raise RuntimeBridgeError(f"residuals: the measurement of plan {plan.method!r} has no "
                                 f"trace (run_plan(..., trace=True) or traced_measurement)")
    if schedule is None:
        if cluster is None:
            raise RuntimeBridgeError("residuals: give the cluster the plan is simulated on, or "
                                     "its schedule")
        schedule = simulate(plan, cluster, **sim_kw)
    else:
        check_schedule(plan, schedule, "residuals: schedule")
    meas = _measured_ops(plan, measurement.trace)
    if not meas:
        raise RuntimeBridgeError(f"residuals: the trace of plan {plan.method!r} has none of "
                                 f"its ops (a trace of another program?)")
    g = plan.graph
    comp, over, xfer = _schedule_parts(plan, schedule)
    cl_index = {n: i for i, n in enumerate(schedule.cluster.names)}
    t0 = min(s for _, s, _ in meas.values())
    meas = {v: (d, s - t0, e - t0) for v, (d, s, e) in meas.items()}
    traced = max(e for _, _, e in meas.values())
    measured = measurement.median_ms if measurement.samples else traced
    ops = pd.DataFrame([{
        "op": v, "type": _op_type(g, v), "device": plan.placement[v],
        "pred_start_ms": float(schedule.start[i]), "pred_end_ms": float(schedule.end[i]),
        "pred_ms": float(comp[i]), "recv_overhead_ms": float(over[i]),
        "meas_start_ms": meas[v][1] if v in meas else math.nan,
        "meas_end_ms": meas[v][2] if v in meas else math.nan,
        "meas_ms": meas[v][2] - meas[v][1] if v in meas else math.nan,
    } for i, v in enumerate(g.ops)])
    ops["residual_ms"] = ops["meas_ms"] - ops["pred_ms"]
    transfers = _transfer_rows(g, meas, xfer, cl_index)
    path = pd.DataFrame(_walk_path(plan, meas, comp, over, xfer, cl_index))
    on_path = set(path.loc[path["kind"] == "compute", "name"])
    ops["critical"] = ops["op"].isin(on_path)
    groups = _groups(path, schedule.makespan, traced, measured)
    by_type = (ops.groupby("type")[["meas_ms", "pred_ms", "residual_ms"]].sum()
               .assign(ops=ops.groupby("type").size())
               .sort_values("residual_ms", key=abs, ascending=False).reset_index())
    by_link = (transfers.groupby("link")[["meas_ms", "pred_ms"]].agg(["count", "median", "sum"])
               if len(transfers) else pd.DataFrame())
    return Residuals(plan.method, float(schedule.makespan), float(traced), float(measured), ops,
                     transfers, path, groups, by_type, by_link, schedule)


def _transfer_rows(g, meas: dict, xfer: dict, cl_index: dict):
    """One row per simulated transfer whose producer and a consumer were traced."""
    import pandas as pd

    names = {i: n for n, i in cl_index.items()}
    rows = []
    for (u_i, b), (delay, link_ms, link, nbytes) in xfer.items():
        u = g.ops[u_i]
        if u not in meas:
            continue
        cons = [v for v in g.successors(u) if v in meas and cl_index.get(meas[v][0]) == b]
        if not cons:
            continue
        first = min(cons, key=lambda v: meas[v][1])
        gap = meas[first][1] - meas[u][2]
        later = [meas[w][2] for w in g.predecessors(first) if w in meas and w != u]
        rows.append({"producer": u, "consumer": first, "link": link, "dst": names[b],
                     "bytes": nbytes, "pred_ms": delay,
                     "pred_link_ms": link_ms, "meas_ms": gap,
                     "binding": all(t <= meas[u][2] for t in later)})
    cols = ["producer", "consumer", "link", "dst", "bytes", "pred_ms", "pred_link_ms", "meas_ms",
            "binding"]
    return pd.DataFrame(rows, columns=cols)


def _groups(path, predicted: float, traced: float, measured: float):
    """Error parts that add up to ``measured - predicted`` (see the module docstring)."""
    import pandas as pd

    rows = []
    if len(path):
        agg = path.groupby("group")[["measured_ms", "predicted_ms"]].sum()
        counts = path.groupby("group").size()
        for grp, r in agg.iterrows():
            rows.append({"group": grp, "segments": int(counts[grp]),
                         "measured_ms": float(r.measured_ms), "predicted_ms": float(r.predicted_ms)})
    path_pred = float(path["predicted_ms"].sum()) if len(path) else 0.0
    rows.append({"group": "path shift", "segments": 0, "measured_ms": 0.0,
                 "predicted_ms": predicted - path_pred})
    rows.append({"group": "session", "segments": 0, "measured_ms": measured - traced,
                 "predicted_ms": 0.0})
    df = pd.DataFrame(rows)
    df["residual_ms"] = df["measured_ms"] - df["predicted_ms"]
    err = measured - predicted
    df["share"] = df["residual_ms"] / err if err else 0.0
    return df.sort_values("residual_ms", key=abs, ascending=False).reset_index(drop=True)



def step_spread(samples) -> float:
    """Half the interquartile range of a plan's timed steps (ms): robust to a preempted step."""
    q = np.percentile(np.asarray(samples, dtype=float), [25, 75]) if len(samples) else [0, 0]
    return float(q[1] - q[0]) / 2


def tick_share(samples, *, tick_ms: float = 4.0, tol_ms: float = 0.3) -> float:
    """The share of timed steps within ``tol_ms`` of a non-zero multiple of the scheduler's tick
    (``tick_ms``: 4 ms at ``CONFIG_HZ=250``): on a loaded machine a step whose caller slept waits
    for a tick, so such steps cluster there. Meaningful for a plan whose undisturbed step is
    not itself near a multiple of the tick.

    >>> tick_share([1.8, 1.9, 4.1, 7.9, 12.05, 2.6])
    0.5
    >>> tick_share([])
    nan
    """
    if tick_ms <= 0 or tol_ms < 0:
        raise RuntimeBridgeError(f"tick_share: need tick_ms > 0 and tol_ms >= 0, got "
                                 f"{tick_ms}, {tol_ms}")
    x = np.asarray(samples, dtype=float)
    if not len(x):
        return math.nan
    k = np.round(x / tick_ms)
    return float(np.mean((k >= 1) & (np.abs(x - k * tick_ms) <= tol_ms)))


def plan_key(plan) -> tuple:
    """What makes two plans the same plan: the placement and each device's order (hashable).

    >>> from workbench import samples, Plan
    >>> g = samples.diamond()
    >>> a = Plan(g, {"a": "cpu0", "b": "cpu0", "c": "cpu1", "d": "cpu0"})
    >>> plan_key(a) == plan_key(Plan(g, dict(a.placement)))
    True
    >>> plan_key(a) == plan_key(Plan(g, dict(a.placement), order={"cpu0": ["a", "c", "b", "d"]}))
    False
    """
    order = plan.order or {}
    return (tuple(sorted(plan.placement.items())),
            tuple(sorted((d, tuple(ops)) for d, ops in order.items())))


def twin_pairs(rows) -> list:
    """The pairs of rows (dicts with ``model`` and optional ``key``, :func:`plan_key`) that are
    one plan of one model: returned by two methods, timed in two sessions.

    >>> twin_pairs([{"model": "m", "plan": "a", "key": 1}, {"model": "m", "plan": "b", "key": 1},
    ...             {"model": "m", "plan": "c"}, {"model": "m", "plan": "d"}])[0][1]["plan"]
    'b'
    """
    return [(a, b) for i, a in enumerate(rows) for b in rows[i + 1:] if _same_plan(a, b)]


def _same_plan(a: dict, b: dict) -> bool:
    return (a["model"] == b["model"] and a.get("key") is not None
            and a.get("key") == b.get("key"))


def ladder_stats(rows, rungs) -> dict:
    """Per rung: median and worst relative error, pairwise order agreement with the measurement
    (all pairs of plans of one model, and the pairs whose measured medians differ by more than
    the sum of their spreads), and on how many models the rung's predicted best plan is within
    the measured spread of the measured best.

    ``rows``: dicts with ``model``, ``plan``, ``measured`` (median ms), ``spread`` (ms, e.g.
    half the interquartile range of the steps) and one predicted ms per rung name; optional
    ``key`` (:func:`plan_key`). Two rows of one model with the same key are one plan that two
    methods returned, timed in two sessions: no model can order a plan against itself, so the
    pair is not counted among the pairs but as ``twins`` (and ``twins_beyond`` where its two
    sessions differ by more than their spreads: a measure of how far sessions of one plan
    drift apart).

    >>> rows = [{"model": "m", "plan": "a", "measured": 10.0, "spread": 0.5, "r": 11.0},
    ...         {"model": "m", "plan": "b", "measured": 20.0, "spread": 0.5, "r": 19.0},
    ...         {"model": "m", "plan": "c", "measured": 10.2, "spread": 0.5, "r": 9.0}]
    >>> s = ladder_stats(rows, ["r"])["r"]
    >>> round(s["median"], 3), s["pairs"], s["agree"], s["pairs_beyond"], s["agree_beyond"]
    (0.1, 3, 2, 2, 2)
    >>> s["best_ok"], s["models"]
    (1, 1)
    >>> twins = [{**r, "key": k} for r, k in zip(rows, ("x", "y", "y"))]   # b and c: one plan
    >>> s = ladder_stats(twins, ["r"])["r"]
    >>> s["pairs"], s["pairs_beyond"], s["agree_beyond"], s["twins"], s["twins_beyond"]
    (2, 1, 1, 1, 1)
    """
    out = {}
    models: dict = {}
    for r in rows:
        models.setdefault(r["model"], []).append(r)
    for rung in rungs:
        errs = [(abs(r[rung] - r["measured"]) / r["measured"], r["model"], r["plan"])
                for r in rows if np.isfinite(r.get(rung, math.nan))]
        st = {"median": statistics.median(e for e, _, _ in errs) if errs else math.nan,
              "worst": max(errs) if errs else (math.nan, "", ""), "pairs": 0, "agree": 0,
              "pairs_beyond": 0, "agree_beyond": 0, "best_ok": 0, "models": 0, "twins": 0,
              "twins_beyond": 0}
        for rs in models.values():
            for i, a in enumerate(rs):
                for b in rs[i + 1:]:
                    beyond = abs(a["measured"] - b["measured"]) > a["spread"] + b["spread"]
                    if _same_plan(a, b):
                        st["twins"] += 1
                        st["twins_beyond"] += beyond
                        continue
                    same = (a[rung] - b[rung]) * (a["measured"] - b["measured"]) > 0
                    st["pairs"] += 1
                    st["agree"] += same
                    if beyond:
                        st["pairs_beyond"] += 1
                        st["agree_beyond"] += same
            if rs:
                pb = min(rs, key=lambda r: r[rung])
                mb = min(rs, key=lambda r: r["measured"])
                st["models"] += 1
                st["best_ok"] += pb["measured"] - mb["measured"] <= pb["spread"] + mb["spread"]
        out[rung] = st
    return out


# ---------------------------------------------------------------------- overlap contention
def busy_overlap(device, start, end) -> np.ndarray:
    """Per op, the fraction of its run during which another device was running an op (0-1):
    ``device``, ``start``, ``end`` are per-op arrays (a device runs one op at a time). With
    more than two devices the other devices' busy times are added (capped at the op's run).

    >>> busy_overlap([0, 0, 1], [0.0, 2.0, 1.0], [2.0, 4.0, 3.0]).tolist()
    [0.5, 0.5, 1.0]
    """
    dev = np.asarray(device)
    st, en = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
    dur = en - st
    busy = np.zeros(len(dev))
    for d in np.unique(dev):
        on = dev == d
        order = np.argsort(st[on], kind="stable")
        s_d, e_d = st[on][order], en[on][order]
        cum = np.concatenate([[0.0], np.cumsum(e_d - s_d)])

        def upto(x, s_d=s_d, e_d=e_d, cum=cum):  # busy time of device d before x
            k = np.searchsorted(s_d, x, side="right")
            last = np.clip(np.minimum(x, e_d[np.maximum(k - 1, 0)]) - s_d[np.maximum(k - 1, 0)],
                           0.0, None)
            return cum[np.maximum(k - 1, 0)] + np.where(k > 0, last, 0.0)

        other = ~on
        busy[other] += upto(en[other]) - upto(st[other])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(dur > 0, np.clip(busy / np.where(dur > 0, dur, 1.0), 0.0, 1.0), 0.0)


def overlap_slope(busy: dict, alone: dict, *, min_ms: float = 0.01,
                  min_overlap: float = 0.5) -> float:
    """The ``overlap`` model change's slope ``s``: an op that runs while another device computes
    for a fraction ``x`` of its time takes ``1 + s * x`` times its single-device time. From two
    traces (node -> (device, start, end)) of the same ops: a multi-device probe and a
    single-device run; ``s`` is the median over the probe's ops with overlap at least
    ``min_overlap`` (and at least ``min_ms`` alone) of ``(ratio - 1) / overlap``, at least 0.

    >>> busy = {"a": ("d0", 0.0, 2.0), "b": ("d1", 0.0, 2.0), "c": ("d0", 2.0, 3.0)}
    >>> alone = {"a": ("d0", 0.0, 1.6), "b": ("d0", 1.6, 3.2), "c": ("d0", 3.2, 4.2)}
    >>> round(overlap_slope(busy, alone), 3)
    0.25
    """
    names = [v for v in busy if v in alone and alone[v][2] - alone[v][1] >= min_ms]
    if not names:
        return 0.0
    devs = {d: i for i, d in enumerate(sorted({busy[v][0] for v in busy}))}
    allv = list(busy)
    ov = busy_overlap([devs[busy[v][0]] for v in allv], [busy[v][1] for v in allv],
                      [busy[v][2] for v in allv])
    ov = dict(zip(allv, ov))
    vals = [((busy[v][2] - busy[v][1]) / (alone[v][2] - alone[v][1]) - 1.0) / ov[v]
            for v in names if ov[v] >= min_overlap]
    return max(0.0, float(statistics.median(vals))) if vals else 0.0


class _SlowedOps:
    """A cluster whose op times carry extra ms per op of one graph (``op_times`` + ``extra``);
    every other attribute is the base cluster's."""

    def __init__(self, base, extra: np.ndarray):
        self._base, self._extra = base, extra

    def __getattr__(self, name):
        return getattr(self._base, name)

    def op_times(self, graph):
        return self._base.op_times(graph) + self._extra[:, None]


def handoff_idle(graph, schedule) -> np.ndarray:
    """Per op (graph order), how long (ms) its device had been idle when the simulated
    ``schedule`` starts it, where that start waits for an input from another device (its latest
    input ends on another device after the device's previous op: a hand-off wakes the device),
    or, for the first op of a device other than the one that starts first, its start time (a
    device thread woken at the step's start); ``-1`` for every other op.

    >>> from workbench import samples, Plan, Cluster, simulate
    >>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
    >>> s = simulate(Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"}), c)
    >>> [v for v, x in zip(g.ops, handoff_idle(g, s)) if x >= 0]   # gpu1 starts; d waits on c
    ['c', 'd']
    """
    gc = graph.c
    dev, st, en = np.asarray(schedule.device), schedule.start, schedule.end
    prev_end = np.full(gc.n, -np.inf)
    first_dev = int(dev[int(np.argmin(st))]) if gc.n else -1
    out = np.full(gc.n, -1.0)
    for d in np.unique(dev):
        ops = np.flatnonzero(dev == d)
        ops = ops[np.argsort(st[ops], kind="stable")]
        prev_end[ops[1:]] = en[ops[:-1]]
        if int(d) != first_dev and len(ops):
            out[ops[0]] = max(0.0, float(st[ops[0]]))
    for i in range(gc.n):
        if out[i] >= 0 or not gc.pred[i]:
            continue
        pe = prev_end[i]
        last = max(gc.pred[i], key=lambda u: en[u])
        if dev[last] != dev[i] and en[last] >= (pe if np.isfinite(pe) else -np.inf):
            out[i] = max(0.0, float(st[i] - (pe if np.isfinite(pe) else 0.0)))
    return out


def live_bytes(graph, start, end) -> np.ndarray:
    """Per op, the bytes of tensors live when it starts (the ``live_memory`` model change): an
    op's output (its largest outgoing tensor) is live from the op's end until the end of its
    last consumer; ``start`` and ``end`` are per-op times of one schedule (any devices: logical
    devices of one process share the memory). Outputs nobody consumes are not counted.

    >>> from workbench import samples
    >>> g = samples.diamond()          # a -> b, a -> c, b -> d, c -> d
    >>> [g.edge(u, v)["bytes"] for u, v in g.edges()]
    [10000000.0, 10000000.0, 10000000.0, 10000000.0]
    >>> live_bytes(g, [0, 1, 2, 3], [1, 2, 3, 4]).tolist()   # one device, order a b c d
    [0.0, 10000000.0, 20000000.0, 20000000.0]
    """
    gc = graph.c
    st, en = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
    if gc.m == 0:
        return np.zeros(gc.n)
    size = np.zeros(gc.n)
    np.maximum.at(size, gc.src, np.asarray(gc.bytes, dtype=float))
    last = np.full(gc.n, -np.inf)
    np.maximum.at(last, gc.src, en[gc.dst])
    has = np.isfinite(last)
    born, dies, w = en[has], last[has], size[has]
    ob, od = np.argsort(born, kind="stable"), np.argsort(dies, kind="stable")
    cb = np.concatenate([[0.0], np.cumsum(w[ob])])
    cd = np.concatenate([[0.0], np.cumsum(w[od])])
    return (cb[np.searchsorted(born[ob], st, side="right")]
            - cd[np.searchsorted(dies[od], st, side="right")])


def woken_ops(graph, schedule, *, idle_ms: float = WAKEUP_IDLE_MS) -> np.ndarray:
    """Per op (graph order), True where the simulated ``schedule`` starts it on a device that had
    been idle for at least ``idle_ms`` and whose start waits for an input from another device
    (:func:`handoff_idle`), or where it is the first op of a device other than the one that
    starts first (a device thread woken at the step's start). These are the hand-offs the
    ``wakeup`` change charges.

    >>> from workbench import samples, Plan, Cluster, simulate
    >>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
    >>> s = simulate(Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"}), c)
    >>> [v for v, w in zip(g.ops, woken_ops(g, s, idle_ms=0.0)) if w]  # gpu1 starts; d waits on c
    ['c', 'd']
    """
    idle = handoff_idle(graph, schedule)
    first = np.zeros(len(idle), dtype=bool)
    dev, st = np.asarray(schedule.device), schedule.start
    if len(idle):
        first_dev = int(dev[int(np.argmin(st))])
        for d in np.unique(dev):
            if int(d) != first_dev:
                ops = np.flatnonzero(dev == d)
                first[ops[np.argmin(st[ops])]] = True
    return first | (idle >= idle_ms)


def sent_tensors(plan, cluster) -> np.ndarray:
    """Per op (graph order), the number of other devices its consumers are on: the ``_Send``
    ops TensorFlow adds after it (one per output tensor and destination device; an op's
    outputs are counted as one tensor).

    >>> from workbench import samples, Plan, Cluster
    >>> g = samples.diamond()
    >>> sent_tensors(Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"}),
    ...              Cluster.preset("2xV100-pcie")).tolist()
    [1.0, 0.0, 1.0, 0.0]
    """
    gc = plan.graph.c
    dev = plan.device_array(cluster)
    return np.array([len({int(dev[j]) for j in gc.succ[i]} - {int(dev[i])})
                     for i in range(gc.n)], dtype=float)


def simulate_overlap(plan, cluster, slope: float, *, iterations: int = 3, wakeup_ms: float = 0.0,
                     idle_ms: float = WAKEUP_IDLE_MS, send_ms: float = 0.0,
                     handoff_slope: float = 0.0, idle_cap_ms: float = 1.0,
                     memory_slope: float = 0.0, memory_base=None,
                     memory_cap: float = math.inf, **sim_kw):
    """:func:`workbench.simulate` with the per-op extras of the optional model changes:

    * ``overlap``: each op's compute time ``t`` becomes ``t * (1 + slope * x)``, ``x`` its
      overlap with other devices' ops (:func:`busy_overlap`);
    * ``wakeup``: ``wakeup_ms`` more where :func:`woken_ops` marks it;
    * ``handoff``: ``send_ms`` per tensor an op sends to another device
      (:func:`sent_tensors`, static), and ``handoff_slope * min(idle, idle_cap_ms)`` where its
      start is a hand-off after its device idled ``idle`` ms (:func:`handoff_idle`);
    * ``live_memory``: ``t * memory_slope * (live - base) / 1e6``, ``live`` the bytes live when
      the op starts (:func:`live_bytes`) and ``base`` the same op's in a reference schedule
      (``memory_base``, per op; default 0), both capped at ``memory_cap`` bytes (the last-level
      cache: beyond it more live memory evicts nothing more); never less than ``-t / 2``.

    The dynamic extras are read off the previous iteration's schedule (starting from the plain
    simulation; ``iterations`` fixed-point passes). The simulator itself is unchanged: it gets
    a cluster whose op times carry the extra time.

    >>> from workbench import samples, Plan, Cluster, simulate
    >>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
    >>> p = Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"})
    >>> simulate_overlap(p, c, 0.0).makespan == simulate(p, c).makespan
    True
    >>> simulate_overlap(p, c, 0.5).makespan > simulate(p, c).makespan   # b and c overlap
    True
    >>> simulate_overlap(p, c, 0.0, wakeup_ms=1.0).makespan > simulate(p, c).makespan
    True
    >>> simulate_overlap(p, c, 0.0, send_ms=1.0).makespan > simulate(p, c).makespan
    True
    >>> simulate_overlap(p, c, 0.0, memory_slope=0.5).makespan > simulate(p, c).makespan
    True
    """
    from ..simulate import simulate

    if not (slope > 0 or wakeup_ms > 0 or send_ms > 0 or handoff_slope > 0
            or memory_slope > 0):
        return simulate(plan, cluster, **sim_kw)
    g = plan.graph
    base = cluster.op_times(g)[np.arange(g.n_ops), plan.device_array(cluster)]
    static = send_ms * sent_tensors(plan, cluster) if send_ms > 0 else 0.0 * base
    s = simulate(plan, _SlowedOps(cluster, static), **sim_kw)
    dynamic = slope > 0 or wakeup_ms > 0 or handoff_slope > 0 or memory_slope > 0
    mem_base = 0.0 if memory_base is None else np.asarray(memory_base, dtype=float)
    mem_base = np.minimum(mem_base, memory_cap)
    for _ in range(max(1, int(iterations)) if dynamic else 0):
        extra = base * slope * busy_overlap(s.device, s.start, s.end) if slope > 0 else 0.0 * base
        if wakeup_ms > 0:
            extra = extra + wakeup_ms * woken_ops(g, s, idle_ms=idle_ms)
        if handoff_slope > 0:
            idle = handoff_idle(g, s)
            extra = extra + np.where(idle >= 0, handoff_slope * np.minimum(idle, idle_cap_ms),
                                     0.0)
        if memory_slope > 0:
            live = np.minimum(live_bytes(g, s.start, s.end), memory_cap) - mem_base
            extra = extra + np.maximum(base * memory_slope * live / 1e6, -0.5 * base)
        s = simulate(plan, _SlowedOps(cluster, static + extra), **sim_kw)
    return s
