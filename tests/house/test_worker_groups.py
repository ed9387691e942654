"""`make test` spreads tests over two workers with ``--dist loadgroup``: tests of one
``xdist_group`` (and, through the root conftest, of one module that shares a module-scoped
fixture) must run in one worker, or their once-per-worker set-up is paid twice (decision 89)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

TEST = textwrap.dedent("""
    import os
    import pytest

    @pytest.mark.xdist_group("one")
    @pytest.mark.parametrize("i", range(4))
    def test_grouped(i):
        with open(os.environ["WORKERS_FILE"], "a") as f:
            f.write(os.environ.get("PYTEST_XDIST_WORKER", "none") + "\\n")
""")


@pytest.mark.slow  # a pytest run of two workers in a child (3.5 s alone, 19 s at load 4)
def test_one_group_runs_in_one_worker(tmp_path):
    pytest.importorskip("xdist")
    (tmp_path / "test_grouped.py").write_text(TEST)
    workers = tmp_path / "workers.txt"
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q", "-p", "no:randomly",
         "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "-c", "/dev/null", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
        env={**__import__("os").environ, "WORKERS_FILE": str(workers)})
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    seen = workers.read_text().split()
    assert len(seen) == 4
    assert len(set(seen)) == 1, f"one xdist_group ran on workers {sorted(set(seen))} (decision 89)"
