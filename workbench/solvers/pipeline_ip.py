"""Integer programs of Tarnawski et al. (NeurIPS 2020) and the greedy latency baseline.

* ``ip_contig`` / ``ip_noncontig``: the max-load IP of Fig. 6 (throughput), with or without the
  contiguity constraint, which is linearised with the ``z`` variables of Lemma 4.1
  (``z ≥ x``, ``z_v ≤ z_u`` and ``z_v ≤ x_v - x_u + 1`` on every edge ``(u, v)``).
  Colour classes are contracted first (colocation); the contiguous program works on the DP's
  contracted forward graph, so it searches exactly the DP's space. Warm start: the DP split.
* ``latency_ip``: the single-sample latency IP of Fig. 3 (``q = 1``) and of Fig. 4 (``q``
  contiguous subgraphs per accelerator, run one after another), big-M from the greedy
  solution, warm start from it.
* ``greedy_latency``: the paper's greedy baseline (Section 7): contract colocated ops and the
  strongly connected components this creates, fix a DFS topological order, fill accelerators one
  after another with as many blocks as fit, the rest on the CPU.

All programs are PuLP models solved by :func:`workbench.solvers.milp.solve_milp` (HiGHS), with a
time limit and the solver's true status and gap in ``plan.status`` / ``plan.stats``.

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

from ..errors import InfeasibleError, SolverError
from ..plan import Plan
from . import register
from .milp import solve_milp
from .pipeline_dp import _class_keys, _device_kinds, _out_costs, contract_for_dp

__all__ = ["greedy_latency", "ip_contig", "ip_noncontig", "latency_ip"]


# ----------------------------------------------------------------------------- units
class _Units:
    """Ops grouped into units that must share a device, with unit-level costs and the
    hyperedges ``(producer unit, consumer units, cost)``."""

    def __init__(self, graph, cluster, owner: np.ndarray, nunits: int, acc_kind: str,
                 acc_devs: list):
        gc = graph.c
        self.graph, self.owner, self.n = graph, owner, nunits
        ka, kc = gc.kind_index.get(acc_kind), gc.kind_index.get("cpu")
        at = gc.compute[:, ka] if ka is not None else np.full(gc.n, np.inf)
        ct = gc.compute[:, kc] if kc is not None else np.full(gc.n, np.inf)
        self.acc = np.bincount(owner, weights=np.nan_to_num(at, posinf=0.0), minlength=nunits)
        self.cpu = np.bincount(owner, weights=np.nan_to_num(ct, posinf=0.0), minlength=nunits)
        self.acc_ok = np.bincount(owner, weights=~np.isfinite(at), minlength=nunits) == 0
        self.cpu_ok = np.bincount(owner, weights=~np.isfinite(ct), minlength=nunits) == 0
        self.mem = np.bincount(owner, weights=gc.memory, minlength=nunits)
        c = _out_costs(graph, cluster, acc_devs)
        hyper: dict = {}
        for u in range(gc.n):
            a = int(owner[u])
            T = frozenset(int(owner[v]) for v in gc.succ[u]) - {a}
            if T and c[u] > 0:
                hyper[(a, T)] = hyper.get((a, T), 0.0) + float(c[u])
        self.hyper = [(a, sorted(T), w) for (a, T), w in hyper.items()]
        edges = set()
        for u, v in zip(gc.src.tolist(), gc.dst.tolist()):
            a, b = int(owner[u]), int(owner[v])
            if a != b:
                edges.add((a, b))
        self.edges = sorted(edges)


def _class_units(graph, cluster):
    kind, acc, cpus, cap = _device_kinds(cluster)
    cls, _keys = _class_keys(graph)
    uniq, owner = np.unique(cls, return_inverse=True)
    return _Units(graph, cluster, owner.astype(np.int64), len(uniq), kind, acc), acc, cpus, cap


def _dp_units(graph, cluster, merge_trivial=True):
    kind, acc, cpus, cap = _device_kinds(cluster)
    p = contract_for_dp(graph, cluster, merge_trivial=merge_trivial)
    u = _Units(graph, cluster, p.owner, p.n, kind, acc)
    u.fwd_edges = [(a, b) for a in range(p.n) for b in p.succ[a]]
    return u, acc, cpus, cap, p


def _unit_assignment(units: _Units, plan: Plan, cluster) -> np.ndarray:
    dev = plan.device_array(cluster)
    out = np.full(units.n, -1, dtype=np.int64)
    out[units.owner] = dev
    return out


# ----------------------------------------------------------------------------- max-load IP
def _maxload_ip(graph, cluster, *, contiguous: bool, time_limit, gap, warm: Plan | None,
                method: str) -> Plan:
    t0 = time.perf_counter()
    if contiguous:
        U, acc, cpus, cap, _p = _dp_units(graph, cluster)
        cedges = U.fwd_edges
    else:
        U, acc, cpus, cap = _class_units(graph, cluster)
        cedges = []
    devs = acc + cpus
    nd = len(devs)
    is_acc = [i < len(acc) for i in range(nd)]
    prob = pulp.LpProblem(method, pulp.LpMinimize)
    x = {}
    for v in range(U.n):
        for i in range(nd):
            if (U.acc_ok[v] if is_acc[i] else U.cpu_ok[v]):
                x[v, i] = pulp.LpVariable(f"x_{v}_{i}", cat="Binary")
    for v in range(U.n):
        opts = [x[v, i] for i in range(nd) if (v, i) in x]
        if not opts:
            raise InfeasibleError(f"unit with op {graph.c.names[int(np.flatnonzero(U.owner == v)[0])]!r}"
                                  f" can run on no device of the cluster")
        prob += pulp.lpSum(opts) == 1, f"assign_{v}"
    X = lambda v, i: x.get((v, i), 0)
    ml = pulp.LpVariable("MaxLoad", lowBound=0)
    y = {}
    for h, (a, T, w) in enumerate(U.hyper):
        for i in range(nd):
            if not is_acc[i]:
                continue
            yi = y[h, i] = pulp.LpVariable(f"y_{h}_{i}", lowBound=0, upBound=1)
            for t in T:
                prob += yi >= X(a, i) - X(t, i), f"out_{h}_{i}_{t}"
                prob += yi >= X(t, i) - X(a, i), f"in_{h}_{i}_{t}"
    for i in range(nd):
        if is_acc[i]:
            prob += (pulp.lpSum(U.acc[v] * X(v, i) for v in range(U.n))
                     + pulp.lpSum(w * y[h, i] for h, (_a, _T, w) in enumerate(U.hyper))
                     <= ml), f"load_{i}"
            prob += pulp.lpSum(U.mem[v] * X(v, i) for v in range(U.n)) <= cap, f"mem_{i}"
        else:
            prob += pulp.lpSum(U.cpu[v] * X(v, i) for v in range(U.n)) <= ml, f"load_{i}"
    z = {}
    if contiguous:
        for i in range(nd):
            for v in range(U.n):
                z[v, i] = pulp.LpVariable(f"z_{v}_{i}", lowBound=0, upBound=1)
                prob += z[v, i] >= X(v, i), f"z_ge_x_{v}_{i}"
            for (a, b) in cedges:
                prob += z[b, i] <= z[a, i], f"z_mono_{a}_{b}_{i}"
                prob += z[b, i] <= X(b, i) - X(a, i) + 1, f"z_cut_{a}_{b}_{i}"
    prob += ml
    ws = None
    if warm is not None:
        asg = _unit_assignment(U, warm, cluster)
        pos = {d: j for j, d in enumerate(devs)}
        ai = np.array([pos[int(d)] for d in asg])
        ws = {var: float(ai[v] == i) for (v, i), var in x.items()}
        for h, (a, T, w) in enumerate(U.hyper):
            for i in range(nd):
                if (h, i) in y:
                    ins = [ai[a] == i] + [ai[t] == i for t in T]
                    ws[y[h, i]] = float(any(ins) and not all(ins))
        if contiguous:
            succ = [[] for _ in range(U.n)]
            for a, b in cedges:
                succ[a].append(b)
            for i in range(nd):
                reach = np.zeros(U.n, dtype=bool)
                for v in range(U.n - 1, -1, -1):
                    reach[v] = ai[v] == i or any(reach[w] for w in succ[v])
                for v in range(U.n):
                    ws[z[v, i]] = float(reach[v])
        loads = []
        for i in range(nd):
            if is_acc[i]:
                loads.append(sum(U.acc[v] for v in range(U.n) if ai[v] == i)
                             + sum(w * ws[y[h, i]] for h, (_a, _T, w) in enumerate(U.hyper)))
            else:
                loads.append(sum(U.cpu[v] for v in range(U.n) if ai[v] == i))
        ws[ml] = max(loads)
    res = solve_milp(prob, time_limit=time_limit, gap=gap, warm_start=ws)
    if not res.has_solution:
        if res.status == "infeasible":
            raise InfeasibleError(f"{method}: no split of graph {graph.name!r} meets the memory "
                                  f"caps ({cap / 2**30:.3g} GiB per accelerator)")
        raise SolverError(f"{method}: the solver found no solution ({res.status}: {res.message})")
    asg = np.empty(U.n, dtype=np.int64)
    for (v, i), var in x.items():
        if res.value(var) > 0.5:
            asg[v] = devs[i]
    dev = asg[U.owner]
    names = cluster.names
    placement = {graph.c.names[j]: names[int(d)] for j, d in enumerate(dev.tolist())}
    status = {"optimal": "optimal", "time_limit": "time_limit"}.get(res.status, "feasible")
    return Plan(graph, placement, method=method, status=status,
                predicted={"max_load_ms": float(res.objective)},
                stats={"bound": res.bound, "gap": res.gap, "milp_s": res.seconds,
                       "solver": res.solver, "units": U.n, "binaries": len(x),
                       "total_s": time.perf_counter() - t0},
                info={"contiguous": contiguous})


def _dp_warm(graph, cluster):
    from .pipeline_dp import dp

    try:
        return dp(graph, cluster)
    except (SolverError, InfeasibleError):
        return None


@register("ip_contig", family="pipeline", paper="Tarnawski et al. NeurIPS'20",
          objective="max_load", exact=True, contract_params={"time_limit": 10},
          description="Max-load IP (Fig. 6) with Lemma 4.1 contiguity, HiGHS, DP warm start")
def ip_contig(graph, cluster, *, gap: float | None = 0.01, warm_start: bool = True,
              time_limit: float | None = 60.0) -> Plan:
    """Optimal contiguous split by integer programming (within ``gap``, default 1 % as in the
    paper); ``predicted["max_load_ms"]`` is the incumbent, ``stats["bound"]`` the dual bound."""
    warm = _dp_warm(graph, cluster) if warm_start else None
    return _maxload_ip(graph, cluster, contiguous=True, time_limit=time_limit, gap=gap,
                       warm=warm, method="ip_contig")


@register("ip_noncontig", family="pipeline", paper="Tarnawski et al. NeurIPS'20",
          objective="max_load", exact=True, contract_params={"time_limit": 10},
          description="Max-load IP (Fig. 6) without contiguity: best non-contiguous split")
def ip_noncontig(graph, cluster, *, gap: float | None = 0.01, warm_start: bool = True,
                 time_limit: float | None = 60.0) -> Plan:
    """Best non-contiguous split (Section 5.2); warm-started from the DP split, so it is never
    worse than ``dp``."""
    warm = _dp_warm(graph, cluster) if warm_start else None
    return _maxload_ip(graph, cluster, contiguous=False, time_limit=time_limit, gap=gap,
                       warm=warm, method="ip_noncontig")


# ----------------------------------------------------------------------------- latency
def _greedy_units(graph, cluster):
    U, acc, cpus, cap, p = _dp_units(graph, cluster, merge_trivial=False)
    return U, acc, cpus, cap, p


def _dfs_order(n: int, succ: list) -> list:
    indeg = [0] * n
    for ss in succ:
        for w in ss:
            indeg[w] += 1
    stack = [v for v in range(n - 1, -1, -1) if indeg[v] == 0]
    out = []
    while stack:
        v = stack.pop()
        out.append(v)
        for w in succ[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                stack.append(w)
    return out


@register("greedy_latency", family="pipeline", paper="Tarnawski et al. NeurIPS'20 (baseline)",
          objective="latency",
          description="Greedy: fill accelerators in DFS topological order as far as memory allows")
def greedy_latency(graph, cluster) -> Plan:
    """The greedy baseline of Section 7: contiguous, memory-feasible, blind to time."""
    U, acc, cpus, cap, p = _greedy_units(graph, cluster)
    gc = graph.c
    # successors in the graph's edge order (as the authors' DFS-like toposort visits them)
    succ: list = [[] for _ in range(p.n)]
    for u in graph.ops:
        a = int(p.owner[gc.index[u]])
        for v in graph.nx.successors(u):
            b = int(p.owner[gc.index[v]])
            if a != b:
                succ[a].append(b)
    order = _dfs_order(p.n, succ)
    asg = np.full(U.n, -1, dtype=np.int64)
    status = "heuristic"
    i, used_acc, n = 0, 0, len(order)
    while i < n:
        v = order[i]
        if U.mem[v] > cap or used_acc == len(acc) or not U.acc_ok[v]:
            if cpus and U.cpu_ok[v]:
                asg[v] = cpus[0]
            else:
                status = "infeasible"
                asg[v] = acc[-1] if acc else cpus[0]
            i += 1
            continue
        d = acc[used_acc]
        used_acc += 1
        size = 0.0
        while i < n and U.acc_ok[order[i]] and size + U.mem[order[i]] <= cap:
            size += U.mem[order[i]]
            asg[order[i]] = d
            i += 1
    dev = asg[U.owner]
    names = cluster.names
    placement = {graph.c.names[j]: names[int(d)] for j, d in enumerate(dev.tolist())}
    plan = Plan(graph, placement, method="greedy_latency", status=status)
    from ..pipeline import latency

    plan.predicted["latency_ms"] = latency(plan, cluster)
    return plan


@register("latency_ip", family="pipeline", paper="Tarnawski et al. NeurIPS'20",
          objective="latency", exact=True, contract_params={"time_limit": 10},
          description="Single-sample latency IP (Fig. 3; Fig. 4 with q subgraphs per device)")
def latency_ip(graph, cluster, *, q: int = 1, gap: float | None = 0.01,
               warm_start: bool = True, time_limit: float | None = 60.0) -> Plan:
    """Latency-minimising split (Section 4). ``q`` contiguous subgraphs per accelerator
    (``q = 1``: Fig. 3, contiguous; ``q > 1``: Fig. 4). CPUs are one pool (index 0) with as many
    cores as the graph is wide. Warm-started from ``greedy_latency``; big-M is its latency."""
    from ..pipeline import latency

    t0 = time.perf_counter()
    if q < 1:
        raise SolverError(f"latency_ip: q must be >= 1, got {q}")
    U, acc, cpus, cap, _p = _greedy_units(graph, cluster)
    greedy = greedy_latency(graph, cluster)
    UB = greedy.predicted["latency_ms"] if greedy.status != "infeasible" else None
    if UB is None or not math.isfinite(UB):
        UB = float(U.cpu.sum() + U.acc.sum() + sum(w for *_x, w in U.hyper)) * 2 + 1.0
    H = UB * 1.0001 + 1e-6
    k = len(acc)
    S = k * q  # slots 1..S; slot j belongs to accelerator (j-1)//q
    prob = pulp.LpProblem("latency_ip", pulp.LpMinimize)
    x = {}
    for v in range(U.n):
        if cpus and U.cpu_ok[v]:
            x[v, 0] = pulp.LpVariable(f"x_{v}_0", cat="Binary")
        if U.acc_ok[v]:
            for j in range(1, S + 1):
                x[v, j] = pulp.LpVariable(f"x_{v}_{j}", cat="Binary")
    X = lambda v, j: x.get((v, j), 0)
    for v in range(U.n):
        prob += pulp.lpSum(X(v, j) for j in range(S + 1)) == 1, f"assign_{v}"
    lat = [pulp.LpVariable(f"L_{v}", lowBound=0, upBound=H) for v in range(U.n)]
    tot = pulp.LpVariable("TotalLatency", lowBound=0, upBound=H)
    st = {j: pulp.LpVariable(f"start_{j}", lowBound=0, upBound=H) for j in range(1, S + 1)}
    fi = {j: pulp.LpVariable(f"finish_{j}", lowBound=0, upBound=H) for j in range(1, S + 1)}
    cin, cout, z = {}, {}, {}
    for h, (a, T, w) in enumerate(U.hyper):
        for j in range(1, S + 1):
            cin[h, j] = pulp.LpVariable(f"cin_{h}_{j}", lowBound=0, upBound=1)
            cout[h, j] = pulp.LpVariable(f"cout_{h}_{j}", lowBound=0, upBound=1)
            for t in T:
                prob += cin[h, j] >= X(t, j) - X(a, j), f"in_{h}_{j}_{t}"
                prob += cout[h, j] >= X(a, j) - X(t, j), f"out_{h}_{j}_{t}"
            prob += st[j] >= lat[a] - (1 - cin[h, j]) * H, f"start_{h}_{j}"
    for i in range(k):
        prob += pulp.lpSum(U.mem[v] * X(v, j) for v in range(U.n)
                           for j in range(i * q + 1, i * q + q + 1)) <= cap, f"mem_{i}"
    for j in range(1, S + 1):
        prob += fi[j] == st[j] + pulp.lpSum(w * (cin[h, j] + cout[h, j])
                                            for h, (_a, _T, w) in enumerate(U.hyper)) \
            + pulp.lpSum(U.acc[v] * X(v, j) for v in range(U.n)), f"finish_{j}"
        if (j - 1) % q != 0:
            prob += st[j] >= fi[j - 1], f"seq_{j}"
        for v in range(U.n):
            if (v, j) in x:
                prob += lat[v] >= fi[j] - (1 - x[v, j]) * H, f"lat_sub_{v}_{j}"
            z[v, j] = pulp.LpVariable(f"z_{v}_{j}", lowBound=0, upBound=1)
            prob += z[v, j] >= X(v, j), f"z_ge_x_{v}_{j}"
        for (a, b) in U.edges:
            prob += z[b, j] <= z[a, j], f"z_mono_{a}_{b}_{j}"
            prob += z[b, j] <= X(b, j) - X(a, j) + 1, f"z_cut_{a}_{b}_{j}"
    for v in range(U.n):
        prob += lat[v] >= U.cpu[v] * X(v, 0), f"cpu0_{v}"
        prob += tot >= lat[v], f"tot_{v}"
    for (a, b) in U.edges:
        prob += lat[b] >= U.cpu[b] * X(b, 0) + lat[a], f"prec_{a}_{b}"
    prob += tot
    ws = None
    if warm_start and greedy.status != "infeasible":
        ws = _latency_warm(U, greedy, cluster, acc, cpus, q, x, lat, tot, st, fi, cin, cout, z)
    res = solve_milp(prob, time_limit=time_limit, gap=gap, warm_start=ws)
    if not res.has_solution:
        if res.status == "infeasible":
            raise InfeasibleError(f"latency_ip: no contiguous split of {graph.name!r} fits the "
                                  f"memory caps ({cap / 2**30:.3g} GiB per accelerator)")
        raise SolverError(f"latency_ip: no solution ({res.status}: {res.message})")
    asg = np.empty(U.n, dtype=np.int64)
    for (v, j), var in x.items():
        if res.value(var) > 0.5:
            asg[v] = cpus[0] if j == 0 else acc[(j - 1) // q]
    dev = asg[U.owner]
    names = cluster.names
    placement = {graph.c.names[i]: names[int(d)] for i, d in enumerate(dev.tolist())}
    status = {"optimal": "optimal", "time_limit": "time_limit"}.get(res.status, "feasible")
    plan = Plan(graph, placement, method="latency_ip", status=status,
                predicted={"latency_ms": float(res.objective)},
                stats={"bound": res.bound, "gap": res.gap, "milp_s": res.seconds,
                       "greedy_latency_ms": greedy.predicted.get("latency_ms"), "q": q,
                       "total_s": time.perf_counter() - t0}, info={"q": q})
    plan.stats["evaluated_latency_ms"] = latency(plan, cluster)
    return plan


def _latency_warm(U, plan, cluster, acc, cpus, q, x, lat, tot, st, fi, cin, cout, z) -> dict:
    from ..pipeline import latency

    total, finish, piece = latency(plan, cluster, detail=True)
    asg = _unit_assignment(U, plan, cluster)
    upiece = np.zeros(U.n, dtype=np.int64)
    upiece[U.owner] = np.maximum(piece, 0)
    slot = np.zeros(U.n, dtype=np.int64)
    pos = {d: i for i, d in enumerate(acc)}
    for v in range(U.n):
        if int(asg[v]) in pos:
            if upiece[v] >= q:
                return None
            slot[v] = pos[int(asg[v])] * q + int(upiece[v]) + 1
    ws = {var: float(slot[v] == j) for (v, j), var in x.items()}
    ulat = np.zeros(U.n)
    np.maximum.at(ulat, U.owner, finish)
    for v in range(U.n):
        ws[lat[v]] = float(ulat[v])
    ws[tot] = float(total)
    S = len(acc) * q
    prev_f = 0.0
    for j in range(1, S + 1):
        members = [v for v in range(U.n) if slot[v] == j]
        if (j - 1) % q == 0:
            prev_f = 0.0
        ins = {}
        for h, (a, T, w) in enumerate(U.hyper):
            inn = [slot[t] == j for t in T]
            ws[cin[h, j]] = float(slot[a] != j and any(inn))
            ws[cout[h, j]] = float(slot[a] == j and not all(inn))
            ins[h] = ws[cin[h, j]]
        start = max([prev_f] + [ulat[a] for h, (a, T, w) in enumerate(U.hyper) if ins[h]])
        f = start + sum(w * (ws[cin[h, j]] + ws[cout[h, j]]) for h, (a, T, w) in enumerate(U.hyper)) \
            + float(sum(U.acc[v] for v in members))
        ws[st[j]], ws[fi[j]] = start, f
        prev_f = f
        succ = [[] for _ in range(U.n)]
        for a, b in U.edges:
            succ[a].append(b)
        reach = np.zeros(U.n, dtype=bool)
        for v in reversed(_topo_units(U)):
            reach[v] = slot[v] == j or any(reach[w] for w in succ[v])
        for v in range(U.n):
            ws[z[v, j]] = float(reach[v])
    return ws


def _topo_units(U) -> list:
    succ = [[] for _ in range(U.n)]
    for a, b in U.edges:
        succ[a].append(b)
    return _dfs_order(U.n, succ)
