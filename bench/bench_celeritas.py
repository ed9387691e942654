"""Celeritas figures: placement time on a 36,000-op graph, Table 2 (nodes and CCR before and
after fusion), Table 5 (Standard Evaluation deviation) and Table 3 (simulated step time).

Run: ``.venv/bin/python bench/bench_celeritas.py`` (add ``--quick`` for smaller graphs;
``--suite`` prints only the hard-suite table, congestion on and off; ``--paper-grid`` the
paper's rule and the portfolio beside m-ETF, m-SCT, m-TOPO and Order-Place on real TF samples
and PyTorch steps (issue 46); ``--grid`` only the
real samples x {2xV100-pcie, 4xV100-nvlink, 8xA100-nvlink} x memory pressure {none, 1.2, 1.6}
table of celeritas against order_place and m_topo).
Prints markdown tables; ``docs/results-celeritas.md`` holds a copy with comments.

The paper's large models are not available here; the "paper-like" graphs are synthetic ones of
the same sizes and CCRs, made TensorFlow-like by giving every op with weights its own variable
op (an in-degree-0 source holding the weights, as in TF graphs), and taken through the
Standard Evaluation: profiles at batch 8..64 (:func:`workbench.costs.standard.synthetic_profiles`),
regression to batch 512, placement on the *estimate*, simulation on the *true* batch-512
profile. Devices hold 35 % of the true model (one device cannot hold it; three can); every
method places with 10 % headroom (90 % of each device), so estimation errors do not turn into
out-of-memory placements.
"""

from __future__ import annotations

import sys
import time

import workbench as wb
from workbench import Cluster, Device, Link, samples
from workbench.costs.standard import estimate_graph, relative_deviation, synthetic_profiles
from workbench.errors import WorkbenchError
from workbench.graph import OpGraph
from workbench.transforms.fusion import fuse
from workbench.workloads import memory_footprint  # device memory from the judge's live model

QUICK = "--quick" in sys.argv
METHODS = ["metis", "m_topo", "m_etf", "m_sct", "heft", "dpos", "order_place", "celeritas",
           "celeritas_pred", "celeritas_seg", "celeritas_free"]
# Celeritas variants: name -> keyword arguments of workbench.solve(method="celeritas")
VARIANTS = {"celeritas_pred": {"anchor": "pred"}, "celeritas_seg": {"anchor": "segments"},
            "celeritas_free": {"congestion": False, "order": "est"}}
HEADS = {"celeritas_pred": "celeritas (anchor=pred)", "celeritas_seg": "celeritas (segments)",
         "celeritas_free": "celeritas (contention-free EST, EST order)"}
PCIE = Link(0.02, 1e7)       # 10 GB/s, the paper's 4 V100 on a PCIe bus


def four_gpus(memory: float) -> Cluster:
    return Cluster([Device(f"gpu{i}", "gpu", memory) for i in range(4)], intra_host=PCIE,
                   name="4xV100-pcie")


def with_variables(g: OpGraph) -> OpGraph:
    """Every op holding memory (weights) gets a variable op feeding it: a TF-like graph with
    many in-degree-0 ops (Celeritas Section 4.2.2)."""
    ops, edges = [], []
    for v in g.ops:
        a = g.op(v)
        if a["memory"] > 0:
            ops.append((f"{v}/var", {"compute": {k: 0.005 for k in a["compute"]},
                                     "memory": a["memory"], "op_type": "VariableV2",
                                     "colocate": a.get("colocate")}))
            edges.append((f"{v}/var", v, {"bytes": a["memory"]}))
            a = {**a, "memory": 0.0}
        ops.append((v, a))
    edges += [(u, v, g.edge(u, v)) for u, v in g.edges()]
    return OpGraph.from_ops(ops, edges, name=g.name, meta={**g.meta, "batch": 32})


def paper_like(k: int = 1) -> list[tuple[str, OpGraph]]:
    """Synthetic stand-ins for the paper's four models (Table 2 sizes and CCRs; ``k`` times
    fewer ops)."""
    return [
        ("Inception_V3-like", with_variables(samples.inception(3560 // k, ccr=23.6))),
        ("NMT-like", with_variables(samples.lstm_grid(25400 // k, layers=4, ccr=13.1))),
        ("Transformer-like", with_variables(samples.transformer(23700 // k, ccr=78.7))),
        ("TensorHolography-like", with_variables(samples.cnn(2400 // k, ccr=34.7))),
    ]


def standard_evaluation(g: OpGraph, seed: int = 0):
    prof = synthetic_profiles(g, [8, 16, 32, 64, 512], seed=seed)
    true = prof.pop(512)
    return estimate_graph(prof, 512, name=g.name), true


def timing() -> None:
    print("## Placement time on 36,000-op graphs, 4 devices\n")
    k = 8 if QUICK else 1
    g = samples.transformer(36_000 // k)
    est, _ = standard_evaluation(with_variables(samples.transformer(23_700 // k, ccr=78.7)))
    print("| graph | method | ops | coarse nodes | solve s | of which fusion s |")
    print("|---|---|---:|---:|---:|---:|")
    for name, h in (("transformer", g), ("Transformer-like (variables, batch 512)", est)):
        c = four_gpus(memory_footprint(h, four_gpus(float("inf"))) / 3)
        t0 = time.perf_counter()
        fuse(h, c, R=200, M=0.25 * c.devices[0].memory)
        tf = time.perf_counter() - t0
        for m in ("order_place", "celeritas"):
            t0 = time.perf_counter()
            p = wb.solve(h, c, method=m)
            dt = time.perf_counter() - t0
            print(f"| {name} | {m} | {h.n_ops} | {p.info['fusion']['nodes_after']} | {dt:.2f} |"
                  f" {tf:.2f} |")
    print("\nThe paper reports 95 s for Celeritas on its 36,352-op Transformer (Table 4).\n")


def table2_and_5(graphs) -> None:
    print("## Nodes and CCR before / after Optimal Operation Fusion (cf. Table 2)\n")
    print("R = 200, M = 0.25 x device memory; CCR over the 10 GB/s link, batch 512 estimate.\n")
    print("| model | nodes | CCR | nodes after | CCR after | fusion s |")
    print("|---|---:|---:|---:|---:|---:|")
    devs = []
    for name, g in graphs:
        est, true = standard_evaluation(g)
        cap = memory_footprint(true, four_gpus(float("inf"))) * 0.35
        c = four_gpus(cap)
        t0 = time.perf_counter()
        f = fuse(est, c, R=200, M=0.25 * cap)
        dt = time.perf_counter() - t0
        s = f.stats
        print(f"| {name} | {s['nodes_before']} | {s['ccr_before']:.2f} | {s['nodes_after']} | "
              f"{s['ccr_after']:.2f} | {dt:.2f} |")
        devs.append((name, relative_deviation(est, true)))
    print("\n## Standard Evaluation: mean relative deviation at batch 512 (cf. Table 5)\n")
    print("Profiles at batch 8, 16, 32, 64 (synthetic: weights + activations, allocator "
          "rounding, workspace steps; time with launch overhead, batch^0.8..1.1, 5 % noise).\n")
    print("| model | Mem dev. | Time dev. | ops within 1 % (mem) | ops within 30 % (time) |")
    print("|---|---:|---:|---:|---:|")
    for name, d in devs:
        print(f"| {name} | {100 * d.mean_memory:.2f} % | {100 * d.mean_time:.2f} % | "
              f"{100 * d.cdf('memory', at=(0.01,))[0.01]:.0f} % | "
              f"{100 * d.cdf('time', at=(0.3,))[0.3]:.0f} % |")
    print()


def paper_rows(k: int) -> list:
    rows = []
    for name, g in paper_like(k):
        est, true = standard_evaluation(g)
        rows.append((f"{name} {g.n_ops}", est, true,
                     four_gpus(memory_footprint(true, four_gpus(float("inf"))) * 0.35)))
    return rows


def sample_rows() -> list:
    n = 150 if QUICK else 600
    gs = [
        ("cnn", samples.cnn(n)),
        ("inception", samples.inception(n)),
        ("transformer", samples.transformer(n)),
        ("lstm", samples.lstm_grid(n)),
        ("random (branchy)", samples.random_dag(n // 2, edge_prob=0.01)),
        ("cnn training (coloc.)", samples.to_training(samples.cnn(n // 2))),
    ]
    rows = []
    for name, g in gs:
        cap = max(memory_footprint(g, four_gpus(float("inf"))) * 0.35, 1.2 * float(g.c.memory.max()))
        rows.append((f"{name} {g.n_ops}", g, g, four_gpus(cap)))
    return rows


def run(method, est, true, c):
    """Place on ``est`` with 10 % headroom, simulate on ``true`` with and without link
    congestion; returns (makespan, makespan without congestion, oom, solve seconds)."""
    place_on = c.with_memory(c.devices[0].memory * 0.9)
    t0 = time.perf_counter()
    kw = VARIANTS.get(method, {})
    if kw:
        method = "celeritas"
    p = wb.solve(est, place_on, method=method, **kw)
    dt = time.perf_counter() - t0
    p = wb.Plan(true, p.placement, method=method, order=p.order, status=p.status)
    m = wb.evaluate(p, c)
    free = wb.simulate(p, c, congestion=False).makespan
    oom = any(v.startswith("memory") for v in m.violations)
    return m.makespan_ms, free, oom, dt


def _print_table(rows, have, results, col: int) -> None:
    heads = [HEADS.get(m, m) for m in have]
    print("| graph | " + " | ".join(heads) + " |")
    print("|---|" + "---:|" * len(have))
    wins = {m: [0, 0, 0] for m in have if m.startswith("celeritas")}  # < order_place, ties, < m_topo
    for (name, *_), cells in zip(rows, results):
        ok = [v[col] for v in cells.values() if v[0] is not None and not v[2]]
        best = min(ok, default=None)

        def fmt(v, best=best):
            if v[0] is None:
                return f"error ({v[1]})"
            s = f"{v[col]:.0f}" + (" OOM" if v[2] else "")
            return f"**{s}**" if best is not None and v[col] == best and not v[2] else s

        print(f"| {name} | " + " | ".join(fmt(cells[m]) for m in have) + " |")
        op, topo = cells.get("order_place"), cells.get("m_topo")
        for k, w in wins.items():
            cel = cells.get(k)
            if cel is None or cel[0] is None:
                continue
            if op is not None and op[0] is not None:
                if cel[col] < op[col] * (1 - 1e-6):
                    w[0] += 1
                elif cel[col] <= op[col] * (1 + 1e-6):
                    w[1] += 1
            if topo is not None and (topo[0] is None or topo[2] or cel[col] < topo[col]):
                w[2] += 1
    print()
    for k, (b, t, m) in wins.items():
        print(f"- {HEADS.get(k, k)}: better than Order-Place on "
              f"{b}/{len(rows)} rows ({t} ties), better than m-TOPO (or m-TOPO OOM) on "
              f"{m}/{len(rows)}.")
    print()


def table3(rows, title) -> None:
    have = [m for m in METHODS if (m if m not in VARIANTS else "celeritas") in wb.SOLVERS]
    missing = [m for m in METHODS if m not in have]
    secs: dict = {}
    results = []
    for _name, est, true, c in rows:
        cells = {}
        for m in have:
            try:
                ms, free, oom, dt = run(m, est, true, c)
                cells[m] = (ms, free, oom)
                secs[m] = secs.get(m, 0.0) + dt
            except WorkbenchError as e:
                cells[m] = (None, type(e).__name__, True)
        results.append(cells)
    print(f"## {title}\n")
    _print_table(rows, have, results, 0)
    print("### The same plans simulated without link congestion\n")
    _print_table(rows, have, results, 1)
    if missing:
        print(f"Not registered yet, skipped: {', '.join(missing)}.\n")
    print("Total solve seconds over the rows: " +
          ", ".join(f"{m} {secs[m]:.1f}" for m in have if m in secs) + "\n")


SUITE = (("m_topo", "m_topo", {}), ("order_place", "order_place", {}),
         ("celeritas", "celeritas", {}),
         ("celeritas segments", "celeritas", {"anchor": "segments"}),
         ("segments, tensor cut", "celeritas", {"anchor": "segments", "boundaries": "tensors"}),
         ("celeritas EST order", "celeritas", {"order": "est"}),
         ("celeritas contention-free", "celeritas", {"congestion": False, "order": "est"}))


def suite_table() -> None:
    """Celeritas (default and variants) vs order_place and m_topo on the hard workload suite
    (workbench.workloads.hard_suite), congestion on and off; then every placement replayed
    with one op-level order (the simulator's rank policy) for all."""
    from workbench.workloads import hard_suite

    print("## Hard workload suite: simulated makespan (ms), congestion on / off\n")
    print("`celeritas`: the default (anchor previous, transfers queued on the links in the EST, "
          "order best of EST / op-level rank). `segments`: device boundaries from the fusion DP "
          "at device level (`anchor=\"segments\"`). `EST order`: `order=\"est\"`. "
          "`contention-free`: `congestion=False, order=\"est\"` (Eq. 7 as written, the default "
          "before issue 15). `worse than` lists what a variant loses to with congestion on. "
          "Plans are made once; congestion on/off is only how the simulator runs them.\n")
    print("| workload | ops | " + " | ".join(m[0] for m in SUITE) +
          " | celeritas worse than | segments worse than | solve s (celeritas) |")
    print("|---|---|" + "---|" * (len(SUITE) + 3))
    same = []
    lose = {"celeritas": 0, "celeritas segments": 0}
    for w in hard_suite():
        g, c = w.build()
        res, plans, secs = {}, {}, {}
        for name, m, kw in SUITE:
            try:
                t0 = time.perf_counter()
                p = wb.solve(g, c, method=m, **kw)
                secs[name] = time.perf_counter() - t0
                plans[name] = p
                res[name] = (wb.simulate(p, c).makespan,
                             wb.simulate(p, c, congestion=False).makespan,
                             p.status)
            except Exception as exc:  # noqa: BLE001 - report, keep going
                res[name] = (float("nan"), float("nan"), f"error: {exc}"[:40])
        cells = [f"{v[0]:.2f} / {v[1]:.2f}" + ("" if v[2] == "heuristic" else f" ({v[2]})")
                 for v in res.values()]

        def worse(k, res=res):
            return ", ".join(b for b in ("m_topo", "order_place")
                             if not res[k][0] <= res[b][0] * (1 + 1e-9)) or "-"

        for k in lose:
            lose[k] += worse(k) != "-"
        print(f"| {w.name} | {g.n_ops} | " + " | ".join(cells) +
              f" | {worse('celeritas')} | {worse('celeritas segments')} | "
              f"{secs.get('celeritas', float('nan')):.2f} |", flush=True)
        same.append((w.name, {k: wb.simulate(plans[k], c, order="rank").makespan
                              for k in ("m_topo", "order_place", "celeritas",
                                        "celeritas segments") if k in plans}))
    print()
    for k, n in lose.items():
        print(f"- {k}: worse than m_topo or order_place (congestion on) on {n}/{len(same)} pairs.")
    print("\n### The same placements, every one run with the op-level rank order "
          "(congestion on)\n")
    print("Separates placement from order: `simulate(plan, order=\"rank\")` for every method.\n")
    heads = list(same[0][1]) if same else []
    print("| workload | " + " | ".join(heads) + " | celeritas worse than |")
    print("|---|" + "---|" * (len(heads) + 1))
    for name, r in same:
        bad = ", ".join(b for b in ("m_topo", "order_place")
                        if not r["celeritas"] <= r[b] * (1 + 1e-9)) or "-"
        print(f"| {name} | " + " | ".join(f"{r[k]:.2f}" for k in heads) + f" | {bad} |")
    print()


GRID_SAMPLES = ("bert_base", "gnmt", "inception_small", "inception_v3", "lstm_seq2seq", "mlp",
                "resnet50", "resnet_small", "rnnlm", "transformer_base", "transformer_small")
GRID_CLUSTERS = ("2xV100-pcie", "4xV100-nvlink", "8xA100-nvlink")
GRID_PRESSURES = (None, 1.2, 1.6)
GRID_TOLERANCE = 0.05


def grid_cells(samples_=GRID_SAMPLES, clusters=GRID_CLUSTERS, pressures=GRID_PRESSURES,
               methods=("celeritas", "order_place", "m_topo")):
    """Yield ``(workload, graph, cluster, {method: (makespan with congestion, status, s)})`` for
    every real sample x cluster x memory pressure (roofline costs for the cluster's devices, as
    in the hard suite; pressure None = the preset's own memory)."""
    from workbench.workloads import Workload, _sample

    for name in samples_:
        for cl in clusters:
            for mp in pressures:
                w = Workload(f"{name}-{cl}-mp{mp or 'none'}", _sample(name), cl, mp,
                             device_costs=True)
                g, c = w.build()
                res = {}
                for m in methods:
                    t0 = time.perf_counter()
                    try:
                        p = wb.solve(g, c, method=m)
                        res[m] = (float(wb.simulate(p, c).makespan), p.status,
                                  time.perf_counter() - t0)
                    except WorkbenchError as exc:
                        res[m] = (float("nan"), f"error: {exc}"[:60], time.perf_counter() - t0)
                yield w, g, c, res


def grid_table(tolerance: float = GRID_TOLERANCE) -> int:
    """Celeritas against order_place and m_topo on the real samples x 3 clusters x memory
    pressure {none, 1.2, 1.6}, congestion on. Prints the grid; returns the number of cells where
    celeritas is worse than either by more than ``tolerance``."""
    print("## Celeritas on the real samples x clusters x memory pressure (congestion on)\n")
    print("Simulated makespan (ms). `ratio`: celeritas / min(order_place, m_topo); `!` marks a "
          f"cell worse by more than {tolerance:.0%}. `infeasible`: best effort overfilled a "
          "device.\n")
    print("| sample | cluster | pressure | ops | celeritas | order_place | m_topo | ratio | "
          "celeritas s |")
    print("|---|---|---|---|---|---|---|---|---|")
    bad = cells = 0
    ratios = []
    for w, g, c, res in grid_cells():
        cel = res["celeritas"][0]
        ref = min(res["order_place"][0], res["m_topo"][0])
        ratio = cel / ref if ref > 0 else float("nan")
        cells += 1
        ratios.append(ratio)
        flag = " !" if not ratio <= 1 + tolerance else ""
        bad += bool(flag)

        def fmt(m, res=res):
            ms, st, _ = res[m]
            return f"{ms:.2f}" + ("" if st == "heuristic" else f" ({st})")

        print(f"| {w.graph.__name__[7:]} | {w.cluster} | {w.memory_pressure or 'none'} | "
              f"{g.n_ops} | {fmt('celeritas')} | {fmt('order_place')} | {fmt('m_topo')} | "
              f"{ratio:.3f}{flag} | {res['celeritas'][2]:.2f} |", flush=True)
    print(f"\nceleritas worse than order_place or m_topo by more than {tolerance:.0%}: "
          f"{bad} of {cells} cells; worst ratio {max(ratios):.3f}.\n")
    return bad


PAPER_GRID_TF = ("bert_base", "gnmt", "inception_v3", "lstm_seq2seq", "resnet50", "rnnlm",
                 "transformer_base", "transformer_small")
PAPER_GRID_TORCH = ("torch_gpt2", "torch_bert_base", "torch_vit_b16", "torch_llama")
PAPER_GRID_METHODS = ("celeritas", "celeritas_portfolio", "m_etf", "m_sct", "m_topo",
                      "order_place")


def paper_grid(tolerance: float = GRID_TOLERANCE, torch_only: bool = False) -> None:
    """Issue 46: the paper's rule (``celeritas``) and the portfolio (``celeritas_portfolio``)
    beside Baechi's m-ETF, m-SCT, m-TOPO and Order-Place on the real TF samples (preset memory)
    and the bundled PyTorch steps (memory pressure 1.6, as the suite builds them) x
    {2xV100-pcie, 4xV100-nvlink, 8xA100-nvlink}, congestion on; one run per cell. For every
    cell where the rule is more than ``tolerance`` worse than the best of the others it prints
    which candidate the portfolio kept and the rule's bytes over the links against the best.
    ``torch_only`` (``--torch-only``): the PyTorch rows alone (after a re-capture)."""
    from workbench.workloads import Workload, _sample

    cols = PAPER_GRID_METHODS
    print("| sample | cluster | pressure | ops | " + " | ".join(cols) + " | rule / best other |")
    print("|---" * (len(cols) + 5) + "|")
    misses = []
    cells = 0
    for names, mp in ((() if torch_only else PAPER_GRID_TF, None), (PAPER_GRID_TORCH, 1.6)):
        for name in names:
            for cl in GRID_CLUSTERS:
                w = Workload(f"{name}-{cl}", _sample(name), cl, mp, device_costs=True)
                g, c = w.build()
                ms, plans = {}, {}
                for m in cols:
                    try:
                        plans[m] = wb.solve(g, c, method=m)
                        ms[m] = float(wb.simulate(plans[m], c).makespan)
                    except WorkbenchError:
                        ms[m] = float("nan")
                others = {m: v for m, v in ms.items() if m not in ("celeritas",
                                                                   "celeritas_portfolio")}
                best_m = min(others, key=lambda m: others[m])
                ratio = ms["celeritas"] / others[best_m]
                cells += 1
                flag = " !" if ratio > 1 + tolerance else ""
                print(f"| {name} | {cl} | {mp or 'none'} | {g.n_ops} | "
                      + " | ".join(f"{ms[m]:.2f}" for m in cols)
                      + f" | {ratio:.3f} ({best_m}){flag} |", flush=True)
                if flag:
                    rule = wb.simulate(plans["celeritas"], c)
                    best = wb.simulate(plans[best_m], c)
                    misses.append((name, cl, ratio, best_m,
                                   plans["celeritas_portfolio"].info.get("placement_from"),
                                   len(plans["celeritas"].devices_used()),
                                   len(plans[best_m].devices_used()),
                                   float(rule.t_bytes.sum()) / 1e9,
                                   float(best.t_bytes.sum()) / 1e9))
    print(f"\nrule worse than the best of m_etf, m_sct, m_topo, order_place by more than "
          f"{tolerance:.0%}: {len(misses)} of {cells} cells\n")
    print("| sample | cluster | rule / best | best | portfolio kept | GPUs rule / best | "
          "GB sent rule / best |")
    print("|---|---|---|---|---|---|---|")
    for name, cl, ratio, bm, kept, du, db, br, bb in misses:
        print(f"| {name} | {cl} | {ratio:.3f} | {bm} | {kept} | {du} / {db} | "
              f"{br:.2f} / {bb:.2f} |")


PAPER_GRID_PROBES = (("lstm_seq2seq", "8xA100-nvlink", None), ("gnmt", "8xA100-nvlink", None),
                     ("rnnlm", "8xA100-nvlink", None), ("transformer_small", "2xV100-pcie", None),
                     ("torch_gpt2", "4xV100-nvlink", 1.6), ("torch_vit_b16", "4xV100-nvlink", 1.6),
                     ("torch_llama", "4xV100-nvlink", 1.6))


def paper_grid_probes() -> None:
    """Where the paper's rule loses (issue 46): the rule as written against the same rule with
    the op-level rank order (``order="rank"``), without fusion (``R=1``) and with the
    contention-free EST (``congestion=False``), simulated makespan with congestion (ms)."""
    from workbench.workloads import Workload, _sample

    variants = (("rule", {}), ("order=rank", {"order": "rank"}), ("R=1", {"R": 1}),
                ("congestion=False", {"congestion": False}))
    print("| sample | cluster | " + " | ".join(n for n, _ in variants) + " | m_sct | m_etf |")
    print("|---" * (len(variants) + 4) + "|")
    for name, cl, mp in PAPER_GRID_PROBES:
        g, c = Workload(f"{name}-{cl}", _sample(name), cl, mp, device_costs=True).build()
        cells = [wb.simulate(wb.solve(g, c, method="celeritas", **kw), c).makespan
                 for _, kw in variants]
        cells += [wb.simulate(wb.solve(g, c, method=m), c).makespan for m in ("m_sct", "m_etf")]
        print(f"| {name} | {cl} | " + " | ".join(f"{x:.2f}" for x in cells) + " |", flush=True)


def main() -> None:
    if "--paper-grid-probes" in sys.argv:
        paper_grid_probes()
        return
    if "--paper-grid" in sys.argv:
        paper_grid(torch_only="--torch-only" in sys.argv)
        return
    if "--suite" in sys.argv:
        suite_table()
        return
    if "--grid" in sys.argv:
        grid_table()
        return
    timing()
    table2_and_5(paper_like(8 if QUICK else 1))
    table3(sample_rows(), "Simulated step time (ms), sample graphs, 4 GPUs holding 35 % each")
    k = 24 if QUICK else 6
    table3(paper_rows(k), f"Simulated step time (ms), paper-like graphs ({k}x fewer ops) after "
                          f"Standard Evaluation (cf. Table 3)")
    print("Bold: best plan within memory. OOM: the plan exceeds a device's memory on the true "
          "profile. Makespans from workbench.simulate with link congestion, each plan's own "
          "per-device order where it has one, FIFO otherwise.")


if __name__ == "__main__":
    main()
