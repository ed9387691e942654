"""Steady memory for measured steps (workbench.runtime.steady_memory): freed memory stays in the
process, so a warm step takes no page faults; the runner counts the faults of its timed steps.

The settings are process-wide and cannot be undone, so every test that applies them runs in a
child process of its own; the tests in this process only mock the C library."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from workbench.runtime import steady_memory as sm

ROOT = Path(__file__).resolve().parents[2]

# a 64 MiB block malloc'd, written page by page and freed, five times; the minor faults of each
# round: glibc serves a block this large with its own mmap (above the 32 MiB the dynamic mmap
# threshold can reach) and unmaps it on free, unless the memory is held
_CHILD = textwrap.dedent("""
    import ctypes, json, sys
    from workbench.runtime import steady_memory as sm
    state = sm.hold_freed_memory(sys.argv[1] == "on")
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    size, out = 64 << 20, []
    for _ in range(5):
        f0 = sm.minor_faults()
        p = libc.malloc(size)
        ctypes.memset(p, 1, size)
        libc.free(p)
        out.append(sm.minor_faults() - f0)
    print(json.dumps({"state": state, "faults": out}))
""")


def _child(mode: str) -> dict:
    r = subprocess.run([sys.executable, "-c", _CHILD, mode], capture_output=True, text=True,
                       timeout=120, cwd=ROOT, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_held_memory_is_reused_instead_of_faulted_in_again():
    pages = (64 << 20) // 4096
    off = _child("off")
    assert off["state"] == "off"
    # every round maps the block afresh: one fault per page (or per huge page, where the kernel
    # backs it with transparent huge pages), again and again
    assert all(f >= 16 for f in off["faults"]) and min(off["faults"]) > 0.5 * max(off["faults"])
    on = _child("on")
    assert on["state"] == "held"
    assert on["faults"][0] >= 0.9 * min(off["faults"])  # the heap grows once ...
    assert max(on["faults"][1:]) <= 0.01 * pages        # ... and is reused from then on
    assert max(on["faults"][1:]) < min(off["faults"])


def test_switched_off_and_refused_say_so(monkeypatch):
    monkeypatch.setattr(sm, "_state", None)
    assert sm.hold_freed_memory(False) == "off"
    monkeypatch.setattr(sm, "HOLD_FREED_MEMORY", False)
    assert sm.hold_freed_memory() == "off" and sm._state is None

    class NotGlibc:   # musl and other C libraries have no gnu_get_libc_version
        mallopt = staticmethod(lambda *a: 1)

    monkeypatch.setattr(sm.ctypes, "CDLL", lambda name: NotGlibc())
    assert sm.hold_freed_memory(True).startswith("not held: the C library")

    class Refusing(NotGlibc):
        mallopt = staticmethod(lambda *a: 0)
        gnu_get_libc_version = staticmethod(lambda: b"2.99")

    monkeypatch.setattr(sm, "_state", None)
    monkeypatch.setattr(sm.ctypes, "CDLL", lambda name: Refusing())
    assert sm.hold_freed_memory(True) == "not held: glibc '2.99' refused mallopt"
    assert sm.hold_freed_memory(True) == "not held: glibc '2.99' refused mallopt"  # once


_RUNNER = textwrap.dedent("""
    import json, sys
    from workbench import Plan
    from workbench import runtime as rt
    from workbench.runtime import steady_memory as sm
    sm.HOLD_FREED_MEMORY = sys.argv[1] == "on"
    g = rt.extract("mlp", 8, **rt.TINY["mlp"])
    m = rt.run_plan(Plan(g, {v: "cpu0" for v in g.ops}, method="one"), steps=6, warmup=2)
    print(json.dumps({"state": sm._state, "faults": m.faults, "dict": m.to_dict()["faults"],
                      "per_step": m.faults_per_step}))
""")


@pytest.mark.tf
def test_every_session_of_the_runtime_holds_memory_and_counts_its_faults():
    pytest.importorskip("tensorflow")
    out = {}
    for mode in ("on", "off"):
        r = subprocess.run([sys.executable, "-c", _RUNNER, mode], capture_output=True,
                           text=True, timeout=300, cwd=ROOT, check=True)
        out[mode] = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["on"]["state"] == "held"      # opened through new_session
    assert out["off"]["state"] is None       # switched off: glibc left as it was
    for m in out.values():
        assert isinstance(m["faults"], int) and m["faults"] >= 0 and m["dict"] == m["faults"]
        assert m["per_step"] == pytest.approx(m["faults"] / 6)
