"""One colour per method everywhere, the flags of a comparison row, and the verdict.

Colours are keyed by a method's position in the solver registry
(:data:`workbench.solvers.SOLVERS`), so a method has the same colour in every table, bar chart,
Gantt title, board and report, whatever else is being compared and from run to run. Names
that are not registered get a colour from a checksum of the name (also stable).

A row's flags say why its number must be read with care:

- ``infeasible``: the plan violates memory capacity or a colocation group (``feasible`` False);
- ``time_limit``: the solver stopped at its time limit, optimality is not proven;
- ``changed_graph``: the method solved a changed graph (ops split, replicated or coarsened), so
  its lower bound is its own; detected from the plans, a ``graph_changed`` column or, failing
  both, a lower bound that differs from the most common one (same graph and cluster => same
  bound);
- ``error``: the method failed (its message goes to a footnote).

Examples
--------
>>> method_colors(["single", "dpos"]) == method_colors(["dpos", "single"])
True
>>> method_color("single") != method_color("round_robin")
True
>>> import pandas as pd
>>> df = pd.DataFrame({"method": ["a", "b", "c"], "status": ["heuristic", "time_limit", "error"],
...                    "feasible": [False, True, None], "makespan_lb": [5.0, 5.0, None]})
>>> row_flags(df)
{'a': ['infeasible'], 'b': ['time_limit'], 'c': ['error']}
"""

from __future__ import annotations

import zlib

import numpy as np

from workbench.diff import critical_breakdown  # moved to the core; re-exported here

__all__ = ["METHOD_PALETTE", "FLAGS", "method_color", "method_colors", "row_flags",
           "flag_label", "own_bounds", "critical_breakdown", "verdict"]

METHOD_PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
    "#393b79", "#637939", "#8c6d31", "#7b4173", "#3182bd", "#e6550d", "#31a354", "#756bb1",
    "#636363", "#6baed6", "#fd8d3c", "#74c476", "#9e9ac8", "#e7ba52", "#ce6dbd", "#17a589",
    "#a55194", "#5254a3", "#b5cf6b", "#bd9e39")
"""Qualitative palette for methods (no pure red: red marks critical paths and bottlenecks)."""

FLAGS = {
    "infeasible": ("⚠", "infeasible: memory or colocation violated"),
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


def _changed_graph(df, plans, graph) -> set:
    if "graph_changed" in df:
        return set(df["method"][df["graph_changed"].fillna(False).astype(bool)].astype(str))
    if plans and graph is not None:
        return {str(m) for m, p in plans.items()
                if p.graph is not graph and (p.graph.n_ops != graph.n_ops
                                             or list(p.graph.ops) != list(graph.ops))}
    if "makespan_lb" not in df:
        return set()
    lb = df["makespan_lb"].astype(float)
    ok = lb[np.isfinite(lb)].round(9)
    if not len(ok):
        return set()
    common = ok.mode().iloc[0]
    return set(df["method"][np.isfinite(lb) & (lb.round(9) != common)].astype(str))


def row_flags(df, *, plans: dict | None = None, graph=None) -> dict:
    """Method -> list of flags (see the module docstring) for every row of ``df``."""
    if "method" not in df:
        raise ValueError("row_flags needs a 'method' column (got "
                         f"{', '.join(map(str, df.columns))})")
    changed = _changed_graph(df, plans, graph)
    out = {}
    for i, m in enumerate(df["method"].astype(str)):
        st = str(df["status"].iloc[i]) if "status" in df else ""
        if st == "error":
            out[m] = ["error"]
            continue
        f = []
        if "feasible" in df and df["feasible"].iloc[i] is not None \
                and df["feasible"].iloc[i] == df["feasible"].iloc[i] \
                and not bool(df["feasible"].iloc[i]):
            f.append("infeasible")
        if st == "time_limit":
            f.append("time_limit")
        if m in changed:
            f.append("changed_graph")
        out[m] = f
    return out


def own_bounds(df, *, plans: dict | None = None, graph=None, cluster=None) -> dict:
    """Objective column -> list (row order) of each row's own lower bound.

    A row's bound is its ``makespan_lb``/``max_load_lb`` (``workbench.compare`` puts the best
    bound known for the problem there). A method that solved a changed graph (see
    :func:`row_flags`) is judged on that graph: with ``plans`` and ``cluster`` its bound is
    recomputed on its own graph (:func:`workbench.bounds.lower_bounds`), as a bound of the
    original graph does not hold for it.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"method": ["a"], "makespan_lb": [3.0], "max_load_lb": [2.0]})
    >>> own_bounds(df)
    {'makespan_ms': [3.0], 'max_load_ms': [2.0]}
    """
    out = {}
    methods = df["method"].astype(str).tolist()
    changed = _changed_graph(df, plans, graph) if plans else set()
    recomputed = {}
    if cluster is not None:
        from workbench.bounds import lower_bounds

        for m in changed:
            if m in plans:
                recomputed[m] = lower_bounds(plans[m].graph, cluster)
    for col, lbcol, key in (("makespan_ms", "makespan_lb", "makespan_ms"),
                            ("max_load_ms", "max_load_lb", "max_load_ms")):
        vals = df[lbcol].to_numpy(dtype=float) if lbcol in df else np.full(len(df), np.nan)
        out[col] = [float(recomputed[m][key]) if m in recomputed else float(v)
                    for m, v in zip(methods, vals)]
    return out


def _fmt_parts(d: dict, limit: int = 4) -> str:
    items = sorted(d.items(), key=lambda kv: -kv[1])
    s = ", ".join(f"{k} {v:.3g}" for k, v in items[:limit] if v > 0)
    return s + (", ..." if len(items) > limit else "")


def verdict(df, *, schedules: dict | None = None, plans: dict | None = None, cluster=None,
            graph=None) -> list[dict]:
    """The winner of each objective and why, among rows that ran and are feasible.

    Returns one dict per objective (``makespan``, ``max_load``) with ``objective``,
    ``winner``, ``value``, ``runner_up``, ``runner_value``, ``margin`` (relative) and ``why``
    (a sentence: the winner's realised critical path split into compute, transfer and idle time
    per device and link and the bytes it moves, against the runner-up's; for max load the
    busiest device's load). Objectives without a feasible row are left out.

    >>> import workbench as wb
    >>> g, c = wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie")
    >>> df, plans = wb.compare(g, c, methods=["single", "m_topo"], progress=False,
    ...                        return_plans=True)
    >>> v = verdict(df, plans=plans, cluster=c)
    >>> v[0]["objective"], v[0]["winner"], v[0]["runner_up"]
    ('makespan', 'm_topo', 'single')
    >>> "critical path" in v[0]["why"]
    True
    """
    flags = row_flags(df, plans=plans, graph=graph)
    if schedules is None and plans and cluster is not None:
        from workbench import simulate

        schedules = {m: simulate(p, cluster) for m, p in plans.items()}
    schedules = schedules or {}
    out = []
    for obj, col in (("makespan", "makespan_ms"), ("max_load", "max_load_ms")):
        if col not in df:
            continue
        ok = df[[("error" not in flags[str(m)] and "infeasible" not in flags[str(m)])
                 for m in df["method"].astype(str)]]
        ok = ok[np.isfinite(ok[col].astype(float))].sort_values(col, kind="stable")
        if not len(ok):
            continue
        w, val = str(ok["method"].iloc[0]), float(ok[col].iloc[0])
        r = str(ok["method"].iloc[1]) if len(ok) > 1 else None
        rv = float(ok[col].iloc[1]) if r else float("nan")
        margin = (rv / val - 1.0) if r and val > 0 else float("nan")
        why = []
        if r:
            why.append(f"{w} wins {obj.replace('_', ' ')} at {val:.4g} ms, "
                       + (f"{100 * margin:.1f} % ahead of {r} ({rv:.4g} ms)" if margin > 1e-9
                          else f"tied with {r}"))
        else:
            why.append(f"{w} is the only feasible plan ({val:.4g} ms)")
        if obj == "makespan":
            for m in (w, r):
                if m in schedules:
                    b = critical_breakdown(schedules[m])
                    why.append(f"{m}'s critical path: {b['compute_ms']:.3g} ms compute "
                               f"({_fmt_parts(b['compute'])}), {b['transfer_ms']:.3g} ms "
                               f"transfers" + (f" ({_fmt_parts(b['transfer'])})"
                                               if b["transfer"] else "")
                               + f", {b['idle_ms']:.3g} ms waiting; moves "
                               f"{_fmt_bytes(b['bytes'])}")
        elif plans and cluster is not None:
            from workbench.simulate import device_loads

            for m in (w, r):
                if m in plans:
                    loads = device_loads(plans[m], cluster)
                    k = int(np.argmax(loads))
                    why.append(f"{m}'s busiest device {cluster.names[k]} carries "
                               f"{loads[k]:.3g} ms of {loads.sum():.3g} ms total load")
        out.append({"objective": obj, "winner": w, "value": val, "runner_up": r,
                    "runner_value": rv, "margin": margin, "why": "; ".join(why) + "."})
    return out


def _fmt_bytes(b: float) -> str:
    from ._common import fmt_bytes

    return fmt_bytes(b)
