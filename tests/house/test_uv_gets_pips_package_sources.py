"""`make` installs with uv, which reads no pip configuration: ``scripts/uv_args.py`` hands it the
indexes, find-links and constraints that pip is configured with (decision 101)."""

from __future__ import annotations

import doctest
import importlib.util
import itertools
import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "uv_args.py"


def _pairs(args: list[str]) -> set[tuple[str, str]]:
    return {(a, b) for a, b in itertools.pairwise(args) if a.startswith("--")}


def test_pips_sources_become_uv_options(tmp_path):
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nfind-links = /here/wheels\n"
                    "extra-index-url = file:///m/simple file:///n/simple\n"
                    f"constraint = {tmp_path / 'caps.txt'}\ntimeout = 60\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env |= {"PIP_CONFIG_FILE": str(conf), "XDG_CONFIG_DIRS": str(tmp_path / "none"),
            "HOME": str(tmp_path), "PIP_FIND_LINKS": "/env/wheels"}  # the environment wins
    r = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env,
                       timeout=120, check=True)
    args = shlex.split(r.stdout)
    assert {("--find-links", "/env/wheels"), ("--extra-index-url", "file:///m/simple"),
            ("--extra-index-url", "file:///n/simple"),
            ("--constraint", str(tmp_path / "caps.txt")),
            ("--index-strategy", "unsafe-best-match")} <= _pairs(args), args
    assert "/here/wheels" not in args and "60" not in args


def test_examples_of_the_script():
    spec = importlib.util.spec_from_file_location("uv_args", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert doctest.testmod(mod).failed == 0
