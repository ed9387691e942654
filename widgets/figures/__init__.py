"""Pure figure functions: model objects -> ``plotly.graph_objects.Figure`` (no ipywidgets).

Every function takes an optional ``fig=`` to draw into (e.g. a ``FigureWidget``) and returns it.

>>> from widgets.figures import dag_figure, gantt_figure, coarse_figure, pipeline_figure, \\
...     compare_figure
"""

from .aggregate import heatmap_ops, placement_heatmap, slice_figure
from .coarsen import coarse_figure, coarse_graph, members_figure
from .compare import compare_figure
from .dag import dag_figure
from .fidelity import fidelity_figure
from .gantt import gantt_figure, gantt_lanes, gantt_multiples, idle_gaps, utilisation
from .layout import layered_layout
from .memory import memory_figure
from .methods import method_color, method_colors
from .pipeline import pipeline_figure, stage_table
from .robust import robust_figure, robust_html
from .training import training_breakdown_figure, training_gantt, training_memory_figure

__all__ = ["dag_figure", "gantt_figure", "gantt_lanes", "gantt_multiples", "utilisation",
           "fidelity_figure", "placement_heatmap", "heatmap_ops", "slice_figure",
           "method_color", "method_colors",
           "idle_gaps", "coarse_figure",
           "coarse_graph", "members_figure", "pipeline_figure", "stage_table", "compare_figure",
           "layered_layout", "memory_figure", "robust_figure", "robust_html",
           "training_gantt", "training_memory_figure", "training_breakdown_figure"]
