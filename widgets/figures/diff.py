"""Two plans side by side (:func:`workbench.diff`): both Gantt charts on one time axis with the
ops that moved outlined, and plan B's DAG with the moved ops ringed.

Traces of :func:`diff_figure`: the Gantt traces of each plan (see
:mod:`widgets.figures.gantt`), then ``moved ops`` once per plan (outlined bars). The legend
sits at the foot of the figure, under the time axis.

Examples
--------
>>> import workbench as wb
>>> g, c = wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie")
>>> a = wb.Plan(g, {v: "gpu0" for v in g.ops}, method="one")
>>> d = wb.diff(a, wb.solve(g, c, method="m_topo"), c)
>>> fig = diff_figure(d)
>>> fig.layout.meta["figure"], fig.layout.meta["moved"], fig.layout.xaxis.matches
('diff', ['c', 'd'], 'x2')
>>> [t.name for t in fig.data if t.name == "moved ops"]
['moved ops', 'moved ops']
>>> fig.layout.legend.yref, fig.layout.legend.y  # at the foot, clear of the panels' titles
('container', 0.0)
"""

from __future__ import annotations

import html as _html

import numpy as np

from .gantt import _selected_bars, gantt_multiples

__all__ = ["diff_dag_figure", "diff_figure", "diff_html"]

_LEGEND_PX = 40  # room under the time axis's title for the legend


def diff_figure(d, *, height_per_lane: int = 22):
    """Both plans' Gantt charts on one time axis (fastest on top), moved ops outlined."""
    moved = d.moved["op"].tolist()
    ss = {d.name_a: d.schedule_a, d.name_b: d.schedule_b}
    fig = gantt_multiples(ss, height_per_lane=height_per_lane)
    for r, name in enumerate(fig.layout.meta["order"], start=1):
        s = ss[name]
        names = np.array(s.cluster.names, dtype=object)
        dev = names[s.device] if s.graph.n_ops else np.zeros(0, object)
        t = _selected_bars(s, [v for v in moved if v in s.graph.index], dev, s.end - s.start)
        t.name = "moved ops"
        t.hovertemplate = "moved: %{customdata}<extra></extra>"
        t.showlegend = r == 1
        fig.add_trace(t, row=r, col=1)
    # the legend goes under the time axis, at the foot of the figure: above the first panel
    # (where the small multiples put it) it ran into that panel's centred title
    fig.update_layout(
        title=dict(text=f"{_html.escape(d.name_a)} vs {_html.escape(d.name_b)}: "
                        f"{len(moved)} ops moved (black outline), one time axis", x=0.01),
        height=fig.layout.height + _LEGEND_PX,
        margin=dict(b=fig.layout.margin.b + _LEGEND_PX),
        legend=dict(orientation="h", yref="container", y=0.0, yanchor="bottom", x=0.01,
                    xanchor="left"),
        meta={**fig.layout.meta, "figure": "diff", "moved": moved,
              "plans": [d.name_a, d.name_b]})
    return fig


def diff_dag_figure(d, plan_b, cluster, **kw):
    """Plan B's DAG coloured by device, the moved ops ringed (``selected`` trace)."""
    from .dag import dag_figure

    return dag_figure(plan_b.graph, cluster=cluster, plan=plan_b, schedule=d.schedule_b,
                      selected=d.moved["op"].tolist(),
                      title=f"{d.name_b}: placement, ops moved from {d.name_a} ringed", **kw)


def diff_html(d, max_rows: int = 8) -> str:
    """The diff in words and small tables (moves by device pair, busy time, link bytes)."""
    esc = _html.escape
    lines = "".join(f"<li>{esc(x)}</li>" for x in d.summary().splitlines())
    parts = [f"<div class='wb-diff'><b>{esc(d.name_a)} vs {esc(d.name_b)}</b><ul>{lines}</ul>"]
    for title, df in (("moves by device pair", d.moves), ("busy time per device", d.busy),
                      ("bytes per link", d.links)):
        if len(df):
            parts.append(f"<details><summary>{title}</summary>"
                         + df.head(max_rows).to_html(index=False, float_format="%.4g")
                         + "</details>")
    return "".join(parts) + "</div>"
