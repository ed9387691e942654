import json

import pytest

import workbench as wb
from workbench import FormatError, PlanError, samples
from workbench.io import (dump_graph, load_cluster, load_graph, load_plan, load_problem,
                          read_expert, read_msr, save_cluster, save_graph, save_plan,
                          write_msr_plan)


def test_graph_roundtrip_keeps_everything(tmp_path):
    g = samples.to_training(samples.transformer(40, seed=3))
    for name in ("g.json", "g.json.gz"):
        save_graph(g, tmp_path / name)
        h = load_graph(tmp_path / name)
        assert h.fingerprint == g.fingerprint and h.name == g.name
        assert (h.c.compute == g.c.compute).all() and (h.c.bytes == g.c.bytes).all()
        assert h.op("layer0/q")["splits"] == g.op("layer0/q")["splits"]
        assert h.colocation_groups == g.colocation_groups


def test_cluster_and_plan_roundtrip(tmp_path):
    c = wb.Cluster.preset("2x4xV100")
    save_cluster(c, tmp_path / "c.json")
    assert load_cluster(tmp_path / "c.json").to_dict() == c.to_dict()
    g = samples.cnn(50)
    p = wb.solve(g, c, method="m_topo")
    save_plan(p, tmp_path / "p.json")
    q = load_plan(tmp_path / "p.json", g)
    assert q.placement == p.placement and q.method == "m_topo"
    with pytest.raises(PlanError, match="the plan is for graph 'cnn50'"):
        load_plan(tmp_path / "p.json", samples.cnn(60))
    save_plan(p, tmp_path / "pe.json", embed_graph=True)
    assert load_plan(tmp_path / "pe.json").graph.fingerprint == g.fingerprint


def test_bad_files_are_named(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(FormatError, match="bad.json is not valid JSON"):
        load_graph(tmp_path / "bad.json")
    d = dump_graph(samples.diamond())
    d["version"] = 99
    (tmp_path / "v.json").write_text(json.dumps(d))
    with pytest.raises(FormatError, match="schema version 99 is not supported"):
        load_graph(tmp_path / "v.json")
    d["version"] = 1
    del d["nodes"][0]["name"]
    (tmp_path / "m.json").write_text(json.dumps(d))
    with pytest.raises(FormatError, match=r"nodes\[0\]: must contain \['name'\]"):
        load_graph(tmp_path / "m.json")
    with pytest.raises(FormatError, match="cannot read"):
        load_graph(tmp_path / "absent.json")


def test_atomic_write_keeps_old_file_on_failure(tmp_path, monkeypatch):
    g = samples.diamond()
    save_graph(g, tmp_path / "g.json")
    before = (tmp_path / "g.json").read_text()

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr("os.replace", boom)
    with pytest.raises(RuntimeError):
        save_graph(samples.cnn(30), tmp_path / "g.json")
    assert (tmp_path / "g.json").read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["g.json"]


def test_every_msr_workload_loads(msr_dir):
    files = sorted(msr_dir.glob("throughput/*.json")) + sorted(msr_dir.glob("latency/*.json"))
    assert len(files) == 7
    for f in files:
        g, c = read_msr(f)
        assert g.n_ops > 0 and c.mode == "host"
        c.check_graph(g)
        g2, c2 = load_problem(f)
        assert g2.fingerprint == g.fingerprint


def test_msr_expert_split_and_writer(msr_dir, tmp_path):
    g, c = read_msr(msr_dir / "throughput" / "layer_gnmt_training.json")
    p = read_expert(msr_dir / "experts" / "gnmt_training_expert.json", g, c)
    assert set(p.placement) == set(g.ops)
    assert wb.max_load(p, c) == pytest.approx(137.15, rel=1e-3)  # the paper's expert column
    write_msr_plan(p, c, tmp_path / "split.json", wb.device_loads(p, c))
    with pytest.raises(wb.PlanError, match="loads for the"):
        write_msr_plan(p, c, tmp_path / "bad.json", [1.0])
    out = json.loads((tmp_path / "split.json").read_text())
    assert out["maxLoad"] == pytest.approx(wb.max_load(p, c))
    assert sum(len(x["nodes"]) for x in out["fpgas"] + out["cpus"]) == g.n_ops
