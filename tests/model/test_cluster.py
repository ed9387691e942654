import math

import pytest

from workbench import Cluster, ClusterError, Device, InfeasibleError, Link, samples
from workbench.cluster import PRESETS


@pytest.mark.parametrize("name", list(PRESETS))
def test_presets_build(name):
    c = Cluster.preset(name)
    assert len(c) >= 1
    for d in c.devices:
        assert d.memory > 0 and d.speed > 0


def test_link_model_and_hierarchy():
    c = Cluster.preset("2x4xV100")
    intra = c.transfer_ms("gpu0", "gpu1", 45e6)
    inter = c.transfer_ms("gpu0", "gpu4", 45e6)
    assert intra == pytest.approx(0.01 + 1.0)
    assert inter > intra
    assert c.transfer_ms("gpu3", "gpu3", 1e9) == 0.0


def test_override_link_and_fixed_comm():
    c = Cluster([Device("a"), Device("b")], links={("a", "b"): Link(1.0, 1e3)})
    assert c.transfer_ms("a", "b", 1e3) == 2.0
    assert c.transfer_ms("b", "a", 1e3) == pytest.approx(0.01 + 1e3 / 1e7)
    assert c.transfer_ms("a", "b", 1e9, comm=0.5) == 0.5


def test_host_mode_stages_through_dram():
    c = Cluster([Device("g0"), Device("g1"), Device("c0", kind="cpu")], mode="host",
                host_link=Link(0.5, 1e6))
    assert c.transfer_ms("g0", "g1", 1e6) == pytest.approx(3.0)
    assert c.transfer_ms("g0", "c0", 1e6) == pytest.approx(1.5)
    assert c.transfer_ms("c0", "g1", 0, comm=2.0) == 2.0


def test_bad_clusters():
    with pytest.raises(ClusterError, match="has no devices"):
        Cluster([])
    with pytest.raises(ClusterError, match="used twice"):
        Cluster([Device("a"), Device("a")])
    with pytest.raises(ClusterError, match="memory must be >= 0"):
        Device("a", memory=-1)
    with pytest.raises(ClusterError, match="speed must be a positive"):
        Device("a", speed=0)
    with pytest.raises(ClusterError, match="unknown device 'zz'"):
        Cluster([Device("a")], links={("a", "zz"): Link()})
    with pytest.raises(ClusterError, match="unknown cluster preset 'x'; known presets: 1xV100"):
        Cluster.preset("x")
    with pytest.raises(ClusterError, match="bandwidth must be > 0"):
        Link(0, 0)


def test_dict_roundtrip():
    c = Cluster.preset("2x4xV100")
    d = Cluster.from_dict(c.to_dict())
    assert d.names == c.names and d.transfer_ms("gpu0", "gpu5", 1e6) == c.transfer_ms(
        "gpu0", "gpu5", 1e6)
    with pytest.raises(ClusterError, match=r"devices\[0\] must be a dict with a .name."):
        Cluster.from_dict({"devices": [{"kind": "gpu"}]})
    c = Cluster([Device("cpu0", "cpu", recv_overhead=0.012), Device("cpu1", "cpu")])
    d = Cluster.from_dict(c.to_dict())
    assert [x.recv_overhead for x in d.devices] == [0.012, 0.0]
    assert "recv_overhead_ms" not in c.to_dict()["devices"][1]
    assert d.c.recv_overhead.tolist() == [0.012, 0.0]
    with pytest.raises(ClusterError, match="recv_overhead"):
        Device("x", recv_overhead=-1)


def test_check_graph_names_unrunnable_op():
    g = samples.random_dag(10, seed=1, kinds=("gpu",))
    with pytest.raises(InfeasibleError, match="can run on none of the devices"):
        Cluster([Device("c", kind="cpu")]).check_graph(g)


def test_op_times_respect_speed():
    g = samples.diamond()
    c = Cluster([Device("slow", speed=0.5), Device("fast", speed=2.0)])
    t = c.op_times(g)
    assert t[1].tolist() == [4.0, 1.0]
    assert math.isinf(Cluster([Device("x", kind="tpu")]).op_times(g)[0, 0])
