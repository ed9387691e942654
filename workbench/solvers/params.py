"""Type and range checks of solver parameters, declared once per solver.

A solver's declaration is derived from its signature: the annotation gives the type
(``int | None``, ``float``, ``bool``, ``str``), :data:`RULES` gives the range of parameters by
name (``seed >= 0``, ``gap >= 0``, ``restarts >= 1``, ``0 <= threshold <= 1``, ...), and
``register(..., params={...})`` may add or override :class:`Param` entries for one solver.
:func:`check` is what ``workbench.solve`` calls before running a solver, so ``target="abc"``,
``gap=-1``, ``threshold=nan`` or ``insertion="no"`` are SolverErrors naming the method and the
parameter.

Examples
--------
>>> from workbench.solvers.params import Param
>>> Param(("int",), min=1).check("local_search", "restarts", 3)
3
>>> Param(("int",), min=1).check("local_search", "restarts", 0)
Traceback (most recent call last):
...
workbench.errors.SolverError: method 'local_search': parameter restarts must be >= 1, got 0
>>> Param(("bool",)).check("heft", "insertion", "no")
Traceback (most recent call last):
...
workbench.errors.SolverError: method 'heft': parameter insertion must be a boolean (true/false), got 'no'
"""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..budget import Budget
from ..errors import SolverError

__all__ = ["MAX_SEED", "RULES", "Param", "check", "declare"]

_WHAT = {"int": "an integer", "float": "a number", "bool": "a boolean (true/false)",
         "str": "a string", "none": "null/None", "dict": "a dict", "list": "a list",
         "path": "a file path", "callable": "a function",
         "budget": "a workbench.budget.Budget"}


@dataclass(frozen=True)
class Param:
    """One parameter: accepted ``types`` (names from ``int float bool str none dict list path
    callable budget any``), an optional range (``min``/``max``, ``min_open`` for a strict lower
    bound), whether infinity is accepted (``finite``), optional ``choices``, and an optional
    ``validator(value) -> message or None`` for the structure of dicts and lists."""

    types: tuple = ("any",)
    min: float | None = None
    max: float | None = None
    min_open: bool = False
    finite: bool = True
    choices: tuple | None = None
    validator: Callable | None = None

    def _type_of(self, v: Any) -> str | None:
        for t in self.types:
            if t == "any":
                return t
            if t == "none" and v is None:
                return t
            if t == "bool" and isinstance(v, (bool, np.bool_)):
                return t
            if t == "int" and isinstance(v, (int, np.integer)) and not isinstance(v, bool):
                return t
            if t == "float" and isinstance(v, (int, float, np.integer, np.floating)) \
                    and not isinstance(v, (bool, np.bool_)):
                return t
            if t == "str" and isinstance(v, str):
                return t
            if t == "dict" and isinstance(v, dict):
                return t
            if t == "list" and isinstance(v, (list, tuple)):
                return t
            if t == "path" and isinstance(v, (str, os.PathLike)):
                return t
            if t == "callable" and callable(v):
                return t
            if t == "budget" and isinstance(v, Budget):
                return t
        return None

    def check(self, method: str, name: str, value: Any) -> Any:
        """``value`` if it fits, else a SolverError naming ``method`` and ``name``."""
        where = f"method {method!r}: parameter {name}"
        t = self._type_of(value)
        if t is None:
            want = " or ".join(_WHAT.get(x, x) for x in self.types)
            raise SolverError(f"{where} must be {want}, got {value!r}")
        if t in ("int", "float"):
            x = float(value)
            if math.isnan(x):
                raise SolverError(f"{where} must be a number, got NaN")
            if math.isinf(x) and self.finite:
                raise SolverError(f"{where} must be finite, got {value!r}")
            if self.min is not None and (x < self.min or (self.min_open and x == self.min)):
                op = ">" if self.min_open else ">="
                raise SolverError(f"{where} must be {op} {self.min:g}, got {value!r}")
            if self.max is not None and x > self.max:
                top = int(self.max) if float(self.max).is_integer() else self.max
                raise SolverError(f"{where} must be <= {top:g}, got {value!r}"
                                  if isinstance(top, float) else
                                  f"{where} must be <= {top}, got {value!r}")
        if self.choices is not None and t not in ("none",) and value not in self.choices:
            raise SolverError(f"{where} must be one of {', '.join(map(repr, self.choices))}, "
                              f"got {value!r}")
        if self.validator is not None and value is not None:
            problem = self.validator(value)
            if problem:
                raise SolverError(f"{where}: {problem}")
        return value


def _split_problem(split) -> str | None:
    """What is wrong with an expert split (dict op -> device, or one op list per device)."""
    if isinstance(split, dict):
        for op, dev in split.items():
            if not isinstance(op, (str, int)) or not isinstance(dev, str):
                return f"maps op {op!r} to {dev!r}; expected op name -> device name"
        return None
    if isinstance(split, (list, tuple)):
        seen: dict = {}
        for k, part in enumerate(split):
            if isinstance(part, (str, bytes)) or not isinstance(part, (list, tuple)):
                return f"part {k} is {part!r}; expected a list of op names per device"
            for op in part:
                if not isinstance(op, (str, int)) or isinstance(op, bool):
                    return f"part {k} holds {op!r}; expected op names"
                if str(op) in seen:
                    return f"op {str(op)!r} is in part {seen[str(op)]} and part {k}"
                seen[str(op)] = k
    return None


method_names: Callable[[], object] = lambda: ()
"""The registered method names; :mod:`workbench.solvers.registry` sets it (the registry imports
this module, so this module cannot import the registry)."""


def _method_list_problem(value) -> str | None:
    if isinstance(value, (list, tuple)):
        for m in value:
            if not isinstance(m, str):
                return f"{m!r} is not a method name"
            if m not in method_names():
                return f"unknown method {m!r}"
    return None


MAX_SEED = 2**31 - 1
"""Largest seed every seeded solver accepts: pymetis, CP-SAT and HiGHS take a 32-bit signed
integer (numpy's generators take any)."""

RULES: dict[str, Param] = {
    "seed": Param(("int", "none"), min=0, max=MAX_SEED),
    "time_limit": Param(("float", "budget", "none"), min=0, min_open=True),
    "progress": Param(("callable", "none")),
    "gap": Param(("float", "none"), min=0),
    "threads": Param(("int", "none"), min=1),
    "restarts": Param(("int",), min=1),
    "max_moves": Param(("int",), min=0),
    "max_ideals": Param(("int",), min=1),
    "max_split_ops": Param(("int", "none"), min=0),
    "target": Param(("int", "none"), min=1),
    "R": Param(("int", "none"), min=1),
    "M": Param(("float", "none"), min=0, min_open=True),
    "threshold": Param(("float",), min=0, max=1),
    "balance": Param(("float", "none"), min=0, min_open=True),
    "cp_slack": Param(("float", "none"), min=0),
    "q": Param(("int",), min=1),
    "allreduce_bandwidth": Param(("float", "none"), min=0, min_open=True, finite=False),
    "slow_factor": Param(("float", "none"), min=1),
    "heuristic_effort": Param(("float",), min=0, max=1),
    "anchor": Param(("str",), choices=("previous", "pred", "segments")),
    "split": Param(("dict", "list", "path"), validator=_split_problem),
    "device": Param(("str", "none")),
}
"""Range (and, for unannotated parameters, type) of solver parameters by name."""

_UNANNOTATED = {"warm_start": Param(("str", "list", "none"), validator=_method_list_problem)}


def _types(annotation: Any) -> tuple | None:
    if annotation is inspect.Parameter.empty:
        return None
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__",
                                                                  str(annotation))
    out = []
    for part in text.replace("Optional[", "").replace("]", "").split("|"):
        p = part.strip()
        known = {"int": "int", "float": "float", "bool": "bool", "str": "str", "None": "none",
                 "dict": "dict", "list": "list", "Callable": "callable", "Budget": "budget"}
        if p not in known:
            return None
        out.append(known[p])
    return tuple(out)


def declare(func: Callable, overrides: dict | None = None) -> dict[str, Param]:
    """The declaration of every keyword parameter of solver ``func``."""
    sig = inspect.signature(func)
    out: dict[str, Param] = {}
    for p in list(sig.parameters.values())[2:]:
        if p.kind is not inspect.Parameter.KEYWORD_ONLY:
            continue
        rule = RULES.get(p.name)
        types = _types(p.annotation)
        if types is None:
            base = rule or _UNANNOTATED.get(p.name) or Param(("any",))
            types = base.types
        else:
            base = rule or Param(types)
        if p.default is None and "none" not in types:
            types = types + ("none",)
        out[p.name] = Param(types, base.min, base.max, base.min_open, base.finite, base.choices,
                            base.validator)
    out.update(overrides or {})
    return out


def check(method: str, decl: dict[str, Param], params: dict) -> None:
    """Check ``params`` against ``decl``; common names (seed, time_limit) by :data:`RULES`."""
    for k, v in params.items():
        rule = decl.get(k) or RULES.get(k)
        if rule is not None:
            rule.check(method, k, v)
