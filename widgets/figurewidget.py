"""A plotly ``FigureWidget`` whose browser side runs plotly.js once per page.

Since plotly 6, ``go.FigureWidget`` is an anywidget whose front-end module (``_esm``) is the
whole plotly.js widget bundle (about 5 MB). anywidget imports each widget's ``_esm`` from a new
``blob:`` URL, so the browser parses and evaluates plotly.js again for every figure widget
(0.3-0.7 s of the browser's CPU each, measured with Chromium's profiler on notebook 07; see
docs/decisions.md, decision 112). :class:`FigureWidget` sends the same bundle as a trait of its
own and a small ``_esm`` that imports it once per page and version, then hands every figure to
plotly's own widget code. It still works wherever each widget carries its own state (a saved
notebook's widget state, a separate frame per output): each page imports the bundle once.

Examples
--------
>>> import plotly.graph_objects as go
>>> fw = FigureWidget(go.Figure(go.Bar(x=[1, 2], y=[3, 4])))
>>> isinstance(fw, go.FigureWidget) and fw.data[0].type
'bar'
>>> len(fw._esm) < 2000 < 10**6 < len(fw._plotly_bundle)
True
"""

from __future__ import annotations

import functools
import pathlib

import plotly
import plotly.graph_objects as go
import traitlets

__all__ = ["FigureWidget"]

_ESM = r"""
const cache = (globalThis.__wbPlotlyWidget ??= new Map());
function plotlyWidget(model) {  // plotly's widget module, imported once per page and version
  const key = model.get("_plotly_key");
  if (!cache.has(key)) {
    const url = URL.createObjectURL(new Blob([model.get("_plotly_bundle")],
                                             { type: "text/javascript" }));
    const mod = import(url).finally(() => URL.revokeObjectURL(url));
    mod.catch(() => cache.delete(key));  // a failed import is tried again by the next figure
    cache.set(key, mod);
  }
  return cache.get(key);
}
export default () => {
  let def, ready;
  return {
    initialize(ctx) {
      ready = plotlyWidget(ctx.model).then((mod) => {
        def = mod.default();  // plotly's factory: one figure model per widget
        return def.initialize(ctx);
      });
      return ready;
    },
    async render(ctx) {
      await ready;
      return def.render(ctx);
    },
  };
};
"""


@functools.cache
def _bundle() -> str:
    from plotly.basewidget import BaseFigureWidget

    esm = BaseFigureWidget._esm  # a path, or anywidget's FileContents of it
    return esm.read_text(encoding="utf-8") if isinstance(esm, pathlib.Path) else str(esm)


class FigureWidget(go.FigureWidget):
    """``go.FigureWidget`` (same API) that imports plotly.js once per browser page."""

    _esm = _ESM
    _plotly_bundle = traitlets.Unicode().tag(sync=True)
    _plotly_key = traitlets.Unicode().tag(sync=True)

    @traitlets.default("_plotly_bundle")
    def _default_bundle(self) -> str:
        return _bundle()

    @traitlets.default("_plotly_key")
    def _default_key(self) -> str:
        return f"plotly-{plotly.__version__}-{len(_bundle())}"
