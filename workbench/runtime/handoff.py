"""What one cross-device tensor costs between logical devices of one process, measured by
micro-benchmarks of the runner's own execution regime (the ``handoff`` model change).

Between logical CPU devices a tensor is passed by reference: no bytes move, but TensorFlow's
``_Send``/``_Recv`` pair and the rendezvous still cost time, in three places:

``send_ms``
    on the *sender's* thread, per tensor: the ``_Send`` kernel, and the waiting ``_Recv``'s
    completion callback, which runs on the sender's thread and marks the consumer ready.
    Measured as a chain of ``n`` small matmuls on device A whose every output is also consumed
    on device B (B's consumers are cheap and B is otherwise idle), minus the same chain without
    the consumers, divided by ``n``.
``recv_ms``
    on the *receiver's* thread, per tensor, when the tensor arrived before the consumer needed
    it: a chain on device B whose every op also adds a tensor made early on device A, minus the
    same chain with those tensors made on B, divided by ``n``.
``latency(idle)``
    the delay between the producer's end and the consumer's start when the consumer waits for
    the tensor (it *binds*): the receiving thread sleeps (sessions measured under real-time
    scheduling do not spin) and must be woken, and a thread that slept longer wakes later (on a
    VM the idle virtual CPU halts and the host must schedule it again). Measured as a ping-pong
    chain: ``k`` matmuls on A, ``k`` on B, ... (every hand-off after an idle period of ``k``
    ops) against the same chain on one device; the extra time per hand-off minus
    ``send_ms + recv_ms``. A least-squares line ``latency_ms + slope * idle`` over the ``k``
    (idle capped at :data:`IDLE_CAP_MS`) is the model. The ping-pong sweep over the ``k`` runs
    in three passes, one after the other, and each ``k`` takes the median of its passes'
    idle and extra time: five points carry a line, and one disturbed point carries it away
    (measured: in one bench run the two-device chain at 0.47 ms idle ran 0.44 ms a hand-off
    slow in both of its back-to-back sessions, where twelve other runs measured 0-31 us, and
    the slope came out 0.62 against their 0.003-0.07). A disturbance now has to hit the same
    ``k`` in two passes, several seconds apart.

The benchmarks run in sessions configured as the runner's (one intra-op thread, as many
inter-op threads as devices, thread spinning off under real-time scheduling), so they measure
the regime the plans run in. Each figure is the median of ``repeats`` timed steps after a
warm-up, the smallest over ``trials`` fresh sessions (the least disturbed); of the ping-pong
chains, the median over :data:`PASSES` passes (see ``latency(idle)``).
"""

from __future__ import annotations

import statistics

import numpy as np

from ..errors import RuntimeBridgeError
from ..fidelity.extras import IDLE_CAP_MS, HandoffCosts
from ._tf import closing_reported, new_session, tf, tf_device, timed_runs
from .realtime import realtime as realtime_scheduling

__all__ = ["PASSES", "measure_handoff"]

_SIZE = 32          # matmul operand side (a few microseconds per op, like the small models)
_N = 200            # tensors per send / receive benchmark
_IDLE_KS = (1, 16, 64, 160, 320)  # ops per ping-pong segment (idle periods ~3 us .. ~0.5 ms)

PASSES = 3
"""Passes of the ping-pong sweep; each point is the median of its passes (see the module)."""


def _matmul_chain(t, x, w, k: int, dev: str):
    with t.device(dev):
        for _ in range(k):
            x = t.matmul(x, w)
    return x


def _graph(kind: str, a: str, b: str, k: int = 1, segments: int = 0):
    """One benchmark graph (``kind``: ``alone``, ``send``, ``recv``, ``recv-local``,
    ``pingpong``, ``pingpong-local``) on TF devices ``a`` and ``b``; returns graph, init, step."""
    t = tf()
    rng = np.random.default_rng(0)
    g = t.Graph()
    with g.as_default():
        with t.device(a):
            xv = t.compat.v1.Variable(rng.random((_SIZE, _SIZE), dtype=np.float32))
            w = t.constant(rng.random((_SIZE, _SIZE), dtype=np.float32) / _SIZE)
            x0 = xv.read_value()
        outs = []
        if kind in ("alone", "send"):
            x, prev = x0, None
            for _ in range(_N):
                with t.device(a), t.control_dependencies([prev] if prev is not None else []):
                    x = t.matmul(x, w)
                prev = x.op
                if kind == "send":
                    with t.device(b):
                        outs.append(t.reduce_sum(x))
            with t.device(a):
                outs.append(t.reduce_sum(x))
        elif kind in ("recv", "recv-local"):
            with t.device(a if kind == "recv" else b):
                items = [x0 + float(i) for i in range(_N)]
            x, prev = x0, None
            with t.device(b):
                for i in range(_N):
                    with t.control_dependencies([prev] if prev is not None else []):
                        x = t.matmul(x, w) + items[i]
                    prev = x.op
                outs.append(t.reduce_sum(x))
        else:  # ping-pong: segments of k ops alternating between a and b (or all on a)
            x = x0
            for s in range(segments):
                dev = b if (kind == "pingpong" and s % 2) else a
                x = _matmul_chain(t, x, w, k, dev)
            with t.device(a):
                outs.append(t.reduce_sum(x))
        step = t.group(*outs)
        init = t.compat.v1.global_variables_initializer()
    return g, init, step


def _time(kind: str, a: str, b: str, *, repeats: int, trials: int, spinning: bool, **kw) -> float:
    best = float("inf")
    for _ in range(trials):
        g, init, step = _graph(kind, a, b, **kw)
        cpus = 1 + max(int(a.rsplit(":", 1)[1]), int(b.rsplit(":", 1)[1]))
        sess = new_session(g, what="hand-off benchmark", cpus=cpus, inter_op=2, intra_op=1,
                           spinning=spinning)
        with closing_reported(sess, "hand-off benchmark"):
            sess.run(init)
            timed_runs(sess, step, 10)
            best = min(best, statistics.median(timed_runs(sess, step, repeats)))
    return best


def measure_handoff(devices=("cpu0", "cpu1"), *, repeats: int = 60, trials: int = 2,
                    segments: int = 16, passes: int = PASSES,
                    realtime: bool = False) -> HandoffCosts:
    """Measure :class:`HandoffCosts` between two logical CPU devices of this process.

    ``realtime``: under ``SCHED_FIFO`` with thread spinning off, as the runner measures plans
    with ``realtime=True`` (see :mod:`workbench.runtime.realtime`). ``passes``: how many times
    the ping-pong sweep runs, one session per chain and pass (each point the median of its
    passes); the send and receive benchmarks keep the least disturbed of ``trials`` sessions.
    Takes about 30 s with the defaults (27 s measured).
    """
    _check_handoff_args(devices, repeats=repeats, trials=trials, segments=segments,
                        passes=passes)
    a, b = (tf_device(d) for d in devices)
    spin = not realtime
    run = {"repeats": repeats, "trials": trials, "spinning": spin}
    with realtime_scheduling(realtime):
        alone = _time("alone", a, b, **run)
        send = max(0.0, (_time("send", a, b, **run) - alone) / _N)
        recv = max(0.0, (_time("recv", a, b, **run) - _time("recv-local", a, b, **run)) / _N)
        sweeps = [_pingpong_sweep(a, b, segments=segments, send=send, recv=recv,
                                  **{**run, "trials": 1}) for _ in range(max(1, int(passes)))]
    points = _median_points(sweeps)
    idle = np.minimum([p[0] for p in points], IDLE_CAP_MS)
    cost = np.array([p[1] for p in points])
    slope, lat = np.polyfit(idle, cost, 1) if len(points) > 1 else (0.0, float(cost[0]))
    slope = max(0.0, float(slope))
    lat = max(0.0, float(np.mean(cost - slope * idle)))
    return HandoffCosts(float(send), float(recv), lat, slope, tuple(points),
                        tuple(tuple(sw) for sw in sweeps))


def _check_handoff_args(devices, **counts) -> None:
    """Two distinct device names and positive whole counts, checked before any session starts
    (one device was an unpacking traceback, two equal names a benchmark of nothing; issue 41).

    >>> _check_handoff_args(("cpu0",), repeats=1)
    Traceback (most recent call last):
    ...
    workbench.errors.RuntimeBridgeError: measure_handoff needs two distinct device names, got ('cpu0',)
    """
    if (isinstance(devices, (str, bytes)) or not isinstance(devices, (tuple, list))
            or len(devices) != 2 or not all(isinstance(d, str) and d for d in devices)
            or devices[0] == devices[1]):
        raise RuntimeBridgeError(f"measure_handoff needs two distinct device names, got "
                                 f"{devices!r}")
    for key, v in counts.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise RuntimeBridgeError(f"measure_handoff: {key} must be a positive integer, "
                                     f"got {v!r}")


def _pingpong_sweep(a: str, b: str, *, segments: int, send: float, recv: float, **run) -> list:
    """One pass of the ping-pong chains over :data:`_IDLE_KS`: ``(idle_ms, handoff_ms)`` per
    ``k`` (the extra time per hand-off over the one-device chain, less ``send + recv``)."""
    points = []
    for k in _IDLE_KS:
        one = _time("pingpong-local", a, b, k=k, segments=segments, **run)
        two = _time("pingpong", a, b, k=k, segments=segments, **run)
        per_op = one / (segments * k)
        points.append((k * per_op, max(0.0, (two - one) / (segments - 1) - send - recv)))
    return points


def _median_points(sweeps: list) -> list:
    """Per ``k``, the median over the passes of the idle period and of the hand-off cost.

    >>> _median_points([[(0.1, 0.01)], [(0.12, 0.4)], [(0.11, 0.012)]])   # one pass disturbed
    [(0.11, 0.012)]
    """
    return [(float(np.median([sw[i][0] for sw in sweeps])),
             float(np.median([sw[i][1] for sw in sweeps]))) for i in range(len(sweeps[0]))]
