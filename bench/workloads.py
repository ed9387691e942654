"""Headroom: on which workloads do the placement methods differ?

For every workload -- the profiled real samples (with V100/A100 roofline costs), the MSR
workloads of Tarnawski et al., the synthetic generators at their defaults and in the hard
regime -- on 2, 4 and 8 devices of the GPU presets (``2xV100-pcie``, ``4xV100-nvlink``,
``8xA100-nvlink``; ``--clusters`` to change), and for the pairs of
:func:`workbench.workloads.hard_suite` (with their memory pressure), print: ops, CCR at the
cluster's links, memory pressure (the live footprint, ``workbench.workloads.memory_footprint``,
over device memory), the makespan lower bound, the
best and the worst simulated makespan among m_topo, m_etf, heft, dpos and celeritas (plans
that overflow a device's memory do not count as best), the best method's gap to the bound and
the best-worst spread. ``hard`` marks pairs with gap >= 5 % and spread >= 15 %.

Usage::

    .venv/bin/python bench/workloads.py                 # everything (a few minutes)
    .venv/bin/python bench/workloads.py --suite         # only the hard suite
    .venv/bin/python bench/workloads.py --max-ops 3000  # skip the largest graphs
    .venv/bin/python bench/workloads.py --torch         # the bundled PyTorch steps, suite-style
    .venv/bin/python bench/workloads.py --build-times   # seconds to build each suite pair

``--torch`` measures the bundled PyTorch training steps (``sample_graphs/torch_*.json.gz``) on
each cluster as the suite builds its pairs (roofline costs of the preset's GPUs, memory
pressure 1.6): the candidates for :func:`workbench.workloads.hard_suite`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import workbench as wb
from workbench.io.msr import read_msr
from workbench.costs.roofline import costs_for_cluster
from workbench.workloads import Workload, hard_suite, layered, memory_footprint

METHODS = ["m_topo", "m_etf", "heft", "dpos", "celeritas"]
CLUSTERS = ["2xV100-pcie", "4xV100-nvlink", "8xA100-nvlink"]
REAL = ["mlp", "resnet_small", "inception_small", "transformer_small", "lstm_seq2seq",
        "resnet50", "inception_v3", "bert_base", "gnmt", "rnnlm", "transformer_base"]
TORCH = ["torch_gpt2", "torch_bert_base", "torch_vit_b16", "torch_llama"]
MSR = ["op_bert3_inference", "op_bert3_training", "layer_bert24_inference",
       "layer_gnmt_training", "layer_resnet50_training"]


def row(name: str, g, c, *, time_limit: float = 60.0) -> dict:
    df = wb.compare(g, c, methods=METHODS, progress=False, time_limit=time_limit).table
    df = df.assign(feasible=df["feasible"].fillna(False).astype(bool),
                   error=df["error"].fillna("").astype(str))
    ok = df[(df["error"] == "") & df["makespan_ms"].notna()]
    feas = ok[ok["feasible"]]
    lb = float(df["makespan_lb"].iloc[0])
    best = feas.loc[feas["makespan_ms"].idxmin()] if len(feas) else None
    worst = float(ok["makespan_ms"].max()) if len(ok) else float("nan")
    b = float(best["makespan_ms"]) if best is not None else float("nan")
    dev_mem = min(d.memory for d in c.devices)
    return {"workload": name, "cluster": c.name, "ops": g.n_ops, "ccr": g.ccr(c),
            "mem_pressure": memory_footprint(g, c) / dev_mem, "lb": lb, "best": b,
            "best_method": best["method"] if best is not None else "-", "worst": worst,
            "worst_method": ok.loc[ok["makespan_ms"].idxmax(), "method"] if len(ok) else "-",
            "gap": b / lb - 1 if lb > 0 else float("nan"),
            "spread": worst / b - 1 if b > 0 else float("nan"),
            "infeasible": ",".join(df.loc[~df["feasible"] | (df["error"] != ""), "method"])}


def fmt(r: dict) -> str:
    hard = "hard" if r["gap"] >= 0.05 and r["spread"] >= 0.15 else ""
    return (f"| {r['workload']} | {r['cluster']} | {r['ops']} | {r['ccr']:.2f} | "
            f"{r['mem_pressure']:.2f} | {r['lb']:.2f} | {r['best']:.2f} ({r['best_method']}) | "
            f"{r['worst']:.2f} ({r['worst_method']}) | {r['gap']:+.1%} | {r['spread']:.1%} | "
            f"{r['infeasible'] or '-'} | {hard} |")


HEADER = ("| workload | cluster | ops | CCR | mem pressure | lower bound | best | worst | "
          "gap | spread | overflowed | |\n|---|---|---|---|---|---|---|---|---|---|---|---|")


def all_workloads(max_ops: int, real: bool = True):
    for name in REAL if real else []:
        g = wb.samples.load_sample(name)
        if g.n_ops <= max_ops:
            yield name, g, True
    for name in MSR:
        yield f"msr:{name}", read_msr(f"msr:{name}")[0], False
    for gen in ("cnn", "inception", "transformer", "lstm"):
        yield f"{gen}300", wb.samples.SAMPLES[gen](300), False
    yield "layered300", layered(300), False


def torch_candidates(clusters: list[str]):
    """The bundled PyTorch steps on ``clusters`` as suite pairs would be built."""
    from workbench.workloads import HARD_DEFAULTS

    for name in TORCH:
        for cl in clusters:
            yield Workload(f"{name}-{cl}", lambda n=name: wb.samples.load_sample(n), cl,
                           HARD_DEFAULTS["memory_pressure"], device_costs=True)


def build_times(repeats: int = 3) -> None:
    """Seconds to build each pair of the hard suite (median and range of ``repeats``)."""
    total = 0.0
    for w in hard_suite():
        ts = []
        for _ in range(repeats):
            t = time.perf_counter()
            g, _c = w.build()
            ts.append(time.perf_counter() - t)
        ts.sort()
        total += ts[len(ts) // 2]
        print(f"{w.name:32s} {g.n_ops:6d} ops  build {ts[len(ts) // 2]:.3f} s "
              f"(range {ts[0]:.3f}-{ts[-1]:.3f} over {repeats})", flush=True)
    print(f"all {len(hard_suite())} pairs: {total:.2f} s (sum of medians)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", action="store_true", help="only the hard suite")
    ap.add_argument("--clusters", default=",".join(CLUSTERS))
    ap.add_argument("--max-ops", type=int, default=10_000)
    ap.add_argument("--no-real", action="store_true", help="skip the real samples")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--torch", action="store_true",
                    help="only the bundled PyTorch steps as suite candidates")
    ap.add_argument("--build-times", action="store_true",
                    help="only the time to build each suite pair")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    n_hard = 0
    if args.build_times:
        build_times()
        return 0
    if args.torch:
        print("PyTorch steps as suite candidates (device memory = model / 1.6)\n")
        print(HEADER)
        for w in torch_candidates(args.clusters.split(",")):
            g, c = w.build()
            print(fmt(row(w.name, g, c, time_limit=args.time_limit)), flush=True)
        print(f"\n{time.perf_counter() - t0:.0f} s")
        return 0
    if not args.suite:
        print("All workloads (device memory as in the preset)\n")
        print(HEADER)
        for name, g0, real in all_workloads(args.max_ops, not args.no_real):
            for cl in args.clusters.split(","):
                c = wb.Cluster.preset(cl)
                g = costs_for_cluster(g0, c) if real else g0
                print(fmt(row(name, g, c, time_limit=args.time_limit)), flush=True)
    print("\nHard suite (workbench.workloads.hard_suite(), device memory = model / pressure)\n")
    print(HEADER)
    for w in hard_suite():
        w: Workload
        g, c = w.build()
        if g.n_ops > args.max_ops:
            continue
        r = row(w.name, g, c, time_limit=args.time_limit)
        n_hard += r["gap"] >= 0.05 and r["spread"] >= 0.15
        print(fmt(r), flush=True)
    print(f"\n{n_hard} hard pairs in the suite (gap >= 5 %, spread >= 15 %); "
          f"{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
