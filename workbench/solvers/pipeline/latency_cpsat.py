"""The latency program of :mod:`.latency` on OR-Tools CP-SAT (``latency_ip(engine=
"cpsat")``, the default).

The same variables and constraints as the MILP of Fig. 3/4, with the big-M rows written as
enforced constraints (``start_j >= L_a`` only if the tensor of ``a`` enters slot ``j``;
``L_v >= finish_j`` only if ``v`` is in slot ``j``), which CP-SAT propagates instead of relaxing;
its large-neighbourhood search finds the paper's GNMT optimum in seconds where HiGHS stalls.

Two departures from the paper's program (decision 41), both to match the judge
(:func:`workbench.judge.pipelined.latency`):

* A unit of several colocated ops placed on a CPU: the paper sums their CPU times; the judge
  runs each op as soon as its own inputs are ready (the CPUs are a pool with enough cores). The
  model has a finish time per op for such units (``F_o >= p_o^cpu + F_u`` per edge), and a
  subgraph waits for the ops that feed it, not for their whole unit. On BERT-3 this is what
  the paper's 408.47 needs: the colocated pair (Gather1, Transpose13) on the CPU, Gather1's
  output ready after 1.1 ms instead of the pair's 12.3 ms.
* Outputs that cost nothing to move still make the consuming subgraph wait (as the judge's
  does); the paper's hyperedges only carry costed transfers.

The warm start is given as a complete hint (every variable's value, from the model's own
rounded coefficients), so CP-SAT starts from it at once.

CP-SAT needs integers: times are scaled so the warm start's latency is about ``resolution``
units (default 1e6) and rounded; memory is in bytes (rounded up, capacities down). The plan's
value is always the judge's (:func:`workbench.judge.pipelined.latency`); ``optimal`` is claimed only
when CP-SAT proves it *and* no coefficient was rounded, otherwise the rounded model's proof
gives status ``feasible`` with the bound less the largest rounding error.
"""

from __future__ import annotations

import math

import numpy as np

from ...budget import Budget
from ...errors import SolverError, TimeLimitError
from .units import add_rows, pass_rows

__all__ = ["solve_latency_cpsat"]


def solve_latency_cpsat(U, cluster, slots, ncpu, q, caps, lb, T, warm_slot, *, time_limit,
                        workers: int = 2, resolution: float = 1e6, seed: int = 0) -> dict:
    """Solve the latency program; ``lb``: per-unit lower bounds (ms); ``T``: the warm start's
    latency (ms, the scale); ``warm_slot``: slot per unit of the warm start (or None).

    ``time_limit``: seconds or a :class:`~workbench.budget.Budget` (None: no limit), checked
    while the model is built; CP-SAT gets what is left. Returns ``{"slot": per-unit slot or
    None, "status", "bound_ms", "exact", "seconds"}``; ``status`` is ``"BUILD_TIMEOUT"`` when
    the budget runs out (or keeps under 0.05 s) before CP-SAT can start.
    """
    budget = Budget.of(time_limit, name="latency_ip (CP-SAT)")
    try:
        return _solve(U, cluster, slots, ncpu, q, caps, lb, T, warm_slot, budget=budget,
                      workers=workers, resolution=resolution, seed=seed)
    except TimeLimitError:
        return {"status": "BUILD_TIMEOUT", "exact": False, "seconds": 0.0, "slot": None,
                "bound_ms": math.nan}


def _solve(U, cluster, slots, ncpu, q, caps, lb, T, warm_slot, *, budget: Budget, workers,
           resolution, seed) -> dict:
    """The model and the solve of :func:`solve_latency_cpsat`."""
    check = budget.check

    try:
        from ortools.sat.python import cp_model
    except ImportError as e:  # pragma: no cover - ortools is a dependency
        raise SolverError("latency_ip(engine='cpsat') needs ortools: pip install ortools") from e
    R = resolution / T
    exact = [True]

    def scaled(t: float) -> int:
        v = t * R
        r = round(v)
        if abs(v - r) > 1e-9 * max(1.0, abs(v)):
            exact[0] = False
        return r

    def mem_int(m: float) -> int:
        r = math.ceil(m)
        if r != m:
            exact[0] = False
        return r

    ops = _OpView(U, cluster)
    hyp = ops.hyper
    H = scaled(T * 1.001) + U.n + ops.n + 2 * len(hyp) + 1  # room for rounding errors
    m = cp_model.CpModel()
    x = {}
    for v in range(U.n):
        for j, (d, _r) in enumerate(slots):
            if math.isfinite(U.comp[v, d]) and U.mem[v] <= caps[d] * (1 + 1e-12):
                x[v, j] = m.NewBoolVar(f"x_{v}_{j}")
    X = lambda v, j: x.get((v, j), 0)
    for v in range(U.n):
        m.AddExactlyOne([x[v, j] for j in range(len(slots)) if (v, j) in x])
    # lower bounds less the rounding error a chain of rounded compute times can carry
    eps = 0.5 * ops.n + 1
    lat = [m.NewIntVar(max(0, min(math.floor(lb[v] * R - eps), H)), H, f"L_{v}")
           for v in range(U.n)]
    tot = m.NewIntVar(max(0, min(math.floor(float(np.max(lb, initial=0.0)) * R - eps), H)), H,
                      "total")
    # finish time of every op: its unit's for one-op units, its own in a unit of several ops
    # (on a CPU the ops of a unit run as the judge runs them, each when its inputs are ready)
    fo = [lat[ops.owner[o]] if not ops.multi[ops.owner[o]] else m.NewIntVar(0, H, f"F_{o}")
          for o in range(ops.n)]
    acc_slots = range(ncpu, len(slots))
    st = {j: m.NewIntVar(0, H, f"start_{j}") for j in acc_slots}
    fi = {j: m.NewIntVar(0, H, f"finish_{j}") for j in acc_slots}
    cin, cout = {}, {}
    wint = [scaled(w) for (_a, _T, w, _p) in hyp]
    for h, (a, T_, _w, prod) in enumerate(hyp):
        check()
        for j in acc_slots:
            cin[h, j] = m.NewBoolVar(f"cin_{h}_{j}")
            cout[h, j] = m.NewBoolVar(f"cout_{h}_{j}")
            for t in T_:
                m.Add(cin[h, j] >= X(t, j) - X(a, j))
                m.Add(cout[h, j] >= X(a, j) - X(t, j))
            for o in prod:
                m.Add(st[j] >= fo[o]).OnlyEnforceIf(cin[h, j])
    by_dev: dict = {}
    for j, (d, _r) in enumerate(slots):
        by_dev.setdefault(d, []).append(j)
    for d, js in by_dev.items():
        if math.isfinite(caps[d]):
            terms = [(mem_int(U.mem[v]), x[v, j]) for j in js for v in range(U.n)
                     if (v, j) in x and U.mem[v] > 0]
            if sum(c for c, _ in terms) > caps[d]:
                m.Add(sum(c * var for c, var in terms) <= math.floor(caps[d]))
    z = {}
    for j in acc_slots:
        check()
        d = slots[j][0]
        m.Add(fi[j] == st[j] + sum(wint[h] * (cin[h, j] + cout[h, j]) for h in range(len(hyp)))
              + sum(scaled(U.comp[v, d]) * x[v, j] for v in range(U.n) if (v, j) in x))
        if slots[j][1] > 0:
            m.Add(st[j] >= fi[j - 1])
        for v in range(U.n):
            if (v, j) in x:
                m.Add(lat[v] >= fi[j]).OnlyEnforceIf(x[v, j])
                for o in ops.of[v] if ops.multi[v] else ():
                    m.Add(fo[o] >= fi[j]).OnlyEnforceIf(x[v, j])
            z[v, j] = m.NewBoolVar(f"z_{v}_{j}")
            m.Add(z[v, j] >= X(v, j))
        for (a, b) in U.edges:
            m.Add(z[b, j] <= z[a, j])
            m.Add(z[b, j] <= X(b, j) - X(a, j) + 1)
    add_rows(pass_rows(U, cluster, slots, x), m.NewBoolVar, m.Add)

    def cpu_t(o):  # CPU time of op o where its unit is on a CPU slot (0 elsewhere)
        v = ops.owner[o]
        return sum(scaled(ops.times[o, slots[j][0]]) * x[v, j] for j in range(ncpu)
                   if (v, j) in x)

    for v in range(U.n):
        m.Add(tot >= lat[v])
        for o in ops.of[v] if ops.multi[v] else ():
            m.Add(lat[v] >= fo[o])
    for o in range(ops.n):
        m.Add(fo[o] >= cpu_t(o))
        seen = set()
        for u in ops.pred[o]:
            key = u if ops.multi[ops.owner[u]] else -1 - ops.owner[u]
            if key not in seen and fo[u] is not fo[o]:
                seen.add(key)
                m.Add(fo[o] >= cpu_t(o) + fo[u])
    m.Minimize(tot)
    if warm_slot is not None:
        vals = _hint_values(U, ops, slots, ncpu, warm_slot, scaled, wint, x, lat, fo, tot, st,
                            fi, cin, cout, z, H)
        for var, val in vals:
            m.AddHint(var, val)
    s = cp_model.CpSolver()
    if budget.deadline is not None:
        if budget.left() <= 0.05:
            raise TimeLimitError("no time left for CP-SAT")
        s.parameters.max_time_in_seconds = budget.seconds()
    s.parameters.num_workers = workers
    s.parameters.random_seed = seed
    code = s.Solve(m)
    name = s.StatusName(code)
    out = {"status": name, "exact": exact[0], "seconds": s.WallTime(), "slot": None,
           "bound_ms": math.nan}
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        slot = np.full(U.n, -1, dtype=np.int64)
        for (v, j), var in x.items():
            if s.Value(var):
                slot[v] = j
        out["slot"] = slot
        # the rounded model's bound, less the largest error rounding can add along a chain
        slack = 0.5 * (ops.n + 2 * len(hyp)) / R
        out["bound_ms"] = max(0.0, s.BestObjectiveBound() / R - (0.0 if exact[0] else slack))
    elif code == cp_model.INFEASIBLE:
        out["status"] = "INFEASIBLE"
    return out


def _hint_values(U, ops, slots, ncpu, slot, scaled, wint, x, lat, fo, tot, st, fi, cin, cout,
                 z, H):
    """A complete hint: every variable's value in the split ``slot`` (per unit), computed with
    the model's own rounded coefficients, so the hint satisfies every constraint and CP-SAT
    starts from it at once (a hint of the ``x`` only left CP-SAT ~13 s to complete it on
    BERT-3). Pairs ``(variable, value)``; only the ``x`` when the split cannot be scheduled
    (a cycle between its subgraphs) or its latency exceeds the horizon ``H``."""
    pairs = [(var, int(slot[v] == j)) for (v, j), var in x.items()]
    acc_slots = range(ncpu, len(slots))
    hyp = ops.hyper
    ci = {(h, j): int(slot[a] != j and any(slot[t] == j for t in T_))
          for h, (a, T_, _w, _p) in enumerate(hyp) for j in acc_slots}
    co = {(h, j): int(slot[a] == j and any(slot[t] != j for t in T_))
          for h, (a, T_, _w, _p) in enumerate(hyp) for j in acc_slots}
    work = {}
    for j in acc_slots:
        d = slots[j][0]
        work[j] = (sum(wint[h] * (ci[h, j] + co[h, j]) for h in range(len(hyp)))
                   + sum(scaled(U.comp[v, d]) for v in range(U.n) if slot[v] == j))
    feeders = {j: [o for h, (_a, _T, _w, prod) in enumerate(hyp) if ci[h, j] for o in prod]
               for j in acc_slots}
    F = [0] * ops.n  # per op
    S = {j: 0 for j in acc_slots}
    Fj = {j: 0 for j in acc_slots}
    # longest paths by relaxation; more rounds than ops means a cycle between subgraphs
    for _round in range(ops.n + len(slots) + 2):
        changed = False
        for j in acc_slots:
            s_ = max([F[o] for o in feeders[j]]
                     + ([Fj[j - 1]] if slots[j][1] > 0 else []) + [0])
            if s_ != S[j] or s_ + work[j] != Fj[j]:
                S[j], Fj[j] = s_, s_ + work[j]
                changed = True
        for o in range(ops.n):
            j = int(slot[ops.owner[o]])
            if j >= ncpu:
                f = Fj[j]
            else:
                f = scaled(ops.times[o, slots[j][0]]) + max([F[u] for u in ops.pred[o]] + [0])
            if f != F[o]:
                F[o] = f
                changed = True
        if not changed:
            break
    else:
        return pairs
    L = [0] * U.n
    for o in range(ops.n):
        L[ops.owner[o]] = max(L[ops.owner[o]], F[o])
    if max(L, default=0) > H:
        return pairs
    for v in range(U.n):
        pairs.append((lat[v], L[v]))
        if ops.multi[v]:
            pairs += [(fo[o], F[o]) for o in ops.of[v]]
    pairs.append((tot, max(L, default=0)))
    for j in acc_slots:
        pairs += [(st[j], S[j]), (fi[j], Fj[j])]
    for (h, j), var in cin.items():
        pairs.append((var, ci[h, j]))
    for (h, j), var in cout.items():
        pairs.append((var, co[h, j]))
    succ: list = [[] for _ in range(U.n)]
    for a, b in U.edges:
        succ[a].append(b)
    order = []  # reverse topological order of the units (the graph of units is a DAG)
    seen = [False] * U.n
    for r in range(U.n):
        if seen[r]:
            continue
        stack = [(r, iter(succ[r]))]
        seen[r] = True
        while stack:
            v, it = stack[-1]
            w = next(it, None)
            if w is None:
                order.append(v)
                stack.pop()
            elif not seen[w]:
                seen[w] = True
                stack.append((w, iter(succ[w])))
    for j in acc_slots:
        reach = [False] * U.n
        for v in order:
            reach[v] = bool(slot[v] == j) or any(reach[w] for w in succ[v])
        for v in range(U.n):
            pairs.append((z[v, j], int(reach[v])))
    return pairs


class _OpView:
    """The ops inside the units: per op its unit, predecessors and times per device, and the
    transfers as hyperedges ``(producer unit, consumer units, cost, producer ops)`` grouped as
    in :class:`.units.Units` (the paper's per-op ``c_u``), zero-cost outputs included
    (a subgraph waits for every input, as the judge's does)."""

    def __init__(self, U, cluster):
        from ...costs.pipeline_costs import out_costs

        g = U.graph
        gc = g.c
        self.n = gc.n
        self.owner = [int(u) for u in U.owner]
        self.pred = [list(p) for p in gc.pred]
        t = cluster.op_times(g)
        self.times = np.where(np.isfinite(t), t, 0.0)
        self.of: list = [[] for _ in range(U.n)]
        for o in range(gc.n):
            self.of[self.owner[o]].append(o)
        self.multi = [len(ops) > 1 for ops in self.of]
        c = out_costs(g, cluster)
        groups: dict = {}
        for u in range(gc.n):
            a = self.owner[u]
            T_ = frozenset(self.owner[w] for w in gc.succ[u]) - {a}
            if T_:
                w, prod = groups.get((a, T_), (0.0, []))
                groups[a, T_] = (w + float(c[u]), prod + [u])
        self.hyper = [(a, sorted(T_), w, prod) for (a, T_), (w, prod) in groups.items()]
