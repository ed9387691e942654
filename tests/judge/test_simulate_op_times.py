"""``simulate(plan, cluster, op_times=...)``: the judge takes each op's time directly (the
calibrated judge hands it the times its model gives), in place of the cluster's op times."""

import numpy as np
import pytest

from workbench import Cluster, Plan, samples, simulate
from workbench.errors import GraphError
from workbench.fidelity.extras import simulate_overlap


def _plan_and_cluster():
    g = samples.load_sample("resnet_small")
    c = Cluster.preset("2xV100-pcie")
    ops = g.topological_order()
    half = len(ops) // 2
    plan = Plan(g, {v: ("gpu0" if k < half else "gpu1") for k, v in enumerate(ops)})
    return g, c, plan


def _placed_times(g, c, plan):
    return c.op_times(g)[np.arange(g.n_ops), plan.device_array(c)]


def test_the_cluster_s_own_times_give_the_same_schedule():
    g, c, plan = _plan_and_cluster()
    a = simulate(plan, c)
    b = simulate(plan, c, op_times=_placed_times(g, c, plan))
    assert b.makespan == a.makespan
    assert np.array_equal(a.start, b.start) and np.array_equal(a.t_end, b.t_end)


def test_halved_times_match_devices_twice_as_fast():
    g, c, plan = _plan_and_cluster()
    fast = c.with_devices([d.__class__(**{**d.__dict__, "speed": 2 * d.speed})
                           for d in c.devices])
    given = simulate(plan, c, op_times=_placed_times(g, c, plan) / 2)
    assert given.makespan == pytest.approx(simulate(plan, fast).makespan, rel=1e-12)
    assert given.makespan < simulate(plan, c).makespan


def test_one_slower_op_on_the_critical_path_lengthens_the_step_by_its_extra():
    g = samples.diamond()
    c = Cluster.preset("2xV100-pcie")
    plan = Plan(g, {v: "gpu0" for v in g.ops})          # serial: every op is critical
    t = _placed_times(g, c, plan)
    t[g.ops.index("d")] += 1.5
    assert simulate(plan, c, op_times=t).makespan == pytest.approx(
        simulate(plan, c).makespan + 1.5)


def test_overlap_model_without_extras_is_the_plain_judge():
    g, c = samples.diamond(), Cluster.preset("2xV100-pcie")
    plan = Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"})   # b and c overlap
    assert simulate_overlap(plan, c, 0.0).makespan == simulate(plan, c).makespan
    assert simulate_overlap(plan, c, 0.3).makespan > simulate(plan, c).makespan


@pytest.mark.parametrize("bad, what", [([1.0, 2.0], "has 2 times for a graph of 4 ops"),
                                       ([1.0, -1.0, 1.0, 1.0], "op_times of op 'b' is -1.0"),
                                       ([1.0, 1.0, float("nan"), 1.0], "op_times of op 'c'")])
def test_bad_op_times_are_named(bad, what):
    g = samples.diamond()
    c = Cluster.preset("2xV100-pcie")
    with pytest.raises(GraphError, match=what):
        simulate(Plan(g, {v: "gpu0" for v in g.ops}), c, op_times=bad)
