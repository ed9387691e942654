"""FastT's data-parallel starting graph and the ring all-reduce that synchronises it.

:func:`data_parallel_graph` makes ``R`` replicas of a training graph, replica ``r`` of op ``v``
being ``v@r``:

* **strong scaling** (default, FastT Table 1: the global batch stays fixed): an op with a
  ``batch`` split dimension runs ``1/R`` of the batch (compute and batch-carrying output tensors
  times ``1/R``; its memory too when it is a stashed batch-carrying output, see
  :mod:`~workbench.transforms.split_dims`); **weak scaling** (FastT Table 2): every replica runs
  the whole batch. Ops without a batch (variables, weight reads, constants) and update ops are
  copied whole: each replica holds and updates its own copy of the parameters. The replicas'
  total compute equals the model's (strong) plus the copies of the batch-free ops.
* **gradient aggregation**, per **variable**: the gradient edges into the variable's update ops
  (a bwd op feeding an update op) are cut and routed through one ``AllReduce`` op per replica,
  ``allreduce:<variable>@r``, in the colocation group of replica ``r``'s variable, which waits
  for the gradients of every replica (zero-time synchronisation edges). The variable's bytes
  are its handle's memory (extracted graphs); on generated graphs without variable ops, the
  gradient tensor's bytes. Graphs without update ops aggregate, as before, the gradient of every
  forward op with memory (generated graphs, where an op's memory is its weights).

How the aggregation is charged (``aggregation=``):

* ``"links"`` (default): **a ring on the links, placement-dependent, overlapping compute.**
  ``allreduce:<variable>@r`` and ``allreduce:<variable>/done@r`` (which feeds replica ``r``'s
  update) take no compute. The ring runs over the *distinct* devices ``d_1 .. d_k`` that hold
  the replicas' ``AllReduce`` ops (:func:`ring_over_devices`): the first replica on ``d_i``
  sends ``2 (k-1)/k x bytes`` (a ring all-reduce's traffic per device) to every ``done`` op on
  ``d_{i+1}`` (one transfer per device, as the judge sends tensors); ``k = 1`` is free. All
  ``k`` links carry their share at once, so the judge times the ring by its slowest link
  (one link latency, not ``2 (k-1)``), queues it with other tensors when congestion is on, and
  the devices compute meanwhile. As built the ring is over the replicas in order (replica
  ``r`` on its own device, what ``data_parallel`` does); a solver that places replicas
  together re-draws it with :func:`ring_over_devices`.
* ``"device"`` (the model before, kept for comparison): one ``AllReduce`` op per replica whose
  compute is the ring time of :func:`ring_allreduce_ms` (``2 (R-1)`` steps of ``bytes / R``
  over the slowest link of the first ``R`` devices): it occupies its device and costs the
  same wherever the replicas are.

Examples
--------
>>> from workbench import samples
>>> g = samples.to_training(samples.cnn(12), update=True)
>>> h = data_parallel_graph(g, 2)
>>> ar = [v for v in h.ops if h.op(v)["op_type"] == "AllReduce"]
>>> len(ar) == 2 * sum(g.op(v)["kind"] == "update" for v in g.ops)
True
>>> h.meta["data_parallel"], h.meta["scaling"]
(2, 'strong')
>>> round(ring_allreduce_ms(100e6, 4), 3)          # default 10 GB/s ring, 4 replicas
15.03
>>> a = next(v for v in ar if v.endswith("@0") and "/done" not in v)
>>> sorted(h.successors(a))                       # replica 0 sends the ring to replica 1
['allreduce:cc:stem/done@0', 'allreduce:cc:stem/done@1']
>>> h.edge(a, 'allreduce:cc:stem/done@1')["bytes"] == g.op("stem")["memory"]   # 2(2-1)/2 x
True
>>> one = ring_over_devices(h, {v: "gpu0" for v in h.ops})   # all replicas on one device
>>> sorted(one.successors(a))
['allreduce:cc:stem/done@0']
"""

from __future__ import annotations

import networkx as nx

from ..errors import GraphError
from ..graph import OpGraph

__all__ = ["AGGREGATIONS", "DEFAULT_RING_LINK", "allreduce_bytes", "data_parallel_graph",
           "ring_allreduce_ms", "ring_over_devices", "variables"]

AGGREGATIONS = ("links", "device")
"""How :func:`data_parallel_graph` charges gradient aggregation (module docstring)."""

DEFAULT_RING_LINK = (0.005, 1e7)
"""(latency ms, bytes per ms) of a ring step when no cluster is given: 10 GB/s, a PCIe 3.0 x16
peer-to-peer link (never free)."""

_VARIABLES = frozenset({"VarHandleOp", "VariableV2", "Variable"})


def ring_allreduce_ms(nbytes: float, replicas: int, cluster=None, devices=None) -> float:
    """Time of a ring all-reduce of ``nbytes`` over ``replicas`` devices: ``2 (R-1)`` steps,
    each sending ``nbytes / R`` from every device to the next; a step lasts as long as its
    slowest link (``cluster.transfer_ms``, latency included), i.e. ``2 (R-1) / R x bytes``
    over the slowest link. ``devices``: the ring's device names (default the first ``R`` of
    the cluster); without a cluster, links of :data:`DEFAULT_RING_LINK`.

    >>> from workbench import Cluster
    >>> c = Cluster.preset("4xV100-nvlink")
    >>> round(ring_allreduce_ms(45e6, 4, c), 4)        # 6 steps of 11.25 MB at 45 GB/s + 10 us
    1.56
    >>> ring_allreduce_ms(1e6, 1)
    0.0
    """
    R = int(replicas)
    if R <= 1 or nbytes <= 0:
        return 0.0
    chunk = nbytes / R
    if cluster is None:
        lat, bw = DEFAULT_RING_LINK
        step = lat + chunk / bw
    else:
        names = list(devices) if devices is not None else cluster.names[:R]
        if len(names) != R:
            raise GraphError(f"ring all-reduce over {R} replicas needs {R} devices; cluster "
                             f"{cluster.name!r} has {len(cluster.names)}")
        step = max(cluster.transfer_ms(names[i], names[(i + 1) % R], chunk) for i in range(R))
    return 2 * (R - 1) * step


def variables(graph: OpGraph) -> dict:
    """Variable key -> ``(bytes, gradient edges)``: for each group of update ops (their
    colocation group, an update op without one joining its update successors'), the bwd->update
    edges that bring its gradient and the variable's bytes.

    >>> from workbench import samples
    >>> g = samples.to_training(samples.diamond(), update=True)
    >>> sorted(variables(g))
    []
    """
    nodes = graph.nx.nodes
    upd = [v for v in graph.ops if nodes[v]["kind"] == "update"]
    key: dict = {}
    for v in reversed(upd):       # successors first: an ungrouped update joins its successor's
        grp = nodes[v]["colocate"]
        if grp is None:
            nxt = [key[s] for s in graph.successors(v) if s in key]
            grp = nxt[0] if nxt else f"update:{v}"
        key[v] = grp
    groups = graph.colocation_groups
    out: dict = {}
    for v in upd:
        for u in graph.predecessors(v):
            if nodes[u]["kind"] == "bwd":
                out.setdefault(key[v], [0.0, []])[1].append((u, v))
    for k, rec in out.items():
        var_bytes = sum(nodes[m]["memory"] for m in groups.get(k, [])
                        if nodes[m].get("op_type") in _VARIABLES)
        rec[0] = var_bytes if var_bytes > 0 else \
            max(graph.nx.edges[u, v]["bytes"] for u, v in rec[1])
    return {k: (b, edges) for k, (b, edges) in out.items()}


def allreduce_bytes(graph: OpGraph) -> float:
    """Bytes aggregated per replica by the all-reduce ops of a data-parallel graph.

    >>> from workbench import samples
    >>> g = samples.to_training(samples.cnn(12), update=True)
    >>> allreduce_bytes(data_parallel_graph(g, 2)) == sum(
    ...     g.op(v)["memory"] for v in g.ops if g.op(v)["kind"] == "fwd")
    True
    """
    nodes = graph.nx.nodes
    return float(sum(nodes[v].get("allreduce_bytes", 0.0) for v in graph.ops
                     if nodes[v].get("op_type") == "AllReduce" and v.endswith("@0")))


def _share(a: dict, R: int, strong: bool) -> float:
    if not strong or a["kind"] == "update" or "batch" not in (a.get("splits") or {}):
        return 1.0
    return 1.0 / R


def _replicate(graph: OpGraph, R: int, strong: bool) -> tuple[nx.DiGraph, dict]:
    src = graph.nx
    G = nx.DiGraph()
    scale = {}
    for v in graph.ops:
        a = dict(src.nodes[v])
        sp = a.get("splits") or {}
        share = _share(a, R, strong)
        scale[v] = share
        new_sp = dict(sp)
        if share < 1.0:
            new_sp["batch"] = max(1, sp["batch"] // R)
        mem = a["memory"]
        if share < 1.0 and a.get("batch_out"):        # a stashed batch-carrying output
            mem *= share
        grp = a.get("colocate")
        for r in range(R):
            G.add_node(f"{v}@{r}", **{**a, "compute": {k: t * share for k, t in
                                                       a["compute"].items()},
                                      "memory": mem, "splits": new_sp,
                                      "colocate": None if grp is None else f"{grp}@{r}"})
    for u, v, e in src.edges(data=True):
        e2 = dict(e)
        # without derived flags, every tensor but a gradient into an update carries the batch
        if e.get("batch", src.nodes[v]["kind"] != "update"):
            e2["bytes"] = e.get("bytes", 0.0) * scale[u]
            if e.get("comm") is not None:
                e2["comm"] = e["comm"] * scale[u]
        for r in range(R):
            G.add_edge(f"{u}@{r}", f"{v}@{r}", **e2)
    return G, scale


def _add_allreduce(G: nx.DiGraph, name: str, grp, nbytes: float, t: float, kinds, R: int,
                   grads: list, users: list) -> None:
    """``allreduce:<name>@r`` for every replica: waits for ``grads`` of all replicas, feeds
    replica ``r``'s ``users`` (``[(user, edge attrs)]``)."""
    for r in range(R):
        ar = f"allreduce:{name}@{r}"
        G.add_node(ar, compute={k: t for k in kinds}, memory=0.0, kind="bwd",
                   op_type="AllReduce", splits={}, allreduce_bytes=nbytes,
                   colocate=None if grp is None else f"{grp}@{r}")
        for q in range(R):
            for gname, nb in grads:
                if q == r:
                    G.add_edge(f"{gname}@{q}", ar, bytes=nb)
                else:  # synchronisation: the data moves inside the ring time
                    G.add_edge(f"{gname}@{q}", ar, bytes=0.0, comm=0.0)
        for x, e in users:
            G.add_edge(ar, f"{x}@{r}", **e)


def _add_ring(G: nx.DiGraph, name: str, grp, nbytes: float, kinds, R: int, grads: list,
              users: list) -> None:
    """``allreduce:<name>@r`` (waits for ``grads`` of all replicas) and
    ``allreduce:<name>/done@r`` (feeds replica ``r``'s ``users``) for every replica, no
    compute, in replica ``r``'s group (their own when the variable has none); the ring's edges
    over the replicas in order (:func:`_ring_edges`)."""
    zero = {k: 0.0 for k in kinds}
    for r in range(R):
        ar, done = f"allreduce:{name}@{r}", f"allreduce:{name}/done@{r}"
        group = f"{grp}@{r}" if grp is not None else ar
        common = dict(memory=0.0, kind="bwd", splits={}, allreduce_var=name, replica=r,
                      colocate=group)
        G.add_node(ar, compute=dict(zero), op_type="AllReduce", allreduce_bytes=nbytes,
                   **common)
        G.add_node(done, compute=dict(zero), op_type="AllReduceDone", **common)
        for q in range(R):
            for gname, nb in grads:
                if q == r:
                    G.add_edge(f"{gname}@{q}", ar, bytes=nb)
                else:  # synchronisation: the ring starts once every gradient is in
                    G.add_edge(f"{gname}@{q}", ar, bytes=0.0, comm=0.0)
        G.add_edge(ar, done, bytes=0.0)
        for x, e in users:
            G.add_edge(done, f"{x}@{r}", **e)
    _ring_edges(G, name, list(range(R)))


def _ring_edges(G: nx.DiGraph, name: str, where: list) -> None:
    """(Re)draw the ring of variable ``name`` given ``where[r]``, the device of replica ``r``'s
    ``AllReduce`` op: over the distinct devices in replica order, the first replica on each
    sends ``2 (k-1)/k x bytes`` to every ``done`` op on the next device."""
    R = len(where)
    dones = [f"allreduce:{name}/done@{r}" for r in range(R)]
    for r, done in enumerate(dones):
        for u in list(G.predecessors(done)):
            if G.nodes[u].get("op_type") == "AllReduce" and G.nodes[u].get("replica") != r:
                G.remove_edge(u, done)
    ring = list(dict.fromkeys(where))
    k = len(ring)
    if k <= 1:
        return
    first = {d: where.index(d) for d in ring}
    nb = 2.0 * (k - 1) / k * float(G.nodes[f"allreduce:{name}@0"]["allreduce_bytes"])
    for i, d in enumerate(ring):
        src = f"allreduce:{name}@{first[ring[i - 1]]}"
        for r in range(R):
            if where[r] == d:
                G.add_edge(src, dones[r], bytes=nb)


def ring_over_devices(graph: OpGraph, placement: dict) -> OpGraph:
    """``graph`` with the ring of every variable's all-reduce (``aggregation="links"``) drawn
    over the distinct devices that ``placement`` gives its replicas' ``AllReduce`` ops: free
    when they all sit on one device, ``2 (k-1)/k x bytes`` per link over ``k`` devices.
    ``graph`` itself when it has no such ring (or it already matches). A collective's ring
    is formed at run time over the devices that hold the replicas (NCCL); a solver that
    co-locates replicas (FastT's Fig. 4) returns its plan on this graph.

    >>> from workbench import samples
    >>> g = samples.to_training(samples.cnn(12), update=True)
    >>> h = data_parallel_graph(g, 4)
    >>> where = {v: "gpu0" if v.endswith(("@0", "@1")) else "gpu1" for v in h.ops}
    >>> k = ring_over_devices(h, where)              # two devices: a ring of two
    >>> e = k.edge("allreduce:cc:stem@0", "allreduce:cc:stem/done@3")
    >>> e["bytes"] == g.op("stem")["memory"]
    True
    >>> ring_over_devices(h, {v: f"gpu{v[-1]}" for v in h.ops}) is h
    True
    """
    nodes = graph.nx.nodes
    rings: dict = {}
    for v in graph.ops:
        a = nodes[v]
        if a.get("op_type") == "AllReduce" and "allreduce_var" in a:
            rings.setdefault(a["allreduce_var"], {})[a["replica"]] = placement[v]
    G = None
    for name, by_r in rings.items():
        where = [by_r[r] for r in range(len(by_r))]
        if len(set(where)) == len(where) and _is_replica_ring(graph, name, where):
            continue
        if G is None:
            G = graph.nx.copy()
        _ring_edges(G, name, where)
    return graph if G is None else OpGraph(G, name=graph.name, meta=dict(graph.meta or {}))


def _is_replica_ring(graph: OpGraph, name: str, where: list) -> bool:
    """Whether the ring of ``name`` is already the ring over the replicas in order (all on
    distinct devices), as :func:`data_parallel_graph` draws it."""
    R = len(where)
    return all(graph.nx.has_edge(f"allreduce:{name}@{(r - 1) % R}", f"allreduce:{name}/done@{r}")
               for r in range(R))


def data_parallel_graph(graph: OpGraph, replicas: int, *, cluster=None, devices=None,
                        scaling: str = "strong", aggregation: str = "links") -> OpGraph:
    """The data-parallel graph of ``graph`` with ``replicas`` replicas (module docstring).

    Parameters
    ----------
    graph : OpGraph
    replicas : int
    cluster : Cluster, optional
        Whose links time the ring all-reduce (default :data:`DEFAULT_RING_LINK`).
    devices : list of str, optional
        The ring's devices (default the cluster's first ``replicas``).
    scaling : {"strong", "weak"}
        Fixed global batch (each replica ``1/R`` of it) or fixed batch per replica.
    aggregation : {"links", "device"}
        ``"links"`` (default): a ring on the links over the devices holding the replicas, no
        compute (:func:`ring_over_devices`); ``"device"``: the model before, an op per replica
        that occupies its device for the ring time of the first ``replicas`` devices
        (``cluster``, ``devices`` only time this one).

    Raises
    ------
    GraphError
        ``replicas`` not a positive integer, or an unknown ``scaling`` or ``aggregation``.
    """
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise GraphError(f"replicas must be a positive integer, got {replicas!r}")
    if scaling not in ("strong", "weak"):
        raise GraphError(f"scaling must be 'strong' or 'weak', got {scaling!r}")
    if aggregation not in AGGREGATIONS:
        raise GraphError(f"data_parallel_graph: aggregation must be 'links' or 'device', got "
                         f"{aggregation!r}")
    R = replicas
    links = aggregation == "links"
    G, _ = _replicate(graph, R, scaling == "strong")
    src = graph.nx
    kinds = graph.device_kinds
    if R > 1 and graph.is_training():
        var = variables(graph)
        for key, (nbytes, edges) in var.items():
            t = 0.0 if links else ring_allreduce_ms(nbytes, R, cluster, devices)
            grads = sorted({(u, float(G.edges[f"{u}@0", f"{v}@0"]["bytes"]))
                            for u, v in edges})
            users = {v: dict(G.edges[f"{u}@0", f"{v}@0"]) for u, v in edges}
            for r in range(R):
                for u, v in edges:
                    G.remove_edge(f"{u}@{r}", f"{v}@{r}")
            grp = key if key in graph.colocation_groups else None
            if links:
                _add_ring(G, key, grp, nbytes, kinds, R, grads, list(users.items()))
            else:
                _add_allreduce(G, key, grp, nbytes, t, kinds, R, grads, list(users.items()))
        if not var:   # generated graphs without update ops: weights are forward ops' memory
            groups = graph.colocation_groups
            for v in graph.ops:
                a = src.nodes[v]
                if a["kind"] != "fwd" or a["memory"] <= 0:
                    continue
                grp = a.get("colocate")
                grads = [x for x in (groups.get(grp, []) if grp is not None else [])
                         if src.nodes[x]["kind"] == "bwd"] or \
                    [x for x in graph.successors(v) if src.nodes[x]["kind"] == "bwd"]
                if not grads:
                    continue
                sent = [(x, float(a["memory"])) for x in grads]
                if links:
                    _add_ring(G, v, grp, float(a["memory"]), kinds, R, sent, [])
                else:
                    t = ring_allreduce_ms(a["memory"], R, cluster, devices)
                    _add_allreduce(G, v, grp, float(a["memory"]), t, kinds, R, sent, [])
    meta = {**graph.meta, "data_parallel": R, "scaling": scaling, "aggregation": aggregation}
    return OpGraph(G, name=f"{graph.name}-dp{R}", meta=meta)
