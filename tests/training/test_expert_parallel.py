"""Expert parallelism (``Strategy.ep``, Megatron-Core's ``--expert-model-parallel-size``) in the
training judge: experts spread over ``ep`` consecutive data-parallel replicas, tokens
dispatched to them and combined back by all-to-alls, expert states sharded over the
``dp / ep`` expert-data-parallel replicas."""

from dataclasses import replace

import pytest

from workbench.cluster import Cluster, Device
from workbench.costs.llm import chain, parse_spec, state_bytes_per_param
from workbench.errors import PlanError
from workbench.judge.collectives import collective_ms
from workbench.judge.training import simulate_training
from workbench.transforms.parallel import Strategy, parallelize

MOE = "moe:layers=4,hidden=256,heads=4,kv_heads=2,seq=128,vocab=1000,ffn=512,experts=8,topk=2"
CL = Cluster.preset("64xA100-80g")


def _judge(strategy, spec=MOE, cluster=CL, **kw):
    return simulate_training(parallelize(spec, cluster, strategy, gpu="A100-80G"), **kw)


def _expert_params(spec, tp=1) -> float:
    return sum(o.params / (tp if o.split else 1) for o in chain(parse_spec(spec)) if o.expert)


def test_ep1_ignores_the_expert_fields_of_the_chain(monkeypatch):
    """With ep = 1 the judge does not read the expert marks and the expert-parallel
    collective sequences (``ep_fwd``/``ep_bwd``) the MoE ops carry: the same model with every
    op stripped of them is judged to the same step, peak memory and breakdown, for several
    strategies."""
    import workbench.transforms.parallel as par

    strategies = [Strategy(dp=4, global_batch=16), Strategy(tp=2, dp=2, global_batch=8, zero=1),
                  Strategy(tp=2, pp=2, dp=2, global_batch=16, recompute="full", sp=True),
                  Strategy(pp=2, dp=4, global_batch=16, zero=2, overlap_grad=False)]
    marked = [_judge(s) for s in strategies]
    assert any(o.expert for o in marked[0].plan.ops)

    def plain(config):
        return [replace(o, expert=False, ep_fwd=None, ep_bwd=None) for o in chain(config)]

    monkeypatch.setattr(par, "chain", plain)
    par._local_chain.cache_clear()
    try:
        for s, r in zip(strategies, marked):
            q = _judge(s)
            assert not any(o.expert or o.ep_fwd is not None for o in q.plan.ops)
            assert q.step_ms == r.step_ms and q.peak == r.peak
            assert q.breakdown() == r.breakdown() and "ep" not in r.breakdown()
    finally:
        par._local_chain.cache_clear()


@pytest.mark.parametrize("zero", [0, 1, 2])
def test_expert_states_divide_by_ep(zero):
    """The judge's static bytes (its first memory record) hold ``experts / ep`` experts'
    parameters, gradients and optimizer states, ZeRO-sharded over the ``dp / ep``
    expert-data-parallel replicas; the other parameters' as without expert parallelism."""
    dp, tp = 8, 2
    pb, gb, ob = state_bytes_per_param("bf16")

    def per(d):
        return pb + gb / (d if zero >= 2 else 1) + ob / (d if zero >= 1 else 1)

    static = {}
    for ep in (1, 2, 4, 8):
        r = _judge(Strategy(tp=tp, dp=dp, ep=ep, zero=zero, sp=True, global_batch=16))
        static[ep] = r.memory[0][0][1]
    expert = _expert_params(MOE, tp)
    dense = static[1] / per(dp) - expert
    assert dense > 0 and expert > 4 * dense
    for ep in (2, 4, 8):
        want = dense * per(dp) + expert / ep * per(dp // ep)
        assert static[ep] == pytest.approx(want, rel=1e-12)
    if zero == 0:      # nothing sharded: the experts' bytes divide exactly by ep
        for ep in (2, 4, 8):
            assert static[1] - static[ep] == pytest.approx(
                (pb + gb + ob) * expert * (1 - 1 / ep), rel=1e-12)


def test_all_to_all_in_the_breakdown_grows_with_tokens_and_topk():
    """An ``ep`` part appears (and ``ep`` link records); it grows with the tokens of a
    micro-batch and with ``topk``; four all-to-alls a MoE block per micro-batch (dispatch and
    combine, forward and backward), six under full recomputation."""
    s = Strategy(dp=4, ep=4, global_batch=8, overlap_grad=False)
    r = _judge(s)
    b = r.breakdown()
    assert b["ep"] > 0 and abs(sum(v for k, v in b.items() if k != "step") - b["step"]) < 1e-9
    assert any(x[4] == "ep" for x in r.links)
    longer = _judge(s, spec=MOE.replace("seq=128", "seq=256")).breakdown()["ep"]
    more_k = _judge(s, spec=MOE.replace("topk=2", "topk=4")).breakdown()["ep"]
    assert longer > b["ep"] and more_k > b["ep"]
    cfg = parse_spec(MOE)
    copies = cfg.mbs * cfg.seq * cfg.topk * cfg.hidden * cfg.act_bytes
    one = collective_ms("alltoall", copies, 4, 1, CL.intra_host, CL.inter_host)
    n_micro = r.plan.n_micro
    assert b["ep"] == pytest.approx(4 * cfg.layers * n_micro * one, rel=1e-9)
    full = _judge(replace(s, recompute="full")).breakdown()["ep"]
    assert full == pytest.approx(1.5 * b["ep"], rel=1e-9)


def test_tensor_parallel_collectives_of_the_alltoall_dispatcher():
    """With ``tp > 1`` (sequence parallel) each tensor-parallel rank dispatches ``1 / tp`` of
    the replica's token copies, and the MoE block's tensor-parallel collectives become
    Megatron-Core's: an all-gather of the dispatched copies before the experts and a
    reduce-scatter after them (reversed in the backward), no all-gather of the block's input
    before the router nor reduce-scatter after the combine."""
    cfg = parse_spec(MOE)
    base = Strategy(tp=2, dp=4, sp=True, global_batch=8, overlap_grad=False)
    r1, r4 = _judge(base), _judge(replace(base, ep=4))
    copies = cfg.mbs * cfg.seq * cfg.topk * cfg.hidden * cfg.act_bytes
    x = cfg.mbs * cfg.seq * cfg.hidden * cfg.act_bytes
    one = collective_ms("alltoall", copies / 2, 4, 1, CL.intra_host, CL.inter_host)
    m, n = r4.plan.n_micro, cfg.layers
    assert r4.breakdown()["ep"] == pytest.approx(4 * n * m * one, rel=1e-9)

    def tp(kind, b):
        return collective_ms(kind, b, 2, 1, CL.intra_host, CL.inter_host)

    moe_tp = {1: 2 * (tp("allgather", x) + tp("reducescatter", x)),        # per block, fwd+bwd
              4: 2 * (tp("allgather", copies) + tp("reducescatter", copies))}
    assert r4.breakdown()["tp"] - r1.breakdown()["tp"] == pytest.approx(
        n * m * (moe_tp[4] - moe_tp[1]), rel=1e-9)


def test_op_vectors_price_the_alltoalls():
    """The searches' per-op costs (``costs.op_vectors``) hold the judge's compute and
    blocking collectives, the all-to-alls included, on a one-stage plan."""
    from workbench.solvers.hybrid import op_vectors

    plan = parallelize(MOE, CL, Strategy(tp=2, dp=4, ep=2, sp=True, global_batch=8,
                                         overlap_grad=False, recompute="full"))
    b = simulate_training(plan).breakdown()
    v = op_vectors(plan)
    assert plan.n_micro * v.work.sum() == pytest.approx(
        b["compute"] + b["recompute"] + b["tp"] + b["ep"], rel=1e-9)
    expert = sum(o.params / 2 for o in plan.ops if o.expert)
    assert sum(v.params) == pytest.approx(
        sum(o.params / (2 if o.split else 1) for o in plan.ops) - expert / 2, rel=1e-12)


def test_ep_across_nodes_costs_more_than_inside_one():
    """The same strategy with its expert-parallel group inside one node (8 GPUs a node) and
    spread over two (2 GPUs a node): the all-to-alls take longer on the network."""
    s = Strategy(dp=4, ep=4, global_batch=8)
    inside = _judge(s, cluster=Cluster.preset("8xA100-80g")).breakdown()["ep"]
    small = Cluster([Device(f"gpu{i}", "gpu", 80e9, host=f"n{i // 2}") for i in range(8)],
                    intra_host=CL.intra_host, inter_host=CL.inter_host)
    across = _judge(s, cluster=small).breakdown()["ep"]
    assert across > 2 * inside


@pytest.mark.parametrize("strategy", [
    Strategy(tp=2, pp=2, dp=4, ep=2, global_batch=16, sp=True),
    Strategy(pp=2, dp=4, ep=4, global_batch=16, zero=1, recompute="full"),
    Strategy(tp=4, dp=4, ep=4, global_batch=8, zero=2, sp=True),
    Strategy(tp=1, pp=1, dp=6, ep=2, mbs=1, global_batch=12, zero=1),
])
def test_one_rank_a_stage_equals_every_rank(strategy):
    """The judge's shortcut (one rank a stage) gives the step and memory of simulating every
    rank, with the expert-parallel collectives' rendezvous."""
    cl = Cluster([Device(f"gpu{i}", "gpu", 80e9, host=f"n{i // 4}") for i in range(16)],
                 intra_host=CL.intra_host, inter_host=CL.inter_host)
    a = _judge(strategy, cluster=cl)
    b = _judge(strategy, cluster=cl, ranks="all")
    assert b.ranks == "all" and a.step_ms == pytest.approx(b.step_ms, rel=1e-12)
    assert max(a.peak.values()) == pytest.approx(max(b.peak.values()), rel=1e-12)
    assert a.breakdown()["ep"] > 0


@pytest.mark.parametrize("kw, spec, message", [
    ({"dp": 6, "ep": 4}, MOE, "ep=4 must divide dp=6"),
    ({"dp": 4, "ep": 0}, MOE, "ep must be an integer >= 1"),
    ({"dp": 4, "ep": 2.0}, MOE, "ep must be an integer >= 1"),
    ({"dp": 4, "ep": 4, "zero": 3}, MOE, "zero=3 is not modelled"),
    ({"tp": 2, "dp": 4, "ep": 2}, MOE, "ep=2 with tp=2 needs sequence parallelism"),
    ({"pp": 2, "stage_widths": ((1, 2), (1, 2)), "ep": 2}, MOE, "per-stage widths"),
    ({"dp": 8, "ep": 8}, MOE.replace("experts=8", "experts=4"), "does not divide the model's 4"),
    ({"dp": 4, "ep": 2}, "llama:layers=2,hidden=256,heads=4", "needs a model with experts"),
])
def test_bad_ep_refused(kw, spec, message):
    with pytest.raises(PlanError, match=message):
        parallelize(spec, CL, Strategy(**kw), gpu="A100-80G")


def test_describe_and_to_dict():
    s = Strategy(tp=2, dp=8, ep=4, sp=True)
    assert "dp8 ep4 " in s.describe() and s.to_dict()["ep"] == 4
    assert "ep" not in Strategy(dp=8).describe() and "ep" not in Strategy(dp=8).to_dict()
    assert Strategy(**s.to_dict()) == s


def test_cli_train_takes_ep(capsys):
    from workbench.cli import main

    assert main(["train", MOE, "--cluster", "8xA100-80g", "--dp", "8", "--ep", "4",
                 "--global-batch", "16", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"ep": 4' in out and '"ep_ms"' in out
    assert main(["train", "gpt:layers=2,hidden=256,heads=4", "--cluster", "8xA100-80g",
                 "--dp", "8", "--ep", "4"]) == 2
    assert "needs a model with experts" in capsys.readouterr().err


def test_alltoall_time_inside_and_across_nodes():
    """Inside a node the all-to-all is ``call + (n-1) a + (n-1)/n S/B`` on NVLink; with one
    rank a node the same on the network link; with ``k`` ranks in each of several nodes the
    bytes for other nodes cross the network while the rest take NVLink at once."""
    from workbench.cluster import Link
    from workbench.judge.collectives import flat_ms

    nv, ib = Link(0.002, 300e6, call=0.01), Link(0.005, 25e6, call=0.02)
    S = 1e9
    assert collective_ms("alltoall", S, 8, 1, nv, ib) == flat_ms("allgather", S, 8, 0.002,
                                                                 300e6, call=0.01)
    assert collective_ms("alltoall", S, 4, 4, nv, ib) == pytest.approx(
        0.02 + 3 * 0.005 + 0.75 * S / 25e6, rel=1e-12)
    assert collective_ms("alltoall", S, 8, 2, nv, ib) == pytest.approx(
        0.02 + 7 * 0.005 + max(4 / 8 * S / 25e6, 3 / 8 * S / 300e6), rel=1e-12)
    assert collective_ms("alltoall", S, 1, 1, nv, ib) == 0.0
    assert collective_ms("alltoall", S, 8, 2, nv, ib) > collective_ms("alltoall", S, 8, 1,
                                                                      nv, ib)
