"""The README's quickstart runs, and its method table lists every registered method."""

import doctest
import re
from pathlib import Path

from workbench.solvers import SOLVERS

README = Path(__file__).resolve().parents[2] / "README.md"


def test_quickstart_runs_as_doctest():
    r = doctest.testfile(str(README), module_relative=False,
                         optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert r.attempted >= 5 and r.failed == 0


def test_every_registered_method_is_documented():
    listed = set(re.findall(r"^\| `([a-z_0-9]+)` \|", README.read_text(), flags=re.M))
    missing = sorted(set(SOLVERS) - listed)
    assert not missing, f"methods missing from README's table: {missing}"
