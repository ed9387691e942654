"""The TensorFlow bridge on NVIDIA GPUs.

The parsing of GPU traces, the device-name rules and the install choice are tested everywhere;
tests marked ``gpu`` need a GPU that TensorFlow can see and are skipped without one (CI has
none: they run on a machine with the ``gpu`` extra installed, ``make test`` there).
"""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.tf

ROOT = Path(__file__).resolve().parents[2]


def _gpus() -> list:
    from workbench.runtime.gpu import local_gpus

    try:
        return local_gpus()
    except Exception:  # noqa: BLE001 - no usable GPU stack: the gpu tests skip
        return []


needs_gpu = pytest.mark.skipif(not _gpus(), reason="no GPU visible to TensorFlow")


def _stats(records):
    from tensorflow.core.framework import step_stats_pb2

    ss = step_stats_pb2.StepStats()
    for dev, name, start, dur in records:
        d = next((x for x in ss.dev_stats if x.device == dev), None) or ss.dev_stats.add(device=dev)
        d.node_stats.add(node_name=name, all_start_micros=start, all_end_rel_micros=dur)
    return ss


def test_kernel_times_prefer_stream_all_and_sum_kernels():
    from workbench.runtime.gpu import gpu_kernel_times

    ss = _stats([
        ("/job:localhost/replica:0/task:0/device:GPU:0", "mm", 0, 5),  # launch record only
        ("/device:GPU:0/stream:all", "mm:MatMul", 10, 400),
        ("/device:GPU:0/stream:all", "mm:MatMul", 420, 100),
        ("/device:GPU:0/stream:7", "mm:MatMul", 10, 400),           # duplicate of stream:all
        ("/device:GPU:0/memcpy", "mm:MEMCPYHtoD", 0, 900),          # a copy, not compute
        ("/device:GPU:1/stream:3", "relu", 0, 30),                  # GPU 1 has no stream:all
        ("/device:GPU:1/stream:4", "relu:Relu", 40, 20),
    ])
    assert gpu_kernel_times(ss) == {"mm": pytest.approx(0.5), "relu": pytest.approx(0.05)}
    assert gpu_kernel_times(ss, gpu=1) == {"relu": pytest.approx(0.05)}
    assert gpu_kernel_times(_stats([("/device:CPU:0", "a", 0, 10)])) == {}


def test_device_names():
    from workbench.runtime.gpu import gpu_capable, is_gpu_device

    assert is_gpu_device("gpu3") and is_gpu_device("w2/gpu0")
    assert not is_gpu_device("cpu0") and not is_gpu_device("w0/cpu1")
    assert gpu_capable("NoSuchOpType") is False


def test_partitions_are_checked():
    from workbench.errors import RuntimeBridgeError
    from workbench.runtime.gpu import use_partitions

    for bad in (0, -2, 1.5, True):
        with pytest.raises(RuntimeBridgeError, match="partitions"):
            use_partitions(bad)


def test_make_chooses_the_gpu_extra_only_where_nvidia_smi_sees_a_gpu(tmp_path):
    make = shutil.which("make")
    if make is None:
        pytest.skip("make not installed")

    def extras(smi: str | None) -> str:
        bindir = tmp_path / ("with" if smi else "without")
        bindir.mkdir(exist_ok=True)
        if smi is not None:
            f = bindir / "nvidia-smi"
            f.write_text(f"#!/bin/sh\n{smi}\n")
            f.chmod(0o755)
        env = {"PATH": f"{bindir}:/usr/bin:/bin"}
        out = subprocess.run([make, "-s", "-C", str(ROOT), "print-extras"], env=env,
                             capture_output=True, text=True, check=True)
        return out.stdout.strip()

    assert extras(None) == "tf,dev,torch,lab,sweep"
    assert extras("echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-x)'") == "gpu,dev,torch,lab,sweep"
    assert extras("echo 'NVIDIA-SMI has failed'; exit 9") == "tf,dev,torch,lab,sweep"


def test_gpu_extra_declared():
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    gpu = meta["optional-dependencies"]["gpu"]
    assert any(r.replace(" ", "").startswith("tensorflow[and-cuda]") for r in gpu)


# ------------------------------------------------------------------ on a real GPU
@pytest.mark.gpu
@needs_gpu
def test_profile_on_gpu_writes_gpu_costs_and_keeps_host_ops_cpu_only():
    from workbench.runtime import extract, profile

    g = profile(extract("mlp", 32, layers=2, width=256, in_dim=256), device="gpu0",
                steps=3, warmup=2)
    assert g.meta["profile"]["device"] == "gpu0"
    gpu_ops = [v for v in g.ops if "gpu" in g.op(v)["compute"]]
    assert gpu_ops, "no op got a GPU cost"
    assert all(math.isfinite(g.op(v)["compute"]["gpu"]) for v in gpu_ops)
    assert g.op("fc0/MatMul")["compute"]["gpu"] > 0


@pytest.mark.gpu
@needs_gpu
def test_run_plan_on_gpus_is_synchronised():
    import workbench as wb
    from workbench.runtime import extract, profile, run_plan

    g = profile(extract("mlp", 32, layers=2, width=256, in_dim=256), device="gpu0", steps=2,
                warmup=1)
    plan = wb.Plan(g, {v: "gpu0" if "gpu" in g.op(v)["compute"] else "cpu0" for v in g.ops},
                   method="gpu0")
    m = run_plan(plan, steps=5, warmup=2, trace=True)
    assert m.ok and m.mean_ms > 0
    assert any("GPU" in dev for dev, _, _ in m.trace.values())


@pytest.mark.gpu
@needs_gpu
def test_calibrate_gpu_and_host_links():
    from workbench.runtime import calibrate_links

    cl = calibrate_links(["cpu0", "gpu0"], repeats=3, recv_overhead=False)
    assert {d.kind for d in cl.devices} == {"cpu", "gpu"}
    lk = cl.links[("cpu0", "gpu0")]
    assert lk.bandwidth > 0 and lk.r2 is not None
