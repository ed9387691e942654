"""One colour per method everywhere, and the symbols of a comparison row's flags.

Colours are keyed by a method's position in the solver registry
(:data:`workbench.solvers.SOLVERS`), so a method has the same colour in every table, bar chart,
Gantt title, board and report, whatever else is being compared and from run to run. Names
that are not registered get a colour from a checksum of the name (also stable).

The analysis these views draw lives in the core, beside the comparison it reads
(:mod:`workbench.comparison`: :func:`~workbench.comparison.row_flags`,
:func:`~workbench.comparison.own_bounds`, :func:`~workbench.comparison.verdict`;
:func:`~workbench.diff.critical_breakdown`).

Examples
--------
>>> method_colors(["single", "dpos"]) == method_colors(["dpos", "single"])
True
>>> method_color("single") != method_color("round_robin")
True
>>> flag_label(["infeasible", "time_limit"])
'⚠◷'
"""

from __future__ import annotations

import zlib

__all__ = ["METHOD_PALETTE", "FLAGS", "method_color", "method_colors", "flag_label"]

METHOD_PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
    "#393b79", "#637939", "#8c6d31", "#7b4173", "#3182bd", "#e6550d", "#31a354", "#756bb1",
    "#636363", "#6baed6", "#fd8d3c", "#74c476", "#9e9ac8", "#e7ba52", "#ce6dbd", "#17a589",
    "#a55194", "#5254a3", "#b5cf6b", "#bd9e39")
"""Qualitative palette for methods (no pure red: red marks critical paths and bottlenecks)."""

FLAGS = {
    "infeasible": ("⚠", "infeasible: out of memory (live peak over capacity) or colocation violated"),
    "time_limit": ("◷", "stopped at the time limit (not proven optimal)"),
    "changed_graph": ("◆", "solved a changed graph (split/coarsened): own lower bound"),
    "error": ("✖", "failed: see the note"),
}
"""Flag -> (symbol, legend text)."""


def method_color(method: str) -> str:
    """The colour of ``method``: by registry position, else by a checksum of the name.

    >>> method_color("single")
    '#1f77b4'
    >>> method_color("my_method") == method_color("my_method")
    True
    """
    from workbench.solvers import SOLVERS

    names = list(SOLVERS)
    if method in SOLVERS:
        return METHOD_PALETTE[names.index(method) % len(METHOD_PALETTE)]
    return METHOD_PALETTE[zlib.crc32(str(method).encode()) % len(METHOD_PALETTE)]


def method_colors(methods) -> dict:
    """Method -> colour for every name in ``methods`` (see :func:`method_color`)."""
    return {str(m): method_color(str(m)) for m in methods}


def flag_label(flags) -> str:
    """The symbols of ``flags`` in one string (``''`` when none).

    >>> flag_label(["infeasible", "changed_graph"])
    '⚠◆'
    """
    return "".join(FLAGS[f][0] for f in flags if f in FLAGS)
