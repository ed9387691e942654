"""The judge's internals, behind its public front :mod:`workbench.simulate`.

* :mod:`~workbench.judge.events`: the discrete-event core (devices, channels, the event heap);
* :mod:`~workbench.judge.policies`: the three order policies (``"plan"``, ``"fifo"``,
  ``"rank"``) that pick each idle device's next op;
* :mod:`~workbench.judge.schedule`: the :class:`~workbench.plan.Schedule` built from a run;
* :mod:`~workbench.judge.loads`: the pipelined loads and max-load;
* :mod:`~workbench.judge.training`: parallel training plans (micro-batch schedules,
  collectives from :mod:`~workbench.judge.collectives`, memory over time);
* :mod:`~workbench.judge.liveness`: memory over time (what is live when), the one memory model;
* :mod:`~workbench.judge.bounds`: lower bounds of both objectives;
* :mod:`~workbench.judge.pipelined`: the pipelining paper's latency judge (subgraph
  invocations) and its hierarchical loads;
* :mod:`~workbench.judge._replay_jit`: the compiled longest-path replay of robustness.

The package imports only the model layer (graph, cluster, plan, errors, analysis,
:mod:`workbench.costs`), never solvers, transforms, compare or widgets. Use it through
:func:`workbench.simulate`:

>>> from workbench import samples, Cluster, Plan
>>> from workbench.simulate import simulate
>>> g = samples.diamond()
>>> simulate(Plan(g, {v: "gpu0" for v in g.ops}), Cluster.preset("2xV100-pcie")).makespan
6.0
"""
