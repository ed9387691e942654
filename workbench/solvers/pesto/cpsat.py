"""A CP-SAT scheduling engine (OR-Tools) for joint placement and scheduling: the engine behind
``pesto`` and ``pesto_ilp`` (``engine="cpsat"``, the default; the HiGHS MILP stays as
``engine="milp"``).

The model
---------
* One optional interval per op and allowed device (device affinity), exactly one present; the
  op's start ``S_i`` and end ``E_i`` are shared by its intervals. No-overlap per device.
* Transfers as the simulator counts them (decisions.md #2): one per producing op, tensor class
  (bytes, fixed comm) and destination device. ``direct`` mode: an optional interval per source
  device ``a`` and destination ``b`` of duration ``T(a, b)``, present when the producer is on
  ``a`` and some consumer of the class on ``b``; it starts after the producer ends and every
  consumer on ``b`` starts after it ends. ``host`` mode: an upload on the source's channel to
  the host (staged sources only) and a download per staged destination, as the simulator stages
  them. With ``congestion=True`` the intervals of one channel (directed link, or host
  upload/download channel) never overlap; with ``False`` they are plain delays.
* Memory per device (a linear constraint over the placement literals), colocation groups and
  ``groups`` (ops merged by coarsening) share one placement literal per device; the members of
  a coarsening group keep their given order on their device.
* Objective: the makespan. A simulated schedule (the best heuristic's) is the hint.

Integer times and what rounding does to the bound
-------------------------------------------------
Times are milliseconds as floats; the model works in ticks of ``1 / scale`` ms with
``scale = 10**k`` chosen so that the horizon spans about 10^7 ticks. Every duration is rounded
**down**, so the integer model is a relaxation: any real schedule, its times rounded down,
is a solution, hence ``bound_ms = bound / scale`` is a valid lower bound of the real optimum
(and ``objective_ms`` may sit below the simulated makespan by at most one tick per op and
transfer on a path). Receive overheads (``Device.recv_overhead``) are left out of the model,
which keeps it a relaxation. CP-SAT may order a link differently from the simulator's FIFO
channels; the plan keeps the model's op order and the simulator judges it.

``status == "optimal"`` only when CP-SAT proves optimality *and* the simulated makespan of the
returned plan is within rounding of the proven bound, one tick per op and transfer on its
critical path (``stats["optimal_tolerance_ms"]``), so the model's judgement and the
simulator's agree; otherwise ``"feasible"`` or ``"time_limit"``.

Examples
--------
>>> from workbench import samples, Cluster, simulate
>>> from workbench.solvers.pesto.cpsat import solve_cpsat
>>> g, c = samples.pesto_fig2(), Cluster.preset("2xV100-pcie")
>>> res = solve_cpsat(g, c, time_limit=10, workers=1)
>>> res.status, round(res.objective_ms, 3), round(res.bound_ms, 3)
('optimal', 8.0, 8.0)
>>> round(simulate(res.plan(g, c), c).makespan, 3)
8.0
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ...budget import Budget
from ...errors import InfeasibleError, SolverError, TimeLimitError
from ...plan import Plan, order_from_starts
from ..common import tensor_classes
from .hint import gapless_blocks, integer_hint, ranks

try:  # imported with the package: a first solve must not spend its time limit importing it
    from ortools.sat.python import cp_model as _cp_model
except ImportError:  # pragma: no cover - ortools is a dependency
    _cp_model = None

__all__ = ["BuildTimeout", "CpsatModel", "CpsatResult", "solve_cpsat", "time_scale"]


BuildTimeout = TimeLimitError
"""What :func:`solve_cpsat` raises when its budget's build share (``cpsat.build``) ends before
the model is built (nothing was solved): :class:`~workbench.errors.TimeLimitError`, under the
name this module has always exported."""


def _progress_callback(solver, scale: float):
    """A solution callback (and a bound callback on ``solver``) that hands each incumbent and
    bound, in ms, to the progress recording of the method being solved
    (:mod:`workbench.solvers.progress`); None outside one."""
    from ..progress import new_call

    rec = new_call("cpsat")
    if rec is None:
        return None
    from ortools.sat.python import cp_model

    last = {"obj": math.nan}

    class _Progress(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self):
            last["obj"] = self.objective_value / scale
            rec(last["obj"], self.best_objective_bound / scale)

        def finish(self, s, code):
            found = code in (cp_model.OPTIMAL, cp_model.FEASIBLE)
            rec(s.objective_value / scale if found else math.nan,
                s.best_objective_bound / scale)

    solver.best_bound_callback = lambda b: rec(last["obj"], b / scale)
    return _Progress()


def time_scale(horizon_ms: float) -> int:
    """Ticks per millisecond: a power of ten putting ``horizon_ms`` near 10^7 ticks.

    >>> time_scale(8.0), time_scale(120.0), time_scale(5e4)
    (1000000, 10000, 100)
    """
    h = max(float(horizon_ms), 1e-6)
    return int(10 ** min(9, max(0, math.floor(math.log10(1e7 / h)))))


@dataclass
class CpsatResult:
    """What :func:`solve_cpsat` found.

    ``status``: ``optimal`` (proven, and the plan simulates at the bound), ``feasible``,
    ``time_limit`` (stopped with a solution), ``infeasible`` or ``unknown`` (no solution in
    time). ``cp_status``: CP-SAT's own status name. ``device``/``start``: per op (None without a
    solution). ``objective_ms``/``bound_ms``: the model's makespan and CP-SAT's proven bound in
    ms (bound valid for the model; see the module docstring). ``gap`` = (simulated - bound) /
    simulated when a solution was simulated, else (objective - bound) / objective.
    """

    status: str
    cp_status: str
    device: np.ndarray | None
    start: np.ndarray | None
    objective_ms: float | None
    bound_ms: float
    gap: float | None
    simulated_ms: float | None
    stats: dict = field(default_factory=dict)
    tie: np.ndarray | None = None  # breaks equal starts on a device (the hint's run order)

    @property
    def has_solution(self) -> bool:
        return self.device is not None

    def plan(self, graph, cluster, *, method: str = "cpsat") -> Plan:
        """The solution as a Plan with the model's per-device order."""
        if self.device is None:
            raise SolverError(f"CP-SAT found no solution (status {self.cp_status}); "
                              f"raise time_limit")
        names = cluster.names
        placement = {graph.c.names[i]: names[int(d)] for i, d in enumerate(self.device.tolist())}
        order = order_from_starts(graph, names, self.device, self.start, self.tie)
        return Plan(graph, placement, method=method, order=order,
                    status=self.status if self.status != "unknown" else "feasible",
                    predicted={"makespan_ms": self.objective_ms}, stats=dict(self.stats))


def _symmetric(cluster) -> bool:
    devs = cluster.devices
    if len({(d.kind, d.speed, d.memory, d.recv_overhead) for d in devs}) > 1:
        return False
    cc = cluster.c
    if cc.n < 2:
        return True
    if cc.host_mode:
        return len(set(cc.staged.tolist())) == 1
    off = ~np.eye(cc.n, dtype=bool)
    return bool(np.ptp(cc.lat[off]) == 0 and np.ptp(cc.inv_bw[off]) == 0)


def _groups_of(graph, groups) -> tuple[list, list]:
    """Union of colocation groups and coarsening groups: (representative per op, chains)."""
    gc = graph.c
    n = gc.n
    parent = list(range(n))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def union(a, b):
        a, b = find(a), find(b)
        if a != b:
            parent[max(a, b)] = min(a, b)

    coloc = gc.coloc.tolist()
    first: dict = {}
    for i, g_ in enumerate(coloc):
        if g_ >= 0:
            union(first.setdefault(g_, i), i)
    chains = []
    for grp in groups or ():
        idx = [graph.index[v] if isinstance(v, str) else int(v) for v in grp]
        if any(not 0 <= i < n for i in idx):
            raise SolverError(f"group {list(grp)[:3]!r} names an op outside graph "
                              f"{graph.name!r}")
        for i in idx[1:]:
            union(idx[0], i)
        if len(idx) > 1:
            chains.append(idx)
    return [find(i) for i in range(n)], chains


class CpsatModel:
    """The CP-SAT model of :func:`solve_cpsat` (see the module docstring), in the shape of
    :class:`~workbench.solvers.pesto.ilp.PestoModel`: build (``__init__``), :meth:`add_hint`,
    :meth:`solve`, :meth:`extract`.

    Parameters are those of :func:`solve_cpsat`; ``budget`` (a
    :class:`~workbench.budget.Budget`, optional) is the build's: once it is over the build
    raises :data:`BuildTimeout`.

    Examples
    --------
    >>> from workbench import samples, Cluster
    >>> g, c = samples.pesto_fig2(), Cluster.preset("2xV100-pcie")
    >>> model = CpsatModel(g, c)
    >>> model.add_hint()   # no hint given: nothing to add
    >>> res = model.solve(workers=1, time_limit=10)
    >>> res.status, round(res.objective_ms, 3)
    ('optimal', 8.0)
    """

    def __init__(self, graph, cluster, *, congestion: bool = True, hint=None, groups=None,
                 symmetry: bool = True, horizon: float | None = None, fifo_links: bool = True,
                 fifo_links_max: int = 3000, fuse: bool = True, budget: Budget | None = None):
        self.t0 = time.perf_counter()
        if _cp_model is None:  # pragma: no cover - ortools is a dependency
            raise SolverError("the CP-SAT engine needs OR-Tools: pip install ortools")
        self.graph, self.cluster, self.hint = graph, cluster, hint
        self.congestion, self.budget = congestion, budget
        self._setup(horizon)
        self._units(groups, symmetry)
        self._ops(fuse)
        self._memory()
        self._transfers()
        self._fifo_links(fifo_links, fifo_links_max)

    # ------------------------------------------------------------------ build
    def _check_time(self) -> None:
        if self.budget is not None:
            self.budget.check(f"building the CP-SAT model of graph {self.graph.name!r} "
                              f"({self.n} ops, {self.k} devices); raise time_limit")

    def _setup(self, horizon) -> None:
        """Sizes, durations, tensor classes, the horizon and the time scale."""
        graph, cluster, hint = self.graph, self.cluster, self.hint
        gc, cc = graph.c, cluster.c
        n, k = self.n, self.k = gc.n, cc.n
        times = self.times = cluster.op_times(graph)
        ok = self.ok = np.isfinite(times)
        for i in range(n):
            if not ok[i].any():
                raise InfeasibleError(f"op {gc.names[i]!r} can run on no device of cluster "
                                      f"{cluster.name!r}")
        host = self.host = bool(cc.host_mode)
        classes = self.classes = [[(b, c, sorted({v for _, v in cons})) for b, c, cons in cl]
                                  for cl in tensor_classes(graph)]
        lat, inv = self.lat, self.inv = cc.lat.tolist(), cc.inv_bw.tolist()
        up_lat, up_inv = cc.up_lat.tolist(), cc.up_inv_bw.tolist()
        self.up_lat, self.up_inv, self.staged = up_lat, up_inv, cc.staged.tolist()
        if horizon is None:
            if hint is not None:
                horizon = float(hint.makespan)
            else:
                tmax = np.where(ok, times, 0).max(axis=1).sum()
                tx = 0.0
                for u in range(n):
                    for nb, c, _ in classes[u]:
                        if host:
                            one = c if c is not None else max(
                                (up_lat[a] + nb * up_inv[a] for a in range(k)), default=0.0)
                            tx += 2 * one * k
                        else:
                            tx += k * max((c if c is not None else lat[a][b] + nb * inv[a][b]
                                           for a in range(k) for b in range(k) if a != b),
                                          default=0.0)
                horizon = float(tmax + tx)
        self.horizon = horizon
        self.scale = time_scale(horizon)
        self.H = int(math.floor(horizon * self.scale)) + 1

    def ticks(self, ms: float) -> int:
        """``ms`` in the model's ticks, rounded down."""
        return int(math.floor(ms * self.scale + 1e-9))

    def _units(self, groups, symmetry: bool) -> None:
        """Placement units (colocation and coarsening groups) and their literals."""
        graph, cluster, gc, n, k, ok = self.graph, self.cluster, self.graph.c, self.n, self.k, self.ok
        rep, chains = _groups_of(graph, groups)
        self.rep, self.chains = rep, chains
        reps = self.reps = sorted(set(rep))
        allowed_rep: dict = {}
        for r in reps:
            allowed_rep[r] = set(range(k))
        for i in range(n):
            allowed_rep[rep[i]] &= {d for d in range(k) if ok[i, d]}
        sym = self.sym = bool(symmetry and k > 1 and _symmetric(cluster))
        if sym:
            for j, r in enumerate(reps):   # (devices past the k-th are not there anyway)
                allowed_rep[r] &= set(range(min(j + 1, k)))
        for r in reps:
            if not allowed_rep[r]:
                members = [gc.names[i] for i in range(n) if rep[i] == r]
                raise InfeasibleError(f"ops {members[:3]!r} must share a device but no device "
                                      f"of cluster {cluster.name!r} runs them all")
        self._check_time()
        m = self.m = _cp_model.CpModel()
        X = self.X = {(r, d): m.new_bool_var(f"x_{r}_{d}")
                      for r in reps for d in sorted(allowed_rep[r])}
        for r in reps:
            m.add_exactly_one(X[r, d] for d in sorted(allowed_rep[r]))
        self.allowed = [sorted(allowed_rep[rep[i]]) for i in range(n)]

    def x(self, i: int, d: int):
        """Placement literal of op ``i`` on device ``d`` (its unit's; None where not allowed)."""
        return self.X.get((self.rep[i], d))

    def _shifted(self, base, h, per_dev: dict):
        """``base`` plus a per-device amount chosen by the placement of unit ``h``."""
        vals = set(per_dev.values())
        if len(vals) == 1:
            return base + vals.pop()
        return base + sum(off * self.x(h, d) for d, off in per_dev.items())

    def _ops(self, fuse: bool) -> None:
        """Op intervals (fused runs as one interval per device), no-overlap, the makespan."""
        m, n, k, H, allowed, gc = self.m, self.n, self.k, self.H, self.allowed, self.graph.c
        x, times, ok, chains = self.x, self.times, self.ok, self.chains
        dur = self.dur = [[self.ticks(times[i, d]) if ok[i, d] else 0 for d in range(k)]
                          for i in range(n)]
        hint = self.hint
        blocks = self.blocks = (gapless_blocks(self.graph, hint, chains)
                                if (fuse and hint is not None) else [])
        block_of: dict = {}  # member -> (head, offset per allowed device)
        block_end: dict = {}  # head -> end variable of its run
        self.block_of, self.block_end = block_of, block_end
        for blk in blocks:
            h = blk[0]
            acc = {d: 0 for d in allowed[h]}
            for v in blk:
                block_of[v] = (h, dict(acc))
                for d in acc:
                    acc[d] += dur[v][d]
        S: list = [None] * n
        E: list = [None] * n
        dev_iv: list = [[] for _ in range(k)]
        self.S, self.E, self.dev_iv = S, E, dev_iv
        shifted = self._shifted
        for blk in blocks:  # one interval per device for the whole run; members at fixed offsets
            h = blk[0]
            length = {d: sum(dur[v][d] for v in blk) for d in allowed[h]}
            sb = m.new_int_var(0, H, f"S_{h}")
            eb = m.new_int_var(0, H, f"B_{h}")
            for d in allowed[h]:
                if len(allowed[h]) == 1:
                    dev_iv[d].append(m.new_interval_var(sb, length[d], eb, f"blk_{h}_{d}"))
                else:
                    dev_iv[d].append(m.new_optional_interval_var(sb, length[d], eb, x(h, d),
                                                                 f"blk_{h}_{d}"))
            if len(allowed[h]) > 1:
                m.add(eb == shifted(sb, h, length))
            block_end[h] = eb
            for v in blk:
                off = block_of[v][1]
                S[v] = sb if v == h else shifted(sb, h, off)
                E[v] = shifted(sb, h, {d: off[d] + dur[v][d] for d in off})
        for i in range(n):
            if i % 256 == 0:
                self._check_time()
            if S[i] is not None:
                continue
            S[i] = m.new_int_var(0, H, f"S_{i}")
            E[i] = m.new_int_var(0, H, f"E_{i}")
            if len(allowed[i]) == 1:
                d = allowed[i][0]
                dev_iv[d].append(m.new_interval_var(S[i], dur[i][d], E[i], f"op_{i}_{d}"))
                continue
            for d in allowed[i]:
                dev_iv[d].append(m.new_optional_interval_var(S[i], dur[i][d], E[i], x(i, d),
                                                             f"op_{i}_{d}"))
            m.add(E[i] == S[i] + sum(dur[i][d] * x(i, d) for d in allowed[i]))
        for d in range(k):
            if len(dev_iv[d]) > 1:
                m.add_no_overlap(dev_iv[d])
        for ch in chains:
            for a, b in zip(ch, ch[1:]):
                if a not in block_of or block_of[a][0] != block_of.get(b, (None,))[0]:
                    m.add(S[b] >= E[a])
        cmax = self.cmax = m.new_int_var(0, H, "makespan")
        for i in range(n):
            if not gc.succ[i]:
                m.add(cmax >= E[i])
        m.minimize(cmax)

    def _memory(self) -> None:
        """Memory per device: a linear constraint over the placement literals."""
        mem = self.graph.c.memory.tolist()
        for d, dv in enumerate(self.cluster.devices):
            if not math.isfinite(dv.memory):
                continue
            coef: dict = {}
            for i in range(self.n):
                if mem[i] > 0 and d in self.allowed[i]:
                    r = self.rep[i]
                    coef[r] = coef.get(r, 0) + int(math.floor(mem[i]))
            if coef and sum(coef.values()) > dv.memory:
                self.m.add(sum(c * self.X[r, d] for r, c in coef.items())
                           <= int(math.ceil(dv.memory)))

    def _channel(self, key, iv) -> None:
        self.chan_iv.setdefault(key, []).append(iv)

    def _transfers(self) -> None:
        """Precedences and transfers (direct links or host staging); channel no-overlap."""
        self.chan_iv: dict = {}
        self.xfer: dict = {}  # (u, ci, "up"/"down"/a, b) -> (presence, start, end, ticks)
        self.n_xfer = 0
        self.need_lits: list = []  # (literal, producer, consumers, device): for the hint
        self.off_lits: list = []   # (literal, producer, consumers, device) in host mode
        self.any_lits: list = []
        self.fifo: dict = {}       # direct link -> [(producer, presence, start, end)]
        m, S, E, allowed = self.m, self.S, self.E, self.allowed
        for u in range(self.n):
            self._check_time()
            for ci, (nb, c, cons) in enumerate(self.classes[u]):
                for v in cons:
                    m.add(S[v] >= E[u])
                if self.k == 1:
                    continue
                dests = sorted({b for v in cons for b in allowed[v]})
                need = self._need(u, ci, cons, dests)
                if not self.host:
                    self._direct(u, ci, nb, c, cons, dests, need)
                else:
                    self._staged(u, ci, nb, c, cons, dests, need)
        if self.congestion:
            for ivs in self.chan_iv.values():
                if len(ivs) > 1:
                    m.add_no_overlap(ivs)

    def _need(self, u, ci, cons, dests) -> dict:
        """Per destination: the literal "some consumer of class ``ci`` of ``u`` runs there"
        (None when only consumers sharing ``u``'s placement unit could)."""
        m, x, rep, allowed = self.m, self.x, self.rep, self.allowed
        need = {}
        for b in dests:
            # consumers sharing u's placement unit never need this transfer
            lits = [x(v, b) for v in cons if b in allowed[v] and rep[v] != rep[u]]
            if not lits:
                need[b] = None
                continue
            lb = m.new_bool_var(f"need_{u}_{ci}_{b}")
            self.need_lits.append((lb, u, [v for v in cons if rep[v] != rep[u]], b))
            m.add_bool_or(lits).only_enforce_if(lb)
            for lt in lits:
                m.add_implication(lt, lb)
            need[b] = lb
        return need

    def _direct(self, u, ci, nb, c, cons, dests, need) -> None:
        """Direct links: an optional transfer interval per source and destination device."""
        m, x, S, E, H, allowed = self.m, self.x, self.S, self.E, self.H, self.allowed
        lat, inv, Eu = self.lat, self.inv, E[u]
        for b in dests:
            if need[b] is None:
                continue
            srcs = [a for a in allowed[u] if a != b]
            if not srcs:
                continue
            if self.congestion:
                ts = m.new_int_var(0, H, f"ts_{u}_{ci}_{b}")
                te = m.new_int_var(0, H, f"te_{u}_{ci}_{b}")
                m.add(ts >= Eu)
                for a in srcs:
                    tt = self.ticks(c if c is not None else lat[a][b] + nb * inv[a][b])
                    p = m.new_bool_var(f"p_{u}_{ci}_{a}_{b}")
                    m.add_bool_and([x(u, a), need[b]]).only_enforce_if(p)
                    m.add_bool_or([x(u, a).Not(), need[b].Not(), p])
                    iv = m.new_optional_interval_var(ts, tt, te, p, f"t_{u}_{ci}_{a}_{b}")
                    self._channel(("link", a, b), iv)
                    self.fifo.setdefault((a, b), []).append((u, p, ts, te))
                    self.xfer[u, ci, a, b] = (p, ts, te, tt)
                    self.n_xfer += 1
                for v in cons:
                    if b in allowed[v]:
                        m.add(S[v] >= te).only_enforce_if([x(v, b), x(u, b).Not()]
                                                          if x(u, b) is not None
                                                          else x(v, b))
            else:
                for a in srcs:
                    tt = self.ticks(c if c is not None else lat[a][b] + nb * inv[a][b])
                    for v in cons:
                        if b in allowed[v]:
                            m.add(S[v] >= Eu + tt).only_enforce_if([x(u, a), x(v, b)])

    def _staged(self, u, ci, nb, c, cons, dests, need) -> None:
        """Host mode: upload once from a staged source, download per staged destination."""
        m, x, S, H, allowed, rep = self.m, self.x, self.S, self.H, self.allowed, self.rep
        up_lat, up_inv, staged, Eu = self.up_lat, self.up_inv, self.staged, self.E[u]
        real = [b for b in dests if need[b] is not None]
        if not real:
            return
        any_lit = m.new_bool_var(f"any_{u}_{ci}")  # some consumer off u's device
        offs = []
        for b in real:
            o = m.new_bool_var(f"off_{u}_{ci}_{b}")
            if x(u, b) is None:
                m.add(o == need[b])
            else:
                m.add_bool_and([need[b], x(u, b).Not()]).only_enforce_if(o)
                m.add_bool_or([need[b].Not(), x(u, b), o])
            offs.append((b, o))
            self.off_lits.append((o, u, [v for v in cons if rep[v] != rep[u]], b))
        m.add_max_equality(any_lit, [o for _, o in offs])
        self.any_lits.append((any_lit, [o for _, o in offs]))
        up_end = {}
        for a in allowed[u]:
            if not staged[a]:
                continue
            tt = self.ticks(c if c is not None else up_lat[a] + nb * up_inv[a])
            p = m.new_bool_var(f"up_{u}_{ci}_{a}")
            m.add_bool_and([x(u, a), any_lit]).only_enforce_if(p)
            m.add_bool_or([x(u, a).Not(), any_lit.Not(), p])
            ts = m.new_int_var(0, H, f"us_{u}_{ci}_{a}")
            te = m.new_int_var(0, H, f"ue_{u}_{ci}_{a}")
            m.add(ts >= Eu).only_enforce_if(p)
            self._hop((u, ci, "up", a), ("up", a), p, ts, te, tt, f"u_{u}_{ci}_{a}")
            up_end[a] = te
        for b, o in offs:
            # the tensor is on the host when: the upload ended, or u runs unstaged
            if staged[b]:
                tt = self.ticks(c if c is not None else up_lat[b] + nb * up_inv[b])
                ts = m.new_int_var(0, H, f"ds_{u}_{ci}_{b}")
                te = m.new_int_var(0, H, f"de_{u}_{ci}_{b}")
                m.add(ts >= Eu).only_enforce_if(o)
                for a, ue in up_end.items():
                    m.add(ts >= ue).only_enforce_if([o, x(u, a)])
                self._hop((u, ci, "down", b), ("down", b), o, ts, te, tt, f"d_{u}_{ci}_{b}")
                for v in cons:
                    if b in allowed[v]:
                        m.add(S[v] >= te).only_enforce_if([x(v, b), o])
            else:
                for v in cons:
                    if b in allowed[v]:
                        for a, ue in up_end.items():
                            m.add(S[v] >= ue).only_enforce_if([x(v, b), x(u, a)])

    def _hop(self, key, chan, present, ts, te, tt: int, name: str) -> None:
        """A host-staging transfer ``key`` of ``tt`` ticks: an optional interval on channel
        ``chan`` (with congestion) or a plain delay."""
        if self.congestion:
            self._channel(chan, self.m.new_optional_interval_var(ts, tt, te, present, name))
        else:
            self.m.add(te == ts + tt).only_enforce_if(present)
        self.xfer[key] = (present, ts, te, tt)
        self.n_xfer += 1

    def _before(self, u: int, w: int):
        """Literal "u runs before w" for ops that may share a device (u < w)."""
        m, S, E, x = self.m, self.S, self.E, self.x
        lit = self.order_lit.get((u, w))
        if lit is None:
            lit = m.new_bool_var(f"o_{u}_{w}")
            self.order_lit[u, w] = lit
            for a in set(self.allowed[u]) & set(self.allowed[w]):
                m.add(S[w] >= E[u]).only_enforce_if([lit, x(u, a), x(w, a)])
                m.add(S[u] >= E[w]).only_enforce_if([lit.Not(), x(u, a), x(w, a)])
        return lit

    def _fifo_links(self, fifo_links: bool, fifo_links_max: int) -> None:
        """FIFO links: transfers leave a device in the order of their producers there."""
        m, n, fifo, rep, hint = self.m, self.n, self.fifo, self.rep, self.hint
        n_items = sum(len(v) for v in fifo.values())
        # pair each transfer with its `window` next ones in the hint's order (all pairs when
        # they fit in fifo_links_max): a subset of the simulator's FIFO rule keeps the model a
        # relaxation
        window = max(4, fifo_links_max // max(1, n_items))
        self.fifo_on = bool(fifo and fifo_links)
        self.n_pairs = 0
        self.order_lit: dict = {}
        if not self.fifo_on:
            return
        key_of = (list(zip(hint.start.tolist(), ranks(hint))) if hint is not None
                  else list(range(n)))
        reach = [0] * n
        for i in range(n - 1, -1, -1):
            r = 0
            for j in self.graph.c.succ[i]:
                r |= (1 << j) | reach[j]
            reach[i] = r
        for items in fifo.values():
            items = sorted(items, key=lambda t: (key_of[t[0]], t[0]))
            for p_ in range(len(items)):
                self._check_time()
                for q_ in range(p_ + 1, min(len(items), p_ + 1 + window)):
                    u, pu, tsu, teu = items[p_]
                    w, pw, tsw, tew = items[q_]
                    if w == u or rep[u] == rep[w]:
                        continue
                    if w < u:
                        u, pu, tsu, teu, w, pw, tsw, tew = w, pw, tsw, tew, u, pu, tsu, teu
                    self.n_pairs += 1
                    if reach[u] >> w & 1:
                        m.add(tsw >= teu).only_enforce_if([pu, pw])
                        continue
                    o = self._before(u, w)
                    m.add(tsw >= teu).only_enforce_if([o, pu, pw])
                    m.add(tsu >= tew).only_enforce_if([o.Not(), pu, pw])

    # ------------------------------------------------------------------ hint
    def _set_hint(self, var, value) -> None:
        # one hint per variable: an end that is its start plus a fixed duration is an affine
        # expression of the start, and CP-SAT rejects a model whose hint names a variable twice
        if not isinstance(var, _cp_model.IntVar) or var.index in self._hinted:
            return
        self._hinted.add(var.index)
        self.m.add_hint(var, value)

    def _hint_devices(self) -> tuple:
        """The hint's device per op (relabelled for symmetry) and the relabelling (or None)."""
        hdev = np.asarray(self.hint.device).tolist()
        relabel = None
        if self.sym:
            relabel = {}
            for r in self.reps:
                d0 = hdev[r]
                if d0 not in relabel:
                    relabel[d0] = len(relabel)
            hdev = [relabel[d] for d in hdev]
        return hdev, relabel

    def _hint_transfers(self, relabel) -> dict:
        """Transfer key -> the hint's (float) start, for the transfers the hint makes."""
        hint, classes = self.hint, self.classes
        inv_rel = {v: kk for kk, v in relabel.items()} if relabel else None
        sim_t = {}
        for kk in range(hint.n_transfers):
            sd, dd = int(hint.t_src[kk]), int(hint.t_dst[kk])
            if inv_rel is not None:
                sd = relabel.get(sd, sd) if sd >= 0 else sd
                dd = relabel.get(dd, dd) if dd >= 0 else dd
            sim_t[(int(hint.t_op[kk]), sd, dd, float(hint.t_bytes[kk]))] = \
                float(hint.t_start[kk])
        present: dict = {}
        for key in self.xfer:
            u, ci = key[0], key[1]
            nb = classes[u][ci][0]
            if key[2] == "up":
                st = sim_t.get((u, key[3], -1, nb))
            elif key[2] == "down":
                st = sim_t.get((u, -1, key[3], nb))
            else:
                st = sim_t.get((u, key[2], key[3], nb))
            if st is not None:
                present[key] = st
        return present

    def add_hint(self) -> None:
        """Give CP-SAT the hint schedule (re-timed in ticks, :func:`~.hint.integer_hint`) as
        its first solution; nothing without a hint."""
        self._hinted: set = set()
        if self.hint is None:
            return
        set_hint, n, dur, classes = self._set_hint, self.n, self.dur, self.classes
        hdev, relabel = self._hint_devices()
        for (r, d), lit in self.X.items():
            set_hint(lit, hdev[r] == d)
        hs = self.hint.start.tolist()
        hr = ranks(self.hint)
        present = self._hint_transfers(relabel)
        lat, inv, ticks = self.lat, self.inv, self.ticks
        delay = None if (self.host or self.congestion) else (
            lambda u, ci, a, b: ticks(classes[u][ci][1] if classes[u][ci][1] is not None
                                      else lat[a][b] + classes[u][ci][0] * inv[a][b]))
        op_t, x_t = integer_hint(self.graph.c, hdev, list(zip(hs, hr)), dur, classes,
                                 self.xfer, present, ticks, delay, self.block_of,
                                 queue=self.congestion)
        run_end: dict = {}
        for v, (h, _) in self.block_of.items():
            run_end[h] = max(run_end.get(h, 0), op_t[v] + dur[v][hdev[v]])
        for h, eb in self.block_end.items():
            set_hint(eb, run_end[h])
        for i in range(n):
            set_hint(self.S[i], op_t[i])
            set_hint(self.E[i], op_t[i] + dur[i][hdev[i]])
        set_hint(self.cmax, max(op_t[i] + dur[i][hdev[i]] for i in range(n)) if n else 0)
        off_val = {}
        for lit, u, cs, b in self.need_lits:
            set_hint(lit, any(hdev[v] == b for v in cs))
        for lit, u, cs, b in self.off_lits:
            off_val[lit.index] = any(hdev[v] == b for v in cs) and hdev[u] != b
            set_hint(lit, off_val[lit.index])
        for lit, offs in self.any_lits:
            set_hint(lit, any(off_val[o.index] for o in offs))
        for (u, w), lit in self.order_lit.items():
            set_hint(lit, (hs[u], hr[u]) < (hs[w], hr[w]))
        for key, (p, ts, te, tt) in self.xfer.items():
            if key in present:
                set_hint(p, True)
                set_hint(ts, x_t[key])
                set_hint(te, x_t[key] + tt)
        H = self.H
        for key, (p, ts, te, tt) in self.xfer.items():
            if key not in present:  # no transfer: park it at the producer's end, in domain
                set_hint(p, False)
                u = key[0]
                park = min(op_t[u] + dur[u][hdev[u]], H)
                set_hint(ts, park)
                set_hint(te, min(park + tt, H))

    # ------------------------------------------------------------------ solve
    def solve(self, *, workers: int = 2, seed: int | None = None,
              parameters: dict | None = None, time_limit=None) -> CpsatResult:
        """Run CP-SAT for what is left of ``time_limit`` (seconds or a
        :class:`~workbench.budget.Budget`; None: no limit) and :meth:`extract` the result."""
        build_s = time.perf_counter() - self.t0
        cp_model, scale = _cp_model, self.scale
        solver = cp_model.CpSolver()
        prm = solver.parameters
        prm.num_workers = max(1, int(workers))
        prm.random_seed = 0 if seed is None else int(seed) % (2**31)
        for key, val in (parameters or {}).items():
            if not hasattr(prm, key):
                raise SolverError(f"CP-SAT has no parameter {key!r}")
            setattr(prm, key, val)
        left = Budget.of(time_limit, name="cpsat").seconds(floor=0.05)
        if left is not None:
            prm.max_time_in_seconds = left
        progress = _progress_callback(solver, scale)
        code = solver.solve(self.m, progress)
        if progress is not None:  # the final incumbent and bound
            progress.finish(solver, code)
        if code == cp_model.MODEL_INVALID:  # a bug of this module, never a property of the input
            raise SolverError(f"the CP-SAT model of graph {self.graph.name!r} on cluster "
                              f"{self.cluster.name!r} is invalid: {self.m.validate()}")
        stats = {"engine": "cpsat", "cp_status": solver.status_name(code),
                 "scale_ticks_per_ms": scale, "build_seconds": build_s,
                 "cpsat_seconds": solver.wall_time,
                 "n_intervals": sum(len(v) for v in self.dev_iv) + self.n_xfer,
                 "n_placement_literals": len(self.X), "n_units": len(self.reps),
                 "symmetry_breaking": self.sym, "workers": prm.num_workers,
                 "congestion_modelled": bool(self.congestion), "host_mode": self.host,
                 "recv_overhead_modelled": False, "fifo_links": self.fifo_on,
                 "fifo_pairs": self.n_pairs, "bound_valid": not self.chains,
                 "horizon_ms": float(self.horizon), "fused_runs": len(self.blocks),
                 "fused_ops": sum(len(b) for b in self.blocks)}
        return self.extract(solver, code, stats)

    def extract(self, solver, code, stats: dict) -> CpsatResult:
        """The result of a finished ``solver``: placement and starts, simulated and judged
        (``optimal`` only at the proven bound up to rounding)."""
        cp_model, scale, graph, cluster = _cp_model, self.scale, self.graph, self.cluster
        name = stats["cp_status"]
        if code == cp_model.INFEASIBLE:
            raise InfeasibleError(
                f"graph {graph.name!r} on cluster {cluster.name!r}: CP-SAT proves that no "
                f"placement satisfies memory capacity, colocation, device affinity"
                + (" and the given groups" if self.chains else "") + " together")
        bound_ms = float(solver.best_objective_bound) / scale
        if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return CpsatResult("unknown", name, None, None, None, bound_ms, None, None, stats)
        dev = np.empty(self.n, dtype=np.int64)
        for i in range(self.n):
            dev[i] = next(d for d in self.allowed[i] if solver.boolean_value(self.x(i, d)))
        start = np.array([solver.value(self.S[i]) for i in range(self.n)], dtype=float) / scale
        obj = float(solver.objective_value) / scale
        res = CpsatResult("feasible", name, dev, start, obj, bound_ms, None, None, stats,
                          tie=None if self.hint is None else np.asarray(ranks(self.hint)))
        from ...simulate import simulate

        sched = simulate(res.plan(graph, cluster), cluster, congestion=self.congestion)
        sim = float(sched.makespan)
        res.simulated_ms = sim
        res.gap = max(0.0, (sim - bound_ms) / sim) if sim > 0 else 0.0
        # "optimal" means: at the proven bound up to rounding, one tick per op and transfer on
        # the plan's critical path (the floor of each duration loses less than a tick)
        tol = (len(sched.critical_path) + 1) / scale + 1e-9 * max(1.0, sim)
        stats["optimal_tolerance_ms"] = tol
        if code == cp_model.OPTIMAL and sim <= bound_ms + tol:
            res.status = "optimal"
        elif code == cp_model.OPTIMAL:
            res.status = "feasible"
            stats["not_optimal_because"] = (
                f"the simulator judges the model's optimum at {sim:.6g} ms, above the proven "
                f"bound {bound_ms:.6g} ms (link order, receive overheads or rounding differ)")
        else:
            res.status = "time_limit"
        stats["cpsat_objective_ms"] = obj
        return res


def solve_cpsat(graph, cluster, *, congestion: bool = True, time_limit=60.0,
                workers: int = 2, hint=None, groups=None, symmetry: bool = True,
                seed: int | None = None, horizon: float | None = None, fifo_links: bool = True,
                fifo_links_max: int = 3000, fuse: bool = True,
                parameters: dict | None = None) -> CpsatResult:
    """Solve joint placement + scheduling of ``graph`` on ``cluster`` with CP-SAT
    (:class:`CpsatModel`: build, hint, solve, extract).

    Parameters
    ----------
    congestion : bool
        Transfers on one channel never overlap (the simulator's FIFO links); False: delays only.
    time_limit : float, Budget or None
        Seconds for the whole call, model building included, or a
        :class:`~workbench.budget.Budget` (None: no limit). The model must be built within
        the share ``cpsat.build`` of it (60 %): later, CP-SAT has too little time left to
        improve on the hint, and what follows the solve (simulating the plan, the caller's
        fallback) must still fit in the limit.
    workers : int
        CP-SAT search workers (2 by default, for a shared 2-core machine).
    hint : Schedule, optional
        A simulated schedule of ``graph`` on ``cluster`` given to CP-SAT as its first solution;
        its makespan also bounds the horizon.
    groups : iterable of sequences of ops, optional
        Ops that must share a device and run in the given order (coarsening that keeps a
        schedule expressible). The bound is then the grouped problem's only
        (``stats["bound_valid"]`` False).
    symmetry : bool
        With interchangeable devices, the ``j``-th placement unit may use devices ``0..j``.
    seed : int, optional
        CP-SAT's random seed (default 0).
    horizon : float, optional
        An upper bound of the makespan in ms (default: the hint's, else a serial schedule).
    fifo_links : bool
        Direct links serve transfers in the order their producers run on the source device,
        as the simulator's FIFO channels do: pairwise constraints between each transfer and
        its next ones on the link in the hint's order, about ``fifo_links_max`` pairs in all
        (``stats["fifo_pairs"]``).
    fuse : bool
        With ``groups`` and a ``hint``: the runs of a group that the hint executes back to back
        (no idle time between them, every input from another device already there when the
        run starts) become one interval per device, their ops at fixed offsets in it
        (``stats["fused_runs"]``). The hint stays a solution; the model gets far smaller.
    parameters : dict, optional
        Further CP-SAT parameters by name (e.g. ``{"use_lns_only": True}``).

    Returns
    -------
    CpsatResult

    Raises
    ------
    BuildTimeout
        (:class:`~workbench.errors.TimeLimitError`) The build share ended while the model
        was being built.
    InfeasibleError
        An op no device can run, or CP-SAT proves that memory, colocation and affinity cannot
        be met together.
    SolverError
        OR-Tools is not installed, or ``groups`` names unknown ops.
    """
    budget = Budget.of(time_limit, name="cpsat")
    model = CpsatModel(graph, cluster, congestion=congestion, hint=hint, groups=groups,
                       symmetry=symmetry, horizon=horizon, fifo_links=fifo_links,
                       fifo_links_max=fifo_links_max, fuse=fuse,
                       budget=budget.share("cpsat.build"))
    model.add_hint()
    return model.solve(workers=workers, seed=seed, parameters=parameters, time_limit=budget)
