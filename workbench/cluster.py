"""Devices, links and the transfer-time model.

A :class:`Cluster` is a list of :class:`Device` objects (name, kind, memory in bytes, relative
speed, host) and a linear link model ``latency_ms + nbytes / bandwidth`` (bandwidth in bytes per
ms) for every ordered device pair: one link for devices on the same host, one across hosts, and
optional per-pair overrides (as fitted by :mod:`workbench.runtime` calibration).

Two transfer modes:

``direct``
    a tensor moves over the directed link ``src -> dst``; each directed link is a FIFO channel.
``host``
    every cross-device tensor is staged through host DRAM, as in the MSR workloads of Tarnawski
    et al.: an accelerator writes an output once over its ``dev -> host`` channel and each other
    accelerator holding a consumer reads it over its ``host -> dev`` channel. Devices of kind
    ``cpu`` sit in host memory and pay nothing.

An edge's fixed ``comm`` time replaces the link model on every hop it takes.

Examples
--------
>>> from workbench.cluster import Cluster
>>> c = Cluster.preset("2xV100-pcie")
>>> [d.name for d in c.devices]
['gpu0', 'gpu1']
>>> round(c.transfer_ms("gpu0", "gpu1", 10e6), 3)
1.02
>>> c.transfer_ms("gpu0", "gpu0", 10e6)
0.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Iterable, Mapping

import numpy as np

from .errors import ClusterError, InfeasibleError

__all__ = ["Device", "Link", "Cluster", "PRESETS", "TRAINING_PRESETS", "GiB", "MAX_DEVICES", "REF_BANDWIDTH",
           "local_cluster"]

GiB = float(2**30)
_GBps = 1e6  # 1 GB/s expressed in bytes per millisecond
REF_BANDWIDTH = 10 * _GBps
"""The reference link (10 GB/s, in bytes per ms) of cluster-free estimates: the CCR of the
generated samples, communication in priority orders and in coarsening."""
MAX_DEVICES = 4096
"""Most devices a cluster may have (per-pair link data is sparse, but solvers use dense
``n x n`` numpy matrices: 4,096 devices take 2 x 134 MB)."""


def _float(value, what: str) -> float:
    """``value`` as a float, or a ClusterError naming ``what`` (strings and bools refused)."""
    if isinstance(value, (bool, str, bytes)) or value is None:
        raise ClusterError(f"{what} must be a number, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise ClusterError(f"{what} must be a number, got {value!r}") from None


def _text(value, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ClusterError(f"{what} must be a non-empty string, got {value!r}")
    try:
        value.encode()
    except UnicodeEncodeError:
        raise ClusterError(f"{what} {value!r} is not valid Unicode (a lone surrogate)") from None
    return value


@dataclass(frozen=True)
class Device:
    """One device. ``memory`` in bytes (``inf`` = unlimited); ``speed`` divides compute times.

    ``recv_overhead`` is the device's own time (ms) spent on each tensor it receives from
    another device -- LogP's *o*: the receive is handled by the device's thread (TensorFlow's
    ``_Recv`` completion and the hand-off to the waiting op on CPU devices, an event wait on
    GPUs). The simulator charges it to the first consumer of the tensor on the device; it
    is 0 for the presets and fitted by :func:`workbench.runtime.calibrate_links`.
    """

    name: str
    kind: str = "gpu"
    memory: float = math.inf
    speed: float = 1.0
    host: str = "host0"
    recv_overhead: float = 0.0

    def __post_init__(self):
        _text(self.name, "device name")
        _text(self.kind, f"device {self.name!r}: kind")
        _text(self.host, f"device {self.name!r}: host")
        mem = _float(self.memory, f"device {self.name!r}: memory")
        if math.isnan(mem) or mem < 0:
            raise ClusterError(f"device {self.name!r}: memory must be >= 0 bytes, got {mem}")
        sp = _float(self.speed, f"device {self.name!r}: speed")
        if not (sp > 0 and math.isfinite(sp)):
            raise ClusterError(f"device {self.name!r}: speed must be a positive number, got {sp}")
        ro = _float(self.recv_overhead, f"device {self.name!r}: recv_overhead")
        if not (ro >= 0 and math.isfinite(ro)):
            raise ClusterError(f"device {self.name!r}: recv_overhead must be finite and >= 0 ms, "
                               f"got {ro}")
        object.__setattr__(self, "memory", mem)
        object.__setattr__(self, "speed", sp)
        object.__setattr__(self, "recv_overhead", ro)


@dataclass(frozen=True)
class Link:
    """Linear transfer model: ``call + latency`` ms + ``nbytes / bandwidth`` (bytes/ms).

    ``latency`` is the cost of one step (a transfer, or one step of a collective's ring or
    tree); ``call`` the fixed cost of one call however many steps it takes, paid once by a
    transfer and once by a whole collective (:mod:`workbench.judge.collectives`): NCCL's base
    latency of a call (kernel launch, proxy and synchronisation), 0 on every preset that does
    not set it.

    >>> Link(latency=0.01, bandwidth=1e6).time(2e6)
    2.01
    >>> Link(latency=0.01, bandwidth=1e6, call=0.04).time(2e6)
    2.05

    ``allreduce``, where given, is a measured table of all-reduce times on this link, per number
    of ranks: a tuple of ``(ranks, sizes, times)`` with ``sizes`` (bytes, increasing) and
    ``times`` (ms), as ``nccl-tests``' ``all_reduce_perf`` reports them. An all-reduce over a
    number of ranks the table holds then costs the table's time, interpolated linearly between
    its sizes (:meth:`allreduce_ms`; :func:`workbench.judge.collectives.collective_ms`); other
    counts, other collectives and sends keep ``call``, ``latency`` and ``bandwidth``.

    >>> lk = Link(0.0013, 201e6, call=0.0411, allreduce=((8, (2**20, 2**21), (0.0925, 0.0931)),))
    >>> round(lk.allreduce_ms(1.5 * 2**20, 8) * 1e3, 1), lk.allreduce_ms(2**20, 4)
    (92.8, None)
    """

    latency: float = 0.0
    bandwidth: float = math.inf
    r2: float | None = None  # goodness of fit when the link was calibrated
    call: float = 0.0
    allreduce: tuple = field(default=(), repr=False)  # measured, see above

    def __post_init__(self):
        lat = _float(self.latency, "link latency")
        bw = _float(self.bandwidth, "link bandwidth")
        call = _float(self.call, "link call latency")
        if self.r2 is not None:
            object.__setattr__(self, "r2", _float(self.r2, "link r2"))
        if math.isnan(lat) or lat < 0 or math.isinf(lat):
            raise ClusterError(f"link latency must be finite and >= 0 ms, got {self.latency}")
        if math.isnan(bw) or bw <= 0:
            raise ClusterError(f"link bandwidth must be > 0 bytes/ms, got {self.bandwidth}")
        if not (math.isfinite(call) and call >= 0):
            raise ClusterError(f"link call latency must be finite and >= 0 ms, got {self.call}")
        object.__setattr__(self, "latency", lat)
        object.__setattr__(self, "bandwidth", bw)
        object.__setattr__(self, "call", call)
        object.__setattr__(self, "allreduce", _allreduce_table(self.allreduce))

    def time(self, nbytes: float) -> float:
        return (self.call + self.latency
                + (0.0 if math.isinf(self.bandwidth) else nbytes / self.bandwidth))

    def allreduce_ms(self, nbytes: float, ranks: int) -> float | None:
        """The measured all-reduce time of ``nbytes`` over ``ranks`` ranks (ms), or ``None``
        where the table has no row for ``ranks``. Between two measured sizes, linear; below the
        smallest, linear from the link's fixed cost of the call (``call + 2 (ranks-1)
        latency``) at 0 bytes; above the largest, the largest's bandwidth (time proportional
        to the bytes).

        >>> lk = Link(0.001, 1e6, call=0.04, allreduce=((2, (1e6, 2e6), (0.05, 0.07)),))
        >>> [round(lk.allreduce_ms(x, 2), 6) for x in (1.5e6, 4e6, 0.5e6)]
        [0.06, 0.14, 0.046]
        """
        for n, sizes, times in self.allreduce:
            if n != ranks:
                continue
            if nbytes >= sizes[-1]:
                return times[-1] * nbytes / sizes[-1]
            fixed = self.call + 2 * (n - 1) * self.latency
            return float(np.interp(nbytes, (0.0,) + sizes, (fixed,) + times))
        return None


def _allreduce_table(table) -> tuple:
    """``table`` checked and as tuples (see :class:`Link`): ranks an int >= 2 given once, sizes
    increasing and positive, times positive, as many of each."""
    try:
        rows = tuple((n, tuple(sizes), tuple(times)) for n, sizes, times in table)
    except (TypeError, ValueError):
        raise ClusterError(f"link allreduce table must be (ranks, sizes, times) rows, "
                           f"got {table!r}"[:200]) from None
    seen = set()
    for n, sizes, times in rows:
        if isinstance(n, bool) or not isinstance(n, int) or n < 2 or n in seen:
            raise ClusterError(f"link allreduce table: ranks must be distinct ints >= 2, got {n!r}")
        seen.add(n)
        xs = [_float(x, "link allreduce size") for x in sizes]
        ts = [_float(t, "link allreduce time") for t in times]
        if not xs or len(xs) != len(ts) or not math.isfinite(xs[-1]) \
                or any(not (0 <= a < b) for a, b in zip([0.0] + xs, xs)) \
                or any(not (0 < t < math.inf) for t in ts):
            raise ClusterError(f"link allreduce table, {n} ranks: sizes must increase from > 0 "
                               f"and times be > 0 ms, as many of each")
    return tuple((n, tuple(map(float, s)), tuple(map(float, t))) for n, s, t in rows)


def _inv(bw: float) -> float:
    return 0.0 if math.isinf(bw) else 1.0 / bw


@dataclass(frozen=True, eq=False)
class CompiledCluster:
    """Numpy form of a cluster for hot loops.

    Per-pair link data is kept sparse: ``host_id[i]`` (index of the device's host), the
    intra-/inter-host defaults and the overridden pairs ``ov_src``, ``ov_dst``, ``ov_lat``,
    ``ov_inv_bw``. :meth:`pair_lat_inv` gives the parameters of many pairs at once;
    ``lat[i, j]``/``inv_bw[i, j]`` are the dense ``n x n`` matrices (0 on the diagonal), built
    by vectorised numpy on first use. ``up_lat``, ``up_inv_bw`` (device <-> host DRAM)
    host-staging parameters, zero for host-resident (``cpu``) devices in host mode;
    ``speed``, ``memory`` and ``recv_overhead`` per device; ``kind_of[i]`` device kind name.

    >>> from workbench.cluster import Cluster
    >>> cc = Cluster.preset("2x4xV100").c
    >>> cc.lat[0, [1, 4, 0]].tolist()
    [0.01, 0.03, 0.0]
    >>> cc.pair_lat_inv([0, 0], [1, 4])[0].tolist()
    [0.01, 0.03]
    """

    n: int
    host_mode: bool
    host_id: np.ndarray
    intra: tuple
    inter: tuple
    ov_src: np.ndarray
    ov_dst: np.ndarray
    ov_lat: np.ndarray
    ov_inv_bw: np.ndarray
    up_lat: np.ndarray
    up_inv_bw: np.ndarray
    staged: np.ndarray
    speed: np.ndarray
    memory: np.ndarray
    kind_of: tuple
    recv_overhead: np.ndarray

    def pair_lat_inv(self, src, dst) -> tuple[np.ndarray, np.ndarray]:
        """Latency and inverse bandwidth of the direct links ``src[k] -> dst[k]`` (device
        indices; 0 where ``src == dst``), without building the dense matrices."""
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        same = self.host_id[src] == self.host_id[dst]
        lat = np.where(same, self.intra[0], self.inter[0])
        inv = np.where(same, self.intra[1], self.inter[1])
        if len(self.ov_src):
            key = self.ov_src * self.n + self.ov_dst  # sorted
            q = src * self.n + dst
            pos = np.minimum(np.searchsorted(key, q), len(key) - 1)
            hit = key[pos] == q
            lat = np.where(hit, self.ov_lat[pos], lat)
            inv = np.where(hit, self.ov_inv_bw[pos], inv)
        diag = src == dst
        return np.where(diag, 0.0, lat), np.where(diag, 0.0, inv)

    def _dense(self) -> tuple[np.ndarray, np.ndarray]:
        same = self.host_id[:, None] == self.host_id[None, :]
        lat = np.where(same, self.intra[0], self.inter[0])
        inv = np.where(same, self.intra[1], self.inter[1])
        lat[self.ov_src, self.ov_dst] = self.ov_lat
        inv[self.ov_src, self.ov_dst] = self.ov_inv_bw
        np.fill_diagonal(lat, 0.0)
        np.fill_diagonal(inv, 0.0)
        lat.setflags(write=False)
        inv.setflags(write=False)
        return lat, inv

    @cached_property
    def lat(self) -> np.ndarray:
        """Dense ``n x n`` link latencies (ms), read-only."""
        lat, inv = self._dense()
        self.__dict__["inv_bw"] = inv
        return lat

    @cached_property
    def inv_bw(self) -> np.ndarray:
        """Dense ``n x n`` inverse bandwidths (ms per byte), read-only."""
        lat, inv = self._dense()
        self.__dict__["lat"] = lat
        return inv


class Cluster:
    """A set of devices and the links between them.

    Parameters
    ----------
    devices : iterable of Device
    intra_host, inter_host : Link
        Default link between two devices of the same host / of different hosts.
    host_link : Link
        Device <-> host DRAM link used in ``host`` mode.
    links : mapping (src, dst) -> Link, optional
        Per-pair overrides (directed).
    mode : {"direct", "host"}
    name : str

    Raises
    ------
    ClusterError
        Empty device list, duplicate names, links naming unknown devices, unknown mode.
    """

    def __init__(self, devices: Iterable[Device], *, intra_host: Link | None = None,
                 inter_host: Link | None = None, host_link: Link | None = None,
                 links: Mapping | None = None, mode: str = "direct", name: str = "cluster"):
        if isinstance(devices, (str, bytes, Mapping)):
            raise ClusterError(f"cluster {name!r}: devices must be a list of Device, got "
                               f"{type(devices).__name__}")
        try:
            self.devices: tuple[Device, ...] = tuple(devices)
        except TypeError:
            raise ClusterError(f"cluster {name!r}: devices must be a list of Device, got "
                               f"{type(devices).__name__}") from None
        if not self.devices:
            raise ClusterError(f"cluster {name!r} has no devices")
        if len(self.devices) > MAX_DEVICES:
            raise ClusterError(f"cluster {name!r} has {len(self.devices)} devices; at most "
                               f"{MAX_DEVICES} are supported")
        for d in self.devices:
            if not isinstance(d, Device):
                raise ClusterError(f"cluster {name!r}: {d!r} is not a Device")
        self.index = {}
        for i, d in enumerate(self.devices):
            if d.name in self.index:
                raise ClusterError(f"cluster {name!r}: device name {d.name!r} is used twice")
            self.index[d.name] = i
        if mode not in ("direct", "host"):
            raise ClusterError(f"cluster mode must be 'direct' or 'host', got {mode!r}")
        self.mode = mode
        self.name = _text(name, "cluster name")
        for what, lk in (("intra_host", intra_host), ("inter_host", inter_host),
                         ("host_link", host_link)):
            if lk is not None and not isinstance(lk, Link):
                raise ClusterError(f"cluster {name!r}: {what} must be a Link, got {lk!r}")
        self.intra_host = intra_host or Link(0.01, 10 * _GBps)
        self.inter_host = inter_host or self.intra_host
        self.host_link = host_link or Link(0.01, 12 * _GBps)
        self.links: dict[tuple[str, str], Link] = {}
        if links is not None and not isinstance(links, Mapping):
            raise ClusterError(f"cluster {name!r}: links must be a dict (src, dst) -> Link")
        for key, link in dict(links or {}).items():
            if not isinstance(key, tuple) or len(key) != 2:
                raise ClusterError(f"cluster {name!r}: link key {key!r} must be (src, dst)")
            a, b = key
            for end in (a, b):
                if end not in self.index:
                    raise ClusterError(f"link {a} -> {b} names unknown device {end!r}")
            if a == b:
                raise ClusterError(f"link {a} -> {b} connects a device to itself")
            if not isinstance(link, Link):
                try:
                    link = Link(**link) if isinstance(link, Mapping) else Link(*link)
                except TypeError:
                    raise ClusterError(f"link {a} -> {b}: expected a Link, a dict or a "
                                       f"(latency, bandwidth) pair, got {link!r}") from None
            self.links[(a, b)] = link

    # ------------------------------------------------------------------ queries
    def __len__(self) -> int:
        return len(self.devices)

    def __iter__(self):
        return iter(self.devices)

    def __repr__(self) -> str:
        kinds = ", ".join(f"{n}x{k}" for k, n in self.kind_counts().items())
        return f"Cluster({self.name!r}, {kinds}, mode={self.mode!r})"

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.devices]

    def device(self, name: str) -> Device:
        """The device called ``name``; ClusterError listing the valid names otherwise."""
        try:
            return self.devices[self.index[name]]
        except KeyError:
            raise ClusterError(f"unknown device {name!r}; cluster {self.name!r} has "
                               f"{', '.join(self.index)}") from None

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(sorted({d.kind for d in self.devices}))

    def kind_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for d in self.devices:
            out[d.kind] = out.get(d.kind, 0) + 1
        return out

    def hosts(self) -> list[str]:
        return list(dict.fromkeys(d.host for d in self.devices))

    def staged(self, name: str) -> bool:
        """In host mode: does this device pay to move tensors to/from host DRAM?"""
        return self.mode == "host" and self.device(name).kind != "cpu"

    def link(self, src: str, dst: str) -> Link:
        """The direct link ``src -> dst`` (an override, else the intra/inter-host default)."""
        a, b = self.device(src), self.device(dst)
        if (src, dst) in self.links:
            return self.links[(src, dst)]
        return self.intra_host if a.host == b.host else self.inter_host

    def transfer_ms(self, src: str, dst: str, nbytes: float, comm: float | None = None) -> float:
        """Time to move a tensor of ``nbytes`` from device ``src`` to ``dst`` with no contention.

        ``comm`` is an edge's fixed transfer time; it replaces the link model on every hop.
        In host mode the time is the upload (if ``src`` is staged) plus the download (if ``dst``
        is staged).

        >>> c = Cluster([Device("a"), Device("b"), Device("h", kind="cpu")], mode="host",
        ...             host_link=Link(0.0, 1e6))
        >>> c.transfer_ms("a", "b", 3e6), c.transfer_ms("a", "h", 3e6), c.transfer_ms("a", "b", 0, comm=2)
        (6.0, 3.0, 4.0)
        """
        if src == dst:
            self.device(src)
            return 0.0
        if self.mode == "direct":
            return comm if comm is not None else self.link(src, dst).time(nbytes)
        hop = comm if comm is not None else None
        t = 0.0
        for end in (src, dst):
            if self.staged(end):
                t += hop if hop is not None else self.host_link.time(nbytes)
        return t

    def mean_link(self) -> tuple[float, float]:
        """Mean (latency, bandwidth) over distinct device pairs (used for CCR and ranks)."""
        c = self.c
        n = c.n
        if n < 2:
            return (0.0, math.inf)
        if c.host_mode:
            lat = float(2 * c.up_lat[c.staged].mean()) if c.staged.any() else 0.0
            inv = float(2 * c.up_inv_bw[c.staged].mean()) if c.staged.any() else 0.0
        else:  # sums over host groups and the sparse overrides: no n x n matrix
            sizes = np.bincount(c.host_id).astype(float)
            same = float((sizes * (sizes - 1)).sum())
            pairs = float(n) * (n - 1)
            cross = pairs - same
            lat_sum = same * c.intra[0] + cross * c.inter[0]
            inv_sum = same * c.intra[1] + cross * c.inter[1]
            if len(c.ov_src):
                dl, di = c.pair_lat_inv(c.ov_src, c.ov_dst)
                base_same = c.host_id[c.ov_src] == c.host_id[c.ov_dst]
                lat_sum += float((dl - np.where(base_same, c.intra[0], c.inter[0])).sum())
                inv_sum += float((di - np.where(base_same, c.intra[1], c.inter[1])).sum())
            lat, inv = lat_sum / pairs, inv_sum / pairs
        return (lat, (1.0 / inv) if inv > 0 else math.inf)

    def total_memory(self) -> float:
        return float(sum(d.memory for d in self.devices))

    def op_times(self, graph) -> np.ndarray:
        """Matrix ``(n_ops, n_devices)`` of compute ms of each op on each device (inf = cannot).

        >>> from workbench import samples
        >>> Cluster.preset("2xV100-pcie").op_times(samples.diamond())[:, 0].tolist()
        [1.0, 2.0, 2.0, 1.0]
        """
        gc = graph.c
        out = np.full((gc.n, len(self.devices)), np.inf)
        for j, d in enumerate(self.devices):
            k = gc.kind_index.get(d.kind)
            if k is not None:
                out[:, j] = gc.compute[:, k] / d.speed
        return out

    def check_graph(self, graph) -> None:
        """Raise InfeasibleError if some op (or colocation group) can run on no device.

        >>> from workbench import samples
        >>> Cluster([Device("c0", kind="cpu")]).check_graph(samples.pesto_fig2())
        Traceback (most recent call last):
        ...
        workbench.errors.InfeasibleError: op 'A' can run on none of the devices of cluster 'cluster' (op kinds: gpu; cluster kinds: cpu)
        """
        times = self.op_times(graph)
        bad = np.where(np.isinf(times).all(axis=1))[0]
        if len(bad):
            op = graph.c.names[int(bad[0])]
            kinds = ", ".join(sorted(graph.op(op)["compute"]))
            raise InfeasibleError(
                f"op {op!r} can run on none of the devices of cluster {self.name!r} "
                f"(op kinds: {kinds}; cluster kinds: {', '.join(self.kinds)})")
        for g, members in graph.colocation_groups.items():
            idx = [graph.index[v] for v in members]
            ok = np.isfinite(times[idx]).all(axis=0)
            if not ok.any():
                raise InfeasibleError(
                    f"colocation group {g!r} ({len(members)} ops, e.g. {members[0]!r}) has no "
                    f"device that can run all of its ops")

    def with_devices(self, devices: Iterable[Device], *, bandwidth_scale: float = 1.0,
                     latency_scale: float = 1.0, name: str | None = None) -> "Cluster":
        """Same mode, other devices (links between devices that are gone dropped), every link's
        bandwidth times ``bandwidth_scale`` and latency times ``latency_scale``: the one way a
        cluster is varied (a sweep's cluster variations, robustness's cost draws, the
        calibrated judge's speeds and overheads). A link so varied drops its measured
        all-reduce table (``Link.allreduce``: it measured the link as it was).

        >>> c = Cluster.preset("2xV100-pcie")
        >>> v = c.with_devices(c.devices[:1], bandwidth_scale=0.5, latency_scale=2, name="half")
        >>> v.names, v.intra_host.bandwidth == c.intra_host.bandwidth / 2, v.name
        (['gpu0'], True, 'half')
        """
        devices = list(devices)
        keep = {d.name for d in devices}

        def link(lk: Link) -> Link:
            if bandwidth_scale == 1.0 and latency_scale == 1.0:
                return lk
            return replace(lk, latency=lk.latency * latency_scale,
                           call=lk.call * latency_scale,
                           bandwidth=lk.bandwidth * bandwidth_scale, allreduce=())

        return Cluster(devices, intra_host=link(self.intra_host),
                       inter_host=link(self.inter_host), host_link=link(self.host_link),
                       mode=self.mode, name=self.name if name is None else name,
                       links={k: link(v) for k, v in self.links.items()
                              if k[0] in keep and k[1] in keep})

    def with_memory(self, memory: float) -> "Cluster":
        """Same cluster with every device's memory set to ``memory`` bytes."""
        return self.with_devices([replace(d, memory=memory) for d in self.devices])

    # ------------------------------------------------------------------ compiled form
    @cached_property
    def c(self) -> CompiledCluster:
        n = len(self.devices)
        hosts = {h: k for k, h in enumerate(self.hosts())}
        host_id = np.array([hosts[d.host] for d in self.devices], dtype=np.int64)
        idx = self.index
        ov = sorted((idx[a], idx[b], lk) for (a, b), lk in self.links.items())
        ov_src = np.array([i for i, _, _ in ov], dtype=np.int64)
        ov_dst = np.array([j for _, j, _ in ov], dtype=np.int64)
        ov_lat = np.array([lk.call + lk.latency for _, _, lk in ov], dtype=float)
        ov_inv = np.array([_inv(lk.bandwidth) for _, _, lk in ov], dtype=float)
        staged = np.array([self.mode == "host" and d.kind != "cpu" for d in self.devices])
        hl = self.host_link
        up_lat = np.where(staged, hl.call + hl.latency, 0.0)
        up_inv = np.where(staged, 0.0 if math.isinf(hl.bandwidth) else 1.0 / hl.bandwidth, 0.0)
        for arr in (host_id, ov_src, ov_dst, ov_lat, ov_inv, up_lat, up_inv, staged):
            arr.setflags(write=False)
        return CompiledCluster(
            n=n, host_mode=self.mode == "host", host_id=host_id,
            intra=(self.intra_host.call + self.intra_host.latency,
                   _inv(self.intra_host.bandwidth)),
            inter=(self.inter_host.call + self.inter_host.latency,
                   _inv(self.inter_host.bandwidth)),
            ov_src=ov_src, ov_dst=ov_dst, ov_lat=ov_lat, ov_inv_bw=ov_inv,
            up_lat=up_lat, up_inv_bw=up_inv, staged=staged,
            speed=np.array([d.speed for d in self.devices]),
            memory=np.array([d.memory for d in self.devices]),
            kind_of=tuple(d.kind for d in self.devices),
            recv_overhead=np.array([d.recv_overhead for d in self.devices]))

    # ------------------------------------------------------------------ dict form
    def to_dict(self) -> dict:
        def link(lk: Link) -> dict:
            d = {"latency_ms": lk.latency,
                 "bandwidth_bytes_per_ms": None if math.isinf(lk.bandwidth) else lk.bandwidth}
            if lk.r2 is not None:
                d["r2"] = lk.r2
            if lk.call:
                d["call_ms"] = lk.call
            if lk.allreduce:
                d["allreduce"] = [{"ranks": n, "bytes": list(x), "ms": list(t)}
                                  for n, x, t in lk.allreduce]
            return d

        return {
            "name": self.name,
            "mode": self.mode,
            "devices": [{"name": d.name, "kind": d.kind,
                         "memory": None if math.isinf(d.memory) else d.memory,
                         "speed": d.speed, "host": d.host,
                         **({"recv_overhead_ms": d.recv_overhead} if d.recv_overhead else {})}
                        for d in self.devices],
            "intra_host": link(self.intra_host),
            "inter_host": link(self.inter_host),
            "host_link": link(self.host_link),
            "links": [{"src": a, "dst": b, **link(lk)} for (a, b), lk in self.links.items()],
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> "Cluster":
        """A cluster from its dict form (see :meth:`to_dict`; files are schema-checked first).

        >>> Cluster.from_dict({"devices": [{"name": "g", "memory": "x"}]})
        Traceback (most recent call last):
        ...
        workbench.errors.ClusterError: device 'g': memory must be a number, got 'x'
        """
        if not isinstance(data, Mapping):
            raise ClusterError(f"a cluster description must be a dict, got {type(data).__name__}")

        def link(d, what) -> Link | None:
            if d is None:
                return None
            if not isinstance(d, Mapping):
                raise ClusterError(f"{what} must be a dict with latency_ms and "
                                   f"bandwidth_bytes_per_ms, got {d!r}")
            bw = d.get("bandwidth_bytes_per_ms")
            try:
                table = d.get("allreduce") or ()
                if not isinstance(table, (list, tuple)) or not all(
                        isinstance(r, Mapping) for r in table):
                    raise ClusterError("allreduce must be a list of {ranks, bytes, ms}")
                return Link(d.get("latency_ms", 0.0), math.inf if bw is None else bw,
                            d.get("r2"), d.get("call_ms", 0.0),
                            tuple((r.get("ranks"), r.get("bytes") or (), r.get("ms") or ())
                                  for r in table))
            except ClusterError as e:
                raise ClusterError(f"{what}: {e}") from None

        devs = data.get("devices")
        if not isinstance(devs, (list, tuple)):
            raise ClusterError(f"cluster 'devices' must be a list, got {devs!r}"[:200])
        if len(devs) > MAX_DEVICES:
            raise ClusterError(f"cluster has {len(devs)} devices; at most {MAX_DEVICES} are "
                               f"supported")
        devices = []
        for k, d in enumerate(devs):
            if not isinstance(d, Mapping) or "name" not in d:
                raise ClusterError(f"devices[{k}] must be a dict with a 'name', got {d!r}"[:200])
            devices.append(Device(name=d["name"], kind=d.get("kind", "gpu"),
                                  memory=math.inf if d.get("memory") is None else d["memory"],
                                  speed=d.get("speed", 1.0), host=d.get("host", "host0"),
                                  recv_overhead=d.get("recv_overhead_ms", 0.0)))
        links: dict = {}
        for k, x in enumerate(data.get("links") or []):
            if not isinstance(x, Mapping) or "src" not in x or "dst" not in x:
                raise ClusterError(f"links[{k}] must be a dict with 'src' and 'dst'")
            key = (x["src"], x["dst"])
            if key in links:
                raise ClusterError(f"link {key[0]} -> {key[1]} is given twice")
            links[key] = link(x, f"link {key[0]} -> {key[1]}")
        return cls(devices, intra_host=link(data.get("intra_host"), "intra_host"),
                   inter_host=link(data.get("inter_host"), "inter_host"),
                   host_link=link(data.get("host_link"), "host_link"), links=links,
                   mode=data.get("mode", "direct"), name=data.get("name", "cluster"))

    # ------------------------------------------------------------------ presets
    @classmethod
    def preset(cls, name: str) -> "Cluster":
        """A named cluster with realistic figures; see :data:`PRESETS`.

        >>> Cluster.preset("2x4xV100").hosts()
        ['h0', 'h1']
        >>> Cluster.preset("nope")
        Traceback (most recent call last):
        ...
        workbench.errors.ClusterError: unknown cluster preset 'nope'; known presets: 1xV100, 2xV100-pcie, 4xV100-nvlink, 8xA100-nvlink, 2x4xV100, 2x2xV100, 4xcpu, 2xcpu, 8xA100-80g, ...
        """
        factory = PRESETS.get(name) or TRAINING_PRESETS.get(name)
        if factory is None:
            raise ClusterError(f"unknown cluster preset {name!r}; known presets: "
                               f"{', '.join([*PRESETS, *TRAINING_PRESETS])}")
        return factory()


def _gpus(n: int, *, memory: float, speed: float = 1.0, host: str = "host0",
          start: int = 0) -> list[Device]:
    return [Device(f"gpu{start + i}", "gpu", memory, speed, host) for i in range(n)]


# Figures: V100 16 GB (reference speed 1.0), A100 40 GB (about 1.7x a V100 on mixed DNN work).
# NVLink2 pairs in a DGX-1 give ~25 GB/s per direction per link; NVSwitch A100 ~250 GB/s
# effective; PCIe 3.0 x16 peer-to-peer ~10 GB/s effective, 4.0 ~24 GB/s; 100 Gb/s EDR
# InfiniBand across hosts ~11 GB/s effective. Latencies are per-transfer launch overheads.
_PCIE3 = Link(0.015, 11 * _GBps)
PRESETS = {
    "1xV100": lambda: Cluster(_gpus(1, memory=16 * GiB), host_link=_PCIE3, name="1xV100"),
    "2xV100-pcie": lambda: Cluster(_gpus(2, memory=16 * GiB), intra_host=Link(0.02, 10 * _GBps),
                                   host_link=_PCIE3, name="2xV100-pcie"),
    "4xV100-nvlink": lambda: Cluster(_gpus(4, memory=16 * GiB),
                                     intra_host=Link(0.01, 45 * _GBps), host_link=_PCIE3,
                                     name="4xV100-nvlink"),
    "8xA100-nvlink": lambda: Cluster(_gpus(8, memory=40 * GiB, speed=1.7),
                                     intra_host=Link(0.005, 250 * _GBps),
                                     host_link=Link(0.01, 24 * _GBps), name="8xA100-nvlink"),
    "2x4xV100": lambda: Cluster(_gpus(4, memory=16 * GiB, host="h0")
                                + _gpus(4, memory=16 * GiB, host="h1", start=4),
                                intra_host=Link(0.01, 45 * _GBps),
                                inter_host=Link(0.03, 11 * _GBps), host_link=_PCIE3,
                                name="2x4xV100"),
    # two hosts of two V100s (the smallest hierarchy, Tarnawski et al. App. C.3; same links)
    "2x2xV100": lambda: Cluster(_gpus(2, memory=16 * GiB, host="h0")
                                + _gpus(2, memory=16 * GiB, host="h1", start=2),
                                intra_host=Link(0.01, 45 * _GBps),
                                inter_host=Link(0.03, 11 * _GBps), host_link=_PCIE3,
                                name="2x2xV100"),
    "4xcpu": lambda: Cluster([Device(f"cpu{i}", "cpu", 8 * GiB) for i in range(4)],
                             intra_host=Link(0.005, 5 * _GBps), name="4xcpu"),
    "2xcpu": lambda: Cluster([Device(f"cpu{i}", "cpu", 8 * GiB) for i in range(2)],
                             intra_host=Link(0.005, 5 * _GBps), name="2xcpu"),
}
"""Preset name -> factory. Sample graphs carry ``gpu`` (V100-class) and ``cpu`` costs."""


def _gpu_nodes(n: int, *, memory: float, nvlink: float, nic: float, speed: float,
               name: str) -> "Cluster":
    """``n`` GPUs in nodes of 8 joined by NVSwitch, nodes joined by one NIC per GPU."""
    devs = [Device(f"gpu{i}", "gpu", memory, speed, f"node{i // 8}") for i in range(n)]
    return Cluster(devs, intra_host=Link(0.002, nvlink), inter_host=Link(0.005, nic),
                   host_link=Link(0.01, 24 * _GBps), name=name)


TRAINING_PRESETS: dict = {}
"""Multi-node GPU systems for the LLM training judge (:mod:`workbench.judge.training`):
``8xA100-80g``, ``64xA100-80g``, ``512xA100-80g``, the same with ``A100-40g`` and ``H100``,
nodes of 8 GPUs. Kept apart from :data:`PRESETS` (which the board offers to every solver)."""

# Multi-node GPU systems (issue 43), datasheet figures per GPU and direction: DGX A100 --
# NVLink 3 through NVSwitch 600 GB/s both directions (300 GB/s each way), eight 200 Gb/s HDR
# InfiniBand NICs, one per GPU (25 GB/s); DGX H100 -- NVLink 4 900 GB/s (450 each way), eight
# 400 Gb/s NDR NICs (50 GB/s). Latencies (2 us a step inside a node, 5 us across nodes) are
# the per-step costs of the collective model (workbench.judge.collectives). Speed 1: a graph
# runs on them with its own ``gpu`` times (the LLM graphs of workbench.costs.llm_graph carry
# the GPU's roofline; the training judge reads the GPU figures of workbench.costs.llm).
for _n in (8, 64, 512):
    for _gpu, _mem, _nv, _nic, _sp in (("A100-80g", 80, 300, 25, 1.0),
                                       ("A100-40g", 40, 300, 25, 1.0), ("H100", 80, 450, 50, 1.0)):
        TRAINING_PRESETS[f"{_n}x{_gpu}"] = (
            lambda n=_n, g=_gpu, m=_mem, nv=_nv, nic=_nic, sp=_sp: _gpu_nodes(
                n, memory=m * GiB, nvlink=nv * _GBps, nic=nic * _GBps, speed=sp,
                name=f"{n}x{g}"))


def local_cluster(n: int = 2, *, kind: str = "cpu", memory: float = math.inf,
                  links: dict | None = None, name: str | None = None) -> Cluster:
    """A cluster of ``n`` local devices ``cpu0..`` (or ``gpu0..`` with ``kind='gpu'``) whose
    names the runner maps to TensorFlow devices; default links unless ``links`` are given.

    >>> local_cluster(3).names
    ['cpu0', 'cpu1', 'cpu2']
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ClusterError(f"a local cluster needs a whole number of devices >= 1, got {n!r}")
    devices = [Device(f"{kind}{i}", kind, memory) for i in range(int(n))]
    return Cluster(devices, links=links, name=name or f"local-{n}x{kind}",
                   intra_host=Link(0.02, math.inf))
