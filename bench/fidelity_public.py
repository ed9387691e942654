"""The training judge against public GPU measurements (vTrain's A100 iterations, or any CSV).

For every row: the GPT model of the row, the row's tensor x pipeline x data strategy with its
settings, judged by the workbench's training judge; printed per row as predicted and measured
time, then the error by strategy dimension, the parts of the step, and the summary.

    python bench/fidelity_public.py                          # bundled rows, 5 folds, fit on 10 %
    python bench/fidelity_public.py --csv FILE --fit-fraction 0   # score FILE, shipped coefficients
    python bench/fidelity_public.py --write-coefficients workbench/fidelity/public_coefficients.json

With ``--fit-fraction F > 0`` each of ``--folds K`` folds is predicted with coefficients fitted on
at most F of all rows drawn from the other folds (fitted rows are never scored). With
``--fit-fraction 0`` nothing is refitted: every row is scored with the coefficients shipped in
the repository. The last line is the summary:
``public fidelity: MAPE x %, worst y %, tau z (median over groups), best within 5 % in a/b groups``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.errors import WorkbenchError
from workbench.fidelity.measurements import (
    BUNDLED_VTRAIN,
    MeasurementError,
    fit_rows,
    read_measurements,
)
from workbench.fidelity.public import (
    SHIPPED,
    cell_slopes,
    cross_validate,
    fit,
    ranking_misses,
    residual_report,
    work_inversions,
)


def _args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", default=str(BUNDLED_VTRAIN), help="measurements (vTrain columns)")
    ap.add_argument("--fit-fraction", type=float, default=0.1,
                    help="at most this fraction of the rows fitted per fold (0: shipped)")
    ap.add_argument("--folds", type=int, default=5, help="folds of the cross-validation")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quiet", action="store_true", help="no per-row lines")
    ap.add_argument("--write-coefficients", metavar="JSON",
                    help="fit on --fit-fraction of the rows (seeded) and write the coefficients")
    args = ap.parse_args(argv)
    if not 0.0 <= args.fit_fraction <= 1.0:
        ap.error(f"--fit-fraction must be in [0, 1], got {args.fit_fraction}")
    if args.folds < 2:
        ap.error(f"--folds must be at least 2, got {args.folds}")
    if args.write_coefficients and args.fit_fraction == 0:
        ap.error("--write-coefficients needs --fit-fraction > 0")
    if args.seed < 0:
        ap.error(f"--seed must be a non-negative integer, got {args.seed}")
    if args.write_coefficients:  # checked before minutes of fitting
        out = Path(args.write_coefficients)
        if out.is_dir() or not out.parent.is_dir() or not os.access(out.parent, os.W_OK):
            ap.error(f"--write-coefficients {out}: not a file in a writable folder")
    return ap, args


def _write(runs, args) -> None:
    import numpy as np

    rows = fit_rows(np.arange(len(runs)), len(runs), args.fit_fraction, seed=args.seed)
    t0 = time.process_time()
    cal = fit([runs[i] for i in rows])
    cal.save(args.write_coefficients, fitted_on=f"{Path(args.csv).name}: {len(rows)} of "
             f"{len(runs)} rows (fit_rows seed {args.seed})", rows=[int(i) for i in rows])
    print(f"wrote {args.write_coefficients}: {cal.as_dict()} "
          f"({len(rows)} rows, {time.process_time() - t0:.0f} s CPU)")


def _report(runs, predicted, cal) -> None:
    report = residual_report(runs, predicted, cal)
    print("\nerror by dimension (median signed %, mean abs %, rows):")
    for dim, table in report["by_dimension"].items():
        cells = ", ".join(f"{v}: {s:+.1f}/{a:.1f}/{n}" for v, (s, a, n) in table.items())
        print(f"  {dim:12s} {cells}")
    print("parts of the predicted step (share over all rows, over the worst tenth):")
    for part, (every, worst) in report["parts"].items():
        print(f"  {part:10s} {every * 100:5.1f} %  {worst * 100:5.1f} %")
    _cells(runs, predicted)
    misses = ranking_misses(runs, predicted, cal)
    print(f"ranking misses ({len(misses)} groups whose predicted best is measured > 5 % slower "
          "than the measured best; tp/pp/dp/mb; errors %; predicted best - picked, ms):")
    for m in misses:
        p, b = m["picked"], m["best"]
        delta = " ".join(f"{k} {v:+.0f}" for k, v in m["delta_ms"].items() if abs(v) >= 0.5)
        print(f"  h {b.hidden} L {b.layers} gpus {b.gpus} gbs {b.global_batch} ({m['rows']} rows): "
              f"picked {p.tp}/{p.pp}/{p.dp}/{p.micro_batch} ({m['error_picked_pct']:+.0f}), best "
              f"{b.tp}/{b.pp}/{b.dp}/{b.micro_batch} ({m['error_best_pct']:+.0f}), slower by "
              f"{m['slower_pct']:.1f} %; {delta}; part: {m['part']}")


def _cells(runs, predicted) -> None:
    cells = cell_slopes(runs, predicted)
    print("time of a layer per micro-batch, one-stage rows (hidden/micro-batch: measured / "
          "predicted ms, rows):")
    for tp in sorted({c["tp"] for c in cells}):
        print(f"  tp {tp}: " + ", ".join(
            f"{c['hidden']}/{c['micro_batch']}: {c['measured_ms']:.2f} / {c['predicted_ms']:.2f} "
            f"({c['rows']})" for c in cells if c["tp"] == tp))
    pairs = work_inversions(cells)
    print(f"work inversions ({len(pairs)} pairs of cells of one tp where the cell with more work "
          "is measured > 5 % faster a layer; predicted change; *: the model has it too):")
    for p in pairs:
        more, less = p["more"], p["less"]
        change = (more["predicted_ms"] / less["predicted_ms"] - 1) * 100
        print(f"  tp {more['tp']}: {more['hidden']}/{more['micro_batch']} measured "
              f"{p['faster_pct']:.1f} % faster than {less['hidden']}/{less['micro_batch']}; "
              f"predicted {change:+.1f} %{' *' if change < -5 else ''}")


def main(argv=None) -> int:
    ap, args = _args(argv)
    try:
        runs = read_measurements(args.csv)
        if args.write_coefficients:
            _write(runs, args)
            return 0
        t0 = time.process_time()
        cv = cross_validate(runs, k=args.folds, fit_fraction=args.fit_fraction, seed=args.seed)
    except (MeasurementError, WorkbenchError) as exc:
        ap.exit(2, f"error: {exc}\n")
    if not args.quiet:
        print("line  gpus tp pp dp mbs  gbs hidden layers  predicted_ms  measured_ms  error_%")
        for run, pred in zip(cv.runs, cv.predicted):
            print(f"{run.line:4d} {run.gpus:5d} {run.tp:2d} {run.pp:2d} {run.dp:2d} "
                  f"{run.micro_batch:3d} {run.global_batch:4d} {run.hidden:6d} {run.layers:6d} "
                  f"{pred:13.1f} {run.measured_ms:12.1f} "
                  f"{(pred - run.measured_ms) / run.measured_ms * 100:+8.1f}")
    for i, cal in enumerate(cv.calibrations):
        print(f"fold {i}: " + ", ".join(f"{k} {v:.3g}" for k, v in cal.as_dict().items()))
    print(f"{len(runs)} rows judged in {time.process_time() - t0:.0f} s CPU; "
          f"{'shipped coefficients' if args.fit_fraction == 0 else f'{args.folds} folds'}")
    _report(cv.runs, cv.predicted, cv.calibrations[0] if args.fit_fraction == 0 else SHIPPED)
    print(cv.score().line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
