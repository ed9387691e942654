"""Shared fixtures: small named graphs and clusters, and the MSR workload folder."""

from pathlib import Path

import pytest

from workbench import Cluster, Device, Link, samples

MSR = Path(__file__).resolve().parents[1] / "sample_graphs" / "msr"


@pytest.fixture
def diamond():
    return samples.diamond()


@pytest.fixture
def fig2():
    return samples.pesto_fig2()


@pytest.fixture
def two_gpus():
    """Two GPUs joined by a 1 GB/s link with no latency: 1e6 bytes take 1 ms."""
    return Cluster([Device("gpu0"), Device("gpu1")], intra_host=Link(0.0, 1e6), name="two")


@pytest.fixture
def msr_dir():
    if not MSR.exists():
        pytest.skip(f"MSR workloads not found at {MSR}")
    return MSR
