"""bench/fidelity.py end to end on one small model: every rung of the ladder is computed from the
same measured rounds, the calibrated rung is the default model re-anchored to its probes, and
the probes' rows are printed but never counted."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

pytestmark = pytest.mark.tf


def _bench():
    path = Path(__file__).resolve().parents[1] / "bench" / "fidelity.py"
    spec = importlib.util.spec_from_file_location("fidelity_bench_e2e", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def _ladder(out: str, title: str) -> dict:
    """rung -> (median %, worst %) of the ladder printed after ``title``."""
    lines = out.split(title, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("rung"))
    rows = {}
    for line in lines[start + 1:]:
        if not line.strip():
            break
        parts = line.split()
        rows[parts[0]] = (float(parts[1].rstrip("%")), float(parts[2].rstrip("%")))
    return rows


def test_every_rung_is_computed_from_the_same_rounds(capsys):
    pytest.importorskip("tensorflow")
    bench = _bench()
    rc = bench.main(["--models", "mlp", "--methods", "single", "heft", "round_robin",
                     "--steps", "3", "--warmup", "1", "--rounds", "2"])
    out = capsys.readouterr().out
    assert rc == 0
    ladder = _ladder(out, "plans measured:")
    # every rung of the bench is printed, each with finite errors (no rung silently missing)
    assert set(ladder) == set(bench.RUNGS)
    assert all(math.isfinite(m) and math.isfinite(w) and 0 <= m <= w
               for m, w in ladder.values())
    # fitted with the traced slope and the fitted per-tensor costs (for the 'recv-fit',
    # 'traced', 'base' and 'contention' rungs), then the default model: the untraced slope and
    # the micro-benchmarked hand-off costs in their places, re-anchored to the probes timed in
    # the rounds
    from workbench.runtime.calibrate import MODEL_CHANGES

    assert ("calibrated model (shared_memory, overlap, rescale, live_memory, step_cost, "
            "recv_fit)") in out
    assert "hand-off costs: send_ms " in out
    assert "mlp                contention benchmark: alone" in out
    assert f"re-anchored to the probes timed in the rounds ({', '.join(MODEL_CHANGES)})" in out
    # three plans are counted; the probes are printed but not among them
    assert "plans measured: 3 " in out
    for probe in ("(probe)", "(reference)", "(one-op probe)", "(one-op probe 2)",
                  "(one-op probe 3)", "(order probe)", "(idle probe)"):
        assert f"mlp                {probe}" in out
    # the reference is predicted exactly by every re-anchored rung that rescales
    row = next(line for line in out.splitlines() if line.startswith("mlp") and "(reference)"
               in line).split()
    cols = dict(zip(bench.RUNGS, map(float, row[3:3 + len(bench.RUNGS)]), strict=True))
    measured = float(row[3 + len(bench.RUNGS)])
    assert cols["calibrated"] == pytest.approx(measured, abs=0.006)
