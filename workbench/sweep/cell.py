"""One sweep cell: build the problem, solve, judge (and measure); one row of results.

The row has :data:`workbench.compare.COLUMNS` (the same numbers :func:`workbench.compare`
gives), the cell's keys, the solver's own bound, wall time, peak resident memory, host and
package versions. :func:`run_cell` never raises: a failure is a row with status ``error``.

Examples
--------
>>> from workbench.sweep import Spec
>>> from workbench.sweep.cell import run_cell
>>> cell = Spec.from_dict({"workloads": ["diamond"], "clusters": {"presets": ["2xV100-pcie"]},
...                        "methods": {"m_topo": {}}}).cells()[0]
>>> row = run_cell(cell.as_dict())
>>> row["method"], row["status"], round(row["makespan_ms"], 2), row["n_devices"]
('m_topo', 'heuristic', 5.02, 2)
"""

from __future__ import annotations

import functools
import json
import math
import os
import platform
import socket
import sys
import time
from dataclasses import replace

from ..errors import SweepError, WorkbenchError

__all__ = [
    "RESULT_COLUMNS",
    "error_row",
    "load_workload",
    "make_cluster",
    "run_cell",
    "versions",
]

RESULT_COLUMNS = ["key", "n_devices", "graph_ops", "bound", "solver_gap", "wall_s",
                  "peak_rss_bytes", "host", "pid", "wb_version", "versions", "finished_at"]
"""Columns a sweep adds to :data:`workbench.compare.COLUMNS` and the cell's keys."""


@functools.lru_cache(maxsize=8)
def load_workload(spec: str):
    """``(graph, own_cluster or None)`` of a workload, as the command line takes it
    (:func:`workbench.workloads.resolve`: a file, an ONNX model, ``msr:NAME``, ``suite:NAME``
    or a sample ``NAME[:N_OPS]``).

    Cached per process: a worker builds each graph once for all its cells.

    >>> g, own = load_workload("diamond")
    >>> g.n_ops, own
    (4, None)
    """
    from ..workloads import resolve

    return resolve(spec)


def make_cluster(preset: str, graph, own=None, *, devices: int = 0, bandwidth_scale: float = 1.0,
                 latency_scale: float = 1.0, memory_fraction: float = math.nan):
    """A preset (or ``"own"``: the workload's cluster) varied as a sweep asks.

    ``devices`` > 0 keeps the first n devices, or repeats the preset's devices (and hosts) to
    reach n; links are scaled (bandwidth times ``bandwidth_scale``, latency times
    ``latency_scale``); ``memory_fraction`` sets every device's memory to that fraction of the
    model's live footprint (:func:`workbench.workloads.memory_footprint`).

    >>> from workbench import samples
    >>> c = make_cluster("2x4xV100", samples.diamond(), devices=12, bandwidth_scale=0.5)
    >>> len(c), c.hosts()[-1], c.intra_host.bandwidth / 1e6
    (12, 'h0-1', 22.5)
    """
    from ..cluster import Cluster

    if preset == "own":
        if own is None:
            raise SweepError(f"preset 'own' but workload {graph.name!r} carries no cluster")
        base = own
    else:
        base = Cluster.preset(preset)
    devs = list(base.devices)
    if devices and devices != len(devs):
        if devices < len(devs):
            devs = devs[:devices]
        else:
            out = []
            for i in range(devices):
                d = devs[i % len(devs)]
                block = i // len(devs)
                out.append(replace(d, name=f"{d.kind}{i}" if block else d.name,
                                   host=f"{d.host}-{block}" if block else d.host))
            devs = out
    if not math.isnan(memory_fraction):
        from ..workloads import memory_footprint

        total = memory_footprint(graph, base)  # the judge's live model (issue 42)
        devs = [replace(d, memory=total * memory_fraction) for d in devs]
    return base.with_devices(devs, bandwidth_scale=bandwidth_scale, latency_scale=latency_scale,
                             name=base.name if len(devs) == len(base) else
                             f"{base.name}[{len(devs)}]")


@functools.lru_cache(maxsize=1)
def versions() -> str:
    """JSON of the versions of Python and the packages that decide a cell's numbers."""
    from importlib import metadata

    out = {"python": platform.python_version()}
    for pkg in ("placement-workbench", "numpy", "pandas", "networkx", "pulp", "highspy",
                "pymetis", "dask", "distributed", "pyarrow"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return json.dumps(out, sort_keys=True)


def _reset_peak_rss() -> None:
    try:  # Linux: "5" resets the high-water mark of the resident set (VmHWM)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_rss() -> int:
    """Peak resident memory of this process in bytes (since the last reset, on Linux)."""
    try:
        with open("/proc/self/status") as f:
            for ln in f:
                if ln.startswith("VmHWM:"):
                    return int(ln.split()[1]) * 1024
    except OSError:
        pass
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r if sys.platform == "darwin" else r * 1024)


def _resolve_params(params: dict) -> dict:
    """Expert splits named ``msr:...`` point at the bundled expert files on this machine."""
    out = dict(params)
    s = out.get("split")
    if isinstance(s, str) and s.startswith("msr:"):
        from ..io.msr import msr_path

        out["split"] = str(msr_path(s))
    return out


def _row_base(cell: dict) -> dict:
    from .spec import KEY_COLUMNS, Cell

    c = Cell(**cell)
    row = {k: cell[k] for k in KEY_COLUMNS}
    row["key"] = c.key
    return row


def run_cell(cell: dict) -> dict:
    """Solve, judge (and measure) one cell; never raises (errors become the row's ``error``)."""
    from ..compare import COLUMNS, compare
    from ..solvers import SOLVERS

    t0 = time.perf_counter()
    _reset_peak_rss()
    row = _row_base(cell)
    row.update({c: math.nan for c in COLUMNS})
    info = SOLVERS.get(cell["solver"])
    row.update(method=cell["method"], family=info.family if info else "",
               objective=info.objective if info else "", status="error", error="",
               n_devices=0, graph_ops=0, bound=math.nan, solver_gap=math.nan)
    try:
        graph, own = load_workload(cell["workload"])
        cluster = make_cluster(cell["preset"], graph, own, devices=cell["devices"],
                               bandwidth_scale=cell["bandwidth_scale"],
                               latency_scale=cell["latency_scale"],
                               memory_fraction=cell["memory_fraction"])
        row.update(n_devices=len(cluster), graph_ops=graph.n_ops)
        tl = cell["time_limit"]
        cmp = compare(graph, cluster, [cell["solver"]],
                      time_limit=None if math.isinf(tl) else tl,
                      params={cell["solver"]: _resolve_params(json.loads(cell["params"]))},
                      seed=cell["seed"], congestion=cell["congestion"], progress=False,
                      measure=cell["measure"],
                      measure_options=json.loads(cell.get("measure_options", "{}")))
        if cell["solver"] in cmp.left_out:  # the method cannot serve this cell: no result
            row.update(status="error", error=f"not applicable: {cmp.left_out[cell['solver']]}")
            rec = {}
        else:
            rec = cmp.table.iloc[0].to_dict()
            rec.pop("method")
        row.update(rec)
        plan = cmp.plans.get(cell["solver"])
        if plan is not None:
            row["bound"] = float(plan.stats.get("bound", math.nan) or math.nan)
            row["solver_gap"] = float(plan.stats.get("gap", math.nan) or math.nan)
    except (WorkbenchError, ValueError, RuntimeError, ArithmeticError, MemoryError,
            OSError) as e:
        row.update(status="error", error=f"{type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001  (a bug in a solver must not stop the sweep)
        row.update(status="error", error=f"{type(e).__name__}: {e}")
    row.update(wall_s=time.perf_counter() - t0, peak_rss_bytes=peak_rss(),
               host=socket.gethostname(), pid=os.getpid(), wb_version=_wb_version(),
               versions=versions(), finished_at=time.time())
    return row


def error_row(cell: dict, message: str, *, status: str = "error", wall_s: float = math.nan) -> dict:
    """The row of a cell that produced no result of its own (timeout, dead process or worker).

    >>> from workbench.sweep import Spec
    >>> cell = Spec.from_dict({"workloads": ["diamond"], "methods": {"single": {}}}).cells()[0]
    >>> r = error_row(cell.as_dict(), "stopped", status="timeout")
    >>> r["status"], r["error"], r["method"]
    ('timeout', 'stopped', 'single')
    """
    from ..compare import COLUMNS
    from ..solvers import SOLVERS

    row = _row_base(cell)
    row.update({c: math.nan for c in COLUMNS})
    info = SOLVERS.get(cell["solver"])
    row.update(method=cell["method"], family=info.family if info else "",
               objective=info.objective if info else "", status=status, error=message,
               n_devices=0, graph_ops=0, bound=math.nan, solver_gap=math.nan, wall_s=wall_s,
               peak_rss_bytes=0, host="", pid=0, wb_version=_wb_version(), versions="",
               finished_at=time.time())
    return row


def _wb_version() -> str:
    from .. import __version__

    return __version__
