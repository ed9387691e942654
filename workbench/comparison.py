"""What :func:`workbench.compare` returns, and the analysis of it: flags, own bounds, verdict.

A :class:`Comparison` keeps everything the comparison computed, so that no view has to compute
it again (and possibly differently): the ``table`` (one row per method, the columns of
:data:`workbench.compare.COLUMNS`), the ``plans``, the ``schedules`` the judge simulated them
into (under the comparison's own ``order`` and ``congestion``), the problem's ``bounds``
(computed once) and the ``settings`` it was called with.

It is a plain result object, as PyVRP's ``Result`` is: its ``table`` is the DataFrame
(``cmp.table["method"]``, ``cmp.table.to_csv()``); in a notebook it shows that table.

This module sits below :mod:`workbench.compare` and :mod:`workbench.robustness` (both import
it, it imports neither) and imports no view.

A row's flags say why its number must be read with care:

- ``infeasible``: the plan is out of memory (its live peak, :mod:`workbench.judge.liveness`, exceeds a
  device's capacity) or splits a colocation group (``feasible`` False); ranked after every plan
  that fits;
- ``time_limit``: the solver stopped at its time limit, optimality is not proven;
- ``changed_graph``: the method solved a changed graph (ops split, replicated or coarsened), so
  its lower bound is its own; detected from the plans, a ``graph_changed`` column or, failing
  both, a lower bound that differs from the most common one (same graph and cluster => same
  bound);
- ``error``: the method failed (its message goes to a footnote).

Examples
--------
>>> import workbench as wb
>>> cmp = wb.compare(wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie"),
...                  methods=["single", "m_topo"], progress=False, order="fifo")
>>> list(cmp.table["method"]), len(cmp.table), sorted(cmp.schedules), cmp.settings["order"]
(['single', 'm_topo'], 2, ['m_topo', 'single'], 'fifo')
>>> round(cmp.schedules["m_topo"].makespan, 6) == float(
...     cmp.table.set_index("method").loc["m_topo", "makespan_ms"])
True
>>> cmp.verdict()[0]["winner"], cmp.flags()
('m_topo', {'single': [], 'm_topo': []})
>>> import pandas as pd
>>> df = pd.DataFrame({"method": ["a", "b", "c"], "status": ["heuristic", "time_limit", "error"],
...                    "feasible": [False, True, None], "makespan_lb": [5.0, 5.0, None]})
>>> row_flags(df)
{'a': ['infeasible'], 'b': ['time_limit'], 'c': ['error']}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import PlanError

__all__ = ["Comparison", "is_comparison", "parts", "row_flags", "own_bounds", "verdict", "changed_graph",
           "fmt_bytes"]


@dataclass(eq=False, repr=False)
class Comparison:
    """Everything one :func:`workbench.compare` call computed (see the module docstring).

    Attributes
    ----------
    table : pandas.DataFrame
        One row per method (:data:`workbench.compare.COLUMNS`).
    plans : dict
        Method -> Plan (failed methods absent).
    schedules : dict
        Method -> the :class:`~workbench.plan.Schedule` the table's numbers come from,
        simulated once under ``settings["order"]`` and ``settings["congestion"]``.
    bounds : dict
        ``makespan_ms``/``max_load_ms``: the best bound known for the problem (the analytic
        ones of :func:`workbench.judge.bounds.lower_bounds` and every solver's proven bound, what the
        table's ``*_lb`` columns hold); ``min_devices``; ``analytic`` (the
        :func:`~workbench.judge.bounds.lower_bounds` dict) and ``proven`` (objective -> best proven).
    settings : dict
        The options :func:`workbench.compare` was called with (methods, time_limit, params,
        seed, congestion, order, measure, measure_options).
    graph, cluster
        The problem.
    training : dict
        Method -> the judged :class:`~workbench.judge.training.TrainingResult` of its strategy,
        for a training problem (:mod:`workbench.compare_training`; empty otherwise).

    >>> import workbench as wb
    >>> cmp = wb.compare(wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie"),
    ...                  methods=["heft"], progress=False, congestion=False)
    >>> cmp.congestion, cmp.bounds["min_devices"], cmp.table.shape[0]
    (False, 1, 1)
    """

    _is_comparison = True  # a class marker: see is_comparison

    table: Any
    plans: dict
    schedules: dict = field(default_factory=dict)
    bounds: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    graph: Any = None
    cluster: Any = None
    training: dict = field(default_factory=dict)
    _own: dict = field(default_factory=dict, init=False)

    # ------------------------------------------------------------ settings as attributes
    @property
    def congestion(self) -> bool:
        """Whether transfers queued on their channel when the plans were judged."""
        return bool(self.settings.get("congestion", True))

    @property
    def order(self):
        """The simulator's order policy the plans were judged with (None: each plan's own)."""
        return self.settings.get("order")

    @property
    def time_limit(self):
        """Seconds each method was given."""
        return self.settings.get("time_limit")

    @property
    def params(self) -> dict:
        """``{method: {param: value}}`` the methods were run with."""
        return self.settings.get("params") or {}

    @property
    def left_out(self) -> dict:
        """Methods that cannot serve the problem (no row): method -> one-line reason."""
        return dict(self.settings.get("left_out") or {})

    @property
    def seed(self):
        """The seed every method was run with."""
        return self.settings.get("seed", 0)

    # ------------------------------------------------------------ analysis
    def flags(self) -> dict:
        """Method -> flags of its row (:func:`row_flags`)."""
        return row_flags(self)

    def own_bounds(self) -> dict:
        """Objective column -> each row's own lower bound (:func:`own_bounds`)."""
        return own_bounds(self)

    def verdict(self) -> list:
        """The winner of each objective and why (:func:`verdict`), from the kept schedules."""
        return verdict(self)

    # ------------------------------------------------------------ shown as its table
    def __repr__(self) -> str:
        n = 0 if self.table is None else len(self.table)
        return f"Comparison of {n} method(s):\n{self.table!r}"

    def _repr_html_(self):
        return self.table._repr_html_()


def is_comparison(x) -> bool:
    """Whether ``x`` is a :class:`Comparison` (by a class marker, so that a second copy of this
    module, as pytest's importlib mode makes for doctests, still recognises it).

    >>> import pandas as pd
    >>> is_comparison(Comparison(pd.DataFrame(), {})), is_comparison(pd.DataFrame())
    (True, False)
    """
    return bool(getattr(type(x), "_is_comparison", False))


def parts(df, *, plans: dict | None = None, graph=None, cluster=None,
          schedules: dict | None = None) -> tuple:
    """``(table, plans, graph, cluster, schedules)`` of a :class:`Comparison` (what is given
    here takes precedence), or of a bare table (the given ones, None where not given): what a
    view draws, whichever of the two it is handed.

    >>> import pandas as pd
    >>> cmp = Comparison(pd.DataFrame({"method": ["a"]}), {"a": "plan"}, schedules={"a": "s"})
    >>> t, p, g, c, s = parts(cmp)
    >>> list(t["method"]), p, s
    (['a'], {'a': 'plan'}, {'a': 's'})
    >>> parts(t)[1:] == (None, None, None, None)
    True
    """
    if is_comparison(df):
        return (df.table, df.plans if plans is None else plans,
                df.graph if graph is None else graph, df.cluster if cluster is None else cluster,
                df.schedules if schedules is None else schedules)
    import pandas as pd

    if df is not None and not isinstance(df, pd.DataFrame):  # a Plan, a Robustness, ...
        raise PlanError(f"expected a Comparison from compare(...) or its table (a DataFrame), "
                        f"got {type(df).__name__}")  # named (issue 41); None: no table
    return df, plans, graph, cluster, schedules


def changed_graph(df, plans: dict | None = None, graph=None) -> set:
    """Methods of ``df`` that solved a changed graph (see the module docstring).

    >>> import pandas as pd
    >>> changed_graph(pd.DataFrame({"method": ["a", "b", "c"], "makespan_lb": [2.0, 2.0, 3.0]}))
    {'c'}
    """
    table, plans, graph, _c, _s = parts(df, plans=plans, graph=graph)
    if "graph_changed" in table:
        return set(table["method"][table["graph_changed"].fillna(False).astype(bool)]
                   .astype(str))
    if plans and graph is not None:
        return {str(m) for m, p in plans.items()
                if p.graph is not graph and (p.graph.n_ops != graph.n_ops
                                             or list(p.graph.ops) != list(graph.ops))}
    if "makespan_lb" not in table:
        return set()
    lb = table["makespan_lb"].astype(float)
    ok = lb[np.isfinite(lb)].round(9)
    if not len(ok):
        return set()
    common = ok.mode().iloc[0]
    return set(table["method"][np.isfinite(lb) & (lb.round(9) != common)].astype(str))


def row_flags(df, *, plans: dict | None = None, graph=None) -> dict:
    """Method -> list of flags (see the module docstring) for every row of ``df``, a
    :class:`Comparison` (its plans and graph are used) or a table."""
    table, plans, graph, _c, _s = parts(df, plans=plans, graph=graph)
    if "method" not in table:
        raise ValueError("row_flags needs a 'method' column (got "
                         f"{', '.join(map(str, table.columns))})")
    changed = changed_graph(table, plans, graph)
    out = {}
    for i, m in enumerate(table["method"].astype(str)):
        st = str(table["status"].iloc[i]) if "status" in table else ""
        if st == "error":
            out[m] = ["error"]
            continue
        f = []
        feas = table["feasible"].iloc[i] if "feasible" in table else None
        if feas is not None and feas == feas and not bool(feas):
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
    :func:`row_flags`) is judged on that graph: with ``plans`` and ``cluster`` (a
    :class:`Comparison` has both) its bound is computed on its own graph
    (:func:`workbench.judge.bounds.lower_bounds`, once per Comparison), as a bound of the original
    graph does not hold for it.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"method": ["a"], "makespan_lb": [3.0], "max_load_lb": [2.0]})
    >>> own_bounds(df)
    {'makespan_ms': [3.0], 'max_load_ms': [2.0]}
    """
    table, plans, graph, cluster, _s = parts(df, plans=plans, graph=graph, cluster=cluster)
    cache = df._own if is_comparison(df) else {}
    methods = table["method"].astype(str).tolist()
    changed = changed_graph(table, plans, graph) if plans else set()
    recomputed = {}
    if cluster is not None:
        from .judge.bounds import lower_bounds

        for m in changed:
            if m in plans:
                if m not in cache:
                    cache[m] = lower_bounds(plans[m].graph, cluster)
                recomputed[m] = cache[m]
    out = {}
    for col, lbcol in (("makespan_ms", "makespan_lb"), ("max_load_ms", "max_load_lb")):
        vals = table[lbcol].to_numpy(dtype=float) if lbcol in table \
            else np.full(len(table), np.nan)
        out[col] = [float(recomputed[m][col]) if m in recomputed else float(v)
                    for m, v in zip(methods, vals)]
    return out


def fmt_bytes(b: float) -> str:
    """Bytes in binary units.

    >>> fmt_bytes(3 * 2**20), fmt_bytes(12)
    ('3.0 MiB', '12 B')
    """
    b = float(b)
    for unit, k in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(b) >= k:
            return f"{b / k:.1f} {unit}"
    return f"{b:.0f} B"


def _fmt_parts(d: dict, limit: int = 4) -> str:
    items = sorted(d.items(), key=lambda kv: -kv[1])
    s = ", ".join(f"{k} {v:.3g}" for k, v in items[:limit] if v > 0)
    return s + (", ..." if len(items) > limit else "")


def _why_makespan(schedules: dict, methods) -> list:
    """Each method's realised critical path in words (compute, transfers, waiting, bytes)."""
    from .diff import critical_breakdown

    out = []
    for m in methods:
        if m in schedules:
            b = critical_breakdown(schedules[m])
            out.append(f"{m}'s critical path: {b['compute_ms']:.3g} ms compute "
                       f"({_fmt_parts(b['compute'])}), {b['transfer_ms']:.3g} ms transfers"
                       + (f" ({_fmt_parts(b['transfer'])})" if b["transfer"] else "")
                       + f", {b['idle_ms']:.3g} ms waiting; moves {fmt_bytes(b['bytes'])}")
    return out


def _why_training(training: dict, methods) -> list:
    """Each method's judged training step split by cause (its slowest rank), in words."""
    out = []
    for m in methods:
        if m in training:
            r = training[m]
            b = r.breakdown()
            parts = sorted(((k, v) for k, v in b.items() if k != "step" and v > 0),
                           key=lambda kv: -kv[1])
            out.append(f"{m} runs {r.plan.strategy.describe()}: "
                       + ", ".join(f"{k} {v:,.4g} ms" for k, v in parts)
                       + f"; peak {fmt_bytes(max(r.peak.values()))} a GPU")
    return out


def _why_max_load(plans: dict, cluster, methods) -> list:
    """Each method's busiest device and its share of the total load, in words."""
    from .simulate import device_loads

    out = []
    for m in methods:
        if m in plans:
            loads = device_loads(plans[m], cluster)
            k = int(np.argmax(loads))
            out.append(f"{m}'s busiest device {cluster.names[k]} carries "
                       f"{loads[k]:.3g} ms of {loads.sum():.3g} ms total load")
    return out


def verdict(df, *, schedules: dict | None = None, plans: dict | None = None, cluster=None,
            graph=None) -> list[dict]:
    """The winner of each objective and why, among rows that ran and are feasible.

    ``df`` is a :class:`Comparison` (its plans, cluster, graph and kept schedules are used:
    nothing is simulated) or a bare table with ``plans``/``cluster`` (then the plans are
    simulated with the judge's defaults when no ``schedules`` are given).

    Returns one dict per objective (``makespan``, ``max_load``) with ``objective``,
    ``winner``, ``value``, ``runner_up``, ``runner_value``, ``margin`` (relative) and ``why``
    (a sentence: the winner's realised critical path split into compute, transfer and idle time
    per device and link and the bytes it moves, against the runner-up's; for max load the
    busiest device's load). Objectives without a feasible row are left out.

    >>> import workbench as wb
    >>> g, c = wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie")
    >>> cmp = wb.compare(g, c, methods=["single", "m_topo"], progress=False)
    >>> v = verdict(cmp)
    >>> v[0]["objective"], v[0]["winner"], v[0]["runner_up"]
    ('makespan', 'm_topo', 'single')
    >>> "critical path" in v[0]["why"]
    True
    """
    table, plans, graph, cluster, schedules = parts(df, plans=plans, graph=graph,
                                                    cluster=cluster, schedules=schedules)
    if not len(table):  # every method left out: nothing wins
        return []
    flags = row_flags(table, plans=plans, graph=graph)
    if schedules is None and plans and cluster is not None:
        from .simulate import simulate

        schedules = {m: simulate(pl, cluster) for m, pl in plans.items()}
    schedules = schedules or {}
    training = df.training if is_comparison(df) else {}
    out = []
    for obj, col in (("makespan", "makespan_ms"), ("max_load", "max_load_ms")):
        if col not in table:
            continue
        ok = table[[("error" not in flags[str(m)] and "infeasible" not in flags[str(m)])
                    for m in table["method"].astype(str)]]
        ok = ok[np.isfinite(ok[col].astype(float))].sort_values(col, kind="stable")
        if not len(ok):
            continue
        w, val = str(ok["method"].iloc[0]), float(ok[col].iloc[0])
        also = []
        if training and "strategy" in ok:  # the runner-up: the best *other* strategy
            same = (ok["strategy"] == ok["strategy"].iloc[0]).to_numpy()
            also = [str(m) for m in ok["method"][same].iloc[1:]]
            ok = ok[~same | (ok["method"].astype(str) == w).to_numpy()]
        r = str(ok["method"].iloc[1]) if len(ok) > 1 else None
        rv = float(ok[col].iloc[1]) if r else float("nan")
        margin = (rv / val - 1.0) if r and val > 0 else float("nan")
        if r:
            what = "the training step" if training else obj.replace("_", " ")
            who = f"{w} ({', '.join(also)}: the same strategy)" if also else w
            why = [f"{who} wins {what} at {val:.4g} ms, "
                   + (f"{100 * margin:.1f} % ahead of {r} ({rv:.4g} ms)" if margin > 1e-9
                      else f"tied with {r}")]
        else:
            why = [f"{w} is the only feasible plan ({val:.4g} ms)"]
        if obj == "makespan" and training:
            why += _why_training(training, (w, r))
        elif obj == "makespan":
            why += _why_makespan(schedules, (w, r))
        elif plans and cluster is not None:
            why += _why_max_load(plans, cluster, (w, r))
        out.append({"objective": obj, "winner": w, "value": val, "runner_up": r,
                    "runner_value": rv, "margin": margin, "why": "; ".join(why) + "."})
    return out
