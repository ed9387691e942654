"""The DP's two kernels (pure Python for small lattices, numba for large ones) give identical
results, and a small solve neither imports numba nor loads its cache (issue 23, part 5)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from workbench import samples, solve
from workbench.budget import Budget
from workbench.cluster import Cluster, Device, Link
from workbench.errors import SolverError, TimeLimitError
from workbench.graph import OpGraph
from workbench.costs.pipeline_costs import pipeline_model
from workbench.solvers.pipeline.dp import contract_for_dp
from workbench.solvers.pipeline.kernel import PY_MAX_IDEALS, solve_lattice
from workbench.solvers.pipeline.ideals import linear_order, lattice, linear_lattice

MSR = Path(__file__).resolve().parents[3] / "sample_graphs" / "msr"


def host(k: int, l_: int = 1, mem: float = 1e12, bw: float = 1e6) -> Cluster:
    return Cluster([Device(f"gpu{i}", "gpu", mem) for i in range(k)]
                   + [Device(f"cpu{i}", "cpu") for i in range(l_)],
                   mode="host", host_link=Link(0.0, bw))


def both(g: OpGraph, c: Cluster, *, linear: bool = False, bound: bool = False, **kw):
    """The DP by both kernels on ``g``/``c``: asserts the same value, split and pair count and
    returns the Python kernel's ``(value, stages, stats)``."""
    model = pipeline_model(c, method="dp", cpus_pay=False)
    k, l_ = len(model.acc), len(model.cpus)
    cap = min(model.acc_memory, default=math.inf)
    p = contract_for_dp(g, c)
    lat = linear_lattice(linear_order(p)) if linear else lattice(p.pred, p.succ)
    if bound:
        kw["upper_bound"] = solve_lattice(p, k, l_, cap, linear_lattice(linear_order(p)),
                                          **kw)[0]
    py = solve_lattice(p, k, l_, cap, lat, kernel="python", **kw)
    jit = solve_lattice(p, k, l_, cap, lat, kernel="compiled", **kw)
    assert py[2]["kernel"] == "python" and jit[2]["kernel"] == "compiled"
    assert py[0] == jit[0] or (math.isinf(py[0]) and math.isinf(jit[0]))  # bit-identical
    assert py[1] == jit[1]
    assert py[2]["ideal_pairs"] == jit[2]["ideal_pairs"]
    assert py[2]["feasible_ideals"] == jit[2]["feasible_ideals"]
    return py


def mixed(seed: int, n: int = 9) -> OpGraph:
    """Random DAG with per-edge costs, a CPU-only op and an accelerator-only op."""
    g = samples.random_dag(n, edge_prob=0.3, seed=seed, memory=1e6)
    ops = [(v, dict(g.op(v))) for v in g.ops]
    ops[1][1]["compute"] = {"cpu": 3.0}
    ops[-2][1]["compute"] = {"gpu": 2.5}
    rng = np.random.default_rng(seed)
    edges = [(u, v, {"comm": float(rng.uniform(0.05, 1.5))}) for u, v in g.edges()]
    return OpGraph.from_ops(ops, edges, name=f"mixed{seed}")


@pytest.mark.parametrize("seed", range(12))
def test_kernels_agree_on_random_graphs(seed):
    n = 7 + seed % 6
    g = samples.random_dag(n, edge_prob=0.2 + 0.05 * (seed % 4), seed=seed, memory=1e6)
    for c in (host(2, 1), host(3, 0, mem=3e6), host(4, 2)):
        for bound in (False, True):
            both(g, c, bound=bound)
    both(g, host(3, 1), linear=True)
    both(mixed(seed), host(3, 1))


@pytest.mark.parametrize("opts", [{"interleave": True}, {"interleave": "full_duplex"},
                                  {"replicate": True, "allreduce_bandwidth": 5e5},
                                  {"replicate": True, "interleave": True,
                                   "allreduce_bandwidth": 2e6},
                                  {"feasibility": False}])
@pytest.mark.parametrize("seed", range(3))
def test_kernels_agree_under_every_option(opts, seed):
    g = samples.inception(40 + 10 * seed, seed=seed)
    both(g, host(3, 1), **opts)
    both(mixed(seed + 20, 10), host(2, 1, bw=2e5), bound=True, **opts)


@pytest.mark.parametrize("seed", range(4))
def test_kernels_agree_on_training_graphs(seed):
    g = samples.to_training(samples.random_dag(8, edge_prob=0.3, seed=seed))
    for bc in (False, True):
        both(g, host(2, 1), backward_contiguous=bc)
    both(samples.to_training(samples.transformer(24, seed=seed)), host(3, 1), bound=True)


def test_kernels_agree_on_branchy_lattices_with_a_bound():
    g = samples.inception(160, seed=4)
    value, stages, stats = both(g, host(4, 1), bound=True)
    assert stats["ideals"] > PY_MAX_IDEALS and math.isfinite(value) and stages


@pytest.mark.skipif(not MSR.is_dir(), reason="MSR workloads not in the repo")
@pytest.mark.parametrize("name", ["layer_bert24_inference", "layer_resnet50_training"])
def test_kernels_agree_on_the_published_workloads(name):
    from workbench.io.msr import read_msr

    g, c = read_msr(MSR / "throughput" / f"{name}.json")
    value, _stages, _stats = both(g, c)
    # (the plan's figure is the stages' loads summed afresh: equal up to float rounding)
    assert value == pytest.approx(solve(g, c, method="dp").predicted["max_load_ms"], rel=1e-12)


def test_auto_picks_python_for_small_and_compiled_for_large_lattices(monkeypatch):
    import workbench.solvers.pipeline.kernel as kern

    monkeypatch.setattr(kern, "_LOADED", False)  # as in a fresh process
    small = solve(samples.diamond(), host(2, 1), method="dp")
    assert small.stats["kernel"] == "python"
    g = samples.inception(200, seed=0)
    big = solve(g, host(4, 1), method="dp")
    assert big.stats["ideals"] > PY_MAX_IDEALS and big.stats["kernel"] == "compiled"
    # once loaded, the compiled kernels run small lattices too (warm, they are faster)
    assert solve(samples.diamond(), host(2, 1), method="dp").stats["kernel"] == "compiled"


@pytest.mark.parametrize("seed", range(6))
def test_greedy_bound_is_an_upper_bound_and_prunes_exactly(seed):
    from workbench.solvers.pipeline.kernel import _arrays
    from workbench.solvers.pipeline.pykernel import greedy_bound

    g = samples.inception(50 + 10 * seed, seed=seed)
    c = host(3, 1, mem=2e9 if seed % 2 else 1e12)
    p = contract_for_dp(g, c)
    lat = lattice(p.pred, p.succ)
    plain = solve_lattice(p, 3, 1, 1e12, lat, feasibility=False, kernel="python")
    pruned = solve_lattice(p, 3, 1, 1e12, lat, kernel="python")
    assert pruned[0] == plain[0] and pruned[1] == plain[1]
    assert plain[0] <= pruned[2]["upper_bound"] < math.inf
    assert pruned[2]["ideal_pairs"] < plain[2]["ideal_pairs"]
    arrays = _arrays(p, 3, 1, 1e12, lat, math.inf, False, False, math.inf, False)
    assert greedy_bound(linear_order(p), arrays) == pruned[2]["upper_bound"]
    arrays["uacc"][0] = 1.0  # an op no accelerator runs: no packing, no bound
    assert greedy_bound(linear_order(p), arrays) == math.inf


def test_a_small_solve_does_not_import_numba():
    """A fresh process importing the workbench and solving a small DP never loads numba."""
    code = ("import sys, json; from workbench import solve, samples; "
            "from workbench.cluster import Cluster, Device, Link; "
            "c = Cluster([Device('gpu0'), Device('gpu1'), Device('cpu0', 'cpu')], mode='host', "
            "host_link=Link(0.0, 1e7)); p = solve(samples.transformer(30), c, method='dp'); "
            "print(json.dumps([p.stats['kernel'], 'numba' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == ["python", False]


def test_kernel_choice_is_checked_and_time_limit_holds_in_python():
    g = samples.inception(40, seed=1)
    c = host(3, 1)
    p = contract_for_dp(g, c)
    lat = lattice(p.pred, p.succ)
    with pytest.raises(SolverError, match="kernel must be one of auto, python, compiled"):
        solve_lattice(p, 3, 1, 1e12, lat, kernel="fast")
    # a spent limit before any split: the greedy packing (no upper bound given), else the error
    # (Budget(0) is refused: a limit is a positive number of seconds)
    B, stages, st = solve_lattice(p, 3, 1, 1e12, lat, kernel="python", time_limit=Budget(1e-9))
    assert st["stopped_by_time_limit"] and st["fallback"] == "greedy_packing" and stages
    with pytest.raises(TimeLimitError, match="time limit"):
        solve_lattice(p, 3, 1, 1e12, lat, upper_bound=B, kernel="python",
                      time_limit=Budget(1e-9))
    seen = []
    solve_lattice(p, 3, 1, 1e12, lat, kernel="python", progress=seen.append)
    assert seen[-1] == {"ideals_done": len(lat), "ideals": len(lat)}


def test_the_cyclic_gc_is_paused_only_while_the_dp_runs():
    import gc

    from workbench.errors import InfeasibleError

    assert gc.isenabled()
    seen = []
    solve(samples.inception(40, seed=1), host(3, 1), method="dp",
          progress=lambda d: seen.append(gc.isenabled()))
    assert seen and not any(seen) and gc.isenabled()
    g = samples.random_dag(6, edge_prob=0.3, seed=3, memory=1e6)
    with pytest.raises(InfeasibleError):
        solve(g, host(2, 0, mem=1e5), method="dp")
    assert gc.isenabled()


def test_warm_compiled_loads_the_compiled_kernels_in_a_fresh_process():
    """``make install`` and the contract's warm-up call it: afterwards the compiled kernels run
    every lattice, so no timed solve pays their load or compilation."""
    import subprocess
    import sys

    code = ("from workbench.solvers.pipeline.kernel import warm_compiled\n"
            "import workbench as wb, workbench.samples as s\n"
            "print(warm_compiled(s.diamond()))\n"
            "from workbench.cluster import Cluster, Device, Link\n"
            "c = Cluster([Device('gpu0', 'gpu', 1e12), Device('cpu0', 'cpu')], mode='host',"
            " host_link=Link(0.0, 1e6))\n"
            "print(wb.solve(s.diamond(), c, method='dp').stats['kernel'])\n")
    r = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split("\n")[:2] == ["{'dp': 'compiled', 'dpl': 'compiled'}", "compiled"]
