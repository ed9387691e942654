"""The training judge against the public A100 measurements: prediction, fit, cross-validation, bench."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from workbench.fidelity.measurements import BUNDLED_VTRAIN, MeasurementError, read_measurements
from workbench.fidelity.public import (
    DATASHEET,
    FITTED,
    PRIOR,
    SHIPPED,
    Calibration,
    cell_slopes,
    cross_validate,
    fit,
    judge_run,
    predict,
    ranking_misses,
    residual_report,
    work_inversions,
)

ROOT = Path(__file__).resolve().parents[2]
RUNS = read_measurements(BUNDLED_VTRAIN)


def _unfitted(n: int, seed: int = 5) -> list:
    """``n`` bundled rows the shipped coefficients were not fitted on."""
    fitted = set(json.loads((ROOT / "workbench/fidelity/public_coefficients.json")
                            .read_text())["rows"])
    rest = [i for i in range(len(RUNS)) if i not in fitted]
    return [RUNS[i] for i in np.random.default_rng(seed).choice(rest, n, replace=False)]


def test_shipped_coefficients_are_fitted_physical_and_predict_unseen_rows():
    assert SHIPPED != DATASHEET
    assert 0.3 < SHIPPED.compute_efficiency <= 1.0 and 0.3 < SHIPPED.memory_efficiency <= 1.0
    rows = _unfitted(40)
    predicted = predict(rows, SHIPPED)
    measured = np.array([r.measured_ms for r in rows])
    error = np.abs(predicted - measured) / measured
    assert np.median(error) < 0.12
    datasheet = np.abs(predict(rows, DATASHEET) - measured) / measured
    assert np.median(error) < np.median(datasheet) / 2     # the fit is what makes it close


def test_the_judge_sees_each_rows_strategy():
    run = RUNS[0]
    result = judge_run(run)
    plan = result.plan
    assert (plan.strategy.tp, plan.strategy.pp, plan.strategy.dp) == (run.tp, run.pp, run.dp)
    assert plan.strategy.recompute == "full" and plan.strategy.schedule == "1f1b"
    assert result.breakdown()["recompute"] > 0


def test_a_rows_gradients_leave_in_one_all_reduce_as_without_ddp_bucketing():
    from workbench.judge.training import simulate_training

    run = min((r for r in RUNS if r.tp == 1 and r.pp == 1 and r.dp > 1),
              key=lambda r: (r.layers * r.hidden, r.global_batch))
    result = simulate_training(judge_run(run).plan)     # links recorded
    dp = [link for link in result.links if link[4] == "dp"]
    assert dp and len({link[0] for link in dp}) == len(dp)   # one all-reduce a rank, not buckets


def test_fit_recovers_coefficients_that_made_the_times():
    truth = Calibration(0.6, 0.5, 40.0, 0.7, 5.0, 60.0)
    rows = [RUNS[i] for i in range(0, 1008, 84)]            # 12 rows, varied strategies
    made = predict(rows, truth)
    synthetic = [type(r)(**{**r.__dict__, "measured_ms": float(t)}) for r, t in zip(rows, made)]
    found = fit(synthetic, start=SHIPPED)
    assert np.allclose(predict(rows, found), made, rtol=0.02)
    assert found.compute_efficiency == pytest.approx(0.6, rel=0.1)


def test_inside_an_a100_node_collectives_follow_nccls_curve_and_the_network_is_not_fitted():
    from workbench.costs.llm import NCCL_A100_NODE

    run = next(r for r in RUNS if r.tp == 2 and r.pp == 2)
    plan = judge_run(run).plan
    assert plan.cluster.intra_host == NCCL_A100_NODE           # not a fitted NVLink
    # the single-node rows do not depend on the network's two coefficients ...
    other = replace(SHIPPED, collective_efficiency=0.3, link_latency_us=50.0)
    assert judge_run(run, other).step_ms == judge_run(run).step_ms
    # ... so the fit leaves them where they start, and fits the four the rows identify
    rows = [RUNS[i] for i in range(0, 1008, 168)]
    found = fit(rows, start=PRIOR, max_evals=3)
    assert (found.collective_efficiency, found.link_latency_us) == (
        PRIOR.collective_efficiency, PRIOR.link_latency_us)
    assert set(FITTED) == {"compute_efficiency", "memory_efficiency", "op_floor_us",
                           "host_op_us"}
    with pytest.raises(MeasurementError, match="cannot fit"):
        fit(rows, names=("kernel_us",))
    # across nodes the network's coefficients do count
    multi = type(run)(**{**run.__dict__, "node_size": 2})
    assert judge_run(multi, other).step_ms > judge_run(multi).step_ms


def test_cross_validation_never_scores_a_fitted_row():
    rows = RUNS[:60]
    cv = cross_validate(rows, k=3, fit_fraction=0.1, seed=2, max_evals=3)
    assert len(cv.calibrations) == 3
    for fold, fitted in enumerate(cv.fitted_rows):
        assert len(fitted) <= 6
        assert not set(fitted) & set(np.flatnonzero(cv.fold_of == fold).tolist())
    shipped = cross_validate(rows, fit_fraction=0)
    assert shipped.calibrations == [SHIPPED] and shipped.fitted_rows == [[]]
    assert np.allclose(shipped.predicted, predict(rows, SHIPPED))


def test_residual_report_names_dimensions_and_parts():
    rows = RUNS[:20]
    report = residual_report(rows, predict(rows))
    assert set(report["by_dimension"]) >= {"tp", "pp", "dp", "micro batch", "hidden", "layers"}
    assert {"compute", "tp", "bubble", "dp", "pp"} <= set(report["parts"])
    total = sum(every for every, _ in report["parts"].values())
    assert total == pytest.approx(1.0, abs=1e-6)


def test_ranking_misses_name_the_picked_and_the_best_row_and_the_parts_between_them():
    group = [r for r in RUNS if r.group == RUNS[0].group]
    measured = np.array([r.measured_ms for r in group])
    assert measured.max() > 1.05 * measured.min()
    upside_down = measured.max() + measured.min() - measured    # the slowest looks fastest
    (miss,) = ranking_misses(group, upside_down)
    assert miss["picked"] is group[int(np.argmax(measured))]
    assert miss["best"] is group[int(np.argmin(measured))]
    assert miss["slower_pct"] > 5 and set(miss["delta_ms"]) == {"compute", "TP", "bubble", "DP",
                                                                 "optimizer"}
    assert ranking_misses(group, measured) == []                # a perfect ranking misses none


def test_cell_slopes_recover_the_time_a_layer_takes_per_micro_batch():
    rows = [r for r in RUNS if r.pp == 1]

    def made(r):   # 3 ms a layer and micro-batch (4 at tp 2), 5 ms a micro-batch, 1 ms a layer
        return (3.0 + (r.tp == 2)) * r.layers * r.micro_batches + 5 * r.micro_batches \
            + r.layers + 20
    made_rows = [replace(r, measured_ms=made(r)) for r in rows]
    cells = cell_slopes(made_rows, [2 * made(r) for r in rows])
    assert len(cells) >= 12 and all(c["rows"] >= 6 for c in cells)
    for c in cells:
        assert c["measured_ms"] == pytest.approx(3.0 + (c["tp"] == 2))
        assert c["predicted_ms"] == pytest.approx(2 * c["measured_ms"])
    assert work_inversions(cells) == []             # more work never takes less time here
    assert cell_slopes([r for r in RUNS if r.pp > 1]) == []
    with pytest.raises(MeasurementError, match="predictions"):
        cell_slopes(rows, [1.0])


def test_work_inversions_name_the_cells_measured_faster_than_less_work():
    pairs = work_inversions(cell_slopes(RUNS))
    named = {(p["more"]["tp"], p["more"]["hidden"], p["more"]["micro_batch"],
              p["less"]["hidden"], p["less"]["micro_batch"]) for p in pairs}
    # the two cells the public-fidelity notes name: tp 4 at hidden 2,048 and micro-batch 1-2,
    # tp 2 at hidden 1,024 and micro-batch 4
    assert {(4, 2048, 2, 1024, 2), (4, 2048, 1, 1024, 1), (2, 1024, 4, 1024, 2)} <= named
    assert not any(p["more"]["tp"] == 1 for p in pairs)
    assert all(p["faster_pct"] > 5 for p in pairs)
    assert pairs == sorted(pairs, key=lambda p: -p["faster_pct"])


def test_calibrations_out_of_their_physical_range_are_refused(tmp_path):
    with pytest.raises(MeasurementError, match="compute_efficiency"):
        Calibration(compute_efficiency=1.5)
    with pytest.raises(MeasurementError, match="op_floor_us"):
        Calibration(op_floor_us=float("nan"))
    bad = tmp_path / "c.json"
    bad.write_text('{"coefficients": {"compute_efficiency": 0.5}}')
    with pytest.raises(MeasurementError, match="cannot read"):
        Calibration.load(bad)
    SHIPPED.save(bad, fitted_on="test")
    assert Calibration.load(bad) == SHIPPED


def _bench(*args):
    return subprocess.run([sys.executable, str(ROOT / "bench/fidelity_public.py"), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=600,
                          check=False)


def test_bench_scores_any_csv_with_the_shipped_coefficients(tmp_path):
    lines = BUNDLED_VTRAIN.read_text().splitlines()
    small = tmp_path / "rows.csv"
    small.write_text("\n".join(lines[:1] + lines[1:200:20]) + "\n")
    out = _bench("--csv", str(small), "--fit-fraction", "0")
    assert out.returncode == 0, out.stderr
    last = out.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"public fidelity: MAPE [\d.]+ %, worst [\d.]+ %, tau -?[\d.]+ \(median "
                        r"over groups\), best within 5 % in \d+/\d+ groups", last), last
    assert len([ln for ln in out.stdout.splitlines() if re.match(r"\s*\d+\s+\d+\s", ln)]) == 10
    assert "time of a layer per micro-batch" in out.stdout and "work inversions (" in out.stdout


@pytest.mark.parametrize("args, message", [
    (["--fit-fraction", "2"], "--fit-fraction must be in"),
    (["--folds", "1"], "--folds must be at least 2"),
    (["--csv", "/nonexistent.csv", "--fit-fraction", "0"], "error: cannot read"),
])
def test_bench_refuses_bad_arguments_before_any_work(args, message):
    out = _bench(*args)
    assert out.returncode == 2 and message in out.stderr
