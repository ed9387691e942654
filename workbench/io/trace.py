"""Chrome-trace / Perfetto JSON export of a :class:`~workbench.plan.Schedule`.

Open the file in https://ui.perfetto.dev or chrome://tracing. Devices are one process, links
another; each device or link is a thread (lane). Times are microseconds in the file.

>>> from workbench import samples, Cluster, solve, simulate
>>> g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
>>> tr = simulate(solve(g, c, method="round_robin"), c).to_chrome_trace()
>>> sorted({e["ph"] for e in tr["traceEvents"]})
['M', 'X']
"""

from __future__ import annotations

import json

from .files import write_atomic

__all__ = ["schedule_to_chrome_trace", "save_chrome_trace"]


def schedule_to_chrome_trace(schedule) -> dict:
    """The trace object of a schedule (:meth:`~workbench.plan.Schedule.to_chrome_trace`)."""
    return schedule.to_chrome_trace()


def save_chrome_trace(schedule, path) -> None:
    write_atomic(path, json.dumps(schedule_to_chrome_trace(schedule)))
