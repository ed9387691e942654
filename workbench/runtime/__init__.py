"""The TensorFlow bridge: op graphs of real models, profiling, link calibration, runner.

This package only measures (runs programs, times them, reads allocator statistics); what is
fitted to the measurements, the calibrated judge, is :mod:`workbench.fidelity`. TensorFlow is
imported lazily: importing :mod:`workbench.runtime` does not import it, and the
names below load their module on first access.

==========================  ==================================================================
:func:`extract`             OpGraph of one training step of a model (forward, backward, update):
                            a bundled model, a v1 builder, ``keras:NAME``, a Keras 3 model or a
                            ``tf.function`` step (:mod:`~workbench.runtime.keras_step`)
:func:`program_of`          the runnable Program of any of those (what the runner applies plans to)
:func:`profile`             measured per-op times written into the graph's compute costs
:func:`calibrate_links`     fitted ``latency + bytes/bandwidth`` link per device pair -> Cluster
:func:`fit_recv_overhead`   the devices' receive overhead fitted to a measured probe run
:func:`calibrate_model`     a :class:`~workbench.fidelity.model.JudgeModel` fitted to probe runs it
                            measures (the model itself lives in :mod:`workbench.fidelity`)
:func:`traced_measurement`  a plan timed and traced, its trace the median timeline (for
                            :func:`workbench.fidelity.trace_residuals.residuals`)
:func:`run_plan`            apply a Plan to the real program, measure step time -> Measurement
:func:`measure_plans`       several plans, failures reported per plan -> dict name -> Measurement
:func:`apply_if_faster`     FastT's rollback guard: keep the current plan unless the new is faster
:func:`execution_chains`    the per-device op sequences the runner enforces (one op at a time)
:class:`LocalServers`       several hosts: ``tf.distribute.Server`` processes on 127.0.0.1
:data:`MODELS`              the five sample models built in code
==========================  ==================================================================

>>> import subprocess, sys
>>> code = "import sys, workbench.runtime; print('tensorflow' in sys.modules)"
>>> subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.split()
['False']
"""

from __future__ import annotations

import importlib

__all__ = [
    "DEFAULT_BATCH",
    "MODELS",
    "TINY",
    "Decision",
    "LocalServers",
    "Measurement",
    "Program",
    "apply_if_faster",
    "build_program",
    "calibrate_links",
    "calibrate_model",
    "execution_chains",
    "extract",
    "fit_recv_overhead",
    "measure_plans",
    "profile",
    "program_of",
    "run_plan",
    "traced_measurement",
]

_WHERE = {
    "extract": "extraction", "build_program": "extraction", "Program": "extraction",
    "program_of": "extraction",
    "profile": "profiling",
    "calibrate_links": "calibrate", "fit_recv_overhead": "calibrate",
    "calibrate_model": "calibrate", "traced_measurement": "tracing",
    "run_plan": "runner", "measure_plans": "runner", "apply_if_faster": "runner",
    "Measurement": "runner", "Decision": "runner", "execution_chains": "runner",
    "LocalServers": "distributed",
    "MODELS": "models", "TINY": "models", "DEFAULT_BATCH": "models",
}


def __getattr__(name: str):
    if name in _WHERE:
        mod = importlib.import_module(f"{__name__}.{_WHERE[name]}")
        value = getattr(mod, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
