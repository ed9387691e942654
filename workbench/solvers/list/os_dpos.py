"""FastT's OS-DPOS (Algorithm 2): DPOS plus operation splitting along the critical path.

The input graph is FastT's: when a replica with its share of the batch fits on every device
(and the batch has a sample for every device), the data-parallel graph with one replica per device, each on ``1/R`` of the batch,
and a ring all-reduce of every variable's gradient
(:func:`workbench.transforms.data_parallel.data_parallel_graph`); else the model itself. Graphs
with shapes but no split dimensions (extracted, ONNX, the bundled samples) get them first
(:func:`workbench.transforms.split_dims.with_split_dims`).

Algorithm 2 then runs from DPOS's plan of that graph (``dpos_dp``, or ``dpos_model`` when the
model is the input); DPOS's plan of the model is also kept as an unsplit candidate when the
data-parallel graph is the input (an extension kept from earlier versions; not with
``data_parallel=True``), and ``search="all"`` runs Algorithm 2 from it too: the critical path of the plan (the realised chain of the simulator with
congestion off) sorted by decreasing compute time; for each of its ops that can be split, every
splittable dimension and every ``n = 2..#devices`` (:func:`workbench.transforms.split.split_op`),
the split graph placed by DPOS given the current strategy (line 8, :func:`dpos_given`); the best
split is kept if it lowers the predicted finish time of the exit op, and the search stops at the
first op whose best split does not. Last, FastT's rollback rule (Section 4: a new strategy is
kept only when its measured step beats the running one, data parallelism first): the plan
returned is the fastest, as the simulator measures it (congestion on), of pure data
parallelism, the model on one device (FastT's other starting strategy) and each start with
and without its splits. ``info["start"]`` names the start,
``info["starts"]`` gives each start's measured step without and with its splits.

Gradient aggregation runs on the links (a ring over the devices that hold a variable's
replicas, free when they share one; :func:`~workbench.transforms.data_parallel.ring_over_devices`):
every DPOS plan of a data-parallel graph is returned on the graph whose rings match its
placement (:func:`~workbench.solvers.list.data_parallel.ring_plan`). *Replica co-location*
(``colocate=True``, an extension, off by default: :func:`colocate_replicas`) adds FastT's Fig. 4 strategy as a
candidate: the pure data-parallel plan with the replicas of parameter-heavy ops gathered on one
device wherever the simulator measures it faster (start ``"dp_colocated"``).

The plan refers to the transformed graph; ``info["splits"]`` lists ``(op, dim, n)`` decisions
and ``info["data_parallel"]`` the number of replicas (ops ``v@r`` are replica ``r`` of ``v``).

Examples
--------
>>> from workbench import samples, Cluster, solve, simulate
>>> g, c = samples.cnn(40), Cluster.preset("2xV100-pcie")
>>> plan = solve(g, c, method="os_dpos")
>>> plan.info["data_parallel"], plan.predicted["makespan_ms"] <= solve(g, c, method="dpos").predicted["makespan_ms"]
(2, True)
>>> plan.predicted["makespan_ms"] == simulate(plan, c, congestion=False, order="plan").makespan
True
"""

from __future__ import annotations


from ...analysis import levels
from ...budget import Budget
from ...errors import InfeasibleError, SolverError, TimeLimitError
from ...plan import Plan
from ...simulate import simulate
from ...transforms.split import split_op
from ..params import Param
from ..registry import register
from ...transforms.data_parallel import variables
from .data_parallel import batch_of, dp_plan, ensure_split_dims, fifo_plan, ring_plan
from .scheduling import LIST_S_PER_OP, ListCore, dpos, static_list_schedule

__all__ = ["colocate_replicas", "dpos_given", "os_dpos", "replica_units"]

DP_S_PER_OP = 1e-4
"""Seconds the data-parallel start is expected to take per op and replica (building the
replicated graph and its plan: measured 1.86 s CPU for ``samples.transformer(20000)`` on two
devices, 47 us, with margin). Under a time limit the data-parallel start is taken only when
this estimate fits in half of what is left (``info["dp_skipped"]`` says when it did not)."""


def dpos_given(graph, cluster, placement: dict) -> Plan:
    """DPOS given a strategy (FastT Algorithm 2, line 8: ``DPOS(G', D, C, C, S)``): ops named
    in ``placement`` keep their device (unless it has no room left for them), the others --
    the sub-ops, split and concatenate nodes of a split -- go where they finish earliest; ops
    are taken in decreasing upward rank as in :func:`dpos`, with insertion into idle slots.

    >>> from workbench import samples, Cluster
    >>> from workbench.transforms.split import split_op
    >>> g, c = samples.cnn(20), Cluster.preset("2xV100-pcie")
    >>> p = dpos(g, c)
    >>> q = dpos_given(split_op(g, "stem", "batch", 2), c, p.placement)
    >>> all(q.placement[v] == d for v, d in p.placement.items() if v != "stem")
    True
    """
    core = ListCore(graph, cluster, memory=True)
    lv = levels(graph, cluster, agg="max")
    fixed = [-1] * graph.n_ops
    where = {n: d for d, n in enumerate(cluster.names)}
    for v, d in placement.items():
        if v in graph.index:
            fixed[graph.index[v]] = where[d]

    def choose(core, i: int) -> int:
        d = fixed[i]
        return d if d >= 0 and d in core.allowed(i) else -1

    static_list_schedule(core, lv.blevel, choose=choose)
    return core.plan("os_dpos", info={"given": True})


def replica_units(graph) -> list:
    """FastT's Fig. 4 units of a model with update ops: per variable ``(bytes / ms, bytes,
    ops, variable)``, ``ops`` its colocation group, the ops that read its weights (a
    batch-free edge out of the group) and the ops that produce its gradient, by decreasing bytes per ms of their
    compute (parameter-heavy, compute-light first).

    >>> from workbench import samples
    >>> g = samples.to_training(samples.cnn(12), update=True)
    >>> u = replica_units(g)
    >>> [x[3] for x in u[:2]], u[0][0] >= u[-1][0]
    (['cc:logits', 'cc:stem'], True)
    """
    nodes = graph.nx.nodes
    groups = graph.colocation_groups
    out = []
    for key, (nbytes, edges) in variables(graph).items():
        members = set(groups.get(key, []))
        ops = set(members) | {u for u, _ in edges}
        for m in members:
            ops |= {x for x in graph.successors(m) if x not in members
                    and not graph.edge(m, x).get("batch", nodes[x]["kind"] != "update")}
        comp = sum(min(nodes[x]["compute"].values(), default=0.0) for x in ops)
        out.append((nbytes / max(comp, 1e-9), float(nbytes), sorted(ops), key))
    out.sort(key=lambda t: (-t[0], t[3]))
    return out


def colocate_replicas(p_dp: Plan, graph, cluster, *, patience: int = 3,
                      time_limit: float | Budget | None = None) -> tuple:
    """*Replica co-location* (an extension of OS-DPOS; FastT's Fig. 4 as a measured search):
    from the pure data-parallel plan ``p_dp`` of ``graph``, the replicas of each unit of
    :func:`replica_units` (parameter-heavy, compute-light first) move together to one device,
    devices taken in turn, their all-reduce ring redrawn over the devices that now hold them
    (free on one) and the plan re-ordered by a FIFO simulation; a move is kept when the
    simulator (congestion on) measures a faster step and every device still holds its ops
    (FastT's rollback rule), and the search stops after ``patience`` rejected moves in a row
    or when ``time_limit`` (seconds or a :class:`~workbench.budget.Budget`) is spent.
    Returns ``(plan, measured ms, variables moved)``."""
    from ...simulate import simulate

    budget = Budget.of(time_limit, name="os_dpos: replica co-location")
    h, nd = p_dp.graph, int(p_dp.info["replicas"])
    names = [cluster.names[i] for i in range(len(cluster))
             if cluster.names[i] in set(p_dp.placement.values())]
    caps = {d.name: d.memory for d in cluster.devices}
    mem = {v: h.nx.nodes[v]["memory"] for v in h.ops}
    best, best_ms = p_dp, float(simulate(p_dp, cluster).makespan)
    moved: list = []
    misses = 0
    for _, _, ops, key in replica_units(graph):
        if misses >= patience or budget.over():
            break
        d = names[len(moved) % len(names)]
        trial = dict(best.placement)
        ring = [f"allreduce:{key}{part}@{r}" for part in ("", "/done") for r in range(nd)]
        for v in [f"{o}@{r}" for o in ops for r in range(nd)] + ring:
            if v in trial:
                trial[v] = d
        used = {x: 0.0 for x in caps}
        for v, x in trial.items():
            used[x] += mem[v]
        if any(used[x] > caps[x] for x in used):
            misses += 1
            continue
        q = fifo_plan(h, trial, cluster, best.method)
        ms = float(simulate(q, cluster).makespan)
        if ms < best_ms:
            q.info.update(best.info)
            best, best_ms, misses = q, ms, 0
            moved.append(key)
        else:
            misses += 1
    return best, best_ms, moved


def _single_device(graph, cluster) -> Plan | None:
    """The model on its fastest device that holds it, in DPOS's (upward-rank) order: FastT's
    starting strategy when the model fits one GPU (Section 4), kept by the rollback so the
    returned plan is never slower than it under the simulator; None when no device holds it."""
    need = graph.total_memory()
    for d in sorted(cluster.devices, key=lambda d: (-d.speed, cluster.index[d.name])):
        if d.memory < need * (1 + 1e-12):
            continue
        try:
            p = dpos(graph, cluster.with_devices([d]))
        except InfeasibleError:  # an op its kind cannot run
            continue
        return p.with_placement(p.placement, order=p.order, method="os_dpos",
                                predicted=dict(p.predicted), info={"start": "single"})
    return None


def _split_search(best: Plan, cluster, *, max_split_ops, resched: str, budget: Budget,
                  progress) -> tuple:
    """Algorithm 2 lines 4-14 from the DPOS plan ``best``: the critical ops by decreasing
    compute, each split along every dimension into ``2..#devices`` parts and re-placed; the
    best split is kept if it lowers the predicted finish time, else the search stops.
    Returns (plan, splits, candidates tried, status)."""
    g, nd = best.graph, len(cluster)
    ft_old = best.predicted["makespan_ms"]
    sched = simulate(best, cluster, congestion=False, order="plan")
    times = cluster.op_times(g)
    dev = best.device_array(cluster)
    cp = sched.critical_ops()
    cp.sort(key=lambda v: (-times[g.index[v], dev[g.index[v]]], g.index[v]))
    splits: list = []
    tried = examined = 0
    status = "heuristic"
    last = 0.0                   # seconds the last candidate took: one more must fit
    for op in cp:
        dims = {d: s for d, s in (g.nx.nodes[op].get("splits") or {}).items() if s >= 2}
        if not dims:
            continue
        if max_split_ops is not None and examined >= max_split_ops:
            break
        examined += 1
        cand = None
        for dim, size in dims.items():
            for n in range(2, min(nd, size) + 1):
                if budget.over() or budget.left() < last:
                    status = "time_limit"
                    break
                t0 = budget.clock()
                g2 = split_op(g, op, dim, n)
                for how in (("given", "fresh") if resched == "both" else (resched,)):
                    try:
                        p2 = ring_plan(dpos(g2, cluster) if how == "fresh" else
                                       dpos_given(g2, cluster, best.placement), cluster)
                    except InfeasibleError:
                        continue
                    tried += 1
                    last = budget.clock() - t0
                    ft = p2.predicted["makespan_ms"]
                    if cand is None or ft < cand[0]:
                        cand = (ft, dim, n, g2, p2)
        if progress is not None:
            progress(examined / max(1, len(cp)))
        if cand is None or cand[0] >= ft_old:
            break
        ft_old, dim, n, g, best = cand
        splits.append((op, dim, n))
        if status == "time_limit":
            break
    return best, splits, tried, status


@register("os_dpos", family="list", paper="FastT (Middleware'20), Algorithm 2", memory=True,
          orders=True, contract_params={"max_split_ops": 1},
          params={"resched": Param(("str",), choices=("given", "fresh", "both")),
                  "search": Param(("str",), choices=("paper", "all")),
                  "colocate": Param(("bool",)),
                  "aggregation": Param(("str",), choices=("links", "device"))},
          description="FastT OS-DPOS: DPOS on the data-parallel graph, then split critical ops")
def os_dpos(graph, cluster, *, data_parallel: bool | None = None,
            max_split_ops: int | None = None, resched: str = "given", search: str = "paper",
            colocate: bool = False, aggregation: str = "links",
            time_limit: float | Budget | None = None,
            progress=None) -> Plan:
    """FastT's Operation-Splitting DPOS.

    Parameters
    ----------
    data_parallel : bool or None
        ``True``: start from the data-parallel graph (one replica per device); ``False``: from
        the model itself. ``None`` (default): as FastT, data parallel when the model fits on one
        device (and its ops say which dimension is the batch), but, as FastT's strategy
        calculator only activates a faster strategy, the model-parallel start is kept when DPOS
        finds it faster.
    max_split_ops : int or None
        Examine at most this many critical-path ops (None: all, as in the paper).
    resched : {"given", "fresh", "both"}
        How a split graph is placed: ``given`` (Algorithm 2 line 8, ``DPOS(G', ..., S)``): the
        ops of the current strategy ``S`` keep their devices and DPOS places the sub-ops,
        split and concatenate nodes (:func:`dpos_given`); ``fresh``: DPOS from scratch (what
        this method did before); ``both``: the faster of the two (an extension).
    search : {"paper", "all"}
        ``paper``: Algorithm 2 runs from its one input graph (the data-parallel graph when a
        replica fits, else the model); DPOS on the model is then an unsplit candidate of the
        rollback only. ``all`` (an extension, slower): Algorithm 2 from both starts.
    colocate : bool
        *Replica co-location* (an extension, default off; :func:`colocate_replicas`): the
        data-parallel plan with the replicas of parameter-heavy, compute-light variables
        moved together onto one device (FastT's Fig. 4; their all-reduce then runs on fewer
        devices, free on one) while the simulator measures each move faster, as one more
        candidate of the rollback (start ``"dp_colocated"``). ``False`` (default): Algorithm 2
        and the paper's rollback only.
    aggregation : {"links", "device"}
        How the data-parallel graph charges gradient aggregation (see
        :func:`~workbench.transforms.data_parallel.data_parallel_graph`; ``"device"`` is the
        model before the ring moved to the links).
    time_limit : float, Budget or None
        Seconds (or the caller's :class:`~workbench.budget.Budget`); when spent, the best plan
        so far is returned with status ``time_limit``: the data-parallel start is skipped when
        it is not expected to fit in half of the limit (:data:`DP_S_PER_OP`), the other starts
        and the split search are not begun once the limit is spent, and no split candidate
        is begun with less time left than the last one took.

    Raises
    ------
    InfeasibleError
        When even the starting graph cannot be placed (see :func:`dpos`).
    TimeLimitError
        When the limit is shorter than one DPOS pass over the graph is expected to take
        (:data:`~workbench.solvers.list.scheduling.LIST_S_PER_OP` an op).
    """
    if search not in ("paper", "all"):
        raise SolverError(f"os_dpos: search must be 'paper' or 'all', got {search!r}")
    if resched not in ("given", "fresh", "both"):
        raise SolverError(f"os_dpos: resched must be 'given', 'fresh' or 'both', got "
                          f"{resched!r}")
    budget = Budget.of(time_limit, name="os_dpos")
    nd = len(cluster)
    if budget.deadline is not None and LIST_S_PER_OP * graph.n_ops > budget.left():
        raise TimeLimitError(
            f"os_dpos: one DPOS pass over a {graph.n_ops:,}-op graph takes about "
            f"{LIST_S_PER_OP * graph.n_ops:.3g} s, more than the {budget.left():.3g} s left of "
            f"the time limit; give at least that")
    graph = ensure_split_dims(graph)
    starts: list = []        # (start name, DPOS plan it begins from)
    p_dp = None
    b = batch_of(graph)
    dp_time = budget.deadline is None or data_parallel \
        or DP_S_PER_OP * graph.n_ops * nd <= 0.5 * budget.left()
    # FastT starts data parallel "as long as the model can be fit into a GPU": here, as long
    # as a replica with its share of the batch fits (dp_plan checks each device)
    if data_parallel is not False and nd > 1 and (data_parallel or (b is not None and b >= nd
                                                                    and dp_time)):
        try:
            p_dp = dp_plan(graph, cluster, list(range(nd)), method="os_dpos",
                           aggregation=aggregation)
            starts.append(("dpos_dp", ring_plan(dpos(p_dp.graph, cluster), cluster)))
        except InfeasibleError:
            if data_parallel:
                raise
            p_dp = None
    if not data_parallel and not (starts and budget.over()):
        starts.append(("dpos_model", dpos(graph, cluster)))
    one = _single_device(graph, cluster) if not budget.over() else None
    # Algorithm 2 from each start, then FastT's rollback rule: the strategy calculator keeps
    # a new strategy only when its measured step beats the running one (data parallelism
    # first): the simulator (congestion on) measures here
    found: list = []         # (measured ms, order, start, plan, splits, tried, status)
    report: dict = {}
    tried_total = 0
    if one is not None:  # the paper's other starting point: the model on one device
        ms = simulate(one, cluster).makespan
        found.append((ms, -1, "single", one, [], 0, "heuristic"))
        report["single"] = {"no_split_ms": ms, "device": one.devices_used()[0]}
    if p_dp is not None and not (found and budget.over()):
        ms = simulate(p_dp, cluster).makespan
        found.append((ms, 0, "data_parallel", p_dp, [], 0, "heuristic"))
        report["data_parallel"] = {"no_split_ms": ms}
        if colocate:
            p_c, ms_c, moved = colocate_replicas(p_dp, graph, cluster, time_limit=budget)
            report["dp_colocated"] = {"no_split_ms": ms_c, "colocated": moved}
            if moved:
                found.append((ms_c, 0.5, "dp_colocated", p_c, [], 0, "heuristic"))
    for k, (start, plan) in enumerate(starts, start=1):
        if found and budget.over():
            report[start] = {"skipped": "time limit"}
            continue
        no_split = simulate(plan, cluster).makespan
        if search == "paper" and k > 1:   # the model start: an unsplit candidate only
            report[start] = {"no_split_ms": no_split}
            found.append((no_split, k, start, plan, [], 0, "heuristic"))
            continue
        plan2, splits, tried, status = _split_search(
            plan, cluster, max_split_ops=max_split_ops, resched=resched, budget=budget,
            progress=progress)
        ms = simulate(plan2, cluster).makespan if splits else no_split
        report[start] = {"no_split_ms": no_split, "split_ms": ms, "splits": splits}
        tried_total += tried
        found.append((no_split, k, start, plan, [], tried, status))
        if splits:
            found.append((ms, k, start, plan2, splits, tried, status))
    ms, _, start, best, splits, _, _ = min(found, key=lambda x: (x[0], x[1]))
    status = "time_limit" if any(x[6] == "time_limit" for x in found) \
        or any(r.get("skipped") for r in report.values()) else "heuristic"
    if not dp_time and data_parallel is None and b is not None and b >= nd > 1:
        best.info["dp_skipped"] = (f"time limit: the data-parallel start is expected to take "
                                   f"{DP_S_PER_OP * graph.n_ops * nd:.3g} s")
    best.info.update(splits=splits,
                     data_parallel=1 if start in ("dpos_model", "single") else nd,
                     split_candidates=tried_total, start=start, starts=report)
    best.status = status
    best.method = "os_dpos"
    return best
