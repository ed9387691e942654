"""Experiment sweeps: grids of workloads x clusters x methods on Dask, with Parquet results.

A spec (TOML or dict, see :mod:`workbench.sweep.spec`) expands into cells; :func:`run` runs
them on a local cluster of worker processes (or an existing Dask scheduler), writes each chunk
of rows atomically into a results folder, and skips the cells already there on a rerun;
:func:`load` reads the folder back as one DataFrame; :mod:`workbench.sweep.sweep_analysis` gives
win/tie/loss tables, performance profiles and parameter curves (figures in
``widgets.figures.sweep``). See docs/sweeps.md.

Examples
--------
>>> import workbench.sweep as sw
>>> spec = sw.load_spec("bandwidth")
>>> len(spec.cells()) > 0, spec.objective
(True, 'makespan_ms')
"""

from importlib.util import find_spec as _find_spec

from ..errors import SweepError


def _absent(name: str) -> bool:
    try:
        return _find_spec(name) is None
    except (ImportError, ValueError):
        return True


if _missing := [m for m in ("distributed", "pyarrow") if _absent(m)]:
    raise SweepError(f"sweeps need {' and '.join(_missing)}, which the core install leaves out: "
                     "install the `sweep` extra (pip install -e '.[sweep]'; `make lab` and "
                     "`make test` include it)")
from .sweep_analysis import (
    by_parameter,
    markdown_table,
    objective_matrix,
    performance_profile,
    pivot_table,
    results_table,
    win_tie_loss,
    wtl_table,
)
from .cell import load_workload, make_cluster, run_cell
from .engine import (
    QUARANTINE,
    SCHEMA_COLUMNS,
    SweepWarning,
    check_workers,
    connect,
    done_keys,
    load,
    max_workers,
    quarantine,
    run,
)
from .spec import KEY_COLUMNS, MAX_CELLS, Cell, Spec, check_name, load_spec

__all__ = [
    "KEY_COLUMNS",
    "MAX_CELLS",
    "QUARANTINE",
    "SCHEMA_COLUMNS",
    "Cell",
    "Spec",
    "SweepError",
    "SweepWarning",
    "by_parameter",
    "check_name",
    "check_workers",
    "connect",
    "done_keys",
    "load",
    "load_spec",
    "load_workload",
    "make_cluster",
    "markdown_table",
    "max_workers",
    "objective_matrix",
    "performance_profile",
    "pivot_table",
    "quarantine",
    "results_table",
    "run",
    "run_cell",
    "win_tie_loss",
    "wtl_table",
]
