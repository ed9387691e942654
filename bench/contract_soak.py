"""Soak every registered method in the solver contract over many random cases.

    python bench/contract_soak.py --cases 2000                      # seeds 0..1999, all methods
    python bench/contract_soak.py --start 500 --cases 500 --out part2.json
    python bench/contract_soak.py --merge part1.json part2.json     # one table from chunks
    python bench/contract_soak.py --methods pesto,pesto_ilp --param engine=milp

Cases come from :func:`workbench.testing.contract.make_case` (the same generator as
tests/reliability/test_contract.py) and every method is checked by :func:`~workbench.testing.contract.
run_method` plus the cross-method clause. Each method runs in a worker process; one that does
not answer within ``--hang`` seconds is killed and counted as a hang (the worker is restarted).
Prints a table per method: pass / clear error / contract failure / crash / hang, then every
failure, crash and hang with a one-line reproducer.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from collections import Counter, defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from workbench.testing.contract import (
    VERDICTS,
    Outcome,
    contract_methods,
    cross_check,
    make_case,
    reproducer,
    run_method,
)


def _worker(conn) -> None:
    case = None
    while True:
        msg = conn.recv()
        if msg is None:
            return
        seed, method, time_limit, params = msg
        if case is None or case.seed != seed:
            case = make_case(seed)
        o = run_method(case, method, time_limit=time_limit, params=params)
        conn.send((o.verdict, o.detail, o.status, o.wall_s, o.values))


class Runner:
    """A worker process that can be killed and replaced when a method hangs."""

    def __init__(self):
        self.proc = None
        self.conn = None

    def start(self) -> None:
        ctx = mp.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()

    def run(self, seed: int, method: str, time_limit: float, hang: float,
            params: dict | None = None) -> Outcome:
        if self.proc is None or not self.proc.is_alive():
            self.start()
        t0 = time.perf_counter()
        self.conn.send((seed, method, time_limit, params))
        if self.conn.poll(hang):
            try:
                verdict, detail, status, wall, values = self.conn.recv()
            except EOFError:  # the worker died (e.g. out of memory)
                self.proc = None
                return Outcome(method, "crash", "worker process died",
                               wall_s=time.perf_counter() - t0)
            return Outcome(method, verdict, detail, status, wall, values)
        self.proc.kill()
        self.proc.join()
        self.proc = None
        return Outcome(method, "hang", f"no answer within {hang:.0f} s",
                       wall_s=time.perf_counter() - t0)

    def close(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.conn.send(None)
            self.proc.join(5)


def soak(start: int, cases: int, methods: list, time_limit: float, hang: float,
         progress: bool = True, params: dict | None = None) -> list:
    """Records ``{seed, method, verdict, detail, status, wall_s, case}`` for every run."""
    runner = Runner()
    records = []
    t0 = time.perf_counter()
    try:
        for k, seed in enumerate(range(start, start + cases)):
            outs = [runner.run(seed, m, time_limit, hang, params) for m in methods]
            cross_check(outs)
            case = make_case(seed)
            for o in outs:
                records.append({"seed": seed, "method": o.method, "verdict": o.verdict,
                                "detail": o.detail, "status": o.status,
                                "wall_s": round(o.wall_s, 4), "case": repr(case),
                                "repro": reproducer(case, o.method, time_limit)})
            if progress and (k + 1) % 25 == 0:
                print(f"  {k + 1}/{cases} cases, {time.perf_counter() - t0:.0f} s",
                      file=sys.stderr, flush=True)
    finally:
        runner.close()
    return records


def table(records: list) -> str:
    """Markdown table: per method, counts of each verdict and the slowest wall time."""
    counts: dict = defaultdict(Counter)
    slow: dict = defaultdict(float)
    order = []
    for r in records:
        if r["method"] not in counts:
            order.append(r["method"])
        counts[r["method"]][r["verdict"]] += 1
        slow[r["method"]] = max(slow[r["method"]], r["wall_s"])
    head = ["method", "pass", "clear error", "contract failure", "crash", "hang", "max s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in order:
        c = counts[m]
        lines.append(f"| {m} | " + " | ".join(str(c[v]) for v in VERDICTS)
                     + f" | {slow[m]:.1f} |")
    return "\n".join(lines)


def problems(records: list, limit: int = 200) -> str:
    bad = [r for r in records if r["verdict"] in ("fail", "crash", "hang")]
    out = [f"{len(bad)} contract failures, crashes and hangs"]
    for r in bad[:limit]:
        out.append(f"- [{r['verdict']}] {r['method']} seed {r['seed']} {r['case']}: "
                   f"{r['detail'][:300]}\n  reproduce: python -c \"{r['repro']}\"")
    return "\n".join(out)


def _write_json(path: str, records: list) -> None:
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(records, f)
    os.replace(tmp, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--start", type=int, default=0, help="first seed")
    ap.add_argument("--methods", default="", help="comma-separated (default: all registered)")
    ap.add_argument("--skip", default="", help="comma-separated methods to leave out")
    ap.add_argument("--time-limit", type=float, default=2.0)
    ap.add_argument("--hang", type=float, default=120.0, help="seconds before a run is a hang")
    ap.add_argument("--param", action="append", default=[], metavar="KEY=JSON",
                    help="extra keyword for the methods that accept it, e.g. engine='\"milp\"'")
    ap.add_argument("--out", help="write the records as JSON (for --merge)")
    ap.add_argument("--merge", nargs="+", help="print the table of these JSON record files")
    args = ap.parse_args(argv)
    if args.merge:
        records = []
        for path in args.merge:
            with open(path) as f:
                records += json.load(f)
    else:
        methods = [m for m in (args.methods.split(",") if args.methods else contract_methods())
                   if m and m not in set(args.skip.split(","))]
        params = {}
        for kv in args.param:
            k, _, v = kv.partition("=")
            try:
                params[k] = json.loads(v)
            except json.JSONDecodeError:
                params[k] = v
        records = soak(args.start, args.cases, methods, args.time_limit, args.hang,
                       params=params)
        if args.out:
            _write_json(args.out, records)
    seeds = sorted({r["seed"] for r in records})
    print(f"{len(seeds)} cases (seeds {seeds[0]}..{seeds[-1]}), {len(records)} runs")
    print(table(records))
    print()
    print(problems(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
