"""Can I trust the winner? Rankings of a comparison's plans under cost uncertainty.

:func:`robustness` draws ``samples`` perturbed cost models (op compute per device kind, link
bandwidth and latency), **replays every method's plan** under each draw with its placement and
its per-device order fixed, and reports per method the makespan (and max-load) distribution, the
probability that it is the best, its expected rank and how stable the nominal ranking is
(Kendall tau), plus pairwise "A beats B in x % of draws" with Wilson confidence intervals.

Replay
------
A plan whose placement, per-device op order and per-link transfer order are fixed is a DAG of
events: ops (each after its inputs and after the previous op of its device) and transfers (each
after its producer -- or, in host mode, the upload it downloads -- and, with congestion, after
the previous transfer of its channel, in the FIFO order the judge gave them on the nominal
costs). Its makespan under any costs is the longest path, computed for all draws at once by a
compiled loop (:mod:`workbench.judge._replay_jit`). On the nominal costs it equals
:func:`workbench.simulate` *exactly* (every op's and transfer's end, checked when the replay is
built). Under a draw it is the plan as deployed: the orders the plan (or, for a plan without
one, the judge's FIFO on the nominal costs) fixed are kept, as an executor that follows a
plan's order would keep them; it is not a re-simulation with FIFO re-ordering.

Noise models
------------
A spread ``r`` is a log-normal factor with median 1: ``exp(N(0, ln(1 + r)^2))``, so one
standard deviation multiplies or divides a cost by ``1 + r``. Keys of a noise dict:

``compute``
    spread of each op's compute time, one factor per op and device kind (independent) or,
    with ``correlated=True``, one per device kind (all ops of a kind scaled together);
``kind``
    an extra factor per device kind on top (a device kind's speed as a whole);
``family``
    an extra factor per op family (the ops' ``op_type``: every MatMul scaled together, every
    Conv2D together; one per family and device kind), 0 in the presets;
``bandwidth``, ``latency``
    spread of each link's inverse bandwidth and latency, one factor per channel (a directed
    link, or a device's host channel in host mode), or one for all with ``correlated=True``;
    an edge's fixed ``comm`` time is scaled by the bandwidth factor;
``correlated``
    bool, default False.

Receive overheads (``Device.recv_overhead``) are kept nominal.

Presets (:data:`NOISE_PRESETS`):

``"profiled"``
    per-op spread from the op attribute ``compute_std`` (``{kind: ms}``, the standard
    deviation of repeated profiles) where a graph records it, else **10 %** per op (the median
    run-to-run error of the simulator against measured steps on this machine, 9.4 %,
    ``docs/runtime.md``); 10 % per device kind (single-device plans measured 10-25 % slower
    than profiled minutes apart, ``docs/runtime.md``); 10 % per link bandwidth and latency
    (calibrated links, same source). ``compute_std`` is written at profiling time by
    :func:`workbench.runtime.profile` (spread over its traced steps) and
    :func:`workbench.io.torch.from_torch` with ``profile="cpu"``/``"gpu"`` (over its
    ``repeats``); graphs with fewer than two samples per op, or not profiled, get the default.
``"roofline"``
    from the error table of ``bench/cost_model.py`` (``docs/workloads.md``): per op the
    time-weighted median error is 71.4 % and per step the median ``|error|`` is 61 %; read as
    log-normal medians (median ``|log f|`` = 0.674 sigma) that is sigma 0.80 per op and 0.71
    per device kind (spreads 1.22 and 1.03); links 20 % (datasheet links, not measured).

Examples
--------
>>> import workbench as wb
>>> g, c = wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie")
>>> cmp = wb.compare(g, c, methods=["single", "m_topo"], progress=False)
>>> r = robustness(cmp, noise={"compute": 0.0}, samples=20)
>>> r.table.set_index("method")["p_best"].to_dict()
{'m_topo': 1.0, 'single': 0.0}
>>> r.verdict.startswith("m_topo wins")
True
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .errors import PlanError, SolverError

__all__ = [
    "NOISE_KEYS",
    "NOISE_PRESETS",
    "VERDICT_THRESHOLD",
    "Replay",
    "Robustness",
    "build_replay",
    "resolve_noise",
    "robustness",
    "wilson_interval",
]

NOISE_KEYS = ("compute", "kind", "family", "bandwidth", "latency", "correlated")
NOISE_PRESETS = {
    "profiled": {"compute": 0.10, "kind": 0.10, "bandwidth": 0.10, "latency": 0.10,
                 "correlated": False},
    "roofline": {"compute": round(math.expm1(math.log(1.714) / 0.6745), 2),
                 "kind": round(math.expm1(math.log(1.61) / 0.6745), 2),
                 "bandwidth": 0.20, "latency": 0.20, "correlated": False},
}
"""The named noise models (spreads, see the module docstring)."""
VERDICT_THRESHOLD = 0.8
"""The nominal winner must be the best in at least this share of draws to be called robust."""
_TIE = 1e-12  # relative: makespans this close are a tie


def resolve_noise(noise) -> dict:
    """A noise name or dict as a full dict of :data:`NOISE_KEYS` (missing spreads are 0).

    >>> resolve_noise({"compute": 0.2})["bandwidth"], resolve_noise("roofline")["compute"]
    (0.0, 1.22)
    >>> resolve_noise({"cpu": 1})
    Traceback (most recent call last):
    ...
    workbench.errors.SolverError: robustness: unknown noise key 'cpu'; keys are compute, kind, family, bandwidth, latency, correlated
    """
    if isinstance(noise, str):
        if noise not in NOISE_PRESETS:
            raise SolverError(f"robustness: unknown noise model {noise!r}; use "
                              f"{', '.join(map(repr, NOISE_PRESETS))} or a dict")
        out = dict(NOISE_PRESETS[noise])
        out["preset"] = noise
        return out
    if not isinstance(noise, dict):
        raise SolverError(f"robustness: noise must be a preset name or a dict, got "
                          f"{type(noise).__name__}")
    out = {"compute": 0.0, "kind": 0.0, "family": 0.0, "bandwidth": 0.0, "latency": 0.0,
           "correlated": False, "preset": None}
    for k, v in noise.items():
        if k not in NOISE_KEYS:
            raise SolverError(f"robustness: unknown noise key {k!r}; keys are "
                              f"{', '.join(NOISE_KEYS)}")
        if k == "correlated":
            if not isinstance(v, (bool, np.bool_)):
                raise SolverError(f"robustness: noise['correlated'] must be True or False, "
                                  f"got {v!r}")
            out[k] = bool(v)
            continue
        if isinstance(v, (bool, str)) or not isinstance(v, (int, float, np.floating)) or \
                not math.isfinite(v) or v < 0:
            raise SolverError(f"robustness: noise[{k!r}] must be a finite spread >= 0 (0.1 = "
                              f"10 %), got {v!r}")
        out[k] = float(v)
    return out


def wilson_interval(wins, n: int, z: float = 1.96) -> tuple:
    """Wilson score interval of a proportion ``wins / n`` (``wins`` may count ties as halves).

    >>> [round(x, 4) for x in wilson_interval(8, 10)]
    [0.4902, 0.9433]
    >>> wilson_interval(0, 0)
    (nan, nan)
    """
    if n <= 0:
        return (math.nan, math.nan)
    p = wins / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(max(p * (1 - p) / n + z * z / (4 * n * n), 0.0)) / den
    return (max(0.0, mid - half), min(1.0, mid + half))


# ---------------------------------------------------------------------- the event graph
@dataclass
class Replay:
    """A plan's schedule as an event DAG (ops ``0..n_ops-1``, then transfers), ready to be
    replayed under many cost draws; build it with :func:`build_replay`.

    Op ``i`` lasts ``op_base[i] * f + op_recv[i]`` (``f`` its compute factor), transfer ``k``
    ``(t_lat[k] * lat_f + t_nbinv[k] * bw_f) * t_f[k]`` on channel ``t_chan[k]``.
    """

    method: str
    n_ops: int
    order: np.ndarray
    indptr: np.ndarray
    preds: np.ndarray
    op_base: np.ndarray
    op_recv: np.ndarray
    op_kind: np.ndarray            # graph kind index of each op's device
    t_lat: np.ndarray
    t_nbinv: np.ndarray
    t_f: np.ndarray
    t_chan: np.ndarray
    n_channels: int
    schedule: object = field(repr=False)
    plan: object = field(repr=False)
    load_terms: list = field(default_factory=list, repr=False)

    @property
    def n_nodes(self) -> int:
        return len(self.indptr) - 1

    def durations(self, op_f: np.ndarray, lat_f: np.ndarray, bw_f: np.ndarray) -> np.ndarray:
        """``(draws, nodes)`` durations; ``op_f`` is ``(draws, n_ops)``, ``lat_f``/``bw_f``
        ``(draws, n_channels)``."""
        ops = self.op_base[None, :] * op_f + self.op_recv[None, :]
        if not len(self.t_chan):
            return np.ascontiguousarray(ops)
        tr = (self.t_lat[None, :] * lat_f[:, self.t_chan]
              + self.t_nbinv[None, :] * bw_f[:, self.t_chan]) * self.t_f[None, :]
        return np.ascontiguousarray(np.concatenate([ops, tr], axis=1))

    def run(self, dur: np.ndarray) -> tuple:
        """Makespan per draw and the node ends of the last draw (see :func:`replay`)."""
        from .judge._replay_jit import replay

        return replay(self.order, self.indptr, self.preds, dur, self.n_ops)

    def makespans(self, op_f, lat_f, bw_f) -> np.ndarray:
        """Makespan of the plan under each draw."""
        return self.run(self.durations(op_f, lat_f, bw_f))[0]

    def max_loads(self, op_f, lat_f, bw_f) -> np.ndarray:
        """Pipelined max-load (:func:`workbench.device_loads`) of the plan under each draw."""
        nd = self.plan_devices
        dev = self.schedule.device
        comp = self.op_base[None, :] * op_f
        load = np.zeros((comp.shape[0], nd))
        for d in range(nd):
            on = dev == d
            if on.any():
                load[:, d] = comp[:, on].sum(axis=1)
        for lat, nbinv, f, chan, starts, charge in self.load_terms:
            cost = (lat[None, :] * lat_f[:, chan] + nbinv[None, :] * bw_f[:, chan]) * f[None, :]
            gmax = np.maximum.reduceat(cost, starts, axis=1)
            for d in np.unique(charge).tolist():
                load[:, d] += gmax[:, charge == d].sum(axis=1)
        return load.max(axis=1) if nd else np.zeros(comp.shape[0])

    @property
    def plan_devices(self) -> int:
        return self.schedule.cluster.c.n


def _transfers(plan, cluster, dev: list) -> tuple:
    """Transfers as :func:`workbench.simulate` creates them, in its creation order per op, and
    each op's data predecessors (op indices, or ``n + k`` for transfer ``k``)."""
    from .costs.pipeline_costs import op_shares

    g = plan.graph
    gc, cc = g.c, cluster.c
    n, nd = gc.n, cc.n
    dst_l, bytes_l = gc.dst.tolist(), gc.bytes.tolist()
    comm_l = [None if math.isnan(c) else c for c in gc.comm.tolist()]
    host_mode, staged = cc.host_mode, cc.staged.tolist()
    shares = op_shares(g)
    share = [1.0] * n if shares is None else shares.tolist()
    if host_mode:
        up_lat, up_inv = cc.up_lat.tolist(), cc.up_inv_bw.tolist()
    else:
        lat, inv = cc.lat.tolist(), cc.inv_bw.tolist()
    data: list = [[] for _ in range(n)]
    tr: list = []  # (u, src, dst, chan, lat, nbinv, f, bytes, pred)

    def add(u, a, b, chan, lt, nbinv, f, nbytes, pred) -> int:
        tr.append((u, a, b, chan, lt, nbinv, f, nbytes, pred))
        return n + len(tr) - 1

    def stage_out(u, by_dev, nb, c, node) -> None:
        for b, consumers in by_dev.items():
            if staged[b]:
                f = share[u] * max(share[v] for v in consumers)
                lt, nbi = (0.0, c) if c is not None else (up_lat[b], nb * up_inv[b])
                k = add(u, -1, b, nd + b, lt, nbi, f, nb * f, node)
                for v in consumers:
                    data[v].append(k)
            else:
                for v in consumers:
                    data[v].append(node)

    from .costs.pipeline_costs import next_hops, plan_chain

    chain = None if host_mode else plan_chain(plan, cluster)
    if chain is not None:  # forwarded along the stages, as the judge sends them
        chain = chain.tolist()
        pos = {d: i for i, d in enumerate(chain)}

    def forward_out(u, a, by_dev, nb, c, node) -> None:
        for b, part, f in next_hops(by_dev, pos, chain, a, share, u):
            lt, nbi = (0.0, c) if c is not None else (lat[a][b], nb * inv[a][b])
            k = add(u, a, b, a * nd + b, lt, nbi, f, nb * f, node)
            for v in part.pop(b, ()):
                data[v].append(k)
            if part:
                forward_out(u, b, part, nb, c, k)

    for u in range(n):
        a = dev[u]
        groups: dict = {}
        for e in gc.out_edges[u]:
            v = dst_l[e]
            b = dev[v]
            if b == a:
                data[v].append(u)
            elif host_mode or chain is not None:
                groups.setdefault((bytes_l[e], comm_l[e]), {}).setdefault(b, []).append(v)
            else:
                groups.setdefault((b, bytes_l[e], comm_l[e]), []).append(v)
        if host_mode:
            su = share[u]
            for (nb, c), by_dev in groups.items():
                if staged[a]:
                    lt, nbi = (0.0, c) if c is not None else (up_lat[a], nb * up_inv[a])
                    k = add(u, a, -1, a, lt, nbi, su, nb * su, u)
                    stage_out(u, by_dev, nb, c, k)
                else:
                    stage_out(u, by_dev, nb, c, u)
        elif chain is not None:
            for (nb, c), by_dev in groups.items():
                forward_out(u, a, by_dev, nb, c, u)
        else:
            for (b, nb, c), consumers in groups.items():
                f = share[u] * max(share[v] for v in consumers)
                lt, nbi = (0.0, c) if c is not None else (lat[a][b], nb * inv[a][b])
                k = add(u, a, b, a * nd + b, lt, nbi, f, nb * f, u)
                for v in consumers:
                    data[v].append(k)
    return data, tr


def _match_schedule(tr: list, sched) -> np.ndarray:
    """Index into the schedule's transfers of each built transfer (by producer, ends and
    bytes; among equal keys the closest duration, then creation order)."""
    keys: dict = {}
    for k, key in enumerate(zip(sched.t_op.tolist(), sched.t_src.tolist(),
                                sched.t_dst.tolist(), sched.t_bytes.tolist())):
        keys.setdefault(key, deque()).append(k)
    out = np.empty(len(tr), dtype=np.int64)
    took = (sched.t_end - sched.t_start).tolist()
    for i, t in enumerate(tr):
        q = keys.get((t[0], t[1], t[2], t[7]))
        if not q:
            raise PlanError(f"robustness: plan {sched.method!r}: transfer of op "
                            f"{sched.graph.c.names[t[0]]!r} not found in the judge's schedule")
        # equal keys (host mode: downloads made as their uploads end): the closest duration
        d = (t[4] + t[5]) * t[6]
        j = min(range(len(q)), key=lambda x: (abs(took[q[x]] - d), x))
        out[i] = q[j]
        del q[j]
    if len(tr) != sched.n_transfers:
        raise PlanError(f"robustness: plan {sched.method!r}: {len(tr)} transfers built, the "
                        f"judge made {sched.n_transfers}")
    return out


def _topological(preds: list) -> np.ndarray:
    """A topological order of the event DAG given each node's predecessor list.

    >>> _topological([[1], [], [0, 1]]).tolist()
    [1, 0, 2]
    """
    from graphlib import TopologicalSorter

    order = TopologicalSorter(dict(enumerate(preds))).static_order()
    return np.fromiter(order, dtype=np.int64, count=len(preds))


def build_replay(plan, cluster, *, congestion: bool = True, order: str | None = None,
                 schedule=None) -> Replay:
    """The event DAG of ``plan`` on ``cluster`` (simulated once unless ``schedule`` is given),
    checked to reproduce the judge's schedule exactly on the nominal costs.

    >>> import numpy as np
    >>> from workbench import samples, Cluster, Plan
    >>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
    >>> r = build_replay(Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"}), c)
    >>> one = np.ones((1, r.n_channels))
    >>> round(float(r.makespans(np.ones((1, 4)), one, one)[0]), 3)
    6.04
    """
    from .simulate import receive_overheads, simulate

    s = schedule if schedule is not None else simulate(plan, cluster, congestion=congestion,
                                                       order=order)
    g = plan.graph
    gc, cc = g.c, cluster.c
    n, nd = gc.n, cc.n
    dev = np.asarray(s.device, dtype=np.int64)
    devl = dev.tolist()
    base = cluster.op_times(g)[np.arange(n), dev] if n else np.zeros(0)
    recv = receive_overheads(g, cluster, dev) if cc.recv_overhead.any() else np.zeros(n)
    data, tr = _transfers(plan, cluster, devl)
    preds = [list(p) for p in data] + [[t[8]] for t in tr]
    # each device's ops in the order they ran
    rank = s.run_rank if s.run_rank is not None else np.arange(n)
    last: dict = {}
    for i in np.lexsort((rank, s.start)).tolist():
        d = devl[i]
        if d in last:
            preds[i].append(last[d])
        last[d] = i
    sk = _match_schedule(tr, s)
    if congestion and tr:
        chan = np.array([t[3] for t in tr], dtype=np.int64)
        prev: dict = {}
        for i in np.lexsort((sk, chan)).tolist():  # FIFO: the judge's creation order
            c = int(chan[i])
            if c in prev:
                preds[n + i].append(n + prev[c])
            prev[c] = i
    indptr = np.zeros(len(preds) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(p) for p in preds])
    flat = np.fromiter((p for ps in preds for p in ps), dtype=np.int64, count=int(indptr[-1]))
    kinds = np.array([gc.kind_index.get(cluster.devices[d].kind, -1) for d in range(nd)])
    arr = (lambda j, dt=float: np.array([t[j] for t in tr], dtype=dt))
    rep = Replay(method=plan.method, n_ops=n, order=_topological(preds), indptr=indptr,
                 preds=flat, op_base=base.astype(float), op_recv=recv.astype(float),
                 op_kind=kinds[dev] if n else np.zeros(0, dtype=np.int64),
                 t_lat=arr(4), t_nbinv=arr(5), t_f=arr(6), t_chan=arr(3, np.int64),
                 n_channels=2 * nd if cc.host_mode else nd * nd, schedule=s, plan=plan)
    rep.load_terms = _load_terms(plan, cluster, dev)
    _check_nominal(rep, sk)
    return rep


def _check_nominal(rep: Replay, sk: np.ndarray) -> None:
    """The replay on nominal costs must give the judge's ends exactly."""
    s = rep.schedule
    one = np.ones((1, rep.n_channels))
    ms, end = rep.run(rep.durations(np.ones((1, rep.n_ops)), one, one))
    t_end = np.empty(len(sk))
    t_end[:] = end[rep.n_ops:]
    ok = np.array_equal(end[:rep.n_ops], s.end) and np.array_equal(t_end, s.t_end[sk]) and \
        (rep.n_ops == 0 or float(ms[0]) == s.makespan)
    if not ok:
        diff = np.flatnonzero(end[:rep.n_ops] != s.end)
        if len(diff):
            i = int(diff[0])
            what = f"op {s.graph.c.names[i]!r} ends at {end[i]!r} ms, not {s.end[i]!r}"
        else:
            k = int(np.flatnonzero(t_end != s.t_end[sk])[0])
            what = (f"transfer {int(sk[k])} (from op {s.graph.c.names[int(s.t_op[sk[k]])]!r}) "
                    f"ends at {t_end[k]!r} ms, not {s.t_end[sk[k]]!r}")
        raise PlanError(f"robustness: the replay of plan {rep.method!r} does not reproduce the "
                        f"judge: {what}")


def _load_terms(plan, cluster, dev: np.ndarray) -> list:
    """The communication terms of :func:`workbench.device_loads` as groups of edges whose
    largest cost is charged to a device: ``(lat, nbinv, f, chan, group starts, charge)``."""
    from .costs.pipeline_costs import chain_hops, op_shares, plan_chain

    g = plan.graph
    gc, cc = g.c, cluster.c
    nd = cc.n
    if gc.m == 0:
        return []
    ds, dd = dev[gc.src], dev[gc.dst]
    cross = ds != dd
    src, dst = gc.src[cross], gc.dst[cross]
    ds, dd, nb, cm = ds[cross], dd[cross], gc.bytes[cross], gc.comm[cross]
    if not len(src):
        return []
    fixed = ~np.isnan(cm)
    shares = op_shares(g)
    sh = np.ones(gc.n) if shares is None else shares
    terms = []

    def group(key, lat, nbinv, f, chan, charge_of, keep) -> None:
        key, lat, nbinv, f, chan, charge_of = (x[keep] for x in (key, lat, nbinv, f, chan,
                                                                 charge_of))
        if not len(key):
            return
        o = np.argsort(key, kind="stable")
        ks = key[o]
        starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
        terms.append((lat[o], nbinv[o], f[o], chan[o], starts, charge_of[o][starts]))

    everything = np.ones(len(src), dtype=bool)
    chain = None if cc.host_mode else plan_chain(plan, cluster)
    if chain is not None:  # forwarded: per (tensor, hop, direction), both ends of the hop
        e, hop, up, a, b = chain_hops(chain, nd, ds, dd, what=f"plan {plan.method!r}")
        lat = np.where(fixed[e], 0.0, cc.lat[a, b])
        nbinv = np.where(fixed[e], np.nan_to_num(cm[e]), nb[e] * cc.inv_bw[a, b])
        key = (src[e] * len(chain) + hop) * 2 + up
        f = sh[src[e]] * sh[dst[e]]
        keep = np.ones(len(e), dtype=bool)
        for side in (a, b):
            group(key, lat, nbinv, f, a * nd + b, side, keep)
        return terms
    if cc.host_mode:
        for side, f, key in ((ds, sh[src], src), (dd, sh[src] * sh[dst], src * nd + dd)):
            lat = np.where(fixed, 0.0, cc.up_lat[side])
            nbinv = np.where(fixed, np.nan_to_num(cm), nb * cc.up_inv_bw[side])
            chan = side if side is ds else nd + side
            group(key, lat, nbinv, f, chan, side, cc.staged[side])
    else:
        lat_l, inv_l = cc.pair_lat_inv(ds, dd)
        lat = np.where(fixed, 0.0, lat_l)
        nbinv = np.where(fixed, np.nan_to_num(cm), nb * inv_l)
        f = sh[src] * sh[dst]
        for side in (ds, dd):  # sender and receiver each pay once per (tensor, destination)
            group(src * nd + dd, lat, nbinv, f, ds * nd + dd, side, everything)
    return terms


# ---------------------------------------------------------------------- the draws
@dataclass
class Draws:
    """Cost factors shared by every method (common random numbers): ``compute[s, name, kind]``
    per op name (the union of the plans' graphs, :attr:`names`) and graph-independent kind
    (:attr:`kinds`); ``lat``/``bw[s, channel]``."""

    names: dict
    kinds: dict
    compute: np.ndarray
    lat: np.ndarray
    bw: np.ndarray

    def op_factors(self, rep: Replay) -> np.ndarray:
        """``(draws, n_ops)`` compute factor of each op of ``rep``'s plan on its device."""
        g = rep.plan.graph
        cols = np.fromiter((self.names[v] for v in g.ops), dtype=np.int64, count=g.n_ops)
        kmap = np.array([self.kinds[k] for k in g.c.kinds], dtype=np.int64)
        return self.compute[:, cols, kmap[rep.op_kind]] if g.n_ops else \
            np.ones((self.compute.shape[0], 0))


def _spread_sigma(graphs: list, names: dict, kinds: dict, default: float,
                  use_recorded: bool) -> np.ndarray:
    """Log-sigma of every (op name, kind): ``ln(1 + std / mean)`` from ``compute_std`` where
    recorded (and ``use_recorded``), else ``ln(1 + default)``."""
    sig = np.full((len(names), len(kinds)), math.log1p(default))
    if not use_recorded:
        return sig
    for g in graphs:
        for v in g.ops:
            a = g.nx.nodes[v]
            std = a.get("compute_std")
            if not std:
                continue
            for k, s_ms in std.items():
                mean = a["compute"].get(k)
                if k in kinds and mean and mean > 0 and s_ms is not None and s_ms >= 0:
                    sig[names[v], kinds[k]] = math.log1p(float(s_ms) / float(mean))
    return sig


def draw_costs(graphs: list, n_channels: int, noise: dict, samples: int, seed) -> Draws:
    """``samples`` draws of cost factors for the ops of ``graphs`` (see the module docstring).

    >>> from workbench import samples as s
    >>> d = draw_costs([s.diamond()], 4, resolve_noise({"compute": 0.1, "correlated": True}), 3, 0)
    >>> d.compute.shape, bool((d.compute[:, 0] == d.compute[:, 3]).all()), float(d.bw.std())
    ((3, 4, 2), True, 0.0)
    """
    names: dict = {}
    kinds: dict = {}
    for g in graphs:
        for v in g.ops:
            names.setdefault(v, len(names))
        for k in g.c.kinds:
            kinds.setdefault(k, len(kinds))
    r = np.random.default_rng(seed)
    S, nk = samples, max(len(kinds), 1)
    if noise["correlated"]:
        comp = np.exp(math.log1p(noise["compute"]) * r.standard_normal((S, 1, nk)))
        comp = np.broadcast_to(comp, (S, len(names), nk))
    else:
        sig = _spread_sigma(graphs, names, kinds, noise["compute"], noise.get("preset") ==
                            "profiled")
        comp = np.exp(sig[None] * r.standard_normal((S, len(names), nk)))
    comp = comp * np.exp(math.log1p(noise["kind"]) * r.standard_normal((S, 1, nk)))
    if noise.get("family"):
        fam: dict = {}
        of = np.zeros(len(names), dtype=np.int64)
        for g in graphs:
            for v in g.ops:
                of[names[v]] = fam.setdefault(str(g.nx.nodes[v].get("op_type")), len(fam))
        f = np.exp(math.log1p(noise["family"]) * r.standard_normal((S, len(fam), nk)))
        comp = comp * f[:, of, :]
    width = 1 if noise["correlated"] else max(n_channels, 1)
    lat = np.exp(math.log1p(noise["latency"]) * r.standard_normal((S, width)))
    bw = np.exp(math.log1p(noise["bandwidth"]) * r.standard_normal((S, width)))
    if width != n_channels:
        lat = np.repeat(lat, max(n_channels, 1), axis=1)
        bw = np.repeat(bw, max(n_channels, 1), axis=1)
    return Draws(names, kinds, np.ascontiguousarray(comp), lat, bw)


# ---------------------------------------------------------------------- statistics
def _ties(vals: np.ndarray) -> tuple:
    """``less[s, i, j]`` (i strictly better than j) and ``tie[s, i, j]`` (i != j, within
    :data:`_TIE` relative) for values ``(draws, methods)``."""
    a, b = vals[:, :, None], vals[:, None, :]
    tol = _TIE * np.maximum(np.abs(a), np.abs(b))
    tie = np.abs(a - b) <= tol
    m = vals.shape[1]
    tie &= ~np.eye(m, dtype=bool)[None]
    return (a < b - tol), tie


def rank_stats(vals: np.ndarray, nominal: np.ndarray) -> dict:
    """P(best) (ties split evenly), average rank (1 = best, ties averaged), P(nominal rank),
    pairwise wins (ties count half) and Kendall's tau-b of each draw against ``nominal``.

    >>> v = np.array([[1.0, 2.0, 3.0], [2.0, 1.0, 3.0], [1.0, 1.0, 3.0], [3.0, 2.0, 1.0]])
    >>> st = rank_stats(v, np.array([1.0, 2.0, 3.0]))
    >>> st["p_best"].tolist(), st["rank"].tolist()
    ([0.375, 0.375, 0.25], [1.875, 1.625, 2.5])
    >>> st["tau"].round(3).tolist()
    [1.0, 0.333, 0.816, -1.0]
    """
    less, tie = _ties(vals)
    M = vals.shape[1]
    best = ~less.transpose(0, 2, 1).any(axis=2)   # nobody strictly better
    p_best = (best / best.sum(axis=1, keepdims=True)).mean(axis=0)
    ranks = 1 + less.transpose(0, 2, 1).sum(axis=2) + 0.5 * tie.sum(axis=2)
    nl, nt = _ties(nominal[None, :].astype(float))
    nom_rank = (1 + nl.transpose(0, 2, 1).sum(axis=2) + 0.5 * nt.sum(axis=2))[0]
    wins = less.sum(axis=0) + 0.5 * tie.sum(axis=0)
    iu = np.triu_indices(M, 1)
    sa = np.sign(nl[0].astype(int) - nl[0].T.astype(int))[iu]       # +1: i better nominally
    sb = (less.astype(int) - less.transpose(0, 2, 1).astype(int))[:, iu[0], iu[1]]
    P = len(iu[0])
    n1 = int((sa == 0).sum())
    n2 = (sb == 0).sum(axis=1)
    den = np.sqrt(np.maximum((P - n1) * (P - n2), 0).astype(float))
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = np.where(den > 0, (sb * sa[None, :]).sum(axis=1) / np.where(den > 0, den, 1),
                       np.nan)
    return {"p_best": p_best, "rank": ranks.mean(axis=0),
            "p_nominal_rank": (ranks == nom_rank[None, :]).mean(axis=0),
            "nominal_rank": nom_rank, "wins": wins, "tau": tau}


@dataclass
class Robustness:
    """What :func:`robustness` found. ``table``: one row per method (nominal value, mean,
    p5/p50/p95 of the makespan and the max-load, ``p_best``, ``expected_rank``,
    ``nominal_rank``, ``p_nominal_rank``; with ``resolve=True`` also ``resolve_changed`` and
    ``resolve_moved``), best nominal first. ``pairwise``: one row per ordered pair, ``a_beats_b``
    (ties count half) with a 95 % Wilson interval. ``makespans``/``max_loads``: the draws, one
    column per method. ``kendall_tau``: per draw, tau-b of the ranking against the nominal one.
    """

    table: object
    pairwise: object
    makespans: object
    max_loads: object
    kendall_tau: np.ndarray
    winner: str
    p_winner: float
    verdict: str
    noise: dict
    objective: str
    samples: int
    replay_s: float = 0.0
    resolve: object = None
    threshold: float = VERDICT_THRESHOLD
    plan_keys: dict = field(default_factory=dict)  # method -> Plan.key of the plan replayed

    def check_plans(self, plans: dict, what: str = "robustness result") -> None:
        """Raise SolverError unless these are the plans replayed here (each method's
        :attr:`Plan.key <workbench.plan.Plan.key>`): the robustness of another comparison
        must not be drawn on this one's bars. Methods of ``plans`` not replayed are fine (a
        failed replay), a replayed method missing from ``plans`` is not.

        >>> import workbench as wb
        >>> g, c = wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie")
        >>> a = wb.Plan(g, {v: "gpu0" for v in g.ops}, method="a")
        >>> r = wb.robustness({"a": a}, c, samples=5)
        >>> r.check_plans({"a": a})
        >>> r.check_plans({"a": a.with_placement({**a.placement, "b": "gpu1"})})
        Traceback (most recent call last):
        ...
        workbench.errors.SolverError: robustness result is not of these plans: it replayed another plan of method 'a'
        """
        for m, key in self.plan_keys.items():
            if m not in plans:
                raise SolverError(f"{what} is not of these plans: it replayed method {m!r}, "
                                  f"which they do not have ({', '.join(map(str, plans))})")
            if plans[m].key != key:
                raise SolverError(f"{what} is not of these plans: it replayed another plan of "
                                  f"method {m!r}")

    def summary(self) -> dict:
        """Winner, its P(best), the verdict and the Kendall tau's mean and 5th percentile."""
        tau = self.kendall_tau[np.isfinite(self.kendall_tau)]
        return {"winner": self.winner, "p_winner": self.p_winner, "verdict": self.verdict,
                "kendall_tau_mean": float(tau.mean()) if len(tau) else math.nan,
                "kendall_tau_p5": float(np.percentile(tau, 5)) if len(tau) else math.nan,
                "samples": self.samples, "objective": self.objective,
                "noise": {k: v for k, v in self.noise.items()}}

    def _repr_html_(self) -> str:
        import html

        return f"<p><b>{html.escape(self.verdict)}</b></p>" + self.table.to_html(index=False,
                                                                   float_format="%.4g")


def verdict(winner: str, p: float, runner_up: str | None,
            threshold: float = VERDICT_THRESHOLD) -> str:
    """One line on whether the nominal winner's lead survives the noise.

    >>> verdict("heft", 0.55, "pesto")
    'not distinguishable: heft, the nominal winner, is the best in only 55 % of draws (pesto is the runner-up)'
    >>> verdict("heft", 0.97, "pesto")
    'heft wins robustly: the best in 97 % of draws'
    """
    if p >= threshold:
        return f"{winner} wins robustly: the best in {100 * p:.0f} % of draws"
    tail = f" ({runner_up} is the runner-up)" if runner_up else ""
    return (f"not distinguishable: {winner}, the nominal winner, is the best in only "
            f"{100 * p:.0f} % of draws{tail}")


def _inputs(comparison, cluster) -> tuple:
    """``(plans, cluster, congestion, order, table, comparison-or-None)`` from what
    :func:`workbench.compare` returns (a ``Comparison``) or a dict of plans."""
    from .comparison import is_comparison
    from .plan import Plan

    if is_comparison(comparison):
        return (comparison.plans, cluster or comparison.cluster, comparison.congestion,
                comparison.order, comparison.table, comparison)
    if not isinstance(comparison, dict) or not all(isinstance(p, Plan)
                                                   for p in comparison.values()):
        raise SolverError("robustness: pass compare(...)'s Comparison or a dict method -> Plan; "
                          f"got {type(comparison).__name__}")
    if cluster is None:
        raise SolverError("robustness: plans without their comparison need cluster=")
    from .cluster import Cluster

    if not isinstance(cluster, Cluster):
        raise SolverError(f"robustness: cluster must be a Cluster (e.g. Cluster.preset(name)), "
                          f"got {type(cluster).__name__}")
    return comparison, cluster, True, None, None, None


def _one_problem(plans: dict) -> None:
    """Plans ranked against each other must be plans of one problem (:attr:`Plan.problem
    <workbench.plan.Plan.problem>`: the graph given to ``solve``, whatever the method made
    of it); plans of two graphs gave "a wins robustly: 100 %"."""
    first, p0 = next(iter(plans.items()))
    for m, p in plans.items():
        if p.problem != p0.problem:
            raise SolverError(f"robustness: plans {first!r} and {m!r} are for different "
                              f"problems (graph {p0.graph.name!r}, {p0.graph.n_ops} ops, and "
                              f"graph {p.graph.name!r}, {p.graph.n_ops} ops): rank plans of "
                              f"one graph")


def _quantiles(prefix: str, v: np.ndarray) -> dict:
    q = np.percentile(v, [5, 50, 95]) if len(v) else [math.nan] * 3
    return {f"{prefix}mean_ms": float(v.mean()) if len(v) else math.nan,
            f"{prefix}p5_ms": float(q[0]), f"{prefix}p50_ms": float(q[1]),
            f"{prefix}p95_ms": float(q[2])}


def robustness(comparison, cluster=None, *, noise="profiled", samples: int = 200, seed=0,
               resolve: bool = False, resolve_samples: int = 5, objective: str = "makespan",
               threshold: float = VERDICT_THRESHOLD) -> Robustness:
    """Replay every plan of a comparison under ``samples`` perturbed cost models.

    Parameters
    ----------
    comparison : Comparison or dict
        what ``compare(...)`` returns (its cluster, congestion and order are used) or
        ``{method: Plan}``, which needs ``cluster`` and is replayed with congestion.
    cluster : Cluster, optional
    noise : "profiled", "roofline" or dict
        See the module docstring.
    samples : int
        Draws (common to every method: each draw is one perturbed world all plans run in).
    seed : int
    resolve : bool
        Also re-run each method on ``resolve_samples`` perturbed problems (its own seed and
        parameters; links scaled together) and report how often its placement changes
        (``resolve_changed``) and the mean share of ops it moves (``resolve_moved``). Needs a
        ``Comparison``.
    objective : {"makespan", "max_load"}
        What P(best), ranks and pairwise wins are computed on.
    threshold : float
        The nominal winner is "not distinguishable" when it is the best in fewer draws.

    Raises
    ------
    SolverError
        Bad noise, sample count, objective, or input without a cluster.
    """
    import time

    import pandas as pd

    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 1:
        raise SolverError(f"robustness: samples must be a positive integer, got {samples!r}")
    _check_seed(seed)
    if isinstance(resolve_samples, bool) or not isinstance(resolve_samples, (int, np.integer)):
        raise SolverError(f"robustness: resolve_samples must be a positive integer, got "
                          f"{resolve_samples!r}")
    if objective not in ("makespan", "max_load"):
        raise SolverError(f"robustness: objective must be 'makespan' or 'max_load', got "
                          f"{objective!r}")
    if not (isinstance(threshold, (int, float)) and 0 < threshold <= 1):
        raise SolverError(f"robustness: threshold must be in (0, 1], got {threshold!r}")
    nz = resolve_noise(noise)
    plans, cluster, congestion, order, table, cmp = _inputs(comparison, cluster)
    if not plans:
        raise SolverError("robustness: the comparison has no plan to replay (every method "
                          "failed?)")
    _one_problem(plans)
    if resolve and cmp is None:
        raise SolverError("robustness: resolve=True needs compare(...)'s Comparison (the "
                          "problem and the methods' parameters)")
    t0 = time.perf_counter()
    reps = {m: build_replay(p, cluster, congestion=congestion, order=order)
            for m, p in plans.items()}
    nch = 2 * cluster.c.n if cluster.c.host_mode else cluster.c.n ** 2
    _check_draw_size([p.graph for p in plans.values()], nch, int(samples), len(plans))
    draws = draw_costs([p.graph for p in plans.values()], nch, nz, int(samples), seed)
    ms, ml = {}, {}
    for m, rep in reps.items():
        f = draws.op_factors(rep)
        ms[m] = rep.makespans(f, draws.lat, draws.bw)
        ml[m] = rep.max_loads(f, draws.lat, draws.bw)
    replay_s = time.perf_counter() - t0
    methods = list(reps)
    nom_ms = np.array([reps[m].schedule.makespan for m in methods])
    one = np.ones((1, nch))
    nom_ml = np.array([float(reps[m].max_loads(np.ones((1, reps[m].n_ops)), one, one)[0])
                       for m in methods])
    vals = np.column_stack([(ms if objective == "makespan" else ml)[m] for m in methods])
    st = rank_stats(vals, nom_ms if objective == "makespan" else nom_ml)
    rows = []
    for i, m in enumerate(methods):
        row = {"method": m, "objective": objective, "nominal_ms": float(nom_ms[i]),
               **_quantiles("", ms[m]), "max_load_nominal_ms": float(nom_ml[i]),
               **_quantiles("max_load_", ml[m]), "p_best": float(st["p_best"][i]),
               "expected_rank": float(st["rank"][i]),
               "nominal_rank": float(st["nominal_rank"][i]),
               "p_nominal_rank": float(st["p_nominal_rank"][i])}
        rows.append(row)
    df = pd.DataFrame(rows)
    if table is not None and "feasible" in getattr(table, "columns", ()):
        feas = dict(zip(table["method"], table["feasible"]))
        df.insert(2, "feasible", [bool(feas.get(m, True)) for m in methods])
    res_df = None
    if resolve:
        res_df = _resolve(cmp, nz, int(resolve_samples), seed)
        df = df.merge(res_df, on="method", how="left")
    key = "nominal_ms" if objective == "makespan" else "max_load_nominal_ms"
    df = df.sort_values([key, "method"], kind="stable").reset_index(drop=True)
    pair = []
    for i, a in enumerate(methods):
        for j, b in enumerate(methods):
            if i != j:
                w = float(st["wins"][i, j])
                lo, hi = wilson_interval(w, int(samples))
                pair.append({"a": a, "b": b, "a_beats_b": w / samples, "lo": lo, "hi": hi})
    winner = df["method"].iloc[0]
    p_win = float(df["p_best"].iloc[0])
    runner = df["method"].iloc[1] if len(df) > 1 else None
    return Robustness(
        table=df, pairwise=pd.DataFrame(pair, columns=["a", "b", "a_beats_b", "lo", "hi"]),
        makespans=pd.DataFrame(ms), max_loads=pd.DataFrame(ml), kendall_tau=st["tau"],
        winner=winner, p_winner=p_win, verdict=verdict(winner, p_win, runner, threshold),
        noise=nz, objective=objective, samples=int(samples), replay_s=replay_s,
        resolve=res_df, threshold=float(threshold),
        plan_keys={m: p.key for m, p in plans.items()})


def perturbed_problem(graph, cluster, draws: Draws, s: int) -> tuple:
    """Graph and cluster with draw ``s``'s costs: compute scaled per op and kind, every link's
    latency and inverse bandwidth by the draw's geometric-mean channel factors."""
    comp = draws.compute[s]
    names, kinds = draws.names, draws.kinds

    def scale(v, a):
        return {**a, "compute": {k: ms * float(comp[names[v], kinds[k]]) if v in names and
                                 k in kinds else ms for k, ms in a["compute"].items()}}

    lf = float(np.exp(np.log(draws.lat[s]).mean()))
    bf = float(np.exp(np.log(draws.bw[s]).mean()))

    c = cluster.with_devices(cluster.devices, bandwidth_scale=1.0 / bf, latency_scale=lf)
    return graph.map_ops(scale), c


def _check_seed(seed) -> None:
    """``None`` (fresh entropy) or a whole number in ``[0, MAX_SEED]`` (a negative, fractional
    or text seed was a numpy traceback, issue 41).

    >>> _check_seed(-1)
    Traceback (most recent call last):
    ...
    workbench.errors.SolverError: robustness: seed must be None or an integer in [0, 2147483647], got -1
    """
    from .solvers.params import MAX_SEED

    if seed is None:
        return
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or \
            not 0 <= seed <= MAX_SEED:
        raise SolverError(f"robustness: seed must be None or an integer in [0, {MAX_SEED}], "
                          f"got {seed!r}")


def _check_draw_size(graphs: list, n_channels: int, samples: int, n_plans: int) -> None:
    """Refuse a sample count whose draws and replays would not fit this machine's memory
    (``samples=10**12`` asked numpy for 58 TiB, issue 41): about 8 bytes per sample for every
    op cost, channel factor and replayed value, against half the physical memory."""
    from ._native import physical_memory

    names = {v for g in graphs for v in g.ops}
    kinds = {k for g in graphs for k in g.c.kinds}
    per_sample = 8.0 * (len(names) * max(len(kinds), 1) + n_channels
                        + 4 * n_plans * max((g.n_ops + g.n_edges for g in graphs), default=1))
    need = per_sample * float(samples)
    if need > physical_memory() / 2:
        raise SolverError(f"robustness: samples={samples:,} needs about {need:.3g} bytes for "
                          f"its draws, more than half of this machine's memory; use fewer "
                          f"samples (e.g. {max(1, int(physical_memory() / 8 / per_sample)):,})")


def _resolve(cmp, noise: dict, n: int, seed) -> object:
    """Re-run every method of ``cmp`` on ``n`` perturbed problems; share of problems where
    its placement changes and mean share of ops moved (ops both plans have)."""
    import pandas as pd

    from .solvers import solve

    if n < 1:
        raise SolverError(f"robustness: resolve_samples must be >= 1, got {n!r}")
    nch = 2 * cmp.cluster.c.n if cmp.cluster.c.host_mode else cmp.cluster.c.n ** 2
    _check_draw_size([cmp.graph], nch, n, 1)
    draws = draw_costs([cmp.graph], nch, noise, n, [int(seed), 26])
    problems = [perturbed_problem(cmp.graph, cmp.cluster, draws, s) for s in range(n)]
    rows = []
    for m, plan in cmp.plans.items():
        changed, moved = [], []
        for g, c in problems:
            try:
                p = solve(g, c, method=m, time_limit=cmp.time_limit, seed=cmp.seed,
                          **(cmp.params or {}).get(m, {}))
            except Exception:  # noqa: BLE001 - a method failing on a perturbed problem
                changed.append(1.0)
                moved.append(math.nan)
                continue
            common = [v for v in plan.placement if v in p.placement]
            k = sum(plan.placement[v] != p.placement[v] for v in common)
            changed.append(float(k > 0 or len(common) != len(plan.placement)))
            moved.append(k / len(common) if common else math.nan)
        mv = [x for x in moved if not math.isnan(x)]
        rows.append({"method": m, "resolve_changed": float(np.mean(changed)),
                     "resolve_moved": float(np.mean(mv)) if mv else math.nan})
    return pd.DataFrame(rows, columns=["method", "resolve_changed", "resolve_moved"])
