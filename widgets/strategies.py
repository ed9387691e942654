"""Views of a training comparison (:func:`workbench.compare` on an LLM training problem,
:mod:`workbench.compare_training`): the strategies side by side as an HTML table (the
strategy's knobs, the judged step and its breakdown, the peak memory a GPU, whether it fits,
the gap to the bound), and the report's section with the breakdown of every row and, for the
chosen row, the pipeline Gantt and the memory over time
(:mod:`widgets.figures.training`). Shared by the board and the report; they draw what the
comparison holds (``cmp.training``: the judged results), nothing is judged again.

Examples
--------
>>> import workbench as wb
>>> from workbench.workloads import resolve
>>> g, _ = resolve("gpt:layers=2,hidden=128,heads=4,seq=64,vocab=1000")
>>> cmp = wb.compare(g, wb.Cluster.preset("8xA100-80g"), methods=["ddp", "zero"],
...                  global_batch=16, progress=False)
>>> html = strategy_table_html(cmp)
>>> "bubble" in html and "ddp" in html and "fits" in html
True
>>> [f.layout.meta["figure"] for f in row_figures(cmp, "ddp")]
['training_gantt', 'training_memory']
"""

from __future__ import annotations

import html as _html
import math

from workbench.comparison import row_flags

from .figures._common import fmt_bytes
from .figures.compare import ranked
from .figures.methods import method_colors
from .figures.training import training_breakdown_figure, training_gantt, training_memory_figure

__all__ = ["STRATEGY_CSS", "is_training", "strategy_table_html", "row_figures",
           "breakdown_figure", "ranked_methods"]

STRATEGY_CSS = """
table.results.strategies th{cursor:default;text-align:right;min-width:7em}
table.results.strategies th.grp{text-align:left;background:#eef2f7;font-weight:600;
color:#444}
table.results.strategies td.k{text-align:left;color:#444;padding-left:1em}
table.results.strategies td.bad{color:#888}
table.results.strategies td.oom{color:#d62728;font-weight:600}
"""

# (column, label, kind); kinds: tp, sched, text, fits, peak, judged, ms, gap, pct, s, int
_KNOBS = [("tp", "tp", "tp"), ("pp", "pp", "int"), ("dp", "dp", "int"),
          ("mbs", "micro-batch", "int"), ("n_micro", "micro-batches", "int"),
          ("schedule", "schedule", "sched"), ("recompute", "recompute", "text"),
          ("zero", "ZeRO", "int")]
_STEP = [("makespan_ms", "step (ms)", "ms"), ("makespan_gap", "gap to bound", "gap")]
_PARTS = [("compute_ms", "compute", "ms"), ("recompute_ms", "recompute", "ms"),
          ("tp_ms", "TP", "ms"), ("pp_ms", "PP", "ms"), ("bubble_ms", "bubble", "ms"),
          ("dp_ms", "DP", "ms"), ("optimizer_ms", "optimizer", "ms")]
_MEM = [("peak_mem_bytes", "peak memory a GPU", "peak"), ("feasible", "fits", "fits"),
        ("mfu", "MFU", "pct"), ("judged", "judged / grid", "judged"),
        ("solve_s", "search (s)", "s"), ("status", "status", "text")]


def is_training(cmp) -> bool:
    """Whether ``cmp`` is a training comparison (:mod:`workbench.compare_training`, even one
    whose every method was left out)."""
    return hasattr(type(cmp), "_is_comparison") and "training" in (cmp.settings or {})


def ranked_methods(cmp) -> list:
    """The methods of a training comparison, fastest fitting first."""
    t = cmp.table
    return [str(t["method"].iloc[i]) for i in ranked(t, "makespan_ms", row_flags(cmp))]


def _cell(r, col: str, kind: str) -> tuple[str, str, str]:
    """(text, sort value, css class) of one cell."""
    v = r[col]
    if kind == "tp":
        return f"{v}{'+sp' if bool(r['sp']) else ''}", str(v), ""
    if kind == "sched":
        virtual = int(r["virtual"])
        return (f"{v} v={virtual}" if virtual > 1 else str(v)), str(v), ""
    if kind == "text":
        return str(v), str(v), ""
    if kind == "fits":
        return ("yes", "1", "") if bool(v) else ("out of memory", "0", "oom")
    if kind == "peak":
        cap = float(r["capacity_bytes"])
        return f"{fmt_bytes(v)} of {fmt_bytes(cap)}", repr(float(v)), \
            "" if float(v) <= cap else "oom"
    if kind == "judged":
        return f"{int(v)} / {int(r['grid'])}", str(int(v)), ""
    x = float(v)
    if not math.isfinite(x):
        return "", "", ""
    if kind == "ms":
        return (f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"), repr(x), ""
    if kind == "gap":
        return f"{100 * x:+.1f} %", repr(x), ""
    if kind == "pct":
        return f"{100 * x:.1f} %", repr(x), ""
    if kind == "s":
        return f"{x:.3g}", repr(x), ""
    return f"{x:.0f}", repr(x), ""


def strategy_table_html(cmp) -> str:
    """The strategies of a training comparison side by side (module docstring): one column
    per method, fastest fitting first; a row per knob, the step, each part of its breakdown,
    the peak memory, whether it fits; out-of-memory columns name the device and the moment in
    a footnote."""
    t = cmp.table
    esc = _html.escape
    methods = ranked_methods(cmp)
    rows = {m: t[t["method"].astype(str) == m].iloc[0] for m in methods}
    colors = method_colors(t["method"].astype(str))
    notes, head = [], []
    for m in methods:
        mark = ""
        if str(rows[m].get("violations") or ""):
            notes.append(f"{m}: {rows[m]['violations']}")
            mark = f"<sup>{len(notes)}</sup>"
        head.append(f"<th class='m' title='{esc(str(rows[m].get('paper', '')))}'><span "
                    f"class='sw' style='background:{colors[m]}'></span>{esc(m)}{mark}</th>")
    body = []
    for group, cols in (("strategy", _KNOBS), ("step", _STEP),
                        ("breakdown of the step (ms)", _PARTS), ("memory and search", _MEM)):
        body.append(f"<tr><th class='grp' colspan='{len(methods) + 1}'>{esc(group)}</th></tr>")
        for c, h, kind in cols:
            cells = []
            for m in methods:
                text, v, cls = _cell(rows[m], c, kind)
                bad = "" if bool(rows[m]["feasible"]) else " bad"
                cells.append(f"<td class='{cls}{bad}' data-v='{esc(v)}'>{esc(text)}</td>")
            body.append(f"<tr><td class='k'>{esc(h)}</td>{''.join(cells)}</tr>")
    out = [(f"<div class='tablewrap'><table class='results strategies'><thead><tr><th></th>"
            f"{''.join(head)}</tr></thead><tbody>{''.join(body)}</tbody></table></div>")]
    tr = cmp.settings.get("training", {})
    out.append(f"<p class='note'>{esc(str(tr.get('model', '')))}, global batch "
               f"{tr.get('global_batch', '?')} sequences; the step is the training judge's "
               f"(slowest GPU), its parts add up to it; the bound "
               f"({cmp.bounds.get('makespan_ms', math.nan):,.1f} ms) is the least over the "
               f"strategies the methods searched.</p>")
    if notes:
        out.append("<ol class='foot'>" + "".join(f"<li>{esc(n)}</li>" for n in notes)
                   + "</ol>")
    return "\n".join(out)


def breakdown_figure(cmp, methods=None):
    """The step of each row (fastest fitting first) as stacked parts, labelled by method."""
    methods = ranked_methods(cmp) if methods is None else list(methods)
    res = [cmp.training[m] for m in methods]
    labels = [f"{m}: {r.plan.strategy.describe()}" for m, r in zip(methods, res)]
    fig = training_breakdown_figure(res, labels=labels)
    if res and max(r.step_ms for r in res) < 1e3:  # steps under a second: in ms
        for tr in fig.data:
            tr.x = [x * 1e3 for x in tr.x]
            tr.hovertemplate = tr.hovertemplate.replace(" s<", " ms<").replace(":.3f", ":.3g")
        fig.update_layout(xaxis_title="step time (ms)")
    fig.update_layout(title="Step time by cause (slowest GPU)",
                      legend={"orientation": "h", "traceorder": "normal",
                              "y": -0.25 if len(res) < 4 else -0.15}, margin={"l": 10})
    fig.update_yaxes(automargin=True)
    return fig


def row_figures(cmp, method: str, *, max_bars: int = 15000) -> list:
    """The pipeline Gantt and the memory over time of ``method``'s judged strategy; a result
    with more than ``max_bars`` tasks and link events is drawn without its link lanes."""
    import dataclasses

    r = cmp.training[method]
    n = sum(len(v) for v in r.tasks.values())
    shown = r if n + len(r.links) <= max_bars else dataclasses.replace(r, links=[])
    gantt = training_gantt(shown)
    gantt.update_layout(title=f"{method}: {r.plan.strategy.describe()}, step "
                        f"{r.step_ms:,.1f} ms")
    mem = training_memory_figure(r)
    mem.update_layout(title=f"{method}: memory over time of each stage (GiB)")
    return [gantt, mem]
