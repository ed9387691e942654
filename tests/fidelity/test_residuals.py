"""The judge against reality: residuals of traced runs, the calibrated model, the ladder."""

import math
from dataclasses import replace
from functools import partial

import pytest

from workbench import Cluster, Plan, samples, simulate
from workbench.errors import RuntimeBridgeError
from workbench.fidelity.ladder import ladder_stats, step_spread
from workbench.fidelity.probes import probe_plan
from workbench.fidelity.trace_residuals import Residuals, median_timeline, residuals
from workbench.runtime.runner import Measurement


def _diamond():
    g = samples.diamond()
    c = Cluster.preset("2xV100-pcie")
    p = Plan(g, {"a": "gpu0", "b": "gpu0", "c": "gpu1", "d": "gpu0"}, method="split")
    return g, c, p, simulate(p, c)


def _as_trace(p, s, g, shift=None):
    shift = shift or {}
    out = {}
    for i, v in enumerate(g.ops):
        ds, de = shift.get(v, (0.0, 0.0))
        out[v] = (p.placement[v], float(s.start[i]) + ds, float(s.end[i]) + de)
    return out


def test_late_tensor_is_blamed_on_its_link():
    g, c, p, s = _diamond()
    # c's output reaches d 2 ms late: d (and nothing else) starts and ends 2 ms later
    tr = _as_trace(p, s, g, {"d": (2.0, 2.0)})
    m = Measurement("split", samples=[s.makespan + 2.0], trace=tr)
    r = residuals(p, m, schedule=s)
    assert r.error_ms == pytest.approx(2.0)
    top = r.groups.iloc[0]
    assert top["group"] == "transfer: gpu1->gpu0"
    assert top["residual_ms"] == pytest.approx(2.0)
    assert top["share"] == pytest.approx(1.0)
    # the parts add up to the error exactly
    assert r.groups["residual_ms"].sum() == pytest.approx(r.error_ms)
    late = r.transfers.set_index("producer").loc["c"]
    assert late["binding"] and late["meas_ms"] == pytest.approx(late["pred_ms"] + 2.0)


def test_slow_op_and_session_overhead_are_separated():
    g, c, p, s = _diamond()
    tr = _as_trace(p, s, g, {"d": (0.0, 0.5)})
    m = Measurement("split", samples=[s.makespan + 1.5], trace=tr)
    r = residuals(p, m, schedule=s)
    parts = dict(zip(r.groups["group"], r.groups["residual_ms"]))
    assert parts["session"] == pytest.approx(1.0)
    assert parts["compute: d"] == pytest.approx(0.5)
    assert r.traced_ms == pytest.approx(s.makespan + 0.5)
    assert "session" in r.table()
    assert list(r.ops.loc[r.ops["critical"], "op"]) != []


def test_residuals_refuses_bad_input():
    g, c, p, s = _diamond()
    with pytest.raises(RuntimeBridgeError, match="no trace"):
        residuals(p, Measurement("split", samples=[1.0]), c)
    with pytest.raises(RuntimeBridgeError, match="no successful measurement"):
        residuals(p, Measurement("split", error="boom"), c)
    with pytest.raises(RuntimeBridgeError, match="none of its ops"):
        residuals(p, Measurement("split", samples=[1.0], trace={"zz": ("gpu0", 0, 1)}), c)
    with pytest.raises(RuntimeBridgeError, match="cluster"):
        residuals(p, Measurement("split", samples=[1.0], trace=_as_trace(p, s, g)))


def test_median_timeline_ignores_one_preempted_step():
    runs = [{"a": ("d", 0.0, 1.0), "b": ("d", 1.0, 2.0)},
            {"a": ("d", 0.0, 40.0), "b": ("d", 40.0, 41.0)},   # a preempted
            {"a": ("d", 0.0, 1.2), "b": ("d", 1.2, 2.1)}]
    med = median_timeline(runs)
    assert med["a"][2] == pytest.approx(1.2) and med["b"][2] == pytest.approx(2.1)


def test_ladder_counts_disagreements_beyond_spread():
    rows = [{"model": "m", "plan": "a", "measured": 10.0, "spread": 0.1, "good": 10.0,
             "bad": 30.0},
            {"model": "m", "plan": "b", "measured": 20.0, "spread": 0.1, "good": 21.0,
             "bad": 20.0}]
    st = ladder_stats(rows, ["good", "bad"])
    assert st["good"]["agree_beyond"] == 1 and st["good"]["best_ok"] == 1
    assert st["bad"]["agree_beyond"] == 0 and st["bad"]["best_ok"] == 0
    assert st["bad"]["worst"][0] == pytest.approx(2.0) and st["bad"]["worst"][2] == "a"
    assert step_spread([1.0, 2.0, 3.0, 100.0]) == pytest.approx(0.5 * (27.25 - 1.75))


def test_ladder_counts_one_plan_from_two_methods_as_twins_not_a_pair():
    import workbench as wb
    from workbench.cluster import local_cluster
    from workbench.fidelity.ladder import plan_key
    from workbench.runtime.runner import with_run_order

    g, cl = samples.load_sample("resnet_small"), local_cluster(2)
    plans = {m: with_run_order(wb.solve(g, cl, method=m, seed=0), cl)
             for m in ("m_topo", "heft", "dpos")}
    assert plan_key(plans["heft"]) == plan_key(plans["dpos"])   # the solvers agree here
    assert plan_key(plans["heft"]) != plan_key(plans["m_topo"])
    # two sessions of the one plan 9 ms apart, beyond their spreads (as ResNet-50's measured)
    measured = {"m_topo": (480.0, 3.0), "heft": (443.6, 4.3), "dpos": (434.5, 4.5)}
    rows = [{"model": g.name, "plan": m, "key": plan_key(p), "measured": measured[m][0],
             "spread": measured[m][1], "sim": wb.simulate(p, cl).makespan}
            for m, p in plans.items()]
    st = ladder_stats(rows, ["sim"])["sim"]
    assert (st["pairs"], st["twins"], st["twins_beyond"]) == (2, 1, 1)
    assert st["agree_beyond"] == st["pairs_beyond"] == 2
    unkeyed = ladder_stats([{k: v for k, v in r.items() if k != "key"} for r in rows],
                           ["sim"])["sim"]
    assert (unkeyed["pairs_beyond"], unkeyed["agree_beyond"], unkeyed["twins"]) == (3, 2, 0)


def test_residual_figure_lanes_and_bars():
    from widgets.figures.residuals import residual_figure

    g, c, p, s = _diamond()
    r = residuals(p, Measurement("split", samples=[s.makespan + 2.0],
                                 trace=_as_trace(p, s, g, {"d": (2.0, 2.0)})), schedule=s)
    fig = residual_figure(r)
    pred, meas = fig.data[0], fig.data[1]
    assert len(pred.x) == len(meas.x) == g.n_ops
    assert set(meas.y) == {"gpu0 measured", "gpu1 measured"}
    assert fig.layout.meta["largest"] == "transfer: gpu1->gpu0"
    with pytest.raises(ValueError, match="Residuals"):
        residual_figure(object())


# ------------------------------------------------------------------ real TensorFlow runs
tf_only = pytest.mark.tf


@pytest.fixture(scope="module")
def rt():
    pytest.importorskip("tensorflow")
    import workbench.runtime as rt

    return rt


@pytest.fixture(scope="module")
def mlp(rt):
    return rt.profile(rt.extract("mlp", 8, **rt.TINY["mlp"]), steps=2, warmup=1)


@tf_only
def test_traced_run_lines_up_with_simulation(rt, mlp):
    from workbench.cluster import local_cluster

    cl = local_cluster(2)
    plan = probe_plan(mlp, cl, seed=1)   # random placement: many cross-device tensors,
    # some consumed by an op with that tensor as its only input (always binding)
    m = rt.traced_measurement(plan, cluster=cl, steps=3, warmup=1, traces=3)
    r = residuals(plan, m, cl)
    assert isinstance(r, Residuals)
    assert r.ops["meas_ms"].notna().all()            # every op of the step was traced
    assert set(r.ops["device"]) == {"cpu0", "cpu1"}
    assert len(r.transfers) > 0 and r.transfers["binding"].any()
    assert (r.transfers["meas_ms"] > -1e-6).all()     # a consumer never starts before its input
    assert r.path["measured_ms"].sum() == pytest.approx(r.traced_ms, rel=1e-6)
    assert r.groups["residual_ms"].sum() == pytest.approx(r.error_ms, abs=1e-9)


@tf_only
def test_calibrated_model_changes_are_switchable(rt, mlp):
    from workbench.cluster import local_cluster
    from workbench.fidelity.changes import MODEL_CHANGES
    from workbench.fidelity.extras import HandoffCosts
    from workbench.runtime.calibrate import calibrate_model

    cl = local_cluster(2)
    none = calibrate_model(mlp, cl, changes=(), steps=3, warmup=1, traces=3)
    assert none.changes == () and none.congestion and none.cluster is cl
    costs = HandoffCosts(send_ms=0.004, recv_ms=0.003, latency_ms=0.001, slope=0.05)
    full = calibrate_model(mlp, cl, changes=MODEL_CHANGES, steps=3, warmup=1, traces=3,
                           handoff=costs)
    assert full.changes == MODEL_CHANGES and not full.congestion
    assert all(math.isinf(lk.bandwidth) for lk in full.cluster.links.values())
    # the default per-tensor costs: the micro-benchmarked ones given, nothing fitted to a probe
    assert full.send_overhead == 0.004 and full.handoff_slope == 0.05
    assert all(d.recv_overhead == 0.003 for d in full.cluster.devices)
    assert all(lk.latency == 0.001 for lk in full.cluster.links.values())
    assert "recv_overhead_ms" not in full.details and "(probe)" not in full.probe_plans()
    # the default slowdown: the slope measured untraced, no traced single-device run
    assert full.contention == {} and full.overlap == full.details["contention_bench_slope"] >= 0
    assert "overlap_slope" not in full.details
    with pytest.raises(RuntimeBridgeError, match="no fitted contention factor"):
        full.with_contention()
    probe = full.probe   # probe_plan's placement, in the order it was run
    assert probe.placement == probe_plan(mlp, cl).placement and probe.order is not None
    # round six's per-tensor costs: a latency from the traced probe and a receive overhead
    # fitted so that the model predicts the probe's measured step (unless even no overhead
    # predicts it too slow)
    fitted = calibrate_model(mlp, cl, changes=("shared_memory", "contention_bench", "recv_fit"),
                             steps=3, warmup=1, traces=3)
    assert fitted.changes == ("shared_memory", "contention_bench", "recv_fit")
    assert fitted.details["tensor_latency_ms"] >= 0 and fitted.send_overhead == 0
    if fitted.details["recv_overhead_ms"] > 0:
        assert fitted.makespan(fitted.probe) == pytest.approx(
            fitted.details["probe_measured_ms"], rel=1e-3)
    with pytest.raises(RuntimeBridgeError, match="unknown model change 'fast'"):
        calibrate_model(mlp, cl, changes=["fast"])


def test_refit_recv_matches_the_probe_and_keeps_other_changes():
    from workbench.cluster import local_cluster
    from workbench.fidelity.model import JudgeModel

    g = samples.diamond()
    probe = Plan(g, {"a": "cpu0", "b": "cpu1", "c": "cpu1", "d": "cpu0"}, method="probe")
    m = JudgeModel(local_cluster(2), congestion=False, contention={2: 1.5},
                   changes=("shared_memory", "contention"), probe=probe)
    target = m.makespan(probe) + 0.3
    fit = m.refit_recv(probe, target)
    assert fit.changes == ("shared_memory", "contention", "recv_fit")
    assert fit.makespan(probe) == pytest.approx(target, rel=1e-6)
    assert fit.details["recv_overhead_ms"] > 0 and fit.contention == {2: 1.5}
    # a probe already predicted slower than measured keeps no overhead
    assert m.refit_recv(probe, 0.0).details["recv_overhead_ms"] == 0.0


def test_contention_slows_only_plans_on_that_many_devices():
    from workbench.cluster import local_cluster
    from workbench.fidelity.fitting import contention_factor
    from workbench.fidelity.model import JudgeModel

    g = samples.diamond()
    one = Plan(g, {v: "cpu0" for v in g.ops})
    two = Plan(g, {"a": "cpu0", "b": "cpu0", "c": "cpu1", "d": "cpu0"})
    base, slow = JudgeModel(local_cluster(2)), JudgeModel(local_cluster(2), contention={2: 2.0})
    assert slow.makespan(one) == base.makespan(one)
    assert slow.makespan(two) > base.makespan(two)
    busy = {"a": ("d", 0.0, 3.0), "b": ("d", 3.0, 5.0), "x": ("d", 0.0, 0.001)}
    alone = {"a": ("d", 0.0, 1.0), "b": ("d", 1.0, 2.0), "x": ("d", 0.0, 0.0001)}
    assert contention_factor(busy, alone) == pytest.approx(2.5)   # x too short to count
    assert contention_factor(alone, busy) == 1.0                   # never below 1


def test_traced_measurement_needs_a_trace():
    from workbench.runtime.tracing import traced_measurement

    g, c, p, s = _diamond()
    with pytest.raises(RuntimeBridgeError, match="traces must be >= 1"):
        traced_measurement(p, traces=0)


def test_busy_overlap_counts_time_another_device_computes():
    from workbench.fidelity.extras import busy_overlap

    # d0 runs [0, 2] and [2, 4]; d1 runs [1, 3]; d2 runs [0, 4]
    ov = busy_overlap([0, 0, 1, 2], [0.0, 2.0, 1.0, 0.0], [2.0, 4.0, 3.0, 4.0])
    assert ov.tolist() == [1.0, 1.0, 1.0, 1.0]          # capped at the op's run
    ov = busy_overlap([0, 0, 1], [0.0, 2.0, 1.0], [2.0, 4.0, 1.5])
    assert ov.tolist() == [0.25, 0.0, 1.0]
    assert busy_overlap([0, 1], [0.0, 5.0], [0.0, 6.0]).tolist() == [0.0, 0.0]  # zero-length op


def test_overlap_slope_from_overlapping_ops_only():
    from workbench.fidelity.fitting import overlap_slope

    alone = {"a": ("d0", 0.0, 1.0), "b": ("d0", 1.0, 2.0), "c": ("d0", 2.0, 3.0)}
    # a and b overlap fully and take 1.4x; c runs alone at 3x (preempted): not counted
    busy = {"a": ("d0", 0.0, 1.4), "b": ("d1", 0.0, 1.4), "c": ("d0", 1.4, 4.4)}
    assert overlap_slope(busy, alone) == pytest.approx(0.4)
    assert overlap_slope(busy, alone, min_overlap=1.1) == 0.0       # nothing overlaps enough
    assert overlap_slope(alone, {"a": ("d0", 0.0, 2.0)}) == 0.0     # never negative


def test_overlap_change_slows_only_concurrent_ops():
    from workbench.cluster import local_cluster
    from workbench.fidelity.extras import simulate_overlap
    from workbench.fidelity.model import JudgeModel

    g = samples.diamond()
    one = Plan(g, {v: "cpu0" for v in g.ops})
    two = Plan(g, {"a": "cpu0", "b": "cpu0", "c": "cpu1", "d": "cpu0"})
    base = JudgeModel(local_cluster(2))
    m = JudgeModel(local_cluster(2), overlap=0.5, details={"overlap_slope": 0.5})
    assert m.makespan(one) == base.makespan(one)            # one device: no overlap
    assert m.makespan(two) > base.makespan(two)
    s = simulate_overlap(two, local_cluster(2), 0.5)
    plain = simulate(two, local_cluster(2))
    i_b, i_c = g.index["b"], g.index["c"]
    # b and c ran side by side: both slowed by at most 1.5x of their cost
    for i in (i_b, i_c):
        d_plain, d = plain.end[i] - plain.start[i], s.end[i] - s.start[i]
        assert d_plain < d <= 1.5 * d_plain + 1e-9
    cm = JudgeModel(local_cluster(2), contention={2: 1.3}, changes=("contention",),
                    details={"overlap_slope": 0.5})
    ov = cm.with_overlap()
    assert ov.contention == {} and ov.overlap == 0.5 and ov.changes == ("overlap",)
    with pytest.raises(RuntimeBridgeError, match="no fitted overlap slope"):
        base.with_overlap()


def test_contention_and_overlap_are_exclusive():
    from workbench.cluster import local_cluster
    from workbench.runtime.calibrate import calibrate_model

    with pytest.raises(RuntimeBridgeError, match="'contention' and 'overlap'"):
        calibrate_model(samples.diamond(), local_cluster(2), changes=["contention", "overlap"])


@tf_only
def test_calibrated_model_fits_the_overlap_slope(rt, mlp):
    from workbench.cluster import local_cluster
    from workbench.runtime.calibrate import calibrate_model

    m = calibrate_model(mlp, local_cluster(2), changes=("shared_memory", "overlap"), steps=3,
                        warmup=1, traces=3)
    assert m.changes == ("shared_memory", "overlap") and m.contention == {}
    assert m.overlap == m.details["overlap_slope"] >= 0.0
    assert m.details["contention_factor"] >= 1.0   # both fitted from the same traces
    assert m.with_overlap().overlap == m.overlap
    assert m.with_contention().contention[2] == m.details["contention_factor"]
    # the untraced slope takes the traced one's place; with_overlap puts it back
    u = m.with_overlap_slope(0.25)
    assert u.changes == ("shared_memory", "contention_bench") and u.overlap == 0.25
    assert u.with_overlap().changes == m.changes and u.with_overlap().overlap == m.overlap
    # the probe runs in one fixed order (calibration, interleaved rounds and predictions)
    assert m.probe.order is not None
    assert sorted(v for ops in m.probe.order.values() for v in ops) == sorted(mlp.ops)


def test_with_run_order_fixes_the_order_a_plan_runs_in():
    from workbench.cluster import local_cluster
    from workbench.fidelity.model import JudgeModel
    from workbench.runtime.runner import execution_chains, with_run_order

    g = samples.diamond()
    p = Plan(g, {"a": "cpu0", "b": "cpu0", "c": "cpu1", "d": "cpu0"}, method="x")
    fixed = with_run_order(p, local_cluster(2))
    assert fixed.order == execution_chains(p, cluster=local_cluster(2))[0]
    assert fixed.placement == p.placement and fixed.method == "x" and p.order is None
    assert with_run_order(fixed, Cluster.preset("2xV100-pcie")) is fixed   # an order is kept
    # the model predicts the order that runs: with it fixed, the same makespan
    m = JudgeModel(local_cluster(2))
    assert m.makespan(fixed) == pytest.approx(m.makespan(p))


def test_woken_ops_mark_handoffs_after_idling_and_device_starts():
    from workbench.fidelity.extras import woken_ops

    g, c, _, s = _diamond()
    woken = dict(zip(g.ops, woken_ops(g, s, idle_ms=0.0)))
    assert woken == {"a": False, "b": False, "c": True, "d": True}   # gpu1 starts; d waits on c
    # with a long idle threshold only the device start remains
    assert dict(zip(g.ops, woken_ops(g, s, idle_ms=1e9))) == {"a": False, "b": False,
                                                              "c": True, "d": False}
    one = Plan(g, {v: "gpu0" for v in g.ops})
    assert not woken_ops(g, simulate(one, c), idle_ms=0.0).any()


def test_wakeup_is_fitted_to_the_idle_probe_only():
    from dataclasses import replace

    from workbench.cluster import local_cluster
    from workbench.fidelity.model import JudgeModel
    from workbench.fidelity.probes import idle_probe_plan, probe_plan
    from workbench.runtime.calibrate import fit_wakeup
    from workbench.runtime.runner import with_run_order

    g = _unit_pesto()
    cl = local_cluster(2)
    probe = with_run_order(probe_plan(g, cl, seed=1), cl)
    base = JudgeModel(cl, congestion=False, changes=("shared_memory", "recv_fit"), probe=probe,
                      details={"probe_measured_ms": 0.0})
    idle = with_run_order(idle_probe_plan(g, cl, chunks=4), cl)
    target = base.makespan(idle) + 0.5
    fit = fit_wakeup(replace(base, idle_probe=idle), g, measured_ms=target,
                     probe_ms=base.makespan(probe))
    assert fit.wakeup > 0 and "wakeup" in fit.changes
    assert fit.makespan(idle) == pytest.approx(target, rel=1e-3)
    assert fit.details["idle_probe_measured_ms"] == target
    # a single-device plan has no hand-off: unchanged
    one = Plan(g, {v: "cpu0" for v in g.ops})
    assert fit.makespan(one) == pytest.approx(base.makespan(one))
    with pytest.raises(RuntimeBridgeError, match="fit_wakeup: the model has no probe"):
        fit_wakeup(JudgeModel(cl), g, measured_ms=1.0)


def test_handoff_idle_is_the_receivers_idle_time_before_a_binding_input():
    from workbench.fidelity.extras import handoff_idle

    g, c, _, s = _diamond()
    idle = dict(zip(g.ops, handoff_idle(g, s)))
    i = {v: k for k, v in enumerate(g.ops)}
    assert idle["a"] == -1 and idle["b"] == -1            # same-device inputs only
    assert idle["c"] == pytest.approx(float(s.start[i["c"]]))   # gpu1's first op
    # d waits for c on gpu1: gpu0 idled from b's end to d's start
    assert idle["d"] == pytest.approx(float(s.start[i["d"]] - s.end[i["b"]]))
    one = Plan(g, {v: "gpu0" for v in g.ops})
    assert (handoff_idle(g, simulate(one, c)) == -1).all()


def test_handoff_change_charges_send_receive_and_idle_dependent_latency():
    from workbench.cluster import local_cluster
    from workbench.fidelity.extras import HandoffCosts, sent_tensors
    from workbench.fidelity.model import JudgeModel

    g = _unit_pesto()
    cl = local_cluster(2)
    split = Plan(g, {v: ("cpu0" if k % 3 else "cpu1") for k, v in enumerate(g.ops)})
    one = Plan(g, {v: "cpu0" for v in g.ops})
    base = JudgeModel(cl, changes=("shared_memory", "recv_fit"))
    zero = base.with_handoff(HandoffCosts(0.0, 0.0, 0.0, 0.0))
    assert zero.changes == ("handoff",) and not zero.congestion
    assert zero.makespan(split) <= base.makespan(split)
    assert sent_tensors(split, cl).sum() > 0
    for costs in (HandoffCosts(0.1, 0.0, 0.0, 0.0), HandoffCosts(0.0, 0.1, 0.0, 0.0),
                  HandoffCosts(0.0, 0.0, 0.1, 0.0), HandoffCosts(0.0, 0.0, 0.0, 0.5)):
        m = zero.with_handoff(costs)
        assert m.makespan(split) > zero.makespan(split), costs
        assert m.makespan(one) == pytest.approx(zero.makespan(one))   # nothing crosses
    assert zero.with_handoff(HandoffCosts(0.0, 0.0, 0.0, 0.5)).details["handoff_slope"] == 0.5


def test_handoff_excludes_the_changes_it_replaces():
    from workbench.cluster import local_cluster
    from workbench.runtime.calibrate import calibrate_model

    with pytest.raises(RuntimeBridgeError, match="'handoff' replaces"):
        calibrate_model(None, local_cluster(2), changes=["shared_memory", "handoff"])


@tf_only
def test_handoff_costs_are_measured_between_logical_devices(rt):
    from workbench.fidelity.extras import IDLE_CAP_MS
    from workbench.runtime.handoff import measure_handoff

    h = measure_handoff(repeats=5, trials=1, segments=4)
    for v in (h.send_ms, h.recv_ms, h.latency_ms, h.slope):
        assert math.isfinite(v) and v >= 0
    assert h.send_ms < 1.0 and h.recv_ms < 1.0      # microseconds, not milliseconds
    assert len(h.points) == 5 and all(i > 0 for i, _ in h.points)
    assert h.latency(10 * IDLE_CAP_MS) == pytest.approx(h.latency(IDLE_CAP_MS))
    assert len(h.pass_points) == 3 and all(len(p) == 5 for p in h.pass_points)


def _fake_handoff_timer(monkeypatch, *, disturbed: int):
    """``handoff._time`` replaced by exact chains (1.5 us an op, 4 us a send, 3 us a receive,
    hand-off latency 0.03 x idle), whose ``disturbed``-th session of the two-device ping-pong
    chain at the longest idle runs 7 ms slow (as one bench run measured)."""
    from workbench.runtime import handoff

    op, send, recv, slope, n = 0.0015, 0.004, 0.003, 0.03, handoff._N
    seen = []

    def timed(kind, a, b, *, repeats, trials, spinning, k=1, segments=16):
        chain = {"alone": n * op, "send": n * (op + send), "recv": n * (op + recv),
                 "recv-local": n * op}
        if kind in chain:
            return chain[kind]
        one = segments * k * op
        if kind == "pingpong-local":
            return one
        seen.append(k)
        hit = k == max(handoff._IDLE_KS) and seen.count(k) == disturbed
        return one + (segments - 1) * (send + recv + slope * k * op) + (7.0 if hit else 0.0)

    monkeypatch.setattr(handoff, "_time", timed)
    return handoff


def test_handoff_ping_pong_passes_outvote_one_disturbed_session(monkeypatch):
    handoff = _fake_handoff_timer(monkeypatch, disturbed=1)
    h = handoff.measure_handoff()
    assert (h.send_ms, h.recv_ms) == (pytest.approx(0.004), pytest.approx(0.003))
    assert h.slope == pytest.approx(0.03, rel=1e-6) and h.latency_ms == pytest.approx(0, abs=1e-9)
    assert max(c for _, c in h.pass_points[0]) > 0.4     # the disturbed pass, outvoted
    handoff = _fake_handoff_timer(monkeypatch, disturbed=1)
    one_pass = handoff.measure_handoff(passes=1)          # one pass: carried away
    assert one_pass.slope > 0.5


def test_handoff_ping_pong_passes_time_each_point_once_per_pass(monkeypatch):
    handoff = _fake_handoff_timer(monkeypatch, disturbed=0)
    calls = []
    timed = handoff._time
    monkeypatch.setattr(handoff, "_time", lambda kind, *a, **kw: calls.append(
        (kind, kw.get("k"), kw["trials"])) or timed(kind, *a, **kw))
    h = handoff.measure_handoff(passes=2)
    pings = [c for c in calls if c[0].startswith("pingpong")]
    assert [k for _, k, _ in pings] == [k for k in handoff._IDLE_KS for _ in (0, 1)] * 2
    assert {t for _, _, t in pings} == {1} and {t for k, _, t in calls if k == "send"} == {2}
    assert h.slope == pytest.approx(0.03, rel=1e-6) and len(h.pass_points) == 2


def test_rescale_anchors_the_single_device_speed_and_composes():
    from workbench.cluster import local_cluster
    from workbench.fidelity.model import JudgeModel
    from workbench.fidelity.probes import reference_plan

    g = _unit_pesto()
    cl = local_cluster(2)
    m = JudgeModel(cl, contention={2: 1.5})
    ref = reference_plan(g, cl)
    assert ref.devices_used() == ["cpu0"] and ref.order["cpu0"] == g.topological_order()
    r = m.rescale(ref, 1.25 * m.makespan(ref))
    assert r.makespan(ref) == pytest.approx(1.25 * m.makespan(ref))
    assert r.changes == ("rescale",) and r.contention == {2: 1.5}   # other changes kept
    split = Plan(g, {v: ("cpu0" if k % 2 else "cpu1") for k, v in enumerate(g.ops)})
    assert r.makespan(split) > m.makespan(split)
    rr = r.rescale(ref, 2 * m.makespan(ref))
    assert rr.details["rescale"] == pytest.approx(2.0) and rr.changes == ("rescale",)
    assert m.rescale(ref, math.nan) is m and m.rescale(ref, 0.0) is m   # nothing to anchor to


@tf_only
def test_contention_is_measured_untraced_with_every_device_busy(rt, mlp):
    from workbench.cluster import local_cluster
    from workbench.fidelity.model import JudgeModel
    from workbench.runtime.contention import measure_contention

    c = measure_contention(mlp, local_cluster(2), steps=3, warmup=1, blocks=2)
    assert c["alone_ms"] > 0 and c["together_ms"] > 0
    assert c["ratio"] == pytest.approx(c["together_ms"] / c["alone_ms"])
    assert c["slope"] == max(0.0, c["ratio"] - 1.0)
    m = JudgeModel(local_cluster(2), contention={2: 1.2}, changes=("contention",))
    o = m.with_overlap_slope(c["slope"])
    assert o.contention == {} and o.overlap == c["slope"] and o.changes == ("contention_bench",)
    with pytest.raises(RuntimeBridgeError, match="two or more devices"):
        measure_contention(mlp, local_cluster(1))


@tf_only
def test_rescale_contention_bench_and_step_cost_are_named_changes(rt, mlp):
    from workbench.cluster import local_cluster
    from workbench.fidelity.probes import reference_plan
    from workbench.runtime.calibrate import calibrate_model

    cl = local_cluster(2)
    m = calibrate_model(mlp, cl, changes=("shared_memory", "contention_bench", "rescale",
                                          "step_cost", "recv_fit"), steps=3, warmup=1, traces=2)
    assert m.changes == ("shared_memory", "contention_bench", "rescale", "step_cost",
                         "recv_fit")
    assert m.multi_device_ms == m.details["step_cost_ms"] >= 0
    assert m.contention == {} and m.overlap == m.details["contention_bench_slope"] >= 0
    ref = reference_plan(mlp, cl)
    assert m.details["rescale"] > 0
    # no transfer and no other device enters a single-device plan: the reference is exact
    assert m.makespan(ref) == pytest.approx(m.details["reference_measured_ms"], rel=1e-6)
    with pytest.raises(RuntimeBridgeError, match="'contention' and 'contention_bench'"):
        calibrate_model(mlp, cl, changes=("contention", "contention_bench"))


def test_step_cost_adds_a_constant_to_multi_device_steps_only():
    from workbench.cluster import local_cluster
    from workbench.fidelity.model import JudgeModel
    from workbench.fidelity.probes import one_op_probe, reference_plan

    g = _unit_pesto()
    cl = local_cluster(2)
    m = JudgeModel(cl)
    ref, one = reference_plan(g, cl), one_op_probe(g, cl)
    assert len(one.devices_used()) == 2
    assert sum(d == "cpu1" for d in one.placement.values()) == 1
    gap = m.makespan(one) - m.makespan(ref)
    f = m.fit_step_cost(ref, 5.0, one, 5.0 + gap + 0.3)
    assert f.multi_device_ms == pytest.approx(0.3) and f.changes == ("step_cost",)
    assert f.makespan(ref) == m.makespan(ref)
    s0, s1 = m.simulate(one), f.simulate(one)
    assert s1.makespan == pytest.approx(s0.makespan + 0.3)
    assert (s1.end - s1.start) == pytest.approx(s0.end - s0.start)   # durations unchanged
    # a one-op probe measured faster than the model's transfers imply: no negative cost
    assert m.fit_step_cost(ref, 5.0, one, 5.0 + gap - 0.2).multi_device_ms == 0.0


def test_step_cost_is_the_median_of_several_one_op_probes():
    """Each one-op probe moves another op (a session of its own when timed); the step cost is
    the median of their differences, so one probe session in a slow state (GNMT, round seven:
    42.7 ms) does not set it; with ``anchor_sessions=1`` the first probe alone (round seven)."""
    from workbench.cluster import local_cluster
    from workbench.fidelity.model import JudgeModel
    from workbench.fidelity.probes import (
        STEP_PROBES,
        one_op_probe,
        one_op_probes,
        probe_plan,
        reference_plan,
    )

    g = samples.load_sample("transformer_small")
    cl = local_cluster(2)
    ps = one_op_probes(g, cl)
    moved = [[v for v, d in p.placement.items() if d == "cpu1"] for p in ps]
    assert len(ps) == 3 and all(len(m) == 1 for m in moved)
    assert len({m[0] for m in moved}) == 3 and ps[0] == one_op_probe(g, cl)
    ref = reference_plan(g, cl)
    for p, (v,) in zip(ps, moved, strict=True):
        assert p.order == {"cpu0": [u for u in ref.order["cpu0"] if u != v], "cpu1": [v]}
    assert len(one_op_probes(samples.diamond(), cl, 9)) == 4   # no more probes than ops
    with pytest.raises(RuntimeBridgeError, match="at least 1"):
        one_op_probes(g, cl, 0)
    m = JudgeModel(cl, congestion=False, changes=("rescale", "step_cost"),
                   probe=probe_plan(g, cl, seed=3))
    probes = m.probe_plans()
    assert [k for k in probes if k in STEP_PROBES] == list(STEP_PROBES)
    # a 0.3 ms step cost, the second probe's session 9 ms slow: the median keeps 0.3
    truth = replace(m, multi_device_ms=0.3)
    times = {k: truth.makespan(p) for k, p in probes.items()}
    times["(one-op probe 2)"] += 9.0
    r = m.reanchor(times)
    assert r.multi_device_ms == pytest.approx(0.3, abs=1e-6)
    assert r.details["step_cost_range_ms"] == pytest.approx(9.0, abs=1e-6)
    # the first probe slow: round seven's fit (one probe) takes it whole, the median does not
    times["(one-op probe 2)"] -= 9.0
    times["(one-op probe)"] += 9.0
    assert m.reanchor(times).multi_device_ms == pytest.approx(0.3, abs=1e-6)
    one = replace(m, anchor_sessions=1)
    assert list(one.probe_plans()) == ["(reference)", "(one-op probe)"]
    assert one.reanchor(times).multi_device_ms == pytest.approx(9.3, abs=1e-6)
    with pytest.raises(RuntimeBridgeError, match="no measurement of '\\(one-op probe 3\\)'"):
        m.reanchor({k: v for k, v in times.items() if k != "(one-op probe 3)"})
    with pytest.raises(RuntimeBridgeError, match="3 probes and 2 measurements"):
        m.fit_step_cost(ref, 1.0, ps, [1.0, 2.0])


def _resnet_small_anchoring():
    """resnet_small, two logical CPU devices and an unfitted model with the anchoring changes
    ``rescale``, ``live_memory`` and ``step_cost``."""
    from workbench.cluster import local_cluster
    from workbench.fidelity.model import JudgeModel
    from workbench.fidelity.probes import probe_plan

    g = samples.load_sample("resnet_small")
    cl = local_cluster(2)
    return g, cl, JudgeModel(cl, congestion=False, changes=("rescale", "live_memory", "step_cost"),
                             probe=probe_plan(g, cl, seed=3))


@pytest.mark.slow
def test_the_reference_is_timed_in_three_sessions_and_anchored_to_their_median():
    """The single-device reference runs in three sessions of the same plan; speed, live-memory
    slope and step cost are anchored to their median, so one session in a slow state (GNMT,
    round eight: 450.5 ms where the same placement ran 416.6-424.5 ms in other sessions) sets
    none of them; with ``anchor_sessions=1`` the first session alone (round seven)."""
    from workbench.fidelity.probes import REFERENCES, reference_plan

    g, cl, m = _resnet_small_anchoring()
    probes = m.probe_plans()
    ref = reference_plan(g, cl)
    assert all(probes[k] == ref for k in REFERENCES)
    slow = cl.with_devices([replace(d, speed=d.speed / 1.2) for d in cl.devices])
    truth = replace(m, cluster=slow, memory_slope=0.03, multi_device_ms=0.3)
    times = {k: truth.makespan(p) for k, p in probes.items()}
    base = times["(reference)"]
    for name in REFERENCES:   # any one session 6 % slow: the same model
        r = m.reanchor({**times, name: 1.06 * base})
        assert r.details["rescale"] == pytest.approx(1.2)
        assert r.memory_slope == pytest.approx(0.03, rel=1e-3)
        assert r.multi_device_ms == pytest.approx(0.3, abs=1e-3)
        assert r.details["reference_range_ms"] == pytest.approx(0.06 * base)
    # round seven's anchoring, one session: the slow first session sets the speed of every plan
    # and hides the step cost
    one = replace(m, anchor_sessions=1).reanchor({**times, "(reference)": 1.06 * base})
    assert one.details["rescale"] == pytest.approx(1.2 * 1.06)
    assert one.multi_device_ms == 0.0 and one.details["reference_range_ms"] == 0.0
    bad = Measurement("reference", error="InternalError: boom")
    with pytest.raises(RuntimeBridgeError, match=r"\(reference 3\) run failed"):
        m.reanchor({**times, "(reference 3)": bad})


def test_reanchor_refits_rescale_step_cost_and_recv_to_the_round_times():
    from workbench.cluster import local_cluster
    from workbench.fidelity.model import JudgeModel
    from workbench.fidelity.probes import PROBES, probe_plan
    from workbench.runtime.runner import Measurement

    g = _unit_pesto()
    cl = local_cluster(2)
    m = JudgeModel(cl, congestion=False, changes=("shared_memory", "rescale", "step_cost",
                                                  "recv_fit"), probe=probe_plan(g, cl, seed=3))
    assert tuple(m.probe_plans()) == PROBES[:7]   # the order probe only with live_memory
    # one session each: on this six-op graph the second and third probes and the random probe
    # fit a 0.44 ms step cost without receive overhead as exactly as the truth, and their median
    # outvotes the first (test_step_cost_is_the_median_of_several_one_op_probes: the median)
    m = replace(m, anchor_sessions=1)
    probes = m.probe_plans()
    ref, probe = probes["(reference)"], probes["(probe)"]
    # the times a machine 1.5x slower than the profile, with a 0.4 ms multi-device step cost
    # and a 0.02 ms receive overhead, would measure: re-anchoring recovers all three
    slow = cl.with_devices([replace(d, speed=d.speed / 1.5, recv_overhead=0.02)
                            for d in cl.devices])
    truth = replace(m, cluster=slow, multi_device_ms=0.4)
    times = {k: truth.makespan(p) for k, p in probes.items()}
    r = m.reanchor(times)
    assert r.changes == m.changes
    assert r.makespan(ref) == pytest.approx(times["(reference)"], rel=1e-9)
    assert r.details["rescale"] == pytest.approx(1.5)
    assert r.multi_device_ms == pytest.approx(0.4, abs=1e-3)
    assert r.details["recv_overhead_ms"] == pytest.approx(0.02, abs=1e-4)
    for k, p in probes.items():
        assert r.makespan(p) == pytest.approx(times[k], rel=1e-4)
    # re-anchoring is not cumulative: the same times give the same model again
    again = r.reanchor(times)
    assert again.details["rescale"] == pytest.approx(r.details["rescale"], rel=1e-9)
    assert again.makespan(probe) == pytest.approx(times["(probe)"], rel=1e-4)
    assert again.multi_device_ms == pytest.approx(r.multi_device_ms, abs=1e-3)
    # an ablation leaves changes out and keeps the rest
    base = r.reanchor(times, changes=("recv_fit",))
    assert base.changes == ("shared_memory", "recv_fit") and base.multi_device_ms == 0
    assert base.makespan(ref) == pytest.approx(m.makespan(ref), rel=1e-9)
    # ... and its receive overhead absorbs what the left-out changes carried
    assert base.details["recv_overhead_ms"] > 10 * r.details["recv_overhead_ms"]
    # Measurements are accepted as they come from measure_plans; a failed one is named
    ok = Measurement("reference", samples=[times["(reference)"]] * 3)
    assert m.reanchor({**times, "(reference)": ok}).makespan(ref) == pytest.approx(
        times["(reference)"])
    bad = Measurement("probe", error="InternalError: boom")
    with pytest.raises(RuntimeBridgeError, match=r"\(probe\) run failed: InternalError"):
        m.reanchor({**times, "(probe)": bad})
    with pytest.raises(RuntimeBridgeError, match="no probe"):
        JudgeModel(cl, changes=("rescale",)).probe_plans()


@tf_only
def test_default_model_reanchors_to_its_probes_timed_with_the_plans(rt, mlp, monkeypatch):
    from workbench.cluster import local_cluster
    from workbench.fidelity.changes import MODEL_CHANGES
    from workbench.runtime import handoff
    from workbench.runtime.calibrate import calibrate_model
    from workbench.runtime.runner import with_run_order

    # calibrate_model measures the hand-off costs itself, at the sizes of their own test
    # (test_handoff_costs_are_measured_...; about 27 s with the defaults): their precision
    # is not what this test checks
    monkeypatch.setattr(handoff, "measure_handoff",
                        partial(handoff.measure_handoff, repeats=5, trials=1, segments=4))
    cl = local_cluster(2)
    m = calibrate_model(mlp, cl, steps=3, warmup=1, traces=2)
    assert m.changes == MODEL_CHANGES and m.multi_device_ms >= 0 and m.details["rescale"] > 0
    plans = {"heft": with_run_order(_heft_plan(mlp, m.cluster), m.cluster)}
    res = rt.measure_plans(mlp, {**plans, **m.probe_plans()}, steps=3, warmup=1, rounds=2,
                           cluster=m.cluster)
    r = m.reanchor(res)
    ref = m.probe_plans()["(reference)"]   # anchored to the median of its three sessions
    sessions = sorted(res[k].median_ms for k in ("(reference)", "(reference 2)", "(reference 3)"))
    assert r.makespan(ref) == pytest.approx(sessions[1], rel=1e-6)
    # the hand-off costs are measured, not re-anchored: the random probe is not timed
    assert "(probe)" not in m.probe_plans() and m.details["send_ms"] >= 0
    assert r.send_overhead == m.send_overhead
    assert ([d.recv_overhead for d in r.cluster.devices]
            == [d.recv_overhead for d in m.cluster.devices])
    assert math.isfinite(r.makespan(plans["heft"]))


def _heft_plan(g, cluster):
    import workbench as wb

    return wb.solve(g, cluster, method="heft", seed=0)


def _unit_pesto():
    """Pesto's Figure 2 graph with every op 1 ms on a CPU."""
    return samples.pesto_fig2().map_ops(lambda v, d: {**d, "compute": {"cpu": 1.0}})


def test_live_bytes_follow_the_order_the_ops_run_in():
    from workbench.cluster import local_cluster
    from workbench.fidelity.changes import reference_live_bytes
    from workbench.fidelity.extras import live_bytes
    from workbench.fidelity.probes import order_probe

    g = samples.diamond()   # a -> b, a -> c, b -> d, c -> d; 10 MB tensors
    # one device, a b c d: b's output waits for d while c runs
    assert live_bytes(g, [0, 1, 2, 3], [1, 2, 3, 4]).tolist() == [0, 1e7, 2e7, 2e7]
    # b and c at once on two devices (one shared memory): a's tensor dies when both end
    assert live_bytes(g, [0, 1, 1, 2], [1, 2, 2, 3]).tolist() == [0, 1e7, 1e7, 2e7]
    g = samples.load_sample("resnet_small")
    topo = {v: k for k, v in enumerate(g.topological_order())}
    at = [topo[v] for v in g.ops]
    assert live_bytes(g, at, [k + 1 for k in at]).tolist() == reference_live_bytes(g).tolist()
    # list-scheduling order defers the weight gradients: more memory live at its peak
    seq = {v: k for k, v in enumerate(order_probe(g, local_cluster(2)).order["cpu0"])}
    at = [seq[v] for v in g.ops]
    assert live_bytes(g, at, [k + 1 for k in at]).max() > 1.5 * reference_live_bytes(g).max()


def test_live_memory_is_fitted_to_the_order_probe_and_reanchored():
    from workbench.fidelity.probes import (
        PROBES,
        REFERENCES,
        SPLIT_PROBES,
        STEP_PROBES,
        order_probe,
        reference_plan,
    )

    g, cl, m = _resnet_small_anchoring()
    probes = m.probe_plans()
    assert set(probes) == {*REFERENCES, "(order probe)", *STEP_PROBES,
                           *SPLIT_PROBES} <= set(PROBES)
    ref, order = probes["(reference)"], probes["(order probe)"]
    assert order.placement == ref.placement and order.order != ref.order
    assert order == order_probe(g, cl) and ref == reference_plan(g, cl)
    # a machine 1.2x slower, with ops 3 % slower per MB live beyond the reference's and a
    # 0.3 ms multi-device step cost: re-anchoring recovers all three (the slope of plans on
    # several devices, fitted to the split pair, too)
    slow = cl.with_devices([replace(d, speed=d.speed / 1.2) for d in cl.devices])
    truth = replace(m, cluster=slow, memory_slope=0.03, multi_device_ms=0.3)
    times = {k: truth.makespan(p) for k, p in probes.items()}
    assert times["(order probe)"] > times["(reference)"] * 1.05
    r = m.reanchor(times)
    assert r.details["rescale"] == pytest.approx(1.2)
    assert r.memory_slope == pytest.approx(0.03, rel=1e-3)
    assert r.memory_slope_multi == pytest.approx(0.03, rel=1e-2)
    assert r.multi_device_ms == pytest.approx(0.3, abs=1e-3)
    assert r.changes == ("rescale", "live_memory", "step_cost")
    heft = _heft_plan(g, cl)
    assert r.makespan(heft) == pytest.approx(truth.makespan(heft), rel=1e-3)
    # the ablation drops it; a gap within the two runs' spreads fits nothing
    assert m.reanchor(times, changes=("rescale",)).memory_slope == 0.0
    t, gap = times["(order probe)"], times["(order probe)"] - times["(reference)"]
    wide = [t - 5 * gap, t, t + 5 * gap, t]     # half its interquartile range: 1.25 x the gap
    r2 = m.reanchor({**times, "(order probe)": Measurement("order", samples=wide)})
    assert r2.memory_slope == 0.0 and "live_memory" in r2.changes


def test_plans_on_several_devices_get_the_slope_of_the_split_order_probes():
    """Round eight: the single-device order probe's slowdown need not carry to plans on two
    devices (resnet_small's list-scheduled two-device plans ran 2-4 % over their prediction
    without live memory, while its order probe ran 8-9 % over the reference). The split pair
    fits their own slope; ``live_split=False`` is round seven's single slope for every plan."""
    from workbench.cluster import local_cluster
    from workbench.fidelity.model import JudgeModel
    from workbench.fidelity.probes import (
        SPLIT_PROBES,
        idle_probe_plan,
        probe_plan,
        split_order_probes,
    )

    g = samples.load_sample("resnet_small")
    cl = local_cluster(2)
    split, probe = split_order_probes(g, cl)
    assert split.placement == probe.placement == idle_probe_plan(g, cl).placement
    assert split.order != probe.order and len(probe.devices_used()) == 2
    for d, ops in probe.order.items():   # each device's ops, in another order
        assert sorted(ops) == sorted(split.order[d])
    m = JudgeModel(cl, congestion=False, changes=("rescale", "live_memory"),
                   probe=probe_plan(g, cl, seed=3))
    probes = m.probe_plans()
    assert probes[SPLIT_PROBES[0]] == split and probes[SPLIT_PROBES[1]] == probe
    heft = _heft_plan(g, cl)
    # ops 3 % slower per MB on one device, 1 % on two: both slopes recovered
    truth = replace(m, memory_slope=0.03, memory_slope_multi=0.01)
    times = {k: truth.makespan(p) for k, p in probes.items()}
    r = m.reanchor(times)
    assert r.memory_slope == pytest.approx(0.03, rel=1e-3)
    assert r.memory_slope_multi == pytest.approx(0.01, rel=1e-2)
    assert r.makespan(heft) == pytest.approx(truth.makespan(heft), rel=1e-3)
    assert r.details["memory_slope_multi_per_mb"] == r.memory_slope_multi
    # no slowdown on two devices: the split pair measured as the model predicts without one
    flat = replace(m, memory_slope=0.03, memory_slope_multi=0.0)
    r0 = m.reanchor({k: flat.makespan(p) for k, p in probes.items()})
    assert r0.memory_slope == pytest.approx(0.03, rel=1e-3) and r0.memory_slope_multi == 0.0
    assert r0.makespan(heft) == pytest.approx(replace(m, memory_slope=0.0).makespan(heft),
                                              rel=1e-9)
    # round seven: one slope, fitted on one device, for every plan
    one = replace(m, live_split=False)
    assert not set(SPLIT_PROBES) & set(one.probe_plans())
    r1 = one.reanchor(times)
    assert r1.memory_slope_multi is None
    assert r1.memory_slope_for(heft) == r1.memory_slope == pytest.approx(0.03, rel=1e-3)


def _fan_graph():
    """a -> (b1, b2); b1 -> c1, b2 -> c2 (100 MB each); (c1, c2) -> d: the topological order
    a b1 b2 c1 c2 d keeps both 100 MB tensors live, the order a b1 c1 b2 c2 d one at a time."""
    from workbench.graph import OpGraph

    ops = [(v, {"compute": {"cpu": 1.0}}) for v in ("a", "b1", "b2", "c1", "c2", "d")]
    small, big = {"bytes": 1e6}, {"bytes": 1e8}
    edges = [("a", "b1", small), ("a", "b2", small), ("b1", "c1", big), ("b2", "c2", big),
             ("c1", "d", small), ("c2", "d", small)]
    return OpGraph.from_ops(ops, edges, name="fan")


def test_live_memory_beyond_the_cache_counts_and_a_probe_with_less_live_fits_too():
    """GNMT keeps hundreds of MB live in any order; its order probe, with less live, ran
    faster than the reference in runs of its own: the fit takes the slope from a gap of either
    sign, as long as it goes the way the live memory does; uncapped (the bench's 'uncapped'
    rung) tensors beyond the cache count, capped (the default) they are hidden."""
    from workbench.cluster import local_cluster
    from workbench.fidelity.extras import live_bytes
    from workbench.fidelity.model import JudgeModel
    from workbench.fidelity.probes import reference_plan

    g, cl = _fan_graph(), local_cluster(2)
    ref = reference_plan(g, cl)
    assert ref.order["cpu0"] == ["a", "b1", "b2", "c1", "c2", "d"]
    less = replace(ref, order={"cpu0": ["a", "b1", "c1", "b2", "c2", "d"]}, method="less")
    m = JudgeModel(cl, congestion=False, memory_cap=math.inf)   # the bench's 'uncapped' rung
    live = {}
    for p in (ref, less):
        s = m.simulate(p)
        live[p.method] = live_bytes(g, s.start, s.end)
    assert live["less"].sum() < live[ref.method].sum() - 1e8   # 100 MB less at c1, beyond a cache
    truth = replace(m, memory_slope=0.002)
    gap = truth.makespan(less) - truth.makespan(ref)
    assert gap < -1e-3                           # less live memory: faster
    fit = m.fit_live_memory(ref, 10.0, less, 10.0 + gap)
    assert fit.memory_slope == pytest.approx(0.002, rel=1e-3)
    assert math.isinf(fit.memory_cap)
    # a gap the other way than the live memory goes is no signal
    assert m.fit_live_memory(ref, 10.0, less, 10.0 - gap).memory_slope == 0.0
    # capped at 32 MB (rounds five and six) the 100 MB tensors are hidden: only the 1 MB ones
    # differ, and the slope that reproduces the gap is many times the true one
    capped = replace(m, memory_cap=32e6).fit_live_memory(ref, 10.0, less, 10.0 + gap)
    assert capped.memory_slope > 5 * 0.002


@pytest.mark.slow
def test_gnmt_order_probe_fits_the_way_its_live_memory_goes():
    """GNMT's order probe keeps 230 MB less live on time average than its reference, but
    hundreds of MB more on some ops: measured 8 ms slower (a bench run) it is no signal, where
    a slope read at the bound had predicted its plans at 2.7x; measured 4.5 % faster (three runs
    of its own) it fits, uncapped, a slope under which the FIFO order (the ``single`` plan, 120
    MB more live) is predicted slower, as it ran there (4.5-8 ms of 196-200 ms); capped at the
    cache (the default) nothing is fitted."""
    from workbench.cluster import local_cluster
    from workbench.fidelity.model import JudgeModel
    from workbench.fidelity.probes import order_probe, reference_plan
    from workbench.runtime.runner import with_run_order

    g, cl = samples.load_sample("gnmt"), local_cluster(2)
    m = JudgeModel(cl, congestion=False, memory_cap=math.inf)   # the bench's 'uncapped' rung
    ref, probe = reference_plan(g, cl), order_probe(g, cl)
    r0 = m.makespan(ref)
    # capped at a 32 MiB cache (the default: the machine's last-level cache) every op of
    # GNMT's orders has more live than the cap: nothing to fit, whichever way the gap goes
    capped = replace(m, memory_cap=32 * 2**20)
    assert capped.fit_live_memory(ref, r0, probe, 0.955 * r0).memory_slope == 0.0
    assert m.fit_live_memory(ref, r0, probe, 1.03 * r0).memory_slope == 0.0
    fit = m.fit_live_memory(ref, r0, probe, 0.955 * r0)
    assert 0 < fit.memory_slope < 1e-3
    assert fit.makespan(probe) == pytest.approx(0.955 * r0, rel=1e-3)
    single = with_run_order(Plan(g, dict.fromkeys(g.ops, "cpu0"), method="single"), cl)
    # unfitted, the FIFO order is predicted at the reference's time (same ops, same costs);
    # fitted, 1-5 % slower, as it ran there
    assert m.makespan(single) == pytest.approx(r0, rel=1e-9)
    assert 1.01 * m.makespan(single) < fit.makespan(single) < 1.05 * m.makespan(single)
