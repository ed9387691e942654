"""Library exceptions.

Every error a user can trigger with bad input is one of these, with a message that names the
offending op, edge, device or field. The CLI prints ``str(error)`` on one line and exits non-zero.

Examples
--------
>>> from workbench.errors import GraphError
>>> str(GraphError("op 'a' has negative compute time -1.0 on 'gpu'"))
"op 'a' has negative compute time -1.0 on 'gpu'"
"""

from __future__ import annotations

__all__ = [
    "WorkbenchError",
    "GraphError",
    "ClusterError",
    "PlanError",
    "InfeasibleError",
    "SolverError",
    "TimeLimitError",
    "NotApplicableError",
    "FormatError",
    "CaptureError",
    "RuntimeBridgeError",
    "OutputError",
    "Interrupted",
    "SweepError",
]


class WorkbenchError(Exception):
    """Base class of every error raised on purpose by the workbench."""


class GraphError(WorkbenchError, ValueError):
    """The operator graph is malformed: a cycle, a dangling edge, a bad cost."""


class ClusterError(WorkbenchError, ValueError):
    """The cluster description is malformed, empty, or names an unknown preset/device."""


class PlanError(WorkbenchError, ValueError):
    """A plan does not fit its graph or cluster (unplaced op, unknown device, bad order)."""


class InfeasibleError(WorkbenchError):
    """No valid answer exists: an op no device can run, memory that cannot hold the model."""


class SolverError(WorkbenchError):
    """A solver could not run: unknown method, bad parameter, missing MILP backend."""


class NotApplicableError(SolverError):
    """The problem lies outside a method's model (a cluster shape or device mix the paper's
    accounting cannot express): nothing is wrong with the input, the method simply does not
    serve it. :func:`workbench.compare` leaves such a method out with this message as the
    reason, instead of an error row."""


class TimeLimitError(SolverError):
    """A solver ran out of its time limit before it had any answer to return (the problem may
    well be within its model: a longer limit can solve it)."""


class FormatError(WorkbenchError, ValueError):
    """A file is corrupt, of an unknown format, or of an unsupported schema version."""


class CaptureError(WorkbenchError, ValueError):
    """A PyTorch model could not be captured (workbench.io.torch): the message names the
    construct and the module, and what to try instead."""


class RuntimeBridgeError(WorkbenchError):
    """The TensorFlow bridge failed: TF missing, a device that does not exist, a failed step."""


class SweepError(WorkbenchError, ValueError):
    """A sweep spec names an unknown workload, preset, method or parameter, or a Dask scheduler
    does not answer."""


class OutputError(WorkbenchError):
    """A result cannot be written: the path is a directory, not writable, or not encodable."""


class Interrupted(KeyboardInterrupt):
    """SIGTERM received: raised like SIGINT's KeyboardInterrupt so cleanup runs the same way.

    ``signum`` is the signal number; the command line exits with ``128 + signum``.
    """

    def __init__(self, signum: int):
        super().__init__(f"signal {signum}")
        self.signum = signum
