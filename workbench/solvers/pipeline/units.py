"""Units: the ops of a graph grouped into pieces that must share a device, with what the
programs of Tarnawski et al. (NeurIPS 2020) need per unit (compute per device, memory, the
transfers as hyperedges), and the pieces every program of the room shares: the assignment of a
plan's units, the placement of a unit assignment, a MILP outcome's status, and the rows of
Section 4.2 (separate forward/backward contiguity on training graphs).

The bottom of :mod:`workbench.solvers.pipeline` beside :mod:`.contraction` and :mod:`.ideals`:
it imports no other module of the room, and every entry module (``ip``, ``latency``,
``local_search``) imports it.

Examples
--------
>>> from workbench import samples, Cluster
>>> c = Cluster.preset("2xV100-pcie")
>>> U = class_units(samples.diamond(), c)
>>> U.n, U.edges
(4, [(0, 1), (0, 2), (1, 3), (2, 3)])
>>> unit_placement(U.graph, c, np.array([0, 0, 1, 0]), U.owner)
{'a': 'gpu0', 'b': 'gpu0', 'c': 'gpu1', 'd': 'gpu0'}
"""

from __future__ import annotations

import numpy as np

from ...costs.pipeline_costs import check_finite_costs, out_costs, transfer_tiers
from ...errors import InfeasibleError, SolverError
from ...plan import Plan
from .contraction import class_keys, contract_for_dp

__all__ = ["Units", "add_rows", "check_total_memory", "class_units", "dp_units", "greedy_units", "pass_rows",
           "pass_units", "plan_status", "unit_assignment", "unit_placement"]


class Units:
    """Ops grouped into units that must share a device: per unit and device the compute time
    (``comp[v, i]``, ``inf`` where it cannot run; ``Device.speed`` applied), memory, and the
    hyperedges ``(producer unit, consumer units, cost)``: the judge's nested transfer tiers
    for max-load (``tiers=True``), the paper's per-op ``c_u`` for latency.

    ``passes=True`` (GPipe objective, App. A): ``comp2[v, i, q]`` is the compute of the
    forward (``q = 0``) and backward (``q = 1``) ops, and ``hpass[h]`` the pass of hyperedge
    ``h``'s producing ops (hyperedges of different passes are kept apart).
    ``hier=True`` (hosts, App. C.3): costs are the per-op ``c_u`` inside a host (``hyper``)
    and across hosts (``hslow``), as :func:`workbench.judge.pipelined.hierarchical_loads` charges.
    ``slowest=True``: tiers at the slowest link (forwarded hops, ``direct`` mode)."""

    def __init__(self, graph, cluster, owner: np.ndarray, nunits: int, *, tiers: bool = True,
                 passes: bool = False, hier: bool = False, slowest: bool = False):
        gc = graph.c
        self.graph, self.owner, self.n = graph, owner, nunits
        times = cluster.op_times(graph)
        nd = times.shape[1]
        fin = np.isfinite(times)
        bwd = np.isin(gc.op_kind, [1, 2])
        self.comp = np.zeros((nunits, nd))
        self.comp2 = np.zeros((nunits, nd, 2))
        for i in range(nd):
            t = np.where(fin[:, i], times[:, i], 0.0)
            for q, sel in enumerate((~bwd, bwd)):
                self.comp2[:, i, q] = np.bincount(owner, weights=np.where(sel, t, 0.0),
                                                  minlength=nunits)
            self.comp[:, i] = np.bincount(owner, weights=t, minlength=nunits)
            bad = np.bincount(owner, weights=~fin[:, i], minlength=nunits) > 0
            self.comp[bad, i] = np.inf
            self.comp2[bad, i, :] = np.inf
        self.mem = np.bincount(owner, weights=gc.memory, minlength=nunits)
        hyper: dict = {}
        slow = None
        if hier:
            from ...judge.pipelined import hierarchical_costs

            c, slow = hierarchical_costs(graph, cluster)
            cheaper = np.flatnonzero(slow < c - 1e-12 * np.maximum(1.0, c))
            if len(cheaper):
                u = int(cheaper[0])
                raise SolverError(
                    f"pipeline IP: the across-hosts transfer of op {gc.names[u]!r} "
                    f"({slow[u]:.6g} ms) is cheaper than inside a host ({c[u]:.6g} ms) on "
                    f"cluster {cluster.name!r}; the hierarchical model (App. C.3) needs "
                    f"inter_host no faster than intra_host")
            items = [(u, tuple(gc.succ[u]), float(c[u])) for u in range(gc.n) if gc.succ[u]]
        elif tiers:
            items = transfer_tiers(graph, cluster, slowest=slowest)
        else:
            c = out_costs(graph, cluster)
            items = [(u, tuple(gc.succ[u]), float(c[u])) for u in range(gc.n) if gc.succ[u]]
        for u, cons, w in items:
            a = int(owner[u])
            T = frozenset(int(owner[v]) for v in cons) - {a}
            ws = float(slow[u]) if hier else 0.0
            if T and (w > 0 or ws > 0):
                key = (a, T, int(bwd[u]) if passes else 0)
                old = hyper.get(key, (0.0, 0.0))
                hyper[key] = (old[0] + float(w), old[1] + ws)
        self.hyper = [(a, sorted(T), w) for (a, T, _q), (w, _s) in hyper.items()]
        self.hpass = [q for (_a, _T, q) in hyper]
        self.hslow = [s for (_w, s) in hyper.values()] if hier else [0.0] * len(hyper)
        edges = set()
        for u, v in zip(gc.src.tolist(), gc.dst.tolist()):
            a, b = int(owner[u]), int(owner[v])
            if a != b:
                edges.add((a, b))
        self.edges = sorted(edges)
        fc = self.comp[np.isfinite(self.comp)]
        check_finite_costs(np.concatenate([fc, [w for *_x, w in self.hyper], self.hslow]),
                           what="compute and transfer times", method="pipeline IP")

    @property
    def acc(self) -> np.ndarray:  # pragma: no cover - kept for callers of the old API
        return self.comp.min(axis=1)

    def op_of(self, v: int) -> str:
        """The name of the first op of unit ``v`` (for error messages)."""
        return self.graph.c.names[int(np.flatnonzero(self.owner == v)[0])]


def class_units(graph, cluster, *, tiers: bool = True, **kw) -> Units:
    """One unit per colour class (an op without one is its own unit): the non-contiguous
    programs' and the local search's units. ``kw`` as :class:`Units`."""
    cls, _keys = class_keys(graph)
    _uniq, owner = np.unique(cls, return_inverse=True)
    return Units(graph, cluster, owner.astype(np.int64), len(_uniq), tiers=tiers, **kw)


def dp_units(graph, cluster, merge_trivial=True, *, tiers: bool = True, **kw):
    """The supernodes of the DP's contracted forward graph (:func:`.contraction.contract_for_dp`)
    as units, with ``fwd_edges`` (its forward DAG's edges, on which contiguity is stated), and
    the contracted problem: ``(units, problem)``.

    >>> from workbench import samples, Cluster
    >>> U, p = dp_units(samples.diamond(), Cluster.preset("2xV100-pcie"))
    >>> U.n == p.n, U.fwd_edges
    (True, [(0, 1), (0, 2), (1, 3), (2, 3)])
    """
    p = contract_for_dp(graph, cluster, merge_trivial=merge_trivial)
    u = Units(graph, cluster, p.owner, p.n, tiers=tiers, **kw)
    u.fwd_edges = [(a, b) for a in range(p.n) for b in p.succ[a]]
    return u, p


def unit_assignment(units: Units, plan: Plan, cluster) -> np.ndarray:
    """Device index of every unit in ``plan`` (the device of its ops; -1 for none)."""
    dev = plan.device_array(cluster)
    out = np.full(units.n, -1, dtype=np.int64)
    out[units.owner] = dev
    return out


def unit_placement(graph, cluster, asg: np.ndarray, owner: np.ndarray) -> dict:
    """Op name -> device name for the unit assignment ``asg`` (device index per unit) with
    ``owner`` the unit of every op."""
    names = cluster.names
    dev = asg[owner]
    return {graph.c.names[j]: names[int(d)] for j, d in enumerate(dev.tolist())}


def plan_status(res, judged: float, scaled_obj: float) -> tuple[str, str | None]:
    """Plan status from the MILP outcome: ``optimal`` only when HiGHS proved a zero gap and
    its objective is the judge's value."""
    agree = abs(scaled_obj - judged) <= 1e-5 * max(1.0, abs(judged))
    if res.status == "optimal" and res.gap <= 1e-6 and agree:
        return "optimal", None
    if res.status in ("time_limit", "interrupted"):
        return "time_limit", None
    note = None if agree else (f"the MILP's objective {scaled_obj:.6g} differs from the "
                               f"judge's {judged:.6g}")
    return "feasible", note


def check_total_memory(U: Units, cluster, method: str) -> None:
    """:class:`~workbench.errors.InfeasibleError` when the units' memory exceeds what all the
    devices of ``cluster`` hold together (no split can fit; issue 41: the programs spent
    their whole time limit building a model that has no solution and said "raise
    time_limit"). Devices without a memory figure hold anything.

    >>> from workbench import samples, Cluster
    >>> g = samples.to_training(samples.cnn(8))
    >>> c = Cluster.preset("2xV100-pcie").with_memory(g.total_memory() * 0.4)
    >>> check_total_memory(class_units(g, c), c, "ip_contig")
    Traceback (most recent call last):
    ...
    workbench.errors.InfeasibleError: ip_contig: the ops of graph 'cnn8-train' need 8.5 MB but the 2 devices of cluster '2xV100-pcie' hold 6.8 MB in all: no split fits
    """
    caps = np.array([d.memory for d in cluster.devices], dtype=float)
    need = float(np.sum(U.mem))
    if np.isinf(caps).any() or need <= float(caps.sum()) * (1 + 1e-12):
        return
    raise InfeasibleError(f"{method}: the ops of graph {U.graph.name!r} need {need / 1e6:.4g} MB "
                          f"but the {len(caps)} devices of cluster {cluster.name!r} hold "
                          f"{caps.sum() / 1e6:.4g} MB in all: no split fits")


def greedy_units(graph, cluster):
    """The latency programs' units: the DP's contraction without merging trivial chains, and
    the paper's per-op transfer cost ``c_u`` (no tiers); ``(units, problem)``."""
    return dp_units(graph, cluster, merge_trivial=False, tiers=False)


def pass_units(graph, cluster) -> Units:
    """Units for training graphs with separate forward/backward contiguity (Section 4.2):
    each colour-class unit of :func:`greedy_units` split into its forward half and its
    backward half (``bwd``/``update`` ops). ``together``: pairs of halves of one unit (they
    share a device, as they share weights); ``pass_edges``: the unit edges between two
    forward halves and between two backward halves (each pass's contiguity is judged on its
    own edges).

    >>> from workbench import samples, Cluster
    >>> U = pass_units(samples.to_training(samples.cnn(8)), Cluster.preset("2xV100-pcie"))
    >>> U.n, len(U.together), [len(e) for e in U.pass_edges]
    (16, 8, [7, 7])
    """
    U0, _p = greedy_units(graph, cluster)
    gc = graph.c
    bwd = np.isin(gc.op_kind, [1, 2]).astype(np.int64)
    key = U0.owner.astype(np.int64) * 2 + bwd
    uniq, owner = np.unique(key, return_inverse=True)
    U = Units(graph, cluster, owner.astype(np.int64), len(uniq), tiers=False)
    half = {int(k): i for i, k in enumerate(uniq.tolist())}
    U.together = [(half[k], half[k + 1]) for k in half if k % 2 == 0 and k + 1 in half]
    is_bwd = (uniq % 2).astype(bool)
    U.pass_edges = ([(a, b) for a, b in U.edges if not is_bwd[a] and not is_bwd[b]],
                    [(a, b) for a, b in U.edges if is_bwd[a] and is_bwd[b]])
    return U


def pass_rows(U, cluster, slots, x) -> list:
    """Rows of Section 4.2 for units of :func:`pass_units` (none for other units):
    ``(terms, sense, rhs)`` with ``terms`` a list of ``(coefficient, variable or
    ("z", name))`` and ``sense`` one of ``"=="``, ``"<="``, ``">="``. The two halves of a unit
    are on one device; on every accelerator the forward halves are contiguous on the forward
    edges and the backward halves on the backward edges (the paper's rows (11)-(13) per pass,
    ``z`` an ideal-closure indicator per unit, pass and device; ``("z", name)`` asks the
    engine for a new variable in [0, 1])."""
    if not hasattr(U, "pass_edges"):
        return []
    by_dev: dict = {}
    for j, (d, _r) in enumerate(slots):
        by_dev.setdefault(d, []).append(j)
    Xd = lambda v, d, c=1: [(c, x[v, j]) for j in by_dev[d] if (v, j) in x]
    rows = []
    for a, b in U.together:
        for d in by_dev:
            rows.append((Xd(a, d) + Xd(b, d, -1), "==", 0))
    for d in by_dev:
        if cluster.devices[d].kind == "cpu":
            continue
        for p, edges in enumerate(U.pass_edges):
            z = {}
            for v in sorted({v for e in edges for v in e}):
                z[v] = ("z", f"zpass{p}_{v}_{d}")
                rows.append(([(1, z[v])] + Xd(v, d, -1), ">=", 0))
            for a, b in edges:
                rows.append(([(1, z[b]), (-1, z[a])], "<=", 0))
                rows.append(([(1, z[b])] + Xd(b, d, -1) + Xd(a, d), "<=", 1))
    return [r for r in rows if r[0]]


def add_rows(rows: list, new_var, add, total=sum) -> None:
    """Add :func:`pass_rows` to a model: ``new_var(name)`` makes a [0, 1] variable,
    ``total`` sums terms into an expression (``pulp.lpSum`` for PuLP), ``add(constraint)``
    adds one comparison of an expression with a number."""
    made: dict = {}
    for terms, sense, rhs in rows:
        out = []
        for c, v in terms:
            if isinstance(v, tuple):
                if v[1] not in made:
                    made[v[1]] = new_var(v[1])
                v = made[v[1]]
            out.append(c * v)
        e = total(out)
        add(e == rhs if sense == "==" else (e <= rhs if sense == "<=" else e >= rhs))
