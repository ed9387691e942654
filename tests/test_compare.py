import pytest

import workbench as wb
from workbench import SolverError, samples
from workbench.compare import COLUMNS


def test_table_columns_and_judged_numbers():
    g, c = samples.cnn(80), wb.Cluster.preset("4xV100-nvlink")
    df, plans = wb.compare(g, c, methods=["single", "m_topo", "round_robin"], progress=False,
                           return_plans=True)
    assert list(df.columns) == COLUMNS
    for _, r in df.iterrows():
        s = wb.simulate(plans[r["method"]], c)
        assert r["makespan_ms"] == pytest.approx(s.makespan)
        assert r["max_load_ms"] == pytest.approx(wb.max_load(plans[r["method"]], c))
        assert r["makespan_ms"] >= r["makespan_lb"] - 1e-9


def test_failing_method_keeps_other_rows():
    g = samples.cnn(80)
    c = wb.Cluster.preset("2xV100-pcie").with_memory(g.total_memory() * 0.6)
    df = wb.compare(g, c, methods=["single", "m_topo"], progress=False)
    single = df.set_index("method").loc["single"]
    assert single["status"] == "error" and "does not fit" in single["error"]
    assert df.set_index("method").loc["m_topo", "status"] == "heuristic"


def test_unknown_method_fails_fast_and_progress_callback():
    g, c = samples.diamond(), wb.Cluster.preset("2xV100-pcie")
    with pytest.raises(SolverError, match="unknown method 'zzz'"):
        wb.compare(g, c, methods=["single", "zzz"])
    seen = []
    wb.compare(g, c, methods=["single", "m_topo"], progress=lambda i, n, m: seen.append((i, m)))
    assert seen == [(1, "single"), (2, "m_topo")]
