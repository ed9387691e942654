"""Pesto's coarsening kept within the memory balance (coarse_balance, issue 46): merged
vertices and united colocation groups stay under the unit cap, so the coarse MILP has devices
to choose and its expanded plan meets the balance of the original graph without a repair."""

from __future__ import annotations

import numpy as np
import pytest

from workbench import Cluster, samples, simulate, solve
from workbench.errors import GraphError
from workbench.solvers.pesto.balance import balance_caps, tensor_footprint, unit_cap
from workbench.transforms.coarsen import coarsen


def _group_and_vertex_weights(cg, fp):
    g = cg.graph
    vert = [float(sum(fp[g.index[v]] for v in ms)) for ms in cg.members]
    groups: dict = {}
    for i, gid in enumerate(cg.coarse.c.coloc.tolist()):
        if gid >= 0:
            groups[gid] = groups.get(gid, 0.0) + vert[i]
    return vert, groups


def test_weight_cap_keeps_colocation_groups_from_swallowing_the_model():
    """rnnlm (TensorFlow, 568 colocation groups): coarsened to 300 vertices without a cap, the
    merges unite the groups into one that holds the whole footprint (every coarse placement
    then uses one device); under the unit cap no vertex or united group outgrows it."""
    g, c = samples.load_sample("rnnlm"), Cluster.preset("4xV100-nvlink")
    fp = tensor_footprint(g)
    groups = g.c.coloc.tolist()
    free = coarsen(g, 300, cluster=c)
    _vert, united = _group_and_vertex_weights(free, fp)
    assert max(united.values()) == pytest.approx(fp.sum())        # one group: the whole model
    cap = unit_cap(fp, c, 0.25, groups=groups)
    fine_units = [fp[g.c.coloc == k].sum() for k in range(len(g.c.coloc_groups))]
    assert cap == pytest.approx(max(0.25 * fp.sum() / 4, max(fine_units)))
    capped = coarsen(g, 300, cluster=c, weights=fp, weight_cap=cap, max_rounds=1000)
    vert, united = _group_and_vertex_weights(capped, fp)
    singles = [fp[g.index[ms[0]]] for ms in capped.members if len(ms) == 1]
    assert max(united.values()) <= cap * (1 + 1e-9)
    assert all(w <= cap * (1 + 1e-9) for w, ms in zip(vert, capped.members) if len(ms) > 1)
    assert len(united) > 4 and capped.coarse.n_ops <= 300 and max(singles, default=0) <= cap
    assert sorted(m for ms in capped.members for m in ms) == sorted(g.ops)


def test_weight_cap_bad_arguments():
    g = samples.lstm_grid(20, layers=2)
    with pytest.raises(GraphError, match="weights"):
        coarsen(g, 5, weights=[1.0] * 3, weight_cap=2.0)
    with pytest.raises(GraphError, match="weight_cap"):
        coarsen(g, 5, weights=[1.0] * g.n_ops, weight_cap=-1.0)


def test_unit_cap_admits_a_balanced_placement_of_any_coarsening():
    """The argument behind unit_cap: units no larger than it, given in any order to the device
    furthest below its share, never pass a device's cap."""
    rng = np.random.default_rng(0)
    c = Cluster.preset("4xV100-nvlink")
    fp = rng.pareto(1.5, 400) + 0.01
    cap = unit_cap(fp, c, 0.25)
    caps = balance_caps(fp, c, 0.25)
    units, cur = [], 0.0
    for f in rng.permutation(fp):       # a random "coarsening" into units below the cap
        if cur + f > cap and cur > 0:
            units.append(cur)
            cur = 0.0
        cur += f
    units.append(cur)
    held = np.zeros(4)
    for u in units:
        held[np.argmin(held)] += u
    assert (held <= np.asarray(caps) * (1 + 1e-9)).all()


def test_pesto_coarse_balance_plan_meets_the_balance_without_the_repair():
    """With coarse_balance (an extension, off by default) the coarse rows carry the original
    graph's caps and the coarse warm start is repaired before the MILP starts from it: the
    expanded MILP or warm start plan meets the fine balance as it is (no op moved after
    expansion)."""
    g, c = samples.load_sample("resnet_small"), Cluster.preset("4xV100-nvlink")
    p = solve(g, c, method="pesto", target=12, time_limit=8, threads=1, guard=False,
              coarse_balance=True)
    st = p.stats
    assert st["coarse_unit_cap_x"] in (1.0, 1.5)
    assert st["fine_balance"]["holds"] and st["warm_start_balanced"]
    fp = tensor_footprint(g)
    caps = balance_caps(fp, c, 0.25, groups=g.c.coloc.tolist())
    if "memory_balance" in st:      # the model was built within the limit (a loaded machine)
        assert st["memory_balance"] == \
            f"footprint per device <= {[round(x / 1e6, 1) for x in caps]} MB"
    if st["coarse_unit_cap_x"] == 1.0 and "memory_balance_dropped" not in st:
        assert "balance_moved_ops" not in st        # the fine repair had nothing to do
    if "coarse_balance_moved_ops" in st:            # the coarse warm start was repaired
        assert st["coarse_balance_moved_ops"] > 0
    old = solve(g, c, method="pesto", target=12, time_limit=8, threads=1, guard=False)
    assert old.stats["coarse_unit_cap_x"] is None and old.stats["fine_balance"]["holds"]
    assert simulate(p, c).makespan > 0
