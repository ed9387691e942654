"""Pesto checks of issue 46 (docs/results-pesto.md): ``components`` -- which component produced
each plan, the memory balance on the fine plan, a looser memory limit started from the tighter
one's plan; ``fig5`` -- the ILP with link congestion modelled against without.

Run: ``python bench/pesto_issue46.py components|fig5|fig5_congested|repair|milp|milp_cuts|milp_200|groups|highs|highs_200``
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def components() -> None:
    """Issue 46, Pesto: which component produced each plan, the balance on the fine plan, and a
looser memory limit started from the tighter one's plan (rnnlm on 2xV100-pcie)."""
    from workbench import simulate, solve
    from workbench.workloads import Workload, _sample, workload
    print("| pair | makespan ms | produced_by | fine balance: max share / worst vs cap / holds |")
    print("|---|---|---|---|")
    for name in ["rnnlm-4xV100", "bert_base-4xV100", "resnet50-4xV100"]:
        g, c = workload(name).build()
        p = solve(g, c, method="pesto", time_limit=30)
        fb = p.stats["fine_balance"]
        print(f"| {name} | {simulate(p, c).makespan:.2f} | {p.stats['produced_by']} | "
              f"{fb['max_share']:.3f} / {fb['worst']:.3f} / {fb['holds']} |", flush=True)
    tight_g, tight_c = Workload("rnnlm-t", _sample("rnnlm"), "2xV100-pcie", 1.6, device_costs=True).build()
    loose_g, loose_c = Workload("rnnlm-l", _sample("rnnlm"), "2xV100-pcie", None, device_costs=True).build()
    pt = solve(tight_g, tight_c, method="pesto", time_limit=30)
    pl = solve(loose_g, loose_c, method="pesto", time_limit=30)
    pls = solve(loose_g, loose_c, method="pesto", time_limit=30, start=pt)
    print()
    print("rnnlm 2xV100-pcie: pressure 1.6 -> "
          f"{simulate(pt, tight_c).makespan:.2f} ms ({pt.stats['produced_by']}); preset memory, no start -> "
          f"{simulate(pl, loose_c).makespan:.2f} ms ({pl.stats['produced_by']}); preset memory, start= the 1.6 plan -> "
          f"{simulate(pls, loose_c).makespan:.2f} ms ({pls.stats['produced_by']}; the 1.6 plan under the preset memory "
          f"{pls.stats['start_ms']:.2f} ms)")


def fig5() -> None:
    """Pesto Fig. 5: the ILP with link congestion modelled against without, both judged with
congestion on (simulate default), 30 s each, guard off so the ILP's own plan is compared."""
    from workbench import simulate, solve
    from workbench.workloads import Workload, _sample, workload
    cases = [("rnnlm-4xV100", workload("rnnlm-4xV100").build()),
             ("rnnlm 2xV100-pcie 1.6", Workload("r", _sample("rnnlm"), "2xV100-pcie", 1.6, device_costs=True).build()),
             ("bert_base-4xV100", workload("bert_base-4xV100").build())]
    print("| pair | congestion-aware ms (produced_by) | congestion-unaware ms (produced_by) | unaware / aware |")
    print("|---|---|---|---|")
    for name, (g, c) in cases:
        r = {}
        for cong in (True, False):
            p = solve(g, c, method="pesto", congestion=cong, guard=False, time_limit=30)
            r[cong] = (simulate(p, c).makespan, p.stats["produced_by"])
        print(f"| {name} | {r[True][0]:.2f} ({r[True][1]}) | {r[False][0]:.2f} ({r[False][1]}) | {r[False][0] / r[True][0]:.3f} |", flush=True)


def fig5_congested() -> None:
    """Fig. 5 where congestion matters: multi-branch graphs at a high CCR (many large parallel
transfers) on PCIe and on two hosts (one network link each way), 20 s each, guard off."""
    from workbench import Cluster, samples, simulate, solve
    cases = [("inception60 ccr 2", samples.inception(60, ccr=2.0), "2xV100-pcie"),
             ("inception60 ccr 2", samples.inception(60, ccr=2.0), "2x2xV100"),
             ("layered60 ccr 3 fanout 8", samples.layered(60, ccr=3.0, fanout=8), "2x2xV100"),
             ("transformer60 ccr 2", samples.transformer(60, ccr=2.0), "2x2xV100")]
    print("| graph | cluster | aware ms (produced_by) | unaware ms (produced_by) | unaware: model's ms / "
          "simulated without congestion | unaware / aware |")
    print("|---|---|---|---|---|---|")
    for name, g, cname in cases:
        c = Cluster.preset(cname)
        r = {}
        for cong in (True, False):
            p = solve(g, c, method="pesto", congestion=cong, guard=False, time_limit=20, threads=1)
            r[cong] = (simulate(p, c).makespan, p.stats["produced_by"], p.predicted.get("makespan_ms"),
                       simulate(p, c, congestion=False).makespan)
        print(f"| {name} | {cname} | {r[True][0]:.2f} ({r[True][1]}) | {r[False][0]:.2f} ({r[False][1]}) | "
              f"{r[False][2]:.2f} / {r[False][3]:.2f} | {r[False][0] / r[True][0]:.3f} |", flush=True)


def repair() -> None:
    """Each rule of repair_balance, without and with its cleanup, on the plans of dpos,
celeritas and m_etf: simulated makespan (ms) / ops moved / CPU seconds of the repair."""
    import time

    from workbench import simulate, solve
    from workbench.solvers.pesto.balance import MODES, repair_balance
    from workbench.solvers.pesto.ilp import fine_balance
    from workbench.workloads import Workload, _sample, workload
    cases = [("rnnlm 2xV100-pcie", Workload("r", _sample("rnnlm"), "2xV100-pcie", None, device_costs=True).build()),
             ("rnnlm-4xV100", workload("rnnlm-4xV100").build()),
             ("bert_base-4xV100", workload("bert_base-4xV100").build())]
    rules = [(m, r) for m in MODES for r in (False, True)]
    print("| pair | heuristic | ms (max share) | " + " | ".join(m + ("+refine" if r else "") for m, r in rules) + " |")
    print("|---|---|---|" + "---|" * len(rules))
    for name, (g, c) in cases:
        for m in ("dpos", "celeritas", "m_etf"):
            p = solve(g, c, method=m)
            row = [f"{simulate(p, c).makespan:.2f} ({fine_balance(p, c, 0.25)['max_share']:.2f})"]
            for mode, refine in rules:
                t = time.process_time()
                q, n = repair_balance(p, c, 0.25, mode, refine=refine)
                cpu = time.process_time() - t
                row.append(f"{simulate(q, c).makespan:.2f} / {n} / {cpu:.2f}")
            print(f"| {name} | {m} | " + " | ".join(row) + " |", flush=True)


def _pairs() -> list:
    """The five pairs of ``components``: three hard-suite pairs, rnnlm on 2xV100-pcie at
    memory pressure 1.6 and with the preset's memory."""
    from workbench.workloads import Workload, _sample, workload
    out = [(n, *workload(n).build()) for n in ["rnnlm-4xV100", "bert_base-4xV100", "resnet50-4xV100"]]
    out.append(("rnnlm 2xV100-pcie 1.6",
                *Workload("t", _sample("rnnlm"), "2xV100-pcie", 1.6, device_costs=True).build()))
    out.append(("rnnlm 2xV100-pcie",
                *Workload("l", _sample("rnnlm"), "2xV100-pcie", None, device_costs=True).build()))
    return out


def milp(limit: float = 30.0) -> None:
    """Who produces the plan, the first pass against the balance-capped coarsening (issue 46,
    third pass): each pair with the default (coarse vertices' own caps, the fine repair after
    expansion), with ``coarse_balance=True`` (units capped by the balance, the original caps in
    the coarse rows, the coarse warm start repaired) and that without the guard; rnnlm on
    2xV100-pcie with the preset's memory also from the 1.6 plan (``start=``). CPU s: this process's CPU time for the call
    (wall-clock limits on a shared machine; the CPU a run got says how loaded it was)."""
    _milp_rows([("default", {}), ("coarse_balance=True", {"coarse_balance": True}),
                ("coarse_balance=True, guard=False", {"coarse_balance": True, "guard": False})],
               limit, start_row=True)


def milp_cuts(limit: float = 45.0) -> None:
    """Issue 46, fourth pass: the paper's pipeline against the extension ``load_cuts`` (the
    device-load rows in the MILP), alone and with ``coarse_balance``, at the issue's 45 s."""
    _milp_rows([("default", {}), ("load_cuts=True", {"load_cuts": True}),
                ("coarse_balance=True", {"coarse_balance": True}),
                ("coarse_balance=True, load_cuts=True", {"coarse_balance": True, "load_cuts": True})],
               limit, start_row=False)


def milp_200(limit: float = 45.0) -> None:
    """The paper's coarse size (~200 vertices, Section 3.3) instead of the default 60, with and
    without ``load_cuts``, at the issue's 45 s."""
    _milp_rows([("target=200", {"target": 200}),
                ("target=200, load_cuts=True", {"target": 200, "load_cuts": True})],
               limit, start_row=False)


def _milp_rows(variants: list, limit: float, start_row: bool) -> None:
    """One row per pair and variant: the simulated makespan, ``produced_by``, the coarse model,
    the MILP's incumbent and bound, and how far the bound leaves the coarse warm start
    (``warm start - bound`` over the warm start: what the MILP could still gain on the coarse
    graph)."""
    import time

    from workbench import simulate, solve
    print("| pair | variant | ms | produced_by | coarse vertices (cap x) | coarse warm start ms | "
          "MILP status / objective / bound | warm start above bound | build s / MILP s | "
          "fine balance holds (moved ops) | wall s / CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    tight = None
    for name, g, c in _pairs():
        extra = ([("default, start= the 1.6 plan", {"start": tight})]
                 if tight is not None and start_row else [])
        for vname, kw in variants + extra:
            t, cpu = time.perf_counter(), time.process_time()
            p = solve(g, c, method="pesto", time_limit=limit, **kw)
            if name.endswith("1.6") and vname == "default":
                tight = p   # a looser limit must not return worse than this plan
            wall, cpu = time.perf_counter() - t, time.process_time() - cpu
            st = p.stats
            fb = st.get("fine_balance", {})
            warm = st.get("warm_start_predicted_ms") or float("nan")
            above = (warm - st["bound_ms"]) / warm * 100
            print(f"| {name} | {vname} | {simulate(p, c).makespan:.2f} | {st['produced_by']} | "
                  f"{st['coarse_vertices']} ({st.get('coarse_unit_cap_x')}) | {warm:.2f} | "
                  f"{st['ilp_status']} / {st['objective_ms']:.2f} / {st['bound_ms']:.2f} | "
                  f"{above:.1f} % | "
                  f"{st.get('build_seconds', float('nan')):.1f} / {st['milp_seconds']:.1f} | "
                  f"{fb.get('holds')} ({st.get('balance_moved_ops', 0)}) | {wall:.1f} / {cpu:.1f} |",
                  flush=True)


def groups() -> None:
    """Why the coarse MILP had little to decide: Theorem 3.5 coarsening (pesto's defaults)
    unites the colocation groups of merged vertices; per target size, the coarse vertices, the
    united groups and the footprint (GB) of the largest ones, against the whole footprint F."""
    import numpy as np

    from workbench.solvers.pesto.balance import tensor_footprint
    from workbench.transforms.coarsen import coarsen
    from workbench.workloads import workload
    print("| pair | ops | groups | F GB | target | coarse vertices | united groups | largest groups GB |")
    print("|---|---|---|---|---|---|---|---|")
    for name in ["rnnlm-4xV100", "bert_base-4xV100", "resnet50-4xV100"]:
        g, c = workload(name).build()
        fp = tensor_footprint(g)
        for t in [600, 300, 60]:
            cg = coarsen(g, t, cluster=c, balance=2.0, cp_slack=0.1)
            cfp = [sum(fp[g.index[v]] for v in ms) for ms in cg.members]
            held: dict = {}
            for i, gid in enumerate(cg.coarse.c.coloc.tolist()):
                if gid >= 0:
                    held[gid] = held.get(gid, 0.0) + cfp[i]
            top = ", ".join(f"{x / 1e9:.2f}" for x in sorted(held.values(), reverse=True)[:3])
            print(f"| {name} | {g.n_ops} | {len(g.c.coloc_groups)} | {np.sum(fp) / 1e9:.2f} | {t} | "
                  f"{cg.coarse.n_ops} | {len(held)} | {top} |", flush=True)


def highs(limit: float = 120.0) -> None:
    """The MILP alone on resnet50-4xV100's balance-capped coarse graph (coarse_balance): the
    warm start (the best repaired heuristic) passed to HiGHS, one thread, ``limit`` s wall;
    incumbent, bound and the CPU s HiGHS got; then 20 s with ``mip_heuristic_effort`` 0.5."""
    import time

    from workbench import simulate
    from workbench.budget import Budget
    from workbench.solvers.milp import solve_milp
    from workbench.solvers.pesto.balance import tensor_footprint
    from workbench.solvers.pesto.heuristics import best_heuristic
    from workbench.solvers.pesto.ilp import PestoModel, _balancer, _coarsen
    from workbench.workloads import workload
    g, c = workload("resnet50-4xV100").build()
    fp = tensor_footprint(g)
    cg, x, caps = _coarsen(g, c, 60, fp, 0.25, balance=2.0, cp_slack=0.1, deadline=None)
    cfp = [float(sum(fp[g.index[v]] for v in ms)) for ms in cg.members]
    fix = _balancer(c, 0.25, True, footprint=cfp, caps=caps, tag="coarse_balance")
    wp, ws, wm, _tried, _err = best_heuristic(cg.coarse, c, "auto", True, 0, budget=Budget(60), fix=fix)
    t = time.process_time()
    m = PestoModel(cg.coarse, c, congestion=True, horizon=ws.makespan, memory_balance=0.25,
                   footprint=cfp, caps=caps)
    print(f"coarse {cg.coarse.n_ops} vertices (cap x {x}); warm start {wm} {ws.makespan:.2f} ms "
          f"(expanded {simulate(cg.expand(wp), c).makespan:.2f}); model {m.prob.numConstraints()} "
          f"rows, {m.n_binaries} binaries, built in {time.process_time() - t:.1f} CPU s")
    for lim, opts in ((limit, {}), (20.0, {"mip_heuristic_effort": 0.5})):
        t = time.process_time()
        r = solve_milp(m.prob, time_limit=lim, warm_start=m.warm_values(ws.device, ws), threads=1,
                       options=opts)
        print(f"HiGHS {opts or 'defaults'}, {lim:.0f} s: {r.status}, incumbent {r.objective:.2f}, "
              f"bound {r.bound:.2f}, {r.seconds:.1f} s wall / {time.process_time() - t:.1f} CPU s",
              flush=True)


def highs_200(limit: float = 20.0) -> None:
    """The MILP alone on bert_base-4xV100 coarsened to the paper's ~200 vertices (pesto's
    default model: balance rows, no load rows), its best coarse heuristic as the warm start,
    one thread, ``limit`` s: how far HiGHS runs past its limit, with its defaults and with
    symmetry detection off."""
    import time

    from workbench.budget import Budget
    from workbench.solvers.milp import solve_milp
    from workbench.solvers.pesto.balance import tensor_footprint
    from workbench.solvers.pesto.heuristics import best_heuristic
    from workbench.solvers.pesto.ilp import PestoModel, _coarsen
    from workbench.workloads import workload
    g, c = workload("bert_base-4xV100").build()
    fp = tensor_footprint(g)
    cg, _x, _caps = _coarsen(g, c, 200, fp, None, balance=2.0, cp_slack=0.1, deadline=None)
    cfp = [float(sum(fp[g.index[v]] for v in ms)) for ms in cg.members]
    _wp, ws, _wm, _t, _e = best_heuristic(cg.coarse, c, "auto", True, 0, budget=Budget(30))
    m = PestoModel(cg.coarse, c, congestion=True, horizon=ws.makespan, memory_balance=0.25,
                   footprint=cfp)
    for opts in ({}, {"mip_detect_symmetry": False}):
        w, t = time.perf_counter(), time.process_time()
        r = solve_milp(m.prob, time_limit=limit, warm_start=m.warm_values(ws.device, ws),
                       threads=1, options=opts)
        print(f"{opts or 'defaults'}: {r.status}, {r.objective:.2f} / {r.bound:.2f}, "
              f"{r.seconds:.1f} s (limit {limit:.0f}); wall {time.perf_counter() - w:.1f}, "
              f"CPU {time.process_time() - t:.1f}", flush=True)


if __name__ == "__main__":
    {"components": components, "fig5": fig5, "fig5_congested": fig5_congested,
     "repair": repair, "milp": milp, "milp_cuts": milp_cuts, "milp_200": milp_200, "groups": groups,
     "highs_200": highs_200,
     "highs": highs}[sys.argv[1]]()
