import json
import subprocess
import sys


from workbench.cli import main


def run(capsys, *args):
    rc = main(list(args))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_solve_json_has_required_fields(capsys):
    rc, out, _ = run(capsys, "solve", "cnn:60", "--method", "m_topo", "--cluster", "2xV100-pcie",
                     "--json")
    assert rc == 0
    d = json.loads(out)
    for k in ("method", "status", "makespan_ms", "max_load", "solve_time_s", "placement"):
        assert k in d
    assert len(d["placement"]) == 60 and d["method"] == "m_topo"


def test_errors_are_one_line_and_exit_2(capsys, tmp_path):
    bad = tmp_path / "cyc.json"
    bad.write_text(json.dumps({
        "format": "placement-workbench.graph", "version": 1, "name": "c",
        "nodes": [{"name": "a", "compute": {"gpu": 1}}, {"name": "b", "compute": {"gpu": 1}}],
        "edges": [{"src": "a", "dst": "b"}, {"src": "b", "dst": "a"}]}))
    cases = [
        (["solve", str(bad), "-m", "single"], "has a cycle: a -> b -> a"),
        (["solve", "diamond", "-m", "nope"], "unknown method 'nope'"),
        (["solve", "diamond", "-m", "single", "--cluster", "9xTPU"], "unknown cluster preset"),
        (["info", "nosuchsample"], "unknown sample 'nosuchsample'"),
        (["solve", "diamond", "-m", "single", "-p", "bogus=1"], "has no parameter 'bogus'"),
        (["solve", "cnn:60", "-m", "single", "--memory-gib", "0.0001"], "does not fit"),
    ]
    for args, msg in cases:
        rc, out, err = run(capsys, *args)
        assert rc == 2, args
        assert msg in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_info_simulate_and_trace(capsys, tmp_path):
    rc, out, _ = run(capsys, "info", "transformer:100", "--json")
    assert rc == 0 and json.loads(out)["ops"] == 100
    plan, trace = tmp_path / "p.json", tmp_path / "t.json"
    rc, _, _ = run(capsys, "solve", "transformer:100", "-m", "round_robin", "--out", str(plan),
                   "--trace", str(trace))
    assert rc == 0 and plan.exists() and json.loads(trace.read_text())["traceEvents"]
    rc, out, _ = run(capsys, "simulate", "transformer:100", "--plan", str(plan), "--json",
                     "--no-congestion")
    assert rc == 0 and json.loads(out)["makespan_ms"] > 0
    rc, out, err = run(capsys, "simulate", "cnn:50", "--plan", str(plan))
    assert rc == 2 and "the plan is for graph" in err


def test_compare_csv_and_msr_input(capsys, tmp_path, msr_dir):
    csv = tmp_path / "t.csv"
    f = msr_dir / "throughput" / "layer_bert24_inference.json"
    rc, out, _ = run(capsys, "compare", str(f), "--methods", "single,m_topo", "--csv", str(csv))
    assert rc == 0 and "m_topo" in out
    import pandas as pd

    df = pd.read_csv(csv)
    assert list(df["method"]) == ["single", "m_topo"]
    assert (df["max_load_ms"] >= df["max_load_lb"] - 1e-9).all()


def test_methods_listing(capsys):
    rc, out, _ = run(capsys, "methods", "--json")
    names = [m["method"] for m in json.loads(out)]
    assert rc == 0 and {"single", "round_robin", "m_topo", "expert"} <= set(names)


def test_module_entry_point_exits_nonzero_on_error():
    r = subprocess.run([sys.executable, "-m", "workbench", "solve", "diamond", "-m", "nope"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("error: unknown method")
