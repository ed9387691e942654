"""Figures that follow their cell's width.

plotly.js sizes an ``autosize`` figure from its container when it first draws; a
``FigureWidget`` inside an ipywidgets box is often drawn before the box is attached to the page,
so it falls back to plotly's default 700 px and stays there (cut off in a narrower column, a
strip in a wider cell). The ``responsive`` config (see :func:`widgets.views.fill`) only reacts to
*window* resizes. :class:`CellFit` is an invisible widget that every view puts among its
children: in the browser it watches the plotly figures of its box (a ``ResizeObserver`` on each,
a ``MutationObserver`` for figures added later, e.g. the board's redrawn bars) and, when a
figure's drawing is not as wide as its container, unpins any width plotly wrote into the
figure's own layout and fires one (debounced) window ``resize`` event, on which plotly's
responsive handler refits the figure. It fits again whenever the cell changes
width (a side panel opened or closed).

Examples
--------
>>> fit = CellFit()
>>> "ResizeObserver" in fit._esm and fit.layout.height == "0px"
True
"""

from __future__ import annotations

import anywidget
import ipywidgets as W

__all__ = ["CellFit"]

_ESM = r"""
function render({ el }) {
  el.classList.add("wb-cellfit");
  el.style.cssText = "width:100%;height:0;overflow:hidden;margin:0;padding:0";
  let timer = null, root = null, mo = null;
  const plots = new WeakSet();
  const misfit = (gd) => {
    const svg = gd.querySelector(".main-svg");
    if (!svg) return false;
    const w = gd.getBoundingClientRect().width, s = svg.getBoundingClientRect().width;
    return w > 0 && Math.abs(w - s) > 2;
  };
  const stale = new Set();
  const refit = (gd) => {
    stale.add(gd);
    if (timer) return;
    timer = setTimeout(() => {
      timer = null;
      // a relayout made while autosize was off leaves plotly's default width pinned in the
      // plot's own layout, where its resize handler will not touch it: a wb-fill plot has
      // no width of its own, so unpin it
      for (const g of stale) if (g.layout) { delete g.layout.width; g.layout.autosize = true; }
      stale.clear();
      window.dispatchEvent(new Event("resize"));
    }, 60);
  };
  const ro = new ResizeObserver((entries) => {
    if (!root && el.parentElement) {
      root = el.parentElement;
      mo = new MutationObserver(watch);
      mo.observe(root, { childList: true, subtree: true });
      watch();
    }
    for (const e of entries) if (e.target !== el && misfit(e.target)) refit(e.target);
  });
  function watch() {
    if (!root) return;
    for (const gd of root.querySelectorAll(".js-plotly-plot.wb-fill")) {
      if (!plots.has(gd)) { plots.add(gd); ro.observe(gd); }
      if (misfit(gd)) refit(gd);
    }
  }
  ro.observe(el);
  return () => { ro.disconnect(); if (mo) mo.disconnect(); clearTimeout(timer); };
}
export default { render };
"""


class CellFit(anywidget.AnyWidget):
    """Invisible helper that keeps the plotly figures of its parent box at the box's width.

    Put one among the children of a box holding ``FigureWidget`` s made with
    :func:`widgets.views.fill`; it has no traits and no output.
    """

    _esm = _ESM

    def __init__(self, **kwargs):
        kwargs.setdefault("layout", W.Layout(height="0px", width="100%", margin="0"))
        super().__init__(**kwargs)
