"""A link's per-call latency (NCCL's base latency of a call): paid once by each collective and
each send, nowhere on links that do not set it."""

from dataclasses import replace

import pytest

from workbench.cluster import PRESETS, TRAINING_PRESETS, Cluster, Device, Link
from workbench.costs.llm import GPUS, NCCL_A100_NODE
from workbench.errors import ClusterError
from workbench.judge.collectives import collective_ms, flat_ms, p2p_ms
from workbench.judge.training import chunk_program, simulate_training
from workbench.transforms.parallel import Strategy, parallelize

NV, IB = Link(0.002, 300e6), Link(0.005, 25e6)
CALL = 0.04


@pytest.mark.parametrize("kind", ["allreduce", "reducescatter", "allgather"])
@pytest.mark.parametrize("n, nodes", [(8, 1), (4, 4), (16, 2)])
def test_a_collective_pays_the_call_once_whatever_its_steps(kind, n, nodes):
    base = collective_ms(kind, 64e6, n, nodes, NV, IB)
    intra, inter = replace(NV, call=CALL), replace(IB, call=CALL / 2)
    # flat inside a node: the node's call; flat across nodes: the network's; both levels: one
    # call, the larger of the two
    expected = CALL / 2 if nodes == n else CALL
    assert collective_ms(kind, 64e6, n, nodes, intra, inter) == pytest.approx(base + expected)
    assert collective_ms(kind, 64e6, 1, 1, intra, inter) == 0.0     # no peer, no call


def test_a_send_and_a_transfer_pay_the_call_once():
    assert p2p_ms(25e6, replace(IB, call=CALL)) == pytest.approx(p2p_ms(25e6, IB) + CALL)
    assert replace(IB, call=CALL).time(25e6) == pytest.approx(IB.time(25e6) + CALL)
    assert flat_ms("allreduce", 8e6, 2, 0.0013, 201e6, call=0.0411) == pytest.approx(
        0.0411 + 2 * 0.0013 + 8e6 / 201e6)


def test_presets_without_a_call_latency_keep_their_times():
    assert Link().call == 0.0
    clusters = [f() for f in PRESETS.values()] + [f() for f in TRAINING_PRESETS.values()]
    for c in clusters:
        assert c.intra_host.call == c.inter_host.call == c.host_link.call == 0.0
        assert "call_ms" not in c.to_dict()["intra_host"]         # files stay as they were
    assert GPUS["H100-80G"].nccl_intra is None                      # no measurement, no curve


def test_the_call_latency_survives_the_dict_form_and_is_checked():
    c = Cluster([Device("g0"), Device("g1")], intra_host=replace(NV, call=CALL))
    back = Cluster.from_dict(c.to_dict())
    assert back.intra_host.call == CALL
    assert back.transfer_ms("g0", "g1", 3e6) == pytest.approx(c.transfer_ms("g0", "g1", 3e6))
    assert back.transfer_ms("g0", "g1", 3e6) == pytest.approx(NV.time(3e6) + CALL)
    with pytest.raises(ClusterError, match="call latency must be finite and >= 0"):
        Link(0.0, 1e6, call=-1.0)


def _two_gpus(link):
    return Cluster([Device(f"gpu{i}", "gpu", 80 * 2**30) for i in range(2)], intra_host=link)


def test_n_tensor_parallel_calls_cost_n_call_latencies_more():
    """Without a host lane the GPU's chain is serial: the step grows by exactly the calls."""
    spec = "gpt:layers=2,hidden=256,heads=4,seq=128,vocab=1000"
    strategy = Strategy(tp=2, mbs=1, global_batch=3, recompute="full")
    plans = [parallelize(spec, _two_gpus(link), strategy, gpu=GPUS["A100-80G"])
             for link in (NV, replace(NV, call=CALL))]
    prog = chunk_program(plans[0], 0)
    calls = sum(x[0] == "x" for x in prog["fwd"] + prog["bwd"]) * 3      # 3 micro-batches
    assert calls > 0
    without, with_call = (simulate_training(p) for p in plans)
    assert with_call.breakdown()["tp"] - without.breakdown()["tp"] == pytest.approx(calls * CALL)
    assert with_call.step_ms - without.step_ms == pytest.approx(calls * CALL)


def test_the_a100_preset_carries_nccls_measured_node_curve():
    assert GPUS["A100-80G"].nccl_intra is GPUS["A100-40G"].nccl_intra is NCCL_A100_NODE
    # nccl-tests on vTrain's node: 87 us at 8 MiB on 2 GPUs, 130 us on 8 (trace/a100 tables)
    two = collective_ms("allreduce", 8 * 2**20, 2, 1, NCCL_A100_NODE, IB)
    eight = collective_ms("allreduce", 8 * 2**20, 8, 1, NCCL_A100_NODE, IB)
    assert two == pytest.approx(0.087, rel=0.05) and eight == pytest.approx(0.130, rel=0.15)
