"""Analysis of sweep results: tables, win/tie/loss counts and Dolan-More performance profiles.

A *problem* is one combination of the non-method keys (workload, cluster variation, seed,
limits); each method has one value of the objective on it. A cell that failed, timed out or
broke a constraint (``feasible`` false) counts as infinitely bad.

Examples
--------
>>> import pandas as pd
>>> df = pd.DataFrame({"workload": ["g1", "g1", "g2", "g2"], "method": ["a", "b", "a", "b"],
...                    "status": ["heuristic"] * 4, "feasible": [True] * 4,
...                    "makespan_ms": [10.0, 12.0, 8.0, 8.0]})
>>> win_tie_loss(df).to_dict("records")[0]
{'method': 'a', 'opponent': 'b', 'wins': 1, 'ties': 1, 'losses': 0}
>>> performance_profile(df, taus=[1.0, 1.2]).pivot(index="tau", columns="method",
...                                                 values="fraction").to_dict("list")
{'a': [1.0, 1.0], 'b': [0.5, 1.0]}
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import SweepError

__all__ = [
    "by_parameter",
    "markdown_table",
    "objective_matrix",
    "performance_profile",
    "pivot_table",
    "problem_columns",
    "win_tie_loss",
    "wtl_table",
]

_PROBLEM_KEYS = ["workload", "preset", "devices", "n_devices", "bandwidth_scale",
                 "latency_scale", "memory_fraction", "seed", "time_limit", "measure",
                 "congestion"]


def problem_columns(df) -> list[str]:
    """The columns of ``df`` that identify a problem (every key but the method's)."""
    return [c for c in _PROBLEM_KEYS if c in df.columns and c != "n_devices"] or \
        [c for c in ("workload",) if c in df.columns]


def objective_matrix(df, objective: str = "makespan_ms"):
    """Problems x methods matrix of ``objective`` (inf where the cell failed or was infeasible).

    >>> import pandas as pd
    >>> df = pd.DataFrame({"workload": ["g", "g"], "method": ["a", "b"],
    ...                    "status": ["optimal", "error"], "makespan_ms": [3.0, float("nan")]})
    >>> objective_matrix(df).to_dict("records")
    [{'a': 3.0, 'b': inf}]
    """
    if objective not in df.columns:
        raise SweepError(f"results have no column {objective!r}; objectives: makespan_ms, "
                         f"max_load_ms")
    keys = problem_columns(df)
    d = df.copy()
    for c in keys:  # NaN keys (no memory cap) must still group
        if d[c].dtype.kind == "f":
            d[c] = d[c].fillna(-1.0)
    v = d[objective].astype(float).to_numpy(copy=True)
    bad = np.zeros(len(d), bool)
    if "status" in d:
        bad |= d["status"].isin(["error", "timeout"]).to_numpy(dtype=bool)
    if "feasible" in d:
        bad |= (d["feasible"] == False).to_numpy(dtype=bool, na_value=False)
    v[bad | np.isnan(v)] = math.inf
    d["_v"] = v
    m = d.pivot_table(index=keys, columns="method", values="_v", aggfunc="min")
    m.columns.name = None
    return m


def win_tie_loss(df, objective: str = "makespan_ms", *, rtol: float = 1e-6):
    """Pairwise counts: on how many problems each method beats, ties or loses to each other.

    Two values tie when they differ by at most ``rtol`` relatively (both infinite also tie).
    Returns a tidy DataFrame ``method, opponent, wins, ties, losses``.
    """
    import pandas as pd

    m = objective_matrix(df, objective)
    names = list(m.columns)
    a = m.to_numpy()
    rows = []
    for i, x in enumerate(names):
        for j, y in enumerate(names):
            if i == j:
                continue
            u, w = a[:, i], a[:, j]
            both = ~(np.isnan(u) | np.isnan(w))
            u, w = u[both], w[both]
            with np.errstate(invalid="ignore"):
                tie = (u == w) | np.isclose(u, w, rtol=rtol, atol=0.0)
            rows.append({"method": x, "opponent": y, "wins": int(((u < w) & ~tie).sum()),
                         "ties": int(tie.sum()), "losses": int(((u > w) & ~tie).sum())})
    return pd.DataFrame(rows, columns=["method", "opponent", "wins", "ties", "losses"])


def wtl_table(df, objective: str = "makespan_ms", *, rtol: float = 1e-6):
    """Square table of ``"wins/ties/losses"`` strings (row method against column method)."""
    t = win_tie_loss(df, objective, rtol=rtol)
    t["wtl"] = t["wins"].astype(str) + "/" + t["ties"].astype(str) + "/" + \
        t["losses"].astype(str)
    out = t.pivot(index="method", columns="opponent", values="wtl").fillna("-")
    out.index.name, out.columns.name = None, None
    names = list(objective_matrix(df, objective).columns)
    return out.reindex(index=names, columns=names).fillna("-")


def performance_profile(df, objective: str = "makespan_ms", *, taus=None):
    """Dolan-More profile: for each method and factor tau, the fraction of problems on which
    the method is within ``tau`` times the best method's value.

    Returns a tidy DataFrame ``method, tau, fraction``; ``taus`` default: the observed ratios
    (so the curve's steps are exact), from 1 to the largest finite ratio.
    """
    import pandas as pd

    m = objective_matrix(df, objective)
    a = m.to_numpy()
    best = np.min(np.where(np.isnan(a), math.inf, a), axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(np.isfinite(best), a / best, math.inf)
    r[np.isnan(r)] = math.inf
    r[(best == 0) & (a == 0)] = 1.0
    if taus is None:
        fin = r[np.isfinite(r)]
        taus = np.unique(np.concatenate([[1.0], fin, [fin.max() if fin.size else 1.0]]))
    taus = np.asarray(list(taus), float)
    n = max(len(r), 1)
    rows = [{"method": name, "tau": float(t), "fraction": float((r[:, j] <= t).sum() / n)}
            for j, name in enumerate(m.columns) for t in taus]
    return pd.DataFrame(rows, columns=["method", "tau", "fraction"])


def by_parameter(df, x: str = "bandwidth_scale", objective: str = "makespan_ms", *,
                 normalize: bool = False):
    """Mean ``objective`` per method and value of ``x`` (e.g. ``bandwidth_scale``,
    ``n_devices``) over the feasible cells; ``normalize`` divides each problem's values by
    its best method's first (so workloads of different sizes average fairly).
    """
    if x not in df.columns:
        raise SweepError(f"results have no column {x!r}")
    m = objective_matrix(df, objective)
    if normalize:
        m = m.div(m.min(axis=1), axis=0)
    t = m.replace(math.inf, np.nan).reset_index()
    key = x if x in t.columns else None
    if key is None:  # n_devices: recover it from the rows
        sub = df[problem_columns(df) + [x]].drop_duplicates(problem_columns(df))
        t = t.merge(sub.fillna({c: -1.0 for c in problem_columns(df)
                                if sub[c].dtype.kind == "f"}), on=problem_columns(df))
    long = t.melt(id_vars=[c for c in t.columns if c not in m.columns], value_vars=list(m.columns),
                  var_name="method", value_name=objective)
    return (long.groupby([x, "method"], as_index=False)[objective].mean()
            .sort_values([x, "method"]).reset_index(drop=True))


def pivot_table(df, objective: str = "makespan_ms", *, index="workload", columns="method",
                order=None):
    """``index`` x ``columns`` table of ``objective`` (failed cells shown as NaN); ``order``:
    the columns' order (default: as first seen in ``df``)."""
    d = df.copy()
    bad = d["status"].isin(["error", "timeout"]) if "status" in d else False
    d.loc[bad, objective] = np.nan
    t = d.pivot_table(index=index, columns=columns, values=objective, aggfunc="min",
                      dropna=False)
    order = list(order) if order is not None else list(dict.fromkeys(df[columns]))
    t = t.reindex(columns=[c for c in order if c in t.columns])
    t.columns.name = None
    return t


def markdown_table(t, *, digits: int = 2, status=None) -> str:
    """A DataFrame as a GitHub markdown table (NaN shown as ``-``).

    >>> import pandas as pd
    >>> print(markdown_table(pd.DataFrame({"a": [1.234, float("nan")]}, index=["x", "y"])))
    |  | a |
    |---|---|
    | x | 1.23 |
    | y | - |
    """
    def fmt(v):
        if isinstance(v, float):
            return "-" if math.isnan(v) else f"{v:.{digits}f}"
        return str(v)

    idx = t.index.names if t.index.nlevels > 1 else [t.index.name or ""]
    head = "| " + " | ".join([" / ".join(str(i or "") for i in idx)] + [str(c) for c in t.columns])
    lines = [head + " |", "|" + "---|" * (len(t.columns) + 1)]
    for i, row in t.iterrows():
        name = " / ".join(map(str, i)) if isinstance(i, tuple) else str(i)
        lines.append("| " + " | ".join([name] + [fmt(v) for v in row]) + " |")
    return "\n".join(lines)


def results_table(df, objective: str = "makespan_ms", *, index=("workload", "preset"),
                  order=None, digits: int = 2):
    """Markdown table of ``objective`` per problem (rows) and method (columns): ``*`` marks a
    plan that breaks a constraint (``feasible`` false), failed cells show their status.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"workload": ["g", "g", "g"], "preset": ["p"] * 3,
    ...                    "method": ["a", "b", "c"], "status": ["optimal", "heuristic", "timeout"],
    ...                    "feasible": [True, False, None], "makespan_ms": [1.0, 0.5, None]})
    >>> print(results_table(df))
    | workload / preset | a | b | c |
    |---|---|---|---|
    | g / p | 1.00 | 0.50* | timeout |
    """
    import pandas as pd

    index = [c for c in index if c in df.columns]
    order = list(order) if order is not None else list(dict.fromkeys(df["method"]))
    cells = {}
    for r in df.to_dict("records"):
        k = tuple(r[c] for c in index)
        v = r.get(objective)
        if r.get("status") in ("error", "timeout") or v is None or \
                (isinstance(v, float) and math.isnan(v)):
            txt = str(r.get("status") or "-")
        else:
            broken = r.get("feasible") is False or str(r.get("feasible")) == "False"
            txt = f"{float(v):.{digits}f}" + ("*" if broken else "")
        cells.setdefault(k, {})[r["method"]] = txt
    t = pd.DataFrame.from_dict(cells, orient="index")
    t = t.reindex(columns=[m for m in order if m in t.columns]).fillna("-")
    t.index = pd.MultiIndex.from_tuples(t.index, names=index) if len(index) > 1 else \
        pd.Index([k[0] for k in t.index], name=index[0])
    return markdown_table(t.sort_index())
