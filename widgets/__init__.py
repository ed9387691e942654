"""Views of the placement workbench: pure plotly figures (:mod:`widgets.figures`), ipywidgets
compositions (:class:`DagView`, :class:`GanttView`, :class:`CoarsenView`,
:class:`PipelineView`, :class:`CompareBoard`, the drill-downs :class:`HeatmapView` and
:class:`ClusterView`) and the self-contained HTML report (:func:`write_report`).

Views only show model objects (OpGraph, Cluster, Plan, Schedule, the DataFrame of
``workbench.compare``); the workbench itself never imports this package.

>>> import widgets
>>> sorted(widgets.__all__)[:3]
['ClusterView', 'CoarsenView', 'CompareBoard']
"""

from . import figures
from .board import CompareBoard
from .verdict import verdict_html
from .drilldown import ClusterView, HeatmapView
from .report import write_report
from .views import CoarsenView, DagView, GanttView, PipelineView, link_selection
from .whatif import WhatIfPanel

__all__ = ["figures", "DagView", "GanttView", "CoarsenView", "PipelineView", "CompareBoard",
           "link_selection", "write_report", "verdict_html", "WhatIfPanel", "HeatmapView",
           "ClusterView"]
