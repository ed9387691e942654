"""One name for each thing, modules included: within the ``workbench`` package no two modules
(or a module and a package) share a name, so a name in a traceback, a doc or an import says
which file it is. Views in ``widgets/figures/`` are named after what they draw (``compare``,
``diff``, ...) and are left out; the pairs below predate the rule and are listed so that no
new one appears."""

from collections import defaultdict
from pathlib import Path

import workbench

KNOWN = {
    "costs": {"costs/", "solvers/hybrid/costs.py"},
    "data_parallel": {"transforms/data_parallel.py", "solvers/list/data_parallel.py"},
    "runner": {"runtime/runner.py", "sweep/runner.py"},
    "training": {"transforms/training.py", "judge/training.py"},
}


def _names() -> dict:
    root = Path(workbench.__file__).parent
    seen = defaultdict(set)
    for p in root.rglob("*.py"):
        rel = p.relative_to(root).as_posix()
        if p.name == "__init__.py":
            if p.parent != root:
                seen[p.parent.name].add(p.parent.relative_to(root).as_posix() + "/")
        else:
            seen[p.stem].add(rel)
    return seen


def test_no_two_workbench_modules_share_a_name():
    clashes = {n: files for n, files in _names().items() if len(files) > 1}
    assert clashes == KNOWN, (
        "modules (or packages) that share a name: "
        + "; ".join(f"{n}: {', '.join(sorted(f))}" for n, f in sorted(clashes.items())
                    if KNOWN.get(n) != f))


def test_the_judge_s_pieces_live_in_its_room():
    names = _names()
    for piece in ("bounds", "liveness", "pipelined", "_replay_jit"):
        assert names[piece] == {f"judge/{piece}.py"}
    assert names["pipeline_costs"] == {"costs/pipeline_costs.py"}
    assert names["sweep_analysis"] == {"sweep/sweep_analysis.py"}
    assert names["pipeline"] == {"solvers/pipeline/"}
