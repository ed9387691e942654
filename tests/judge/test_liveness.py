"""Memory over time in the judge (issue 29, part 5): peak live memory against hand-computed
values, beside the static sum."""

from __future__ import annotations

import numpy as np
import pytest

from workbench import Plan, evaluate, simulate
from workbench.cluster import Cluster, Device, Link
from workbench.graph import OpGraph
from workbench.judge.liveness import live_peaks, live_upper_bound, memory_timeline, peak_moment


def gpus(k: int, mem: float = 1e12, *, mode: str = "direct", cpus: int = 0) -> Cluster:
    devs = [Device(f"gpu{i}", "gpu", mem) for i in range(k)]
    devs += [Device(f"cpu{i}", "cpu") for i in range(cpus)]
    if mode == "host":
        return Cluster(devs, mode="host", host_link=Link(0.0, 1e6))
    return Cluster(devs, intra_host=Link(0.0, 1e6))


def test_chain_on_one_device():
    """a (1 ms, 10 B resident) -> b (2 ms) -> c (1 ms): a's 100 B output lives 0-3, b's 40 B
    1-4; peak 10 + 100 + 40 = 150 at t in [1, 3)."""
    g = OpGraph.from_ops([("a", {"compute": {"gpu": 1.0}, "memory": 10.0}),
                          ("b", {"compute": {"gpu": 2.0}}), ("c", {"compute": {"gpu": 1.0}})],
                         [("a", "b", {"bytes": 100.0}), ("b", "c", {"bytes": 40.0})])
    s = simulate(Plan(g, {v: "gpu0" for v in g.ops}), gpus(1))
    assert s.peak_memory == {"gpu0": 10.0}
    assert s.peak_live_memory == {"gpu0": 150.0}
    t, b = memory_timeline(s)["gpu0"]
    assert t.tolist() == [0.0, 1.0, 3.0, 4.0]
    assert b.tolist() == [110.0, 150.0, 50.0, 10.0]


def test_tensor_lives_on_both_ends_of_a_transfer():
    """a on gpu0 (1 ms) sends 100 B (fixed 2 ms) to b on gpu1 (2 ms): on gpu0 the output
    lives from a's start to the transfer's end (0-3), on gpu1 from the transfer's start to b's
    end (1-5)."""
    g = OpGraph.from_ops([("a", {"compute": {"gpu": 1.0}, "memory": 7.0}),
                          ("b", {"compute": {"gpu": 2.0}, "memory": 3.0})],
                         [("a", "b", {"bytes": 100.0, "comm": 2.0})])
    s = simulate(Plan(g, {"a": "gpu0", "b": "gpu1"}), gpus(2))
    assert s.end[g.index["b"]] == pytest.approx(5.0)
    assert s.peak_live_memory == {"gpu0": 107.0, "gpu1": 103.0}
    t1, b1 = memory_timeline(s)["gpu1"]
    assert t1.tolist() == [0.0, 1.0, 5.0] and b1.tolist() == [3.0, 103.0, 3.0]


def test_host_mode_cpu_reads_host_dram_from_the_upload_end():
    """Host mode: a on gpu0 uploads its 100 B output (fixed 0.5 ms) to host DRAM; c on the CPU
    (not staged) reads it there: the tensor counts on cpu0 from the upload's end (1.5) to c's
    end (5.5)."""
    g = OpGraph.from_ops([("a", {"compute": {"gpu": 1.0, "cpu": 5.0}}),
                          ("c", {"compute": {"gpu": 1.0, "cpu": 4.0}})],
                         [("a", "c", {"bytes": 100.0, "comm": 0.5})])
    s = simulate(Plan(g, {"a": "gpu0", "c": "cpu0"}), gpus(1, mode="host", cpus=1))
    # upload 1-1.5 on gpu0's channel; c runs 1.5-5.5 on the CPU
    assert s.start[g.index["c"]] == pytest.approx(1.5)
    t, b = memory_timeline(s)["cpu0"]
    assert t.tolist() == [0.0, 1.5, 5.5] and b.tolist() == [0.0, 100.0, 0.0]
    assert s.peak_live_memory == {"gpu0": 100.0, "cpu0": 100.0}


def training_pair(order: list) -> tuple:
    """Two independent layers A and B (forward fA, fB; gradients gA, gB), each forward op
    stashing 60 B that its gradient reads (as extracted graphs record it: memory = the stashed
    output = the edge's bytes)."""
    ops = []
    for x in "AB":
        ops.append((f"f{x}", {"compute": {"gpu": 1.0}, "memory": 60.0, "kind": "fwd",
                              "colocate": x}))
        ops.append((f"g{x}", {"compute": {"gpu": 1.0}, "kind": "bwd", "colocate": x}))
    g = OpGraph.from_ops(ops, [("fA", "gA", {"bytes": 60.0}), ("fB", "gB", {"bytes": 60.0})])
    plan = Plan(g, {v: "gpu0" for v in g.ops}, order={"gpu0": order})
    return g, plan


def test_fits_by_liveness_but_not_by_the_static_sum():
    """Order fA gA fB gB: A's stash (0-2) is freed before B's (2-4) is made; the stash and the
    output it keeps are one buffer, so the live peak is 60 B, the static sum 120 B."""
    _g, plan = training_pair(["fA", "gA", "fB", "gB"])
    c = gpus(1, mem=100.0)
    m = evaluate(plan, c)
    assert m.peak_memory == {"gpu0": 120.0}
    assert m.peak_live_memory == {"gpu0": 60.0}
    # the judge trusts the live model (issue 42): it fits, though the static sum does not
    assert m.memory_fraction == pytest.approx(1.2) and m.feasible and not m.violations
    assert m.live_memory_fraction == pytest.approx(0.6)
    # the other order keeps both stashes: 120 B live at t in [1, 3)
    _, both = training_pair(["fA", "fB", "gA", "gB"])
    assert simulate(both, c).peak_live_memory == {"gpu0": 120.0}


def test_fits_the_static_sum_but_not_by_liveness():
    g = OpGraph.from_ops([("a", {"compute": {"gpu": 1.0}, "memory": 10.0}),
                          ("b", {"compute": {"gpu": 2.0}}), ("c", {"compute": {"gpu": 1.0}})],
                         [("a", "b", {"bytes": 100.0}), ("b", "c", {"bytes": 40.0})])
    m = evaluate(Plan(g, {v: "gpu0" for v in g.ops}), gpus(1, mem=100.0))
    assert not m.feasible and m.memory_fraction == pytest.approx(0.1)
    assert m.live_memory_fraction == pytest.approx(1.5)
    # the violation names the device, the moment of the peak and the tensors live then
    assert m.violations == ["memory on gpu0: 0.000 GiB live at 1.000 ms > 0.000 GiB capacity "
                            "(resident 0.000 GiB, live then: a 0.0 MiB, b 0.0 MiB)"]
    pm = peak_moment(simulate(Plan(g, {v: "gpu0" for v in g.ops}), gpus(1, mem=100.0)), "gpu0")
    assert pm == {"time_ms": 1.0, "bytes": 150.0, "resident": 10.0, "transient": 140.0,
                  "tensors": [("a", 100.0), ("b", 40.0)]}


def test_live_peaks_frees_before_allocations_at_one_instant():
    res = np.array([5.0, 0.0])
    dev = np.array([0, 0, 0, 1])
    t0 = np.array([0.0, 2.0, 1.0, 0.0])
    t1 = np.array([2.0, 3.0, 2.5, 1.0])
    nb = np.array([10.0, 20.0, 4.0, 7.0])
    # device 0: [0,2) 10, [1,2.5) 4, [2,3) 20 -> at 2: 10 freed first, then 4 + 20 = 24
    assert live_peaks(res, dev, t0, t1, nb, 2).tolist() == [29.0, 7.0]


def test_compare_table_and_board_table_show_both_memories():
    import workbench as wb
    from widgets.tables import results_table_html

    g = OpGraph.from_ops([("a", {"compute": {"gpu": 1.0}, "memory": 10.0}),
                          ("b", {"compute": {"gpu": 2.0}}), ("c", {"compute": {"gpu": 1.0}})],
                         [("a", "b", {"bytes": 100.0}), ("b", "c", {"bytes": 40.0})])
    df = wb.compare(g, gpus(1, mem=100.0), methods=["single"], progress=False).table
    row = df.set_index("method").loc["single"]
    assert row["peak_mem_frac"] == pytest.approx(0.1)
    assert row["live_mem_frac"] == pytest.approx(1.5)
    html = results_table_html(df)
    assert "memory (static sum)" in html and "memory (live peak)" in html
    assert "150.0 %" in html and "10.0 %" in html


def test_memory_figure_and_the_board_draw_live_and_static_memory():
    import workbench as wb
    from widgets.board import CompareBoard
    from widgets.figures import memory_figure

    _g, plan = training_pair(["fA", "gA", "fB", "gB"])
    s = simulate(plan, gpus(1, mem=100.0))
    fig = memory_figure(s)
    names = [t.name for t in fig.data]
    assert names == ["gpu0 live", "gpu0 static sum", "gpu0 capacity"]
    assert max(fig.data[0].y) == 60.0 and list(fig.data[1].y) == [120.0, 120.0]
    assert list(fig.data[2].y) == [100.0, 100.0]
    board = CompareBoard(graphs={"diamond": wb.samples.diamond()}, presets=["2xV100-pcie"],
                         methods=["single", "round_robin"], time_limit=5)
    board.run()
    for view in (board.gantt_a, board.gantt_b):
        assert view.memory.layout.meta["figure"] == "memory"
        assert view.memory.layout.meta["method"] == view.figure.layout.meta["method"]
    assert "memory (live peak)" in board.table_view.value


def test_a_view_owns_no_memory_and_keeps_what_it_views_alive():
    """x (1 ms) -> r, a Reshape (a view, 0 ms) -> y (2 ms): x's 100 B live 0-3 through the view,
    the view itself owns nothing (before: a second 100 B copy)."""
    g = OpGraph.from_ops([("x", {"compute": {"gpu": 1.0}}),
                          ("r", {"compute": {"gpu": 0.0}, "op_type": "Reshape"}),
                          ("y", {"compute": {"gpu": 2.0}})],
                         [("x", "r", {"bytes": 100.0}), ("r", "y", {"bytes": 100.0})])
    s = simulate(Plan(g, {v: "gpu0" for v in g.ops}), gpus(1))
    assert s.peak_live_memory == {"gpu0": 100.0}
    t, b = memory_timeline(s)["gpu0"]
    assert t.tolist() == [0.0, 3.0] and b.tolist() == [100.0, 0.0]
    # a variable read: resident on the variable, nothing more per read
    v = OpGraph.from_ops([("w", {"compute": {"gpu": 0.0}, "memory": 64.0, "op_type": "VarHandleOp"}),
                          ("read", {"compute": {"gpu": 0.0}, "op_type": "ReadVariableOp"}),
                          ("mm", {"compute": {"gpu": 1.0}})],
                         [("w", "read", {"bytes": 0.0}), ("read", "mm", {"bytes": 64.0})])
    assert simulate(Plan(v, {o: "gpu0" for o in v.ops}), gpus(1)).peak_live_memory == {"gpu0": 64.0}


def test_cpus_of_one_host_read_each_others_tensors_in_place():
    """a on cpu0 -> b on cpu1: no copy on cpu1; a's 100 B stay on cpu0 until b ends. Between
    GPUs the same edge costs a copy on the receiver."""
    g = OpGraph.from_ops([("a", {"compute": {"cpu": 1.0, "gpu": 1.0}}),
                          ("b", {"compute": {"cpu": 2.0, "gpu": 2.0}})],
                         [("a", "b", {"bytes": 100.0, "comm": 1.0})])
    cpus = Cluster([Device("cpu0", "cpu"), Device("cpu1", "cpu")])
    s = simulate(Plan(g, {"a": "cpu0", "b": "cpu1"}), cpus)
    assert s.peak_live_memory == {"cpu0": 100.0, "cpu1": 0.0}
    assert memory_timeline(s)["cpu0"][0].tolist() == [0.0, 4.0]
    s2 = simulate(Plan(g, {"a": "gpu0", "b": "gpu1"}), gpus(2))
    assert s2.peak_live_memory == {"gpu0": 100.0, "gpu1": 100.0}


@pytest.mark.parametrize("seed", range(6))
def test_the_upper_bound_bounds_the_live_peak(seed):
    """live_upper_bound >= the simulated live peak per device, any placement and order (the
    random contract graphs: tensors up to 20 MB beside op memory up to 2 MB)."""
    from workbench.testing.contract import make_case

    case = make_case(seed, max_ops=40)
    g, c = case.graph, case.cluster
    r = np.random.default_rng(seed)
    ok = np.isfinite(c.op_times(g))
    dev = np.array([r.choice(np.flatnonzero(row)) for row in ok])
    for grp, members in g.colocation_groups.items():  # a group on one device
        d = dev[g.index[members[0]]]
        dev[[g.index[v] for v in members]] = d
    names = c.names
    plan = Plan(g, {v: names[int(dev[g.index[v]])] for v in g.ops})
    try:
        s = simulate(plan, c, order="fifo")
    except Exception:  # noqa: BLE001 - a group on a device one member cannot use
        pytest.skip("random placement not runnable")
    ub = live_upper_bound(g, c, plan.device_array(c))
    for i, d in enumerate(names):
        assert s.peak_live_memory[d] <= ub[i] * (1 + 1e-9) + 1e-6
