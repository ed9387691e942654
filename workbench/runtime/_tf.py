"""Lazy TensorFlow access and the conventions shared by the bridge (private).

TensorFlow is imported only when a function of :mod:`workbench.runtime` needs it, so
``import workbench`` stays fast and works without TensorFlow installed.

Device names
------------
A workbench :class:`~workbench.cluster.Device` name maps to a TensorFlow device:

* ``cpu3`` / ``gpu1``  ->  ``/job:localhost/replica:0/task:0/device:CPU:3`` / ``GPU:1``
  (devices of the local process; logical CPU devices are created per session with
  ``ConfigProto(device_count={"CPU": n})``)
* ``w1/cpu0``  ->  ``/job:worker/replica:0/task:1/device:CPU:0`` (a host of a
  ``tf.distribute.Server`` cluster, see :mod:`workbench.runtime.distributed`)
* a name that already starts with ``/`` is used as is.

>>> tf_device("cpu3")
'/job:localhost/replica:0/task:0/device:CPU:3'
>>> tf_device("w1/cpu0")
'/job:worker/replica:0/task:1/device:CPU:0'
>>> tf_device("tpu")
Traceback (most recent call last):
...
workbench.errors.PlanError: device name 'tpu' does not name a TensorFlow device: use cpuN, gpuN, wT/cpuN or a full '/job:...' name
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from typing import Any

from .._native import block_triton
from ..errors import PlanError, RuntimeBridgeError, WorkbenchError
from .steady_memory import hold_freed_memory

__all__ = ["closing_reported", "new_session", "op_error_message", "session_config", "tf", "tf_device", "timed_runs"]

# logical GPUs per physical GPU for every session of the process (see gpu.use_partitions)
GPU_PARTITIONS = [1]

_LOCAL = re.compile(r"^(cpu|gpu)(\d+)$")
_WORKER = re.compile(r"^w(\d+)/(cpu|gpu)(\d+)$")


def tf() -> Any:
    """Import and return TensorFlow (quiet logs), or raise RuntimeBridgeError if missing.

    Triton is blocked first (see :func:`block_triton`): with TensorFlow loaded it would crash.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    block_triton()
    try:
        import tensorflow as _tf
    except ImportError as e:  # pragma: no cover - TF is installed in the project's venv
        raise RuntimeBridgeError(
            f"TensorFlow is not installed ({e}); install the 'tf' extra: pip install "
            f"'placement-workbench[tf]'") from None
    return _tf


def tf_device(name: str) -> str:
    """The full TensorFlow device string of a workbench device name (see module docstring)."""
    if name.startswith("/"):
        return name
    m = _LOCAL.match(name)
    if m:
        return f"/job:localhost/replica:0/task:0/device:{m.group(1).upper()}:{int(m.group(2))}"
    m = _WORKER.match(name)
    if m:
        return (f"/job:worker/replica:0/task:{int(m.group(1))}/device:"
                f"{m.group(2).upper()}:{int(m.group(3))}")
    raise PlanError(f"device name {name!r} does not name a TensorFlow device: use cpuN, gpuN, "
                    f"wT/cpuN or a full '/job:...' name")


def session_config(*, cpus: int = 1, inter_op: int | None = None, intra_op: int = 1,
                   target: str = "", spinning: bool = True):
    """A ``tf.compat.v1.ConfigProto`` with ``cpus`` logical CPU devices and graph rewriting off.

    Grappler is disabled so that the executed graph is the one that was placed (same node
    names, no constant folding or op fusion moving work between devices); ``intra_op`` threads
    per op (1 = an op uses one core, the model of one device per core); ``inter_op`` defaults
    to the number of CPU devices.

    GPU memory grows on demand (several sessions share a GPU); with
    :func:`workbench.runtime.gpu.use_partitions` the physical GPU is split into logical GPUs.

    ``use_per_session_threads`` is on for local sessions (``target`` empty; TensorFlow's
    distributed sessions refuse it): without it TensorFlow creates one inter-op thread pool
    per *process*, sized by the first session's config, and every later session silently
    shares it (a process that profiled with one inter-op thread would then run every plan
    one op at a time, whatever its devices).

    ``spinning=False`` sets ``experimental.disable_thread_spinning``: an idle pool thread
    sleeps at once instead of spinning for work. Sessions measured under real-time scheduling
    (:mod:`workbench.runtime.realtime`) use it: a spinning ``SCHED_FIFO`` thread is never
    preempted by another of its priority, so a thread with a ready op could wait behind it.
    """
    t = tf()
    from tensorflow.core.protobuf import rewriter_config_pb2

    cfg = t.compat.v1.ConfigProto(
        device_count={"CPU": int(cpus)},
        inter_op_parallelism_threads=int(inter_op or cpus),
        intra_op_parallelism_threads=int(intra_op),
        allow_soft_placement=False,
        use_per_session_threads=not target)
    virtual_gpu_options(cfg, GPU_PARTITIONS[0])
    cfg.experimental.disable_thread_spinning = not spinning
    cfg.graph_options.rewrite_options.disable_meta_optimizer = True
    cfg.graph_options.rewrite_options.constant_folding = rewriter_config_pb2.RewriterConfig.OFF
    cfg.graph_options.optimizer_options.opt_level = t.compat.v1.OptimizerOptions.L0
    cfg.graph_options.optimizer_options.do_constant_folding = False
    cfg.graph_options.optimizer_options.do_common_subexpression_elimination = False
    cfg.graph_options.optimizer_options.do_function_inlining = False
    return cfg


def virtual_gpu_options(config, partitions: int, *, memory_mb: float | None = None) -> None:
    """Split physical GPU 0 into ``partitions`` logical GPUs in a session ``ConfigProto``.

    Each logical GPU gets ``memory_mb`` (default: 80 % of the physical memory divided evenly,
    read with ``nvidia-smi``-equivalent TF device details when available, else 2 GiB) and a
    compute stream of its own. TensorFlow fixes the GPU devices of a process at its first
    session, so every session of the process must use the same split.
    """
    if partitions <= 1:
        config.gpu_options.allow_growth = True
        return
    if memory_mb is None:
        memory_mb = 2048.0
        try:
            t = tf()
            phys = t.config.list_physical_devices("GPU")
            info = t.config.experimental.get_device_details(phys[0]) if phys else {}
            total = info.get("device_memory_size") or info.get("memory_limit")
            if total:
                memory_mb = 0.8 * float(total) / 2**20 / partitions
        except Exception:  # noqa: BLE001, S110 - the default split is safe on any modern GPU
            pass
    vd = config.gpu_options.experimental.virtual_devices.add()
    vd.memory_limit_mb.extend([float(memory_mb)] * partitions)


def op_error_message(e: BaseException) -> str:
    """One line describing a TensorFlow error (its class and the first line of its message)."""
    msg = getattr(e, "message", None) or str(e)
    lines = [ln.strip() for ln in str(msg).splitlines()
             if ln.strip() and not ln.strip().startswith(("Graph execution error", "Detected at",
                                                           "File ", "Traceback"))]
    text = " ".join(lines[:2])
    return f"{type(e).__name__}: {text[:400]}"


def new_session(graph, *, target: str = "", what: str = "session", **config):
    """A ``tf.compat.v1.Session`` on ``graph`` with :func:`session_config` (``**config``); a
    failure to open it is a RuntimeBridgeError naming ``what``. Every session the runtime opens
    comes from here, and first makes the process hold the memory its steps free
    (:func:`~workbench.runtime.steady_memory.hold_freed_memory`, unless switched off)."""
    hold_freed_memory()
    try:
        return tf().compat.v1.Session(target=target, graph=graph,
                                      config=session_config(target=target, **config))
    except Exception as e:  # noqa: BLE001 - any TF error is reported per call
        raise RuntimeBridgeError(f"{what} failed: {op_error_message(e)}") from None


def timed_runs(sess, op, runs: int) -> list:
    """Wall-clock times (ms) of ``runs`` consecutive ``sess.run(op)``."""
    import time

    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(op)
        out.append((time.perf_counter() - t0) * 1e3)
    return out


@contextmanager
def closing_reported(sess, what: str):
    """Close ``sess`` at the end; a TensorFlow error inside becomes a RuntimeBridgeError
    ("``what`` failed: ..."), workbench errors pass through."""
    try:
        yield sess
    except WorkbenchError:
        raise
    except Exception as e:  # noqa: BLE001 - any TF error is reported per call
        raise RuntimeBridgeError(f"{what} failed: {op_error_message(e)}") from None
    finally:
        sess.close()
