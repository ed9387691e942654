"""FastT checks of issue 46 (docs/results-fastt.md): ``single`` -- os_dpos at the bundled batch
on 2xV100-pcie against one GPU and data parallelism; ``why`` -- why Algorithm 2 keeps no split;
``colocate`` -- the replica co-location extension against the paper's algorithm; ``torch`` --
PyTorch captures made now (they carry split dimensions) through os_dpos.

Run: ``python bench/fastt_issue46.py single|why|colocate|torch|torch_bundled|torch_batch``
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def single() -> None:
    """os_dpos at the bundled batch on 2xV100-pcie against one GPU and data parallelism."""
    from workbench import Cluster, simulate, solve
    from workbench.errors import WorkbenchError
    from workbench.workloads import resolve
    c = Cluster.preset("2xV100-pcie")
    print("| model | batch | single | data_parallel | os_dpos (paper) | start | splits | os_dpos colocate=True | start |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in ["bert_base", "gnmt", "inception_v3", "lstm_seq2seq", "resnet50", "rnnlm", "transformer_base", "transformer_small"]:
        g, _ = resolve(name)
        row = {}
        for m, kw in (("single", {}), ("data_parallel", {}), ("os_dpos", {"time_limit": 30, "max_split_ops": 3}),
                      ("os_dpos_c", {"time_limit": 30, "max_split_ops": 3, "colocate": True})):
            try:
                p = solve(g, c, method=m.replace("_c", "") if m == "os_dpos_c" else m, **kw)
                row[m] = (simulate(p, c).makespan, p.info.get("start", ""), len(p.info.get("splits", []) or []))
            except WorkbenchError as e:
                row[m] = (float("nan"), type(e).__name__, 0)
        print(f"| {name} | {g.meta.get('batch')} | {row['single'][0]:.2f} | {row['data_parallel'][0]:.2f} | "
              f"{row['os_dpos'][0]:.2f} | {row['os_dpos'][1]} | {row['os_dpos'][2]} | {row['os_dpos_c'][0]:.2f} | {row['os_dpos_c'][1]} |", flush=True)


def why() -> None:
    """Why no split survives Algorithm 2 (FastT Table 6): for the first critical-path ops of DPOS's
plan of the data-parallel graph, DPOS's predicted finish time before and after each op's best
split (every dimension, n = 2..#GPUs, placed with DPOS given the strategy)."""
    from bench_fastt import model, v100s

    from workbench import simulate
    from workbench.solvers.list.data_parallel import dp_plan, ensure_split_dims, ring_plan
    from workbench.solvers.list.os_dpos import dpos_given
    from workbench.solvers.list.scheduling import dpos
    from workbench.transforms.split import split_op
    for name, n in (("resnet50", 2), ("bert_base", 2)):
        g = ensure_split_dims(model(name))
        c = v100s(n)
        p_dp = dp_plan(g, c, list(range(n)), method="os_dpos")
        best = ring_plan(dpos(p_dp.graph, c), c)
        h = best.graph
        ft = best.predicted["makespan_ms"]
        sched = simulate(best, c, congestion=False, order="plan")
        times = c.op_times(h)
        dev = best.device_array(c)
        cp = sorted(sched.critical_ops(), key=lambda v: -times[h.index[v], dev[h.index[v]]])
        print(f"{name} on {n} V100s: DP {simulate(p_dp, c).makespan:.3f} ms; DPOS on the DP graph "
              f"predicts {ft:.3f} ms, simulated {simulate(best, c).makespan:.3f} ms")
        k = 0
        for op in cp:
            dims = {d: s for d, s in (h.nx.nodes[op].get("splits") or {}).items() if s >= 2}
            if not dims:
                continue
            res = []
            for dim, size in dims.items():
                for m in range(2, min(n, size) + 1):
                    p2 = ring_plan(dpos_given(split_op(h, op, dim, m), c, best.placement), c)
                    res.append((p2.predicted["makespan_ms"], dim, m))
            b = min(res)
            print(f"  {op} ({h.nx.nodes[op]['op_type']}, {times[h.index[op], dev[h.index[op]]]:.3f} ms): "
                  f"best split {b[1]} x{b[2]} predicts {b[0]:.3f} ms ({(b[0] / ft - 1) * 100:+.2f} %)", flush=True)
            k += 1
            if k == 3:
                break


def colocate() -> None:
    """The replica co-location extension against the paper's algorithm: os_dpos(max_split_ops=0)
with colocate False / True, BERT-base at FastT's global batch 16 on 2 and 4 V100s (nvlink)."""
    from bench_fastt import model, v100s

    from workbench import simulate, solve
    g = model("bert_base")
    for n in (2, 4):
        c = v100s(n)
        a = simulate(solve(g, c, method="os_dpos", max_split_ops=0), c).makespan
        p = solve(g, c, method="os_dpos", max_split_ops=0, colocate=True)
        b = simulate(p, c).makespan
        print(f"bert_base(16) {n} V100s: os_dpos {a:.3f} ms, colocate=True {b:.3f} ms "
              f"({(a / b - 1) * 100:+.1f} % samples/s), start {p.info['start']}, "
              f"{len(p.info['starts'].get('dp_colocated', {}).get('colocated', []))} variables gathered", flush=True)


def torch_captures() -> None:
    """PyTorch captures made now (roofline V100 costs, profile=None): split dimensions derived
from the recorded shapes, then single / data_parallel / dpos / os_dpos (paper) on 2 and 4 V100s."""
    import time

    from workbench import Cluster, simulate, solve
    from workbench.io.torch_models import model_graph
    specs = [("torchvision:resnet18", {"batch": 16, "image": 64}),
             ("hf:bert-base", {"batch": 8, "seq": 64, "layers": 2})]
    print("| model | ops | batch-splittable ops | cluster | single | data_parallel | dpos | os_dpos (paper) | start | splits kept | split candidates | os_dpos CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for spec, kw in specs:
        g = model_graph(spec, **kw)
        n_split = sum("batch" in g.op(v)["splits"] for v in g.ops)
        for cname in ("2xV100-pcie", "4xV100-nvlink"):
            c = Cluster.preset(cname)
            ms = {m: simulate(solve(g, c, method=m), c).makespan for m in ("single", "data_parallel", "dpos")}
            t = time.process_time()
            p = solve(g, c, method="os_dpos", time_limit=60)
            cpu = time.process_time() - t
            print(f"| {spec} {kw} | {g.n_ops} | {n_split} | {cname} | {ms['single']:.3f} | {ms['data_parallel']:.3f} | "
                  f"{ms['dpos']:.3f} | {simulate(p, c).makespan:.3f} | {p.info['start']} | {len(p.info['splits'] or [])} | "
                  f"{p.info['split_candidates']} | {cpu:.1f} |", flush=True)


def torch_bundled() -> None:
    """The bundled PyTorch captures (sample_graphs/torch_*.json.gz) re-captured with shapes:
    their batch-splittable ops, then single / data_parallel / dpos / os_dpos (paper) on 2 and 4
    V100s with the preset's memory (V100 roofline costs as bundled). Names after the command
    pick captures (``torch_bundled torch_gpt2 torch_llama``)."""
    import time

    from workbench import Cluster, simulate, solve
    from workbench.samples import load_sample
    print("| capture | batch | ops | batch-splittable ops | cluster | single | data_parallel | dpos | "
          "os_dpos (paper) | start | splits kept | os_dpos CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    names = sys.argv[2:] or ["torch_bert_base", "torch_vit_b16", "torch_gpt2", "torch_llama"]
    for name in names:
        g = load_sample(name)
        n_split = sum("batch" in g.op(v).get("splits", {}) for v in g.ops)
        for cname in ("2xV100-pcie", "4xV100-nvlink"):
            c = Cluster.preset(cname)
            ms = {}
            for m in ("single", "data_parallel", "dpos"):
                try:
                    ms[m] = f"{simulate(solve(g, c, method=m), c).makespan:.2f}"
                except Exception as e:  # noqa: BLE001 - a method that cannot serve the pair
                    ms[m] = f"- ({type(e).__name__})"
            t = time.process_time()
            p = solve(g, c, method="os_dpos", time_limit=60)
            cpu = time.process_time() - t
            print(f"| {name} | {g.meta.get('batch')} | {g.n_ops} | {n_split} | {cname} | {ms['single']} | "
                  f"{ms['data_parallel']} | {ms['dpos']} | {simulate(p, c).makespan:.2f} | "
                  f"{p.info['start']} | {len(p.info['splits'] or [])} | {cpu:.1f} |", flush=True)


def torch_batch(batch: int = 4) -> None:
    """gpt2 and llama, bundled at batch 1 (data parallelism cannot split one sample), scaled to
    ``batch`` samples with ``with_batch`` along their captured batch dimensions: single /
    data_parallel / dpos / os_dpos (paper) on 2 and 4 V100s (``*``: out of memory)."""
    import time

    from workbench import Cluster, evaluate, simulate, solve
    from workbench.samples import load_sample
    from workbench.transforms.split_dims import with_batch
    print("| capture | batch | cluster | single | data_parallel | dpos | os_dpos (paper) | start | "
          "splits kept | os_dpos CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in ("torch_gpt2", "torch_llama"):
        g = with_batch(load_sample(name), batch)
        for cname in ("2xV100-pcie", "4xV100-nvlink"):
            c = Cluster.preset(cname)
            ms = {}
            for m in ("single", "data_parallel", "dpos", "os_dpos"):
                t = time.process_time()
                p = solve(g, c, method=m, **({"time_limit": 60} if m == "os_dpos" else {}))
                ms[m] = f"{simulate(p, c).makespan:.2f}" + ("" if evaluate(p, c).feasible else "*")
            cpu = time.process_time() - t
            print(f"| {name} | {batch} | {cname} | {ms['single']} | {ms['data_parallel']} | "
                  f"{ms['dpos']} | {ms['os_dpos']} | {p.info['start']} | "
                  f"{len(p.info['splits'] or [])} | {cpu:.1f} |", flush=True)


if __name__ == "__main__":
    {"single": single, "why": why, "colocate": colocate, "torch": torch_captures,
     "torch_bundled": torch_bundled, "torch_batch": torch_batch}[sys.argv[1]]()
