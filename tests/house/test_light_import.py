"""A light start: ``import workbench`` (and a CLI heuristic solve) loads none of the heavy
optional libraries; they load when a method that needs them is first used.

Structural, not timed: each check runs a fresh interpreter and reads its ``sys.modules``."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench._lazy import lazy_module
from workbench.testing.timing import slowdown

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("numba", "pandas", "plotly", "ortools", "highspy", "pulp", "tensorflow", "torch", "dask",
         "pyarrow", "scipy", "sklearn")


def _loaded_after(code: str) -> list:
    """The HEAVY libraries in ``sys.modules`` of a fresh interpreter after running ``code``."""
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=120 * slowdown())
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_workbench_loads_no_heavy_library():
    assert _loaded_after("import workbench\nassert workbench.solve and workbench.compare") == []


def test_public_api_names_still_resolve_without_loading_them():
    code = ("import workbench as wb\n"
            "names = [getattr(wb, n) for n in wb.__all__]\n"
            "assert callable(wb.compare) and callable(wb.robustness) and callable(wb.diff)")
    assert _loaded_after(code) == []


def test_a_heuristic_solve_from_the_cli_loads_no_heavy_library():
    code = ("from workbench.cli import main\n"
            "try:\n    main(['solve', 'cnn:60', '-m', 'heft'])\nexcept SystemExit as e:\n"
            "    assert not e.code, e.code")
    assert _loaded_after(code) == []


def test_the_probe_sees_a_loaded_library():
    """The check can fail: a MILP method loads PuLP and HiGHS when it solves."""
    code = ("import workbench as wb\n"
            "g = wb.samples.cnn(12, seed=0)\n"
            "wb.solve(g, wb.Cluster.preset('2xV100-pcie'), method='ip_contig', time_limit=5)")
    loaded = _loaded_after(code)
    assert "pulp" in loaded and "highspy" in loaded


def test_lazy_module_imports_on_first_use():
    m = lazy_module("workbench.errors")
    assert "not loaded" in repr(m)
    assert issubclass(m.GraphError, Exception) and "(loaded)" in repr(m)
    with pytest.raises(ModuleNotFoundError):
        lazy_module("no_such_module_here_at_all").anything
