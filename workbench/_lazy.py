"""Modules loaded when first used, so that ``import workbench`` stays light.

``import workbench`` must not load the heavy optional libraries (PuLP and HiGHS, numba, OR-Tools,
pandas, plotly, TensorFlow, torch, dask): each CLI call and sweep worker would pay for them
whether it needs them or not. A module-level ``pulp = lazy_module("pulp")`` reads like the
import it replaces; the library is imported at the first attribute access, and until then
it is absent from :data:`sys.modules` (what ``tests/house/test_light_import.py`` checks).

The standard library's :class:`importlib.util.LazyLoader` is not used: it registers the module
in :data:`sys.modules` at once (so nothing can tell a loaded library from a deferred one) and
needs the module's spec, which costs a search of the path at ``import workbench`` time.

Examples
--------
>>> m = lazy_module("json")
>>> m.dumps([1])
'[1]'
>>> m
<lazy module 'json' (loaded)>
"""

from __future__ import annotations

import importlib
import types

__all__ = ["lazy_module"]


class _LazyModule(types.ModuleType):
    """A stand-in for a module, imported on first attribute access."""

    def __init__(self, name: str):
        super().__init__(name)
        self.__dict__["_lazy_target"] = None

    def _load(self) -> types.ModuleType:
        mod = self.__dict__["_lazy_target"]
        if mod is None:
            mod = importlib.import_module(self.__name__)
            # the module's names become this object's own: later look-ups (``pulp.LpVariable``
            # once per variable of a large model) no longer pass through __getattr__
            self.__dict__.update({k: v for k, v in vars(mod).items() if k != "__name__"})
            self.__dict__["_lazy_target"] = mod
        return mod

    def __getattr__(self, attr: str):
        return getattr(self._load(), attr)

    def __dir__(self):
        return dir(self._load())

    def __repr__(self) -> str:
        state = "loaded" if self.__dict__["_lazy_target"] is not None else "not loaded"
        return f"<lazy module {self.__name__!r} ({state})>"


def lazy_module(name: str) -> types.ModuleType:
    """A module object for ``name`` that imports the real module on first attribute access.

    >>> lazy_module("colorsys")
    <lazy module 'colorsys' (not loaded)>
    """
    return _LazyModule(name)
