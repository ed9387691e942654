"""Several hosts: TensorFlow's distributed runtime on this machine.

:class:`LocalServers` starts one ``tf.distribute.Server`` per host on free ``127.0.0.1`` ports,
all in one ``ClusterSpec`` with the job ``worker``; each server holds ``cpus_per_host`` logical
CPU devices. Device ``j`` of host ``t`` is called ``wt/cpuj`` in the workbench and
``/job:worker/replica:0/task:t/device:CPU:j`` in TensorFlow, so a plan over those names runs
with ``run_plan(plan, target=servers.target)``; tensors between hosts travel over gRPC.

Servers run in child processes by default (``processes=True``: separate thread pools, like real
hosts, and they are stopped on :meth:`LocalServers.close`); ``processes=False`` starts them in
this process, which is quicker to start but cannot stop them before the process exits.
"""

from __future__ import annotations

import math
import socket
import subprocess
import sys
import time

from ..cluster import Cluster, Device, Link
from ..errors import RuntimeBridgeError
from ._tf import session_config, tf

__all__ = ["LocalServers", "free_ports"]


def free_ports(n: int) -> list[int]:
    """``n`` distinct free TCP ports on 127.0.0.1."""
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


class LocalServers:
    """``hosts`` TensorFlow servers on 127.0.0.1, each with ``cpus_per_host`` CPU devices.

    Use as a context manager::

        with LocalServers(2, 2) as srv:
            m = run_plan(plan, target=srv.target)

    Attributes
    ----------
    addresses : list of str
        ``127.0.0.1:port`` per task.
    target : str
        Session target (the gRPC address of task 0).
    """

    def __init__(self, hosts: int = 2, cpus_per_host: int = 2, *, processes: bool = True,
                 start_timeout: float = 120.0):
        if hosts < 1 or cpus_per_host < 1:
            raise RuntimeBridgeError("LocalServers needs hosts >= 1 and cpus_per_host >= 1")
        self.hosts, self.cpus_per_host, self.processes = hosts, cpus_per_host, processes
        self.addresses = [f"127.0.0.1:{p}" for p in free_ports(hosts)]
        self.target = f"grpc://{self.addresses[0]}"
        self._procs: list = []
        self._servers: list = []
        self._start_timeout = start_timeout

    # -------------------------------------------------------------- lifecycle
    def start(self) -> LocalServers:
        if self.processes:
            for i in range(self.hosts):
                cmd = [sys.executable, "-m", "workbench.runtime.distributed", ",".join(
                    self.addresses), str(i), str(self.cpus_per_host)]
                self._procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                                    stderr=subprocess.PIPE))
            self._wait_ready()
        else:
            t = tf()
            spec = t.train.ClusterSpec({"worker": self.addresses})
            for i in range(self.hosts):
                self._servers.append(t.distribute.Server(
                    spec, job_name="worker", task_index=i,
                    config=session_config(cpus=self.cpus_per_host, target="grpc"),
                    start=True))
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self._start_timeout
        pending = list(zip(self.addresses, self._procs))
        while pending:
            addr, proc = pending[0]
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace")[-500:] if proc.stderr else ""
                self.close()
                raise RuntimeBridgeError(f"TensorFlow server {addr} exited with code "
                                         f"{proc.returncode}: {err.strip()}")
            host, port = addr.split(":")
            try:
                with socket.create_connection((host, int(port)), timeout=0.5):
                    pending.pop(0)
                    continue
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeBridgeError(f"TensorFlow server {addr} did not start within "
                                         f"{self._start_timeout:.0f} s")
            time.sleep(0.2)

    def close(self) -> None:
        for p in self._procs:
            if p.poll() is None:
                p.terminate()
        for p in self._procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
            if p.stderr:
                p.stderr.close()
        self._procs = []

    def __enter__(self) -> LocalServers:  # noqa: PYI034
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -------------------------------------------------------------- workbench view
    @property
    def device_names(self) -> list[str]:
        """``wT/cpuJ`` for every device of every host."""
        return [f"w{t}/cpu{j}" for t in range(self.hosts) for j in range(self.cpus_per_host)]

    def cluster(self, *, intra_host: Link | None = None, inter_host: Link | None = None,
                memory: float = math.inf) -> Cluster:
        """The servers' devices as a :class:`~workbench.cluster.Cluster` (one host per task);
        use :func:`~workbench.runtime.calibrate.calibrate_links` with ``target=`` for fitted
        links."""
        devs = [Device(n, "cpu", memory, host=n.split("/")[0]) for n in self.device_names]
        return Cluster(devs, intra_host=intra_host or Link(0.02, math.inf),
                       inter_host=inter_host or Link(0.2, 1e6),
                       name=f"{self.hosts}-hosts-x{self.cpus_per_host}cpu")


def _serve(addresses: str, index: int, cpus: int) -> None:  # pragma: no cover - child process
    t = tf()
    spec = t.train.ClusterSpec({"worker": addresses.split(",")})
    server = t.distribute.Server(spec, job_name="worker", task_index=index,
                                 config=session_config(cpus=cpus, target="grpc"), start=True)
    server.join()


if __name__ == "__main__":  # pragma: no cover - child process entry point
    _serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
