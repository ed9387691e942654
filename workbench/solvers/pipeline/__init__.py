"""Optimal pipelined splits (Tarnawski et al., NeurIPS 2020) and their baselines.

* :mod:`.dp`: ``dp``, ``dpl`` (DP over ideals / over prefixes of one order), ``pipedream``.
* :mod:`.kernel`, :mod:`.pykernel`, :mod:`._dp_jit`: the DP's inner loop (numba / pure Python).
* :mod:`.ideals`: the lattice of ideals; :mod:`.contraction`: contracting the graph first.
* :mod:`.gpipe`: GPipe-style splits; :mod:`.hierarchy`: hierarchical clusters.
* :mod:`.ip`: ``ip_contig``, ``ip_noncontig`` (the throughput IPs).
* :mod:`.latency`, :mod:`.latency_cpsat`: ``greedy_latency``, ``latency_ip`` (Section 4).
* :mod:`.local_search`: ``local_search`` (the paper's local-search baseline).
* :mod:`.metis`: ``metis`` (k-way graph partitioning, the paper's partitioning baseline).
* :mod:`.units`: what the programs share (units, their placement, the Section 4.2 rows).
* Their shared accounting (what a transfer costs a stage) is the judge's:
  :mod:`workbench.costs.pipeline_costs`.

Imports go one way: the entry modules (``ip`` above ``latency``, ``local_search`` and
``metis``, these above ``dp``) over the engines (``gpipe``, ``hierarchy``, ``latency_cpsat``,
``kernel``) over the shared pieces (``units``, ``pykernel``, ``ideals``, ``contraction``);
``tests/solvers/tarnawski/test_pipeline_rooms.py`` checks it, and that no module uses another's private name.
One :class:`~workbench.budget.Budget` runs through every method that takes a time limit.

The methods are named here too: ``from workbench.solvers.pipeline import dp, ip_noncontig``.
(``dp``, ``metis`` and ``local_search`` name the functions, as attributes of this package, not
their modules: import the modules by their full path, ``from workbench.solvers.pipeline.dp
import solve_dp``.)
"""

from .dp import dp, dpl, pipedream
from .ip import ip_contig, ip_noncontig
from .latency import greedy_latency, latency_ip
from .local_search import local_search
from .metis import metis

__all__ = ["dp", "dpl", "pipedream", "ip_contig", "ip_noncontig", "greedy_latency",
           "latency_ip", "local_search", "metis"]
