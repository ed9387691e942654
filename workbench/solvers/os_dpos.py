"""FastT's OS-DPOS (Algorithm 2): DPOS plus operation splitting along the critical path.

The input graph is FastT's: when the model fits on one device (and its batch has a sample for
every device), the data-parallel graph with one replica per device, each on ``1/R`` of the batch,
and a ring all-reduce of every variable's gradient
(:func:`workbench.transforms.data_parallel.data_parallel_graph`), else the model itself. Graphs
with shapes but no split dimensions (extracted, ONNX, the bundled samples) get them first
(:func:`workbench.transforms.split_dims.with_split_dims`). DPOS places it; as FastT's strategy
calculator activates a strategy only when it is faster than the running one, the start is the
fastest of pure data parallelism, DPOS on the data-parallel graph and DPOS on the model
(``info["start"]``: ``data_parallel``, ``dpos_dp`` or ``dpos_model``). Then the critical path of that schedule (the realised chain
of the simulator with congestion off) is sorted by decreasing compute time; for each of its ops
that can be split, every splittable dimension and every ``n = 2..#devices`` is tried
(:func:`workbench.transforms.split.split_op`, then DPOS); the best split is kept if it lowers
the finish time of the exit op, and the search stops at the first op whose best split does not.

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

import time

from ..errors import InfeasibleError
from ..plan import Plan
from ..simulate import simulate
from ..transforms.split import split_op
from . import register
from .data_parallel import batch_of, dp_plan, ensure_split_dims
from .list_scheduling import dpos

__all__ = ["model_fits_one_device", "os_dpos"]


def model_fits_one_device(graph, cluster) -> bool:
    """True when some device can hold the whole model (FastT then starts data parallel)."""
    return graph.total_memory() <= max(d.memory for d in cluster.devices)


@register("os_dpos", family="list", paper="FastT (Middleware'20), Algorithm 2", memory=True,
          orders=True, contract_params={"max_split_ops": 1},
          description="FastT OS-DPOS: DPOS on the data-parallel graph, then split critical ops")
def os_dpos(graph, cluster, *, data_parallel: bool | None = None,
            max_split_ops: int | None = None, time_limit: float | None = None,
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
    time_limit : float or None
        Seconds; when exceeded, the best plan so far is returned with status ``time_limit``.

    Raises
    ------
    InfeasibleError
        When even the starting graph cannot be placed (see :func:`dpos`).
    """
    t0 = time.perf_counter()
    nd = len(cluster)
    graph = ensure_split_dims(graph)
    best, g, start = None, graph, "dpos_model"
    b = batch_of(graph)
    if data_parallel is not False and nd > 1 and model_fits_one_device(graph, cluster) \
            and (data_parallel or (b is not None and b >= nd)):
        try:
            p_dp = dp_plan(graph, cluster, list(range(nd)), method="os_dpos")
            p_dpos = dpos(p_dp.graph, cluster)
        except InfeasibleError:
            if data_parallel:
                raise
        else:
            # FastT starts from data parallelism and activates a strategy only when it is
            # faster than the running one: DPOS on the data-parallel graph, else keep DP
            best, g, start = p_dpos, p_dp.graph, "dpos_dp"
            if p_dp.predicted["makespan_ms"] < p_dpos.predicted["makespan_ms"]:
                best, start = p_dp, "data_parallel"
    if not data_parallel:
        # with the automatic choice, keep the model-parallel start when DPOS does better on it
        p_model = dpos(graph, cluster)
        if best is None or p_model.predicted["makespan_ms"] < best.predicted["makespan_ms"]:
            best, g, start = p_model, graph, "dpos_model"
    is_dp = g is not graph
    ft_old = best.predicted["makespan_ms"]
    sched = simulate(best, cluster, congestion=False, order="plan")
    times = cluster.op_times(g)
    dev = best.device_array(cluster)
    cp = sched.critical_ops()
    cp.sort(key=lambda v: (-times[g.index[v], dev[g.index[v]]], g.index[v]))
    splits: list = []
    tried = 0
    examined = 0
    status = "heuristic"
    for op in cp:
        attrs = g.op(op)
        dims = {d: s for d, s in (attrs.get("splits") or {}).items() if s >= 2}
        if not dims:
            continue
        if max_split_ops is not None and examined >= max_split_ops:
            break
        examined += 1
        cand = None
        for dim, size in dims.items():
            for n in range(2, min(nd, size) + 1):
                if time_limit is not None and time.perf_counter() - t0 > time_limit:
                    status = "time_limit"
                    break
                g2 = split_op(g, op, dim, n)
                try:
                    p2 = dpos(g2, cluster)
                except InfeasibleError:
                    continue
                tried += 1
                ft = p2.predicted["makespan_ms"]
                if cand is None or ft < cand[0]:
                    cand = (ft, dim, n, g2, p2)
        if progress is not None:
            progress(examined / max(1, len(cp)))
        if cand is not None and cand[0] < ft_old:
            ft_old, dim, n, g, best = cand
            splits.append((op, dim, n))
        else:
            break
        if status == "time_limit":
            break
    best.info.update(splits=splits, data_parallel=nd if is_dp else 1,
                     split_candidates=tried, start=start)
    best.status = status
    best.method = "os_dpos"
    return best
