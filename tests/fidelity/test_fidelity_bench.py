"""bench/fidelity.py end to end on one small model: every rung of the ladder is computed from the
same measured rounds, the calibrated rung is the default model re-anchored to its probes, and
the probes' rows are printed but never counted."""

from __future__ import annotations

import importlib.util
import math
from functools import partial
from pathlib import Path

import pytest

pytestmark = pytest.mark.tf


def _bench():
    path = Path(__file__).resolve().parents[2] / "bench" / "fidelity.py"
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


def test_every_rung_is_computed_from_the_same_rounds(capsys, monkeypatch):
    pytest.importorskip("tensorflow")
    from workbench.runtime import handoff

    # the bench's one hand-off micro-benchmark at the sizes of its own test (about 27 s with
    # the defaults; tests/fidelity/test_residuals.py::test_handoff_costs_are_measured_...)
    monkeypatch.setattr(handoff, "measure_handoff",
                        partial(handoff.measure_handoff, repeats=5, trials=1, segments=4))
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
    from workbench.fidelity.changes import MODEL_CHANGES

    assert ("calibrated model (shared_memory, overlap, rescale, live_memory, step_cost, "
            "recv_fit)") in out
    assert "hand-off costs: send_ms " in out and "median of 3 passes [their range]" in out
    assert "mlp                contention benchmark: alone" in out
    assert f"re-anchored to the probes timed in the rounds ({', '.join(MODEL_CHANGES)})" in out
    # three plans are counted; the probes are printed but not among them
    assert "plans measured: 3 " in out
    for probe in ("(probe)", "(reference)", "(reference 2)", "(reference 3)", "(one-op probe)",
                  "(one-op probe 2)", "(one-op probe 3)", "(order probe)", "(split reference)",
                  "(split order probe)", "(idle probe)"):
        assert f"mlp                {probe}" in out
    # the reference (three sessions of one plan) is predicted at their median by the
    # calibrated rung, at the first session's time by 'one-session' (round seven's anchoring)
    rows = {}
    for ref in ("(reference)", "(reference 2)", "(reference 3)"):
        line = next(x for x in out.splitlines() if x.startswith(f"mlp                {ref} "))
        row = line.split(ref, 1)[1].split()
        rows[ref] = dict(zip(bench.RUNGS, map(float, row[1:1 + len(bench.RUNGS)]), strict=True))
        rows[ref]["measured"] = float(row[1 + len(bench.RUNGS)])
    first = rows["(reference)"]
    assert all(r["calibrated"] == first["calibrated"] for r in rows.values())  # one plan
    median = sorted(r["measured"] for r in rows.values())[1]
    assert first["calibrated"] == pytest.approx(median, abs=0.006)
    assert first["one-session"] == pytest.approx(first["measured"], abs=0.006)


def test_twins_are_printed_once_with_how_far_their_sessions_ran_apart(capsys):
    bench = _bench()
    row = {"model": "m", "spread": 0.5, "devices": 2}
    rows = [{**row, "plan": "heft", "key": 1, "measured": 10.0},
            {**row, "plan": "dpos", "key": 1, "measured": 11.5},
            {**row, "plan": "etf", "key": 2, "measured": 10.0},
            {**row, "plan": "m_topo", "measured": 12.0}, {**row, "plan": "x", "measured": 12.0}]
    bench._print_twins(rows)
    out = capsys.readouterr().out
    assert out.count("twins") == 1 and "m heft=dpos 1.50 ms apart (spreads 1.00)" in out
    assert "etf" not in out and "m_topo" not in out        # no key: never a twin
