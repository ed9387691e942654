"""Shared fixtures: small named graphs and clusters, and the MSR workload folder."""

import signal
import threading
from pathlib import Path

import pytest

from workbench._native import block_triton

# TensorFlow then Triton in one process is a segmentation fault (see block_triton); test modules
# import both at collection time in any order, so Triton is blocked for the whole session.
block_triton()

from workbench import Cluster, Device, Link, samples

MSR = Path(__file__).resolve().parents[1] / "sample_graphs" / "msr"

_GUARDED_SIGNALS = [getattr(signal, s) for s in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT",
                                                  "SIGPIPE", "SIGALRM", "SIGCHLD", "SIGUSR1")
                    if hasattr(signal, s)]


@pytest.fixture(autouse=True)
def _no_signal_handler_left_changed(request):
    """No test leaves a signal handler or disposition changed behind it (a later test, or a
    child process it starts, would inherit it: issue 23)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.getsignal(s) for s in _GUARDED_SIGNALS}
    yield
    changed = [s for s, h in before.items() if signal.getsignal(s) != h]
    for s in changed:  # put it back so the next tests are not affected, then fail this one
        signal.signal(s, before[s])
    assert not changed, (f"{request.node.nodeid} left the handler of "
                         f"{', '.join(signal.Signals(s).name for s in changed)} changed")


@pytest.fixture
def diamond():
    return samples.diamond()


@pytest.fixture
def fig2():
    return samples.pesto_fig2()


@pytest.fixture
def two_gpus():
    """Two GPUs joined by a 1 GB/s link with no latency: 1e6 bytes take 1 ms."""
    return Cluster([Device("gpu0"), Device("gpu1")], intra_host=Link(0.0, 1e6), name="two")


@pytest.fixture
def msr_dir():
    if not MSR.exists():
        pytest.skip(f"MSR workloads not found at {MSR}")
    return MSR
