"""Parallel training plans (issue 43): strategies, schedules, collectives, the training judge."""

import itertools

import pytest

from workbench.cluster import Cluster, Link
from workbench.costs.llm import chain, parse_spec, state_bytes_per_param
from workbench.errors import PlanError
from workbench.judge.collectives import collective_ms, flat_ms
from workbench.judge.training import chunk_program, simulate_training
from workbench.transforms.parallel import (Strategy, cuts_from_placement, parallelize,
                                           schedule_orders)

CFG = parse_spec("gpt:layers=8,hidden=512,heads=8,seq=256")
NODE = Cluster.preset("8xA100-80g")
NODES = Cluster.preset("64xA100-80g")


def _plan(cluster=NODE, cfg=CFG, **kw):
    kw.setdefault("mbs", 1)
    kw.setdefault("global_batch", 8 * kw.get("dp", 1))
    return parallelize(cfg, cluster, Strategy(**kw))


@pytest.mark.parametrize("schedule, pp, m, v", [("gpipe", 4, 6, 1), ("1f1b", 4, 6, 1),
                                                ("1f1b", 4, 2, 1), ("interleaved", 2, 4, 2),
                                                ("interleaved", 4, 8, 3)])
def test_schedules_run_every_task_once_in_dependency_order(schedule, pp, m, v):
    orders = schedule_orders(schedule, pp, m, v)
    for s, order in enumerate(orders):
        chunks = [c for c in range(pp * v) if c % pp == s]
        assert sorted(order) == sorted((k, c, mb) for k in "FB" for c in chunks
                                       for mb in range(m))
        pos = {t: i for i, t in enumerate(order)}
        for c in chunks:
            for mb in range(m):
                assert pos[("F", c, mb)] < pos[("B", c, mb)]
        inflight = peak = 0
        for k, c, mb in order:
            inflight += 1 if k == "F" else -1
            peak = max(peak, inflight)
        if schedule == "gpipe":
            assert peak == m * v
        elif schedule == "1f1b":
            assert peak == min(pp - s, m)            # PipeDream-Flush: at most pp - s stashed
        else:                                        # Megatron's warm-up + 1
            assert peak == min(m * v, 2 * (pp - s - 1) + (v - 1) * pp + 1)


def test_reduced_simulation_equals_every_rank():
    """Identical ranks simulated once give the same times, memory and schedule."""
    cases = list(itertools.product((1, 2, 8), (1, 2, 4), (1, 2),
                                   (("gpipe", 1), ("1f1b", 1), ("interleaved", 2)),
                                   ("none", "full"), (0, 1, 3)))
    for k, (tp, pp, dp, (sched, v), rec, zero) in enumerate(cases):
        if (sched == "interleaved" and pp == 1) or k % 5:          # a fifth of the grid
            continue
        p = _plan(NODES, tp=tp, pp=pp, dp=dp, schedule=sched, virtual=v, recompute=rec,
                  zero=zero, sp=tp > 1 and k % 2 == 0, bucket_mb=1.0)
        a, b = simulate_training(p), simulate_training(p, ranks="all")
        assert b.n_ranks_simulated == tp * pp * dp and a.n_ranks_simulated == pp
        assert a.step_ms == b.step_ms, p.strategy.describe()
        for r in a.tasks:
            assert a.tasks[r] == b.tasks[r] and a.peak[r] == b.peak[r]
            assert a.parts[r] == b.parts[r]
        assert a.events < b.events or tp * dp == 1


def test_breakdown_adds_up_and_bubble_matches_closed_form():
    # one stage per GPU, no TP/DP: GPipe's step is (m + p - 1) (F + B) up to sends and the
    # uneven end stages (Huang et al. 2019: bubble (p - 1) / (m + p - 1))
    p = _plan(pp=4, schedule="gpipe", global_batch=16)
    r = simulate_training(p)
    for rank in r.parts:
        b = r.breakdown(rank)
        assert sum(v for k, v in b.items() if k != "step") == pytest.approx(b["step"])
    progs = [chunk_program(p, c) for c in range(4)]
    fb = [sum(x[1] for x in pr["fwd"] + pr["bwd"] if x[0] in "cr") for pr in progs]
    m = 16
    ideal = (m + 3) * max(fb)
    assert ideal * 0.97 < r.step_ms < ideal * 1.1
    b = r.breakdown(0)
    assert b["bubble"] > 0 and b["tp"] == 0 and b["dp"] == 0
    one = simulate_training(_plan(pp=4, schedule="1f1b", global_batch=16))
    assert one.step_ms == pytest.approx(r.step_ms, rel=0.02)   # same bubble, less memory
    assert max(one.peak.values()) < max(r.peak.values())
    # interleaving v = 2 halves the bubble (Narayanan et al. 2021, 2.2.2) of balanced stages
    small_vocab = parse_spec("gpt:layers=8,hidden=512,heads=8,seq=256,vocab=256")
    one = simulate_training(_plan(cfg=small_vocab, pp=4, schedule="1f1b", global_batch=16))
    inter = simulate_training(_plan(cfg=small_vocab, pp=4, schedule="interleaved", virtual=2,
                                    global_batch=16))
    assert inter.breakdown()["bubble"] < 0.75 * one.breakdown()["bubble"]
    assert inter.step_ms < one.step_ms


def test_memory_stash_zero_and_recompute():
    pb, gb, ob = state_bytes_per_param("bf16")
    base = dict(pp=4, global_batch=16)
    r = simulate_training(_plan(**base, schedule="1f1b"))
    prog = chunk_program(r.plan, 0)
    static = prog["params"] * (pb + gb + ob)
    assert r.memory[0][0] == (0.0, static)
    assert r.peak[0] == pytest.approx(static + 4 * prog["stash"] + 0)   # pp in flight
    g = simulate_training(_plan(**base, schedule="gpipe"))
    assert g.peak[0] == pytest.approx(static + 16 * prog["stash"])
    full = chunk_program(_plan(**base, recompute="full"), 0)
    sel = chunk_program(_plan(**base, recompute="selective"), 0)
    assert full["stash"] < sel["stash"] < prog["stash"]
    assert full["transient"] > 0
    # Korthikanti 2022: selective recomputation keeps 34 s b h per layer (of 34 + 5 a s / h)
    c = CFG
    per_layer = c.seq * c.mbs * c.hidden
    assert prog["stash"] - sel["stash"] == pytest.approx(2 * per_layer * 5 * c.heads * c.seq
                                                         / c.hidden)     # two layers
    for zero, want in ((1, pb + gb + ob / 4), (2, pb + (gb + ob) / 4), (3, (pb + gb + ob) / 4)):
        z = simulate_training(_plan(dp=4, zero=zero))
        assert z.memory[0][0][1] == pytest.approx(chunk_program(z.plan, 0)["params"] * want)


def test_out_of_memory_names_device_and_moment():
    big = parse_spec("gpt:1.3b,seq=2048")
    p = parallelize(big, Cluster.preset("8xA100-40g"),
                    Strategy(pp=2, mbs=4, global_batch=64, schedule="gpipe"))
    r = simulate_training(p)
    assert not r.feasible
    assert r.oom["device"] in ("gpu0", "gpu1") and r.oom["bytes"] > r.oom["capacity"]
    assert 0 < r.oom["time_ms"] < r.step_ms
    ok = simulate_training(parallelize(big, Cluster.preset("8xA100-40g"),
                                       Strategy(pp=2, mbs=4, global_batch=64,
                                                recompute="full")))
    assert ok.feasible


def test_tensor_and_sequence_parallel_collectives():
    one = simulate_training(_plan(tp=1))
    two = simulate_training(_plan(tp=2))
    sp = simulate_training(_plan(tp=2, sp=True))
    assert one.breakdown()["tp"] == 0 and two.breakdown()["tp"] > 0
    # reduce-scatter + all-gather move the bytes of one all-reduce (Korthikanti 2022, 4.2.2)
    assert sp.breakdown()["tp"] == pytest.approx(two.breakdown()["tp"], rel=0.05)
    assert two.breakdown()["compute"] < one.breakdown()["compute"]
    assert sp.peak[0] < two.peak[0]
    n_ar = sum(1 for x in chunk_program(two.plan, 0)["fwd"] if x[0] == "x")
    assert n_ar == 2 * CFG.layers + 2           # two per block, embedding, loss


def test_data_parallel_buckets_overlap_backward():
    on = simulate_training(_plan(NODES, tp=8, dp=4, bucket_mb=2.0))
    off = simulate_training(_plan(NODES, tp=8, dp=4, bucket_mb=2.0, overlap_grad=False))
    assert on.breakdown()["dp"] < off.breakdown()["dp"]
    assert on.step_ms < off.step_ms
    dp_events = [e for e in on.links if e[4] == "dp"]
    last_b = max(t[1] for t in on.tasks[0] if t[2] == "B")
    assert any(e[2] < last_b for e in dp_events)            # started during the backward
    assert {e[1] for e in dp_events} == {"nic"}             # replicas on other nodes


def test_links_are_fifo_resources():
    r = simulate_training(_plan(NODES, tp=4, pp=4, dp=4, global_batch=64, bucket_mb=1.0))
    by_chan: dict = {}
    for rank, ch, start, end, what, asked in r.links:
        by_chan.setdefault((rank, ch), []).append((start, end))
        assert start >= asked
    assert by_chan
    for spans in by_chan.values():
        spans.sort()
        for (s0, e0), (s1, e1) in zip(spans, spans[1:]):
            assert s1 >= e0 - 1e-9


def test_sends_and_buckets_contend_for_a_nic():
    """A pipeline send asked while a gradient bucket holds the NIC waits for it."""
    r = simulate_training(_plan(NODES, tp=8, pp=4, dp=2, global_batch=16, bucket_mb=4.0))
    ends = {(e[0], e[1], e[3]) for e in r.links if e[4] == "dp"}
    waited = [e for e in r.links if e[4] == "pp" and e[2] > e[5] + 1e-12]
    assert waited and any((e[0], e[1], e[2]) in ends for e in waited)
    alone = simulate_training(_plan(NODES, tp=8, pp=4, dp=1, global_batch=8))
    assert not [e for e in alone.links if e[4] == "pp" and e[2] > e[5] + 1e-12]


def test_collective_formulas():
    nv, ib = Link(0.002, 300e6), Link(0.005, 25e6)
    S = 1e9
    assert flat_ms("allreduce", S, 8, 0.0, 1e6) == pytest.approx(2 * 7 / 8 * S / 1e6)
    assert flat_ms("reducescatter", S, 8, 0.0, 1e6) == pytest.approx(7 / 8 * S / 1e6)
    assert flat_ms("allreduce", S, 8, 1.0, 1e12, "tree") == pytest.approx(6.0, rel=1e-3)
    hier = collective_ms("allreduce", S, 16, 2, nv, ib)
    assert hier == pytest.approx(flat_ms("reducescatter", S, 8, .002, 300e6)
                                 + flat_ms("allreduce", S / 8, 2, .005, 25e6)
                                 + flat_ms("allgather", S, 8, .002, 300e6))
    assert hier < collective_ms("allreduce", S, 2, 2, nv, ib)


def test_op_level_cut_from_the_pipeline_dp():
    """The pipeline DP of Tarnawski et al. places the training graph's ops; its split of the
    chain becomes the stages of a training plan."""
    import workbench as wb
    from workbench.costs.llm_graph import training_graph

    cfg = parse_spec("gpt:layers=2,hidden=512,heads=8,seq=256")
    host = Cluster(NODE.devices[:3], intra_host=NODE.intra_host, host_link=NODE.host_link,
                   mode="host", name="3xA100-host")
    plan = wb.solve(training_graph(cfg), host, method="dp")
    cuts = cuts_from_placement(cfg, plan.placement)
    tp = parallelize(cfg, NODE, Strategy(pp=len(cuts), global_batch=8), cuts=cuts)
    assert tp.cuts == cuts and tp.cuts[1] % 13 != 1        # an op-level cut, not a layer's
    r = simulate_training(tp)
    assert r.feasible and len(r.tasks) == len(cuts)
    n = len(chain(cfg))
    assert sum(len(tp.chunk_ops(c)) for c in range(tp.n_chunks)) == n


@pytest.mark.parametrize("kw, msg", [
    (dict(tp=16), "GPUs"), (dict(tp=3), "does not divide"), (dict(schedule="zigzag"), "schedule"),
    (dict(pp=2, schedule="interleaved", virtual=2, global_batch=5), "multiple of pp"),
    (dict(dp=2, global_batch=7), "not a multiple"), (dict(zero=4), "zero"),
    (dict(virtual=2), "interleaved"), (dict(recompute="half"), "recompute"),
    (dict(pp=16), "GPUs"), (dict(tp=2, sp=True, mbs=1), None)])
def test_bad_strategies(kw, msg):
    if msg is None:
        _plan(**kw)
        return
    with pytest.raises(PlanError, match=msg):
        _plan(**kw)


def test_layers_per_stage_and_no_gpu_named():
    p = parallelize(CFG, NODE, Strategy(pp=2, global_batch=4), layers_per_stage=[6, 2])
    assert [p.chunk_layers(c) for c in range(2)] == [(0, 6), (6, 8)]
    with pytest.raises(PlanError, match="adding up"):
        parallelize(CFG, NODE, Strategy(pp=2), layers_per_stage=[6, 3])
    with pytest.raises(PlanError, match="pass gpu="):
        parallelize(CFG, Cluster.preset("4xV100-nvlink"), Strategy())
    assert parallelize(CFG, Cluster.preset("4xV100-nvlink"), Strategy(), gpu="A100-40G")


def test_cli_train(capsys):
    import json

    from workbench.cli import main

    assert main(["train", "gpt:layers=4,hidden=256,heads=4,seq=128", "--cluster", "8xA100-80g",
                 "--tp", "2", "--pp", "2", "--dp", "2", "--global-batch", "8",
                 "--recompute", "selective", "--zero", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tp"] == 2 and out["recompute"] == "selective" and out["zero"] == 1
    assert out["feasible"] and out["step_ms"] > 0 and out["tp_ms"] > 0
    assert main(["train", "gpt:layers=4,hidden=256,heads=4", "--tp", "3"]) == 2
    assert "error: tp=3 does not divide the 4 attention heads" in capsys.readouterr().err
    assert main(["train", "gpt:layers=4,hidden=256,heads=4", "--cluster", "nope"]) == 2


def test_cli_train_on_a_cluster_file(tmp_path, capsys):
    import json

    from workbench.cli import main
    from workbench.io.json_format import save_cluster

    path = tmp_path / "nodes.json"
    save_cluster(Cluster(NODES.devices, intra_host=NODES.intra_host,
                         inter_host=NODES.inter_host, name="my-nodes"), path)
    args = ["train", "gpt:layers=4,hidden=256,heads=8", "--cluster", str(path), "--tp", "8",
            "--dp", "2", "--gpus", "16", "--json"]
    assert main(args) == 2 and "pass gpu=" in capsys.readouterr().err
    assert main(args + ["--gpu", "H100-80G"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["gpu"] == "H100-80G" and out["cluster"] == "my-nodes"


def test_training_views_draw_the_result():
    from widgets.figures import training_breakdown_figure, training_gantt, training_memory_figure

    r = simulate_training(_plan(tp=2, pp=4, global_batch=8, recompute="full"))
    g = training_gantt(r)
    fwd, bwd, rec = g.data[:3]
    links = {t.name: t for t in g.data[3:]}
    assert set(links) == {"tp", "pp"}                 # dp = 1: no gradient buckets
    assert len(links["pp"].x) == sum(1 for e in r.links if e[4] == "pp")
    assert len(fwd.x) == len(bwd.x) == len(rec.x) == 4 * 8
    assert sum(rec.x) == pytest.approx(sum(r.parts[k]["recompute"] for k in r.parts))
    assert max(b + w for b, w in zip(bwd.base, bwd.x)) <= r.step_ms
    mem = training_memory_figure(r)
    assert max(max(t.y) for t in mem.data) == pytest.approx(max(r.peak.values()) / 2**30)
    oom = simulate_training(parallelize(parse_spec("gpt:1.3b"), Cluster.preset("8xA100-40g"),
                                        Strategy(pp=2, mbs=4, global_batch=64,
                                                 schedule="gpipe")))
    fig = training_memory_figure(oom)
    assert "out of memory on" in fig.layout.annotations[-1].text
    br = training_breakdown_figure([r, oom], labels=["a", "b"])
    assert sum(t.x[0] for t in br.data) == pytest.approx(r.step_ms / 1e3)


def test_uneven_cluster_falls_back_to_every_rank():
    from workbench.cluster import Device
    from workbench.judge.training import identical_ranks

    odd = Cluster([Device(f"g{i}", memory=80 * 2**30, host=f"n{i // 3}") for i in range(4)],
                  intra_host=NODE.intra_host, inter_host=Link(0.005, 25e6))
    p = parallelize(CFG, odd, Strategy(dp=4, global_batch=8), gpu="A100-80G")
    assert not identical_ranks(p)
    r = simulate_training(p)
    assert r.ranks == "all" and r.n_ranks_simulated == 4
    assert identical_ranks(_plan(NODES, tp=8, pp=2, dp=4))


def test_llama_gqa_plan():
    cfg = parse_spec("llama:layers=4,hidden=512,heads=8,kv_heads=2,seq=256,vocab=1000")
    p = parallelize(cfg, NODE, Strategy(tp=2, pp=2, dp=2, global_batch=8, sp=True,
                                        recompute="selective"))
    r = simulate_training(p)
    assert r.feasible and r.breakdown()["tp"] > 0
    full = sum(o.params for o in chain(cfg))
    shards = sum(chunk_program(p, c)["params"] for c in range(p.n_chunks))
    assert full / 2 < shards < full          # norms replicated, everything else halved
    with pytest.raises(PlanError, match="does not divide"):
        parallelize(cfg, NODES, Strategy(tp=16))


def test_training_diff_names_what_changed():
    from workbench.diff import training_diff

    a = simulate_training(_plan(NODES, tp=8, dp=4, global_batch=16))
    b = simulate_training(_plan(NODES, tp=2, pp=4, dp=4, global_batch=16, zero=1))
    d = training_diff(a, b)
    assert {"tp", "pp", "zero", "step_ms", "bubble_ms", "peak_gib"} <= set(d.index)
    assert "dp" not in d.index                      # unchanged fields are left out
    assert d.loc["step_ms", "delta"] == pytest.approx(b.step_ms - a.step_ms)
    assert d.loc["bubble_ms", "a"] == 0 and d.loc["bubble_ms", "b"] > 0


def test_to_plan_is_judged_by_the_general_judge():
    import workbench as wb

    p = _plan(pp=4, global_batch=4)
    plan = p.to_plan()
    assert plan.info["describe"] == p.strategy.describe()
    plan.validate(NODE)
    s = wb.simulate(plan, NODE)
    assert s.makespan > 0 and len(plan.devices_used()) == 4
    one = wb.simulate(parallelize(CFG, NODE, Strategy(global_batch=4)).to_plan(), NODE)
    # one micro-batch runs its forward and backward stage after stage; only the stages'
    # optimizer updates run at once
    assert 0.5 * one.makespan < s.makespan < one.makespan


def test_training_judge_agrees_with_the_general_judge_on_one_gpu():
    """One GPU, one micro-batch: the training judge's step is the op-level judge's makespan of
    the same graph (same roofline per op; the optimizer runs as one step instead of one op per
    layer: launches apart)."""
    import workbench as wb

    p = _plan(global_batch=1)
    r = simulate_training(p)
    plan = p.to_plan()
    s = wb.simulate(plan, NODE)
    updates = sum(plan.graph.op(v)["kind"] == "update" for v in plan.graph.ops)
    assert r.step_ms == pytest.approx(s.makespan - (updates - 1) * p.gpu.launch_ms, rel=1e-9)
    assert r.breakdown()["bubble"] == r.breakdown()["tp"] == 0


def test_h100_nodes_are_faster():
    cfg = parse_spec("gpt:layers=4,hidden=2048,heads=16,seq=1024")
    a = simulate_training(_plan(Cluster.preset("8xA100-80g"), cfg, tp=2, pp=2, dp=2))
    h = simulate_training(_plan(Cluster.preset("8xH100"), cfg, tp=2, pp=2, dp=2))
    assert h.step_ms < 0.6 * a.step_ms and h.plan.gpu.name == "H100-80G"
