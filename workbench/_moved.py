"""Old import paths of modules that moved into their rooms (issue 24), kept for one release.

``import workbench.solvers.cpsat`` still works and gives a module that forwards every attribute
to :mod:`workbench.solvers.pesto.cpsat`, with a :class:`DeprecationWarning` naming the new path.
:data:`MOVED` is the whole table; :func:`install` (run by ``import workbench``) puts the finder
on ``sys.meta_path``. Nothing is imported until an old path is used.

Examples
--------
>>> import warnings, importlib
>>> with warnings.catch_warnings(record=True) as w:
...     warnings.simplefilter("always")
...     old = importlib.import_module("workbench.solvers.list_scheduling")
>>> old.heft is importlib.import_module("workbench.solvers.list.scheduling").heft
True
>>> "workbench.solvers.list.scheduling" in str(w[0].message)
True
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings

_S = "workbench.solvers."
MOVED: dict[str, str] = {_S + old: _S + new for old, new in {
    "baselines": "baselines.simple", "metis": "pipeline.metis",
    "celeritas": "celeritas.placement", "celeritas_boundaries": "celeritas.boundaries",
    "list_scheduling": "list.scheduling", "os_dpos": "list.os_dpos",
    "data_parallel": "list.data_parallel",
    "pesto": "pesto.ilp", "cpsat": "pesto.cpsat", "cpsat_hint": "pesto.hint",
    "cpsat_pesto": "pesto.cpsat_engine",
    "pipeline_dp": "pipeline.dp", "_pipeline_dp_jit": "pipeline._dp_jit",
    "pipeline_dp_kernel": "pipeline.kernel", "pipeline_dp_pykernel": "pipeline.pykernel",
    "pipeline_dp_lattice": "pipeline.ideals", "pipeline_dp_contract": "pipeline.contraction",
    "pipeline_dp_gpipe": "pipeline.gpipe", "pipeline_dp_hier": "pipeline.hierarchy",
    "pipeline_ip": "pipeline.ip", "pipeline_latency": "pipeline.latency",
    "pipeline_cpsat": "pipeline.latency_cpsat", "pipeline_baselines": "pipeline.local_search",
    "_params": "params"}.items()}
MOVED.update({"workbench.roofline": "workbench.costs.roofline",
              "workbench.pipeline_costs": "workbench.costs.pipeline"})
"""Old module path -> new module path. (``workbench.costs`` itself became the cost-model
package; its old contents, Celeritas's standard evaluation, are re-exported there.)"""


class _Forward(importlib.abc.Loader):
    def create_module(self, spec):
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new}; the old path goes away in the next release",
                      DeprecationWarning, stacklevel=3)
        real = importlib.import_module(new)
        mod = types.ModuleType(spec.name, real.__doc__)
        mod.__getattr__ = lambda name: getattr(real, name)
        mod.__dir__ = lambda: dir(real)
        mod.__all__ = getattr(real, "__all__", [n for n in dir(real) if not n.startswith("_")])
        return mod

    def exec_module(self, module):
        pass


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED:
            return importlib.machinery.ModuleSpec(fullname, _Forward())
        return None


def install() -> None:
    """Put the finder of old paths on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())


def forward(package: str, module: str):
    """A module ``__getattr__`` for a package that replaced a module of the same name:
    ``workbench.solvers.pesto.PestoModel`` still resolves, from :mod:`.pesto.ilp`, imported only
    when asked.

    >>> import workbench.solvers.pesto as p
    >>> p.PestoModel.__module__
    'workbench.solvers.pesto.ilp'
    """

    def __getattr__(name: str):
        real = importlib.import_module(f"{package}.{module}")
        if name in getattr(real, "__all__", ()):
            return getattr(real, name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
