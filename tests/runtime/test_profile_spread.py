"""Issue 26: the "profiled" noise of robustness comes from the spread of repeated per-op
profiles, recorded at profiling time (TensorFlow ``profile`` and PyTorch ``from_torch``)."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

import workbench as wb

rb = sys.modules["workbench.robustness"]


def _check_spread_used(g, kind: str):
    """``compute_std`` is set, non-negative, in ms of the op's own kind; robustness reads it
    (sigma ln(1 + std/mean), not the 10 % default) and its draws differ from the default's."""
    recorded = {v: g.op(v)["compute_std"] for v in g.ops if "compute_std" in g.op(v)}
    assert recorded, "no op records a spread"
    for v, std in recorded.items():
        assert set(std) <= set(g.op(v)["compute"]), v
        assert all(math.isfinite(s) and s >= 0 for s in std.values()), (v, std)
    assert any(s > 0 for std in recorded.values() for s in std.values())
    names = {v: i for i, v in enumerate(g.ops)}
    kinds = {k: i for i, k in enumerate(g.c.kinds)}
    sig = rb._spread_sigma([g], names, kinds, 0.1, True)
    v = max(recorded, key=lambda u: g.op(u)["compute"][kind])
    assert sig[names[v], kinds[kind]] == pytest.approx(
        math.log1p(recorded[v][kind] / g.op(v)["compute"][kind]))

    c = wb.Cluster.preset("2xcpu")
    plans = {"single": wb.solve(g, c, method="single"), "m_topo": wb.solve(g, c, method="m_topo")}
    r = wb.robustness(plans, c, noise="profiled", samples=30, seed=1)
    bare = g.map_ops(lambda _v, a: {k: x for k, x in a.items() if k != "compute_std"})
    plans0 = {m: wb.Plan(bare, dict(p.placement), method=m, order=p.order)
              for m, p in plans.items()}
    r0 = wb.robustness(plans0, c, noise="profiled", samples=30, seed=1)
    assert np.isfinite(r.makespans.to_numpy()).all()
    assert not np.allclose(r.makespans.to_numpy(), r0.makespans.to_numpy())


@pytest.mark.tf
def test_tf_profile_records_per_op_spread():
    pytest.importorskip("tensorflow")
    import workbench.runtime as rt

    g = rt.profile(rt.extract("mlp", 8, **rt.TINY["mlp"]), steps=4, warmup=1, timed_steps=5)
    assert all(set(g.op(v).get("compute_std", {})) <= {"cpu"} for v in g.ops)
    _check_spread_used(g, "cpu")
    # one traced step: no spread to record, robustness falls back to its default
    one = rt.profile(rt.extract("mlp", 8, **rt.TINY["mlp"]), steps=1, warmup=1, timed_steps=2)
    assert not any("compute_std" in one.op(v) for v in one.ops)


@pytest.mark.torch
def test_torch_profile_records_per_op_spread():
    torch = pytest.importorskip("torch")
    from workbench.io.torch import from_torch

    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    g = from_torch(net, (torch.randn(32, 8),), profile="cpu", repeats=5, warmup=1)
    kinds = {k for v in g.ops for k in g.op(v).get("compute_std", {})}
    assert kinds == {"cpu"}
    # the parameter updates are timed separately and get their spread too
    assert all("compute_std" in g.op(v) for v in g.ops if g.op(v)["kind"] == "update")
    _check_spread_used(g, "cpu")
    one = from_torch(net, (torch.randn(32, 8),), profile="cpu", repeats=1, warmup=1)
    assert not any("compute_std" in one.op(v) for v in one.ops)
    unprofiled = from_torch(net, (torch.randn(32, 8),), profile=None)
    assert not any("compute_std" in unprofiled.op(v) for v in unprofiled.ops)
