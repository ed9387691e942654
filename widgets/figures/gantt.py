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

from ._common import CRITICAL, KIND_NAMES, device_colors, expect, fmt_bytes, fmt_ms
from .methods import method_color

__all__ = ["gantt_figure", "gantt_lanes", "gantt_multiples", "idle_gaps", "transfer_lanes",
           "utilisation"]

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


def utilisation(schedule) -> dict:
    """Device name -> busy fraction of the makespan (0..1).

    >>> from workbench import samples, Cluster, Plan, simulate
    >>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
    >>> utilisation(simulate(Plan(g, {v: "gpu0" for v in g.ops}), c))
    {'gpu0': 1.0, 'gpu1': 0.0}
    """
    T = float(schedule.makespan)
    dur = schedule.end - schedule.start
    out = {}
    for i, d in enumerate(schedule.cluster.names):
        busy = float(dur[schedule.device == i].sum())
        out[d] = min(1.0, busy / T) if T > 0 else 0.0
    return out


def gantt_figure(schedule, *, selected: Iterable[str] = (), show_idle: bool = True,
                 show_critical: bool = True, all_devices: bool = True,
                 title: str | None = None, height: int | None = None,
                 xmax: float | None = None, fig: go.Figure | None = None) -> go.Figure:
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
    xmax : float, optional
        End of the time axis (ms): give several Gantts the same ``xmax`` to share one time
        axis (default: this schedule's makespan).
    fig : Figure, optional
        Cleared and drawn into.
    """
    expect(schedule, "schedule", "gantt_figure's schedule")
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
        m = schedule.method or "plan"
        title = (f"<span style='color:{method_color(m)}'>■</span> {m} on "
                 f"{schedule.cluster.name}: makespan {fmt_ms(T)}")
    util = utilisation(schedule)
    ticktext = [f"{ln} · {100 * util[ln]:.0f} %" if ln in util else ln for ln in lanes]
    xend = max(float(xmax), T) if xmax is not None else T
    fig.update_layout(
        title=dict(text=title, x=0.01), template="plotly_white", barmode="overlay",
        bargap=0.25, height=height or max(280, 100 + 34 * len(lanes)),
        margin=dict(l=10, r=10, t=60, b=78), hovermode="closest", autosize=True,
        xaxis=dict(title="time (ms)", range=[0, xend * 1.02 if xend > 0 else 1],
                   zeroline=False),
        yaxis=dict(categoryorder="array", categoryarray=list(reversed(lanes)), type="category",
                   tickvals=lanes, ticktext=ticktext),
        legend=dict(orientation="h", x=0, y=0.005, yanchor="bottom", yref="container"),
        shapes=[dict(type="line", x0=T, x1=T, y0=0, y1=1, yref="paper",
                     line=dict(color=CRITICAL, dash="dot", width=1.5))],
        meta={"figure": "gantt", "method": schedule.method, "makespan": T, "lanes": lanes,
              "utilisation": util, "xmax": xend})
    return fig


def gantt_multiples(schedules: dict, *, max_plans: int = 12, height_per_lane: int = 22,
                    fig: go.Figure | None = None) -> go.Figure:
    """Small multiples: one Gantt per plan, stacked on **one shared time axis**, fastest first.

    Parameters
    ----------
    schedules : dict
        Method -> Schedule.
    max_plans : int
        At most this many panels (the fastest); the rest are named in the title.

    >>> import workbench as wb
    >>> g, c = wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie")
    >>> ss = {m: wb.simulate(wb.solve(g, c, method=m), c) for m in ("single", "m_topo")}
    >>> fig = gantt_multiples(ss)
    >>> fig.layout.meta["order"], fig.layout.xaxis.matches  # every panel's x follows the last
    (['m_topo', 'single'], 'x2')
    """
    from plotly.subplots import make_subplots

    order = sorted(schedules, key=lambda m: (float(schedules[m].makespan), str(m)))
    shown, rest = order[:max_plans], order[max_plans:]
    figs = {m: gantt_figure(schedules[m], show_idle=False,
                            title=(f"<span style='color:{method_color(str(m))}'>■</span> {m}: "
                                   f"makespan {fmt_ms(schedules[m].makespan)}"))
            for m in shown}
    lanes = {m: figs[m].layout.meta["lanes"] for m in shown}
    weights = [max(2, len(lanes[m])) for m in shown] or [1]
    new = make_subplots(rows=max(1, len(shown)), cols=1, shared_xaxes=True,
                        vertical_spacing=min(0.08, 0.3 / max(1, len(shown))),
                        row_heights=[w / sum(weights) for w in weights],
                        subplot_titles=[figs[m].layout.title.text for m in shown])
    if fig is None:
        fig = new
    else:
        fig.data = []
        fig.layout = new.layout
    seen = set()
    for r, m in enumerate(shown, start=1):
        for t in figs[m].data:
            t = go.Bar(t)
            t.showlegend = t.name not in seen and t.name not in ("selected",)
            seen.add(t.name)
            t.legendgroup = t.name
            fig.add_trace(t, row=r, col=1)
        ya = figs[m].layout.yaxis
        fig.update_yaxes(categoryorder="array", categoryarray=ya.categoryarray,
                         type="category", tickvals=ya.tickvals, ticktext=ya.ticktext,
                         row=r, col=1)
    T = max((float(schedules[m].makespan) for m in shown), default=1.0)
    fig.update_xaxes(range=[0, T * 1.02 if T > 0 else 1])
    if shown:
        fig.update_xaxes(title="time (ms), one axis for every plan", row=len(shown), col=1)
    title = f"{len(shown)} plans on one time axis, fastest first"
    if rest:
        title += f" ({len(rest)} more not drawn: {', '.join(rest)})"
    fig.update_layout(title=dict(text=title, x=0.01), template="plotly_white",
                      barmode="overlay", bargap=0.25, autosize=True,
                      height=90 + height_per_lane * sum(weights) + 40 * len(shown),
                      margin=dict(l=10, r=10, t=70, b=40),
                      legend=dict(orientation="h", y=1.0, yanchor="bottom", x=0.5,
                                  xanchor="left"),
                      meta={"figure": "gantt_multiples", "order": shown, "left_out": rest,
                            "xmax": T})
    return fig


def _selected_bars(schedule, selected, dev_names, dur):
    g = schedule.graph
    idx = np.array([g.index[v] for v in selected if v in g.index], dtype=np.int64)
    return go.Bar(name="selected", orientation="h", y=dev_names[idx],
                  base=schedule.start[idx], x=np.maximum(dur[idx], _MIN_BAR),
                  customdata=np.array(g.ops, dtype=object)[idx], showlegend=False,
                  hovertemplate="selected: %{customdata}<extra></extra>",
                  marker=dict(color="rgba(0,0,0,0)", line=dict(color="#111111", width=3.5)))
