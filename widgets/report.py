"""A self-contained HTML report of a comparison: the verdict (who wins each objective and
why), a sortable table (units, %, errors as footnotes), the comparison bars, the DAG coloured by
the best plan, the Gantt charts of every plan as small multiples on one time axis (with a
picker for any single plan when there are many) and the pipelined split of the best max-load
plan. Every view uses the same colour per method.

plotly.js is inlined once, so the page opens offline (no CDN, no network at view time). The file
is written atomically (temporary file + rename).

Examples
--------
>>> import tempfile, pathlib, workbench as wb
>>> g, c = wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie")
>>> plans = {m: wb.solve(g, c, method=m) for m in ("single", "round_robin")}
>>> import pandas as pd
>>> rows = []
>>> for m, p in plans.items():
...     x = wb.evaluate(p, c)
...     rows.append({"method": m, "status": p.status, "makespan_ms": x.makespan_ms,
...                  "max_load_ms": x.max_load_ms, "makespan_lb": x.makespan_lb,
...                  "max_load_lb": x.max_load_lb, "solve_s": p.stats["solve_s"]})
>>> out = pathlib.Path(tempfile.mkdtemp()) / "r.html"
>>> write_report(out, graph=g, cluster=c, table=pd.DataFrame(rows), plans=plans, title="demo")
PosixPath('...r.html')
>>> html = out.read_text()
>>> "<script src=" in html, html.count("Plotly.newPlot") >= 4, "Verdict" in html
(False, True, True)
"""

from __future__ import annotations

import datetime as _dt
import html as _html
from pathlib import Path

from workbench.io import write_atomic

__all__ = ["write_report", "report_html"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;
max-width:1200px;color:#222;padding:0 16px}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid
#ddd;padding-bottom:.2em}.meta{color:#666;font-size:.9em}
table.results{border-collapse:collapse;font-size:.85em;margin:8px 0}
table.results th,table.results td{border:1px solid #ddd;padding:3px 8px;text-align:right}
table.results th{background:#f5f5f5}table.results td:first-child{text-align:left;font-weight:600}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:12px}.note{color:#666;font-size:.9em}
"""

_PICKER_JS = """
function wbPick(sel){var g=sel.dataset.group||'wb-one';
 document.querySelectorAll('.'+g).forEach(function(d){
 d.style.display=d.dataset.m===sel.value?'block':'none';
 if(d.style.display==='block'&&window.Plotly){d.querySelectorAll('.js-plotly-plot')
  .forEach(function(p){Plotly.Plots.resize(p);});}});}
"""


def _fig_div(fig, div_id: str) -> str:
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})




def _best(table, col: str):
    if table is None or col not in table or "method" not in table:
        return None
    ok = table
    if "status" in table:
        ok = table[table["status"].astype(str) != "error"]
    ok = ok[ok[col].notna()]
    if not len(ok):
        return None
    return str(ok.loc[ok[col].astype(float).idxmin(), "method"])


def _settings_line(cmp) -> str:
    """How a comparison judged its plans, in words.

    >>> from types import SimpleNamespace
    >>> _settings_line(SimpleNamespace(order="fifo", congestion=False, time_limit=5, seed=0))
    'judged with order fifo, congestion off; 5 s per method, seed 0'
    """
    order = cmp.order or "each plan's own (else FIFO)"
    tl = "no time limit" if cmp.time_limit is None else f"{cmp.time_limit:g} s per method"
    return (f"judged with order {order}, congestion {'on' if cmp.congestion else 'off'}; "
            f"{tl}, seed {cmp.seed}")


def _schedules(cmp, plans: dict, cluster) -> tuple[dict, dict]:
    """``(schedules, errors)`` to draw: a comparison's own schedules (nothing simulated, so the
    Gantt charts show what its table measured), else each plan simulated with the judge's
    defaults (one that cannot be simulated is reported, not fatal)."""
    if cmp is not None:
        return {m: cmp.schedules[m] for m in plans if m in cmp.schedules}, {}
    from workbench import simulate

    schedules, errors = {}, {}
    for m, p in plans.items():
        try:
            schedules[m] = simulate(p, cluster)
        except Exception as e:  # a plan that cannot be simulated is reported, not fatal
            errors[m] = f"{type(e).__name__}: {e}"
    return schedules, errors


def report_html(*, graph, cluster, table=None, plans: dict | None = None,
                title: str = "Placement report", max_gantts: int = 8,
                max_dag_ops: int = 5000, max_gantt_bars: int = 15000,
                notes: str | None = None, robust=None) -> str:
    """The report as an HTML string (see :func:`write_report`)."""
    from workbench.comparison import is_comparison, verdict
    from workbench.comparison import parts as unpack

    from .figures import (compare_figure, dag_figure, gantt_figure, gantt_multiples,
                          pipeline_figure, robust_figure, robust_html)
    from .tables import results_table_html
    from .verdict import verdict_html

    cmp = table if is_comparison(table) else None
    table, plans, graph, cluster, _s = unpack(table, plans=plans, graph=graph, cluster=cluster)
    plans = dict(plans or {})
    parts: list[str] = []
    esc = _html.escape
    parts.append(f"<h1>{esc(title)}</h1>")
    stamp = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    parts.append(f"<p class='meta'>graph <b>{esc(graph.name)}</b>: {graph.n_ops} ops, "
                 f"{graph.n_edges} edges &middot; cluster <b>{esc(cluster.name)}</b>: "
                 f"{len(cluster.names)} devices ({esc(', '.join(cluster.names))}) &middot; "
                 f"written {stamp}</p>")
    from .strategies import is_training

    if is_training(cmp):
        tr = cmp.settings["training"]
        tl = "no time limit" if cmp.time_limit is None else f"{cmp.time_limit:g} s per method"
        parts.append(f"<p class='meta'>training step of {esc(tr['model'])} on {esc(tr['gpu'])} "
                     f"GPUs, global batch {tr['global_batch']} sequences; each method's "
                     f"strategy judged by the training judge; {tl}</p>")
    elif cmp is not None:
        parts.append(f"<p class='meta'>{esc(_settings_line(cmp))}</p>")
    if notes:
        parts.append(f"<p class='note'>{esc(notes)}</p>")
    if is_training(cmp):  # strategies side by side, the training views of the chosen one
        return _page(title, parts + _training_parts(cmp, max_gantt_bars))
    schedules, errors = _schedules(cmp, plans, cluster)
    if table is not None and len(table):
        parts.append("<h2>Verdict</h2>")
        parts.append(verdict_html(verdict(table, schedules=schedules, plans=plans,
                                          cluster=cluster, graph=graph)))
        parts.append("<h2>Results</h2>")
        parts.append("<p class='note'>Makespan and max load come from the workbench simulator; "
                     "each gap is relative to the method's own lower bound (a method that "
                     "changed the graph has its own). Click a header to sort.</p>")
        parts.append(results_table_html(table, plans=plans, graph=graph, cluster=cluster,
                                          sortable=True))
        parts.append(_fig_div(compare_figure(table, plans=plans, graph=graph,
                                             cluster=cluster, robust=robust), "compare"))
    if table is not None and any(p.stats.get("progress") for p in plans.values()):
        from types import SimpleNamespace

        from .figures.progress import progress_figure

        parts.append("<h2>Quality against solver time</h2>")
        parts.append(_fig_div(progress_figure(cmp if cmp is not None else
                                              SimpleNamespace(table=table, plans=plans)),
                              "progress"))
    if robust is not None:
        parts.append("<h2>Can I trust the winner?</h2>")
        parts.append(robust_html(robust))
        parts.append(_fig_div(robust_figure(robust), "robustness"))
    best_mk = _best(table, "makespan_ms") if table is not None else None
    if best_mk not in plans:
        best_mk = next(iter(plans), None)
    parts.append("<h2>Operator graph</h2>")
    # a plan may refer to a transformed graph (ops split or replicated): draw what it placed
    best_plan = plans.get(best_mk)
    dag_graph = best_plan.graph if best_plan is not None else graph
    if dag_graph.n_ops <= max_dag_ops:
        note = "" if dag_graph is graph or dag_graph.n_ops == graph.n_ops else \
            f" (its transformed graph, {dag_graph.n_ops} ops)"
        parts.append(_fig_div(dag_figure(dag_graph, cluster=cluster, plan=best_plan,
                                         schedule=schedules.get(best_mk),
                                         title=(f"{dag_graph.name}: placement of {best_mk}{note}"
                                                if best_mk else None)), "dag"))
    else:
        parts.append(f"<p class='note'>The graph has {dag_graph.n_ops} ops (more than "
                     f"{max_dag_ops}); its drawing is left out to keep the page light.</p>")
    if schedules:
        parts.append("<h2>Schedules</h2>")
        drawable = {}
        for m, s in schedules.items():
            n = s.graph.n_ops + s.n_transfers
            if n > max_gantt_bars:
                parts.append(f"<p class='note'>The schedule of {esc(m)} has {n} bars (more "
                             f"than {max_gantt_bars}); its Gantt chart is left out.</p>")
            else:
                drawable[m] = s
        if drawable:
            parts.append("<p class='note'>Every plan on one time axis, fastest first; lane "
                         "labels give each device's utilisation.</p>")
            parts.append(_fig_div(gantt_multiples(drawable, max_plans=max_gantts), "gantts"))
        if len(drawable) > max_gantts:
            xmax = max(float(s.makespan) for s in drawable.values())
            order = sorted(drawable, key=lambda m: float(drawable[m].makespan))
            opts = "".join(f"<option value='{esc(m)}'>{esc(m)}</option>" for m in order)
            parts.append(f"<p>One plan: <select id='gantt-pick' onchange='wbPick(this)'>{opts}"
                         f"</select></p>")
            for k, m in enumerate(order):
                div = _fig_div(gantt_figure(drawable[m], xmax=xmax), f"gantt-{k}")
                parts.append(f"<div class='wb-one' data-m='{esc(m)}' style='display:"
                             f"{'block' if k == 0 else 'none'}'>{div}</div>")
    best_ml = _best(table, "max_load_ms") if table is not None else None
    if best_ml in plans:
        parts.append("<h2>Pipelined split of the best max-load plan</h2>")
        parts.append(_fig_div(pipeline_figure(plans[best_ml], cluster), "pipeline"))
    for m, msg in errors.items():
        parts.append(f"<p class='note'>Plan {esc(m)} could not be simulated: {esc(msg)}</p>")
    return _page(title, parts)


def _page(title: str, parts: list) -> str:
    """The self-contained page of the report's sections (plotly.js inlined once)."""
    from plotly.offline import get_plotlyjs

    from .strategies import STRATEGY_CSS
    from .tables import TABLE_CSS

    esc = _html.escape
    body = "\n".join(parts)
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>{esc(title)}</title><style>{_CSS}{TABLE_CSS}{STRATEGY_CSS}</style>"
            f"<script type='text/javascript'>{get_plotlyjs()}</script>"
            f"<script>{_PICKER_JS}</script></head>"
            f"<body>\n{body}\n</body></html>\n")


def _training_parts(cmp, max_bars: int) -> list:
    """The sections of a training comparison: verdict, the strategies side by side, the
    breakdown of every row, and the pipeline Gantt and memory over time of any row (a picker;
    the winner first)."""
    from .strategies import breakdown_figure, ranked_methods, row_figures, strategy_table_html
    from .verdict import verdict_html

    esc = _html.escape
    parts = ["<h2>Verdict</h2>", verdict_html(cmp.verdict()),
             "<h2>Strategies side by side</h2>", strategy_table_html(cmp)]
    for m, why in cmp.left_out.items():
        parts.append(f"<p class='note'>Left out {esc(m)}: {esc(why)}</p>")
    if not cmp.training:
        return parts
    parts.append(_fig_div(breakdown_figure(cmp), "breakdown"))
    order = ranked_methods(cmp)
    parts.append("<h2>One strategy: pipeline and memory over time</h2>")
    parts.append("<p class='note'>A lane per pipeline stage (one GPU each: the ranks of a "
                 "stage run the same), micro-batches coloured, forward light, backward dark, "
                 "recomputation hatched; gaps are the bubble. Under the stages, each GPU's "
                 "NVLink and network traffic (TP collectives, pipeline sends, DP buckets). "
                 "Then memory over time of each stage against the GPU's capacity.</p>")
    opts = "".join(f"<option value='{esc(m)}'>{esc(m)}</option>" for m in order)
    parts.append(f"<p>Strategy of <select id='train-pick' data-group='wb-train' "
                 f"onchange='wbPick(this)'>{opts}</select></p>")
    for k, m in enumerate(order):
        divs = "".join(_fig_div(f, f"train-{k}-{j}")
                       for j, f in enumerate(row_figures(cmp, m, max_bars=max_bars)))
        parts.append(f"<div class='wb-train' data-m='{esc(m)}' style='display:"
                     f"{'block' if k == 0 else 'none'}'>{divs}</div>")
    return parts


def write_report(path, graph, cluster, table=None, plans: dict | None = None, *,
                 title: str = "Placement report", max_gantts: int = 8,
                 max_dag_ops: int = 5000, max_gantt_bars: int = 15000,
                 notes: str | None = None, robust=None) -> Path:
    """Write a self-contained HTML report and return its path.

    Parameters
    ----------
    path : str or Path
        Output file (parent folders are created).
    graph : OpGraph
    cluster : Cluster
    table : Comparison or pandas.DataFrame, optional
        What :func:`workbench.compare` returns: its plans and schedules are drawn as they are
        (nothing is simulated again, so the Gantt charts are those of the table's numbers,
        under the comparison's order and congestion). A bare table (one row per method) needs
        ``plans``.
    plans : dict, optional
        Method -> Plan (default: the comparison's); plans given without their comparison are
        simulated with the judge's defaults for their Gantt charts.
    title : str
    max_gantts : int
        At most this many plans in the small multiples (the fastest first); with more plans a
        picker shows any single one.
    max_dag_ops : int
        Larger graphs are not drawn (the page would get heavy).
    max_gantt_bars : int
        Schedules with more ops + transfers get no Gantt chart.
    notes : str, optional
        A paragraph shown under the title.
    robust : Robustness, optional
        :func:`workbench.robustness` of the plans: error bars and P(best) on the bars, a
        section with its verdict and figure.
    """
    html = report_html(graph=graph, cluster=cluster, table=table, plans=plans, title=title,
                       max_gantts=max_gantts, max_dag_ops=max_dag_ops,
                       max_gantt_bars=max_gantt_bars, notes=notes, robust=robust)
    path = Path(path)
    write_atomic(path, html)  # temporary file + rename: a failed write leaves the old report
    return path
