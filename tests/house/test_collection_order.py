"""A suite passes in any file order: collecting a module's doctests before its package was
imported must not rebind the package's names (``make test-order`` found it; conftest.py,
``reexporting_packages``)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_package_keeps_its_function_when_its_module_is_collected_first():
    hybrid = sorted((ROOT / "workbench/solvers/hybrid").glob("*.py"), reverse=True)
    assert hybrid[0].name == "tarnawski.py"       # collected first, as in the reversed run
    test = "tests/solvers/hybrid/test_widths_bound.py"    # imports tarnawski from the package
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:randomly", "-p",
                          "no:cacheprovider", "-n", "0", "-q", *map(str, hybrid), test],
                         capture_output=True, text=True, cwd=ROOT, timeout=600, check=False)
    assert out.returncode == 0, out.stdout[-3000:]
    assert "'module' object is not callable" not in out.stdout
