"""The training judge against public GPU measurements: predict, calibrate, cross-validate.

Each measured iteration (:class:`~workbench.fidelity.measurements.MeasuredRun`) is rebuilt as
the workbench would plan it -- the GPT training step from its formulas
(:mod:`workbench.costs.llm`), the row's tensor x pipeline x data strategy with its settings
(:func:`workbench.transforms.parallel.parallelize`), on nodes of GPUs of the row's kind -- and
judged by the same discrete-event judge as every training plan
(:func:`workbench.judge.training.simulate_training`). Nothing is read from the measurement
but the strategy.

A :class:`Calibration` is the handful of named coefficients that turn datasheet figures into
what a GPU achieves (``docs/results-public-fidelity.md`` gives each its fitted value and why it
is plausible):

=========================  =================================================================
``compute_efficiency``     achieved fraction of the tensor-core peak in compute-bound ops
``memory_efficiency``      achieved fraction of the HBM bandwidth in memory-bound ops
``op_floor_us``            the least GPU time an op of the chain takes (its kernels' fixed
                           costs on the GPU)
``host_op_us``             the host's time to issue one op (Python, dispatcher, launches); the
                           host runs ahead of the GPU (the judge's host lane)
``collective_efficiency``  achieved fraction of the network's bandwidth in collectives and
                           sends across nodes (and of NVLink's on a GPU whose preset has no
                           measured NCCL curve)
``link_latency_us``        the latency of one step of such a collective (and of a send)
=========================  =================================================================

Inside a node of a GPU whose preset carries NCCL's measured curve
(``GPUSpec.nccl_intra``: the A100s, :data:`~workbench.costs.llm.NCCL_A100_NODE`), the
collectives and sends are timed with it, not with the last two coefficients: an all-reduce over
2-8 GPUs at NCCL's table for that many GPUs, the rest at the measured curve. :func:`fit`
chooses the four coefficients the single-node rows identify (:data:`FITTED`) by least squares
on the logarithm of predicted / measured time over a few rows, and leaves the two of the
network at their cited values (:data:`PRIOR`); :func:`cross_validate` fits on at most a
fraction of the rows drawn outside each fold and scores the fold, so no fitted row is ever
scored. No row or configuration gets a correction of its own.

Examples
--------
>>> from workbench.fidelity.measurements import BUNDLED_VTRAIN, read_measurements
>>> run = read_measurements(BUNDLED_VTRAIN)[0]
>>> result = judge_run(run, SHIPPED)
>>> result.feasible, round(result.step_ms / run.measured_ms, 1)
(True, 1.0)
>>> sorted(SHIPPED.as_dict())[:2]
['collective_efficiency', 'compute_efficiency']
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import ClassVar

import numpy as np

from ..cluster import Cluster, Device, Link
from ..costs.llm import GPUS, LLMConfig
from ..errors import ClusterError, GraphError, PlanError
from ..judge.training import simulate_training
from ..transforms.parallel import Strategy, parallelize
from .measurements import MeasuredRun, MeasurementError, fit_rows, folds, score

__all__ = [
    "COEFFICIENTS_FILE",
    "DATASHEET",
    "FITTED",
    "PRIOR",
    "SHIPPED",
    "Calibration",
    "CrossValidation",
    "cell_slopes",
    "cross_validate",
    "fit",
    "judge_run",
    "ladder",
    "predict",
    "ranking_misses",
    "residual_report",
    "shipped_rows",
    "work_inversions",
]

COEFFICIENTS_FILE = Path(__file__).with_name("public_coefficients.json")

#: The GPU of a row's ``gpu`` column -> the datasheet GPU of :data:`workbench.costs.llm.GPUS`.
GPU_NAMES = {"a100-80g": "A100-80G", "a100-40g": "A100-40G", "h100": "H100-80G",
             "h100-80g": "H100-80G", "a100": "A100-80G"}


@dataclass(frozen=True)
class Calibration:
    """Achieved fractions and overheads of a GPU node (see the module docstring)."""

    compute_efficiency: float = 1.0
    memory_efficiency: float = 1.0
    op_floor_us: float = 0.0
    collective_efficiency: float = 1.0
    link_latency_us: float = 2.0
    host_op_us: float = 0.0

    #: Physically possible ranges (fractions of a datasheet figure cannot exceed one).
    BOUNDS: ClassVar[dict] = {"compute_efficiency": (0.05, 1.0), "memory_efficiency": (0.05, 1.0),
              "op_floor_us": (0.0, 500.0), "collective_efficiency": (0.05, 1.0),
              "link_latency_us": (0.0, 500.0), "host_op_us": (0.0, 500.0)}

    def __post_init__(self):
        for name, (low, high) in self.BOUNDS.items():
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value)
                    and low <= value <= high):
                raise MeasurementError(f"calibration: {name} must be in [{low}, {high}], "
                                       f"got {value!r}")

    def as_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items()}

    @classmethod
    def load(cls, path: str | Path = COEFFICIENTS_FILE) -> Calibration:
        """The coefficients stored in a JSON file (``coefficients`` of :meth:`save`)."""
        try:
            data = json.loads(Path(path).read_text())["coefficients"]
            return cls(**{f.name: float(data[f.name]) for f in fields(cls)})
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise MeasurementError(f"cannot read calibration {path}: {exc}") from None

    def save(self, path: str | Path, **provenance) -> None:
        """Write the coefficients and where they come from (atomically)."""
        path = Path(path)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"coefficients": self.as_dict(), **provenance}, indent=2)
                       + "\n")
        tmp.replace(path)


DATASHEET = Calibration()
"""Datasheet figures, nothing achieved less than promised (2 us a link step)."""

PRIOR = Calibration(0.7, 0.7, 10.0, 0.92, 5.0, 20.0)
"""Where every fit starts: textbook figures, not fitted to any row (70 % of the tensor-core
peak and of HBM bandwidth, 10 us of GPU time at least an op, 20 us of host time to issue an
op), and the network's two, which no single-node row identifies and :func:`fit` leaves as they
are: 92 % of the link's bandwidth (NCCL's own model of its ring with the LL128 protocol,
``busBw * 0.92``, 120 of 128 bytes a line; NVIDIA/nccl ``src/graph/tuning.cc``) and 5 us a
step (NCCL's network ring latency with LL128, ``hwLat`` NET 4.0 us, and the NIC; the
multi-node presets' inter-node step, ``workbench.cluster.TRAINING_PRESETS``)."""

FITTED = ("compute_efficiency", "memory_efficiency", "op_floor_us", "host_op_us")
"""The coefficients :func:`fit` chooses: those the single-node rows identify. Inside a node
the A100's collectives follow NCCL's measured curve, so the network's two
(``collective_efficiency``, ``link_latency_us``) time only traffic across nodes, which no
bundled row has: fitted, they would drift where nothing holds them (one fold of the fourth
session drove the efficiency to 0.055, an InfiniBand 18 times slower)."""


SHIPPED = Calibration.load()
"""The coefficients shipped in the repository (fitted on the bundled rows; see the docs)."""


def shipped_rows() -> list[int]:
    """Indices of the bundled rows the shipped coefficients were fitted on (none to score)."""
    try:
        return [int(i) for i in json.loads(COEFFICIENTS_FILE.read_text()).get("rows", [])]
    except (OSError, ValueError):
        return []


def ladder(runs, rungs: dict | None = None):
    """One row per rung (a :class:`Calibration`): how its predictions of ``runs`` score.

    The fidelity ladder's public rung: datasheet figures against the shipped calibration.

    >>> from workbench.fidelity.measurements import BUNDLED_VTRAIN, read_measurements
    >>> runs = read_measurements(BUNDLED_VTRAIN)
    >>> fitted = set(shipped_rows())
    >>> table = ladder([r for i, r in enumerate(runs) if i not in fitted][:40])
    >>> list(table.index), list(table.columns)
    (['datasheet', 'calibrated'], ['rows', 'MAPE %', 'worst %', 'tau', 'best within 5 %'])
    >>> bool(table.loc["calibrated", "MAPE %"] < table.loc["datasheet", "MAPE %"])
    True
    """
    import pandas as pd

    rungs = rungs or {"datasheet": DATASHEET, "calibrated": SHIPPED}
    measured = np.array([r.measured_ms for r in runs])
    rows = {}
    for name, cal in rungs.items():
        s = score(predict(runs, cal), measured, groups=[r.group for r in runs])
        rows[name] = {"rows": len(runs), "MAPE %": round(s.mape, 2), "worst %": round(s.worst, 2),
                      "tau": round(s.tau_median, 3),
                      "best within 5 %": f"{s.best_within[0]}/{s.best_within[1]}"}
    return pd.DataFrame.from_dict(rows, orient="index")


def _gpu(run: MeasuredRun, cal: Calibration):
    name = GPU_NAMES.get(run.gpu.lower(), run.gpu)
    if name not in GPUS:
        raise MeasurementError(f"line {run.line}: unknown gpu {run.gpu!r}; known: "
                               f"{', '.join(sorted(GPU_NAMES))}")
    return replace(GPUS[name], compute_efficiency=cal.compute_efficiency,
                   memory_efficiency=cal.memory_efficiency, launch_ms=0.0,
                   op_floor_ms=cal.op_floor_us / 1e3, host_op_ms=cal.host_op_us / 1e3)


def _cluster(run: MeasuredRun, gpu, cal: Calibration) -> Cluster:
    """``run.gpus`` GPUs in nodes of ``run.node_size``: NVLink inside (NCCL's measured curve
    where the GPU's preset has one), the row's network across (its Gbit/s per node shared by
    the node's GPUs)."""
    k = run.node_size
    devs = [Device(f"gpu{i}", "gpu", gpu.memory, 1.0, f"node{i // k}") for i in range(run.gpus)]
    lat = cal.link_latency_us / 1e3
    nic = run.inter_node_gbps / 8 * 1e6 / k          # Gbit/s per node -> bytes/ms per GPU
    intra = gpu.nccl_intra or Link(lat, gpu.nvlink * cal.collective_efficiency)
    return Cluster(devs, intra_host=intra,
                   inter_host=Link(max(lat, 0.005), nic * cal.collective_efficiency),
                   host_link=Link(0.01, 24e6), name=f"{run.gpus}x{gpu.name}")


ONE_BUCKET_MB = 1e12
"""Gradient bucket of the measured rows: larger than any model, so each stage's gradients
leave in **one** all-reduce after the backward. Without DDP bucketing (the data's setting)
Megatron all-reduces its whole contiguous gradient buffer in one call; 25 MB buckets would
pay a collective's per-step latency once a bucket (about 100 calls for a 1.3 B model)."""


def judge_run(run: MeasuredRun, cal: Calibration = None):
    """The judged :class:`~workbench.judge.training.TrainingResult` of one measured row."""
    cal = SHIPPED if cal is None else cal
    gpu = _gpu(run, cal)
    try:  # the model, strategy and plan of the row, or the row named
        config = LLMConfig(arch="gpt", layers=run.layers, hidden=run.hidden, heads=run.heads,
                           seq=run.seq, mbs=run.micro_batch, vocab=run.vocab,
                           ffn=run.ffn_hidden or 0)
        strategy = Strategy(tp=run.tp, pp=run.pp, dp=run.dp, mbs=run.micro_batch,
                            global_batch=run.global_batch, recompute=run.recompute,
                            sp=run.sequence_parallel, overlap_grad=False, softmax="megatron",
                            bucket_mb=ONE_BUCKET_MB,
                            schedule="interleaved" if run.interleave > 1 else "1f1b",
                            virtual=run.interleave)
        plan = parallelize(config, _cluster(run, gpu, cal), strategy, gpu=gpu)
    except (PlanError, GraphError, ClusterError) as exc:
        raise MeasurementError(f"line {run.line}: {exc}") from None
    return simulate_training(plan, record_links=False)


def predict(runs, cal: Calibration = None) -> np.ndarray:
    """Predicted iteration times (ms) of ``runs``."""
    return np.array([judge_run(run, cal).step_ms for run in runs])


def fit(runs, *, start: Calibration = None, max_evals: int = 40,
        names: tuple = FITTED) -> Calibration:
    """The coefficients ``names`` that best predict ``runs`` (least squares on
    log(predicted/measured)); the others stay at ``start``'s (default :data:`PRIOR`).

    Every coefficient stays in its physical range (:attr:`Calibration.BOUNDS`).
    """
    from scipy.optimize import least_squares

    runs, start = list(runs), start or PRIOR
    unknown = set(names) - {f.name for f in fields(Calibration)}
    if unknown or not names:
        raise MeasurementError(f"cannot fit {sorted(unknown) or 'no coefficient'}; known: "
                               f"{', '.join(f.name for f in fields(Calibration))}")
    if len(runs) < len(names):
        raise MeasurementError(f"fitting {len(names)} coefficients needs at "
                               f"least as many rows, got {len(runs)}")
    measured = np.log([r.measured_ms for r in runs])
    low = [Calibration.BOUNDS[n][0] for n in names]
    high = [Calibration.BOUNDS[n][1] for n in names]
    x0 = np.clip([getattr(start, n) for n in names], low, high)

    def calibration(x) -> Calibration:
        return replace(start, **{n: float(v) for n, v in zip(names, x)})

    def residuals(x):
        return np.log(predict(runs, calibration(x))) - measured

    sol = least_squares(residuals, x0, bounds=(low, high), diff_step=1e-3, max_nfev=max_evals)
    return calibration(np.clip(sol.x, low, high))


@dataclass
class CrossValidation:
    """Out-of-fold predictions of every row, the coefficients of each fold and their rows."""

    runs: list
    predicted: np.ndarray
    fold_of: np.ndarray
    calibrations: list
    fitted_rows: list

    def score(self):
        measured = np.array([r.measured_ms for r in self.runs])
        return score(self.predicted, measured, groups=[r.group for r in self.runs])


def cross_validate(runs, *, k: int = 5, fit_fraction: float = 0.1, seed: int = 0,
                   start: Calibration = None, max_evals: int = 40) -> CrossValidation:
    """K-fold: for each fold, fit on at most ``fit_fraction`` of all rows drawn from the other
    folds, predict the fold. ``fit_fraction=0`` refits nothing: every row is predicted with
    ``start`` (default: the shipped coefficients); otherwise fits start from ``start``
    (default :data:`PRIOR`, never the shipped coefficients, which saw every fold)."""
    runs = list(runs)
    n = len(runs)
    if fit_fraction == 0:
        cal = start or SHIPPED
        return CrossValidation(runs, predict(runs, cal), np.zeros(n, int), [cal], [[]])
    parts = folds(n, k, seed=seed)
    predicted, fold_of = np.zeros(n), np.zeros(n, int)
    cals, fitted = [], []
    for index, part in enumerate(parts):
        rows = fit_rows(np.setdiff1d(np.arange(n), part), n, fit_fraction, seed=seed + index)
        cal = fit([runs[i] for i in rows], start=start, max_evals=max_evals)
        predicted[part] = predict([runs[i] for i in part], cal)
        fold_of[part] = index
        cals.append(cal)
        fitted.append(rows.tolist())
    return CrossValidation(runs, predicted, fold_of, cals, fitted)


_DIMENSIONS = {"tp": "tp", "pp": "pp", "dp": "dp", "micro batch": "micro_batch",
               "hidden": "hidden", "layers": "layers", "gpus": "gpus"}


def residual_report(runs, predicted, cal: Calibration = None) -> dict:
    """Where the error lies: signed and absolute error (%) by strategy dimension, and each
    part of the predicted step (compute, recompute, TP, PP, bubble, DP, optimizer) as a
    share of the step over all rows and over the worst tenth of rows.

    Returns ``{"by_dimension": {dim: {value: (median signed %, mean abs %, rows)}},
    "parts": {part: (share over all, share over the worst tenth)}}``.
    """
    measured = np.array([r.measured_ms for r in runs])
    signed = (np.asarray(predicted) - measured) / measured * 100
    by_dim = {}
    for label, attr in _DIMENSIONS.items():
        values = np.array([getattr(r, attr) for r in runs])
        by_dim[label] = {int(v): (float(np.median(signed[values == v])),
                                  float(np.abs(signed[values == v]).mean()),
                                  int((values == v).sum())) for v in np.unique(values)}
    shares = []
    for run in runs:
        parts = judge_run(run, cal).breakdown()
        step = parts.pop("step")
        shares.append({k: v / step for k, v in parts.items()})
    worst = np.argsort(-np.abs(signed))[: max(1, len(runs) // 10)]
    keys = sorted(shares[0])
    part_share = {key: (float(np.mean([s[key] for s in shares])),
                        float(np.mean([shares[i][key] for i in worst]))) for key in keys}
    return {"by_dimension": by_dim, "parts": part_share}


_RANKING_PARTS = {"compute": ("compute", "recompute"), "TP": ("tp",), "bubble": ("bubble", "pp"),
                  "DP": ("dp",), "optimizer": ("optimizer",)}


def ranking_misses(runs, predicted, cal: Calibration = None, *, within: float = 0.05) -> list:
    """The groups whose predicted best row is measured more than ``within`` slower than the
    measured best, each with both rows, their errors, and how each part of the predicted step
    (compute with recomputation and the host's lead, TP, bubble with sends, DP, optimizer)
    differs between them: the part with the largest ``best - picked`` is the one that makes
    the model prefer the wrong row (``"none"`` when ``cal`` itself prefers the best: the miss
    came from other coefficients, e.g. a fold's).

    Returns dicts ``{"group", "rows", "picked", "best", "slower_pct", "error_picked_pct",
    "error_best_pct", "delta_ms": {part: ms}, "part"}`` (``picked``/``best`` are runs),
    largest miss first.
    """
    measured = np.array([r.measured_ms for r in runs])
    predicted = np.asarray(predicted, dtype=float)
    by_group: dict = {}
    for index, run in enumerate(runs):
        by_group.setdefault(run.group, []).append(index)
    out = []
    for key, rows in by_group.items():
        if len(rows) < 2:
            continue
        c = rows[int(np.argmin(predicted[rows]))]
        b = rows[int(np.argmin(measured[rows]))]
        if measured[c] <= (1.0 + within) * measured[b]:
            continue
        parts = [judge_run(runs[i], cal).breakdown() for i in (b, c)]
        delta = {k: sum(parts[0][x] - parts[1][x] for x in keys)
                 for k, keys in _RANKING_PARTS.items()}
        out.append({"group": key, "rows": len(rows), "picked": runs[c], "best": runs[b],
                    "slower_pct": (measured[c] / measured[b] - 1) * 100,
                    "error_picked_pct": (predicted[c] / measured[c] - 1) * 100,
                    "error_best_pct": (predicted[b] / measured[b] - 1) * 100,
                    "delta_ms": delta, "part": max(delta, key=delta.get)
                    if max(delta.values()) > 0 else "none"})
    return sorted(out, key=lambda m: -m["slower_pct"])


def cell_slopes(runs, predicted=None, *, min_rows: int = 6) -> list:
    """The time one layer takes per micro-batch in each (tp, micro-batch, hidden) cell of the
    one-stage rows (``pp == 1``), measured and, where ``predicted`` is given, predicted.

    A cell's rows differ in layers ``L``, global batch and data parallelism, so in the
    micro-batches ``m`` a step runs; the slope is the coefficient of ``L x m`` in the least
    squares of the iteration time on ``L x m``, ``m`` (the embedding, loss and sends of a
    micro-batch), ``L`` (what a step does once a layer: gradients, optimizer) and a constant
    (``L`` is left out where the rows cannot separate it). It reads the data alone: no
    coefficient, no judge. A cell that takes *less* time a layer than a cell of the same
    tensor-parallel degree with less work (:func:`work_inversions`) is one no model whose
    time grows with the work can follow.

    Returns dicts ``{"tp", "micro_batch", "hidden", "rows", "measured_ms", "predicted_ms"}``
    (``predicted_ms`` None without ``predicted``), by tp, micro-batch and hidden.

    >>> from workbench.fidelity.measurements import BUNDLED_VTRAIN, read_measurements
    >>> cells = cell_slopes(read_measurements(BUNDLED_VTRAIN))
    >>> c = next(c for c in cells if (c["tp"], c["micro_batch"], c["hidden"]) == (4, 2, 2048))
    >>> c["rows"], round(c["measured_ms"], 2)
    (15, 2.79)
    """
    measured = np.array([r.measured_ms for r in runs], dtype=float)
    pred = None if predicted is None else np.asarray(predicted, dtype=float)
    if pred is not None and pred.shape != measured.shape:
        raise MeasurementError(f"cell_slopes: {len(pred)} predictions for {len(runs)} rows")
    cells: dict = {}
    for index, run in enumerate(runs):
        if run.pp == 1:
            cells.setdefault((run.tp, run.micro_batch, run.hidden), []).append(index)
    out = []
    for (tp, mb, hidden), rows in sorted(cells.items()):
        if len(rows) < min_rows:
            continue
        layers = np.array([runs[i].layers for i in rows], dtype=float)
        m = np.array([runs[i].micro_batches for i in rows], dtype=float)
        design = np.vstack([layers * m, m, layers, np.ones(len(rows))]).T
        if np.linalg.matrix_rank(design) < 4:
            design = design[:, [0, 1, 3]]
            if np.linalg.matrix_rank(design) < 3:
                continue
        slopes = [None if t is None else float(np.linalg.lstsq(design, t[rows], rcond=None)[0][0])
                  for t in (measured, pred)]
        out.append({"tp": tp, "micro_batch": mb, "hidden": hidden, "rows": len(rows),
                    "measured_ms": slopes[0], "predicted_ms": slopes[1]})
    return out


def work_inversions(cells, *, key: str = "measured_ms", tolerance: float = 0.05) -> list:
    """Pairs of :func:`cell_slopes` cells of one tensor-parallel degree where the cell with
    more work (a hidden size and a micro-batch at least as large, one of them larger) takes
    more than ``tolerance`` less time a layer and micro-batch than the other (``key``:
    ``"measured_ms"`` or ``"predicted_ms"``). Largest inversion first.

    Returns dicts ``{"more": cell, "less": cell, "faster_pct"}``.

    >>> from workbench.fidelity.measurements import BUNDLED_VTRAIN, read_measurements
    >>> pairs = work_inversions(cell_slopes(read_measurements(BUNDLED_VTRAIN)))
    >>> [(p["more"]["hidden"], p["more"]["micro_batch"], p["less"]["hidden"],
    ...   p["less"]["micro_batch"]) for p in pairs if p["more"]["tp"] == 4][:2]
    [(2048, 2, 1024, 1), (2048, 2, 1024, 2)]
    """
    out = []
    for more in cells:
        for less in cells:
            if (more is less or more["tp"] != less["tp"] or more[key] is None
                    or more["hidden"] < less["hidden"] or more["micro_batch"] < less["micro_batch"]):
                continue
            faster = 1.0 - more[key] / less[key]
            if faster > tolerance:
                out.append({"more": more, "less": less, "faster_pct": faster * 100})
    return sorted(out, key=lambda p: -p["faster_pct"])
