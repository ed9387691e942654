"""The verdict of a comparison (:func:`workbench.comparison.verdict`) as a short HTML panel,
shared by the board and the report (neither imports the other for it).

>>> html = verdict_html([{"winner": "heft", "why": "heft wins makespan at 3 ms."}])
>>> "Verdict" in html and "heft wins makespan" in html
True
>>> "nothing wins" in verdict_html([])
True
"""

from __future__ import annotations

import html as _html

from .figures.methods import method_color

__all__ = ["verdict_html"]


def verdict_html(items: list) -> str:
    """The verdict (a list of :func:`workbench.comparison.verdict` dicts) as HTML: the winner
    of each objective in its colour and why."""
    if not items:
        return "<div class='wb-verdict'><b>No feasible plan</b>: nothing wins.</div>"
    rows = []
    for v in items:
        col = method_color(v["winner"])
        rows.append(f"<li><b style='color:{col}'>■ {_html.escape(v['winner'])}</b> "
                    f"&mdash; {_html.escape(v['why'])}</li>")
    return ("<div class='wb-verdict' style='border-left:4px solid #888;padding:2px 10px;"
            "margin:6px 0'><b>Verdict</b><ul style='margin:2px 0'>" + "".join(rows)
            + "</ul></div>")
