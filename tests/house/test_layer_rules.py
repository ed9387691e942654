"""Layer rules that import-linter cannot see alone (pyproject.toml holds the import contracts):
views never call a solver, even through ``import workbench as wb``; ``workbench demo`` runs with
neither TensorFlow nor PyTorch importable (``make demo`` installs the core alone)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.testing.timing import slowdown

ROOT = Path(__file__).resolve().parents[2]


def solve_calls(source: str) -> list[int]:
    """Line numbers of calls to anything named ``solve`` (``solve(...)``, ``wb.solve(...)``).

    >>> solve_calls("import workbench as wb\\nwb.solve(g, c)\\nresolve(x)\\n")
    [2]
    """
    return [n.lineno for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)
            and ((isinstance(n.func, ast.Name) and n.func.id == "solve")
                 or (isinstance(n.func, ast.Attribute) and n.func.attr == "solve"))]


def test_solve_calls_finds_the_ways_a_view_could_solve():
    assert solve_calls("from workbench import solve\nsolve(g, c, method='heft')\n") == [2]
    assert solve_calls("import workbench\nworkbench.solvers.solve(g, c)\n") == [2]
    assert solve_calls("x = resolve('diamond')\nwb.compare(g, c)\n") == []


def test_views_never_solve():
    """Widgets draw what a Comparison holds; which methods suit a problem is
    :func:`workbench.compare.default_methods` (metadata, nothing run), and running methods is
    :func:`workbench.compare`'s."""
    found = {str(p.relative_to(ROOT)): lines for p in sorted((ROOT / "widgets").rglob("*.py"))
             if (lines := solve_calls(p.read_text(encoding="utf-8")))}
    assert not found, f"views that call a solver: {found}"


OPTIONAL = {"tensorflow", "torch", "keras", "transformers", "jupyterlab", "distributed", "dask",
            "pyarrow"}
"""Top-level packages of the extras (``tf``, ``torch``, ``lab``, ``sweep``): absent from the core."""
BLOCK = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {sorted(OPTIONAL)}:
            raise ModuleNotFoundError(f"{{name}} is not in the core (blocked by the test)")
sys.meta_path.insert(0, Block())
from workbench.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _core_cli(tmp_path, *args):
    """The command line as the core install has it: the extras' packages cannot be imported."""
    return subprocess.run([sys.executable, "-c", BLOCK, *args], capture_output=True, text=True,
                          timeout=600 * slowdown(), cwd=tmp_path,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


@pytest.mark.slow  # a fresh interpreter runs the whole demo (6 s)
def test_the_demo_needs_neither_tensorflow_nor_torch(tmp_path):
    """What ``make demo`` installs (the core: no TensorFlow, PyTorch or JupyterLab) runs
    ``workbench demo`` and writes its report."""
    report = tmp_path / "demo.html"
    r = _core_cli(tmp_path, "demo", "--graph", "transformer:30", "--time-limit", "1",
                  "--report", str(report))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "report written to" in r.stdout and report.stat().st_size > 10_000


def test_a_sweep_on_the_core_names_the_extra_it_needs(tmp_path):
    r = _core_cli(tmp_path, "sweep", "bandwidth", "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert "error: sweeps need distributed and pyarrow" in r.stderr
    assert "`sweep` extra" in r.stderr
