"""The suite's marks, kept exact: ``tf``, ``torch``, ``notebook``, ``browser``, ``slow`` (and ``gpu``).

A module that only holds tests of one kind says so with ``pytestmark = pytest.mark.<kind>``;
single tests use the decorator. Two hooks make ``make check`` (``-m "not slow and not notebook
and not browser and not tf"``) fast and keep the marks honest:

* a test module whose ``pytestmark`` alone deselects it is not even imported (its module-level
  ``import tensorflow`` would cost every run 10-20 s); the marks are read from its source;
* when a run deselects every ``tf`` (or ``torch``) test, a test that loads TensorFlow (or
  PyTorch) anyway fails, named: it lacks its mark.
"""

from __future__ import annotations

import ast
import itertools
import re
import sys
from functools import cache
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression

FRAMEWORKS = {"tf": "tensorflow", "torch": "torch"}
"""Mark -> the module a test with that mark may load."""


def _registered(config) -> list[str]:
    return [line.split(":", 1)[0].strip() for line in config.getini("markers")]


@cache
def _module_marks(path: Path) -> frozenset[str]:
    """The mark names of a module's top-level ``pytestmark`` (one mark or a list of them).

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "test_x.py"
    >>> _ = p.write_text("import pytest\\npytestmark = [pytest.mark.tf, pytest.mark.skipif(1, reason='')]\\n")
    >>> sorted(_module_marks(p))
    ['skipif', 'tf']
    """
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return frozenset()
    marks: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark"
                                                for t in node.targets):
            for sub in ast.walk(node.value):
                if (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Attribute)
                        and sub.value.attr == "mark"):
                    marks.add(sub.attr)
    return frozenset(marks)


def deselected_whatever_else(expr: str, marks: frozenset[str], known: list[str]) -> bool:
    """True when ``-m expr`` deselects every test carrying ``marks``, whatever other registered
    marks it also carries (so its module need not be imported).

    >>> deselected_whatever_else("not slow and not tf", frozenset({"tf"}), ["slow", "tf"])
    True
    >>> deselected_whatever_else("tf or slow", frozenset({"torch"}), ["slow", "tf", "torch"])
    False
    """
    compiled = Expression.compile(expr)
    others = [k for k in known if k not in marks]
    for n in range(len(others) + 1):
        for extra in itertools.combinations(others, n):
            have = marks | set(extra)
            if compiled.evaluate(have.__contains__):
                return False
    return True


def pytest_ignore_collect(collection_path: Path, config):
    expr = config.getoption("markexpr")
    if not expr or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    marks = _module_marks(collection_path)
    if marks and deselected_whatever_else(expr, marks, _registered(config)):
        return True
    return None


def _banned(config) -> dict[str, str]:
    """Mark -> framework module that no test of this run may load (every test with the mark is
    deselected)."""
    return _banned_for(config.getoption("markexpr") or "", tuple(_registered(config)))


@cache
def _banned_for(expr: str, known: tuple[str, ...]) -> dict[str, str]:
    if not expr:
        return {}
    return {m: mod for m, mod in FRAMEWORKS.items()
            if deselected_whatever_else(expr, frozenset({m}), list(known))}


def pytest_collection_finish(session):
    banned = _banned(session.config)
    loaded = [f"{mod} (mark {m})" for m, mod in banned.items() if mod in sys.modules]
    if loaded:
        raise pytest.UsageError(
            f"collecting the tests loaded {', '.join(loaded)}, though this run deselects every test "
            "with that mark: a test module imports it at its top without the module's pytestmark")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    banned = {m: mod for m, mod in _banned(item.config).items() if mod not in sys.modules}
    result = yield
    for mark, mod in banned.items():
        if mod in sys.modules:
            raise AssertionError(f"{item.nodeid} loads {mod} but is not marked {mark} "
                                 f"(add @pytest.mark.{mark})")
    return result


SPREAD = ("browser",)
"""Marks whose tests spread over the workers although they share a module-scoped fixture: each
worker starts its own JupyterLab and chromium, so two notebooks run at a time (one worker
running every notebook in turn was the suite's longest pole)."""


def _group_of(item) -> str | None:
    """The worker group of ``item`` under ``--dist loadgroup``: its module when it uses a fixture
    computed once per module (so that one worker computes it), else None (any worker)."""
    if any(item.get_closest_marker(mark) for mark in SPREAD):
        return None
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info else ()):
        if any(d.scope in ("module", "package", "class") for d in defs):
            return item.nodeid.split("::", 1)[0]
    return None


DOCTEST_MARKS = {
    "tf": re.compile(r"\b(tensorflow|keras)\b|\b(extract|profile|keras_program|"
                     r"keras_model_from_spec|transformer_encoder|run_plan|measure_plans)\("),
    "torch": re.compile(r"^\s*(import torch|from torch)\b", re.M),
}
"""Doctests carry no decorator: one whose examples use TensorFlow (PyTorch) through these names
gets the mark (the guard above fails any that this misses)."""


def _doctest_marks(item) -> list[str]:
    test = getattr(item, "dtest", None)
    if test is None:
        return []
    source = "\n".join(e.source for e in test.examples)
    return [m for m, rx in DOCTEST_MARKS.items() if rx.search(source)]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark the doctests that load a framework; put the tests of one group on one worker
    (before xdist reads ``xdist_group``)."""
    for item in items:
        for mark in _doctest_marks(item):
            item.add_marker(getattr(pytest.mark, mark))
    for item in items:
        group = None if item.get_closest_marker("xdist_group") else _group_of(item)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))


CHROMIUM = Path("/usr/bin/chromium")
NBCLIENT_RUN = "tests/notebooks/test_notebooks.py::test_notebook_runs["
BROWSER_RUN = "tests/notebooks/test_browser.py::test_notebook_in_jupyterlab["


def _browser_can_run() -> bool:
    from importlib.util import find_spec

    return CHROMIUM.exists() and find_spec("playwright") is not None


def _param(nodeid: str) -> str:
    """``'a.py::t[02_x]@browser'`` -> ``'02_x'`` (xdist's loadgroup appends ``@group``)."""
    return nodeid.split("[", 1)[1].rsplit("]", 1)[0]


class NotebooksOnce:
    """Each notebook executes once: the nbclient run of a notebook that this session's browser
    test runs in JupyterLab (with the same checks) is skipped."""

    @pytest.hookimpl(trylast=True)  # after the -m/-k selection
    def pytest_collection_modifyitems(self, config, items):
        in_browser = {_param(i.nodeid) for i in items if i.nodeid.startswith(BROWSER_RUN)}
        if not in_browser or not _browser_can_run():
            return
        for item in items:
            if item.nodeid.startswith(NBCLIENT_RUN) and _param(item.nodeid) in in_browser:
                item.add_marker(pytest.mark.skip(
                    reason="executed once, in JupyterLab, by tests/notebooks/test_browser.py (same checks)"))


ROOT = Path(__file__).resolve().parent


def reexporting_packages(root: Path = ROOT) -> list[str]:
    """The packages under ``workbench/`` and ``widgets/`` whose ``__init__`` binds a function
    of the same name as one of its modules (``from .tarnawski import tarnawski``).

    pytest's ``importlib`` import mode, collecting such a module's doctests before anything
    imported its package, imports the package (which binds the function) and then a second
    copy of the module, which it sets on the package under the same name: the package's
    ``tarnawski`` became a module and 25 tests failed in ``make test-order``. Importing these
    packages before collection (:func:`pytest_configure`) keeps the names the packages gave.

    >>> "workbench.solvers.hybrid" in reexporting_packages()
    True
    """
    out = []
    for init in sorted(p for top in ("workbench", "widgets") for p in (root / top).rglob("__init__.py")):
        tree = ast.parse(init.read_text())
        names = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom)
                 and n.level == 1 and n.module and "." not in n.module for a in n.names
                 if (a.asname or a.name) == n.module and (init.parent / f"{n.module}.py").exists()}
        if names:
            out.append(".".join(init.parent.relative_to(root).parts))
    return out


def pytest_configure(config):
    config.pluginmanager.register(NotebooksOnce(), "house-notebooks-once")
    import importlib

    for package in reexporting_packages():
        importlib.import_module(package)
