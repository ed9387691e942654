"""Traced measurements: a plan timed, then traced several times, its trace the median timeline
(what :func:`workbench.fidelity.trace_residuals.residuals` lines up with a simulation).
"""

from __future__ import annotations

from ..errors import RuntimeBridgeError
from ..fidelity.trace_residuals import median_timeline

__all__ = ["traced_measurement"]


def traced_measurement(plan, *, traces: int = 5, steps: int = 10, warmup: int = 3,
                       program=None, **run_kw):
    """Time ``steps`` steps of ``plan`` and trace ``traces`` more; the Measurement's ``trace``
    is the *median timeline*: per op, the median over the traced steps of its start and of its
    end (each step's times from its first op). On a shared machine one traced step often has an
    op preempted for tens of ms; the median timeline ignores it unless most steps had it.

    ``**run_kw`` go to :class:`~workbench.runtime.runner.PlanSession` (``cluster=``,
    ``devices=``, ...). Raises what the runner raises (``PlanError``, ``RuntimeBridgeError``).
    """
    from .runner import PlanSession

    if traces < 1:
        raise RuntimeBridgeError(f"traced_measurement: traces must be >= 1, got {traces}")
    with PlanSession(plan, program=program, **run_kw) as ps:
        ps.warm(warmup)
        ps.time(steps)
        return ps.measurement(median_timeline([ps.trace() for _ in range(traces)]))
