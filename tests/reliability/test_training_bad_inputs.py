"""Bad inputs on the training surfaces: ``workbench train`` and ``workbench strategies``, the
``gpt:``/``llama:`` spec strings, :class:`Strategy` and :func:`parallelize`, the training
presets and cluster files, the hybrid searches (``megatron``, ``tarnawski``) given op-level
problems, the training judge and figures given wrong objects, and ``bench/fidelity_public.py``
with bad arguments and damaged CSVs made from the bundled vTrain file (issue 41).

Each must end in a one-line ``error: ...`` (CLI, exit status 2) or a workbench exception naming
the problem: never a traceback, a hang, or a silently wrong answer. Measured before the fixes
(scratch probes of the same inputs): 16 of 62 CLI inputs, 64 of 105 API inputs and 8 of 36
``fidelity_public.py`` runs went wrong (tracebacks, runs of minutes or killed for memory,
silent acceptance).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from workbench import samples
from workbench.cluster import Cluster, Device, Link
from workbench.costs.llm import LLMConfig, parse_spec
from workbench.errors import WorkbenchError
from workbench.io import save_cluster
from workbench.judge.training import simulate_training
from workbench.solvers.hybrid import megatron, tarnawski
from workbench.transforms.parallel import Strategy, parallelize

ROOT = Path(__file__).resolve().parents[2]
M = "gpt:layers=4,hidden=256,heads=4,seq=128,vocab=1000"
SMALL = "gpt:layers=2,hidden=128,heads=4,seq=64,vocab=1000"
C8 = Cluster.preset("8xA100-80g")


def _cli(argv, capsys, *, match: str) -> str:
    from workbench.cli import main

    rc = main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2, (argv, rc, err)
    assert err.startswith("error:") and "\n" not in err and "Traceback" not in err, err
    assert match in err, err
    return err


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    d = tmp_path_factory.mktemp("clusters")
    save_cluster(Cluster([Device("cpu0", "cpu", 8e9), Device("cpu1", "cpu", 8e9)],
                         intra_host=Link(0.01, 1e6)), d / "cpus.json")
    save_cluster(Cluster([Device("gpu0", "gpu", 80 * 2**30), Device("cpu0", "cpu", 8e9)],
                         intra_host=Link(0.01, 1e6)), d / "mixed.json")
    save_cluster(Cluster([Device(f"gpu{i}", "gpu", 80 * 2**30, 1.0, "n0") for i in range(8)],
                         intra_host=Link(0.002, 3e8), name="my8"), d / "gpus.json")
    (d / "broken.json").write_text("{ nope")
    return d


# ---------------------------------------------------------------------- workbench train
TRAIN_SPECS = [
    ("gpt:", "names no size"),
    ("gpt:layers=0", "layers must be a positive integer"),
    ("gpt:layers=-1", "layers must be a positive integer"),
    ("gpt:layers=2.5", "layers must be an integer"),
    ("gpt:layers=1e3", "layers must be an integer"),
    ("gpt:layers=0x10", "layers must be an integer"),
    ("gpt:layers==8", "layers must be an integer"),
    ("gpt:layers=\u0663", "layers must be an integer"),  # an Arabic-Indic three
    ("gpt:layers=4,layers=8", "layers is given twice"),
    ("gpt:hidden=100,heads=3", "not a multiple of heads=3"),
    ("gpt:foo=1", "bad part 'foo=1'"),
    ("bert:1b", "unknown model 'bert'"),
    ("gpt:999b", "unknown size"),
    ("gpt", "expected gpt:..., llama:..., t5:... or moe:..."),
    ("gpt:precision=int8", "precision must be"),
    ("gpt:kv_heads=3", "not a multiple of kv_heads=3"),
    ("gpt:ffn=-5", "ffn must be a non-negative integer"),
    ("gpt:kv_heads=-2", "kv_heads must be a non-negative integer"),
    ("llama:layers=100000000", "beyond the largest allowed, 1024"),
    ("gpt:seq=1000000000000", "seq=1000000000000 is beyond"),
    ("gpt:hidden=1099511627776,heads=1", "hidden=1099511627776 is beyond"),
    ("gpt:vocab=10000000000000", "vocab=10000000000000 is beyond"),
    ("gpt:mbs=100000000000", "mbs=100000000000 is beyond"),
    ("gpt:hidden=" + "9" * 400, "hidden must be an integer"),
]


@pytest.mark.parametrize("spec,match", TRAIN_SPECS, ids=[s[:30] for s, _ in TRAIN_SPECS])
def test_train_bad_model(spec, match, capsys):
    _cli(["train", spec, "--dp", "8"], capsys, match=match)


TRAIN_FLAGS = [
    (["--tp", "3", "--dp", "2"], "tp=3 does not divide the 4 attention heads"),
    (["--pp", "8"], "4 layers cannot fill 8 pipeline chunks"),
    (["--dp", "1000"], "strategy needs tp x pp x dp = 1000 GPUs; cluster '8xA100-80g' has 8"),
    (["--tp", "2", "--pp", "2"], "--gpus 4 to judge it on the first 4"),
    ([], "tp x pp x dp = 1 x 1 x 1 = 1 GPUs, but the run uses 8"),
    (["--gpus", "9", "--dp", "8"], "--gpus 9: cluster '8xA100-80g' has 8 devices"),
    (["--tp", "0"], "expected an integer >= 1"),
    (["--dp", "8", "--mbs", "3", "--global-batch", "8"], "not a multiple of mbs x dp"),
    (["--dp", "8", "--virtual", "2"], "needs schedule='interleaved'"),
    (["--dp", "8", "--schedule", "bad"], "invalid choice"),
    (["--dp", "8", "--recompute", "all"], "invalid choice"),
    (["--dp", "8", "--zero", "5"], "invalid choice"),
    (["--dp", "8", "--zero", "1.0"], "invalid int value"),
    (["--dp", "8", "--sp"], "it needs tp > 1"),
    (["--dp", "8", "--global-batch", "1000000000"], "at most 8192 are judged"),
    (["--pp", "2", "--dp", "4", "--schedule", "interleaved", "--global-batch", "12"],
     "micro-batches (3) to be a multiple of pp=2"),
    (["--pp", "2", "--dp", "4", "--schedule", "interleaved", "--virtual", "3",
      "--global-batch", "8"], "4 layers cannot fill 6 pipeline chunks"),
    (["--dp", "8", "--cluster", "nope"], "unknown cluster preset 'nope'"),
    (["--dp", "8", "--cluster", "8xA100"], "unknown cluster preset '8xA100'"),
    (["--dp", "8", "--cluster", "0xA100-80g"], "unknown cluster preset"),
    (["--dp", "4", "--cluster", "4xV100-nvlink"], "is no GPU preset"),
    (["--dp", "8", "--gpu", "B200"], "unknown GPU 'B200'"),
]


@pytest.mark.parametrize("flags,match", TRAIN_FLAGS, ids=[" ".join(f)[:40] for f, _ in TRAIN_FLAGS])
def test_train_bad_strategy(flags, match, capsys):
    _cli(["train", "gpt:layers=4,hidden=256,heads=4,seq=128", *flags], capsys, match=match)


def test_train_bad_cluster_files(clusters, capsys):
    base = ["train", "gpt:layers=4,hidden=256,heads=4,seq=128"]
    _cli(base + ["--cluster", str(clusters / "cpus.json"), "--gpu", "A100-80G", "--dp", "2"],
         capsys, match="rank 0 would run on 'cpu0', a CPU")
    _cli(base + ["--cluster", str(clusters / "mixed.json"), "--gpu", "A100-80G", "--dp", "2"],
         capsys, match="rank 1 would run on 'cpu0', a CPU")
    _cli(base + ["--cluster", str(clusters / "gpus.json"), "--dp", "8"], capsys,
         match="cluster 'my8' is no GPU preset")
    _cli(base + ["--cluster", str(clusters / "broken.json")], capsys, match="not valid JSON")
    _cli(base + ["--cluster", str(clusters)], capsys, match="is a directory")


def test_train_subset_and_cluster_file_work(clusters, capsys):
    """The explicit forms of what is refused above run."""
    import json

    from workbench.cli import main

    assert main(["train", M, "--tp", "2", "--pp", "2", "--gpus", "4", "--global-batch", "4",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["tp"], out["pp"], out["dp"]) == (2, 2, 1) and out["step_ms"] > 0
    assert main(["train", M, "--cluster", str(clusters / "gpus.json"), "--gpu", "A100-80G",
                 "--dp", "8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cluster"] == "my8"


# ---------------------------------------------------------------------- workbench strategies
STRATEGIES = [
    (["gpt:layers=0", "--global-batch", "8"], "layers must be a positive integer"),
    (["transformer", "--global-batch", "8"], "expected gpt:..., llama:..., t5:... or moe:..."),
    ([M], "the following arguments are required: --global-batch"),
    ([M, "--global-batch", "0"], "expected an integer >= 1"),
    ([M, "--global-batch", "1000000000"], "at most 8192 micro-batches a replica"),
    ([M, "--global-batch", "8", "--cluster", "4xV100-nvlink"], "is no GPU preset"),
    ([M, "--global-batch", "8", "--cluster", "1xV100"], "is no GPU preset"),
    ([M, "--global-batch", "8", "--cluster", "4xcpu"], "CPU device(s) cpu0, cpu1, cpu2"),
    ([M, "--global-batch", "8", "--cluster", "nope"], "unknown cluster preset"),
    ([M, "--global-batch", "8", "--gpu", "B200"], "unknown GPU 'B200'"),
]


@pytest.mark.parametrize("args,match", STRATEGIES, ids=[" ".join(a)[-40:] for a, _ in STRATEGIES])
def test_strategies_bad_inputs(args, match, capsys):
    _cli(["strategies", *args], capsys, match=match)


def test_strategies_on_a_cluster_file(clusters, capsys):
    _cli(["strategies", SMALL, "--global-batch", "8", "--cluster", str(clusters / "gpus.json")],
         capsys, match="pass gpu=")
    _cli(["strategies", SMALL, "--global-batch", "8", "--cluster", str(clusters / "cpus.json")],
         capsys, match="CPU device(s) cpu0, cpu1")
    from workbench.cli import main

    assert main(["strategies", SMALL, "--global-batch", "8", "--cluster",
                 str(clusters / "gpus.json"), "--gpu", "A100-80G", "--json"]) == 0


# ---------------------------------------------------------------------- the API
def _cpus():
    return Cluster([Device("cpu0", "cpu", 8e9), Device("cpu1", "cpu", 8e9)],
                   intra_host=Link(0.01, 1e6))


API = {
    "Strategy zero=True": (lambda: Strategy(zero=True), "zero must be 0, 1, 2 or 3"),
    "Strategy zero=1.0": (lambda: Strategy(zero=1.0), "zero must be 0, 1, 2 or 3"),
    "Strategy zero='1'": (lambda: Strategy(zero="1"), "zero must be 0, 1, 2 or 3"),
    "Strategy tp=2.0": (lambda: Strategy(tp=2.0), "tp must be an integer >= 1"),
    "Strategy tp=True": (lambda: Strategy(tp=True), "tp must be an integer >= 1"),
    "Strategy schedule=1F1B": (lambda: Strategy(schedule="1F1B"), "schedule must be one of"),
    "Strategy recompute=all": (lambda: Strategy(recompute="all"), "recompute must be one of"),
    "Strategy sp='yes'": (lambda: Strategy(tp=2, sp="yes"), "sp must be True or False"),
    "Strategy sp without tp": (lambda: Strategy(sp=True), "it needs tp > 1"),
    "Strategy overlap_grad='no'": (lambda: Strategy(overlap_grad="no"),
                                   "overlap_grad must be True or False"),
    "Strategy bucket_mb=inf": (lambda: Strategy(bucket_mb=float("inf")), "bucket_mb must be"),
    "Strategy bucket_mb=nan": (lambda: Strategy(bucket_mb=float("nan")), "bucket_mb must be"),
    "Strategy bucket_mb=True": (lambda: Strategy(bucket_mb=True), "bucket_mb must be"),
    "Strategy virtual=0": (lambda: Strategy(virtual=0), "virtual must be an integer >= 1"),
    "Strategy algorithm=Ring": (lambda: Strategy(algorithm="Ring"), "algorithm must be"),
    "tp not dividing heads": (lambda: parallelize(M, C8, Strategy(tp=8)), "does not divide"),
    "pp > layers": (lambda: parallelize(M, C8, Strategy(pp=8)), "cannot fill 8 pipeline"),
    "dp*tp*pp > GPUs": (lambda: parallelize(M, C8, Strategy(dp=16)), "needs tp x pp x dp = 16"),
    "mbs not dividing batch": (lambda: parallelize(M, C8, Strategy(mbs=3, global_batch=8)),
                               "not a multiple of mbs x dp"),
    "strategy a dict": (lambda: parallelize(M, C8, {"tp": 2}), "must be a Strategy"),
    "strategy a str": (lambda: parallelize(M, C8, "tp2"), "must be a Strategy"),
    "cluster a str": (lambda: parallelize(M, "8xA100-80g", Strategy()), "must be a Cluster"),
    "cluster None": (lambda: parallelize(M, None, Strategy()), "must be a Cluster"),
    "model an OpGraph": (lambda: parallelize(samples.transformer(50), C8, Strategy()),
                         "not the op graph"),
    "model an int": (lambda: parallelize(5, C8, Strategy()), "must be an LLMConfig"),
    "cuts of strings": (lambda: parallelize(M, C8, Strategy(pp=2), cuts=[0, "a"]),
                        "cuts must be a list of integers"),
    "cuts of fractions": (lambda: parallelize(M, C8, Strategy(pp=2), cuts=[0, 7.5]),
                          "cuts must be a list of integers"),
    "cuts with nan": (lambda: parallelize(M, C8, Strategy(pp=2), cuts=[0, float("nan")]),
                      "cuts must be a list of integers"),
    "cuts a number": (lambda: parallelize(M, C8, Strategy(pp=2), cuts=5),
                      "cuts must be a list of integers"),
    "layers_per_stage a str": (lambda: parallelize(M, C8, Strategy(pp=2), layers_per_stage="22"),
                               "layers_per_stage must be a list of integers"),
    "layers_per_stage fractions": (
        lambda: parallelize(M, C8, Strategy(pp=2), layers_per_stage=[2.5, 1.5]),
        "layers_per_stage must be a list of integers"),
    "layers_per_stage negative": (
        lambda: parallelize(M, C8, Strategy(pp=2), layers_per_stage=[5, -1]),
        "must give 2 chunks adding up to 4 layers"),
    "gpu a number": (lambda: parallelize(M, C8, Strategy(), gpu=5), "unknown GPU 5"),
    "a CPU cluster": (lambda: parallelize(M, _cpus(), Strategy(dp=2), gpu="A100-80G"),
                      "a CPU; the training judge runs GPUs"),
    "10**9 micro-batches": (lambda: parallelize(M, C8, Strategy(global_batch=10**9)),
                            "at most 8192 are judged"),
    "LLMConfig ffn=-1": (lambda: LLMConfig(ffn=-1), "ffn must be a non-negative integer"),
    "LLMConfig ffn=2.5": (lambda: LLMConfig(ffn=2.5), "ffn must be a non-negative integer"),
    "LLMConfig kv_heads=-4": (lambda: LLMConfig(kv_heads=-4), "kv_heads must be"),
    "LLMConfig dropout='no'": (lambda: LLMConfig(dropout="no"), "dropout must be True or False"),
    "LLMConfig layers=5000": (lambda: LLMConfig(layers=5000), "beyond the largest allowed"),
    "LLMConfig arch=bert": (lambda: LLMConfig("bert"), "unknown model architecture"),
    "parse_spec None": (lambda: parse_spec(None), "expected gpt:..., llama:..., t5:... or moe:..."),
    "parse_spec two sizes": (lambda: parse_spec("gpt:1.3b,13b"), "bad part '13b'"),
    "parse_spec empty value": (lambda: parse_spec("gpt:layers="), "must be an integer"),
    "preset unknown": (lambda: Cluster.preset("8xB200"), "unknown cluster preset"),
    "preset wrong case": (lambda: Cluster.preset("8xa100-80G"), "unknown cluster preset"),
    "simulate_training an op-level Plan": (
        lambda: simulate_training(_op_plan()), "an op-level Plan is judged by workbench.simulate"),
    "simulate_training a str": (lambda: simulate_training("x"), "judges a TrainingPlan"),
    "simulate_training None": (lambda: simulate_training(None), "judges a TrainingPlan"),
    "simulate_training ranks=bad": (lambda: simulate_training(_plan(), ranks="bad"),
                                    "ranks must be"),
}


def _op_plan():
    import workbench as wb

    return wb.solve(samples.diamond(), Cluster.preset("2xV100-pcie"), method="single")


def _plan():
    return parallelize(M, C8, Strategy(pp=2, global_batch=4))


# ---------------------------------------------------------------------- hybrid searches
HYBRID = {
    "megatron an OpGraph": (lambda: megatron(samples.diamond(), C8, global_batch=8),
                            "not the op graph 'diamond'"),
    "megatron a sample name": (lambda: megatron("transformer", C8, global_batch=8),
                               "expected gpt:..., llama:..., t5:... or moe:..."),
    "megatron an op-level preset": (
        lambda: megatron(M, Cluster.preset("4xV100-nvlink"), global_batch=8), "no GPU preset"),
    "megatron a CPU cluster": (lambda: megatron(M, _cpus(), global_batch=8), "CPU device(s)"),
    "megatron a cluster name": (lambda: megatron(M, "8xA100-80g", global_batch=8),
                                "must be a Cluster"),
    "megatron global_batch=0": (lambda: megatron(M, C8, global_batch=0),
                                "global_batch must be an integer >= 1"),
    "megatron global_batch=2.5": (lambda: megatron(M, C8, global_batch=2.5),
                                  "global_batch must be an integer >= 1"),
    "megatron global_batch='8'": (lambda: megatron(M, C8, global_batch="8"),
                                  "global_batch must be an integer >= 1"),
    "megatron global_batch=True": (lambda: megatron(M, C8, global_batch=True),
                                   "global_batch must be an integer >= 1"),
    "megatron global_batch=10**12": (lambda: megatron(M, C8, global_batch=10**12),
                                     "at most 8192 micro-batches"),
    "megatron gpus=0": (lambda: megatron(M, C8, global_batch=8, gpus=0), "gpus must be"),
    "megatron gpus=100": (lambda: megatron(M, C8, global_batch=8, gpus=100), "gpus must be"),
    "megatron gpus=2.0": (lambda: megatron(M, C8, global_batch=8, gpus=2.0), "gpus must be"),
    "megatron time_limit=-1": (lambda: megatron(M, C8, global_batch=8, time_limit=-1),
                               "time_limit must be"),
    "megatron time_limit=nan": (lambda: megatron(M, C8, global_batch=8,
                                                 time_limit=float("nan")), "time_limit must be"),
    "megatron time_limit='1'": (lambda: megatron(M, C8, global_batch=8, time_limit="1"),
                                "time_limit must be"),
    "tarnawski an OpGraph": (lambda: tarnawski(samples.diamond(), C8, global_batch=8),
                             "not the op graph"),
    "tarnawski a hierarchy of V100s": (
        lambda: tarnawski(M, Cluster.preset("2x4xV100"), global_batch=8), "no GPU preset"),
    "tarnawski refine=-1": (lambda: tarnawski(M, C8, global_batch=8, gpus=4, refine=-1),
                            "refine must be"),
    "tarnawski virtuals=(0,)": (lambda: tarnawski(M, C8, global_batch=8, gpus=4, virtuals=(0,)),
                                "virtuals must be integers >= 2"),
    "tarnawski baseline a str": (lambda: tarnawski(M, C8, global_batch=8, gpus=4, baseline="x"),
                                 "baseline must be the SearchResult"),
    "tarnawski global_batch=0": (lambda: tarnawski(M, C8, global_batch=0),
                                 "global_batch must be"),
}


@pytest.mark.parametrize("name", [*API, *HYBRID])
def test_api_bad_inputs(name):
    """Strategy, parallelize, the model specs, presets, the judge and the hybrid searches."""
    make, match = {**API, **HYBRID}[name]
    with pytest.raises(WorkbenchError) as e:
        make()
    assert match in str(e.value)


def test_tarnawski_refuses_the_baseline_of_another_problem():
    other_model = megatron(SMALL, C8, global_batch=8, gpus=4, prune=True)
    with pytest.raises(WorkbenchError, match="baseline is a search of another problem: model"):
        tarnawski(M, C8, global_batch=8, gpus=4, baseline=other_model)
    other_batch = megatron(M, C8, global_batch=16, gpus=4, prune=True)
    with pytest.raises(WorkbenchError, match="global batch 16 \\(not 8\\)"):
        tarnawski(M, C8, global_batch=8, gpus=4, baseline=other_batch)
    same = megatron(M, C8, global_batch=8, gpus=4, prune=True)
    assert tarnawski(M, C8, global_batch=8, gpus=4, baseline=same).step_ms <= same.step_ms


# ---------------------------------------------------------------------- training figures
@pytest.fixture(scope="module")
def judged():
    import workbench as wb

    c = Cluster.preset("2xV100-pcie")
    plan = wb.solve(samples.diamond(), c, method="single")
    r = simulate_training(_plan())
    search = megatron(SMALL, C8, global_batch=8, gpus=4, prune=True)
    return {"result": r, "plan": _plan(), "schedule": wb.simulate(plan, c), "search": search}


FIGURES = [
    ("training_gantt", lambda j: (None,), "must be a TrainingResult"),
    ("training_gantt", lambda j: (j["schedule"],), "got Schedule"),
    ("training_gantt", lambda j: (j["plan"],), "got TrainingPlan"),
    ("training_gantt", lambda j: (j["search"],), "(its .result is one)"),
    ("training_gantt", lambda j: (j["result"], {"ranks": [99]}), "rank 99 was not simulated"),
    ("training_gantt", lambda j: (j["result"], {"ranks": "0"}), "rank '0' was not simulated"),
    ("training_gantt", lambda j: (j["result"], {"fig": "x"}), "fig must be a plotly Figure"),
    ("training_memory_figure", lambda j: (None,), "must be a TrainingResult"),
    ("training_memory_figure", lambda j: (j["schedule"],), "got Schedule"),
    ("training_memory_figure", lambda j: ({},), "got dict"),
    ("training_breakdown_figure", lambda j: (j["result"],), "(wrap it in a list)"),
    ("training_breakdown_figure", lambda j: ([],), "no results to draw"),
    ("training_breakdown_figure", lambda j: ([j["plan"]],), "results[0] must be a TrainingResult"),
    ("training_breakdown_figure", lambda j: ([j["result"], None],), "results[1]"),
    ("training_breakdown_figure", lambda j: ("abc",), "takes a list of TrainingResults"),
    ("training_breakdown_figure", lambda j: ([j["search"]],), "(its .result is one)"),
    ("training_breakdown_figure", lambda j: ([j["result"]], {"labels": ["a", "b"]}),
     "2 labels for 1 results"),
]


@pytest.mark.parametrize("i", range(len(FIGURES)), ids=[f"{f}-{m[:24]}" for f, _, m in FIGURES])
def test_training_figures_name_a_wrong_object(i, judged):
    from widgets import figures

    name, args, match = FIGURES[i]
    got = args(judged)
    kw = got[1] if len(got) > 1 else {}
    with pytest.raises(WorkbenchError) as e:
        getattr(figures, name)(got[0], **kw)
    assert match in str(e.value)


# ---------------------------------------------------------------------- fidelity_public.py
def _bench():
    spec = importlib.util.spec_from_file_location("fidelity_public",
                                                  ROOT / "bench" / "fidelity_public.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _bundled_lines() -> list:
    from workbench.fidelity.measurements import BUNDLED_VTRAIN

    return BUNDLED_VTRAIN.read_text().splitlines(keepends=True)


def _row(lines, k, col, value) -> str:
    cells = lines[k].rstrip("\n").split(",")
    cells[col] = value
    return ",".join(cells) + "\n"


def _damaged(tmp: Path) -> dict:
    """Damaged copies of the bundled vTrain CSV: name -> (file, the error's words)."""
    L = _bundled_lines()
    head = L[0].rstrip("\n").split(",")
    time_col = head.index("iteration time (ms)")

    def drop(col):
        i = head.index(col)
        return "".join(",".join(c for j, c in enumerate(x.rstrip("\n").split(",")) if j != i)
                       + "\n" for x in L[:5])

    files = {
        "empty": ("", "holds no rows"),
        "header only": (L[0], "holds no rows"),
        "header cut": (L[0][:40], "holds no rows"),
        "cut mid-line": ("".join(L[:6]) + L[6][:len(L[6]) // 2], "line 7:"),
        "a short row": ("".join(L[:3]) + "2,4,1\n", "line 4: 3 cells, but the header has 11"),
        "a long row": ("".join(L[:3]) + L[3].rstrip("\n") + ",7,8\n",
                       "line 4: 13 cells, but the header has 11"),
        "no time column": (drop("iteration time (ms)"), "lacks the column(s) ['iteration time"),
        "no tp column": (drop("tensor parallelism"), "lacks the column(s) ['tensor parallelism']"),
        "a word": ("".join(L[:3]) + _row(L, 3, 3, "big"), "column 'hidden size' is 'big'"),
        "nan time": ("".join(L[:3]) + _row(L, 3, time_col, "nan"), "is not positive"),
        "inf time": ("".join(L[:3]) + _row(L, 3, time_col, "inf"), "is not positive"),
        "negative time": ("".join(L[:3]) + _row(L, 3, time_col, "-5"), "is not positive"),
        "10**8 layers": ("".join(L[:3]) + _row(L, 3, head.index("# layers"), "100000000"),
                         "100000000 layers; at most 1024"),
        "10**9 batch": ("".join(L[:3]) + _row(L, 3, head.index("global batch"), "1000000000"),
                        "micro-batches a replica; the judge takes at most 8192"),
        "semicolons": ("".join(L[:4]).replace(",", ";"), "lacks the column(s)"),
    }
    out = {}
    for name, (text, match) in files.items():
        p = tmp / (name.replace(" ", "_").replace("*", "") + ".csv")
        p.write_text(text)
        out[name] = (p, match)
    binary = tmp / "binary.csv"
    binary.write_bytes(b"\x00\xff\xfe" * 100)
    out["binary"] = (binary, "cannot read")
    return out


def _run_bench(argv, capsys) -> tuple:
    mod = _bench()
    with pytest.raises(SystemExit) as e:
        mod.main(argv)
    cap = capsys.readouterr()
    return e.value.code, cap.err


def test_fidelity_public_damaged_csvs(tmp_path, capsys):
    for name, (path, match) in _damaged(tmp_path).items():
        code, err = _run_bench(["--csv", str(path), "--fit-fraction", "0", "--quiet"], capsys)
        assert code == 2, (name, code, err)
        assert err.startswith("error:") and "Traceback" not in err, (name, err)
        assert match in err, (name, err)


def test_fidelity_public_reads_a_bom_and_crlf(tmp_path, capsys):
    """A spreadsheet's BOM and CRLF line ends are no damage."""
    L = _bundled_lines()[:3]
    bom = tmp_path / "bom.csv"
    bom.write_text("".join(L), encoding="utf-8-sig")
    crlf = tmp_path / "crlf.csv"
    crlf.write_bytes("".join(L).replace("\n", "\r\n").encode())
    for p in (bom, crlf):
        assert _bench().main(["--csv", str(p), "--fit-fraction", "0", "--quiet"]) == 0
        assert "public fidelity: MAPE" in capsys.readouterr().out


BENCH_ARGS = [
    (["--csv", "/nonexistent.csv", "--fit-fraction", "0"], "cannot read"),
    (["--folds", "1"], "--folds must be at least 2"),
    (["--fit-fraction", "nan"], "--fit-fraction must be in [0, 1]"),
    (["--fit-fraction", "2"], "--fit-fraction must be in [0, 1]"),
    (["--fit-fraction", "abc"], "invalid float value"),
    (["--seed", "-1"], "--seed must be a non-negative integer"),
    (["--seed", "1e3"], "invalid int value"),
    (["--write-coefficients", "/nonexistent/dir/x.json"], "not a file in a writable folder"),
    (["--write-coefficients", "x.json", "--fit-fraction", "0"], "needs --fit-fraction > 0"),
    (["--bogus"], "unrecognized arguments"),
]


@pytest.mark.parametrize("argv,match", BENCH_ARGS, ids=[" ".join(a)[:30] for a, _ in BENCH_ARGS])
def test_fidelity_public_bad_arguments(argv, match, capsys):
    code, err = _run_bench(argv, capsys)
    assert code == 2 and "Traceback" not in err and match in err, err


def test_fidelity_public_folds_beyond_the_rows(tmp_path, capsys):
    p = tmp_path / "two.csv"
    p.write_text("".join(_bundled_lines()[:3]))
    code, err = _run_bench(["--csv", str(p), "--folds", "5"], capsys)
    assert code == 2 and "folds must be an integer in [2, 2]" in err
