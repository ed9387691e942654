"""The data-parallel graph built as arrays (``OpGraph.from_arrays``), not through networkx.

``RECORDED`` holds the digest (the name and meta, every op's attributes in the graph's order,
every edge's attributes) of each case as built by the networkx implementation of commit
3af5333, before the rewrite; the rewrite was also compared with it op by op and edge by edge
on 352 cases (eleven graphs, one to four replicas, both scalings and aggregations) and on six
extracted training graphs with variables, plans of ``data_parallel`` included.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from workbench import samples
from workbench.solvers.list.data_parallel import ensure_split_dims
from workbench.transforms.data_parallel import data_parallel_graph


def _digest(g) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([g.name, g.meta], sort_keys=True, default=str).encode())
    for v in g.ops:
        h.update(json.dumps([v, g.op(v)], sort_keys=True, default=repr).encode())
    for u, v in sorted(g.edges()):
        h.update(json.dumps([u, v, g.edge(u, v)], sort_keys=True, default=repr).encode())
    return h.hexdigest()[:16]


_GRAPHS = {"cnn12-update": lambda: samples.to_training(samples.cnn(12), update=True),
           "transformer200-train": lambda: samples.to_training(samples.transformer(200)),
           "transformer300": lambda: samples.transformer(300),
           "mlp": lambda: ensure_split_dims(samples.load_sample("mlp"))}

RECORDED = {  # (graph, replicas, scaling, aggregation) -> digest, before the rewrite
    ('cnn12-update', 2, 'strong', 'links'): '778428558d089ab3',
    ('cnn12-update', 3, 'weak', 'device'): '945002a23743a812',
    ('transformer200-train', 2, 'strong', 'links'): 'ec425ad8858f56d7',
    ('transformer200-train', 4, 'strong', 'device'): '85100222e0cf9caf',
    ('transformer300', 3, 'strong', 'links'): 'db83576e49207baa',
    ('mlp', 2, 'strong', 'links'): '7060027e194b17b7',
    ('mlp', 4, 'weak', 'device'): 'ed6df6403399540d',
}


@pytest.mark.parametrize("case", list(RECORDED), ids=lambda c: "-".join(map(str, c)))
def test_the_replicated_graph_is_the_one_built_before(case):
    name, R, scaling, aggregation = case
    h = data_parallel_graph(_GRAPHS[name](), R, scaling=scaling, aggregation=aggregation)
    assert _digest(h) == RECORDED[case]


def test_a_bulk_graph_is_replicated_without_its_networkx_form():
    g = samples.transformer(2000)
    h = data_parallel_graph(g, 2)
    assert "_g" not in g.__dict__ and "_g" not in h.__dict__   # neither built networkx
    assert h.n_ops == 2 * g.n_ops and h.n_edges == 2 * g.n_edges
    v = g.ops[5]
    a, b = g.op(v), h.op(f"{v}@1")
    share = 0.5 if "batch" in a["splits"] else 1.0
    assert b["compute"] == {k: t * share for k, t in a["compute"].items()}
    assert h.ops[:4] == [f"{g.ops[0]}@0", f"{g.ops[0]}@1", f"{g.ops[1]}@0", f"{g.ops[1]}@1"]
