"""Link calibration: time tensor transfers between device pairs and fit the linear model.

For every ordered pair ``(a, b)`` of devices and every size ``s``, float32 variables of ``s``
bytes live on ``a`` and ``Identity`` ops on ``b`` read them, which makes TensorFlow send the
tensors from ``a`` to ``b``. A step that moves ``k`` tensors and one that moves a single tensor
are timed (median ``Session.run`` time); their difference divided by ``k - 1`` is the cost of
one more transfer, free of the fixed cost of running a step on two devices. A least-squares line ``latency + bytes / bandwidth`` is fitted per pair (FastT and
Pesto do the same from their traces), with its coefficient of determination stored in
``Link.r2``; a non-positive slope gives an infinite bandwidth and the mean as latency.

Logical CPU devices of one process pass tensors by reference, so their fitted bandwidth is
(nearly) infinite and only the per-transfer latency of the rendezvous is real; devices of
different ``tf.distribute.Server`` processes move the bytes over gRPC (see ``docs/runtime.md``).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Iterable, Sequence

import numpy as np

from ..cluster import Cluster, Device, Link
from ..errors import ClusterError, RuntimeBridgeError, WorkbenchError
from ._tf import op_error_message, session_config, tf, tf_device

__all__ = ["DEFAULT_SIZES", "calibrate_links", "fit_link", "local_cluster"]

DEFAULT_SIZES = (1 << 10, 1 << 14, 1 << 17, 1 << 19, 1 << 21, 1 << 22)
"""Transfer sizes in bytes (1 KiB to 4 MiB)."""


def fit_link(nbytes: Sequence[float], ms: Sequence[float]) -> Link:
    """Least-squares fit of ``ms = latency + nbytes / bandwidth`` with its R^2.

    >>> lk = fit_link([0, 1e6, 2e6, 3e6], [0.1, 1.1, 2.1, 3.1])
    >>> round(lk.latency, 3), round(lk.bandwidth), round(lk.r2, 3)
    (0.1, 1000000, 1.0)
    >>> fit_link([1e3, 1e6], [0.2, 0.1]).bandwidth
    inf
    """
    x = np.asarray(nbytes, dtype=float)
    y = np.asarray(ms, dtype=float)
    if len(x) < 2 or len(x) != len(y):
        raise RuntimeBridgeError("fit_link needs at least two (bytes, ms) samples of equal length")
    A = np.vstack([np.ones_like(x), x]).T
    (a, b), *_ = np.linalg.lstsq(A, y, rcond=None)
    if b <= 0:
        lat = max(0.0, float(y.mean()))
        pred = np.full_like(y, lat)
        bw = math.inf
    else:
        lat = max(0.0, float(a))
        pred = lat + b * x
        bw = 1.0 / float(b)
    ss_tot = float(((y - y.mean()) ** 2).sum())
    ss_res = float(((y - pred) ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)
    return Link(latency=lat, bandwidth=bw, r2=float(r2))


def _host_of(name: str) -> str:
    return name.split("/", 1)[0] if "/" in name else "host0"


def local_cluster(n: int = 2, *, kind: str = "cpu", memory: float = math.inf,
                  links: dict | None = None, name: str | None = None) -> Cluster:
    """A cluster of ``n`` local devices ``cpu0..`` (or ``gpu0..`` with ``kind='gpu'``) whose
    names the runner maps to TensorFlow devices; default links unless ``links`` are given.

    >>> local_cluster(3).names
    ['cpu0', 'cpu1', 'cpu2']
    """
    if n < 1:
        raise ClusterError(f"a local cluster needs at least one device, got {n}")
    devices = [Device(f"{kind}{i}", kind, memory) for i in range(n)]
    return Cluster(devices, links=links, name=name or f"local-{n}x{kind}",
                   intra_host=Link(0.02, math.inf))


def calibrate_links(devices: int | Iterable[str] | Cluster = 2, *,
                    sizes: Sequence[int] = DEFAULT_SIZES, repeats: int = 7, transfers: int = 8,
                    target: str = "",
                    kind: str = "cpu", memory: float = math.inf, return_samples: bool = False):
    """Measure transfers between every ordered device pair and return the fitted Cluster.

    Parameters
    ----------
    devices : int, list of names, or Cluster
        ``n`` local devices ``cpu0..cpu{n-1}``, device names (``cpuN``, ``wT/cpuN``, ...), or a
        cluster whose devices are kept (its links are replaced by the fitted ones).
    sizes : sequence of int
        Transfer sizes in bytes.
    repeats : int
        Runs per (pair, size); the median is used.
    transfers : int
        Tensors moved by the many-transfer step (at least 2).
    target : str
        Session target for devices of a ``tf.distribute.Server`` cluster.
    kind, memory : device kind and memory of devices created from names.
    return_samples : bool
        Also return the raw samples as a list of dicts (src, dst, bytes, ms).

    Returns
    -------
    Cluster, or (Cluster, list) with ``return_samples``.
        ``links`` has one fitted :class:`~workbench.cluster.Link` per ordered pair (with
        ``r2``); the intra-/inter-host defaults are the means of the fitted links.
    """
    if isinstance(devices, Cluster):
        devs = list(devices.devices)
    elif isinstance(devices, int):
        devs = list(local_cluster(devices, kind=kind, memory=memory).devices)
    else:
        devs = [Device(d, kind, memory, host=_host_of(d)) for d in devices]
    if len(devs) < 2:
        raise ClusterError("link calibration needs at least two devices")
    if repeats < 1 or len(sizes) < 2:
        raise RuntimeBridgeError("calibration needs repeats >= 1 and at least two sizes")
    t = tf()
    tf1 = t.compat.v1
    names = [d.name for d in devs]
    tfd = {d: tf_device(d) for d in names}
    graph = t.Graph()
    targets: dict = {}
    k = max(2, int(transfers))
    with graph.as_default():
        reads: dict = {}
        for a in names:
            for s in sizes:
                for i in range(k):
                    with t.device(tfd[a]):
                        v = tf1.get_variable(f"x_{len(reads)}", shape=[max(1, int(s) // 4)],
                                             initializer=tf1.zeros_initializer(),
                                             use_resource=True)
                        reads[(a, s, i)] = v.read_value()
        for a in names:
            for b in names:
                if a == b:
                    continue
                for s in sizes:
                    with t.device(tfd[b]):
                        ys = [t.identity(reads[(a, s, i)]) for i in range(k)]
                    targets[(a, b, s, 1)] = t.group(ys[0])
                    targets[(a, b, s, k)] = t.group(*ys)
        init = tf1.global_variables_initializer()
    cpus = 1 + max((int(tfd[d].rsplit(":", 1)[1]) for d in names if "localhost" in tfd[d]
                    and "CPU" in tfd[d]), default=0)
    try:
        sess = tf1.Session(target=target, graph=graph,
                           config=session_config(cpus=cpus, inter_op=1))
    except Exception as e:  # noqa: BLE001 - any TF error is reported per call
        raise RuntimeBridgeError(f"calibration session failed: {op_error_message(e)}") from None

    def timed(op) -> float:
        sess.run(op)
        runs = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            sess.run(op)
            runs.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(runs)

    samples = []
    links = {}
    try:
        sess.run(init)
        for a in names:
            for b in names:
                if a == b:
                    continue
                xs, ys = [], []
                for s in sizes:
                    one = timed(targets[(a, b, s, 1)])
                    ms = max(0.0, (timed(targets[(a, b, s, k)]) - one) / (k - 1))
                    xs.append(float(s))
                    ys.append(ms)
                    samples.append({"src": a, "dst": b, "bytes": float(s), "ms": ms})
                links[(a, b)] = fit_link(xs, ys)
    except WorkbenchError:
        raise
    except Exception as e:  # noqa: BLE001 - any TF error is reported per call
        raise RuntimeBridgeError(f"calibration failed: {op_error_message(e)}") from None
    finally:
        sess.close()

    def mean_link(pairs) -> Link | None:
        ls = [links[p] for p in pairs]
        if not ls:
            return None
        inv = statistics.fmean(0.0 if math.isinf(lk.bandwidth) else 1.0 / lk.bandwidth
                               for lk in ls)
        return Link(statistics.fmean(lk.latency for lk in ls), math.inf if inv <= 0 else 1 / inv)

    host = {d.name: d.host for d in devs}
    intra = mean_link([p for p in links if host[p[0]] == host[p[1]]])
    inter = mean_link([p for p in links if host[p[0]] != host[p[1]]])
    cluster = Cluster(devs, intra_host=intra, inter_host=inter, links=links,
                      name=f"calibrated-{len(devs)}x{devs[0].kind}")
    return (cluster, samples) if return_samples else cluster
