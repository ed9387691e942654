"""The calibrated judge against measurements: the model fitted to what :mod:`workbench.runtime`
measured, and public GPU measurements. No framework is imported here.

==========================================  =======================================================
:mod:`~workbench.fidelity.model`            :class:`JudgeModel`: a cluster and the simulator
                                            settings that model a real machine, its changes
                                            fitted (``fit_*``, ``rescale``) and applied (``with_*``)
:mod:`~workbench.fidelity.changes`          the named changes (:data:`MODEL_CHANGES` by default,
                                            :data:`OPTIONAL_CHANGES`), and what they share
:mod:`~workbench.fidelity.named_changes`    the changes as registered objects (:data:`CHANGES`:
                                            what each models, what is measured for it, how
                                            :meth:`ModelChange.apply` fits or sets it) and
                                            :func:`fit_measured`, the model fitted to what
                                            :mod:`workbench.runtime` measured
:mod:`~workbench.fidelity.probes`           the probe plans the changes are fitted to
:mod:`~workbench.fidelity.fitting`          fits of figures to measurements (links, bisection,
                                            slowdowns)
:mod:`~workbench.fidelity.extras`           the changes' per-op extra times and
                                            :func:`simulate_overlap`, which hands them to
                                            ``simulate(..., op_times=)``
:mod:`~workbench.fidelity.trace_residuals`  a traced run lined up with its simulation
:mod:`~workbench.fidelity.ladder`           the fidelity ladder's statistics over many plans
:mod:`~workbench.fidelity.measurements`     public GPU measurements (``measurements``), and
:mod:`~workbench.fidelity.public`           the training judge calibrated and scored against them
==========================================  =======================================================
"""
