"""Imports inside workbench/runtime go one way: no module imports (at top level or lazily inside a
function) a module that imports it back, directly or through others."""

import ast
from pathlib import Path

import networkx as nx

RUNTIME = Path(__file__).resolve().parents[2] / "workbench" / "runtime"


def _runtime_imports(path: Path, modules: set) -> set:
    """Sibling modules of workbench/runtime that ``path`` imports anywhere in its AST."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                names = [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
            elif node.level == 0 and (node.module or "").startswith("workbench.runtime"):
                parts = node.module.split(".")
                names = [parts[2]] if len(parts) > 2 else [a.name for a in node.names]
            else:
                names = []
            found.update(names)
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[2] for a in node.names
                         if a.name.startswith("workbench.runtime."))
    return (found & modules) - {path.stem}


def runtime_import_graph() -> nx.DiGraph:
    modules = {p.stem for p in RUNTIME.glob("*.py")}
    G = nx.DiGraph()
    G.add_nodes_from(modules)
    for p in RUNTIME.glob("*.py"):
        G.add_edges_from((p.stem, d) for d in _runtime_imports(p, modules))
    return G


def test_runtime_imports_have_no_circles():
    G = runtime_import_graph()
    assert G.number_of_edges() > 10  # the walk finds the imports (runner -> extraction, ...)
    assert G.has_edge("runner", "program") and G.has_edge("keras_step", "program")
    circles = [sorted(c) for c in nx.strongly_connected_components(G) if len(c) > 1]
    assert circles == []


def test_the_walk_sees_a_lazy_import(tmp_path):
    (tmp_path / "a.py").write_text("def f():\n    from .b import g\n    return g\n")
    (tmp_path / "b.py").write_text("from workbench.runtime.a import f\n")
    mods = {"a", "b"}
    assert _runtime_imports(tmp_path / "a.py", mods) == {"b"}
    assert _runtime_imports(tmp_path / "b.py", mods) == {"a"}


def test_moved_names_still_import_from_their_old_modules():
    from workbench.runtime import extraction, gpu, models, program, runner

    assert extraction.Program is program.Program and runner.step_dag is program.step_dag
    assert extraction.finish_program is program.finish_program
    assert callable(gpu.virtual_gpu_options)
    assert {"resnet50", "gnmt", "mlp"} <= set(models.MODELS) and "gnmt" in models.TINY
