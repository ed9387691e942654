"""Evaluators of the pipelining paper (Tarnawski et al., NeurIPS 2020): single-sample latency
under the subgraph-invocation model (Section 4) and expert splits.

Latency model
-------------
An accelerator holding a contiguous set ``S`` is *invoked* once all inputs of ``S`` (outputs of
ops outside ``S`` with an edge into ``S``) are in host DRAM; it then reads them
(``Σ c_u`` over those ops), processes all of ``S`` (``Σ p_acc``), and writes back every output
that leaves ``S``; all ops of ``S`` finish at that moment. CPU ops run as soon as their inputs are
ready (the paper assumes at least as many cores as the graph is wide). A non-contiguous device
set is cut into the fewest contiguous pieces that can run one after another (Fig. 4 with ``q``
pieces), each piece an invocation, and the device runs its pieces in order.

Examples
--------
>>> from workbench import samples, Cluster, Plan
>>> from workbench.cluster import Device, Link
>>> c = Cluster([Device("gpu0", "gpu", 1e9), Device("cpu0", "cpu")], mode="host",
...             host_link=Link(0.0, 1e6))
>>> g = samples.diamond()
>>> latency(Plan(g, {v: "gpu0" for v in g.ops}), c)
6.0
"""

from __future__ import annotations

import numpy as np

from ..errors import PlanError
from ..costs.pipeline_costs import allreduce_chunk_ms, op_shares, out_costs, transfer_tiers
from ..plan import Plan

__all__ = ["contiguity_violations", "hierarchical_costs", "hierarchical_loads",
           "latency", "latency_of", "latency_pieces", "load_parts", "out_costs", "pipelined_time",
           "replica_graph"]


def contiguity_violations(plan: Plan, *, part: str = "backward") -> list[str]:
    """Devices whose ``part`` (``"forward"``, ``"backward"`` or ``"all"`` ops) is not
    contiguous: some op outside the device's set lies on a path from it back into it. Training
    splits of the pipelining paper keep both the forward and the backward part of every device
    contiguous (Section 5.3; ``dp(backward_contiguous=True)``).

    >>> from workbench import Plan
    >>> from workbench.graph import OpGraph
    >>> g = OpGraph.from_ops([(v, {"compute": {"gpu": 1.0}, "kind": "bwd"}) for v in ("gc", "gb", "ga")],
    ...                      [("gc", "gb", {}), ("gb", "ga", {})])
    >>> contiguity_violations(Plan(g, {"gc": "d0", "gb": "d1", "ga": "d0"}))
    ["backward ops on 'd0' are not contiguous: 'gb' lies between them"]
    """
    if part not in ("forward", "backward", "all"):
        raise PlanError(f"part must be 'forward', 'backward' or 'all', got {part!r}")
    g = plan.graph
    gc = g.c
    bwd = np.isin(gc.op_kind, [1, 2])
    keep = np.ones(gc.n, dtype=bool) if part == "all" else (bwd if part == "backward" else ~bwd)
    anc = [0] * gc.n
    for v in range(gc.n):  # topological index order
        if keep[v]:
            m = 0
            for u in gc.pred[v]:
                if keep[u]:
                    m |= anc[u] | (1 << u)
            anc[v] = m
    desc = [0] * gc.n
    for v in range(gc.n - 1, -1, -1):
        if keep[v]:
            m = 0
            for w in gc.succ[v]:
                if keep[w]:
                    m |= desc[w] | (1 << w)
            desc[v] = m
    sets: dict = {}
    for v in np.flatnonzero(keep).tolist():
        sets.setdefault(plan.placement[gc.names[v]], []).append(v)
    out = []
    for d, vs in sets.items():
        x = a = de = 0
        for v in vs:
            x |= 1 << v
            a |= anc[v]
            de |= desc[v]
        bad = a & de & ~x
        if bad:
            w = (bad & -bad).bit_length() - 1
            out.append(f"{part} ops on {d!r} are not contiguous: {gc.names[w]!r} lies between "
                       f"them")
    return out


def hierarchical_costs(graph, cluster) -> tuple[np.ndarray, np.ndarray]:
    """Per op, the paper's ``c_u`` inside one host and across hosts (Appendix C.3): the largest
    of its out-edges' times over the cluster's ``intra_host`` / ``inter_host`` link (an edge's
    fixed ``comm`` counts at both levels)."""
    gc = graph.c
    fast, slow = np.zeros(gc.n), np.zeros(gc.n)
    if gc.m:
        fixed = ~np.isnan(gc.comm)
        comm = np.nan_to_num(gc.comm)
        for arr, link in ((fast, cluster.intra_host), (slow, cluster.inter_host)):
            t = np.where(fixed, comm, link.call + link.latency + gc.bytes / link.bandwidth)
            np.maximum.at(arr, gc.src, t)
    return fast, slow


def hierarchical_loads(plan: Plan, cluster) -> np.ndarray:
    """Pipelined load of every device (cluster order) on a cluster of several hosts
    (Appendix C.3): compute, plus for each op whose output leaves the device its ``c_u`` once
    (the across-hosts cost if some consumer is on another host, else the inside-host cost),
    plus for each (op, receiving device) the cost of the level between the two devices.

    >>> from workbench import Cluster, Plan, samples
    >>> c = Cluster.preset("2x4xV100")
    >>> g = samples.diamond()
    >>> hierarchical_loads(Plan(g, {v: "gpu0" for v in g.ops}), c)[:2].tolist()
    [6.0, 0.0]
    """
    g = plan.graph
    gc = g.c
    dev = plan.device_array(cluster)
    hosts = cluster.hosts()
    host = np.array([hosts.index(d.host) for d in cluster.devices])
    times = cluster.op_times(g)[np.arange(gc.n), dev]
    load = np.bincount(dev, weights=times, minlength=cluster.c.n).astype(float)
    fast, slow = hierarchical_costs(g, cluster)
    dl = dev.tolist()
    for u in range(gc.n):
        du = dl[u]
        recv = {dl[v] for v in gc.succ[u]} - {du}
        if not recv:
            continue
        far = [host[d] != host[du] for d in recv]
        load[du] += slow[u] if any(far) else fast[u]
        for d, f in zip(recv, far):
            load[d] += slow[u] if f else fast[u]
    return load


def load_parts(plan: Plan, cluster) -> dict:
    """Per device (cluster order) and pass (index 0 forward, 1 backward): compute, in-transfer
    and out-transfer time per sample, in the accounting of :func:`workbench.simulate.max_load`.

    A transfer belongs to the pass of the op that produces it (``bwd``/``update`` ops are
    backward); in ``host`` mode only staged devices pay. ``compute + in + out`` summed over both
    passes is :func:`workbench.simulate.device_loads`.
    """
    g = plan.graph
    gc, cc = g.c, cluster.c
    nd = cc.n
    dev = plan.device_array(cluster)
    bwd = np.isin(gc.op_kind, [1, 2])  # kinds fwd, bwd, update, other
    times = cluster.op_times(g)[np.arange(gc.n), dev]
    parts = {k: np.zeros((nd, 2)) for k in ("compute", "in", "out")}
    np.add.at(parts["compute"], (dev, bwd.astype(np.int64)), times)
    pays = cc.staged if cc.host_mode else np.ones(nd, dtype=bool)
    share = op_shares(g)
    for u, cons, cost in transfer_tiers(g, cluster):
        du = int(dev[u])
        holders: dict = {}
        for v in cons:
            d = int(dev[v])
            holders[d] = max(holders.get(d, 0.0), 1.0 if share is None else float(share[v]))
        if holders.keys() == {du}:
            continue
        ph = int(bwd[u])
        su = 1.0 if share is None else float(share[u])
        if pays[du]:
            parts["out"][du, ph] += cost * su
        for d, sv in holders.items():
            if d != du and pays[d]:
                parts["in"][d, ph] += cost * su * sv
    return parts


def replica_graph(graph, placement: dict, replicas: dict, cluster, *,
                  allreduce_bandwidth: float):
    """The graph and placement the judge sees for a split whose stages may be replicated
    (Tarnawski et al., Appendix C.2).

    ``placement`` puts every op of a stage on one device; ``replicas`` maps such a device to
    the devices of the stage's replicas (the first is that device). Op ``v`` of a stage on
    ``R`` replicas becomes ``v@r`` on replica ``r`` with ``1 / R`` of its compute, all of its
    memory (the weights are replicated) and node attribute ``share = 1 / R`` (see
    :func:`workbench.costs.pipeline_costs.op_shares`); every edge into, out of or inside the stage
    links each replica to each holder of the other end (inside a stage, each replica to
    itself). The replicas' weights ``W`` (the stage's memory) are then summed by a ring
    all-reduce on the links: ops ``allreduce[d]@r/t`` for ``t = 0 .. 2 (R - 1)`` on replica
    ``r``, after the replica's last ops, step ``t`` receiving a ``W / R``-byte chunk from
    replica ``r - 1``'s step ``t - 1``; each send and each receive is charged
    :func:`workbench.costs.pipeline_costs.allreduce_chunk_ms` (fixed ``comm``), so
    :func:`workbench.simulate.max_load` of the result is the DP's replicated value. No
    all-reduce when ``allreduce_bandwidth`` is infinite or the stage holds no weights.

    Returns ``(graph, placement)``.

    >>> from workbench import Cluster, max_load
    >>> from workbench.cluster import Device, Link
    >>> from workbench.graph import OpGraph
    >>> from workbench.plan import Plan
    >>> g = OpGraph.from_ops([("a", {"compute": {"gpu": 1.0}}),
    ...                       ("b", {"compute": {"gpu": 8.0}, "memory": 4e6})],
    ...                      [("a", "b", {"comm": 1.0})])
    >>> c = Cluster([Device(f"gpu{i}") for i in range(3)], mode="host", host_link=Link(0.0, 1e6))
    >>> h, pl = replica_graph(g, {"a": "gpu0", "b": "gpu1"}, {"gpu1": ["gpu1", "gpu2"]}, c,
    ...                       allreduce_bandwidth=1e6)
    >>> sorted(pl.items())[:3]
    [('a', 'gpu0'), ('allreduce[gpu1]@0/0', 'gpu1'), ('allreduce[gpu1]@0/1', 'gpu1')]
    >>> max_load(Plan(h, pl), c)        # (8 + 1) / 2 + (2 - 1) * 4e6 / (2 * 1e6)
    6.5
    """
    import networkx as nx

    from ..graph import OpGraph

    src = graph.nx
    missing = [v for v in graph.ops if v not in placement]
    if missing:
        raise PlanError(f"replica_graph: placement leaves {len(missing)} ops unplaced "
                        f"(e.g. {missing[0]!r})")
    reps: dict = {}
    for d0, devs in replicas.items():
        devs = [str(d) for d in devs]
        if len(devs) < 1 or devs[0] != str(d0) or len(set(devs)) != len(devs):
            raise PlanError(f"replicas of stage on {d0!r} must list distinct devices starting "
                            f"with {d0!r}, got {devs!r}")
        for d in devs:
            if d not in cluster.index:
                raise PlanError(f"replicas of stage on {d0!r}: unknown device {d!r}; cluster "
                                f"{cluster.name!r} has {', '.join(cluster.index)}")
        reps[str(d0)] = devs
    spare = {d for devs in reps.values() for d in devs[1:]}
    busy = next((v for v in graph.ops if placement[v] in spare), None)
    if busy is not None:
        raise PlanError(f"replica_graph: op {busy!r} is placed on {placement[busy]!r}, which "
                        f"holds a replica of another stage")
    stage_of = {v: reps.get(placement[v]) for v in graph.ops}
    G = nx.DiGraph()
    copies: dict = {}
    out_place: dict = {}
    for v in graph.ops:
        a = dict(src.nodes[v])
        devs = stage_of[v]
        if devs is None or len(devs) == 1:
            G.add_node(v, **a)
            copies[v] = [v]
            out_place[v] = placement[v]
            continue
        R = len(devs)
        copies[v] = []
        for r, d in enumerate(devs):
            grp = a.get("colocate")
            name = f"{v}@{r}"
            G.add_node(name, **{**a, "compute": {k: t / R for k, t in a["compute"].items()},
                                "share": float(a.get("share", 1.0)) / R,
                                "colocate": None if grp is None else f"{grp}@{r}"})
            copies[v].append(name)
            out_place[name] = d
    for u, v, e in src.edges(data=True):
        same = stage_of[u] is not None and stage_of[u] is stage_of[v]
        pairs = zip(copies[u], copies[v]) if same else \
            ((x, y) for x in copies[u] for y in copies[v])
        for x, y in pairs:
            G.add_edge(x, y, **e)
    training = graph.is_training()
    for d0, devs in reps.items():
        R = len(devs)
        ops = [v for v in graph.ops if stage_of[v] is devs] if R > 1 else []
        W = float(sum(src.nodes[v]["memory"] for v in ops))
        chunk = allreduce_chunk_ms(W, R, allreduce_bandwidth)
        if chunk <= 0:
            continue
        inside = set(ops)
        sinks = [v for v in ops if not any(w in inside for w in src.successors(v))]
        kinds = {cluster.devices[cluster.index[d]].kind for d in devs}
        for r, d in enumerate(devs):
            for t in range(2 * (R - 1) + 1):
                G.add_node(f"allreduce[{d0}]@{r}/{t}", compute={k: 0.0 for k in kinds},
                           memory=0.0, kind="bwd" if training else "other",
                           op_type="AllReduce")
                out_place[f"allreduce[{d0}]@{r}/{t}"] = d
            for s in sinks:
                G.add_edge(f"{s}@{r}", f"allreduce[{d0}]@{r}/0", bytes=0.0)
        for r in range(R):
            for t in range(1, 2 * (R - 1) + 1):
                G.add_edge(f"allreduce[{d0}]@{r}/{t - 1}", f"allreduce[{d0}]@{r}/{t}",
                           bytes=0.0)
                G.add_edge(f"allreduce[{d0}]@{(r - 1) % R}/{t - 1}", f"allreduce[{d0}]@{r}/{t}",
                           bytes=W / R, comm=chunk)
    meta = {**graph.meta, "replicated_stages": {d0: list(devs) for d0, devs in reps.items()
                                                if len(devs) > 1}}
    return OpGraph(G, name=f"{graph.name}-replicated", meta=meta), out_place


def pipelined_time(plan: Plan, cluster, *, interleave=False, objective: str = "pipedream"
                   ) -> float:
    """Pipelined time per sample of ``plan`` under the schedules of Section 5.3/Appendix A and
    the communication models of Appendix C.1.

    ``objective="pipedream"``: ``max_i load_i`` (forward and backward work alternate on every
    device); ``"gpipe"``: ``max_i FW_i + max_i BW_i`` (all forward passes of a batch, then all
    backward passes). A device's load combines compute ``p``, in-transfers ``i`` and
    out-transfers ``o``: ``p + i + o`` (``interleave=False``), ``max(p, i + o)`` (``True``:
    transfers overlap compute on one channel) or ``max(p, i, o)`` (``"full_duplex"``).
    With the defaults this is :func:`workbench.simulate.max_load`.

    >>> from workbench import samples, Cluster, Plan, max_load
    >>> from workbench.cluster import Device, Link
    >>> c = Cluster([Device("gpu0"), Device("gpu1")], mode="host", host_link=Link(0.0, 1e6))
    >>> g = samples.diamond()
    >>> plan = Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu1"})
    >>> pipelined_time(plan, c) == max_load(plan, c)
    True
    >>> pipelined_time(plan, c, interleave="full_duplex") <= pipelined_time(plan, c, interleave=True)
    True
    """
    if objective not in ("pipedream", "gpipe"):
        raise PlanError(f"objective must be 'pipedream' or 'gpipe', got {objective!r}")
    parts = load_parts(plan, cluster)
    p, i, o = parts["compute"], parts["in"], parts["out"]
    if objective == "pipedream":
        p, i, o = p.sum(axis=1), i.sum(axis=1), o.sum(axis=1)
    if interleave is False:
        load = p + i + o
    elif interleave is True or interleave == "half_duplex":
        load = np.maximum(p, i + o)
    elif interleave == "full_duplex":
        load = np.maximum(p, np.maximum(i, o))
    else:
        raise PlanError(f"interleave must be False, True or 'full_duplex', got {interleave!r}")
    if load.size == 0:
        return 0.0
    if objective == "pipedream":
        return float(load.max())
    return float(load[:, 0].max() + load[:, 1].max())


def latency_pieces(graph, dev: np.ndarray, staged: np.ndarray) -> np.ndarray:
    """Piece index of every op on a staged device: the fewest contiguous pieces, in order
    (``-1`` for ops on unstaged devices such as CPUs), such that the pieces' invocations can run
    one after another (their dependencies form no cycle).

    Every placement has such pieces. The fast rule (an op joins the lowest piece of its device
    that none of its inputs depends on) can make two devices' pieces wait on each other: ``a``
    and ``a2`` on one device, ``y`` and ``y2`` on another, with edges ``a -> y2`` and
    ``y -> a2`` would wait on each other, so one device needs a second piece (issue 41); the
    pieces are then drawn again by :func:`_acyclic_pieces`.

    >>> from workbench.graph import OpGraph
    >>> g = OpGraph.from_ops([(v, {"compute": {"gpu": 1.0}}) for v in ["a", "y", "a2", "y2"]],
    ...                      [("a", "y2", {"bytes": 1.0}), ("y", "a2", {"bytes": 1.0})])
    >>> latency_pieces(g, np.array([0, 1, 0, 1]), np.array([True, True])).tolist()
    [0, 0, 0, 1]
    """
    gc = graph.c
    n = gc.n
    stg = np.flatnonzero(staged)
    col = {int(d): j for j, d in enumerate(stg)}
    # cross[x, j]: highest piece of device stg[j] that x depends on through some path (-1 none)
    cross = np.full((n, len(stg)), -1, dtype=np.int64)
    piece = np.full(n, -1, dtype=np.int64)
    dev_l = dev.tolist()
    for v in range(n):
        d = dev_l[v]
        row = cross[v]
        for u in gc.pred[v]:
            np.maximum(row, cross[u], out=row)
        if d in col:
            j = col[d]
            p = 0
            for u in gc.pred[v]:
                if dev_l[u] == d:
                    p = max(p, int(piece[u]))
                elif cross[u, j] >= 0:
                    p = max(p, int(cross[u, j]) + 1)
            piece[v] = p
            row[j] = max(row[j], p)
    if _pieces_acyclic(gc, dev_l, piece):
        return piece
    return _acyclic_pieces(gc, dev_l, col)


def _unit_keys(dev_l: list, piece) -> list:
    """Invocation of every op: ``(device, piece)`` on a staged device, ``("op", v)`` else."""
    return [(d, int(p)) if p >= 0 else ("op", v) for v, (d, p) in enumerate(zip(dev_l, piece))]


def _pieces_acyclic(gc, dev_l: list, piece) -> bool:
    """Whether the invocations of ``piece`` (edges plus each device's pieces in order) form a
    DAG (Kahn's algorithm on the quotient graph)."""
    keys = _unit_keys(dev_l, piece)
    succ: dict = {k: set() for k in keys}
    for u, v in zip(gc.src.tolist(), gc.dst.tolist()):
        if keys[u] != keys[v]:
            succ[keys[u]].add(keys[v])
    for k in list(succ):
        if k[0] != "op" and k[1] > 0 and (k[0], k[1] - 1) in succ:
            succ[(k[0], k[1] - 1)].add(k)
    indeg = dict.fromkeys(succ, 0)
    for s in succ.values():
        for t in s:
            indeg[t] += 1
    ready = [k for k, i in indeg.items() if i == 0]
    seen = 0
    while ready:
        k = ready.pop()
        seen += 1
        for t in succ[k]:
            indeg[t] -= 1
            if indeg[t] == 0:
                ready.append(t)
    return seen == len(succ)


def _acyclic_pieces(gc, dev_l: list, col: dict) -> np.ndarray:
    """Pieces whose invocations form a DAG, built op by op in topological order: an op joins
    the lowest piece of its device (not below a piece of its own device that feeds it) that no
    invocation feeding it depends on, else opens the device's next piece (always safe: nothing
    depends on a new piece yet). ``anc[k]``/``desc[k]``: the invocations that invocation ``k``
    depends on / that depend on it (transitive, kept closed as edges are added)."""
    n = gc.n
    piece = np.full(n, -1, dtype=np.int64)
    npieces: dict = {}
    anc: dict = {}
    desc: dict = {}

    def key_of(u):
        return (dev_l[u], int(piece[u])) if dev_l[u] in col else ("op", u)

    def add_edge(a, b):
        if a == b or b in desc[a]:
            return
        up = anc[a] | {a}
        down = desc[b] | {b}
        for x in down:
            anc[x] |= up
        for y in up:
            desc[y] |= down

    for v in range(n):
        d = dev_l[v]
        feeds = {key_of(u) for u in gc.pred[v]}
        if d in col:
            lo = max((int(piece[u]) for u in gc.pred[v] if dev_l[u] == d), default=0)
            p = next((k for k in range(lo, npieces.get(d, 0))
                      if not any((d, k) in anc[f] for f in feeds if f != (d, k))),
                     npieces.get(d, 0))
            piece[v] = p
            key = (d, p)
            if p == npieces.get(d, 0):
                npieces[d] = p + 1
                anc[key], desc[key] = set(), set()
                if p > 0:
                    add_edge((d, p - 1), key)
        else:
            key = ("op", v)
            anc[key], desc[key] = set(), set()
        for f in feeds:
            add_edge(f, key)
    return piece


def latency(plan: Plan, cluster, *, detail: bool = False):
    """Single-sample latency (ms) of ``plan`` under the subgraph-invocation model.

    With ``detail=True`` returns ``(latency, finish_per_op, pieces)``.
    """
    return latency_of(plan.graph, cluster, plan.device_array(cluster), detail=detail)


def latency_of(g, cluster, dev: np.ndarray, *, detail: bool = False, costs=None, times=None):
    """:func:`latency` of the split ``dev`` (device index per op); ``costs`` (per-op ``c_u``)
    and ``times`` (the cluster's op-time matrix) may be passed in to save recomputing them."""
    gc = g.c
    staged = np.array([d.kind != "cpu" for d in cluster.devices])
    c = out_costs(g, cluster) if costs is None else costs
    times = (cluster.op_times(g) if times is None else times)[np.arange(gc.n), dev]
    if not np.isfinite(times).all():  # pragma: no cover - validate() catches it
        raise PlanError("plan puts an op where it cannot run")
    piece = latency_pieces(g, dev, staged)
    # units: (device, piece) for staged ops, single ops otherwise
    unit = {}
    units: list = []
    uid = np.empty(gc.n, dtype=np.int64)
    for v in range(gc.n):
        key = (int(dev[v]), int(piece[v])) if staged[dev[v]] else ("op", v)
        if key not in unit:
            unit[key] = len(units)
            units.append([])
        uid[v] = unit[key]
        units[unit[key]].append(v)
    nu = len(units)
    # unit DAG (edges + device sequencing of pieces)
    succ: list = [set() for _ in range(nu)]
    for u, v in zip(gc.src.tolist(), gc.dst.tolist()):
        if uid[u] != uid[v]:
            succ[uid[u]].add(int(uid[v]))
    for key, i in unit.items():
        if key[0] != "op" and key[1] > 0 and (key[0], key[1] - 1) in unit:
            succ[unit[(key[0], key[1] - 1)]].add(i)
    indeg = np.zeros(nu, dtype=np.int64)
    for s in succ:
        for t in s:
            indeg[t] += 1
    ready = [i for i in range(nu) if indeg[i] == 0]
    finish = np.zeros(gc.n)
    ufin = np.zeros(nu)
    dev_free = {}
    done = 0
    while ready:
        i = ready.pop()
        done += 1
        ops = units[i]
        v0 = ops[0]
        if not staged[dev[v0]]:
            start = max((finish[u] for u in gc.pred[v0]), default=0.0)
            f = start + times[v0]
        else:
            inside = set(ops)
            start = 0.0
            cin = 0.0
            feeders = set()
            for v in ops:
                for u in gc.pred[v]:
                    if u not in inside and u not in feeders:
                        feeders.add(u)
                        cin += c[u]
                        start = max(start, finish[u])
            cout = sum(c[v] for v in ops if any(w not in inside for w in gc.succ[v]))
            key = (int(dev[v0]), int(piece[v0]))
            start = max(start, dev_free.get(key[0], 0.0))
            f = start + cin + float(times[ops].sum()) + cout
            dev_free[key[0]] = f
        ufin[i] = f
        for v in ops:
            finish[v] = f
        for t in succ[i]:
            indeg[t] -= 1
            if indeg[t] == 0:
                ready.append(t)
    if done != nu:  # pragma: no cover
        raise PlanError("the plan's subgraph invocations form a cycle")
    total = float(finish.max()) if gc.n else 0.0
    if detail:
        return total, finish, piece
    return total
