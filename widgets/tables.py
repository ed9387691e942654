"""The results table of a comparison as readable HTML: units in the headers, gaps and memory in
%, bytes in binary units, one colour swatch per method (the same colours as every figure), the
flags of each row, errors and violations as numbered footnotes instead of long cells, and rows
sorted by makespan. With ``sortable=True`` a small script sorts by any column on a click (the
report; ipywidgets' HTML drops scripts, the board's table stays sorted by makespan).

Examples
--------
>>> import pandas as pd
>>> df = pd.DataFrame({"method": ["single", "dpos"], "status": ["error", "heuristic"],
...                    "makespan_ms": [float("nan"), 8.0], "makespan_gap": [None, 0.25],
...                    "comm_bytes": [None, 5.437e8], "error": ["out of memory on gpu0", ""]})
>>> html = results_table_html(df)
>>> html.index("dpos") < html.index("single"), "518.5 MiB" in html, "+25.0 %" in html
(True, True, True)
>>> "<sup>1</sup>" in html and "out of memory on gpu0" in html.split("</table>")[1]
True
"""

from __future__ import annotations

import html as _html
import math

from .figures._common import fmt_bytes
from .figures.compare import ranked
from workbench.comparison import own_bounds, parts, row_flags

from .figures.methods import FLAGS, flag_label, method_colors

__all__ = ["results_table_html", "results_csv", "TABLE_CSS", "SORT_JS"]

# column -> (header, kind); kinds: ms, pct, gap (signed %), bytes, s, int, text
_COLUMNS = [
    ("status", "status", "text"),
    ("makespan_ms", "makespan (ms)", "ms"),
    ("makespan_lb", "bound (ms)", "ms"),
    ("makespan_gap", "gap", "gap"),
    ("max_load_ms", "max load (ms)", "ms"),
    ("max_load_lb", "bound (ms)", "ms"),
    ("max_load_gap", "gap", "gap"),
    ("proven_bound", "own proven bound (ms)", "ms"),
    ("measured_ms", "measured (ms)", "ms"),
    ("sim_error", "sim. error", "pct"),
    ("comm_ms", "transfers (ms)", "ms"),
    ("comm_bytes", "moved", "bytes"),
    ("peak_mem_frac", "memory (static sum)", "pct"),
    ("live_mem_frac", "memory (live peak)", "pct"),
    ("devices_used", "devices", "int"),
    ("solve_s", "solve (s)", "s"),
]

TABLE_CSS = """
table.results{border-collapse:collapse;font-size:.82em;margin:8px 0;max-width:100%;
table-layout:auto}
table.results th,table.results td{border:1px solid #ddd;padding:3px 6px;text-align:right;
white-space:nowrap}
table.results th{background:#f5f5f5;cursor:pointer;white-space:normal;vertical-align:bottom}
.tablewrap{max-width:100%;overflow-x:auto}
table.results td.m{text-align:left;font-weight:600}
table.results .sw{display:inline-block;width:.8em;height:.8em;margin-right:.35em;
vertical-align:-.05em;border-radius:2px}
table.results tr.bad td{color:#888}
ol.foot{font-size:.8em;color:#555;margin:.2em 0 1em 1.2em;padding:0}
.flags{font-size:.8em;color:#555}
"""

SORT_JS = """
document.querySelectorAll('table.results').forEach(function(t){
 t.querySelectorAll('th').forEach(function(th,i){th.addEventListener('click',function(){
  var b=t.tBodies[0],r=Array.from(b.rows),asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';
  r.sort(function(x,y){var a=x.cells[i].dataset.v,c=y.cells[i].dataset.v;
   var fa=parseFloat(a),fc=parseFloat(c);
   if(!isNaN(fa)&&!isNaN(fc))return asc?fa-fc:fc-fa;if(isNaN(fa)!==isNaN(fc))return isNaN(fa)?1:-1;
   return asc?String(a).localeCompare(c):String(c).localeCompare(a);});
  r.forEach(function(x){b.appendChild(x);});});});});
"""


def _num(v) -> float:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return math.nan
    return v


def _cell(v, kind: str) -> tuple[str, str]:
    """(shown text, sort value)."""
    if kind == "text":
        return ("" if v is None or v != v else str(v)), ("" if v is None else str(v))
    x = _num(v)
    if not math.isfinite(x):
        return ("" if math.isnan(x) else "∞"), ""
    if kind == "ms":
        return (f"{x:.1f}" if abs(x) >= 100 else f"{x:.3g}"), repr(x)
    if kind in ("pct", "gap"):
        return f"{'+' if x > 0 and kind == 'gap' else ''}{100 * x:.1f} %", repr(x)
    if kind == "bytes":
        return fmt_bytes(x), repr(x)
    if kind == "s":
        return f"{x:.3g}", repr(x)
    return f"{x:.0f}", repr(x)


def results_table_html(df, *, plans: dict | None = None, graph=None, cluster=None,
                       sortable: bool = False) -> str:
    """The comparison table as HTML (see the module docstring). ``df`` is a
    :class:`~workbench.comparison.Comparison` (its plans, graph and cluster are used) or a
    table with ``plans``/``graph`` as for :func:`~workbench.comparison.row_flags`; with
    ``cluster`` too, a method that changed the graph gets the bound of its own graph and its
    gap to it (:func:`~workbench.comparison.own_bounds`)."""
    table, plans, graph, cluster, _s = parts(df, plans=plans, graph=graph, cluster=cluster)
    if "method" not in table:
        raise ValueError("results_table_html needs a 'method' column (got "
                         f"{', '.join(map(str, table.columns))})")
    lbs = own_bounds(df, plans=plans, graph=graph, cluster=cluster)
    df = table.copy()
    for col, lb in lbs.items():
        base = col[:-3]
        if f"{base}_lb" in df:
            df[f"{base}_lb"] = lb
            if col in df:
                v = df[col].astype(float)
                df[f"{base}_gap"] = [max(0.0, a / b - 1) if b > 0 and a == a else math.nan
                                     for a, b in zip(v, lb)]
    flags = row_flags(df, plans=plans, graph=graph)
    colors = method_colors(df["method"].astype(str))
    cols = [(c, h, k) for c, h, k in _COLUMNS if c in df]
    esc = _html.escape
    head = "".join(f"<th>{esc(h)}</th>" for _, h, _ in [("method", "method", "")] + cols)
    head += "<th>notes</th>"
    rows, notes = [], []
    order = ranked(df, "makespan_ms", flags) if "makespan_ms" in df else range(len(df))
    for i in order:
        r = df.iloc[i]
        m = str(r["method"])
        f = flags[m]
        cells = [f"<td class='m' data-v='{esc(m)}'><span class='sw' style='background:"
                 f"{colors[m]}'></span>{esc(m)}</td>"]
        for c, _, k in cols:
            text, v = _cell(r[c], k)
            cells.append(f"<td data-v='{esc(v)}'>{esc(text)}</td>")
        marks = [f"<span title='{esc(FLAGS[x][1])}'>{FLAGS[x][0]}</span>" for x in f]
        for c in ("error", "violations", "measure_error"):
            msg = str(r[c]) if c in df and r[c] is not None and r[c] == r[c] else ""
            if msg:
                notes.append(f"{m}: {msg}")
                marks.append(f"<sup>{len(notes)}</sup>")
        cells.append(f"<td class='flags' data-v='{esc(flag_label(f))}'>{' '.join(marks)}</td>")
        bad = "infeasible" in f or "error" in f
        rows.append(f"<tr class='{'bad' if bad else ''}'>" + "".join(cells) + "</tr>")
    legend = [f"{FLAGS[x][0]} {FLAGS[x][1]}" for x in FLAGS
              if any(x in v for v in flags.values())]
    out = [f"<div class='tablewrap'><table class='results{' sortable' if sortable else ''}'>"
           f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"]
    if legend:
        out.append(f"<p class='flags'>{esc(' · '.join(legend))}</p>")
    if notes:
        out.append("<ol class='foot'>" + "".join(f"<li>{esc(n)}</li>" for n in notes)
                   + "</ol>")
    html = "\n".join(out)
    if sortable:
        html += f"\n<script>{SORT_JS}</script>"
    return html


def results_csv(df) -> str:
    """The comparison table as CSV text (all columns, full precision)."""
    return df.to_csv(index=False)
