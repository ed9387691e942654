"""Collective communication times: ring and tree, latency + bandwidth, hierarchical.

The alpha-beta model of Thakur, Rabenseifner and Gropp (2005), in the form the NCCL tests
report it (``nccl-tests/doc/PERFORMANCE.md``: an all-reduce moves ``2 (n-1)/n`` times its
bytes over each rank's link -- the "bus bandwidth" factor --, a reduce-scatter or an
all-gather ``(n-1)/n``). For a tensor of ``S`` bytes over ``n`` ranks joined by links of
latency ``a`` (ms a step) and bandwidth ``B`` (bytes/ms a direction):

=================  ==============================  ==================================
collective         ring                             tree (double binary, NCCL >= 2.4)
=================  ==============================  ==================================
all-reduce         ``2 (n-1) a + 2 (n-1)/n S/B``     ``2 ceil(log2 n) a + 2 (n-1)/n S/B``
reduce-scatter     ``(n-1) a + (n-1)/n S/B``         as ring (NCCL has no tree for it)
all-gather         ``(n-1) a + (n-1)/n S/B``         as ring
all-to-all         ``(n-1) a + (n-1)/n S/B``         --
send / receive     ``a + S/B``                       --
=================  ==============================  ==================================

An **all-to-all** (expert parallelism's token dispatch and combine, Megatron-Core's
``MoEAlltoAllTokenDispatcher``; NCCL runs it as ``n - 1`` concurrent sends and receives per
rank) sends ``S/n`` of each rank's ``S`` bytes to every other rank: ``(n-1)/n S`` leave the
rank (nccl-tests' bus-bandwidth factor for it, ``AlltoAllGetBw`` in ``src/alltoall.cu``). Across ``N`` nodes with ``k`` ranks in each, the ``(n-k)/n S`` bound for other nodes
cross the network while the ``(k-1)/n S`` for the rank's own node take NVLink at the same
time: ``(n-1) a_net + max((n-k)/n S/B_net, (k-1)/n S/B_nvl)`` (one rank a node: the flat
formula on the network link).

Each call also pays the link's ``call`` latency once, however many steps it takes (NCCL's
base latency of a call: its kernel launch, proxy and synchronisation; ``baseLat`` in NVIDIA/nccl
``src/graph/tuning.cc``); a hierarchical collective is one call and pays the larger of its
two links'. Links that do not set it (every preset but a measured one) pay nothing more.

A link that carries a measured all-reduce table (``Link.allreduce``: NCCL's times on an A100
node per number of GPUs, :data:`workbench.costs.llm.NCCL_A100_NODE`) prices an all-reduce
inside one node over a number of ranks the table holds by the table itself, interpolated by
size (:meth:`workbench.cluster.Link.allreduce_ms`); the formulas above price the rest.

A group spanning ``N`` nodes with ``k`` of its ranks in each is **hierarchical** (NCCL's
intra-node rings/NVLS joined by inter-node rings or trees, one NIC per GPU as in a DGX): an
all-reduce is a reduce-scatter inside each node (``k`` ranks over NVLink/NVSwitch), an
all-reduce of the ``S/k`` shard across the nodes (``N`` ranks over InfiniBand, each of the
``k`` GPUs on its own NIC at once) and an all-gather inside the node; a reduce-scatter or an
all-gather the corresponding two halves. The link figures are the cluster's ``intra_host`` and
``inter_host`` links (:class:`workbench.cluster.Link`).

Examples
--------
>>> from workbench.cluster import Link
>>> nv, ib = Link(0.002, 300e6), Link(0.005, 25e6)     # 300 GB/s, 25 GB/s (bytes per ms)
>>> round(collective_ms("allreduce", 1e9, 8, 1, nv, ib), 3)       # 1 GB inside one node
5.861
>>> round(collective_ms("allreduce", 1e9, 4, 4, nv, ib), 3)       # one GPU in each of 4 nodes
60.03
>>> round(collective_ms("allreduce", 1e9, 32, 4, nv, ib), 3)      # 8 GPUs x 4 nodes
13.391
>>> collective_ms("allreduce", 1e9, 1, 1, nv, ib)
0.0
>>> [round(collective_ms("alltoall", 1e9, 8, n, nv, ib), 3) for n in (1, 2, 8)]
[2.931, 20.035, 35.035]
>>> measured = Link(0.0013, 201e6, call=0.0411)   # NCCL on an A100 node (see costs.llm.GPUS)
>>> round(collective_ms("allreduce", 8 * 2**20, 2, 1, measured, ib) * 1e3, 1)  # us (87 measured)
85.4
>>> from workbench.costs.llm import NCCL_A100_NODE             # with NCCL's table per GPU count
>>> [round(collective_ms("allreduce", 2**21, n, 1, NCCL_A100_NODE, ib) * 1e3, 1) for n in (2, 8)]
[52.3, 93.1]
"""

from __future__ import annotations

import math

from ..errors import PlanError

__all__ = ["COLLECTIVES", "collective_ms", "flat_ms", "p2p_ms"]

COLLECTIVES = ("allreduce", "reducescatter", "allgather", "alltoall")


def flat_ms(kind: str, nbytes: float, n: int, latency: float, bandwidth: float,
            algorithm: str = "ring", call: float = 0.0) -> float:
    """One level: ``n`` ranks on links of ``latency`` ms a step and ``bandwidth`` bytes/ms,
    ``call`` ms once for the call.

    >>> flat_ms("allgather", 4e6, 4, 0.01, 1e6)
    3.03
    >>> flat_ms("allgather", 4e6, 4, 0.01, 1e6, call=0.04)
    3.07
    """
    if n <= 1 or nbytes <= 0:
        return 0.0
    if kind not in COLLECTIVES:
        raise PlanError(f"unknown collective {kind!r}; known: {', '.join(COLLECTIVES)}")
    frac = (n - 1) / n * nbytes / bandwidth
    if kind == "allreduce":
        steps = 2 * math.ceil(math.log2(n)) if algorithm == "tree" else 2 * (n - 1)
        return call + steps * latency + 2 * frac
    return call + (n - 1) * latency + frac


def collective_ms(kind: str, nbytes: float, n: int, nodes: int, intra, inter,
                  algorithm: str = "ring") -> float:
    """Time of a collective of ``nbytes`` over ``n`` ranks spread over ``nodes`` nodes
    (``n / nodes`` in each), hierarchical when both are above one (see the module docstring).
    """
    if n <= 1:
        return 0.0
    if nodes <= 1:
        measured = (intra.allreduce_ms(nbytes, n) if kind == "allreduce" and nbytes > 0
                    and getattr(intra, "allreduce", ()) else None)
        if measured is not None:
            return measured
        return flat_ms(kind, nbytes, n, intra.latency, intra.bandwidth, algorithm, intra.call)
    k = n // nodes
    if kind == "alltoall":
        if k <= 1 or nbytes <= 0:
            return flat_ms(kind, nbytes, n, inter.latency, inter.bandwidth, call=inter.call)
        return max(intra.call, inter.call) + (n - 1) * inter.latency + \
            max((n - k) / n * nbytes / inter.bandwidth, (k - 1) / n * nbytes / intra.bandwidth)
    if k <= 1:
        return flat_ms(kind, nbytes, nodes, inter.latency, inter.bandwidth, algorithm,
                       inter.call)
    half = "reducescatter" if kind in ("allreduce", "reducescatter") else "allgather"
    t = flat_ms(half, nbytes, k, intra.latency, intra.bandwidth)
    t += flat_ms(kind, nbytes / k, nodes, inter.latency, inter.bandwidth, algorithm)
    if kind == "allreduce":
        t += flat_ms("allgather", nbytes, k, intra.latency, intra.bandwidth)
    return t + (max(intra.call, inter.call) if nbytes > 0 else 0.0)


def p2p_ms(nbytes: float, link) -> float:
    """A point-to-point send over ``link``: ``call + latency + nbytes / bandwidth``
    (:meth:`workbench.cluster.Link.time`).

    >>> from workbench.cluster import Link
    >>> p2p_ms(25e6, Link(0.005, 25e6))
    1.005
    """
    return link.time(nbytes)
