"""How good is the roofline device model? Fit it to this machine's CPU and compare with profiles.

For every profiled sample in ``sample_graphs/`` (costs measured on one CPU core by
``scripts/make_sample_graphs.py``), the roofline of :mod:`workbench.costs.roofline` with the
``cpu-local`` figures (or figures fitted now with ``--fit``) predicts every op's time from its
FLOPs and bytes. Printed per model:

* per-op relative error ``|predicted - measured| / measured`` over ops with a kernel and a
  measured time of at least ``--min-ms`` (median and worst), and the time-weighted median
  (the error of the op an average millisecond of the step is spent in);
* per-step error: the sum of predicted times against the sum of measured times (what the
  single-device makespan would be).

``--fit`` fits peak FLOP/s, bandwidth and launch overhead to all ops of all samples
(:func:`workbench.costs.roofline.fit_device`) and prints the figures to put in ``DEVICE_MODELS``;
``--holdout`` fits on all samples but the one evaluated (leave-one-model-out).

Usage::

    .venv/bin/python bench/cost_model.py [--fit] [--holdout] [--min-ms 0.01]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench.io import load_graph
from workbench.costs.roofline import DEVICE_MODELS, _work_arrays, fit_device, roofline_times


def samples() -> dict:
    out = {}
    for p in sorted((ROOT / "sample_graphs").glob("*.json.gz")):
        g = load_graph(p)
        if g.meta.get("costs") == "profiled" and all(
                g.op(v).get("flops") is not None for v in g.ops):
            out[g.name] = g
    return out


def errors(g, model, kind: str = "cpu", min_ms: float = 0.01) -> dict:
    flops, nbytes, view = _work_arrays(g)
    pred = roofline_times(flops, nbytes, model, view=view)
    meas = np.array([g.op(v)["compute"].get(kind, np.nan) for v in g.ops])
    keep = (~view) & (meas >= min_ms)
    rel = np.abs(pred[keep] - meas[keep]) / meas[keep]
    order = np.argsort(rel)
    w = np.cumsum(meas[keep][order]) / meas[keep].sum()
    wmed = float(rel[order][np.searchsorted(w, 0.5)]) if len(rel) else float("nan")
    step_pred, step_meas = float(pred.sum()), float(np.nansum(meas))
    return {"ops": int(keep.sum()), "median": float(np.median(rel)) if len(rel) else np.nan,
            "wmedian": wmed, "worst": float(rel.max()) if len(rel) else np.nan,
            "step_pred": step_pred, "step_meas": step_meas,
            "step_err": (step_pred - step_meas) / step_meas}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="fit the CPU figures to all samples")
    ap.add_argument("--holdout", action="store_true", help="leave-one-model-out fits")
    ap.add_argument("--min-ms", type=float, default=0.01)
    ap.add_argument("--weight", choices=["ops", "time"], default="ops",
                    help="fit weighting (see workbench.costs.roofline.fit_device)")
    args = ap.parse_args(argv)
    gs = samples()
    model = DEVICE_MODELS["cpu-local"]
    if args.fit:
        model = fit_device(gs.values(), name="cpu-local", weight=args.weight)
        print(f"fitted on {len(gs)} samples: peak {model.peak_flops / 1e9:.4f} TFLOP/s, "
              f"bandwidth {model.mem_bw / 1e6:.2f} GB/s, launch {model.launch_ms:.4f} ms")
    print(f"{'model':18s} {'ops':>6s} {'op median':>10s} {'op wmed':>8s} {'op worst':>9s} "
          f"{'step meas ms':>13s} {'step pred ms':>13s} {'step err':>9s}")
    rows = []
    for name, g in gs.items():
        m = model
        if args.holdout:
            m = fit_device([h for k, h in gs.items() if k != name], name="holdout",
                           weight=args.weight)
        e = errors(g, m, min_ms=args.min_ms)
        rows.append(e)
        print(f"{name:18s} {e['ops']:6d} {e['median']:10.1%} {e['wmedian']:8.1%} "
              f"{e['worst']:9.0%} {e['step_meas']:13.2f} {e['step_pred']:13.2f} "
              f"{e['step_err']:+9.1%}")
    if rows:
        print(f"{'all':18s} {sum(r['ops'] for r in rows):6d} "
              f"{statistics.median(r['median'] for r in rows):10.1%} "
              f"{statistics.median(r['wmedian'] for r in rows):8.1%} "
              f"{max(r['worst'] for r in rows):9.0%} {'':13s} {'':13s} "
              f"{statistics.median(abs(r['step_err']) for r in rows):9.1%} (median |step err|)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
