"""Issue 41, tracebacks: bad inputs on the surfaces of the last wave, each answered by a one-line
``error: ...`` (command line, exit status 2) or a workbench exception naming the problem.

Inputs come from their real producers: model files written as a user writes them and loaded by
the real loader, ONNX files saved by the ``onnx`` library with external data and then damaged,
Keras models built by Keras, comparisons made by :func:`workbench.compare`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench.cli import main
from workbench.errors import (
    ClusterError,
    FormatError,
    GraphError,
    PlanError,
    RuntimeBridgeError,
    SolverError,
    WorkbenchError,
)
from workbench.testing.timing import slowdown

ROOT = Path(__file__).resolve().parents[2]


def _cli(capsys, *argv):
    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    return rc, lines


def _refused(capsys, *argv, words=()):
    rc, lines = _cli(capsys, *argv)
    assert rc == 2 and len(lines) == 1, (rc, lines)
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


# ---------------------------------------------------------------------- PyTorch model files
NET = """
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        {init}
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(x)
{extra}
"""


def _model_file(tmp_path, name, init="pass", extra=""):
    p = tmp_path / f"{name}.py"
    p.write_text(NET.format(init=init, extra=textwrap.dedent(extra)))
    return f"{p}:Net"


@pytest.fixture
def torch_():
    return pytest.importorskip("torch")


def test_a_model_whose_init_raises(tmp_path, capsys, torch_):
    spec = _model_file(tmp_path, "init", init="raise RuntimeError('no weights here')")
    _refused(capsys, "info", spec, words=["constructing", "Net()", "RuntimeError",
                                          "no weights here"])


def test_a_model_whose_example_inputs_raise(tmp_path, capsys, torch_):
    spec = _model_file(tmp_path, "inputs", extra="""
        def example_inputs(batch, seq):
            raise ValueError('no data')
        """)
    _refused(capsys, "info", spec, words=["example_inputs(1, 128) failed", "ValueError",
                                          "no data"])


def test_example_inputs_that_are_not_tensors(tmp_path, capsys, torch_):
    spec = _model_file(tmp_path, "notensor", extra="""
        def example_inputs(batch, seq):
            return [1, 2]
        """)
    _refused(capsys, "info", spec, words=["must return a tensor", "int"])


def test_a_model_file_with_a_dataclass_under_future_annotations(tmp_path, capsys, torch_):
    """The loader registers the module while it runs, as ``import`` does: dataclasses look
    their module up in ``sys.modules`` when annotations are strings."""
    p = tmp_path / "dc.py"
    p.write_text(textwrap.dedent("""
        from __future__ import annotations

        from dataclasses import dataclass

        import torch


        @dataclass
        class Cfg:
            width: int = 8


        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(Cfg().width, 4)

            def forward(self, x):
                return self.fc(x)
        """))
    rc, lines = _cli(capsys, "info", f"{p}:Net", "--json")
    assert rc == 0 and not lines


def test_a_failed_model_file_leaves_no_module_behind(tmp_path):
    from workbench._native import load_user_file

    p = tmp_path / "bad.py"
    p.write_text("raise SystemExit(0)\n")
    before = set(sys.modules)
    with pytest.raises(FormatError, match="SystemExit"):
        load_user_file(str(p), FormatError)
    assert set(sys.modules) == before


@pytest.mark.parametrize("spec,per_item", [("torchvision:resnet18", 3 * 224 * 224 * 4),
                                           ("lstm-lm", 128 * 8)])
def test_profile_cpu_on_an_input_larger_than_memory(capsys, torch_, spec, per_item):
    """``--profile cpu`` allocates the example input: one larger than this machine's memory
    is refused before allocating."""
    from workbench._native import physical_memory

    if spec.startswith("torchvision"):
        pytest.importorskip("torchvision")
    batch = int(physical_memory() / per_item) + 1
    _refused(capsys, "info", spec, "--batch", batch, "--profile", "cpu",
             words=[f"({batch}, ", "more than this machine's memory", "profile=None"])


@pytest.mark.parametrize("argv,words", [
    (["torchvision:resnet18", "--batch", "14000000"], ["(14000000, 3, 224, 224)", "2.11e+12",
                                                       "elements"]),
    (["lstm-lm", "--batch", "99999999999999999999"], ["batch must be an integer in [1, "]),
    (["hf:gpt2", "--seq", "100000000000"], ["seq must be an integer in [1, "]),
])
def test_inputs_beyond_the_element_limit(capsys, torch_, argv, words):
    """8 TB of input (and a batch torch cannot even count) refused on any device."""
    if argv[0].startswith("torchvision"):
        pytest.importorskip("torchvision")
    if argv[0].startswith("hf:"):
        pytest.importorskip("transformers")
    for profile in ([], ["--profile", "cpu"]):
        _refused(capsys, "info", *argv, *profile, words=words)


def test_a_model_too_large_to_construct(tmp_path, capsys, torch_):
    spec = _model_file(tmp_path, "huge", init="self.big = torch.nn.Linear(1 << 21, 1 << 20)")
    _refused(capsys, "info", spec, "--profile", "cpu", words=["constructing", "allocate"])


@pytest.mark.parametrize("kw,words", [
    ({"layers": 0}, ["layers must be a positive integer"]),
    ({"layers": True}, ["layers must be a positive integer"]),
    ({"config": {"n_embed": 64}}, ["unknown config field", "n_embed", "n_embd"]),
    ({"config": {"n_embd": 0}}, ["building the model", "n_embd"]),
    ({"config": "n_embd=64"}, ["config must be a dict"]),
    ({"depth": 3}, ["unknown keyword", "depth"]),
])
def test_hf_sizes_and_keywords(torch_, kw, words):
    pytest.importorskip("transformers")
    from workbench.io.torch_models import model_graph

    with pytest.raises(FormatError) as e:
        model_graph("hf:gpt2", batch=1, seq=8, training=False, **kw)
    for w in words:
        assert w in str(e.value)


def test_an_unknown_optimizer_of_a_torch_model(torch_):
    from workbench.io.torch_models import model_graph

    with pytest.raises(WorkbenchError, match="optimizer must be one of"):
        model_graph("lstm-lm", batch=1, seq=4, optimizer="adamw2")


# ---------------------------------------------------------------------- ONNX external data
def _onnx_with_external_data(folder: Path) -> Path:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    folder.mkdir(parents=True, exist_ok=True)
    w = numpy_helper.from_array(np.ones((16, 8), np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    g = helper.make_graph(nodes, "mlp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    p = folder / "m.onnx"
    onnx.save_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(p),
                    save_as_external_data=True, all_tensors_to_one_file=True,
                    location="m.onnx.data", size_threshold=0)
    return p


def _relocate(p: Path, location: str) -> None:
    import onnx

    m = onnx.load(str(p), load_external_data=False)
    for t in m.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = location
    onnx.save(m, str(p))


def test_onnx_external_data_intact_reads(tmp_path, capsys):
    p = _onnx_with_external_data(tmp_path / "ok")
    rc, lines = _cli(capsys, "info", p, "--json")
    assert rc == 0 and not lines


def test_onnx_truncated_external_data(tmp_path, capsys):
    p = _onnx_with_external_data(tmp_path / "t")
    with open(p.parent / "m.onnx.data", "r+b") as f:
        f.truncate(10)
    _refused(capsys, "info", p, words=["'w'", "holds 10 bytes", "0 to 512", "truncated"])


def test_onnx_absolute_external_data(tmp_path, capsys):
    good = _onnx_with_external_data(tmp_path / "ok")
    p = _onnx_with_external_data(tmp_path / "abs")
    _relocate(p, str(good.parent / "m.onnx.data"))
    _refused(capsys, "info", p, words=["relative to the model's folder"])


def test_onnx_external_data_outside_the_folder(tmp_path, capsys):
    _onnx_with_external_data(tmp_path / "ok")
    p = _onnx_with_external_data(tmp_path / "up")
    _relocate(p, "../ok/m.onnx.data")
    _refused(capsys, "info", p, words=["outside the model's folder"])


def test_onnx_symlinked_external_data(tmp_path, capsys):
    good = _onnx_with_external_data(tmp_path / "ok")
    p = _onnx_with_external_data(tmp_path / "sym")
    (p.parent / "m.onnx.data").unlink()
    os.symlink(good.parent / "m.onnx.data", p.parent / "m.onnx.data")
    _refused(capsys, "info", p, words=["symbolic link"])


# ---------------------------------------------------------------------- Keras names and sizes
@pytest.fixture
def keras_():
    """Keras on TensorFlow: the tests that take it are marked ``tf``."""
    pytest.importorskip("tensorflow")
    return pytest.importorskip("keras")


@pytest.mark.tf
@pytest.mark.parametrize("model,extra,words", [
    ("keras:TransformerEncoder", ["--input", "16"], ["(sequence, width)", "got 16"]),
    ("keras:__class__", [], ["unknown Keras model '__class__'"]),
    ("keras:MobileNetV2", ["--input", "8x8"], ["MobileNetV2", "at least 32x32"]),
])
def test_keras_names_and_input_sizes(capsys, keras_, model, extra, words):
    _refused(capsys, "run", model, "--batch", "2", "--methods", "single", *extra, words=words)


@pytest.mark.tf
def test_keras_builder_file_that_raises(tmp_path, capsys, keras_):
    p = tmp_path / "net.py"
    p.write_text("def build(**kw):\n    raise RuntimeError('builder broke')\n")
    _refused(capsys, "run", f"keras:{p}:build", "--batch", "2", "--methods", "single",
             words=["builder broke", "RuntimeError"])


@pytest.mark.tf
@pytest.mark.parametrize("kw,words", [
    ({"optimizer": "adamw2"}, ["optimizer='adamw2'", "compiling"]),
    ({"depth": 3}, ["unexpected keyword argument 'depth'"]),
    ({"classes": 0}, ["building Keras model"]),
])
def test_keras_optimizer_and_size_keywords(keras_, kw, words):
    from workbench.runtime.extraction import program_of

    with pytest.raises(RuntimeBridgeError) as e:
        program_of("keras:TransformerEncoder", 2, input_shape=(4, 8), **kw)
    for w in words:
        assert w in str(e.value)


# ---------------------------------------------------------------------- runtime helpers
@pytest.mark.parametrize("n", [2.5, True, "2", 0])
def test_local_cluster_counts(n):
    from workbench.cluster import local_cluster

    with pytest.raises(ClusterError, match="whole number of devices"):
        local_cluster(n)


@pytest.mark.parametrize("devices,kw,words", [
    (("cpu0",), {}, ["two distinct device names"]),
    (("cpu0", "cpu0"), {}, ["two distinct device names"]),
    ("cpu0", {}, ["two distinct device names"]),
    (("cpu0", "cpu1"), {"repeats": 0}, ["repeats must be a positive integer"]),
    (("cpu0", "cpu1"), {"passes": 1.5}, ["passes must be a positive integer"]),
])
def test_measure_handoff_arguments(devices, kw, words):
    """Checked before TensorFlow starts a session (no TensorFlow needed to see the error)."""
    from workbench.runtime.handoff import _check_handoff_args

    full = {"repeats": 60, "trials": 2, "segments": 16, "passes": 3, **kw}
    with pytest.raises(RuntimeBridgeError) as e:
        _check_handoff_args(devices, **full)
    for w in words:
        assert w in str(e.value)


@pytest.mark.tf
def test_duplicate_device_names_in_a_calibration(keras_):
    from workbench.runtime.calibrate import calibrate_links

    with pytest.raises(ClusterError, match="cpu0"):
        calibrate_links(["cpu0", "cpu0"], sizes=[10, 1000], repeats=1)


@pytest.mark.parametrize("argv,words", [
    (["--steps", "0"], ["--steps must be at least 1"]),
    (["--methods", "heft", "nope"], ["unknown method(s) nope"]),
    (["--models", "nope"], ["unknown sample 'nope'"]),
    (["--changes", "handoff", "nope"], ["unknown model change(s) nope"]),
    (["--partitions", "3"], ["needs --gpu"]),
])
def test_bench_fidelity_checks_arguments_before_calibrating(argv, words):
    """Each bad argument is refused in a second or two (it used to fail after 38-105 s of
    calibration); the check runs in a child process, as a user runs the bench."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "fidelity.py"), *argv],
                       capture_output=True, text=True, timeout=120 * slowdown(), env=env,
                       check=False)
    assert r.returncode == 2, r.stderr[-400:]
    assert "Traceback" not in r.stderr and "calibrated" not in r.stdout
    last = r.stderr.strip().splitlines()[-1]
    for w in words:
        assert w in last, last


# ---------------------------------------------------------------------- robustness, diff, views
@pytest.fixture(scope="module")
def cmp():
    g = wb.samples.diamond()
    return wb.compare(g, wb.Cluster.preset("2xV100-pcie"), methods=["single", "heft"])


@pytest.mark.parametrize("kw,words", [
    ({"seed": -1}, ["seed must be None or an integer"]),
    ({"seed": "x"}, ["seed must be None or an integer"]),
    ({"seed": 1.5}, ["seed must be None or an integer"]),
    ({"samples": 10**12}, ["samples=1,000,000,000,000", "memory"]),
    ({"samples": 3, "resolve": True, "resolve_samples": 10**12}, ["memory"]),
    ({"samples": 3, "resolve": True, "resolve_samples": 2.5}, ["resolve_samples"]),
])
def test_robustness_seed_and_sample_counts(cmp, kw, words):
    with pytest.raises(SolverError) as e:
        wb.robustness(cmp, **kw)
    for w in words:
        assert w in str(e.value)


def test_robustness_cluster_by_name(cmp):
    with pytest.raises(SolverError, match="cluster must be a Cluster"):
        wb.robustness(dict(cmp.plans), "2xV100-pcie", samples=3)


@pytest.mark.parametrize("kw,words", [
    ({"cluster": "2xV100-pcie"}, ["cluster must be a Cluster"]),
    ({"names": ("a",)}, ["names must be two strings"]),
    ({"names": (1, 2)}, ["names must be two strings"]),
    ({"schedules": ("x", "y")}, ["schedules must be two Schedules"]),
])
def test_diff_arguments(cmp, kw, words):
    from workbench.diff import diff

    args = {"cluster": cmp.cluster, **kw}
    with pytest.raises(PlanError) as e:
        diff(cmp.plans["single"], cmp.plans["heft"], **args)
    for w in words:
        assert w in str(e.value)


def test_residuals_without_a_plan():
    from workbench.fidelity.trace_residuals import residuals

    with pytest.raises(RuntimeBridgeError, match="plan must be a Plan, got NoneType"):
        residuals(None, None)


@pytest.mark.parametrize("kw", [{"fraction": 2.0}, {"fraction": -0.1},
                                {"fraction": float("nan")}, {"seconds": -1.0},
                                {"seconds": "3"}])
def test_budget_shares(kw):
    from workbench.budget import Budget

    with pytest.raises(SolverError, match="budget share 'x'"):
        Budget(5.0).share("x", **kw)


@pytest.mark.parametrize("target", [0, -3, 2.5, True])
def test_coarsen_view_targets(target):
    from widgets.views import CoarsenView

    with pytest.raises(GraphError, match="target must be an integer >= 1"):
        CoarsenView(wb.samples.transformer(60), target=target)


def test_progress_figure_of_a_table(cmp):
    from widgets.figures.progress import progress_figure

    with pytest.raises(PlanError, match="a DataFrame is its table only"):
        progress_figure(cmp.table)
    with pytest.raises(PlanError, match="got NoneType"):
        progress_figure(None)


def test_views_handed_the_wrong_object(cmp):
    from widgets.figures import compare_figure, dag_figure, gantt_figure
    from widgets.views import DagView, GanttView

    plan = cmp.plans["heft"]
    for call, words in [
        (lambda: compare_figure(None), "got None"),
        (lambda: gantt_figure(plan), "must be a Schedule"),
        (lambda: GanttView(plan), "must be a Schedule"),
        (lambda: GanttView(None), "must be a Schedule"),
        (lambda: dag_figure(None), "must be an OpGraph"),
        (lambda: dag_figure(cmp.graph, plan="heft"), "must be a Plan"),
        (lambda: DagView(None), "must be an OpGraph"),
    ]:
        with pytest.raises(PlanError, match=words):
            call()


@pytest.mark.tf
def test_run_input_size_for_a_model_that_takes_none(capsys, keras_):
    _refused(capsys, "run", "mlp", "--input", "axb", "--methods", "single",
             words=["--input sizes a Keras model", "'mlp'"])


@pytest.mark.parametrize("kw,err,words", [
    ({"graphs": ["diamond"]}, GraphError, "graphs must be a dict"),
    ({"graphs": {"d": 3}}, GraphError, "neither an OpGraph"),
    ({"preset": "nope"}, SolverError, "preset 'nope' is not one of"),
    ({"time_limit": -1}, SolverError, "time_limit must be a number of seconds"),
    ({"time_limit": "x"}, SolverError, "time_limit must be a number of seconds"),
    ({"methods": "heft"}, PlanError, "unknown methods heft"),
    ({"methods": ["expert"]}, PlanError, "unknown methods expert"),
])
def test_compare_board_arguments(kw, err, words):
    from widgets import CompareBoard

    with pytest.raises(err, match=words):
        CompareBoard(**kw)


def test_whatif_panel_without_a_graph():
    from widgets import WhatIfPanel

    with pytest.raises(PlanError, match="WhatIfPanel's graph must be an OpGraph"):
        WhatIfPanel(None)


@pytest.mark.tf
@pytest.mark.parametrize("kw,words", [
    ({"steps": "3"}, "steps='3'"),
    ({"rounds": 0}, "rounds=0"),
    ({"warmup": 1.5}, "warmup=1.5"),
])
def test_runner_counts(keras_, kw, words):
    from workbench import runtime as rt
    from workbench.cluster import local_cluster

    g = wb.samples.load_sample("mlp")
    c = local_cluster(2)
    plan = wb.solve(g, c, method="single")
    args = {"steps": 1, "warmup": 0, "cluster": c, **kw}
    with pytest.raises(RuntimeBridgeError, match=words):
        rt.measure_plans(g, {"single": plan}, **args)


@pytest.mark.tf
def test_runner_and_profile_bad_inputs(keras_):
    from workbench import runtime as rt

    with pytest.raises(RuntimeBridgeError, match="run_plan needs a Plan, got NoneType"):
        rt.run_plan(None)
    with pytest.raises(RuntimeBridgeError, match="batch must be a positive integer, got 2.5"):
        rt.extract("mlp", 2.5)
    with pytest.raises(RuntimeBridgeError, match="timed_steps >= 1"):
        rt.profile(wb.samples.load_sample("mlp"), steps=0)
