"""The house rules of docs/architecture.md that import-linter's contracts do not state:
no import circles (imports inside functions included), no function over 150 lines, every
solver in its paper's room, old import paths still working for one release.

The layer contracts themselves (pyproject.toml ``[tool.importlinter]``) run as ``lint-imports``
in ``make test``; :func:`test_import_contracts_hold` runs them here too, so a plain ``pytest``
sees a broken layer.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import grimp
import pytest

from workbench.testing.architecture import (import_circles, import_graph, long_functions,
                                            update_doc)

ROOT = Path(__file__).resolve().parents[2]


def test_circle_finder_finds_a_circle():
    g = grimp.ImportGraph()
    for m in ("p", "p.a", "p.b", "p.c"):
        g.add_module(m)
    g.add_import(importer="p.a", imported="p.b")
    g.add_import(importer="p.b", imported="p.a")
    g.add_import(importer="p.c", imported="p.a")
    assert import_circles(g) == [["p.a", "p.b"]]


def test_no_import_circles():
    circles = import_circles(import_graph())
    assert not circles, "import circles (lazy imports included):\n" + "\n".join(
        " <-> ".join(c) for c in circles)


def test_no_function_over_150_lines():
    assert not long_functions(), "\n".join(long_functions())


def test_import_contracts_hold(capsys):
    from importlinter.application.use_cases import lint_imports
    from importlinter.configuration import configure

    configure()
    kept = lint_imports(config_filename=str(ROOT / "pyproject.toml"), cache_dir=None,
                        no_logo=True)
    out = capsys.readouterr().out
    assert "BROKEN" not in out and kept, out[-3000:]


def test_every_method_lives_in_its_family_room():
    from workbench.solvers import SOLVERS

    room = {"baseline": "baselines", "list": "list", "celeritas": "celeritas", "pesto": "pesto",
            "pipeline": "pipeline", "partitioning": "pipeline"}
    for name, info in SOLVERS.items():
        assert info.func.__module__.startswith(f"workbench.solvers.{room[info.family]}."), \
            (name, info.func.__module__)


def test_every_method_is_named_by_its_room():
    """A flat face per room, as networkx's algorithm packages have:
    ``from workbench.solvers.list import heft`` gives the registered function."""
    from workbench.solvers import SOLVERS

    for name, info in SOLVERS.items():
        room = importlib.import_module(info.func.__module__.rsplit(".", 1)[0])
        assert name in room.__all__, (name, room.__name__)
        assert getattr(room, name) is info.func, (name, room.__name__)
        exec(f"from {room.__name__} import {name} as f", ns := {})
        assert ns["f"] is info.func


@pytest.mark.parametrize("old", ["workbench.solvers.cpsat", "workbench.roofline",
                                 "workbench.solvers.pipeline_dp", "workbench.pipeline_costs"])
def test_old_paths_are_gone(old):
    """One name for each module: the paths of issue 24's moves no longer import."""
    sys.modules.pop(old, None)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_the_diagram_in_docs_is_current():
    assert update_doc(write=False), ("docs/architecture.md's diagram is out of date: run "
                                     "`.venv/bin/python scripts/architecture_diagram.py`")
