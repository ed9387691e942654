"""Max-load integer programs of Tarnawski et al. (NeurIPS 2020).

* ``ip_contig`` / ``ip_noncontig``: the max-load IP of Fig. 6 (throughput), with or without the
  contiguity constraint, which is linearised with the ``z`` variables of Lemma 4.1
  (``z ≥ x``, ``z_v ≤ z_u`` and ``z_v ≤ x_v - x_u + 1`` on every edge ``(u, v)``).
  Colour classes are contracted first (colocation); the contiguous program works on the DP's
  contracted forward graph, so it searches exactly the DP's space. Warm start: the DP split.
* Loads are the judge's (:mod:`workbench.costs.pipeline_costs`): per-device compute with
  ``Device.speed``, nested transfer tiers (exact for any per-edge costs), per-device memory
  (``inf`` = no constraint), CPUs paying for transfers in ``direct`` mode. Times are scaled by
  the warm start's value and memory by each device's capacity, so costs up to ~1e15 ms solve.
* The time limit bounds the whole call: the DP warm start gets part of it and the model build
  checks it; when it runs out before HiGHS can start, the warm start comes back with status
  ``time_limit``. ``optimal`` only when HiGHS proves a zero gap and its objective equals
  :func:`workbench.simulate.max_load` of the plan; ``ip_contig``'s proof covers contiguous
  splits only, so it says ``feasible`` (``stats["optimal_among"]``) unless its value meets the
  max-load lower bound.

The latency IP and the greedy latency baseline are in :mod:`.latency`. All programs are
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

import numpy as np

from ..._lazy import lazy_module
from ...judge.bounds import max_load_lower_bound
from ...budget import SHARES, Budget
from ...costs.pipeline_costs import contiguous_optimum_status, pipeline_model
from ...errors import InfeasibleError, SolverError, TimeLimitError
from ...plan import Plan
from ..milp import highs_not_started, solve_milp
from ..registry import MAX_MODEL_OPS, register
from .dp import dp, dpl, warm_splits
from .kernel import interleave_mode
from .latency import greedy_latency
from .units import (
    check_total_memory,
    class_units,
    dp_units,
    plan_status,
    unit_assignment,
    unit_placement,
)

pulp = lazy_module("pulp")  # loaded at the first model, not at ``import workbench``

__all__ = ["ip_contig", "ip_noncontig"]


# ----------------------------------------------------------------------------- max-load IP
def _judge(objective: str, hierarchical: bool, interleave):
    """The evaluator an IP variant is judged by (and optimises)."""
    from ...judge.pipelined import hierarchical_loads, pipelined_time
    from ...simulate import max_load

    if hierarchical:
        return lambda pl, cl: float(hierarchical_loads(pl, cl).max())
    if objective == "gpipe" or interleave:
        return lambda pl, cl: pipelined_time(pl, cl, interleave=interleave, objective=objective)
    return max_load


def _check_options(method: str, objective: str, hierarchical: bool, interleave) -> int:
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


class MaxLoadModel:
    """The max-load program of Fig. 6 for one call, in four steps: the constructor checks the
    options and makes the units; :meth:`build` writes the PuLP model (times divided by the
    scale ``T``, the warm start's value) and the warm start's values of every variable;
    :meth:`solve` runs HiGHS; :meth:`extract` turns its answer into a judged plan.

    >>> from workbench import samples, Cluster
    >>> from workbench.budget import Budget
    >>> m = MaxLoadModel(samples.diamond(), Cluster.preset("2xV100-pcie"), contiguous=False,
    ...                  method="ip_noncontig")
    >>> m.build(None, Budget(None))
    >>> len(m.x), m.ws is None
    (8, True)
    >>> m.extract(m.solve(Budget(10.0), gap=0.0), None, Budget(None)).status
    'optimal'
    """

    def __init__(self, graph, cluster, *, contiguous: bool, method: str, interleave=False,
                 hierarchical: bool = False, objective: str = "pipedream",
                 symmetry: bool = True):
        self.mode = _check_options(method, objective, hierarchical, interleave)
        self.graph, self.cluster, self.method = graph, cluster, method
        self.contiguous, self.hierarchical = contiguous, hierarchical
        self.objective, self.gpipe = objective, objective == "gpipe"
        self.key = "time_per_sample_ms" if self.gpipe else "max_load_ms"
        self.judge = _judge(objective, hierarchical, interleave)
        self.fwd = False
        if hierarchical:
            pipeline_model(cluster, method=method, identical=False, any_mode=True)
        else:
            model = pipeline_model(cluster, method=method, identical=False, forward=True)
            self.fwd = model.forwarded
        if self.fwd and (self.mode or self.gpipe):
            raise SolverError(f"{method}: interleave and objective='gpipe' are defined for the "
                              f"paper's host-staged transfers; cluster {cluster.name!r} is in "
                              f"'direct' mode with {len(cluster.devices)} devices, where "
                              f"{method} forwards activations along the devices in cluster "
                              f"order: use mode='host' for them")
        # forwarded (direct mode, > 2 devices): tensors travel the devices in cluster order
        self.chain = list(cluster.names) if self.fwd else None
        symmetry = symmetry and not self.fwd  # a device's place in the chain tells it apart
        kw = {"hier": hierarchical, "passes": self.gpipe, "slowest": self.fwd}
        if contiguous:
            self.U, _p = dp_units(graph, cluster, **kw)
            self.cedges = self.U.fwd_edges
        else:
            self.U = class_units(graph, cluster, **kw)
            self.cedges = []
        self.symmetry = symmetry
        nd = self.nd = len(cluster)
        self.pays = [True] * nd if hierarchical else model.pays
        self.caps = [d.memory for d in cluster.devices]
        self.host_devs = [frozenset(i for i, d in enumerate(cluster.devices) if d.host == h)
                          for h in cluster.hosts()]
        self.host_of = [next(k for k, s in enumerate(self.host_devs) if i in s)
                        for i in range(nd)]

    # ------------------------------------------------------------------ build
    def build(self, warm: Plan | None, budget: Budget) -> None:
        """The model (``prob``, ``x``, ``M``, ...) and the warm start's values ``ws``;
        TimeLimitError when ``budget`` runs out while it is built."""
        U, cluster = self.U, self.cluster
        # scale: times in units of an upper bound, memory in units of each device's capacity
        ref = self.judge(warm, cluster) if warm is not None else None
        if not ref or not math.isfinite(ref):
            fin = np.where(np.isfinite(U.comp), U.comp, 0.0)
            ref = float(fin.max(axis=1).sum() + sum(U.hslow)
                        + sum(w for *_x, w in U.hyper)) or 1.0
        self.T = ref
        self.prob = pulp.LpProblem(self.method, pulp.LpMinimize)
        self.lbs = _Bounds()
        self._assignment_rows(budget)
        self.sym_groups, self.sym_order, self.sym_chains = [], [], []
        if self.symmetry:
            self.sym_groups, self.sym_order = _identical_devices(
                U, self.caps, self.pays, self.host_of if self.hierarchical else [0] * self.nd,
                self.gpipe)
            self.sym_chains = _add_symmetry_rows(self.prob, self.x, self.sym_groups,
                                                 self.sym_order, budget)
        self.M = {q: pulp.LpVariable(f"M_{q}", lowBound=0)
                  for q in ((0, 1) if self.gpipe else (None,))}
        self._transfer_rows(budget)
        self._load_rows(budget)
        self._contiguity_rows(budget)
        self.prob += pulp.lpSum(self.M.values())
        self.ws = self._warm_values(warm) if warm else None

    def _X(self, v: int, devs):
        """The summed assignment variables of unit ``v`` on devices ``devs``."""
        return pulp.lpSum(self.x[v, i] for i in devs if (v, i) in self.x)

    def _assignment_rows(self, budget: Budget) -> None:
        U, caps, prob = self.U, self.caps, self.prob
        x = self.x = {}
        for v in range(U.n):
            for i in range(self.nd):
                if math.isfinite(U.comp[v, i]) and U.mem[v] <= caps[i] * (1 + 1e-12):
                    x[v, i] = pulp.LpVariable(f"x_{v}_{i}", cat="Binary")
        for v in range(U.n):
            if v % 512 == 0:
                budget.check("building the model")
            opts = [x[v, i] for i in range(self.nd) if (v, i) in x]
            if not opts:
                raise InfeasibleError(f"{self.method}: op {U.op_of(v)!r} (with its colour "
                                      f"class) fits no device of cluster "
                                      f"{self.cluster.name!r} (compute kind or memory)")
            prob += pulp.lpSum(opts) == 1, f"assign_{v}"

    def _out_in(self, h, i, a, T_, y_out, y_in, far, tag) -> None:
        """Rows y_out >= [a on i] - [t on far] and y_in >= [t on i] - [a on far] for every
        consumer t of hyperedge h (far = {i}: the tensor crosses device i's boundary)."""
        me, X, lbs, prob = {i}, self._X, self.lbs, self.prob
        for t in T_:
            lbs.add(prob, y_out, [(1, X(a, me), a, me), (-1, X(t, far), t, far)],
                    f"{tag}out_{h}_{i}_{t}")
            lbs.add(prob, y_in, [(1, X(t, me), t, me), (-1, X(a, far), a, far)],
                    f"{tag}in_{h}_{i}_{t}")

    def _transfer_rows(self, budget: Budget) -> None:
        """Transfer indicators per (hyperedge, device): split (``y``), out/in (``yd``, full
        duplex), far side (``yfar``, across hosts)."""
        U, host_devs = self.U, self.host_devs
        self.y, self.yd, self.yfar = y, yd, yfar = {}, {}, {}
        self.span = {}
        if self.fwd:
            self._hop_rows(budget)
            return
        for h, (a, T_, w) in enumerate(U.hyper):
            budget.check("building the model")
            for i in range(self.nd):
                if not self.pays[i]:
                    continue
                me, host = {i}, host_devs[self.host_of[i]]
                if self.mode < 2:
                    yi = y[h, i] = pulp.LpVariable(f"y_{h}_{i}", lowBound=0, upBound=1)
                    self._out_in(h, i, a, T_, yi, yi, me, "")
                else:
                    for q in (0, 1):
                        yd[h, i, q] = pulp.LpVariable(f"yd_{h}_{i}_{q}", lowBound=0, upBound=1)
                    self._out_in(h, i, a, T_, yd[h, i, 1], yd[h, i, 0], me, "d")
                if self.hierarchical and U.hslow[h] > w and len(host_devs) > 1:
                    # App. C.3: the across-hosts cost when the producer's output reaches
                    # another host (out) or arrives from one (in)
                    yf = yfar[h, i] = pulp.LpVariable(f"yf_{h}_{i}", lowBound=0, upBound=1)
                    self._out_in(h, i, a, T_, yf, yf, host, "f")

    def _hop_rows(self, budget: Budget) -> None:
        """Forwarded transfers: ``span[h, k]`` is 1 when hyperedge ``h`` has units on both
        sides of hop ``k`` (between devices ``k`` and ``k + 1`` of the chain), i.e. some
        consumer on the other side from the producer: ``span >= [a left] - [t left]`` and
        ``span >= [t left] - [a left]`` for every consumer ``t``."""
        X, lbs, prob = self._X, self.lbs, self.prob
        for h, (a, T_, _w) in enumerate(self.U.hyper):
            budget.check("building the model")
            for k in range(self.nd - 1):
                left = set(range(k + 1))
                s = self.span[h, k] = pulp.LpVariable(f"s_{h}_{k}", lowBound=0, upBound=1)
                for t in T_:
                    lbs.add(prob, s, [(1, X(a, left), a, left), (-1, X(t, left), t, left)],
                            f"hop_out_{h}_{k}_{t}")
                    lbs.add(prob, s, [(1, X(t, left), t, left), (-1, X(a, left), a, left)],
                            f"hop_in_{h}_{k}_{t}")

    def _hop_comm(self, i: int):
        """Device ``i``'s forwarded transfers: what crosses the hops on either side of it."""
        U, T = self.U, self.T
        return pulp.lpSum(U.hyper[h][2] / T * self.span[h, k] for h in range(len(U.hyper))
                          for k in (i - 1, i) if (h, k) in self.span)

    def _load_rows(self, budget: Budget) -> None:
        """Every device's load (per pass for GPipe; compute and transfers apart when they
        overlap, App. C.1) at most ``M``, and the memory rows."""
        U, T, x, prob, mode = self.U, self.T, self.x, self.prob, self.mode
        y, yd, yfar, pays, caps = self.y, self.yd, self.yfar, self.pays, self.caps
        self.loads = loads = []  # (expression, pass): each at most M[pass]
        for i in range(self.nd):
            for q in self.M:
                budget.check("building the model")
                comp = U.comp if q is None else U.comp2[:, :, q]
                load = pulp.lpSum(comp[v, i] / T * x[v, i] for v in range(U.n) if (v, i) in x)
                hs = [h for h in range(len(U.hyper)) if q is None or U.hpass[h] == q]
                comm = [0, 0]
                if self.fwd:
                    comm[0] = self._hop_comm(i)
                elif pays[i] and mode == 2:
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
                    prob += expr <= self.M[q], name
                    loads.append((expr, q))
            if math.isfinite(caps[i]) and caps[i] > 0:
                used = [(U.mem[v] / caps[i], x[v, i]) for v in range(U.n)
                        if (v, i) in x and U.mem[v] > 0]
                if used and sum(c for c, _ in used) > 1:
                    prob += pulp.lpSum(c * var for c, var in used) <= 1, f"mem_{i}"

    def _contiguity_rows(self, budget: Budget) -> None:
        """Lemma 4.1 per device, and per host on a hierarchical cluster (contiguous only)."""
        self.z, self.groups = z, groups = {}, []
        if not self.contiguous:
            return
        U, X, prob = self.U, self._X, self.prob
        groups += [frozenset([i]) for i in range(self.nd)]
        if self.hierarchical and len(self.host_devs) > 1:
            groups += self.host_devs
        for gi, devs in enumerate(groups):
            budget.check("building the model")
            for v in range(U.n):
                z[v, gi] = pulp.LpVariable(f"z_{v}_{gi}", lowBound=0, upBound=1)
                prob += z[v, gi] >= X(v, devs), f"z_ge_x_{v}_{gi}"
            for (a, b) in self.cedges:
                prob += z[b, gi] <= z[a, gi], f"z_mono_{a}_{b}_{gi}"
                prob += z[b, gi] <= X(b, devs) - X(a, devs) + 1, f"z_cut_{a}_{b}_{gi}"

    def _warm_values(self, warm: Plan) -> dict | None:
        """Values of every variable for the warm start's split (auxiliaries at their least
        feasible value), or None when the split uses an assignment the model left out. With
        identical devices the split is relabelled to meet the symmetry-breaking rows."""
        U, x, z = self.U, self.x, self.z
        ai = unit_assignment(U, warm, self.cluster)
        if self.sym_groups:
            ai = _canonical(ai, list(self.sym_groups), list(self.sym_order))
        if any((v, int(ai[v])) not in x for v in range(U.n)):
            return None
        ws = {var: float(ai[v] == i) for (v, i), var in x.items()}
        ws.update(self.lbs.values(ai))
        for chain in self.sym_chains:
            acc = 0.0
            for s, xv in chain:
                acc += ws[xv]
                ws[s] = acc
        if z:
            succ = [[] for _ in range(U.n)]
            for a, b in self.cedges:
                succ[a].append(b)
            for gi, devs in enumerate(self.groups):
                reach = np.zeros(U.n, dtype=bool)
                for v in range(U.n - 1, -1, -1):
                    reach[v] = int(ai[v]) in devs or any(reach[w] for w in succ[v])
                for v in range(U.n):
                    ws[z[v, gi]] = float(reach[v])
        for q, var in self.M.items():
            ws[var] = max([0.0] + [sum(c * ws.get(v, 0.0) for v, c in e.items()) + e.constant
                                   for e, qq in self.loads if qq == q])
        return ws

    # ------------------------------------------------------------------ solve and extract
    def solve(self, budget: Budget, gap: float, reserve: float = 0.0):
        """HiGHS on the built model within what is left of ``budget``, from the warm start
        (``reserve`` seconds of it kept for reading the answer back, :func:`solve_milp`)."""
        return solve_milp(self.prob, time_limit=budget.seconds(), gap=gap, warm_start=self.ws,
                          progress_scale=self.T, reserve=reserve)

    def extract(self, res, warm: Plan | None, budget: Budget) -> Plan:
        """The judged plan of HiGHS's answer ``res`` (the warm start where HiGHS lost it)."""
        U, cluster, graph, judge, T = self.U, self.cluster, self.graph, self.judge, self.T
        asg = np.empty(U.n, dtype=np.int64)
        for (v, i), var in self.x.items():
            if res.value(var) > 0.5:
                asg[v] = i
        chain = {"chain": self.chain} if self.chain else {}
        plan = Plan(graph, unit_placement(graph, cluster, asg, U.owner), method=self.method,
                    info=dict(chain))
        judged = judge(plan, cluster)
        if warm is not None and judge(warm, cluster) < judged - 1e-9 * max(1.0, judged):
            chain = {"chain": warm.info["chain"]} if "chain" in warm.info else {}
            plan = Plan(graph, dict(warm.placement), method=self.method,  # HiGHS lost it
                        info=dict(chain))
            judged = judge(plan, cluster)
            status = "time_limit" if res.status != "optimal" else "feasible"
            note = "kept the warm start"
        else:
            status, note = plan_status(res, judged, res.objective * T)
        why = {}
        if self.fwd and status == "optimal":
            # proved for forwarded transfers along the devices in cluster order only; a plan
            # judged with direct sends (another method's) may do better unless a bound says no
            status, why = contiguous_optimum_status(judged, max_load_lower_bound(graph, cluster))
            if why:
                why = {"optimal_among": "splits forwarded along the devices in cluster order",
                       "not_optimal_because": "the MILP's optimum is proved for activations "
                       "forwarded along the devices in cluster order; a plan with another "
                       "chain or with direct sends may be better under the judge"}
        elif self.contiguous and status == "optimal":
            # a compute-only bound; it does not hold for interleaved loads
            status, why = contiguous_optimum_status(
                judged, 0.0 if self.mode else max_load_lower_bound(graph, cluster))
        plan.status = status
        plan.predicted = {self.key: judged}
        plan.stats = {"bound": res.bound * T, "gap": res.gap, "milp_s": res.seconds,
                      "milp_status": res.status, "milp_objective": res.objective * T,
                      "solver": res.solver, "units": U.n, "binaries": len(self.x),
                      "warm_start_ms": judge(warm, cluster) if warm is not None else None,
                      "total_s": budget.elapsed(), "budget": budget.report()}
        plan.stats.update(why)
        if note:
            plan.stats["note"] = note
        plan.info = {"contiguous": self.contiguous, "objective": self.objective,
                     "hierarchical": self.hierarchical, **chain}
        if chain:
            plan.info["transfers"] = "forwarded"
            plan.stats["transfers"] = "forwarded"
        return plan


def _maxload_ip(graph, cluster, *, contiguous: bool, time_limit, gap, warm_start: bool,
                method: str, interleave=False, hierarchical: bool = False,
                objective: str = "pipedream", symmetry: bool = True) -> Plan:
    """``ip_contig`` / ``ip_noncontig``: :class:`MaxLoadModel` within one budget (the DP warm
    starts get their shares of it, the model build checks it, HiGHS gets what is left)."""
    budget = Budget.of(time_limit, name=method)
    m = MaxLoadModel(graph, cluster, contiguous=contiguous, method=method,
                     interleave=interleave, hierarchical=hierarchical, objective=objective,
                     symmetry=symmetry)
    check_total_memory(m.U, cluster, method)
    warm = _dp_warm(graph, cluster, budget, interleave=interleave, objective=objective,
                    hierarchical=hierarchical, judge=m.judge) if warm_start else None
    t_build = budget.elapsed()
    try:
        m.build(warm, budget.until("pipeline.build", SHARES["pipeline.build"]))
    except TimeLimitError:
        return _out_of_time(warm, cluster, method, budget, "building the model", m.judge, m.key)
    # PuLP's hand-over to HiGHS and the reading back grow with the model, outside HiGHS's
    # clock: measured 4.1 + 4.4 s after a 21.6 s build (10,000 ops): kept from HiGHS's time
    after = SHARES["pipeline.after_build"] * (budget.elapsed() - t_build)
    if budget.left() <= after + 0.05:
        return _out_of_time(warm, cluster, method, budget, "building the model (too little "
                            "time left to hand it to HiGHS)", m.judge, m.key)
    why = highs_not_started(m.prob, None if budget.deadline is None else budget.left(), after)
    if why:
        return _out_of_time(warm, cluster, method, budget, why, m.judge, m.key, reached=False)
    res = m.solve(budget, gap, reserve=after / 2)
    if not res.has_solution:
        if res.status == "infeasible":
            raise InfeasibleError(f"{method}: no split of graph {graph.name!r} meets the memory "
                                  f"caps of cluster {cluster.name!r}")
        if warm is not None and res.status in ("time_limit", "interrupted"):
            return _out_of_time(warm, cluster, method, budget, "the MILP (no incumbent)",
                                m.judge, m.key)
        raise SolverError(f"{method}: the solver found no solution ({res.status}: "
                          f"{res.message})")
    return m.extract(res, warm, budget)


def _out_of_time(warm: Plan | None, cluster, method: str, budget: Budget, where: str,
                 judge=None, key: str = "max_load_ms", reached: bool = True) -> Plan:
    """The warm start as the answer when the time limit ran out (``reached``; else ``where``
    says why HiGHS is not started) before HiGHS could improve it."""
    from ...simulate import max_load

    why = f"time limit reached while {where}" if reached else where
    if warm is None:
        raise SolverError(f"{method}: {why} (time limit {budget.limit} s), before any solution "
                          f"was found; raise time_limit")
    plan = Plan(warm.graph, dict(warm.placement), method=method, status="time_limit",
                info={k: warm.info[k] for k in ("chain", "transfers") if k in warm.info})
    plan.predicted = {key: (judge or max_load)(warm, cluster)}
    plan.stats = {"note": f"{why}; the warm start ({warm.method}) is returned",
                  "total_s": budget.elapsed(), "budget": budget.report()}
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


def _add_symmetry_rows(prob, x, groups: list, order: list, budget: Budget | None = None) -> list:
    """Symmetry breaking for identical devices ``g_0 < g_1 < ...`` of a group: a unit may use
    ``g_r`` only if a unit before it (in ``order``) uses ``g_{r-1}``; so the devices are used
    in the order of their first unit. Every split has one relabelling that meets these rows
    (:func:`_canonical`), with the same loads, so the optimum is kept.

    The count of earlier units on ``g_{r-1}`` is a chain of partial sums ``s_k = s_{k-1} +
    x[u_k, g_{r-1}]`` (continuous), so the rows grow linearly with the units (the sum written
    out in every row grew quadratically: 10,000 units took minutes and gigabytes). Returns the
    chains ``[(s_k, x[u_k, g_{r-1}]), ...]`` for the warm start's values."""
    chains = []
    for gi, devs in enumerate(groups):
        for r in range(1, len(devs)):
            prev, here = devs[r - 1], devs[r]
            acc, chain = None, []
            for k, v in enumerate(order):
                if budget is not None and k % 512 == 0:
                    budget.check("building the symmetry rows")
                if (v, here) in x:
                    prob += x[v, here] <= (0 if acc is None else acc), f"sym_{gi}_{r}_{v}"
                if (v, prev) in x:
                    s = pulp.LpVariable(f"syms_{gi}_{r}_{v}", lowBound=0)
                    prob += s == (x[v, prev] if acc is None else acc + x[v, prev]), \
                        f"symsum_{gi}_{r}_{v}"
                    acc = s
                    chain.append((s, x[v, prev]))
            chains.append(chain)
    return chains


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


def _dp_warm(graph, cluster, budget: Budget, interleave=False, objective: str = "pipedream",
             hierarchical: bool = False, judge=None):
    """The best (by ``judge``) of the DP variant for these options, the linearised DP and the
    exact DP, each within its share of ``budget`` (:func:`.dp.warm_splits`; the greedy latency
    split as a last resort); None if none can serve the cluster."""
    from ...judge.pipelined import pipelined_time

    judge = judge or (lambda pl, cl: pipelined_time(pl, cl, interleave=interleave))
    extra = {"interleave": interleave} if interleave else {}
    tries = [(dpl, "pipeline.dpl_warm", {}), (dp, "pipeline.dp_warm", {"max_ideals": 20_000})]
    if objective == "gpipe":
        tries.insert(0, (dp, "pipeline.dp_gpipe_warm", {"objective": "gpipe"}))
    if hierarchical:
        tries.insert(0, (dp, "pipeline.dp_hier_warm", {"hierarchical": True}))
    best, best_v = None, math.inf
    for plan in warm_splits(graph, cluster, budget, tries, **extra):
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


@register("ip_contig", max_ops=MAX_MODEL_OPS,
          family="pipeline", paper="Tarnawski et al. NeurIPS'20",
          objective="max_load", exact=True, contract_params={"time_limit": 10},
          description="Max-load IP (Fig. 6) with Lemma 4.1 contiguity, HiGHS, DP warm start")
def ip_contig(graph, cluster, *, gap: float = 0.0, warm_start: bool = True,
              interleave: bool | str = False, hierarchical: bool = False,
              objective: str = "pipedream", symmetry: bool = True,
              time_limit: float | Budget | None = 60.0) -> Plan:
    """Optimal contiguous split by integer programming. HiGHS stops at relative ``gap``
    (default 0: the time limit is the stop); the plan says ``optimal`` only when the gap is
    proved zero. ``predicted["max_load_ms"]`` is the judge's value of the plan,
    ``stats["bound"]`` HiGHS's dual bound. Unlike ``dp`` it takes accelerators of one kind
    with different speeds and memories, and finite CPU memory; the time limit bounds the
    whole call (the DP warm start gets part of it). ``interleave`` as in ``dp`` (App. C.1:
    ``True`` or ``"full_duplex"``; then ``predicted`` is
    :func:`workbench.judge.pipelined.pipelined_time` with that option).

    ``hierarchical=True`` (App. C.3): transfers cost the cluster's ``intra_host`` link inside
    a host and ``inter_host`` across hosts, as :func:`workbench.judge.pipelined.hierarchical_loads`
    charges them (the judge of this option; ``predicted["max_load_ms"]`` is its largest load);
    every host's set is contiguous too, so the program searches the space of
    ``dp(hierarchical=True)``. Any host sizes, speeds and memories; SolverError where the
    across-hosts cost of an op is below the inside one. ``objective="gpipe"`` (App. A):
    minimise ``max FW + max BW`` (``predicted["time_per_sample_ms"]``, judged by
    :func:`workbench.judge.pipelined.pipelined_time` with ``objective="gpipe"``); combines with
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


@register("ip_noncontig", max_ops=MAX_MODEL_OPS,
          family="pipeline", paper="Tarnawski et al. NeurIPS'20",
          objective="max_load", exact=True, contract_params={"time_limit": 10},
          description="Max-load IP (Fig. 6) without contiguity: best non-contiguous split")
def ip_noncontig(graph, cluster, *, gap: float = 0.0, warm_start: bool = True,
                 interleave: bool | str = False, hierarchical: bool = False,
                 objective: str = "pipedream", symmetry: bool = True,
                 time_limit: float | Budget | None = 60.0) -> Plan:
    """Best non-contiguous split (Section 5.2); warm-started from the DP split (or the
    linearised DP), so it is never worse than the warm start. ``gap``, ``interleave``,
    ``hierarchical`` and ``objective`` as in ``ip_contig``. ``symmetry``: rows that make
    identical devices (same speed, memory, transfer charging, host) be used in the order of
    their first unit (an extension, decision 41), so HiGHS does not search the same split
    under every relabelling."""
    return _maxload_ip(graph, cluster, contiguous=False, time_limit=time_limit, gap=gap,
                       warm_start=warm_start, method="ip_noncontig", interleave=interleave,
                       hierarchical=hierarchical, objective=objective, symmetry=symmetry)


