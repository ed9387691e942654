"""TensorFlow, PyTorch and OR-Tools' CP-SAT in one process, in both import orders.

All three ship native libraries (abseil, protobuf, OpenMP); a clash shows up as a segmentation
fault in the second library's first call (the ortools pin of pyproject.toml exists because of
one, see tests/runtime/test_tf_ortools.py). A notebook that profiles a TensorFlow model, captures a
PyTorch one and runs ``pesto`` does all three, so each order runs in a child process: a crash is
a failure, not a dead test runner.
"""

import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("tensorflow")
pytestmark = [pytest.mark.tf, pytest.mark.torch]

TF = "import tensorflow as tf\nassert float(tf.constant(2.0) * 3) == 6.0\n"
TORCH = ("import torch\nx = torch.ones(4, 4, requires_grad=True)\n(x @ x).sum().backward()\n"
         "assert float(x.grad.sum()) == 128.0\n")
CPSAT = """
import workbench as wb
plan = wb.solve(wb.samples.diamond(), wb.Cluster.preset("2xV100-pcie"), method="pesto",
                time_limit=5, seed=0, engine="cpsat")
print("ok", plan.status)
"""


def _run_order(order: str, parts: dict) -> None:
    code = "\n".join(parts[p] for p in order.split("-"))
    r = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, (f"{order}: exit {r.returncode} (-11 = segfault: check the torch "
                               f"and ortools pins in pyproject.toml)\n{r.stderr[-2000:]}")
    assert "ok" in r.stdout.split()


# the third order, tf-torch-cpsat, is test_from_torch_after_a_users_tensorflow_import's child
# (one interpreter for both: each child pays TensorFlow's and torch's imports, about 5 s)
@pytest.mark.parametrize("order", ["torch-tf-cpsat", "cpsat-torch-tf"])
def test_tensorflow_torch_and_cpsat_in_one_process(order):
    _run_order(order, {"tf": TF, "torch": TORCH, "cpsat": CPSAT})


FLOPS = """
import torch
from torch.utils.flop_counter import FlopCounterMode
with FlopCounterMode(display=False) as m:
    torch.ones(8, 16) @ torch.ones(16, 4)
assert m.get_total_flops() == 2 * 8 * 16 * 4, m.get_total_flops()
print("ok")
"""


@pytest.mark.parametrize("tf_import", ["workbench", "direct-then-block"])
def test_torch_flop_counter_after_tensorflow(tf_import):
    """Triton after TensorFlow is a segfault (workbench._native.block_triton): the
    workbench's TF import blocks Triton first, so torch's flop counter (which imports Triton)
    still works after it."""
    if tf_import == "workbench":
        head = "from workbench.runtime._tf import tf\ntf()\n"
    else:  # a user who imported TF themselves: the block before torch's first Triton import
        head = ("import tensorflow\nfrom workbench._native import block_triton\n"
                "assert block_triton()\n")
    r = subprocess.run([sys.executable, "-c", head + FLOPS], check=False, capture_output=True,
                       text=True,
                       timeout=300)
    assert r.returncode == 0, f"exit {r.returncode} (-11 = segfault)\n{r.stderr[-2000:]}"
    assert "ok" in r.stdout.split()


CAPTURE = ("from workbench.io.torch import from_torch\n"
           "g = from_torch(torch.nn.Linear(8, 4), (torch.ones(2, 8),), training=True, "
           "profile=None)\n"
           "assert g.n_ops > 0\n")


def test_from_torch_after_a_users_tensorflow_import():
    """A user who imported TensorFlow first, then captures a PyTorch model: the capture's
    torch import blocks Triton (workbench._native.import_torch) instead of crashing. The same
    child then solves with CP-SAT: the tf-torch-cpsat order of
    test_tensorflow_torch_and_cpsat_in_one_process."""
    _run_order("tf-torch-capture-cpsat",
               {"tf": TF, "torch": TORCH, "capture": CAPTURE, "cpsat": CPSAT})
