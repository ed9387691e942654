"""solve_milp must return HiGHS's final incumbent, not the warm start it was given.

Found by the contract soak: on a 7-op chain (1 GPU + a slow CPU, direct mode) ``ip_noncontig``
said ``optimal`` at 34.91 ms while HEFT's split has max-load 21.53 ms. HiGHS had found 21.53
(its ``objective_function_value``) and proved it, yet ``getSolution()`` handed back the warm
start's values; :func:`workbench.solvers.milp.solve_milp` now notices the disagreement and
solves again without the warm start.
"""

import pytest

import workbench as wb
from workbench.testing.contract import make_case
from workbench.testing.timing import Stopwatch


@pytest.mark.parametrize("seed", [861, 1080])
def test_ip_noncontig_optimum_is_not_the_warm_start(seed):
    case = make_case(seed, max_ops=300)
    g, c = case.graph, case.cluster
    ip = wb.solve(g, c, method="ip_noncontig", time_limit=10)
    judged = wb.max_load(ip, c)
    assert ip.predicted["max_load_ms"] == pytest.approx(judged, rel=1e-9)
    for other in ("heft", "round_robin", "m_topo"):
        try:
            p = wb.solve(g, c, method=other)
        except wb.InfeasibleError:
            continue
        if ip.status == "optimal" and p.status != "infeasible":
            assert judged <= wb.max_load(p, c) * (1 + 1e-9), other


def test_watchdog_stops_highs_past_its_time_limit():
    """HiGHS checks its own time limit only between steps; solve_milp's watchdog cancels a solve
    that runs past the limit (+5 % and 0.2 s) and keeps the incumbent as ``time_limit``. Here
    HiGHS's own limit is lifted, so only the watchdog can stop this hard market-split model."""

    import numpy as np
    import pulp

    from workbench.solvers import milp

    rng = np.random.default_rng(0)
    m, n = 5, 40
    a = rng.integers(0, 100, size=(m, n))
    b = a.sum(axis=1) // 2
    prob = pulp.LpProblem("market_split", pulp.LpMinimize)
    x = [pulp.LpVariable(f"x{j}", cat="Binary") for j in range(n)]
    s = [pulp.LpVariable(f"s{i}", lowBound=0) for i in range(m)]
    t = [pulp.LpVariable(f"t{i}", lowBound=0) for i in range(m)]
    for i in range(m):
        prob += pulp.lpSum(int(a[i, j]) * x[j] for j in range(n)) + s[i] - t[i] == int(b[i])
    prob += pulp.lpSum(s) + pulp.lpSum(t)
    with Stopwatch() as sw:  # load-scaled (issue 41)
        res = milp.solve_milp(prob, time_limit=0.3, options={"time_limit": 1e6})
    assert sw.within(5.0), sw
    assert res.status == "time_limit"
    assert res.message.startswith("Interrupted")  # the watchdog, not HiGHS, stopped it
