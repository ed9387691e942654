"""File formats: the workbench's own versioned JSON (graphs, clusters, plans), the MSR workload
format of Tarnawski et al., and Chrome-trace / Perfetto export of schedules.

:func:`load_graph` and :func:`load_problem` detect the format from the file's content.
"""

from ._outputs import transaction
from .detect import load_graph, load_problem
from .files import MAX_INPUT_BYTES, read_json, write_atomic
from .json_format import (SCHEMA_VERSION, dump_cluster, dump_graph, dump_plan, load_cluster,
                          load_plan, save_cluster, save_graph, save_plan)
from .msr import read_expert, read_msr, write_msr_plan
from .trace import save_chrome_trace, schedule_to_chrome_trace

__all__ = ["SCHEMA_VERSION", "MAX_INPUT_BYTES", "transaction", "dump_graph", "dump_cluster", "dump_plan", "load_graph",
           "load_cluster", "load_plan", "load_problem", "save_graph", "save_cluster",
           "save_plan", "read_json", "write_atomic", "read_msr", "read_expert", "write_msr_plan",
           "schedule_to_chrome_trace", "save_chrome_trace"]
