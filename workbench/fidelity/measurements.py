"""Public measurements of training iterations: reading them, splitting them, scoring a model on them.

The workbench has no GPU of its own; what it says about GPUs is checked against iterations that
others measured and published. The bundled set (``sample_graphs/measurements/vtrain/``) holds
1,008 A100 iterations of GPT models trained with Megatron (vTrain's validation data, MIT licence).
This module knows nothing of the model that predicts them: it reads a CSV into validated
:class:`MeasuredRun` rows, splits rows into folds (the fitted rows are never scored), and scores
predictions as the public-fidelity issue asks (mean absolute percentage error, worst row, Kendall
tau of the ranking within each group of rows that answer the same question, and whether the
predicted best configuration is within 5 % of the measured best).

Examples
--------
>>> runs = read_measurements(BUNDLED_VTRAIN)
>>> len(runs), runs[0].gpus, runs[0].tp, runs[0].pp, runs[0].dp, runs[0].micro_batches
(1008, 2, 2, 1, 1, 4)
>>> sorted({r.gpu for r in runs}), runs[0].recompute
(['A100-80g'], 'full')
>>> s = score([100.0, 210.0, 290.0], [100.0, 200.0, 300.0], groups=["a", "a", "a"])
>>> round(s.mape, 2), round(s.worst, 2), s.tau_median, s.best_within
(2.78, 5.0, 1.0, (1, 1))
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workbench.errors import WorkbenchError

__all__ = [
    "BUNDLED_VTRAIN",
    "MeasuredRun",
    "MeasurementError",
    "PublicScore",
    "fit_rows",
    "folds",
    "kendall_tau",
    "read_measurements",
    "score",
]

#: The bundled A100 measurements (vTrain's validation rows; see its README and LICENSE).
BUNDLED_VTRAIN = (Path(__file__).resolve().parents[2] / "sample_graphs" / "measurements"
                  / "vtrain" / "single_node.csv")

#: Required columns (the vTrain CSV's own names) and the field each fills.
REQUIRED = {
    "# GPUs": "gpus", "global batch": "global_batch", "micro batch": "micro_batch",
    "hidden size": "hidden", "attention heads": "heads", "# layers": "layers",
    "sequence length": "seq", "tensor parallelism": "tp", "data parallelism": "dp",
    "pipeline parallelism": "pp", "iteration time (ms)": "measured_ms",
}
#: Optional columns: where present in a row, they override the settings common to vTrain's rows.
OPTIONAL = {
    "recompute": "recompute", "sequence parallel": "sequence_parallel",
    "interleave": "interleave", "ffn hidden size": "ffn_hidden", "vocab size": "vocab",
    "gpu": "gpu", "node size": "node_size", "inter-node Gbps": "inter_node_gbps",
}
RECOMPUTE = ("none", "selective", "full")


class MeasurementError(WorkbenchError, ValueError):
    """A measurement file or row that cannot be read as a training iteration."""


@dataclass(frozen=True)
class MeasuredRun:
    """One measured training iteration and the strategy it ran (defaults: vTrain's settings).

    ``micro_batches`` is the number of micro-batches each pipeline runs per step:
    ``global_batch / (micro_batch * dp)``.
    """

    gpus: int
    global_batch: int
    micro_batch: int
    hidden: int
    heads: int
    layers: int
    seq: int
    tp: int
    dp: int
    pp: int
    measured_ms: float
    recompute: str = "full"
    sequence_parallel: bool = False
    interleave: int = 1
    ffn_hidden: int | None = None
    vocab: int = 50257
    gpu: str = "A100-80g"
    node_size: int = 8
    inter_node_gbps: float = 800.0
    line: int = 0
    extra: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def micro_batches(self) -> int:
        return self.global_batch // (self.micro_batch * self.dp)

    @property
    def model_key(self) -> tuple:
        """What identifies the model trained (the same model is trained in every row of a key)."""
        return (self.hidden, self.heads, self.layers, self.seq, self.ffn_hidden, self.vocab)

    @property
    def group(self) -> tuple:
        """Rows that answer one question: this model, this many GPUs, this global batch."""
        return (self.model_key, self.gpus, self.global_batch)


def _int(text: str, name: str, line: int, *, low: int = 1) -> int:
    try:
        value = float(text)
    except ValueError:
        raise MeasurementError(f"line {line}: column {name!r} is {text!r}, not a number") from None
    if not math.isfinite(value) or value != int(value) or value < low:
        raise MeasurementError(f"line {line}: column {name!r} is {text!r}, not an integer >= {low}")
    return int(value)


def _optional(run: dict, row: dict, line: int) -> None:
    for column, key in OPTIONAL.items():
        text = (row.get(column) or "").strip()
        if not text:
            continue
        if key == "recompute":
            if text not in RECOMPUTE:
                raise MeasurementError(f"line {line}: recompute is {text!r}; one of {RECOMPUTE}")
            run[key] = text
        elif key == "gpu":
            run[key] = text
        elif key == "sequence_parallel":
            run[key] = bool(_int(text, column, line, low=0))
        elif key == "inter_node_gbps":
            try:
                run[key] = float(text)
            except ValueError:
                raise MeasurementError(f"line {line}: {column!r} is {text!r}") from None
            if not math.isfinite(run[key]) or run[key] <= 0:
                raise MeasurementError(f"line {line}: {column!r} must be positive, got {text!r}")
        else:
            run[key] = _int(text, column, line)


def _check(run: MeasuredRun) -> None:
    line = run.line
    if run.tp * run.pp * run.dp != run.gpus:
        raise MeasurementError(f"line {line}: tp x pp x dp = {run.tp * run.pp * run.dp}, "
                               f"but # GPUs = {run.gpus}")
    if run.global_batch % (run.micro_batch * run.dp):
        raise MeasurementError(f"line {line}: global batch {run.global_batch} is not a multiple "
                               f"of micro batch x data parallelism ({run.micro_batch} x {run.dp})")
    if run.hidden % run.heads or run.heads % run.tp:
        raise MeasurementError(f"line {line}: hidden {run.hidden} / heads {run.heads} / "
                               f"tensor parallelism {run.tp} do not divide")
    if run.layers % (run.pp * run.interleave):
        raise MeasurementError(f"line {line}: {run.layers} layers do not split into "
                               f"{run.pp} stages x {run.interleave} virtual stages")
    if not (math.isfinite(run.measured_ms) and run.measured_ms > 0):
        raise MeasurementError(f"line {line}: iteration time {run.measured_ms!r} is not positive")
    _check_sizes(run)


def _check_sizes(run: MeasuredRun) -> None:
    """Sizes the judge can take (a row of 10**8 layers or a batch of 10**9 ran for minutes or
    ran out of memory before it was refused, issue 41)."""
    from ..costs.llm import MAX_DIM, MAX_LAYERS
    from ..transforms.parallel import MAX_MICRO

    if run.layers > MAX_LAYERS:
        raise MeasurementError(f"line {run.line}: {run.layers} layers; at most {MAX_LAYERS}")
    for name in ("hidden", "heads", "seq", "micro_batch", "vocab", "global_batch"):
        if getattr(run, name) > MAX_DIM:
            raise MeasurementError(f"line {run.line}: {name} {getattr(run, name)} is beyond "
                                   f"{MAX_DIM}")
    if run.micro_batches > MAX_MICRO:
        raise MeasurementError(f"line {run.line}: {run.micro_batches} micro-batches a replica; "
                               f"the judge takes at most {MAX_MICRO}")


def read_measurements(path: str | Path) -> list[MeasuredRun]:
    """Read a CSV of measured iterations (vTrain's columns; other columns are kept in ``extra``).

    Raises :class:`MeasurementError` naming the file, line and column of anything unreadable.
    """
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:  # a BOM is no column
            rows = list(csv.DictReader(handle))
            columns = set(rows[0]) if rows else set()
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise MeasurementError(f"cannot read {path}: {exc}") from None
    if not rows:
        raise MeasurementError(f"{path} holds no rows")
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        raise MeasurementError(f"{path} lacks the column(s) {missing}; it needs {list(REQUIRED)}")
    runs = []
    for line, row in enumerate(rows, start=2):
        if None in row or None in row.values():  # csv's markers of extra / missing cells
            cells = len(row) - 1 + len(row[None]) if None in row else \
                sum(v is not None for v in row.values())
            raise MeasurementError(f"line {line}: {cells} cells, but the header has "
                                   f"{len(columns)} (a truncated or damaged row)")
        run = {key: _int(row[col], col, line) for col, key in REQUIRED.items()
               if key != "measured_ms"}
        try:
            run["measured_ms"] = float(row["iteration time (ms)"])
        except (TypeError, ValueError):
            raise MeasurementError(f"line {line}: iteration time is "
                                   f"{row['iteration time (ms)']!r}") from None
        _optional(run, row, line)
        extra = {k: v for k, v in row.items() if k not in REQUIRED and k not in OPTIONAL}
        measured = MeasuredRun(**run, line=line, extra=extra)
        _check(measured)
        runs.append(measured)
    return runs


def folds(n: int, k: int, *, seed: int = 0) -> list[np.ndarray]:
    """``k`` disjoint folds of ``range(n)`` in a seeded random order (every index in one fold).

    >>> [len(f) for f in folds(10, 3)]
    [4, 3, 3]
    """
    if not (isinstance(k, int) and 2 <= k <= n):
        raise MeasurementError(f"folds must be an integer in [2, {n}], got {k!r}")
    order = np.random.default_rng(seed).permutation(n)
    return [np.sort(part) for part in np.array_split(order, k)]


def fit_rows(candidates: np.ndarray, n_total: int, fraction: float, *,
             seed: int = 0) -> np.ndarray:
    """At most ``fraction`` of ``n_total`` rows, drawn from ``candidates`` (a seeded sample).

    >>> len(fit_rows(np.arange(900), 1000, 0.1))
    100
    """
    if not (math.isfinite(fraction) and 0.0 <= fraction <= 1.0):
        raise MeasurementError(f"the fit fraction must be in [0, 1], got {fraction!r}")
    count = min(len(candidates), math.floor(fraction * n_total))
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(np.asarray(candidates), size=count, replace=False))


def kendall_tau(a, b) -> float:
    """Kendall's tau-b of two sequences (scipy's); ``nan`` for fewer than two rows.

    >>> kendall_tau([1, 2, 3], [10, 30, 20])
    0.333...
    """
    from scipy.stats import kendalltau

    if len(a) < 2:
        return float("nan")
    return float(kendalltau(a, b).statistic)


@dataclass(frozen=True)
class PublicScore:
    """How predictions compare with measurements.

    ``best_within`` is (groups whose predicted best is within 5 % of the measured best, groups
    with at least two rows); ``tau_median`` is over those groups too.
    """

    mape: float
    worst: float
    tau_median: float
    best_within: tuple[int, int]
    taus: dict = field(repr=False)

    def line(self) -> str:
        """The bench's closing line."""
        a, b = self.best_within
        return (f"public fidelity: MAPE {self.mape:.2f} %, worst {self.worst:.2f} %, "
                f"tau {self.tau_median:.3f} (median over groups), best within 5 % in {a}/{b} groups")


def score(predicted, measured, *, groups, within: float = 0.05) -> PublicScore:
    """Score predictions against measurements, row by row and group by group."""
    predicted = np.asarray(predicted, dtype=float)
    measured = np.asarray(measured, dtype=float)
    if predicted.shape != measured.shape or len(groups) != len(measured) or not len(measured):
        raise MeasurementError("predicted, measured and groups must have the same nonzero length")
    error = np.abs(predicted - measured) / measured * 100.0
    by_group: dict = {}
    for index, key in enumerate(groups):
        by_group.setdefault(key, []).append(index)
    taus, hits, counted = {}, 0, 0
    for key, rows in by_group.items():
        if len(rows) < 2:
            continue
        counted += 1
        taus[key] = kendall_tau(predicted[rows], measured[rows])
        chosen = rows[int(np.argmin(predicted[rows]))]
        hits += measured[chosen] <= (1.0 + within) * measured[rows].min()
    values = [t for t in taus.values() if not math.isnan(t)]
    return PublicScore(float(error.mean()), float(error.max()),
                       float(np.median(values)) if values else float("nan"),
                       (int(hits), counted), taus)
