"""The pipeline room (issue 24): imports go one way (entry modules, engines, shared pieces), no
module uses another's private name, and one time budget runs through every method of the room
(the warm starts' named shares, the model build, the solver)."""

from __future__ import annotations

import ast
import importlib
import math
from pathlib import Path

import pytest

from workbench import max_load, samples, solve
from workbench.budget import SHARES, Budget
from workbench.cluster import Cluster, Device, Link
from workbench.errors import TimeLimitError
from workbench.solvers.pipeline.ip import MaxLoadModel, ip_contig, ip_noncontig
from workbench.solvers.pipeline.latency import latency_ip
from workbench.solvers.pipeline.latency_cpsat import solve_latency_cpsat
from workbench.solvers.pipeline.local_search import local_search

dp_mod = importlib.import_module("workbench.solvers.pipeline.dp")  # `.dp` alone is the method
ROOM = Path(__file__).resolve().parents[3] / "workbench" / "solvers" / "pipeline"
PKG = "workbench.solvers.pipeline"
# top to bottom: a module may import only modules of a lower rank (or of its own, never itself)
RANK = {"ip": 4, "latency": 3, "local_search": 3, "metis": 3, "dp": 2, "latency_cpsat": 1,
        "gpipe": 1.5, "hierarchy": 1.5, "kernel": 1, "_dp_jit": 0.5, "units": 0.4,
        "pykernel": 0.3, "ideals": 0.2, "contraction": 0.1}


def _room_imports():
    """(importer, imported module of the room, names) for every import in the room, lazy ones
    included."""
    out = []
    for path in sorted(ROOM.glob("*.py")):
        me = path.stem
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level == 1 and mod:
                    out.append((me, mod.split(".")[0], [a.name for a in node.names]))
                elif node.level == 1:  # from . import x
                    out.extend((me, a.name, []) for a in node.names)
                elif node.level == 3 and mod.startswith("solvers.pipeline."):
                    out.append((me, mod.split(".")[2], [a.name for a in node.names]))
                elif mod.startswith(PKG + "."):
                    out.append((me, mod.split(".")[3], [a.name for a in node.names]))
    return out


def test_imports_of_the_room_go_one_way():
    imports = _room_imports()
    assert imports, "the scan found no import inside the room"
    wrong = [(a, b) for a, b, _n in imports
             if a in RANK and b in RANK and RANK[b] >= RANK[a]]
    assert not wrong, f"imports going up or sideways: {wrong}"
    # the scan sees what it must: the entry modules use the shared units
    assert ("ip", "units", ) in {(a, b) for a, b, _n in imports}
    assert ("latency_cpsat", "units") in {(a, b) for a, b, _n in imports}


def test_no_module_of_the_room_uses_another_s_private_name():
    private = [(a, b, n) for a, b, names in _room_imports() for n in names
               if n.startswith("_") and n != "_dp_jit"]
    own = [m for m in private if m[0] != "metis"]  # metis.py is moved in by another change
    assert not own, own
    for path in ROOM.glob("*.py"):  # module attributes (the numba kernels reuse pykernel's)
        text = path.read_text()
        assert "_py._" not in text, path.name


# ----------------------------------------------------------------------------- the budget
def host(k: int, l_: int = 1, mem: float = 1e12) -> Cluster:
    return Cluster([Device(f"gpu{i}", "gpu", mem) for i in range(k)]
                   + [Device(f"cpu{i}", "cpu") for i in range(l_)],
                   mode="host", host_link=Link(0.0, 1e6))


def test_every_share_the_room_names_is_in_the_table():
    text = "".join(p.read_text() for p in ROOM.glob("*.py"))
    named = {n for n in SHARES if n.startswith(("pipeline.", "latency_ip."))}
    assert named >= {"pipeline.dpl_warm", "pipeline.dp_warm", "latency_ip.dpl_warm",
                     "latency_ip.dp_warm"}
    assert all(f'"{n}"' in text for n in named)


def test_ip_warm_starts_take_their_named_shares_of_one_budget():
    g = samples.transformer(30, seed=2)
    c = host(3, 1)
    p = ip_noncontig(g, c, time_limit=20)
    rep = p.stats["budget"]
    assert rep["limit_s"] == pytest.approx(20.0)
    shares = rep["shares"]
    assert set(shares) == {"pipeline.dpl_warm", "pipeline.dp_warm", "pipeline.build"}
    assert shares["pipeline.build"]["limit_s"] <= 0.6 * 20 + 1e-9   # built by 60 % of T
    assert shares["pipeline.dpl_warm"]["limit_s"] <= 0.2 * 20 + 1e-9
    assert shares["pipeline.dp_warm"]["limit_s"] <= 0.25 * 20 + 1e-9
    # (a share's used_s is the time since it started, up to the report: Budget.report)
    assert all(0.0 <= s["used_s"] <= rep["used_s"] for s in shares.values())
    assert p.predicted["max_load_ms"] == pytest.approx(max_load(p, c))


def test_gpipe_and_hierarchical_warm_starts_have_their_own_shares():
    g = samples.to_training(samples.random_dag(7, edge_prob=0.3, seed=1, memory=1e6))
    p = ip_contig(g, host(2, 1), objective="gpipe", time_limit=20)
    assert "pipeline.dp_gpipe_warm" in p.stats["budget"]["shares"]


def test_an_expired_budget_returns_the_warm_start_or_says_why():
    """A Budget handed down keeps its deadline: one already over leaves the DP warm starts
    no time (they return their greedy packing, or raise TimeLimitError, which is caught, and
    the greedy split is the last resort), and the model is not built."""
    g = samples.transformer(20, seed=1)
    c = host(2, 1)
    b = Budget(1e-9)
    p = ip_noncontig(g, c, time_limit=b)
    assert p.status == "time_limit"
    assert "warm start" in p.stats["note"] or "greedy_latency" in p.stats["note"]
    assert all(s["limit_s"] == 0.0 for s in b.report()["shares"].values())
    assert latency_ip(g, c, time_limit=Budget(1e-9)).status == "time_limit"


def test_the_dp_shares_one_deadline_over_its_passes():
    g = samples.transformer(40, seed=3)
    c = host(3, 1)
    # a deadline already over stops the DP before any split: the greedy packing comes back
    for run in (dp_mod.dp, dp_mod.dpl):
        p = run(g, c, time_limit=Budget(1e-9))
        assert p.status == "time_limit" and p.stats["fallback"] == "greedy_packing"
        assert p.predicted["max_load_ms"] == pytest.approx(max_load(p, c))
    a = dp_mod.dp(g, c, time_limit=Budget(30.0))
    b = solve(g, c, method="dp")
    assert a.predicted["max_load_ms"] == b.predicted["max_load_ms"]


def test_dp_returns_the_dpl_split_when_the_exact_pass_runs_out(monkeypatch):
    """When the exact pass over the lattice runs out of time after the linearised DP (the
    bound) finished, the DPL split comes back, honestly labelled and judged as before; with
    no DPL pass (a small lattice) there is nothing to return before the last ideal. (The
    exact pass's TimeLimitError is raised on purpose here: where a real clock runs out
    depends on the kernel, compiled or not, and the machine's load.)"""
    g = samples.inception(80, seed=1)  # 585 ideals: the DPL bound is computed first
    c = host(4, 1)
    full = solve(g, c, method="dp")
    real = dp_mod.solve_dp

    def exact_runs_out(p, k, l_, cap, **kw):
        if kw.get("ideals") is not None:
            raise TimeLimitError("the DP ran out of its time limit (0.1 s) after 64 ideals")
        return real(p, k, l_, cap, **kw)

    monkeypatch.setattr(dp_mod, "solve_dp", exact_runs_out)
    p = dp_mod.dp(g, c, time_limit=10)
    assert p.status == "time_limit" and p.stats["stopped_by_time_limit"]
    assert "linearised DP" in p.stats["note"]
    dpl = solve(g, c, method="dpl")
    assert p.predicted["max_load_ms"] == pytest.approx(dpl.predicted["max_load_ms"])
    assert max_load(p, c) == pytest.approx(p.predicted["max_load_ms"])
    assert full.status != "time_limit" and "stopped_by_time_limit" not in full.stats
    assert full.predicted["max_load_ms"] < p.predicted["max_load_ms"]
    with pytest.raises(TimeLimitError):  # 79 ideals: no DPL pass before the exact one
        dp_mod.dp(samples.transformer(60), c, time_limit=10)


def test_cpsat_engine_reports_a_build_timeout_on_an_expired_budget():
    from workbench.solvers.pipeline.units import greedy_units

    g = samples.two_branch()
    c = host(2, 1)
    U, _p = greedy_units(g, c)
    slots = [(2, 0), (0, 0), (1, 0)]
    lb = [0.0] * U.n
    out = solve_latency_cpsat(U, c, slots, 1, 1, [d.memory for d in c.devices], lb, 1.0, None,
                              time_limit=Budget(1e-9))
    assert out["status"] == "BUILD_TIMEOUT" and out["slot"] is None
    ok = solve_latency_cpsat(U, c, slots, 1, 1, [d.memory for d in c.devices], lb, 10.0, None,
                             time_limit=10)
    assert ok["slot"] is not None


def test_local_search_takes_a_budget():
    g = samples.transformer(40, seed=1)
    c = host(3, 0)
    p = local_search(g, c, seed=0, time_limit=Budget(1e-9))
    assert p.status == "time_limit" and p.stats["stopped_by_time_limit"]
    q = local_search(g, c, seed=0, restarts=1, time_limit=Budget(60.0))
    assert q.status == "heuristic" and not q.stats["stopped_by_time_limit"]


# ----------------------------------------------------------------------------- the model class
@pytest.mark.parametrize("contiguous", [True, False])
def test_max_load_model_steps_give_the_method_s_answer(contiguous):
    g = samples.random_dag(8, edge_prob=0.35, seed=4, memory=1e6)
    c = host(3, 1, mem=3e6)
    m = MaxLoadModel(g, c, contiguous=contiguous,
                     method="ip_contig" if contiguous else "ip_noncontig")
    b = Budget(30.0)
    m.build(None, b)
    assert m.ws is None and len(m.x) > 0 and (bool(m.z) == contiguous)
    plan = m.extract(m.solve(b, gap=1e-6), None, b)
    f = ip_contig if contiguous else ip_noncontig
    ref = f(g, c, time_limit=30, gap=1e-6, warm_start=False)
    assert plan.predicted["max_load_ms"] == pytest.approx(ref.predicted["max_load_ms"],
                                                           rel=1e-6)
    assert max_load(plan, c) == pytest.approx(plan.predicted["max_load_ms"], rel=1e-6)
    if contiguous:
        d = solve(g, c, method="dp").predicted["max_load_ms"]
        assert plan.predicted["max_load_ms"] == pytest.approx(d, rel=1e-5)


def test_max_load_model_warm_values_meet_every_row():
    """The warm start's values (auxiliaries at their least feasible value) satisfy every row
    of the model: HiGHS can take them as they are."""
    g = samples.random_dag(8, edge_prob=0.35, seed=5, memory=1e6)
    c = host(3, 1, mem=3e6)
    warm = solve(g, c, method="dp")
    m = MaxLoadModel(g, c, contiguous=True, method="ip_contig")
    m.build(warm, Budget(None))
    assert m.ws is not None
    for name, row in m.prob.constraints.items():
        val = sum(coef * m.ws.get(var, 0.0) for var, coef in row.items()) + row.constant
        assert {-1: val <= 1e-7, 1: val >= -1e-7, 0: abs(val) <= 1e-7}[row.sense], name
    assert math.isclose(max(m.ws[v] for v in m.M.values()) * m.T,
                        warm.predicted["max_load_ms"], rel_tol=1e-6)
