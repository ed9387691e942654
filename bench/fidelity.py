"""Simulated vs measured step time of real TensorFlow programs (the fidelity of the judge).

For every sample model (``sample_graphs/``) and several plans from registered solvers, the plan
is simulated on a cluster of logical CPU devices whose links were calibrated on this machine,
then applied to the real program and measured; the relative error |simulated - measured| /
measured is printed per plan, with the median and the worst over all plans.

By default each graph is re-profiled first (costs must come from the machine that measures), and a
calibrated model (:func:`workbench.runtime.calibrate_model`: ``--changes`` of contention_bench,
handoff, rescale, live_memory, step_cost; optional shared_memory, recv_fit, overlap, contention,
wakeup) is fitted to probe runs of the model (``--no-fit``: none): a random placement, a
single-device reference (three sessions), the reference in list-scheduling order, the reference
with one op on a second device (three such probes, each moving another op) and a two-device split
in topological and in list-scheduling order. No probe is among the evaluated plans. The per-tensor
costs between devices are measured once by micro-benchmarks
(:func:`workbench.runtime.handoff.measure_handoff`, the ``handoff`` change), and the slowdown of
ops while another device computes has its slope measured untraced after the plans' rounds
(:func:`workbench.runtime.contention.measure_contention`, the ``contention_bench`` change); the
model is first fitted with the traced slope (``overlap``) and with a per-tensor latency and receive
overhead fitted to the random probe (``shared_memory``, ``recv_fit``), which the ``recv-fit``,
``traced``, ``base`` and ``contention`` rungs use. The probes are timed again in the same
interleaved rounds as the plans and the model is re-anchored to those times
(:meth:`~workbench.fidelity.model.JudgeModel.reanchor`: speed, live-memory slope, multi-device
step cost and, where fitted, receive overhead). Printed per plan: the fidelity ladder -- step time
predicted with roofline costs, with profiled costs, by the calibrated model, and measured (median,
spread = half the interquartile range) -- and the ablation and extension rungs (``_rung_models``):
``probe-alone`` the calibrated model as fitted at calibration (not re-anchored); ``base`` with
``contention`` in place of the slowdown, the fitted latency and receive overhead, without
``rescale``, ``live_memory`` and ``step_cost`` (the default before round four,
``docs/runtime.md``); ``recv-fit`` with the fitted latency and receive overhead in place of the
measured hand-off costs (the default of round six); ``one-session`` anchored to one session of the
reference and one one-op probe (round seven); ``one-slope`` with the live-memory slope fitted on
one device serving plans on several too (round seven); ``no-rescale`` and ``no-stepcost`` without
one of them; ``no-memory`` without ``live_memory`` (op costs that follow the memory live in the
plan's order, fitted to the order probe); ``uncapped`` with the live memory not capped at the
last-level cache; ``traced`` with the slowdown's slope fitted from traced op times (``overlap``),
the fitted latency and receive overhead (the default of rounds four and five); ``contention`` with
the optional ``contention`` change in place of the slowdown (fitted from the same traces);
``wakeup`` the ``recv-fit`` model plus the optional ``wakeup`` change, fitted to a second probe
(``fit_wakeup``: timed alone, then refitted to its time in the rounds). The probes' rows (measured,
every rung) are printed after the plans and never counted. At the end per rung the median and worst
error, pairwise order agreement (all pairs and those beyond the measured spread) and the models
whose predicted best is within the spread of the measured best, for all plans and for the
multi-device plans alone (the single-device plan shares its placement with the profile and with
``rescale``'s reference). ``--residuals`` traces each model's worst plan and prints its error parts
(:func:`workbench.fidelity.trace_residuals.residuals`). The plans' timed steps are interleaved in ``--rounds``
passes so that a drifting machine slows all plans alike. Logical CPU devices share the machine's
cores: use at most as many devices as idle cores (``--devices``, default 2). See
``docs/runtime.md``.

With ``--realtime`` every timed, traced and profiled step (link calibration, profiles, probes,
plans, residual traces) runs with the process's threads under ``SCHED_FIFO``
(:mod:`workbench.runtime.realtime`): on a loaded machine a woken thread then runs at once
instead of waiting for the scheduler's 4 ms tick, and idle CPUs poll instead of sleeping
(``--no-idle-poll``: they may sleep; :func:`workbench.runtime.realtime.idle_poll`). Solving and
graph building stay at normal priority. A machine that refuses it stops the bench with the
reason. Per plan the share of timed steps within 0.3 ms of a multiple of 4 ms is printed
(``ticks``), and the minor page faults per timed step (``faults``: every session holds the
memory its steps free, :mod:`workbench.runtime.steady_memory`; a warm plan that still faults
is worth a look).

With ``--gpu`` the devices are the machine's NVIDIA GPUs (or ``--partitions N`` logical GPUs
carved out of one), plus ``cpu0`` for the ops that have no GPU kernel: each graph is profiled on
``gpu0`` (CUDA kernel times from TensorFlow's GPU tracer), the links between GPUs and between
GPU and host are calibrated, and the plans of ``GPU_METHODS`` are measured with a device sync at
the end of every step. The paper-sized samples are included when they are in ``sample_graphs/``.

With ``--keras`` (or ``keras:NAME`` in ``--models``) the Keras 3 models of ``KERAS_MODELS``
are added: each is extracted from its ``tf.function`` training step on this machine
(:mod:`workbench.runtime.keras_step`), profiled, and measured with the same plans.

Usage::

    .venv/bin/python bench/fidelity.py [--devices 2] [--steps 20] [--models mlp lstm_seq2seq]
    .venv/bin/python bench/fidelity.py --residuals --changes shared_memory recv_fit  # fitted
    .venv/bin/python bench/fidelity.py --realtime --residuals   # as root, or with CAP_SYS_NICE
    .venv/bin/python bench/fidelity.py --keras --models   # the Keras models only
    .venv/bin/python bench/fidelity.py --gpu [--partitions 2]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MODELS = ["mlp", "resnet_small", "inception_small", "transformer_small", "lstm_seq2seq"]
# Keras 3 models (--keras, or by name in --models): extracted from their tf.function training
# step and profiled here (batch, input size, other sizes)
KERAS_MODELS = {"keras:MobileNetV2": (2, (64, 64), {}), "keras:ResNet50": (2, (32, 32), {}),
                "keras:EfficientNetB0": (2, (32, 32), {}),
                "keras:TransformerEncoder": (8, (64, 128), {"ffn": 256})}
METHODS = ["single", "m_topo", "round_robin", "heft", "dpos", "etf"]
GPU_METHODS = ["single", "m_topo", "heft", "dpos", "celeritas", "pesto"]
RUNGS = ["roofline", "profiled", "calibrated", "probe-alone", "base", "recv-fit", "one-session",
         "one-slope", "no-rescale", "no-stepcost", "no-memory", "uncapped", "traced",
         "contention", "wakeup"]  # the ladder (see _rung_models)


def _gpu_setup(args, rt):
    """GPU devices (+ cpu0 for ops without a GPU kernel) and their calibrated cluster."""
    from workbench.runtime import gpu

    names = gpu.use_partitions(args.partitions) if args.partitions > 1 else gpu.local_gpus()
    if not names:
        raise SystemExit("--gpu: TensorFlow sees no GPU on this machine (is the 'gpu' extra "
                         "installed? `make install` picks it where nvidia-smi lists a GPU)")
    names = names[:args.devices] if args.devices >= 2 else names
    cluster = rt.calibrate_links(["cpu0", *names], repeats=5, realtime=args.realtime)
    return cluster


def _check_args(ap, args, wb, changes: list) -> None:
    """Every argument checked before the first calibration (a bad one used to fail after 38-105 s
    of link calibration and hand-off benchmarks, issue 41): ``ap.error`` prints the usage and
    one ``error:`` line and exits with status 2."""
    counts = {"--devices": (args.devices, 0 if args.gpu else 1), "--partitions":
              (args.partitions, 1), "--steps": (args.steps, 1), "--warmup": (args.warmup, 0),
              "--rounds": (args.rounds, 1)}
    for flag, (v, lo) in counts.items():
        if v < lo:
            ap.error(f"{flag} must be at least {lo}, got {v}")
    if args.partitions > 1 and not args.gpu:
        ap.error("--partitions splits a GPU: it needs --gpu")
    bad = [m for m in args.methods or [] if m not in wb.SOLVERS]
    if bad:
        ap.error(f"unknown method(s) {', '.join(bad)}; registered: {', '.join(wb.SOLVERS)}")
    bad = [c for c in args.changes if c not in changes]
    if bad:
        ap.error(f"unknown model change(s) {', '.join(bad)}; known: {', '.join(changes)}")
    for name in args.models or []:
        if name.startswith("keras:"):
            ref = name[len("keras:"):]
            if name in KERAS_MODELS or ref == "TransformerEncoder":
                continue
            import keras

            if not (ref.isidentifier() and ref[:1].isupper() and ref in dir(keras.applications)):
                ap.error(f"unknown Keras model {name!r}: use {', '.join(KERAS_MODELS)} or "
                         f"another keras.applications name")
            continue
        try:
            wb.samples.load_sample(name)
        except wb.WorkbenchError as e:
            ap.error(f"--models: {e}")


def main(argv: list[str] | None = None) -> int:
    import workbench as wb
    from workbench import Plan
    from workbench import runtime as rt
    from workbench.costs.roofline import with_device_costs
    from workbench.fidelity.changes import MODEL_CHANGES, OPTIONAL_CHANGES
    from workbench.fidelity.ladder import plan_key, step_spread, tick_share
    from workbench.fidelity.trace_residuals import residuals
    from workbench.runtime.calibrate import fit_wakeup
    from workbench.runtime.realtime import realtime
    from workbench.runtime.runner import with_run_order
    from workbench.runtime.tracing import traced_measurement

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=2,
                    help="logical CPU devices (with --gpu: at most this many GPUs, 0 = all)")
    ap.add_argument("--gpu", action="store_true",
                    help="measure on the NVIDIA GPUs of this machine (see the module docstring)")
    ap.add_argument("--partitions", type=int, default=1,
                    help="with --gpu: split the one physical GPU into this many logical GPUs")
    ap.add_argument("--steps", type=int, default=20, help="timed steps per plan")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5,
                    help="interleaved passes over the plans (see measure_plans)")
    ap.add_argument("--models", nargs="*", default=None)
    ap.add_argument("--keras", action="store_true",
                    help=f"also the Keras models ({', '.join(KERAS_MODELS)})")
    ap.add_argument("--methods", nargs="*", default=None)
    ap.add_argument("--no-fit", action="store_true",
                    help="no calibrated model (no probe runs): the profiled rung is judged")
    ap.add_argument("--changes", nargs="*", default=list(MODEL_CHANGES),
                    help=f"model changes of the calibrated rung (default {' '.join(MODEL_CHANGES)};"
                         f" optional: {' '.join(OPTIONAL_CHANGES)})")
    ap.add_argument("--residuals", action="store_true",
                    help="trace the worst plan of each model and print its residual groups")
    ap.add_argument("--no-reprofile", action="store_true",
                    help="use the checked-in costs instead of profiling on this machine")
    ap.add_argument("--realtime", action="store_true",
                    help="timed, traced and profiled steps under SCHED_FIFO (see the docstring)")
    ap.add_argument("--no-idle-poll", action="store_true",
                    help="with --realtime: let idle CPUs sleep (no zero wake-up latency request)")
    ap.add_argument("--no-hold-memory", action="store_true",
                    help="let the sessions' freed memory go back to the system (see "
                         "workbench.runtime.steady_memory)")
    args = ap.parse_args(argv)
    _check_args(ap, args, wb, list(MODEL_CHANGES) + list(OPTIONAL_CHANGES))
    if args.no_hold_memory:
        from workbench.runtime import steady_memory

        steady_memory.HOLD_FREED_MEMORY = False
    if args.no_idle_poll:
        from workbench.runtime import realtime as realtime_module

        realtime_module.IDLE_POLL = False
    if args.realtime:
        try:
            with realtime(required=True):
                pass
        except Exception as e:  # noqa: BLE001 - refused: say why and stop
            raise SystemExit(f"--realtime: {e}") from None
    rtk = {"realtime": args.realtime}

    if args.methods is None:
        args.methods = GPU_METHODS if args.gpu else METHODS
    if args.models is None:
        args.models = list(MODELS)
        if args.gpu:  # every other real sample in sample_graphs/ (the paper-sized models)
            root = Path(__file__).resolve().parent.parent / "sample_graphs"
            args.models += sorted({p.name.split(".")[0] for p in root.glob("*.json*")}
                                  - set(MODELS))
    if args.keras:
        args.models += [m for m in KERAS_MODELS if m not in args.models]
    t0, load0 = time.perf_counter(), _load()
    cluster = _gpu_setup(args, rt) if args.gpu else rt.calibrate_links(args.devices,
                                                                          repeats=5, **rtk)
    (src, dst), lk = next(iter(cluster.links.items()))
    print(f"calibrated {cluster.name}: e.g. {src}->{dst} latency {lk.latency * 1e3:.1f} us, "
          f"bandwidth {'inf' if lk.bandwidth == float('inf') else f'{lk.bandwidth / 1e6:.1f} GB/s'}"
          f", R^2 {lk.r2:.2f}; receive overhead "
          f"{', '.join(f'{d.name} {d.recv_overhead * 1e3:.1f} us' for d in cluster.devices)} "
          f"({time.perf_counter() - t0:.1f} s)")
    handoff = None  # the 'handoff' change's per-tensor costs, micro-benchmarked once
    if not args.gpu and args.devices >= 2:
        from workbench.runtime.handoff import measure_handoff

        handoff = measure_handoff(cluster.names[:2], **rtk)
        print("hand-off costs: " + ", ".join(f"{k} {v * 1e3:.2f} us" if k != "handoff_slope"
                                             else f"{k} {v:.4f}"
                                             for k, v in handoff.to_dict().items())
              + f" (ping-pong idle/us -> cost/us, median of {len(handoff.pass_points)} passes"
              " [their range]: "
              + ", ".join(f"{a * 1e3:.0f}->{c * 1e3:.1f} [{lo * 1e3:.1f}-{hi * 1e3:.1f}]"
                          for (a, c), lo, hi in zip(handoff.points, *_pass_range(handoff)))
              + ")")
    methods = [m for m in args.methods if m in wb.SOLVERS]
    skipped = [m for m in args.methods if m not in wb.SOLVERS]
    if skipped:
        print(f"(methods not registered, skipped: {', '.join(skipped)})")
    errors, rows = [], []
    print(f"{'model':18s} {'method':12s} {'devs':>4s} "
          + " ".join(f"{r:>{_width(r)}s}" for r in RUNGS)
          + f" {'measured':>9s} {'spread':>7s} {'error':>7s} {'ticks':>6s} {'faults':>7s}")
    for name in args.models:
        if name.startswith("keras:"):  # extracted here (default batch 2, input 32x32)
            batch, size, sizes = KERAS_MODELS.get(name, (2, (32, 32), {}))
            g = rt.extract(name, batch, input_shape=size, **sizes)
            print(f"{name:18s} {g.n_ops} ops (batch {batch}, input {'x'.join(map(str, size))})")
        else:
            g = wb.samples.load_sample(name)
        if args.gpu:  # GPU costs from GPU kernel times; CPU-only ops keep a host cost
            g = rt.profile(g, device="gpu0", steps=10, warmup=3, **rtk)
        elif not args.no_reprofile or name.startswith("keras:"):
            g = rt.profile(g, steps=10, warmup=3, **rtk)
        gcl, model = cluster, None
        # the untraced slope is measured after the rounds (below): calibrate with the traced
        # one, which the 'traced', 'base' and 'contention' rungs need, and swap it in there
        untraced = "contention_bench" in args.changes and not args.gpu
        # the same for the measured hand-off costs: calibrate with the fitted latency and
        # receive overhead, which the 'recv-fit', 'traced', 'base' and 'contention' rungs need
        swap = {"contention_bench": ["overlap"] if untraced else ["contention_bench"],
                "handoff": ["shared_memory", "recv_fit"] if handoff is not None else ["handoff"]}
        if not args.no_fit:
            fit = [f for c in args.changes for f in swap.get(c, [c])]
            model = rt.calibrate_model(g, cluster, changes=fit, steps=args.steps,
                                       warmup=args.warmup, **rtk)
            gcl = model.cluster
            print(f"{name:18s} calibrated model ({', '.join(model.changes) or 'no change'}): "
                  + ", ".join(f"{k} {v:.4g}" for k, v in model.details.items()))
        roof = with_device_costs(g, "cpu-local", kind="cpu")
        plans = {}
        for m in methods:
            try:  # with the order it will run in, so every rung predicts that order
                plans[m] = with_run_order(wb.solve(g, gcl, method=m, seed=0), gcl)
            except Exception as e:  # noqa: BLE001 - a bench reports any solver failure
                print(f"{name:18s} {m:12s} solve failed: {type(e).__name__}: {e}")
        wake = None  # the optional 'wakeup' change, fitted to its own probe (timed here)
        if model is not None and not args.gpu:
            wake = fit_wakeup(model, g, steps=args.steps, warmup=args.warmup, **rtk)
        probe = {} if model is None else dict(model.probe_plans())
        if wake is not None:
            probe["(idle probe)"] = wake.idle_probe
        res = rt.measure_plans(g, {**plans, **probe}, steps=args.steps, warmup=args.warmup,
                               cluster=gcl, rounds=args.rounds, **rtk)
        bench_slope = None  # the overlap slope measured untraced (single step, all devices busy)
        if model is not None and untraced:
            from workbench.runtime.contention import measure_contention

            cont = measure_contention(g, gcl, steps=args.steps, warmup=args.warmup, **rtk)
            bench_slope = cont["slope"]
            print(f"{name:18s} contention benchmark: alone {cont['alone_ms']:.3f} ms, with every "
                  f"device busy {cont['together_ms']:.3f} ms (slope {bench_slope:.3f})")
        models = _rung_models(name, g, model, wake,
                              handoff if "handoff" in args.changes else None, bench_slope, res)
        model_rows = []
        # the plans, then the probes (printed for inspection, never counted in the ladder)
        for m, plan in [*plans.items(), *probe.items()]:
            meas = res[m]
            if not meas.ok:
                print(f"{name:18s} {m:12s} measurement failed: {meas.error}")
                continue
            row = {"model": name, "plan": m, "measured": meas.median_ms, "key": plan_key(plan),
                   "devices": len(plan.devices_used()),
                   "spread": step_spread(meas.samples),
                   "roofline": wb.simulate(Plan(roof, plan.placement, order=plan.order),
                                           cluster).makespan,
                   "profiled": wb.simulate(plan, cluster).makespan,
                   **{r: jm.makespan(plan) if jm is not None else math.nan
                      for r, jm in models.items()}}
            sim = row["calibrated"] if models["calibrated"] is not None else row["profiled"]
            err = abs(sim - meas.median_ms) / meas.median_ms
            if m in plans:
                errors.append((err, name, m))
                model_rows.append((err, plan, meas))
                rows.append(row)
            print(f"{name:18s} {m:12s} {len(plan.devices_used()):4d} "
                  + " ".join(f"{row[r]:{_width(r)}.2f}" for r in RUNGS)
                  + f" {meas.median_ms:9.2f} {row['spread']:7.2f} {100 * err:6.1f}%"
                  f" {100 * tick_share(meas.samples):5.0f}% {meas.faults_per_step:7.0f}")
        model = models["calibrated"]
        if args.residuals and model is not None and model_rows:
            err, plan, _ = max(model_rows, key=lambda x: x[0])
            tm = traced_measurement(plan, cluster=gcl, steps=args.steps, warmup=args.warmup,
                                    **rtk)
            print("  residuals of the worst plan (calibrated model):")
            print("  " + residuals(plan, tm, schedule=model.simulate(plan)).table(6)
                  .replace("\n", "\n  "))
    if not errors:
        print("no measurement succeeded")
        return 1
    med = statistics.median(e for e, _, _ in errors)
    worst = max(errors)
    print(f"\nplans measured: {len(errors)}  median relative error: {100 * med:.1f}%  "
          f"worst: {100 * worst[0]:.1f}% ({worst[1]}, {worst[2]})  "
          f"[{time.perf_counter() - t0:.0f} s; load average at start {load0}, at end "
          f"{_load()}; realtime {'on' if args.realtime else 'off'}"
          f"{', idle poll off' if args.realtime and args.no_idle_poll else ''}]")
    _print_ladder(rows)
    _print_twins(rows)
    multi = [r for r in rows if r["devices"] > 1]
    if multi and len(multi) < len(rows):
        print("\nmulti-device plans only (the single-device plan shares its placement with the "
              "profile and the 'rescale' reference):")
        _print_ladder(multi)
    return 0


def _pass_range(handoff) -> tuple:
    """Per ping-pong point, the lowest and the highest hand-off cost of its passes."""
    costs = [[c for _, c in p] for p in handoff.pass_points] or [[c for _, c in handoff.points]]
    return [min(cs) for cs in zip(*costs)], [max(cs) for cs in zip(*costs)]


def _width(rung: str) -> int:
    """The column width of a rung in the bench's table."""
    return max(8, len(rung))


def _rung_models(name, g, model, wake, handoff, bench_slope, res) -> dict:
    """The judge model of every rung after ``roofline`` and ``profiled`` (None where it cannot be
    built), each re-anchored (:meth:`~workbench.fidelity.model.JudgeModel.reanchor`) to its
    probes timed in the plans' interleaved rounds (``res``), except ``probe-alone`` (the model
    as calibrated, its probes timed once at calibration). ``model`` is calibrated with the
    traced ``overlap`` slope and, where ``handoff`` (the micro-benchmarked
    :class:`~workbench.fidelity.extras.HandoffCosts`, or None) is given, with ``shared_memory``
    and ``recv_fit``; ``bench_slope`` (the untraced slope of ``measure_contention``, or None)
    and ``handoff`` take their places in the default (the ``contention_bench`` and ``handoff``
    changes). The rungs: ``calibrated`` (the default changes), ``base`` (``contention`` in place
    of the slope, the fitted latency and receive overhead, without ``rescale``, ``live_memory``
    and ``step_cost``: the default before round four), ``recv-fit`` (``shared_memory`` and
    ``recv_fit`` in place of ``handoff``: the default of round six), ``one-session`` (anchored
    to the first reference session and one-op probe alone, ``anchor_sessions=1``: round seven),
    ``one-slope`` (the single-device live-memory slope for every plan, ``live_split=False``:
    round seven), ``no-rescale``, ``no-stepcost``, ``no-memory`` (without ``live_memory``),
    ``uncapped`` (live memory not capped at the last-level cache), ``traced`` (round five's
    default: the traced ``overlap`` slope, the fitted latency and receive overhead), ``contention``
    (``contention`` in place of the slope, factor from the same traces, with the fitted
    latency and receive overhead) and ``wakeup`` (the ``recv-fit`` model plus ``wakeup``,
    fitted to its idle probe)."""
    from workbench.errors import RuntimeBridgeError
    from workbench.runtime.calibrate import fit_wakeup

    out = dict.fromkeys(RUNGS[2:])
    if model is None:
        return out

    def untraced(m):
        return m.with_overlap_slope(bench_slope) if bench_slope is not None else m

    def measured(m):
        return m.with_handoff(handoff) if handoff is not None else m

    out["probe-alone"] = default = measured(untraced(model))
    own = default.changes

    def anchored(m, changes=None, latency=True):
        try:
            return m.reanchor(res, changes=changes, latency=latency)
        except RuntimeBridgeError as e:
            print(f"{name:18s} not re-anchored: {e}")
            return None

    out["calibrated"] = anchored(default)
    swap = "overlap" in model.changes and "contention_factor" in model.details
    old = model.with_contention() if swap else model  # the default before round four
    out["base"] = anchored(old, [c for c in old.changes
                                 if c not in ("rescale", "live_memory", "step_cost")],
                           latency=False)
    if handoff is not None:
        out["recv-fit"] = anchored(untraced(model))
    out["one-session"] = anchored(replace(default, anchor_sessions=1))
    if "live_memory" in own:
        out["one-slope"] = anchored(replace(default, live_split=False))
    out["no-rescale"] = anchored(default, [c for c in own if c != "rescale"])
    out["no-stepcost"] = anchored(default, [c for c in own if c != "step_cost"])
    if "live_memory" in own:
        out["no-memory"] = anchored(default, [c for c in own if c != "live_memory"])
        out["uncapped"] = anchored(replace(default, memory_cap=math.inf))
    if "overlap_slope" in model.details:
        out["traced"] = anchored(model.with_overlap())
    if swap:
        out["contention"] = anchored(old)
    if wake is not None and res["(idle probe)"].ok and out["calibrated"] is not None:
        out["wakeup"] = fit_wakeup(anchored(untraced(wake)), g,
                                   measured_ms=res["(idle probe)"].median_ms,
                                   probe_ms=res["(probe)"].median_ms)
        print(f"{name:18s} wakeup fitted to the interleaved idle probe "
              f"({res['(idle probe)'].median_ms:.3f} ms): {out['wakeup'].wakeup * 1e3:.1f} us")
    cal = out["calibrated"]
    if cal is not None:
        print(f"{name:18s} re-anchored to the probes timed in the rounds "
              f"({', '.join(cal.changes)}): "
              + ", ".join(f"{k} {v:.4g}" for k, v in cal.details.items()
                          if k in ("rescale", "reference_measured_ms", "reference_range_ms",
                                   "step_cost_ms", "one_op_probe_measured_ms",
                                   "step_cost_range_ms", "recv_overhead_ms",
                                   "probe_measured_ms", "contention_bench_slope")))
    if cal is not None and "order_probe_measured_ms" in cal.details:
        print(f"{name:18s} live_memory fitted to the order probe "
              f"({cal.details['order_probe_measured_ms']:.3f} ms): "
              f"{100 * cal.memory_slope:.2f} % per MB")
    if cal is not None and "split_order_probe_measured_ms" in cal.details:
        print(f"{name:18s} live_memory of plans on several devices fitted to the split order "
              f"probe ({cal.details['split_order_probe_measured_ms']:.3f} ms): "
              f"{100 * cal.memory_slope_multi:.2f} % per MB")
    return out


def _load() -> str:
    """The machine's 1-minute load average (``os.getloadavg``), or '?' where unavailable."""
    import os

    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "?"


def _print_twins(rows) -> None:
    """The pairs of rows that are one plan (returned by two methods, timed in two sessions)."""
    from workbench.fidelity.ladder import twin_pairs

    twins = [(r["model"], r["plan"], q["plan"], abs(r["measured"] - q["measured"]),
              r["spread"] + q["spread"]) for r, q in twin_pairs(rows)]
    if twins:  # not a pair to order: how far two sessions of one plan ran apart
        print("twins (one plan returned by two methods, timed in two sessions; not counted as "
              "pairs): " + ", ".join(f"{m} {a}={b} {d:.2f} ms apart (spreads {sp:.2f})"
                                     for m, a, b, d, sp in twins))


def _print_ladder(rows) -> None:
    """The fidelity ladder: per rung, median/worst error and ranking agreement."""
    from workbench.fidelity.ladder import ladder_stats

    print(f"\n{'rung':11s} {'median':>7s} {'worst':>7s} {'worst plan':28s} {'pairs agree':>12s} "
          f"{'beyond spread':>14s} {'best in spread':>15s}")
    for rung, st in ladder_stats(rows, RUNGS).items():
        if not math.isfinite(st["median"]):
            continue
        w, wm, wp = st["worst"]
        print(f"{rung:11s} {100 * st['median']:6.1f}% {100 * w:6.1f}% {wm + ' ' + wp:28s} "
              f"{st['agree']:5d}/{st['pairs']:<6d} {st['agree_beyond']:7d}/{st['pairs_beyond']:<6d}"
              f" {st['best_ok']:8d}/{st['models']:<6d}")


if __name__ == "__main__":
    raise SystemExit(main())
