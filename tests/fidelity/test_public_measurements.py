"""Reading, splitting and scoring public measurements (the bundled vTrain rows, damaged for real)."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.fidelity.measurements import (
    BUNDLED_VTRAIN,
    MeasurementError,
    fit_rows,
    folds,
    read_measurements,
    score,
)


def test_the_bundled_rows_read_whole_and_are_consistent():
    runs = read_measurements(BUNDLED_VTRAIN)
    assert len(runs) == 1008
    for run in runs:
        assert run.tp * run.pp * run.dp == run.gpus
        assert run.micro_batches * run.micro_batch * run.dp == run.global_batch
    assert len({run.group for run in runs}) == 144


def _damaged(tmp_path, transform):
    text = BUNDLED_VTRAIN.read_text()
    path = tmp_path / "damaged.csv"
    path.write_text(transform(text))
    return path


@pytest.mark.parametrize("transform, message", [
    (lambda t: t[: t.index("\n") + 1], "holds no rows"),
    (lambda t: t.replace("iteration time (ms)", "time"), "lacks the column"),
    (lambda t: t.replace("\n2,4,1,1024", "\n2,4,x,1024", 1), "not a number"),
    (lambda t: t.replace("\n2,4,1,1024,16,20,1024,2,1,1", "\n3,4,1,1024,16,20,1024,2,1,1", 1),
     "tp x pp x dp"),
    (lambda t: t.replace("\n2,4,1,1024,16,20,1024,2,1,1,283.878546",
                         "\n2,4,1,1024,16,20,1024,2,1,1,-1", 1), "not positive"),
    (lambda t: t.replace("\n2,4,1,1024", "\n2,4,3,1024", 1), "not a multiple"),
])
def test_damaged_files_are_refused_naming_the_line(tmp_path, transform, message):
    with pytest.raises(MeasurementError, match=message):
        read_measurements(_damaged(tmp_path, transform))


def test_optional_columns_override_the_defaults(tmp_path):
    lines = BUNDLED_VTRAIN.read_text().splitlines()[:3]
    lines[0] += ",recompute,gpu,vocab size,notes"
    lines[1] += ",selective,H100-80g,32000,anything"
    lines[2] += ",,,,"
    path = tmp_path / "more.csv"
    path.write_text("\n".join(lines) + "\n")
    first, second = read_measurements(path)
    assert (first.recompute, first.gpu, first.vocab, first.extra) == (
        "selective", "H100-80g", 32000, {"notes": "anything"})
    assert (second.recompute, second.gpu, second.vocab) == ("full", "A100-80g", 50257)
    lines[1] = lines[1].replace("selective", "most")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(MeasurementError, match="recompute"):
        read_measurements(path)


def test_missing_file_is_an_error_not_a_traceback(tmp_path):
    with pytest.raises(MeasurementError, match="cannot read"):
        read_measurements(tmp_path / "absent.csv")


def test_folds_partition_and_fit_rows_respect_the_fraction():
    parts = folds(1008, 5, seed=3)
    assert sorted(np.concatenate(parts).tolist()) == list(range(1008))
    chosen = fit_rows(np.setdiff1d(np.arange(1008), parts[0]), 1008, 0.1, seed=1)
    assert len(chosen) == 100 and not set(chosen) & set(parts[0].tolist())
    with pytest.raises(MeasurementError):
        folds(10, 1)
    with pytest.raises(MeasurementError):
        fit_rows(np.arange(5), 5, 1.5)


def test_score_ranks_groups_and_names_the_best():
    measured = [100.0, 110.0, 200.0, 50.0, 60.0]
    predicted = [120.0, 100.0, 210.0, 55.0, 54.0]   # group a: picks row 1 (10 % off the best)
    result = score(predicted, measured, groups=["a", "a", "a", "b", "b"])
    assert result.best_within == (0, 2)
    assert result.taus["a"] == pytest.approx(1 / 3)
    assert result.taus["b"] == pytest.approx(-1.0)
    assert result.line().startswith("public fidelity: MAPE ")
    assert score(measured, measured, groups=list("aaabb")).best_within == (2, 2)
