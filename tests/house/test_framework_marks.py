"""A test that asks for TensorFlow (or Keras on it) in its own code carries the ``tf`` mark.

The root conftest fails a test that loads TensorFlow in a run deselecting ``tf`` (`make check`),
but only the first such test in each worker: once loaded, TensorFlow is in ``sys.modules`` and
the later ones pass unseen (18 unmarked test items in ``tests/reliability`` hid that way). This
check reads every test module's source instead: a test function whose body (or a fixture it
takes, of its module or of a conftest) imports ``tensorflow`` or ``keras`` or calls
``pytest.importorskip`` on them must be marked ``tf`` (decorator, a name bound to
``pytest.mark.tf``, or the module's ``pytestmark``). Loads further down (``runtime.extract``)
stay the conftest's to catch.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
FRAMEWORK = {"tensorflow", "keras"}


def _asks_for_tensorflow(fn: ast.AST) -> bool:
    """Whether ``fn``'s own code imports TensorFlow or Keras, or importorskips one of them."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Import):
            if any(a.name.split(".")[0] in FRAMEWORK for a in node.names):
                return True
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and (node.module or "").split(".")[0] in FRAMEWORK:
                return True
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "importorskip" and node.args
              and isinstance(node.args[0], ast.Constant)
              and str(node.args[0].value).split(".")[0] in FRAMEWORK):
            return True
    return False


def _is_tf_mark(expr: ast.AST, aliases: set[str]) -> bool:
    """``pytest.mark.tf``, ``pytest.mark.tf(...)``, a name bound to it, or a list holding one."""
    if isinstance(expr, ast.Call):
        expr = expr.func
    if isinstance(expr, (ast.List, ast.Tuple)):
        return any(_is_tf_mark(e, aliases) for e in expr.elts)
    if isinstance(expr, ast.Name):
        return expr.id in aliases
    return (isinstance(expr, ast.Attribute) and expr.attr == "tf"
            and isinstance(expr.value, ast.Attribute) and expr.value.attr == "mark")


def _fixture_names(tree: ast.Module) -> set[str]:
    """Fixtures defined in ``tree`` whose own code asks for TensorFlow."""
    out = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(
                "fixture" in ast.unparse(d) for d in node.decorator_list) \
                and _asks_for_tensorflow(node):
            out.add(node.name)
    return out


def unmarked_tf_tests(source: str, shared_fixtures: frozenset[str] = frozenset()) -> list[str]:
    """Names of the test functions in ``source`` that ask for TensorFlow without the ``tf`` mark.

    >>> unmarked_tf_tests("import pytest\\ndef test_a():\\n    pytest.importorskip('keras')\\n")
    ['test_a']
    >>> unmarked_tf_tests("import pytest\\n@pytest.mark.tf\\ndef test_a():\\n    import tensorflow\\n")
    []
    """
    tree = ast.parse(source)
    aliases: set[str] = set()
    module_marked = False
    for node in tree.body:
        if isinstance(node, ast.Assign) and _is_tf_mark(node.value, aliases):
            names = {t.id for t in node.targets if isinstance(t, ast.Name)}
            module_marked |= "pytestmark" in names
            aliases |= names - {"pytestmark"}
    if module_marked:
        return []
    fixtures = _fixture_names(tree) | set(shared_fixtures)
    bad = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test")):
            continue
        args = {a.arg for a in node.args.args}
        if (_asks_for_tensorflow(node) or args & fixtures) and not any(
                _is_tf_mark(d, aliases) for d in node.decorator_list):
            bad.append(node.name)
    return bad


def test_every_test_that_asks_for_tensorflow_is_marked_tf():
    shared = frozenset().union(*(_fixture_names(ast.parse(p.read_text(encoding="utf-8")))
                                 for p in TESTS.rglob("conftest.py")))
    bad = [f"{p.relative_to(TESTS.parent)}::{name}"
           for p in sorted(TESTS.rglob("test_*.py"))
           for name in unmarked_tf_tests(p.read_text(encoding="utf-8"), shared)]
    assert not bad, "ask for TensorFlow without @pytest.mark.tf:\n" + "\n".join(bad)


def test_the_check_sees_a_fixture_an_alias_and_a_module_mark():
    fixture = ("import pytest\n@pytest.fixture\ndef k():\n    return pytest.importorskip('keras')\n"
               "def test_uses(k):\n    pass\n"
               "@pytest.mark.parametrize('x', [1])\ndef test_free(x):\n    pass\n")
    assert unmarked_tf_tests(fixture) == ["test_uses"]
    alias = "import pytest\nneeds = pytest.mark.tf\n@needs\ndef test_a():\n    import keras\n"
    assert unmarked_tf_tests(alias) == []
    module = ("import pytest\npytestmark = [pytest.mark.tf, pytest.mark.slow]\n"
              "def test_a():\n    import tensorflow as tf\n")
    assert unmarked_tf_tests(module) == []
    shared = "def test_a(tfk):\n    pass\n"
    assert unmarked_tf_tests(shared, frozenset({"tfk"})) == ["test_a"]
