"""Real-time scheduling of the measuring process (workbench.runtime.realtime) and its switches
in the runner, the profiler and bench/fidelity.py. Every test passes on a machine that refuses
real-time scheduling: the refusal is mocked (os.sched_setscheduler raising PermissionError), and
the tests that need a grant skip without one."""

import os
import threading
import warnings

import pytest

from workbench.errors import RuntimeBridgeError
from workbench.fidelity.ladder import tick_share
from workbench.runtime import realtime as rtmod
from workbench.runtime.realtime import realtime, thread_ids

RT = (os.SCHED_FIFO, os.SCHED_RR)


def _policies() -> dict:
    out = {}
    for tid in thread_ids():
        try:
            out[tid] = os.sched_getscheduler(tid)
        except ProcessLookupError:
            continue
    return out


def _granted() -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with realtime() as ok:
            return ok


needs_grant = pytest.mark.skipif(not _granted(), reason="this machine refuses SCHED_FIFO")


@pytest.fixture
def refused(monkeypatch):
    """os.sched_setscheduler refusing as an unprivileged user's kernel does (EPERM)."""
    def deny(tid, policy, param):
        if policy in RT:
            raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", deny)
    monkeypatch.setattr(rtmod, "_WARNED", set())


def test_switched_off_changes_nothing():
    before = _policies()
    with realtime(False) as ok:
        assert ok is False
        assert _policies() == before


def test_refused_warns_and_measures_at_normal_priority(refused):
    with pytest.warns(RuntimeWarning, match="realtime: sched_setscheduler refused"), \
            realtime() as ok:
        inside = _policies()
    assert ok is False
    assert not any(p in RT for p in inside.values())


def test_refused_and_required_is_a_clear_error(refused):
    with pytest.raises(RuntimeBridgeError, match="realtime: sched_setscheduler refused "
                                                 r"\(PermissionError"), realtime(required=True):
        pass


def test_bad_policy_and_priority_are_errors():
    with pytest.raises(RuntimeBridgeError, match="policy must be 'fifo' or 'rr'"), \
            realtime(policy="batch"):
        pass
    for bad in (0, 100, 5.0, True):
        with pytest.raises(RuntimeBridgeError, match="priority must be an integer 1-99"), \
                realtime(priority=bad):
            pass


@needs_grant
def test_every_thread_is_real_time_inside_and_restored_after():
    stop = threading.Event()
    old = threading.Thread(target=stop.wait)
    old.start()
    before = _policies()
    assert not any(p in RT for p in before.values())
    try:
        with realtime(policy="rr", priority=3) as ok:
            assert ok
            new = threading.Thread(target=stop.wait)  # created inside: inherits SCHED_RR
            new.start()
            inside = _policies()
            assert set(inside.values()) == {os.SCHED_RR}
            assert os.sched_getparam(old.native_id).sched_priority == 3
        after = _policies()
        assert after[old.native_id] == before[old.native_id]
        assert after[new.native_id] not in RT
    finally:
        stop.set()
        old.join()
        new.join()


def test_a_partial_grant_is_undone(monkeypatch):
    """The first thread is set, the second refused: the first goes back to its policy."""
    calls = []
    real = os.sched_setscheduler

    def second_fails(tid, policy, param):
        calls.append((tid, policy))
        if policy in RT and sum(p in RT for _, p in calls) > 1:
            raise PermissionError(1, "Operation not permitted")
        if policy not in RT:
            real(tid, policy, param)

    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        monkeypatch.setattr(os, "sched_setscheduler", second_fails)
        monkeypatch.setattr(rtmod, "_WARNED", set())
        with pytest.warns(RuntimeWarning), realtime() as ok:
            assert not ok
        undo = [c for c in calls if c[1] not in RT]
        assert len(undo) == 1 and undo[0][0] == calls[0][0]
    finally:
        stop.set()
        t.join()


def test_tick_share_counts_steps_at_multiples_of_the_tick():
    assert tick_share([1.8, 4.0, 8.2, 12.0]) == 0.75
    assert tick_share([1.8, 2.0, 3.5]) == 0.0
    assert tick_share([5.0, 6.0], tick_ms=1.0, tol_ms=0.0) == 1.0
    with pytest.raises(RuntimeBridgeError, match="tick_share"):
        tick_share([1.0], tick_ms=0)


# ---------------------------------------------------------------------- the switches
tf_needed = pytest.mark.tf


@pytest.fixture(scope="module")
def mlp():
    pytest.importorskip("tensorflow")
    import workbench.runtime as rt

    return rt.extract("mlp", 8, **rt.TINY["mlp"])


@tf_needed
def test_runner_falls_back_when_refused(mlp, refused):
    from workbench import Plan
    from workbench.runtime import run_plan

    plan = Plan(mlp, {v: "cpu0" for v in mlp.ops}, method="one")
    with pytest.warns(RuntimeWarning, match="realtime"):
        m = run_plan(plan, steps=2, warmup=1, trace=True, realtime=True)
    assert m.ok and len(m.samples) == 2 and m.realtime is False and m.trace
    assert m.to_dict()["realtime"] is False


@tf_needed
@needs_grant
def test_runner_and_profile_measure_under_real_time(mlp):
    from workbench import Plan
    from workbench.runtime import measure_plans, profile, run_plan

    plan = Plan(mlp, {v: "cpu0" for v in mlp.ops}, method="one")
    assert run_plan(plan, steps=2, warmup=1, realtime=True).realtime is True
    assert run_plan(plan, steps=2, warmup=1).realtime is False
    res = measure_plans(mlp, [plan], steps=2, warmup=1, rounds=2, realtime=True)
    assert res["one"].realtime is True
    g = profile(mlp, steps=2, warmup=1, timed_steps=3, realtime=True)
    assert g.meta["profile"]["realtime"] is True
    assert not any(p in RT for p in _policies().values())  # all put back


@tf_needed
def test_profile_records_a_refusal(mlp, refused):
    from workbench.runtime import profile

    with pytest.warns(RuntimeWarning, match="realtime"):
        g = profile(mlp, steps=2, warmup=1, timed_steps=2, realtime=True)
    assert g.meta["profile"]["realtime"] is False


def test_fidelity_bench_stops_when_refused(refused):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "fidelity.py"
    spec = importlib.util.spec_from_file_location("fidelity_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    with pytest.raises(SystemExit, match="--realtime: realtime: sched_setscheduler refused"):
        bench.main(["--realtime", "--models", "mlp"])


@tf_needed
def test_sessions_measured_in_real_time_do_not_spin():
    pytest.importorskip("tensorflow")
    from workbench.runtime._tf import session_config

    assert session_config(cpus=2).experimental.disable_thread_spinning is False
    assert session_config(cpus=2, spinning=False).experimental.disable_thread_spinning is True


# ------------------------------------------------------------- idle CPUs poll (PM QoS request)
def _cpu_latency_holders() -> int:
    """How many open file descriptors of this process point at /dev/cpu_dma_latency."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}") == "/dev/cpu_dma_latency"
        except OSError:
            continue
    return n


def test_idle_poll_holds_the_request_only_inside_the_block(tmp_path):
    # a stand-in device file: the request is the int32 0 written to it, held while open
    path = tmp_path / "cpu_dma_latency"
    path.write_bytes(b"")
    with rtmod.idle_poll(path=str(path)) as held:
        assert held is True
        assert path.read_bytes() == (0).to_bytes(4, "little", signed=True)
        assert any(os.readlink(f"/proc/self/fd/{fd}") == str(path)
                   for fd in os.listdir("/proc/self/fd") if os.path.islink(f"/proc/self/fd/{fd}"))
    assert not any(os.path.islink(f"/proc/self/fd/{fd}")
                   and os.readlink(f"/proc/self/fd/{fd}") == str(path)
                   for fd in os.listdir("/proc/self/fd"))


def test_idle_poll_refused_warns_once_and_changes_nothing(monkeypatch, tmp_path):
    monkeypatch.setattr(rtmod, "_WARNED", set())
    missing = str(tmp_path / "no" / "cpu_dma_latency")
    with pytest.warns(RuntimeWarning, match="idle_poll: .* refused"), \
            rtmod.idle_poll(path=missing) as held:
        assert held is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # a second refusal for the same reason stays quiet
        with rtmod.idle_poll(path=missing) as held:
            assert held is False


@needs_grant
def test_realtime_holds_idle_poll_by_default_and_can_leave_it(monkeypatch):
    if not os.access("/dev/cpu_dma_latency", os.W_OK):
        pytest.skip("no writable /dev/cpu_dma_latency")
    before = _cpu_latency_holders()
    with realtime():
        assert _cpu_latency_holders() == before + 1
    assert _cpu_latency_holders() == before
    with realtime(poll=False):
        assert _cpu_latency_holders() == before
    monkeypatch.setattr(rtmod, "IDLE_POLL", False)
    with realtime():
        assert _cpu_latency_holders() == before
