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
