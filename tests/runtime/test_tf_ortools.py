"""OR-Tools' CP-SAT must keep working in a process that has loaded TensorFlow.

Both ship native libraries (abseil, protobuf); with ortools 9.15 and TensorFlow 2.21 a CP-SAT
solve after ``import tensorflow`` dies with a segmentation fault, which took down whole test
workers and would take down a notebook kernel that profiles a model and then runs ``pesto``.
pyproject.toml pins the ortools series that runs beside TensorFlow; this test catches a pair
that does not, in a child process so that a crash is a failure and not a dead runner.
"""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.tf

CODE = """
import tensorflow as tf
tf.constant(1.0) + 1
import workbench as wb
g = wb.samples.diamond()
plan = wb.solve(g, wb.Cluster.preset("2xV100-pcie"), method="pesto", time_limit=5, seed=0,
              engine="cpsat")
print("ok", plan.status)
"""


def test_cpsat_runs_after_tensorflow_is_loaded():
    r = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, (f"CP-SAT after TensorFlow: exit {r.returncode} (-11 = segfault; "
                               f"check the ortools pin in pyproject.toml)\n{r.stderr[-2000:]}")
    assert r.stdout.split()[0] == "ok"
