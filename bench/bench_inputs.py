"""Bounded resources on input (issue 13): large clusters, schema validation, gzip bombs.

Run: ``.venv/bin/python bench/bench_inputs.py`` (about a minute). Prints, for clusters of
1,000 / 2,000 / 4,096 devices, the time to load the JSON file, compile it and answer
``mean_link`` and ``transfer_ms`` (no dense matrix), then the time to build the dense
``n x n`` matrices the list schedulers read; the schema validation time of a 36,000-op graph;
and the time and peak memory to refuse a 2 MB gzip file that decompresses to 2 GiB.
"""

from __future__ import annotations

import gzip
import os
import resource
import tempfile
import time

from workbench import samples
from workbench.cluster import Cluster, Device, Link
from workbench.errors import FormatError
from workbench.io import load_cluster, load_graph, save_cluster
from workbench.io.json_format import dump_graph
from workbench.io.schema import validate


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def clusters(folder: str) -> None:
    for n in (1000, 2000, 4096):
        devs = [Device(f"gpu{i}", "gpu", 16e9, host=f"h{i // 8}") for i in range(n)]
        c = Cluster(devs, intra_host=Link(0.01, 4.5e7), inter_host=Link(0.03, 1.1e7),
                    links={("gpu0", "gpu1"): Link(0.02, 2e7)})
        path = os.path.join(folder, f"c{n}.json")
        save_cluster(c, path)
        t = time.perf_counter()
        c2 = load_cluster(path)
        _ = c2.c
        c2.mean_link()
        c2.transfer_ms("gpu0", f"gpu{n - 1}", 1e6)
        t_load = time.perf_counter() - t
        t = time.perf_counter()
        _ = c2.c.lat, c2.c.inv_bw
        t_dense = time.perf_counter() - t
        print(f"cluster of {n} devices: load + compile + mean_link + transfer_ms "
              f"{t_load:.3f} s; dense n x n matrices {t_dense:.3f} s; peak RSS {rss_mb():.0f} MB")


def schema() -> None:
    d = dump_graph(samples.transformer(36_000))
    validate(d, "graph", "warm-up")
    t = time.perf_counter()
    validate(d, "graph", "g.json")
    print(f"schema validation of a {len(d['nodes'])}-op graph: {time.perf_counter() - t:.2f} s")


def bomb(folder: str) -> None:
    path = os.path.join(folder, "bomb.json.gz")
    with gzip.open(path, "wb", compresslevel=9) as f:
        f.write(b'{"a": "')
        chunk = b"x" * (1 << 20)
        for _ in range(2048):
            f.write(chunk)
        f.write(b'"}')
    before = rss_mb()
    t = time.perf_counter()
    try:
        load_graph(path)
    except FormatError as e:
        msg = str(e).split(": ", 1)[1]
    print(f"gzip bomb ({os.path.getsize(path) / 2**20:.1f} MB -> 2 GiB): refused in "
          f"{time.perf_counter() - t:.2f} s, peak RSS {rss_mb():.0f} MB (before {before:.0f} MB)"
          f": {msg}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        clusters(d)
        schema()
        bomb(d)
