"""NVIDIA GPUs in the TensorFlow bridge: discovery, kernel times, synchronised steps.

What the runner, the profiler and the link calibration need beyond logical CPU devices:

* :func:`local_gpus` lists the GPUs TensorFlow sees (``gpu0``, ``gpu1``, ...); with
  ``partitions=n`` one physical GPU is split into ``n`` logical GPUs (TensorFlow's virtual
  devices, each with its own compute stream and a slice of the memory), which is how a single
  lent GPU can still show what a placement over several devices does.
* :func:`gpu_kernel_times` reads the CUDA kernel times of one FULL_TRACE step. On a GPU the
  executor's own per-op record (device ``/device:GPU:0``) ends when the kernel is *enqueued*;
  the time the kernel ran on the device is recorded by TensorFlow's GPU tracer (CUPTI) on the
  stream pseudo-devices (``/device:GPU:0/stream:all`` and ``.../stream:N``), one record per
  kernel named ``node:OpType`` (or ``node`` alone). An op's GPU time is the sum of its kernels
  (they run one after another on the op's stream); memcpy records are transfers, not compute.
* :func:`gpu_capable` says whether an op type has a GPU kernel registered, so profiling on a
  GPU leaves the ops that have none (string ops, some int32 shape arithmetic) on the host CPU,
  as TensorFlow's own placer would, and gives them no ``gpu`` cost (they are CPU-only ops of
  the graph).
* :func:`sync_op` is TensorFlow's ``SyncDevice`` on a device: a step that ends with it ends
  when the device's stream has drained, so wall-clock step times include the last kernels.

TensorFlow is imported lazily, as everywhere in :mod:`workbench.runtime`. Nothing here needs a
GPU to be imported or tested: the parsing works on any ``StepStats`` protobuf.

>>> from workbench.runtime.gpu import is_gpu_device
>>> is_gpu_device("/job:localhost/replica:0/task:0/device:GPU:1"), is_gpu_device("cpu0")
(True, False)
"""

from __future__ import annotations

import functools
import re

from ..errors import RuntimeBridgeError
from ._tf import tf, tf_device, virtual_gpu_options

__all__ = ["gpu_capable", "gpu_kernel_times", "is_gpu_device", "local_gpus", "sync_op",
           "use_partitions", "virtual_gpu_options"]

_STREAM = re.compile(r"/device:GPU:(\d+)/stream:(all|\d+)$", re.IGNORECASE)
_GPU = re.compile(r"(^gpu\d+$)|(/device:GPU:\d+$)|(/gpu:\d+$)", re.IGNORECASE)


def is_gpu_device(name: str) -> bool:
    """Whether a workbench or TensorFlow device name names a GPU.

    >>> is_gpu_device("gpu0"), is_gpu_device("w1/gpu0"), is_gpu_device("/device:CPU:0")
    (True, True, False)
    """
    return bool(_GPU.search(tf_device(name)))


def gpu_kernel_times(step_stats, *, gpu: int | None = None) -> dict:
    """Node -> summed CUDA kernel time (ms) of one traced step, from the GPU tracer's stream
    records.

    ``stream:all`` is used when the trace has it (it holds every kernel once); otherwise the
    individual ``stream:N`` records are summed. Records named ``node:OpType`` are charged to
    ``node``; memcpy pseudo-devices are ignored. ``gpu`` keeps one GPU's streams only.

    Examples
    --------
    >>> from tensorflow.core.framework import step_stats_pb2
    >>> ss = step_stats_pb2.StepStats()
    >>> d = ss.dev_stats.add(device="/device:GPU:0/stream:all")
    >>> _ = d.node_stats.add(node_name="fc/MatMul:MatMul", all_start_micros=10,
    ...                      all_end_rel_micros=250)
    >>> _ = d.node_stats.add(node_name="fc/MatMul:MatMul", all_start_micros=300,
    ...                      all_end_rel_micros=50)
    >>> gpu_kernel_times(ss)
    {'fc/MatMul': 0.3}
    """
    per_stream: dict = {}
    have_all: set = set()
    for ds in step_stats.dev_stats:
        m = _STREAM.search(ds.device)
        if not m or "memcpy" in ds.device.lower():
            continue
        idx = int(m.group(1))
        if gpu is not None and idx != gpu:
            continue
        if m.group(2).lower() == "all":
            have_all.add(idx)
        per_stream.setdefault((idx, m.group(2).lower()), []).extend(ds.node_stats)
    out: dict = {}
    for (idx, stream), stats in per_stream.items():
        if idx in have_all and stream != "all":
            continue
        for ns in stats:
            name = ns.node_name.split(":", 1)[0]
            if not name or name in ("_SOURCE", "_SINK"):
                continue
            dur = max(ns.all_end_rel_micros, ns.op_end_rel_micros) / 1e3
            out[name] = out.get(name, 0.0) + max(0.0, dur)
    return out


@functools.cache
def gpu_capable(op_type: str) -> bool:
    """Whether TensorFlow has a GPU kernel registered for ``op_type`` (in this build).

    A CPU-only build of TensorFlow registers no GPU kernels, so this is False everywhere
    there; what matters is the answer on the machine that profiles on a GPU.
    """
    tf()
    from tensorflow.python.framework import kernels

    try:
        reg = kernels.get_registered_kernels_for_op(op_type)
    except Exception:  # noqa: BLE001 - an unknown op type has no kernel anywhere
        return False
    return any(k.device_type.upper() == "GPU" for k in reg.kernel)


def local_gpus(*, partitions: int = 1) -> list[str]:
    """Workbench names of the GPUs this process can use: ``['gpu0', ...]`` (empty without one).

    With ``partitions > 1`` and exactly one physical GPU, the names of that many logical GPUs
    (see :func:`virtual_gpu_options`; sessions must be opened with them).
    """
    t = tf()
    phys = t.config.list_physical_devices("GPU")
    if partitions < 1:
        raise RuntimeBridgeError(f"partitions must be >= 1, got {partitions}")
    if not phys:
        return []
    if partitions > 1:
        if len(phys) != 1:
            raise RuntimeBridgeError(f"partitions={partitions} splits one GPU; this machine "
                                     f"has {len(phys)}: use them as they are")
        return [f"gpu{i}" for i in range(partitions)]
    return [f"gpu{i}" for i in range(len(phys))]


def use_partitions(n: int) -> list[str]:
    """Split the (single) physical GPU into ``n`` logical GPUs for every later session of this
    process and return their names; ``n=1`` uses the GPUs as they are. Call it before the first
    session that touches a GPU: TensorFlow fixes a process's GPU devices then.

    >>> from workbench.runtime import gpu
    >>> gpu.use_partitions(0)
    Traceback (most recent call last):
    ...
    workbench.errors.RuntimeBridgeError: partitions must be >= 1, got 0
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise RuntimeBridgeError(f"partitions must be >= 1, got {n!r}")
    from . import _tf

    names = local_gpus(partitions=n)
    _tf.GPU_PARTITIONS[0] = n
    return names


def sync_op(device: str, *, after=()):
    """A ``SyncDevice`` op on ``device`` that runs after ``after`` (ops): fetching it waits
    until every kernel queued on the device's stream has finished."""
    t = tf()
    with t.device(tf_device(device)), t.control_dependencies(list(after)):
        return t.raw_ops.SyncDevice()
