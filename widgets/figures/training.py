"""Views of a judged training plan (:class:`workbench.judge.training.TrainingResult`).

* :func:`training_gantt`: each simulated rank (one per pipeline stage) a lane; forward tasks
  light, backward tasks dark, coloured by micro-batch; the recomputed forward at the start of a
  backward hatched; gaps are the pipeline bubble; below each rank, its NVLink and network
  channels with the tensor-parallel collectives, pipeline sends and data-parallel buckets (when
  the result recorded its links);
* :func:`training_memory_figure`: memory over time of each stage (parameters, gradients and
  optimizer states, plus the activations stashed by micro-batches in flight) and the capacity;
* :func:`training_breakdown_figure`: step time of several results split into compute,
  recomputation, tensor-parallel, pipeline and data-parallel communication, bubble and
  optimizer.

They draw what the result holds (no simulation here).

Examples
--------
>>> from workbench.cluster import Cluster
>>> from workbench.judge.training import simulate_training
>>> from workbench.transforms.parallel import Strategy, parallelize
>>> r = simulate_training(parallelize("gpt:layers=4,hidden=256,heads=4,seq=128",
...                       Cluster.preset("8xA100-80g"),
...                       Strategy(pp=2, global_batch=4, recompute="full")))
>>> fig = training_gantt(r)
>>> fig.layout.meta["figure"], [t.name for t in fig.data]
('training_gantt', ['forward', 'backward', 'recompute', 'pp'])
>>> training_memory_figure(r).layout.meta["figure"]
'training_memory'
>>> [t.name for t in training_breakdown_figure([r]).data][:3]
['compute', 'recompute', 'tp']
"""

from __future__ import annotations

import plotly.graph_objects as go

from ._common import color_cycle, fmt_bytes

__all__ = ["training_gantt", "training_memory_figure", "training_breakdown_figure"]

_PARTS = ("compute", "recompute", "tp", "pp", "bubble", "dp", "optimizer")
_PART_COLORS = {"compute": "#1f77b4", "recompute": "#aec7e8", "tp": "#ff7f0e",
                "pp": "#2ca02c", "bubble": "#d3d3d3", "dp": "#9467bd", "optimizer": "#8c564b",
                "ep": "#e377c2"}


def _expect_result(obj, what: str) -> None:
    """PlanError unless ``obj`` is a TrainingResult (issue 41: a plan, a schedule, a search
    result or None gave an AttributeError from deep inside the figure)."""
    from workbench.errors import PlanError
    from workbench.judge.training import TrainingResult

    if isinstance(obj, TrainingResult):
        return
    hint = " (its .result is one)" if type(obj).__name__ == "SearchResult" else ""
    raise PlanError(f"{what} must be a TrainingResult (simulate_training(plan)), got "
                    f"{type(obj).__name__}{hint}")


def _expect_fig(fig) -> go.Figure:
    if fig is None:
        return go.Figure()
    if not isinstance(fig, go.Figure):
        from workbench.errors import PlanError

        raise PlanError(f"fig must be a plotly Figure or None, got {type(fig).__name__}")
    return fig


def _lane(result, rank: int) -> str:
    return f"stage {result.stage_of.get(rank, rank)} ({result.plan.device_name(rank)})"


def _bar(name, ys, base, width, colors, text, **kw) -> go.Bar:
    return go.Bar(name=name, orientation="h", y=ys, base=base, x=width,
                  marker={"color": colors, "line": {"width": 0}, **kw.pop("marker", {})},
                  hovertext=text, hoverinfo="text", **kw)


def training_gantt(result, *, ranks=None, fig: go.Figure | None = None) -> go.Figure:
    """Pipeline Gantt of ``result`` (``ranks``: the simulated ranks to show, default all)."""
    _expect_result(result, "training_gantt's result")
    fig = _expect_fig(fig)
    if ranks is None:
        ranks = sorted(result.tasks)
    else:
        ranks = list(ranks) if isinstance(ranks, (list, tuple, range, set)) else [ranks]
        bad = [r for r in ranks if isinstance(r, bool) or r not in result.tasks]
        if bad:
            from workbench.errors import PlanError

            raise PlanError(f"training_gantt: rank {bad[0]!r} was not simulated; ranks: "
                            f"{sorted(result.tasks)}")
    groups = {"F": ([], [], [], [], []), "B": ([], [], [], [], []), "R": ([], [], [], [], [])}
    for r in ranks:
        lane = _lane(result, r)
        for start, end, kind, c, m, rec in result.tasks[r]:
            ys, base, width, cols, text = groups[kind]
            ys.append(lane)
            base.append(start)
            width.append(end - start)
            cols.append(color_cycle(m))
            text.append(f"{'forward' if kind == 'F' else 'backward'} chunk {c} micro-batch {m}"
                        f"<br>{start:.2f}-{end:.2f} ms")
            if rec > 0:
                ys, base, width, cols, text = groups["R"]
                ys.append(lane)
                base.append(start)
                width.append(rec)
                cols.append(color_cycle(m))
                text.append(f"recompute chunk {c} micro-batch {m}: {rec:.2f} ms")
    fig.add_trace(_bar("forward", *groups["F"], opacity=0.55))
    fig.add_trace(_bar("backward", *groups["B"], opacity=1.0))
    fig.add_trace(_bar("recompute", *groups["R"], opacity=1.0,
                       marker={"pattern": {"shape": "/", "fgcolor": "white"}}))
    lanes = _link_lanes(result, ranks, fig)
    s = result.plan.strategy
    fig.update_layout(barmode="overlay", height=260 + 36 * (len(ranks) + lanes),
                      title=f"{s.describe()}: step {result.step_ms:.1f} ms",
                      xaxis_title="ms", yaxis={"autorange": "reversed"},
                      meta={"figure": "training_gantt", "step_ms": result.step_ms})
    return fig


_LINK_COLORS = {"tp": "#7f2704", "pp": "#00441b", "dp": "#3f007d", "zero3": "#005f5f",
                "ep": "#7a0177"}
"""Link traffic in dark shades, apart from the micro-batch colours of the task bars (seen in a
screenshot: with the palette's orange, green and purple a TP collective read as micro-batch 1)."""


def _link_lanes(result, ranks, fig) -> int:
    """One bar trace per kind of traffic on the ranks' channels; the number of lanes drawn."""
    shown = set(ranks)
    by_what: dict = {}
    lanes = set()
    for rank, ch, start, end, what, asked in result.links:
        if rank not in shown:
            continue
        lane = f"{_lane(result, rank)} {'NVLink' if ch == 'nvl' else 'network'}"
        lanes.add(lane)
        ys, base, width, text = by_what.setdefault(what, ([], [], [], []))
        ys.append(lane)
        base.append(start)
        width.append(end - start)
        text.append(f"{what} on {lane}<br>{start:.3f}-{end:.3f} ms"
                    + (f" (waited {start - asked:.3f} ms for the link)" if start > asked else ""))
    for what, (ys, base, width, text) in sorted(by_what.items()):
        fig.add_trace(_bar(what, ys, base, width, _LINK_COLORS.get(what, "#7f7f7f"), text))
    return len(lanes)


def training_memory_figure(result, *, fig: go.Figure | None = None) -> go.Figure:
    """Memory over time of each simulated rank, with its device's capacity (dashed)."""
    _expect_result(result, "training_memory_figure's result")
    fig = _expect_fig(fig)
    for i, r in enumerate(sorted(result.memory)):
        pts = result.memory[r]
        xs = [t for t, _ in pts] + [result.step_ms]
        ys = [b / 2**30 for _, b in pts] + [pts[-1][1] / 2**30]
        col = color_cycle(i)
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"shape": "hv", "color": col},
                                 name=_lane(result, r),
                                 hovertemplate="%{x:.1f} ms<br>%{y:.2f} GiB<extra></extra>"))
    caps = {result.plan.cluster.devices[r].memory for r in result.memory}
    for cap in caps:
        fig.add_hline(y=cap / 2**30, line={"dash": "dash", "color": "#d62728"},
                      annotation_text=f"capacity {fmt_bytes(cap)}")
    if result.oom:
        o = result.oom
        fig.add_annotation(x=o["time_ms"], y=o["bytes"] / 2**30, showarrow=True,
                           text=f"out of memory on {o['device']}")
    fig.update_layout(xaxis_title="ms", yaxis_title="GiB", height=360,
                      meta={"figure": "training_memory", "oom": result.oom})
    return fig


def training_breakdown_figure(results, *, labels=None,
                              fig: go.Figure | None = None) -> go.Figure:
    """Step time of each result (its slowest rank) as stacked bars by cause."""
    from workbench.errors import PlanError

    if not isinstance(results, (list, tuple)):
        raise PlanError(f"training_breakdown_figure takes a list of TrainingResults, got "
                        f"{type(results).__name__}" + (" (wrap it in a list)" if type(
                            results).__name__ == "TrainingResult" else ""))
    if not results:
        raise PlanError("training_breakdown_figure: no results to draw")
    for i, r in enumerate(results):
        _expect_result(r, f"training_breakdown_figure's results[{i}]")
    fig = _expect_fig(fig)
    labels = [str(x) for x in labels] if labels is not None else \
        [r.plan.strategy.describe() for r in results]
    if len(labels) != len(results):
        raise PlanError(f"training_breakdown_figure: {len(labels)} labels for {len(results)} "
                        f"results")
    rows = [r.breakdown() for r in results]
    for part in _PARTS + (("ep",) if any("ep" in b for b in rows) else ()):  # ep: all-to-all
        fig.add_trace(go.Bar(name=part, orientation="h", y=labels,
                             x=[b.get(part, 0.0) / 1e3 for b in rows],
                             marker={"color": _PART_COLORS[part]},
                             hovertemplate=f"{part}: %{{x:.3f}} s<extra></extra>"))
    fig.update_layout(barmode="stack", xaxis_title="step time (s)",
                      height=320 + 48 * len(rows), yaxis={"autorange": "reversed"},
                      meta={"figure": "training_breakdown"})
    return fig
