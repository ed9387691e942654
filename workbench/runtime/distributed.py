"""Several hosts: TensorFlow's distributed runtime on this machine.

:class:`LocalServers` starts one ``tf.distribute.Server`` per host on free ``127.0.0.1`` ports,
all in one ``ClusterSpec`` with the job ``worker``; each server holds ``cpus_per_host`` logical
CPU devices. Device ``j`` of host ``t`` is called ``wt/cpuj`` in the workbench and
``/job:worker/replica:0/task:t/device:CPU:j`` in TensorFlow, so a plan over those names runs
with ``run_plan(plan, target=servers.target)``; tensors between hosts travel over gRPC.

Servers run in child processes by default (``processes=True``: separate thread pools, like real
hosts, and they are stopped on :meth:`LocalServers.close`); ``processes=False`` starts them in
this process, which is quicker to start but cannot stop them before the process exits.

Security: TensorFlow's gRPC servers are unauthenticated -- anyone who reaches the port can run
arbitrary graphs -- and TensorFlow binds them to every interface (``0.0.0.0``/``[::]`` is
hard-coded in ``grpc_server_lib.cc``). The child processes are therefore started with a small
``LD_PRELOAD`` shim (built once with the C compiler into the user's cache folder) that turns a
bind to the wildcard address into a bind to loopback, so the servers listen on
``127.0.0.1``/``::1`` only; :func:`listening_addresses` reads ``/proc/net/tcp*`` to check it.
Without a C compiler, or with ``processes=False`` (the bind happens in this process), starting
is refused unless ``bind_all=True`` is passed explicitly. A TensorFlow cluster that spans
several machines must run on a trusted, isolated network.
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..cluster import Cluster, Device, Link
from ..errors import RuntimeBridgeError
from ._tf import session_config, tf

__all__ = ["LocalServers", "free_ports", "listening_addresses", "loopback_shim"]

_SHIM_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
/* Turn binds to the wildcard address into binds to loopback (placement workbench). */
typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);
int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    static bind_fn real = 0;
    if (!real) real = (bind_fn)dlsym(RTLD_NEXT, "bind");
    if (addr && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in a;
        memcpy(&a, addr, sizeof a);
        if (a.sin_addr.s_addr == htonl(INADDR_ANY)) {
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            return real(fd, (const struct sockaddr *)&a, sizeof a);
        }
    } else if (addr && addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 a;
        memcpy(&a, addr, sizeof a);
        if (memcmp(&a.sin6_addr, &in6addr_any, sizeof a.sin6_addr) == 0) {
            /* dual-stack wildcard -> IPv4-mapped 127.0.0.1 (clients dial 127.0.0.1), else ::1 */
            static const unsigned char mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff,
                                                     127, 0, 0, 1};
            memcpy(&a.sin6_addr, mapped, sizeof mapped);
            if (real(fd, (const struct sockaddr *)&a, sizeof a) == 0) return 0;
            a.sin6_addr = in6addr_loopback;
            return real(fd, (const struct sockaddr *)&a, sizeof a);
        }
    }
    return real(fd, addr, len);
}
"""


def loopback_shim() -> Path:
    """Path of the ``LD_PRELOAD`` library that rebinds wildcard binds to loopback (built once
    with the C compiler into ``$XDG_CACHE_HOME/placement-workbench``); RuntimeBridgeError
    when it cannot be built."""
    import hashlib

    tag = hashlib.sha1(_SHIM_C.encode()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    lib = cache / "placement-workbench" / f"loopback_bind_{tag}.so"
    if lib.exists():
        return lib
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        raise RuntimeBridgeError("cannot restrict the TensorFlow servers to loopback: no C "
                                 "compiler (cc) to build the bind shim; install one, or pass "
                                 "bind_all=True on a trusted network")
    lib.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "shim.c", Path(d) / "shim.so"
        src.write_text(_SHIM_C)
        r = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(out), str(src), "-ldl"],
                           capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise RuntimeBridgeError(f"cannot build the loopback bind shim with {cc}: "
                                     f"{' '.join(r.stderr.split())[:300]}")
        os.replace(out, lib)  # atomic: concurrent builders agree
    return lib


def listening_addresses(port: int) -> list[str]:
    """Local addresses (``ip`` strings) with a TCP socket listening on ``port``, read from
    ``/proc/net/tcp`` and ``/proc/net/tcp6`` (Linux; IPv4-mapped IPv6 shown as IPv4).

    >>> s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
    >>> listening_addresses(s.getsockname()[1])
    ['127.0.0.1']
    >>> s.close()
    """
    import ipaddress

    out = []
    for name, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            host, _, hexport = parts[1].partition(":")
            if parts[3] != "0A" or int(hexport, 16) != port:  # 0A = LISTEN
                continue
            raw = bytes.fromhex(host)
            # /proc prints each 32-bit word in host (little-endian) order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            ip = ipaddress.ip_address(raw)
            out.append(str(getattr(ip, "ipv4_mapped", None) or ip))
    return sorted(out)


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
                 start_timeout: float = 120.0, bind_all: bool = False):
        for what, v, top in (("hosts", hosts, 64), ("cpus_per_host", cpus_per_host, 256)):
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= top:
                raise RuntimeBridgeError(f"LocalServers needs 1 <= {what} <= {top}, got {v!r}")
        if not processes and not bind_all:
            raise RuntimeBridgeError("LocalServers(processes=False) would listen on every "
                                     "interface (TensorFlow binds 0.0.0.0); use processes=True "
                                     "(loopback only) or pass bind_all=True on a trusted "
                                     "network")
        self.hosts, self.cpus_per_host, self.processes = hosts, cpus_per_host, processes
        self.bind_all = bind_all
        self.addresses = [f"127.0.0.1:{p}" for p in free_ports(hosts)]
        self.target = f"grpc://{self.addresses[0]}"
        self._procs: list = []
        self._servers: list = []
        self._start_timeout = start_timeout

    # -------------------------------------------------------------- lifecycle
    def start(self) -> LocalServers:
        if self.processes:
            env = dict(os.environ)
            if not self.bind_all:
                shim = str(loopback_shim())
                env["LD_PRELOAD"] = " ".join(x for x in (shim, env.get("LD_PRELOAD")) if x)
            for i in range(self.hosts):
                cmd = [sys.executable, "-m", "workbench.runtime.distributed", ",".join(
                    self.addresses), str(i), str(self.cpus_per_host)]
                self._procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                                    stderr=subprocess.PIPE, env=env))
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
