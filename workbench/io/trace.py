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

from .json_format import write_atomic

__all__ = ["schedule_to_chrome_trace", "save_chrome_trace"]


def schedule_to_chrome_trace(schedule) -> dict:
    names = schedule.cluster.names
    events = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "devices"}},
              {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "links"}}]
    for i, d in enumerate(names):
        events.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": i, "args": {"name": d}})
    g = schedule.graph
    crit = set(schedule.critical_ops())
    for i, v in enumerate(g.ops):
        a = g.nx.nodes[v]
        events.append({"ph": "X", "pid": 1, "tid": int(schedule.device[i]), "name": v,
                       "cat": a["kind"], "ts": float(schedule.start[i]) * 1e3,
                       "dur": float(schedule.end[i] - schedule.start[i]) * 1e3,
                       "args": {"op_type": a["op_type"], "critical": v in crit}})
    lanes: dict = {}
    for k in range(schedule.n_transfers):
        lane = schedule.link_name(k)
        if lane not in lanes:
            lanes[lane] = len(lanes)
            events.append({"ph": "M", "name": "thread_name", "pid": 2, "tid": lanes[lane],
                           "args": {"name": lane}})
        events.append({"ph": "X", "pid": 2, "tid": lanes[lane],
                       "name": g.c.names[int(schedule.t_op[k])], "cat": "transfer",
                       "ts": float(schedule.t_start[k]) * 1e3,
                       "dur": float(schedule.t_end[k] - schedule.t_start[k]) * 1e3,
                       "args": {"bytes": float(schedule.t_bytes[k])}})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"graph": g.name, "method": schedule.method,
                          "makespan_ms": schedule.makespan}}


def save_chrome_trace(schedule, path) -> None:
    write_atomic(path, json.dumps(schedule_to_chrome_trace(schedule)))
