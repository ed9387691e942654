"""What-if panel: change the cluster with sliders (link bandwidth and latency, device count,
device memory and speed) and see the chosen methods re-solved: the Gantt charts (one time
axis) and the table are redrawn after every change, and two sweeps plot each method's makespan
against the bandwidth and against the device count over the sliders' ranges.

The panel only builds clusters and calls :func:`workbench.compare` (once per slider change, once
per point of a sweep); it draws the schedules each comparison kept (nothing is simulated again)
with :func:`~widgets.figures.gantt_multiples` and the sweeps with :func:`whatif_figure`.

Examples
--------
>>> import workbench as wb
>>> g = wb.samples.transformer(40, seed=0)
>>> panel = WhatIfPanel(g, wb.Cluster.preset("2xV100-pcie"), methods=["single", "m_topo"])
>>> panel.cluster.names
['gpu0', 'gpu1']
>>> panel.devices.value = 3
>>> panel.cluster.names, sorted(panel.table["method"])
(['gpu0', 'gpu1', 'gpu2'], ['m_topo', 'single'])
>>> df = panel.sweep("devices", values=[1, 2])
>>> sorted(set(df["devices"])), panel.sweep_figure.layout.meta["x"]
([1, 2], 'devices')
"""

from __future__ import annotations

import html as _html
import math
import time

import ipywidgets as W
import numpy as np
import plotly.graph_objects as go

from .figurewidget import FigureWidget
from .figures.gantt import gantt_multiples
from .figures.methods import method_color
from .tables import results_table_html
from .views import fill, replace_figure

__all__ = ["WhatIfPanel", "whatif_figure", "SWEEPS"]

GBps = 1e6  # 1 GB/s in bytes per millisecond
SWEEPS = {"bandwidth": "link bandwidth (GB/s, log)", "devices": "devices"}
"""Sweepable parameter -> axis title."""


def whatif_figure(df, x: str, *, title: str | None = None,
                  fig: go.Figure | None = None) -> go.Figure:
    """Makespan against ``x`` (a column of ``df``), one line per method in its colour.

    ``df`` has columns ``method``, ``x`` and ``makespan_ms``; infeasible rows (``feasible``
    False) are drawn as open markers.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"method": ["a", "a", "b", "b"], "devices": [1, 2, 1, 2],
    ...                    "makespan_ms": [4.0, 3.0, 4.0, 2.5]})
    >>> [t.name for t in whatif_figure(df, "devices").data]
    ['a', 'b']
    """
    if x not in df or "method" not in df or "makespan_ms" not in df:
        raise ValueError(f"whatif_figure needs columns method, {x} and makespan_ms (got "
                         f"{', '.join(map(str, df.columns))})")
    fig = go.Figure() if fig is None else fig
    fig.data = []
    for m in dict.fromkeys(df["method"].astype(str)):
        d = df[df["method"].astype(str) == m].sort_values(x)
        feas = d["feasible"].fillna(False).astype(bool).to_numpy() if "feasible" in d \
            else np.ones(len(d), bool)
        fig.add_trace(go.Scatter(
            name=m, x=d[x], y=d["makespan_ms"], mode="lines+markers",
            line=dict(color=method_color(m), width=2),
            marker=dict(color=method_color(m), size=8,
                        symbol=["circle" if f else "circle-open" for f in feas]),
            hovertemplate=f"<b>{m}</b><br>{x} %{{x:.3g}}<br>makespan %{{y:.4g}} ms"
                          "<extra></extra>"))
    fig.update_layout(
        title=dict(text=title or f"makespan vs {SWEEPS.get(x, x)}", x=0.01),
        template="plotly_white", autosize=True, height=360,
        margin=dict(l=10, r=10, t=50, b=40), hovermode="closest",
        xaxis=dict(title=SWEEPS.get(x, x), type="log" if x == "bandwidth" else "linear"),
        yaxis=dict(title="makespan (ms)", rangemode="tozero"),
        legend=dict(orientation="h", y=-0.2, yanchor="top"),
        meta={"figure": "whatif", "x": x})
    return fig


class WhatIfPanel(W.VBox):
    """Sliders over a homogeneous cluster; every change re-solves ``methods``.

    Parameters
    ----------
    graph : OpGraph
    cluster : Cluster, optional
        Starting point of the sliders (its first device and its intra-host link); default
        ``4xV100-nvlink``.
    methods : list of str
        Methods re-solved on every change.
    time_limit : float
        Seconds per method.
    max_devices : int
        Upper end of the device-count slider.

    Attributes
    ----------
    cluster : Cluster
        The cluster the sliders describe now.
    comparison : workbench.comparison.Comparison
        The last :func:`workbench.compare` result; ``table`` its table, ``schedules`` its
        schedules (those the table's numbers come from).
    """

    def __init__(self, graph, cluster=None, *, methods=("m_topo", "heft", "dpos"),
                 time_limit: float = 5.0, max_devices: int = 8):
        super().__init__()
        import workbench as wb

        from .figures._common import expect

        expect(graph, "graph", "WhatIfPanel's graph")  # issue 41: None was an AttributeError
        expect(cluster, "cluster", "WhatIfPanel's cluster", optional=True)
        unknown = [m for m in methods if m not in wb.SOLVERS]
        if unknown:
            raise ValueError(f"unknown methods {', '.join(unknown)}; registered: "
                             f"{', '.join(wb.SOLVERS)}")
        if not methods:
            raise ValueError("WhatIfPanel needs at least one method")
        base = cluster if cluster is not None else wb.Cluster.preset("4xV100-nvlink")
        d0 = base.devices[0]
        link = base.intra_host if getattr(base, "intra_host", None) is not None else \
            wb.Link(0.01, 45 * GBps)
        self.graph, self.methods, self.time_limit = graph, list(methods), float(time_limit)
        self._kind = d0.kind
        bw = link.bandwidth / GBps if math.isfinite(link.bandwidth) else 100.0
        mem = d0.memory / 2**30 if math.isfinite(d0.memory) else 64.0
        style = {"description_width": "150px"}
        lay = W.Layout(width="420px")
        self.bandwidth = W.FloatLogSlider(value=bw, base=10, min=-1, max=3, step=0.1,
                                          description="bandwidth (GB/s)", style=style,
                                          layout=lay, continuous_update=False)
        self.latency = W.FloatSlider(value=link.latency * 1000, min=0, max=200, step=1,
                                     description="latency (µs)", style=style, layout=lay,
                                     continuous_update=False)
        self.devices = W.IntSlider(value=len(base.names), min=1,
                                   max=max(max_devices, len(base.names)),
                                   description="devices", style=style, layout=lay,
                                   continuous_update=False)
        self.memory = W.FloatLogSlider(value=mem, base=10, min=-2, max=2.5, step=0.05,
                                       description="memory (GiB)", style=style, layout=lay,
                                       continuous_update=False)
        self.speed = W.FloatSlider(value=d0.speed, min=0.25, max=4.0, step=0.05,
                                   description="speed (x V100)", style=style, layout=lay,
                                   continuous_update=False)
        self.status = W.HTML()
        self.status.add_class("wb-whatif-status")
        self.gantts = None  # built from the first drawing, so it opens at its cell's width
        self.table_view = W.HTML()
        self.sweep_buttons = {k: W.Button(description=f"sweep {k}", icon="line-chart")
                              for k in SWEEPS}
        for k, b in self.sweep_buttons.items():
            b.on_click(lambda _b, k=k: self.sweep(k))
        self.sweep_figure = FigureWidget(go.Figure(layout=dict(
            autosize=True, height=120, template="plotly_white", xaxis=dict(visible=False),
            yaxis=dict(visible=False), meta={"figure": "empty"},
            title=dict(text="press a sweep button", x=0.01))))
        fill(self.sweep_figure).add_class("wb-whatif-sweep")
        for s in (self.bandwidth, self.latency, self.devices, self.memory, self.speed):
            s.observe(lambda _ch: self.update(), "value")
        sliders = W.VBox([self.bandwidth, self.latency, self.devices, self.memory, self.speed])
        from .board import FILL_CSS
        from .fit import CellFit

        self.comparison, self.table, self.schedules, self.sweeps = None, None, {}, {}
        self.update()
        self.children = [W.HTML(FILL_CSS), CellFit(), W.HBox([sliders, W.VBox([self.status,
                                                  W.HBox(list(self.sweep_buttons.values()))])]),
                         self.table_view, self.gantts, self.sweep_figure]

    def make_cluster(self, *, devices: int | None = None, bandwidth: float | None = None):
        """The cluster of the sliders (``devices``/``bandwidth`` override them)."""
        import workbench as wb

        n = int(devices if devices is not None else self.devices.value)
        bw = float(bandwidth if bandwidth is not None else self.bandwidth.value)
        mem = float(self.memory.value) * 2**30
        devs = [wb.Device(f"{self._kind}{i}", self._kind, mem, float(self.speed.value))
                for i in range(n)]
        return wb.Cluster(devs, intra_host=wb.Link(float(self.latency.value) / 1000, bw * GBps),
                          name=f"{n}x{self._kind} {bw:.3g} GB/s {self.latency.value:.0f} µs "
                               f"{self.memory.value:.3g} GiB x{self.speed.value:.2f}")

    def _solve_all(self, cluster):
        import workbench as wb

        return wb.compare(self.graph, cluster, methods=self.methods,
                          time_limit=self.time_limit, progress=False)

    def update(self) -> None:
        """Re-solve the methods on the sliders' cluster and redraw the table and Gantts."""
        self.cluster = self.make_cluster()
        self.status.value = f"&#8987; re-solving {len(self.methods)} methods ..."
        t0 = time.perf_counter()
        cmp = self._solve_all(self.cluster)
        self.comparison, self.table, self.schedules = cmp, cmp.table, cmp.schedules
        df = cmp.table
        self.table_view.value = results_table_html(cmp)
        if self.schedules:
            new = gantt_multiples(self.schedules)
            if self.gantts is None:
                self.gantts = FigureWidget(new)
                fill(self.gantts).add_class("wb-whatif-gantt")
            else:
                replace_figure(self.gantts, new)
        elif self.gantts is None:
            self.gantts = FigureWidget(go.Figure(layout=dict(
                autosize=True, title=dict(text="no method ran", x=0.01))))
        failed = df[df["status"] == "error"]["method"].tolist()
        self.status.value = (f"<b>{_html.escape(self.cluster.name)}</b>: solved in "
                             f"{time.perf_counter() - t0:.1f} s"
                             + (f"; failed: {_html.escape(', '.join(failed))}" if failed
                                else ""))

    def sweep(self, what: str, values=None):
        """Makespan of every method over a range of ``what`` (``bandwidth`` or ``devices``),
        the other sliders fixed; draws :attr:`sweep_figure` and returns the tidy frame."""
        import pandas as pd

        if what not in SWEEPS:
            raise ValueError(f"unknown sweep {what!r}; choose one of {', '.join(SWEEPS)}")
        if values is None:
            if what == "bandwidth":
                values = np.round(np.logspace(self.bandwidth.min, self.bandwidth.max, 7), 3)
            else:
                values = list(range(1, self.devices.max + 1))
        rows = []
        self.status.value = f"&#8987; sweeping {what} over {len(values)} values ..."
        for v in values:
            c = (self.make_cluster(bandwidth=float(v)) if what == "bandwidth"
                 else self.make_cluster(devices=int(v)))
            for _, r in self._solve_all(c).table.iterrows():
                rows.append({"method": r["method"], what: v, "makespan_ms": r["makespan_ms"],
                             "feasible": r["feasible"], "status": r["status"]})
        out = pd.DataFrame(rows)
        self.sweeps[what] = out
        replace_figure(self.sweep_figure, whatif_figure(
            out[out["status"] != "error"], what,
            title=f"{self.graph.name}: makespan vs {SWEEPS[what]}"))
        self.status.value = f"swept {what} over {len(values)} values"
        return out
