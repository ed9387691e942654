"""Memory over time of a simulated schedule: per device its live memory (a step line, from
:func:`workbench.judge.liveness.memory_timeline`), its static sum of op memory (dotted) and its
capacity (dashed, where finite and at most twice the larger of the two, so the curves stay
readable), so a plan that fits by one and not by the other shows.

Examples
--------
>>> import workbench as wb
>>> g, c = wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie")
>>> s = wb.simulate(wb.Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"}), c)
>>> fig = memory_figure(s)
>>> [t.name for t in fig.data][:3]
['gpu0 live', 'gpu0 static sum', 'gpu1 live']
>>> fig.layout.meta["figure"], bool(max(fig.data[0].y) == s.peak_live_memory["gpu0"])
('memory', True)
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from workbench.judge.liveness import memory_timeline

from ._common import device_colors, fmt_bytes

__all__ = ["memory_figure"]


def memory_figure(schedule, *, xmax: float | None = None, height: int | None = 300,
                  fig: go.Figure | None = None) -> go.Figure:
    """Live memory per device over the step of ``schedule``, with each device's static sum
    and capacity; the x axis is the Gantt's (ms, up to ``xmax`` when given)."""
    fig = fig if fig is not None else go.Figure()
    cluster = schedule.cluster
    colors = device_colors(cluster.names)
    end = max(float(schedule.makespan), 1e-9)
    used = set(np.asarray(schedule.device).tolist())
    for i, (name, (t, b)) in enumerate(memory_timeline(schedule).items()):
        if i not in used and b.max(initial=0.0) == 0.0:
            continue
        col = colors[name]
        xs, ys = np.r_[t, end], np.r_[b, b[-1]]
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="lines", line={"shape": "hv", "color": col, "width": 2},
            name=f"{name} live", legendgroup=name,
            hovertemplate=f"{name}<br>%{{x:.3f}} ms<br>live %{{y:.4s}}B<extra></extra>"))
        static = float(schedule.peak_memory.get(name, 0.0))
        fig.add_trace(go.Scatter(
            x=[0.0, end], y=[static, static], mode="lines", legendgroup=name,
            line={"color": col, "dash": "dot", "width": 1}, name=f"{name} static sum",
            hovertemplate=f"{name}: static sum {fmt_bytes(static)}<extra></extra>"))
        cap = cluster.devices[i].memory
        if math.isfinite(cap) and cap <= 2 * max(static, float(b.max(initial=0.0))):
            fig.add_trace(go.Scatter(
                x=[0.0, end], y=[cap, cap], mode="lines", legendgroup=name,
                line={"color": col, "dash": "dash", "width": 1}, name=f"{name} capacity",
                hovertemplate=f"{name}: capacity {fmt_bytes(cap)}<extra></extra>"))
    fig.update_layout(
        title={"text": f"memory over time: {schedule.method or 'plan'}", "x": 0.01,
               "font": {"size": 13}},
        height=height, margin={"l": 60, "r": 10, "t": 34, "b": 10},
        xaxis={"title": "time (ms)", "range": [0, xmax if xmax is not None else end]},
        yaxis={"title": "bytes", "tickformat": "~s", "rangemode": "tozero"},
        legend={"font": {"size": 10}, "orientation": "h", "y": -0.32, "x": 0},
        meta={"figure": "memory", "method": schedule.method})
    return fig
