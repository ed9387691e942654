"""The calibrated judge's named changes as registered objects (:data:`CHANGES`), and the fit of
a :class:`~workbench.fidelity.model.JudgeModel` to what :mod:`workbench.runtime` measured for
them (:func:`fit_measured`).

Each :class:`ModelChange` says what it models, whether it is made by default, what is measured
for it, which changes it excludes, and how it is made: :meth:`ModelChange.apply` fits the
change to its measurements (``rescale``, ``live_memory``, ``step_cost``, ``recv_fit``,
``wakeup``) or sets it from a measured figure (``contention_bench``, ``handoff``,
``shared_memory``, ``overlap``, ``contention``). :data:`~workbench.fidelity.changes.MODEL_CHANGES`
and :data:`~workbench.fidelity.changes.OPTIONAL_CHANGES` document each one at length.

>>> from workbench.cluster import local_cluster
>>> from workbench.fidelity.model import JudgeModel
>>> m = CHANGES["contention_bench"].apply(JudgeModel(local_cluster(2)), 0.2)
>>> m.overlap, m.changes
(0.2, ('contention_bench',))
>>> [c.name for c in CHANGES.values() if c.default] == list(MODEL_CHANGES)
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ..cluster import Cluster
from ..errors import RuntimeBridgeError
from .changes import (
    MODEL_CHANGES,
    OPTIONAL_CHANGES,
    fit_wakeup_ms,
    measurable_changes,
    pointer_cluster,
    same_process,
)
from .fitting import contention_factor, overlap_slope
from .probes import REFERENCES, SPLIT_PROBES, STEP_PROBES

__all__ = ["CHANGES", "ModelChange", "anchored_changes", "check_changes", "fit_measured",
           "with_contention_factor", "with_overlap_fitted", "with_shared_memory"]


@dataclass(frozen=True)
class ModelChange:
    """One named change of the calibrated judge (see the module docstring).

    ``measured``: what :mod:`workbench.runtime` measures for it (probe names of
    :data:`~workbench.fidelity.probes.PROBES`, or a benchmark); ``make``: the
    :class:`~workbench.fidelity.model.JudgeModel` method (by name) or function
    ``(model, *figures) -> model`` that fits or applies it; ``excludes``: changes that model
    the same effect.

    >>> c = CHANGES["rescale"]
    >>> c.default, c.measured
    (True, ('(reference)', '(reference 2)', '(reference 3)'))
    """

    name: str
    default: bool
    summary: str
    measured: tuple
    make: str | Callable
    excludes: tuple = ()

    def apply(self, model, *figures, **options):
        """``model`` with this change, fitted to or set from ``figures`` (the arguments of
        :attr:`make`)."""
        make = getattr(model, self.make) if isinstance(self.make, str) else (
            lambda *a, **k: self.make(model, *a, **k))
        return make(*figures, **options)


def with_shared_memory(model, latency_ms: float):
    """``model`` with the ``shared_memory`` change: its devices linked as logical devices of one
    process (a per-tensor ``latency_ms``, infinite bandwidth, no congestion).

    >>> from workbench.cluster import local_cluster
    >>> from workbench.fidelity.model import JudgeModel
    >>> m = with_shared_memory(JudgeModel(local_cluster(2)), 0.01)
    >>> m.congestion, m.cluster.intra_host.latency, m.changes
    (False, 0.01, ('shared_memory',))
    """
    cl = pointer_cluster(model.cluster.devices, latency_ms, model.cluster.name)
    return replace(model, cluster=cl, congestion=False,
                   changes=model.changes + ("shared_memory",))


def with_overlap_fitted(model, slope: float):
    """``model`` with the ``overlap`` change at the traced ``slope``."""
    return replace(model, overlap=slope, changes=model.changes + ("overlap",))


def with_contention_factor(model, factor: float):
    """``model`` with the ``contention`` change: plans on as many devices as its probe run at
    ``1 / factor`` speed."""
    k = len(model.probe.devices_used())
    return replace(model, contention={k: factor}, changes=model.changes + ("contention",))


_SLOWDOWNS = ("contention", "overlap", "contention_bench")

CHANGES: dict[str, ModelChange] = {c.name: c for c in (
    ModelChange("contention_bench", True, "ops slowed by the time other devices compute, the "
                "slope measured untraced", ("contention benchmark",), "with_overlap_slope",
                ("contention", "overlap")),
    ModelChange("handoff", True, "per-tensor send, receive and hand-off costs of logical devices, "
                "measured by micro-benchmarks", ("hand-off benchmarks",), "with_handoff",
                ("shared_memory", "recv_fit")),
    ModelChange("rescale", True, "device speeds scaled to the single-device reference's step",
                REFERENCES, "rescale"),
    ModelChange("live_memory", True, "ops slowed by the memory live when they start",
                (*REFERENCES, "(order probe)", *SPLIT_PROBES), "fit_live_memory"),
    ModelChange("step_cost", True, "a constant more for a step on several devices",
                (*REFERENCES, *STEP_PROBES), "fit_step_cost"),
    ModelChange("shared_memory", False, "logical devices pass pointers: a per-tensor latency "
                "from the traced probe", ("traced probe",), with_shared_memory, ("handoff",)),
    ModelChange("recv_fit", False, "the receive overhead fitted to the random probe",
                ("(probe)",), "refit_recv", ("handoff",)),
    ModelChange("overlap", False, "ops slowed by the time other devices compute, the slope from "
                "traced op times", ("traced probe", "traced single-device run"),
                with_overlap_fitted, ("contention", "contention_bench")),
    ModelChange("contention", False, "plans on the probe's device count slowed by one factor",
                ("traced probe", "traced single-device run"), with_contention_factor,
                ("overlap", "contention_bench")),
    ModelChange("wakeup", False, "a hand-off to a device idle for 0.1 ms costs a fitted latency",
                ("idle probe",), fit_wakeup_ms),
)}
"""The named changes by name, the default ones first (:data:`MODEL_CHANGES` order), then
:data:`OPTIONAL_CHANGES`."""

assert tuple(CHANGES) == MODEL_CHANGES + OPTIONAL_CHANGES


def check_changes(changes, cluster: Cluster) -> tuple:
    """``changes`` checked (known names, no two that exclude each other) and as they can be
    measured on ``cluster`` (:func:`~workbench.fidelity.changes.measurable_changes`).

    >>> from workbench.cluster import local_cluster
    >>> check_changes(["handoff", "recv_fit"], local_cluster(2))
    Traceback (most recent call last):
    ...
    workbench.errors.RuntimeBridgeError: calibrate_model: change 'handoff' replaces 'shared_memory' and 'recv_fit'; name it without them
    """
    changes = tuple(changes)
    bad = [c for c in changes if c not in CHANGES]
    if bad:
        raise RuntimeBridgeError(f"calibrate_model: unknown model change {bad[0]!r} (known: "
                                 f"{', '.join(CHANGES)})")
    if "handoff" in changes and set(CHANGES["handoff"].excludes) & set(changes):
        raise RuntimeBridgeError("calibrate_model: change 'handoff' replaces 'shared_memory' and "
                                 "'recv_fit'; name it without them")
    slowdowns = [c for c in _SLOWDOWNS if c in changes]
    if len(slowdowns) > 1:
        raise RuntimeBridgeError(f"calibrate_model: changes {slowdowns[0]!r} and "
                                 f"{slowdowns[1]!r} model the same slowdown; name one of them")
    return measurable_changes(changes, cluster)


def anchored_changes(changes: tuple, cluster: Cluster) -> list:
    """The changes of ``changes`` fitted to probes timed in interleaved rounds (and refitted by
    :meth:`~workbench.fidelity.model.JudgeModel.reanchor`): ``recv_fit`` anywhere; ``rescale``,
    ``live_memory`` and ``step_cost`` on local logical CPU devices only (they run every op on
    the first device, which a GPU cluster's host cannot).

    >>> from workbench.cluster import local_cluster
    >>> anchored_changes(("handoff", "rescale", "step_cost"), local_cluster(2))
    ['rescale', 'step_cost']
    """
    return [c for c in ("rescale", "live_memory", "step_cost", "recv_fit") if c in changes
            and (c == "recv_fit" or same_process(cluster))]


def fit_measured(cluster: Cluster, probe, changes: tuple, *, probe_run, single_run=None,
                 contention_slope: float | None = None, handoff=None):
    """The model of ``changes`` (checked, :func:`check_changes`) fitted to what was measured
    before the anchoring rounds: ``probe_run`` (the random ``probe`` traced: its median step and
    median timeline), ``single_run`` (the probe's ops traced on one device: ``overlap``,
    ``contention``), ``contention_slope`` (the untraced slowdown benchmark:
    ``contention_bench``) and ``handoff`` (:class:`~workbench.fidelity.extras.HandoffCosts`).
    The anchored changes are then fitted by :meth:`~workbench.fidelity.model.JudgeModel.reanchor`
    to the probes timed in interleaved rounds.

    Raises
    ------
    RuntimeBridgeError
        The probe moves no tensor, or a change's measurement is missing.
    """
    from .model import JudgeModel
    from .trace_residuals import residuals

    model = JudgeModel(cluster, changes=(), probe=probe)
    details: dict = {"probe_measured_ms": probe_run.median_ms}
    res = residuals(probe, probe_run, schedule=model.simulate(probe))
    if not len(res.transfers):
        raise RuntimeBridgeError(f"the probe plan {probe.method!r} moves no tensor between "
                                 f"devices; use a cluster of two or more devices")
    if "shared_memory" in changes and same_process(cluster):
        bind = res.transfers[res.transfers["binding"]]["meas_ms"]
        lat = float(max(0.0, bind.median())) if len(bind) else 0.0
        model = CHANGES["shared_memory"].apply(model, lat)
        details["tensor_latency_ms"] = lat
    if "contention" in changes or "overlap" in changes:
        if single_run is None:
            raise RuntimeBridgeError("fit_measured: 'contention' and 'overlap' need the traced "
                                     "single-device run (single_run=)")
        factor = contention_factor(probe_run.trace, single_run.trace)
        slope = overlap_slope(probe_run.trace, single_run.trace)
        which = "contention" if "contention" in changes else "overlap"
        model = CHANGES[which].apply(model, factor if which == "contention" else slope)
        details.update(contention_factor=factor, overlap_slope=slope,
                       single_measured_ms=single_run.median_ms)
    model = replace(model, details=details)
    for name, figure in (("contention_bench", contention_slope), ("handoff", handoff)):
        if name in changes:
            if figure is None:
                raise RuntimeBridgeError(f"fit_measured: change {name!r} needs its measurement")
            model = CHANGES[name].apply(model, figure)
    return model
