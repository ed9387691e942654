"""The judge against reality (:func:`residuals`): a traced run of a plan lined up with its
simulated schedule.

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

__all__ = ["Residuals", "median_timeline", "residuals"]


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
        :meth:`workbench.fidelity.model.JudgeModel.simulate`) is given.

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


