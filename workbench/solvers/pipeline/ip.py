"""Max-load integer programs of Tarnawski et al. (NeurIPS 2020).

* ``ip_contig`` / ``ip_noncontig``: the max-load IP of Fig. 6 (throughput), with or without the
  contiguity constraint, which is linearised with the ``z`` variables of Lemma 4.1
  (``z ≥ x``, ``z_v ≤ z_u`` and ``z_v ≤ x_v - x_u + 1`` on every edge ``(u, v)``).
  Colour classes are contracted first (colocation); the contiguous program works on the DP's
  contracted forward graph, so it searches exactly the DP's space. Warm start: the DP split.
* Loads are the judge's (:mod:`workbench.costs.pipeline`): per-device compute with
  ``Device.speed``, nested transfer tiers (exact for any per-edge costs), per-device memory
  (``inf`` = no constraint), CPUs paying for transfers in ``direct`` mode. Times are scaled by
  the warm start's value and memory by each device's capacity, so costs up to ~1e15 ms solve.
* The time limit bounds the whole call: the DP warm start gets part of it and the model build
  checks it; when it runs out before HiGHS can start, the warm start comes back with status
  ``time_limit``. ``optimal`` only when HiGHS proves a zero gap and its objective equals
  :func:`workbench.simulate.max_load` of the plan; ``ip_contig``'s proof covers contiguous
  splits only, so it says ``feasible`` (``stats["optimal_among"]``) unless its value meets the
  max-load lower bound.

The latency IP and the greedy latency baseline are in :mod:`.pipeline_latency`. All programs are
PuLP models solved by :func:`workbench.solvers.milp.solve_milp` (HiGHS).

Examples
--------
>>> from workbench import samples, Cluster, solve, max_load
>>> from workbench.cluster import Device, Link
>>> c = Cluster([Device(f"gpu{i}", "gpu", 1e9) for i in range(2)] + [Device("cpu0", "cpu")],
...             mode="host", host_link=Link(0.0, 1e6))
>>> g = samples.two_branch()
>>> a = solve(g, c, method="dp"); b = solve(g, c, method="ip_noncontig", time_limit=20)
>>> b.predicted["max_load_ms"] <= a.predicted["max_load_ms"] + 1e-6
True
>>> abs(max_load(b, c) - b.predicted["max_load_ms"]) < 1e-6
True
"""

from __future__ import annotations

import math
import time

import numpy as np
import pulp

from ...errors import InfeasibleError, SolverError
from ...costs.pipeline import (
    check_finite_costs,
    contiguous_optimum_status,
    out_costs,
    pipeline_model,
    transfer_tiers,
)
from ...plan import Plan
from ..registry import register
from ..milp import solve_milp
from .dp import _class_keys, contract_for_dp

__all__ = ["ip_contig", "ip_noncontig"]


class _Deadline:
    """Wall-clock budget of one solver call (model build and warm start included)."""

    def __init__(self, limit: float | None):
        self.t0 = time.perf_counter()
        self.limit = limit

    def left(self) -> float:
        if self.limit is None:
            return math.inf
        return self.limit - (time.perf_counter() - self.t0)

    def over(self) -> bool:
        return self.left() <= 0

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0


class _OutOfTime(Exception):
    pass


# ----------------------------------------------------------------------------- units
class _Units:
    """Ops grouped into units that must share a device: per unit and device the compute time
    (``comp[v, i]``, ``inf`` where it cannot run; ``Device.speed`` applied), memory, and the
    hyperedges ``(producer unit, consumer units, cost)``: the judge's nested transfer tiers
    for max-load (``tiers=True``), the paper's per-op ``c_u`` for latency.

    ``passes=True`` (GPipe objective, App. A): ``comp2[v, i, q]`` is the compute of the
    forward (``q = 0``) and backward (``q = 1``) ops, and ``hpass[h]`` the pass of hyperedge
    ``h``'s producing ops (hyperedges of different passes are kept apart).
    ``hier=True`` (hosts, App. C.3): costs are the per-op ``c_u`` inside a host (``hyper``)
    and across hosts (``hslow``), as :func:`workbench.pipeline.hierarchical_loads` charges."""

    def __init__(self, graph, cluster, owner: np.ndarray, nunits: int, *, tiers: bool = True,
                 passes: bool = False, hier: bool = False):
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
            from ...pipeline import hierarchical_costs

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
            items = transfer_tiers(graph, cluster)
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
        return self.graph.c.names[int(np.flatnonzero(self.owner == v)[0])]


def _class_units(graph, cluster, *, tiers: bool = True, **kw):
    cls, _keys = _class_keys(graph)
    _uniq, owner = np.unique(cls, return_inverse=True)
    return _Units(graph, cluster, owner.astype(np.int64), len(_uniq), tiers=tiers, **kw)


def _dp_units(graph, cluster, merge_trivial=True, *, tiers: bool = True, **kw):
    p = contract_for_dp(graph, cluster, merge_trivial=merge_trivial)
    u = _Units(graph, cluster, p.owner, p.n, tiers=tiers, **kw)
    u.fwd_edges = [(a, b) for a in range(p.n) for b in p.succ[a]]
    return u, p


def _unit_assignment(units: _Units, plan: Plan, cluster) -> np.ndarray:
    dev = plan.device_array(cluster)
    out = np.full(units.n, -1, dtype=np.int64)
    out[units.owner] = dev
    return out


def _placement(graph, cluster, asg: np.ndarray, owner: np.ndarray) -> dict:
    names = cluster.names
    dev = asg[owner]
    return {graph.c.names[j]: names[int(d)] for j, d in enumerate(dev.tolist())}


def _plan_status(res, judged: float, scaled_obj: float) -> tuple[str, str | None]:
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


# ----------------------------------------------------------------------------- max-load IP
def _judge(objective: str, hierarchical: bool, interleave):
    """The evaluator an IP variant is judged by (and optimises)."""
    from ...pipeline import hierarchical_loads, pipelined_time
    from ...simulate import max_load

    if hierarchical:
        return lambda pl, cl: float(hierarchical_loads(pl, cl).max())
    if objective == "gpipe" or interleave:
        return lambda pl, cl: pipelined_time(pl, cl, interleave=interleave, objective=objective)
    return max_load


def _check_options(method: str, objective: str, hierarchical: bool, interleave) -> int:
    from .kernel import interleave_mode

    if objective not in ("pipedream", "gpipe"):
        raise SolverError(f"{method}: objective must be 'pipedream' or 'gpipe', got "
                          f"{objective!r}")
    mode = interleave_mode(interleave)
    if hierarchical and (mode or objective == "gpipe"):
        raise SolverError(f"{method}: hierarchical=True does not combine with interleave or "
                          f"objective='gpipe' (the judge, pipeline.hierarchical_loads, charges "
                          f"compute plus transfers)")
    return mode


class _Bounds:
    """Lower-bound rows of the auxiliary variables, ``var >= sum(coef * [unit on devs])``,
    kept to give the warm start the least feasible value of every auxiliary variable."""

    def __init__(self):
        self.rows: dict = {}

    def add(self, prob, var, terms: list, name: str) -> None:
        """``var >= sum(coef * X(unit, devs))`` with ``X`` the summed assignment variables."""
        prob += var >= pulp.lpSum(c * X for c, X, _u, _d in terms), name
        self.rows.setdefault(var, []).append([(c, u, d) for c, _X, u, d in terms])

    def values(self, ai: np.ndarray) -> dict:
        return {var: max([0.0] + [sum(c * float(int(ai[u]) in d) for c, u, d in row)
                                  for row in rows]) for var, rows in self.rows.items()}


def _maxload_ip(graph, cluster, *, contiguous: bool, time_limit, gap, warm_start: bool,
                method: str, interleave=False, hierarchical: bool = False,
                objective: str = "pipedream", symmetry: bool = True) -> Plan:
    mode = _check_options(method, objective, hierarchical, interleave)
    gpipe = objective == "gpipe"
    key = "time_per_sample_ms" if gpipe else "max_load_ms"
    judge = _judge(objective, hierarchical, interleave)
    dl = _Deadline(time_limit)
    if hierarchical:
        pipeline_model(cluster, method=method, identical=False, any_mode=True)
    else:
        model = pipeline_model(cluster, method=method, identical=False)
    kw = {"hier": hierarchical, "passes": gpipe}
    if contiguous:
        U, _p = _dp_units(graph, cluster, **kw)
        cedges = U.fwd_edges
    else:
        U = _class_units(graph, cluster, **kw)
        cedges = []
    warm = _dp_warm(graph, cluster, dl, interleave=interleave, objective=objective,
                    hierarchical=hierarchical, judge=judge) if warm_start else None
    nd = len(cluster)
    pays = [True] * nd if hierarchical else model.pays
    caps = [d.memory for d in cluster.devices]
    hosts = cluster.hosts()
    host_devs = [frozenset(i for i, d in enumerate(cluster.devices) if d.host == h)
                 for h in hosts]
    host_of = [next(k for k, s in enumerate(host_devs) if i in s) for i in range(nd)]
    # scale: times in units of an upper bound, memory in units of each device's capacity
    ref = judge(warm, cluster) if warm is not None else None
    if not ref or not math.isfinite(ref):
        fin = np.where(np.isfinite(U.comp), U.comp, 0.0)
        ref = float(fin.max(axis=1).sum() + sum(U.hslow) + sum(w for *_x, w in U.hyper)) or 1.0
    T = ref
    prob = pulp.LpProblem(method, pulp.LpMinimize)
    x = {}
    lbs = _Bounds()
    passes = (0, 1) if gpipe else (None,)
    try:
        for v in range(U.n):
            for i in range(nd):
                if math.isfinite(U.comp[v, i]) and U.mem[v] <= caps[i] * (1 + 1e-12):
                    x[v, i] = pulp.LpVariable(f"x_{v}_{i}", cat="Binary")
        for v in range(U.n):
            opts = [x[v, i] for i in range(nd) if (v, i) in x]
            if not opts:
                raise InfeasibleError(f"{method}: op {U.op_of(v)!r} (with its colour class) fits "
                                      f"no device of cluster {cluster.name!r} (compute kind or "
                                      f"memory)")
            prob += pulp.lpSum(opts) == 1, f"assign_{v}"

        def X(v, devs):  # (summed assignment variables of unit v on devices devs, devs)
            return pulp.lpSum(x[v, i] for i in devs if (v, i) in x)

        sym_groups, sym_order = [], []
        if symmetry:
            sym_groups, sym_order = _identical_devices(U, caps, pays, host_of if hierarchical
                                                       else [0] * nd, gpipe)
            _add_symmetry_rows(prob, x, sym_groups, sym_order)

        M = {q: pulp.LpVariable(f"M_{q}", lowBound=0) for q in passes}
        # transfer indicators per (hyperedge, device): split, out/in (full duplex), far side
        y, yd, yfar = {}, {}, {}

        def out_in(h, i, a, T_, y_out, y_in, far, tag):
            """Rows y_out >= [a on i] - [t on far] and y_in >= [t on i] - [a on far] for every
            consumer t of hyperedge h (far = {i}: the tensor crosses device i's boundary)."""
            me = {i}
            for t in T_:
                lbs.add(prob, y_out, [(1, X(a, me), a, me), (-1, X(t, far), t, far)],
                        f"{tag}out_{h}_{i}_{t}")
                lbs.add(prob, y_in, [(1, X(t, me), t, me), (-1, X(a, far), a, far)],
                        f"{tag}in_{h}_{i}_{t}")

        for h, (a, T_, w) in enumerate(U.hyper):
            if dl.over():
                raise _OutOfTime
            for i in range(nd):
                if not pays[i]:
                    continue
                me, host = {i}, host_devs[host_of[i]]
                if mode < 2:
                    yi = y[h, i] = pulp.LpVariable(f"y_{h}_{i}", lowBound=0, upBound=1)
                    out_in(h, i, a, T_, yi, yi, me, "")
                else:
                    for q in (0, 1):
                        yd[h, i, q] = pulp.LpVariable(f"yd_{h}_{i}_{q}", lowBound=0, upBound=1)
                    out_in(h, i, a, T_, yd[h, i, 1], yd[h, i, 0], me, "d")
                if hierarchical and U.hslow[h] > w and len(host_devs) > 1:
                    # App. C.3: the across-hosts cost when the producer's output reaches
                    # another host (out) or arrives from one (in)
                    yf = yfar[h, i] = pulp.LpVariable(f"yf_{h}_{i}", lowBound=0, upBound=1)
                    out_in(h, i, a, T_, yf, yf, host, "f")
        loads = []  # (expression, pass): each at most M[pass]
        for i in range(nd):
            for q in passes:
                comp = U.comp if q is None else U.comp2[:, :, q]
                load = pulp.lpSum(comp[v, i] / T * x[v, i] for v in range(U.n) if (v, i) in x)
                hs = [h for h in range(len(U.hyper)) if q is None or U.hpass[h] == q]
                comm = [0, 0]
                if pays[i] and mode == 2:
                    comm = [pulp.lpSum(U.hyper[h][2] / T * yd[h, i, s] for h in hs)
                            for s in (0, 1)]
                elif pays[i]:
                    comm[0] = pulp.lpSum(U.hyper[h][2] / T * y[h, i] for h in hs)
                    if yfar:
                        comm[0] += pulp.lpSum((U.hslow[h] - U.hyper[h][2]) / T * yfar[h, i]
                                              for h in hs if (h, i) in yfar)
                rows = [(load + comm[0], "load")] if mode == 0 else (  # App. C.1: overlap
                    [(load, "load")] + ([(comm[0], "comm")] if mode == 1 else
                                        [(comm[0], "comm_0"), (comm[1], "comm_1")]) * pays[i])
                for expr, what in rows:
                    name = f"{what.split('_')[0]}_{i}" + what[4:] + ("" if q is None else f"_p{q}")
                    prob += expr <= M[q], name
                    loads.append((expr, q))
            if math.isfinite(caps[i]) and caps[i] > 0:
                used = [(U.mem[v] / caps[i], x[v, i]) for v in range(U.n)
                        if (v, i) in x and U.mem[v] > 0]
                if used and sum(c for c, _ in used) > 1:
                    prob += pulp.lpSum(c * var for c, var in used) <= 1, f"mem_{i}"
        z = {}
        if contiguous:  # Lemma 4.1 per device, and per host on a hierarchical cluster
            groups = [frozenset([i]) for i in range(nd)]
            if hierarchical and len(host_devs) > 1:
                groups += host_devs
            for gi, devs in enumerate(groups):
                if dl.over():
                    raise _OutOfTime
                for v in range(U.n):
                    z[v, gi] = pulp.LpVariable(f"z_{v}_{gi}", lowBound=0, upBound=1)
                    prob += z[v, gi] >= X(v, devs), f"z_ge_x_{v}_{gi}"
                for (a, b) in cedges:
                    prob += z[b, gi] <= z[a, gi], f"z_mono_{a}_{b}_{gi}"
                    prob += z[b, gi] <= X(b, devs) - X(a, devs) + 1, f"z_cut_{a}_{b}_{gi}"
        prob += pulp.lpSum(M.values())
        ws = _maxload_warm(U, warm, cluster, x, lbs, z, groups if contiguous else [], cedges,
                           loads, M, sym_groups, sym_order) if warm else None
    except _OutOfTime:
        return _out_of_time(warm, cluster, method, dl, "building the model", judge, key)
    left = dl.left()
    if left <= 0.05:
        return _out_of_time(warm, cluster, method, dl, "building the model", judge, key)
    res = solve_milp(prob, time_limit=None if time_limit is None else left, gap=gap,
                     warm_start=ws)
    if not res.has_solution:
        if res.status == "infeasible":
            raise InfeasibleError(f"{method}: no split of graph {graph.name!r} meets the memory "
                                  f"caps of cluster {cluster.name!r}")
        if warm is not None and res.status in ("time_limit", "interrupted"):
            return _out_of_time(warm, cluster, method, dl, "the MILP (no incumbent)", judge, key)
        raise SolverError(f"{method}: the solver found no solution ({res.status}: {res.message})")
    asg = np.empty(U.n, dtype=np.int64)
    for (v, i), var in x.items():
        if res.value(var) > 0.5:
            asg[v] = i
    plan = Plan(graph, _placement(graph, cluster, asg, U.owner), method=method)
    judged = judge(plan, cluster)
    if warm is not None and judge(warm, cluster) < judged - 1e-9 * max(1.0, judged):
        plan = Plan(graph, dict(warm.placement), method=method)  # HiGHS lost the warm start
        judged = judge(plan, cluster)
        status, note = "time_limit" if res.status != "optimal" else "feasible", "kept the warm start"
    else:
        status, note = _plan_status(res, judged, res.objective * T)
    why = {}
    if contiguous and status == "optimal":
        from ...bounds import max_load_lower_bound

        # a compute-only bound; it does not hold for interleaved loads
        status, why = contiguous_optimum_status(
            judged, 0.0 if mode else max_load_lower_bound(graph, cluster))
    plan.status = status
    plan.predicted = {key: judged}
    plan.stats = {"bound": res.bound * T, "gap": res.gap, "milp_s": res.seconds,
                  "milp_status": res.status, "milp_objective": res.objective * T,
                  "solver": res.solver, "units": U.n, "binaries": len(x),
                  "warm_start_ms": judge(warm, cluster) if warm is not None else None,
                  "total_s": dl.elapsed()}
    plan.stats.update(why)
    if note:
        plan.stats["note"] = note
    plan.info = {"contiguous": contiguous, "objective": objective,
                 "hierarchical": hierarchical}
    return plan


def _out_of_time(warm: Plan | None, cluster, method: str, dl: _Deadline, where: str,
                 judge=None, key: str = "max_load_ms") -> Plan:
    """The warm start as the answer when the time limit ran out before HiGHS could improve it."""
    from ...simulate import max_load

    if warm is None:
        raise SolverError(f"{method}: the time limit ({dl.limit} s) ran out while {where}, "
                          f"before any solution was found; raise time_limit")
    plan = Plan(warm.graph, dict(warm.placement), method=method, status="time_limit")
    plan.predicted = {key: (judge or max_load)(warm, cluster)}
    plan.stats = {"note": f"time limit reached while {where}; the warm start ({warm.method}) "
                          f"is returned", "total_s": dl.elapsed()}
    return plan


def _identical_devices(U, caps, pays, host_of, gpipe: bool) -> tuple[list, list]:
    """Groups (two or more) of devices the max-load program cannot tell apart (same compute
    column, memory, transfer charging and host), and the units in decreasing order of their
    largest finite compute time (ties by index): the order of the symmetry-breaking rows."""
    nd = len(caps)
    sig: dict = {}
    for i in range(nd):
        col = U.comp2[:, i, :] if gpipe else U.comp[:, i]
        key = (col.tobytes(), float(caps[i]), bool(pays[i]), host_of[i])
        sig.setdefault(key, []).append(i)
    groups = [g for g in sig.values() if len(g) > 1]
    fin = np.where(np.isfinite(U.comp), U.comp, 0.0).max(axis=1) if U.n else np.zeros(0)
    order = sorted(range(U.n), key=lambda v: (-float(fin[v]), v))
    return groups, order


def _add_symmetry_rows(prob, x, groups: list, order: list) -> None:
    """Symmetry breaking for identical devices ``g_0 < g_1 < ...`` of a group: a unit may use
    ``g_r`` only if a unit before it (in ``order``) uses ``g_{r-1}``; so the devices are used
    in the order of their first unit. Every split has one relabelling that meets these rows
    (:func:`_canonical`), with the same loads, so the optimum is kept."""
    for gi, devs in enumerate(groups):
        for r in range(1, len(devs)):
            prev, here = devs[r - 1], devs[r]
            earlier = []
            for v in order:
                if (v, here) in x:
                    prob += x[v, here] <= pulp.lpSum(earlier), f"sym_{gi}_{r}_{v}"
                if (v, prev) in x:
                    earlier.append(x[v, prev])


def _canonical(ai: np.ndarray, groups: list, order: list) -> np.ndarray:
    """``ai`` with the devices of every identical group relabelled in the order of their first
    unit (the representative :func:`_add_symmetry_rows` keeps)."""
    out = ai.copy()
    for devs in groups:
        ds = set(devs)
        relabel: dict = {}
        for v in order:
            d = int(ai[v])
            if d in ds and d not in relabel:
                relabel[d] = devs[len(relabel)]
        free = [d for d in devs if d not in relabel.values()]
        for d in devs:
            if d not in relabel:
                relabel[d] = free.pop(0)
        for v in range(len(ai)):
            if int(ai[v]) in ds:
                out[v] = relabel[int(ai[v])]
    return out


def _maxload_warm(U, warm, cluster, x, lbs: _Bounds, z, groups, cedges, loads, M,
                  sym_groups=(), sym_order=()) -> dict | None:
    """Values of every variable for the warm start's split (auxiliaries at their least
    feasible value), or None when the split uses an assignment the model left out. With
    identical devices the split is relabelled to meet the symmetry-breaking rows."""
    ai = _unit_assignment(U, warm, cluster)
    if sym_groups:
        ai = _canonical(ai, list(sym_groups), list(sym_order))
    if any((v, int(ai[v])) not in x for v in range(U.n)):
        return None
    ws = {var: float(ai[v] == i) for (v, i), var in x.items()}
    ws.update(lbs.values(ai))
    if z:
        succ = [[] for _ in range(U.n)]
        for a, b in cedges:
            succ[a].append(b)
        for gi, devs in enumerate(groups):
            reach = np.zeros(U.n, dtype=bool)
            for v in range(U.n - 1, -1, -1):
                reach[v] = int(ai[v]) in devs or any(reach[w] for w in succ[v])
            for v in range(U.n):
                ws[z[v, gi]] = float(reach[v])
    for q, var in M.items():
        ws[var] = max([0.0] + [sum(c * ws.get(v, 0.0) for v, c in e.items()) + e.constant
                               for e, qq in loads if qq == q])
    return ws


def _dp_warm(graph, cluster, dl: _Deadline | None = None, interleave=False,
             objective: str = "pipedream", hierarchical: bool = False, judge=None):
    """The best (by ``judge``) of the DP variant for these options, the linearised DP and the
    exact DP, each within a share of the time budget (the greedy latency split as a last
    resort); None if none can serve the cluster."""
    from ...pipeline import pipelined_time
    from .dp import dp, dpl
    from .latency import greedy_latency

    judge = judge or (lambda pl, cl: pipelined_time(pl, cl, interleave=interleave))
    best, best_v = None, math.inf
    extra = {"interleave": interleave} if interleave else {}
    tries = [(dpl, 0.2, {}), (dp, 0.25, {"max_ideals": 20_000})]
    if objective == "gpipe":
        tries.insert(0, (dp, 0.25, {"objective": "gpipe"}))
    if hierarchical:
        tries.insert(0, (dp, 0.25, {"hierarchical": True}))
    for f, share, kw in tries:
        left = dl.left() if dl is not None else math.inf
        try:
            plan = f(graph, cluster, time_limit=left * share if math.isfinite(left) else None,
                     **kw, **extra)
        except (SolverError, InfeasibleError):
            continue
        v = judge(plan, cluster)
        if v < best_v:
            best, best_v = plan, v
    if best is None:
        try:
            plan = greedy_latency(graph, cluster)
        except (SolverError, InfeasibleError):
            return None
        if plan.status != "infeasible":
            best = plan
    return best


@register("ip_contig", family="pipeline", paper="Tarnawski et al. NeurIPS'20",
          objective="max_load", exact=True, contract_params={"time_limit": 10},
          description="Max-load IP (Fig. 6) with Lemma 4.1 contiguity, HiGHS, DP warm start")
def ip_contig(graph, cluster, *, gap: float = 0.0, warm_start: bool = True,
              interleave: bool | str = False, hierarchical: bool = False,
              objective: str = "pipedream", symmetry: bool = True,
              time_limit: float | None = 60.0) -> Plan:
    """Optimal contiguous split by integer programming. HiGHS stops at relative ``gap``
    (default 0: the time limit is the stop); the plan says ``optimal`` only when the gap is
    proved zero. ``predicted["max_load_ms"]`` is the judge's value of the plan,
    ``stats["bound"]`` HiGHS's dual bound. Unlike ``dp`` it takes accelerators of one kind
    with different speeds and memories, and finite CPU memory; the time limit bounds the
    whole call (the DP warm start gets part of it). ``interleave`` as in ``dp`` (App. C.1:
    ``True`` or ``"full_duplex"``; then ``predicted`` is
    :func:`workbench.pipeline.pipelined_time` with that option).

    ``hierarchical=True`` (App. C.3): transfers cost the cluster's ``intra_host`` link inside
    a host and ``inter_host`` across hosts, as :func:`workbench.pipeline.hierarchical_loads`
    charges them (the judge of this option; ``predicted["max_load_ms"]`` is its largest load);
    every host's set is contiguous too, so the program searches the space of
    ``dp(hierarchical=True)``. Any host sizes, speeds and memories; SolverError where the
    across-hosts cost of an op is below the inside one. ``objective="gpipe"`` (App. A):
    minimise ``max FW + max BW`` (``predicted["time_per_sample_ms"]``, judged by
    :func:`workbench.pipeline.pipelined_time` with ``objective="gpipe"``); combines with
    ``interleave``, not with ``hierarchical``. ``symmetry`` as in ``ip_noncontig``.

    >>> from workbench import Cluster, solve
    >>> from workbench.graph import OpGraph
    >>> g = OpGraph.from_ops([(v, {"compute": {"gpu": 10.0}}) for v in "abcd"],
    ...     [("a", "b", {"bytes": 1e8}), ("b", "c", {"bytes": 1e6}), ("c", "d", {"bytes": 1e8})])
    >>> p = solve(g, Cluster.preset("2x2xV100"), method="ip_contig", hierarchical=True)
    >>> round(p.predicted["max_load_ms"], 4)   # the big tensors stay inside a host
    12.3531
    """
    return _maxload_ip(graph, cluster, contiguous=True, time_limit=time_limit, gap=gap,
                       warm_start=warm_start, method="ip_contig", interleave=interleave,
                       hierarchical=hierarchical, objective=objective, symmetry=symmetry)


@register("ip_noncontig", family="pipeline", paper="Tarnawski et al. NeurIPS'20",
          objective="max_load", exact=True, contract_params={"time_limit": 10},
          description="Max-load IP (Fig. 6) without contiguity: best non-contiguous split")
def ip_noncontig(graph, cluster, *, gap: float = 0.0, warm_start: bool = True,
                 interleave: bool | str = False, hierarchical: bool = False,
                 objective: str = "pipedream", symmetry: bool = True,
                 time_limit: float | None = 60.0) -> Plan:
    """Best non-contiguous split (Section 5.2); warm-started from the DP split (or the
    linearised DP), so it is never worse than the warm start. ``gap``, ``interleave``,
    ``hierarchical`` and ``objective`` as in ``ip_contig``. ``symmetry``: rows that make
    identical devices (same speed, memory, transfer charging, host) be used in the order of
    their first unit (an extension, decision 41), so HiGHS does not search the same split
    under every relabelling."""
    return _maxload_ip(graph, cluster, contiguous=False, time_limit=time_limit, gap=gap,
                       warm_start=warm_start, method="ip_noncontig", interleave=interleave,
                       hierarchical=hierarchical, objective=objective, symmetry=symmetry)


