"""Gantt chart of a simulated :class:`~workbench.plan.Schedule`.

One lane per device (all devices of the cluster, so an unused one shows as idle) and one per
directed link that carries a transfer (``gpu0->gpu1``; ``gpu0->host`` in host mode). Ops and
transfers are bars; idle gaps on devices are drawn as faint hatched bars; the realised critical
path is outlined in red; backward ops are hatched (and update ops dotted) so training steps show
their forward/backward halves.

Traces: ``idle``, one ``<kind> ops`` trace per op kind present, ``transfers``,
``critical path``, ``selected``.

Examples
--------
>>> from workbench import samples, Cluster, Plan, simulate
>>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
>>> s = simulate(Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"}), c)
>>> fig = gantt_figure(s)
>>> gantt_lanes(s)
['gpu0', 'gpu1', 'gpu0->gpu1', 'gpu1->gpu0']
>>> [t.name for t in fig.data]
['idle', 'fwd ops', 'transfers', 'critical path', 'selected']
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import plotly.graph_objects as go

from ._common import CRITICAL, KIND_NAMES, device_colors, fmt_bytes, fmt_ms

__all__ = ["gantt_figure", "gantt_lanes", "idle_gaps", "transfer_lanes"]

_PATTERN = {"fwd": "", "bwd": "/", "update": ".", "other": "x"}
_MIN_BAR = 1e-9


def transfer_lanes(schedule) -> list[str]:
    """Channel name of every transfer (``src->dst``, ``host`` for host DRAM)."""
    names = list(schedule.cluster.names) + ["host"]
    return [f"{names[s]}->{names[d]}" for s, d in zip(schedule.t_src.tolist(),
                                                      schedule.t_dst.tolist())]


def gantt_lanes(schedule, *, all_devices: bool = True) -> list[str]:
    """Lanes top to bottom: devices in cluster order, then the links used, sorted."""
    names = list(schedule.cluster.names)
    if not all_devices:
        used = set(schedule.device.tolist())
        names = [d for i, d in enumerate(names) if i in used]
    return names + sorted(set(transfer_lanes(schedule)))


def idle_gaps(schedule, *, min_ms: float = 0.0) -> list[tuple[str, float, float]]:
    """Idle intervals ``(device, start, end)`` of every device within ``[0, makespan]``.

    >>> from workbench import samples, Cluster, Plan, simulate
    >>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
    >>> s = simulate(Plan(g, {v: "gpu0" for v in g.ops}), c)
    >>> idle_gaps(s)
    [('gpu1', 0.0, 6.0)]
    """
    out = []
    T = float(schedule.makespan)
    tol = max(1e-9, 1e-9 * T)
    for d_i, d in enumerate(schedule.cluster.names):
        on = np.flatnonzero(schedule.device == d_i)
        if len(on) == 0:
            if T > tol:
                out.append((d, 0.0, T))
            continue
        o = on[np.argsort(schedule.start[on], kind="stable")]
        st, en = schedule.start[o], np.maximum.accumulate(schedule.end[o])
        lo = np.r_[0.0, en]
        hi = np.r_[st, T]
        keep = hi - lo > max(min_ms, tol)
        out.extend((d, float(a), float(b)) for a, b in zip(lo[keep], hi[keep]))
    return out


def gantt_figure(schedule, *, selected: Iterable[str] = (), show_idle: bool = True,
                 show_critical: bool = True, all_devices: bool = True,
                 title: str | None = None, height: int | None = None,
                 fig: go.Figure | None = None) -> go.Figure:
    """Draw ``schedule`` as a Gantt chart (see the module docstring for the traces).

    Parameters
    ----------
    schedule : Schedule
        From :func:`workbench.simulate`.
    selected : iterable of op names
        Ops outlined in black in the ``selected`` trace (linked views set it).
    show_idle, show_critical : bool
        Draw the idle gaps / the realised critical path.
    all_devices : bool
        Keep a lane for devices that run nothing.
    fig : Figure, optional
        Cleared and drawn into.
    """
    g = schedule.graph
    names = list(schedule.cluster.names)
    cmap = device_colors(names)
    lanes = gantt_lanes(schedule, all_devices=all_devices)
    T = float(schedule.makespan)
    ops = np.array(g.ops, dtype=object)
    dev_names = np.array(names, dtype=object)[schedule.device] if g.n_ops else np.zeros(0, object)
    kinds = np.array(KIND_NAMES, dtype=object)[g.c.op_kind] if g.n_ops else np.zeros(0, object)
    types = [g.nx.nodes[v]["op_type"] or "?" for v in g.ops]
    dur = schedule.end - schedule.start
    hover = [f"<b>{v}</b> ({t}, {k})<br>{d}: {fmt_ms(a)} → {fmt_ms(b)} ({fmt_ms(b - a)})"
             for v, t, k, d, a, b in zip(g.ops, types, kinds, dev_names,
                                         schedule.start.tolist(), schedule.end.tolist())]
    hover = np.array(hover, dtype=object)
    traces = []
    if show_idle:
        gaps = idle_gaps(schedule)
        traces.append(go.Bar(
            name="idle", orientation="h", y=[d for d, _, _ in gaps],
            base=[a for _, a, _ in gaps], x=[b - a for _, a, b in gaps],
            marker=dict(color="rgba(200,200,200,0.25)", line=dict(width=0),
                        pattern=dict(shape=".", fgcolor="rgba(150,150,150,0.5)", size=4)),
            hovertemplate="idle %{x:.3g} ms<extra>%{y}</extra>", showlegend=True))
    for k in KIND_NAMES:
        m = kinds == k
        if not m.any():
            continue
        traces.append(go.Bar(
            name=f"{k} ops", orientation="h", y=dev_names[m], base=schedule.start[m],
            x=np.maximum(dur[m], _MIN_BAR), customdata=ops[m], text=hover[m],
            textposition="none", hovertemplate="%{text}<extra></extra>",
            marker=dict(color=[cmap[d] for d in dev_names[m]],
                        opacity=1.0 if k == "fwd" else 0.75,
                        line=dict(color="white", width=0.5),
                        pattern=dict(shape=_PATTERN[k], fgcolor="white", size=6,
                                     solidity=0.35))))
    lane_t = np.array(transfer_lanes(schedule), dtype=object)
    if len(lane_t):
        prod = ops[schedule.t_op]
        t_hover = [f"<b>{v}</b> → {ln}<br>{fmt_bytes(b)}: {fmt_ms(a)} → {fmt_ms(e)}"
                   for v, ln, b, a, e in zip(prod, lane_t, schedule.t_bytes.tolist(),
                                             schedule.t_start.tolist(),
                                             schedule.t_end.tolist())]
    else:
        prod, t_hover = np.zeros(0, object), []
    traces.append(go.Bar(
        name="transfers", orientation="h", y=lane_t, base=schedule.t_start,
        x=np.maximum(schedule.t_end - schedule.t_start, _MIN_BAR), customdata=prod,
        text=t_hover, textposition="none", hovertemplate="%{text}<extra></extra>",
        marker=dict(color="#7f7f7f", line=dict(color="white", width=0.5))))
    # realised critical path, outlined
    cy, cb, cx, cc = [], [], [], []
    if show_critical:
        for kind, item in schedule.critical_path:
            if kind == "op":
                i = g.index[item]
                cy.append(dev_names[i]), cb.append(schedule.start[i])
                cx.append(max(dur[i], _MIN_BAR)), cc.append(item)
            else:
                k = int(item)
                cy.append(lane_t[k]), cb.append(schedule.t_start[k])
                cx.append(max(schedule.t_end[k] - schedule.t_start[k], _MIN_BAR))
                cc.append(f"{ops[schedule.t_op[k]]} (transfer)")
    traces.append(go.Bar(
        name="critical path", orientation="h", y=cy, base=cb, x=cx, customdata=cc,
        hovertemplate="critical: %{customdata}<extra></extra>",
        marker=dict(color="rgba(0,0,0,0)",
                    line=dict(color=CRITICAL, width=2.5 if len(cy) <= 60 else 1.2))))
    traces.append(_selected_bars(schedule, selected, dev_names, dur))
    fig = go.Figure() if fig is None else fig
    fig.data = []
    fig.add_traces(traces)
    if title is None:
        title = (f"{schedule.method or 'plan'} on {schedule.cluster.name}: "
                 f"makespan {fmt_ms(T)}")
    fig.update_layout(
        title=dict(text=title, x=0.01), template="plotly_white", barmode="overlay",
        bargap=0.25, height=height or max(260, 60 + 34 * len(lanes)),
        margin=dict(l=10, r=10, t=45, b=40), hovermode="closest",
        xaxis=dict(title="time (ms)", range=[0, T * 1.02 if T > 0 else 1], zeroline=False),
        yaxis=dict(categoryorder="array", categoryarray=list(reversed(lanes)), type="category"),
        legend=dict(orientation="h", y=-0.18),
        shapes=[dict(type="line", x0=T, x1=T, y0=0, y1=1, yref="paper",
                     line=dict(color=CRITICAL, dash="dot", width=1.5))],
        meta={"figure": "gantt", "method": schedule.method, "makespan": T, "lanes": lanes})
    return fig


def _selected_bars(schedule, selected, dev_names, dur):
    g = schedule.graph
    idx = np.array([g.index[v] for v in selected if v in g.index], dtype=np.int64)
    return go.Bar(name="selected", orientation="h", y=dev_names[idx],
                  base=schedule.start[idx], x=np.maximum(dur[idx], _MIN_BAR),
                  customdata=np.array(g.ops, dtype=object)[idx], showlegend=False,
                  hovertemplate="selected: %{customdata}<extra></extra>",
                  marker=dict(color="rgba(0,0,0,0)", line=dict(color="#111111", width=3.5)))
