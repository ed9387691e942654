"""Training plans of GPT models on GPU clusters: how fast the training judge builds and judges them.

For GPT 1.3 B on 8 A100s, 13 B on 64 and 175 B on 512 (Narayanan et al. 2021's shapes,
sequences of 2,048 tokens), several strategies each, every case run ``--runs`` times (default
3), each run in a fresh Python process, which measures (after its imports) the wall and CPU
seconds to build the plan (:func:`workbench.transforms.parallel.parallelize`) and to judge it
(:func:`workbench.judge.training.simulate_training`, one rank per stage), the events the judge
processed, and the process's peak resident memory (``ru_maxrss``, imports included). Printed:
the median and the range over the runs, the judged step time, MFU, peak GPU memory and the
step-time breakdown of each strategy.

The last line is ``llm judge: 175B on 512 GPUs built and judged in X s, peak Y GiB``: X the
slowest 175 B strategy's median wall seconds (build + judge), Y the largest peak resident
memory of those runs.

Run: ``.venv/bin/python bench/bench_llm.py [--runs 3] [--only 175b]``

``--torch-check`` prints, for the two small models of ``tests/training/test_llm_models.py``, our FLOPs
(forward + backward + Adam, and forward only) and parameter bytes over those of the same model
built with transformers and captured by ``from_torch``; ``--reduction-grid`` judges 480 small
strategies on 64 GPUs with one rank per stage and with every rank and counts the differences
(step time, every task's start and end, peak memory).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

CASES = {
    "1.3b": ("gpt:1.3b", "8xA100-80g", 512, [
        dict(dp=8, mbs=4),
        dict(dp=8, mbs=4, zero=1),
        dict(tp=2, dp=4, mbs=4, recompute="selective", sp=True),
        dict(pp=2, dp=4, mbs=4, schedule="1f1b"),
    ]),
    "13b": ("gpt:13b", "64xA100-80g", 1024, [
        dict(tp=8, dp=8, mbs=2, recompute="full"),
        dict(tp=4, pp=2, dp=8, mbs=2, recompute="selective", sp=True),
        dict(tp=8, pp=2, dp=4, mbs=2, schedule="interleaved", virtual=2, recompute="full"),
        dict(tp=2, pp=4, dp=8, mbs=1, zero=1, recompute="full"),
    ]),
    "175b": ("gpt:175b", "512xA100-80g", 1536, [
        dict(tp=8, pp=16, dp=4, mbs=1, recompute="full"),
        dict(tp=8, pp=16, dp=4, mbs=1, schedule="interleaved", virtual=2, recompute="full"),
        dict(tp=8, pp=16, dp=4, mbs=6, recompute="full"),
        dict(tp=8, pp=16, dp=4, mbs=6, schedule="interleaved", virtual=3, recompute="full"),
    ]),
}


def one(model: str, cluster: str, gbs: int, kw: dict) -> dict:
    """Build and judge one case in this process; its figures."""
    import resource
    import time

    from workbench.cluster import Cluster
    from workbench.judge.training import simulate_training
    from workbench.transforms.parallel import Strategy, parallelize

    w0, c0 = time.perf_counter(), time.process_time()
    plan = parallelize(model, Cluster.preset(cluster), Strategy(global_batch=gbs, **kw))
    w1, c1 = time.perf_counter(), time.process_time()
    res = simulate_training(plan, record_links=False)
    w2, c2 = time.perf_counter(), time.process_time()
    return {"build_s": w1 - w0, "judge_s": w2 - w1, "cpu_s": c2 - c0, "events": res.events,
            "rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
            **res.summary()}


def torch_check() -> None:
    """Our builders against transformers' models captured by from_torch (needs torch)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "training"))
    from test_llm_models import GPT_SMALL, LLAMA_SMALL, _captured, _flops

    from workbench.costs.llm import parse_spec
    from workbench.costs.llm_graph import training_graph

    for spec in (GPT_SMALL, LLAMA_SMALL):
        _, cap = _captured(spec)
        ours = training_graph(parse_spec(spec + ",precision=fp32"))
        pbytes = sum(ours.op(v).get("param_bytes", 0.0) for v in ours.ops)
        print(f"{spec}: FLOPs {_flops(ours) / _flops(cap):.4f}, forward "
              f"{_flops(ours, ('fwd',)) / _flops(cap, ('fwd',)):.4f}, parameter bytes "
              f"{pbytes / cap.meta['param_bytes']:.4f} (ours / torch)")


def reduction_grid() -> None:
    """One rank per stage against every rank on a grid of small strategies."""
    import itertools

    from workbench.cluster import Cluster
    from workbench.costs.llm import parse_spec
    from workbench.judge.training import simulate_training
    from workbench.transforms.parallel import Strategy, parallelize

    cluster = Cluster.preset("64xA100-80g")
    cfg = parse_spec("gpt:layers=8,hidden=512,heads=8,seq=256")
    n = bad = 0
    for tp, pp, dp, sched, rec, zero, sp in itertools.product(
            (1, 2, 8), (1, 2, 4), (1, 2), ("gpipe", "1f1b", "interleaved"), ("none", "full"),
            (0, 1, 3), (False, True)):
        if (sp and tp == 1) or (sched == "interleaved" and pp == 1):
            continue
        v = 2 if sched == "interleaved" else 1
        plan = parallelize(cfg, cluster, Strategy(tp=tp, pp=pp, dp=dp, mbs=1,
                                                  global_batch=8 * dp,
                                                  schedule=sched, virtual=v, recompute=rec,
                                                  zero=zero, sp=sp, bucket_mb=1.0))
        a, b = simulate_training(plan), simulate_training(plan, ranks="all")
        n += 1
        same = a.step_ms == b.step_ms and all(a.tasks[r] == b.tasks[r] and a.peak[r] == b.peak[r]
                                              for r in a.tasks)
        if not same:
            bad += 1
            print("differs:", plan.strategy.describe(), a.step_ms, b.step_ms)
    print(f"reduction grid: {n} strategies, {bad} differ between one rank per stage and every rank")


def _spread(xs: list) -> str:
    return f"{statistics.median(xs):.3f} [{min(xs):.3f}-{max(xs):.3f}]"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", choices=list(CASES))
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--torch-check", action="store_true")
    ap.add_argument("--reduction-grid", action="store_true")
    a = ap.parse_args(argv)
    if a.torch_check or a.reduction_grid:
        if a.torch_check:
            torch_check()
        if a.reduction_grid:
            reduction_grid()
        return
    if a.one:
        print(json.dumps(one(*json.loads(a.one))))
        return
    worst = (0.0, 0.0)
    for size, (model, cluster, gbs, strategies) in CASES.items():
        if a.only and size != a.only:
            continue
        print(f"== {model} on {cluster}, {gbs} sequences a step ({a.runs} runs each, "
              f"a fresh process each)")
        for kw in strategies:
            runs = []
            for _ in range(a.runs):
                out = subprocess.run([sys.executable, __file__, "--one",
                                      json.dumps([model, cluster, gbs, kw])],
                                     capture_output=True, text=True, check=True,
                                     cwd=Path(__file__).resolve().parent.parent)
                runs.append(json.loads(out.stdout))
            r = runs[0]
            total = [x["build_s"] + x["judge_s"] for x in runs]
            print(f"  {r['strategy']}: build+judge {_spread(total)} s wall, cpu "
                  f"{_spread([x['cpu_s'] for x in runs])} s, events {r['events']}, rss "
                  f"{max(x['rss_gib'] for x in runs):.2f} GiB")
            print(f"    step {r['step_ms']:.1f} ms, MFU {r['mfu']:.3f}, peak GPU memory "
                  f"{r['peak_gib']:.1f} GiB{'' if r['feasible'] else ' OUT OF MEMORY'}; "
                  + ", ".join(f"{k} {r[k + '_ms']:.0f}" for k in
                              ("compute", "recompute", "tp", "pp", "bubble", "dp", "optimizer")))
            if size == "175b":
                worst = (max(worst[0], statistics.median(total)),
                         max(worst[1], max(x["rss_gib"] for x in runs)))
    if not a.only or a.only == "175b":
        print(f"llm judge: 175B on 512 GPUs built and judged in {worst[0]:.2f} s, peak "
              f"{worst[1]:.2f} GiB")


if __name__ == "__main__":
    main()
