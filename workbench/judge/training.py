"""The judge of parallel training plans: micro-batches, collectives and memory over time.

:func:`simulate_training` executes a :class:`~workbench.transforms.parallel.TrainingPlan` (a
model, a cluster and a tensor x pipeline x data-parallel strategy) as a discrete-event
simulation, the same core as :mod:`workbench.judge.events` -- a heap of timed events, devices
and links as capacity-one FIFO resources -- specialised to what a training system runs:

* **each rank runs its stage's micro-batch order** (GPipe, 1F1B, interleaved 1F1B); a task
  (forward or backward of one chunk for one micro-batch) is its ops in chain order, each op's
  roofline time on its tensor-parallel shard, interrupted by the **tensor-parallel
  collectives** after the ops that have them (blocking: every rank of the group joins it);
  a backward first re-runs the forward it did not keep (``recompute``, or each stage's
  own: ``stage_recompute``, its stash and recomputed bytes following it);
* **pipeline sends**: a forward's output goes to the next chunk's rank, a backward's input
  gradient to the previous one, as point-to-point transfers on the links; a task starts when
  its input has arrived -- the wait is the pipeline **bubble** while the producer had not
  finished, **PP communication** after it had;
* **data-parallel gradients** leave in buckets (``bucket_mb``) as the backward produces them
  (PyTorch DDP's overlap) on the last micro-batch, reduce-scattered every micro-batch under
  ZeRO-2/3, all-reduced otherwise; ZeRO-3 all-gathers each chunk's parameters before each of
  its tasks (one task ahead); the optimizer step follows the rank's last gradient bucket,
  ZeRO-1/2 all-gather the updated parameters after it;
* **expert parallelism** (``Strategy.ep > 1``, Megatron-Core's ``--expert-model-parallel-size``
  on a model with experts): each rank holds ``experts / ep`` experts (their states
  ZeRO-sharded over the ``dp / ep`` replicas that hold the same experts); every MoE block's
  all-to-all dispatch and combine (:func:`~workbench.judge.collectives.collective_ms`
  ``"alltoall"``: forward, reversed in the backward, repeated by full recomputation) block
  the rank's stream over its expert-parallel group (``ep`` consecutive replicas), as the
  tensor-parallel collectives do; the experts' gradients leave in buckets of their own over
  the expert-data-parallel group;
* **the host as a lane** (when the GPU's ``host_op_ms`` is positive, as
  :mod:`workbench.fidelity.public` calibrates it): the host issues the ops one by one,
  ``host_op_ms`` each, and runs ahead of the GPU (a CUDA stream is asynchronous to the CPU
  that fills it); an op starts once issued and once the previous op has ended, so small ops
  cost the host's time and large ones the GPU's. The host waits for the GPU where Megatron
  synchronises: around each pipeline send and receive (``batch_p2p_sync``) and at the end of
  the step;
* **links**: each rank has an NVLink/NVSwitch channel and a network (InfiniBand) channel; a
  collective or send occupies the channels of every rank taking part for its whole duration
  (:mod:`workbench.judge.collectives`: ring or tree, hierarchical across nodes), in the order
  asked (FIFO), so a pipeline send waits behind a gradient bucket on the same NIC;
* **per-stage widths** (``Strategy.stage_widths``: each stage its own ``tp`` and ``dp``, its
  replicas sharing each micro-batch's sequences): a stage's ranks run its chunks at their
  share of the micro-batch and tensor-parallel degree, join its own tensor- and
  data-parallel groups (ZeRO shards over its replicas); between stages of unequal widths
  the activation and its gradient are resharded: each receiving rank gets its sequences'
  share from every sending rank that holds part of it
  (:meth:`~workbench.transforms.parallel.TrainingPlan.route`) and starts once all have
  arrived; such many-to-many sends take their two channels as soon as both are free
  (in FIFO order on both ends they could wait for each other in a cycle); every rank is
  simulated;
* **memory over time** per rank: parameters, gradients and optimizer states (sharded under
  ZeRO) from the start, each forward's stashed activations until its backward ends, the
  recomputed activations of one block while a backward runs, ZeRO-3's gathered parameters
  while a task runs; the first moment above the device's memory is reported (device, time,
  bytes): the plan is judged out of memory.

**Identical ranks simulated once** (``ranks="reduced"``, the default): every tensor-parallel
rank of a stage runs the same ops on shards of equal size and joins the same collectives, and
every data-parallel replica runs the same schedule; on a cluster of identical devices whose
groups have the same shape for every replica (the rank layout of
:mod:`workbench.transforms.parallel` on nodes of equal size), their event times are equal, so
one rank per stage is simulated, its collectives timed for the whole group. ``ranks="all"``
simulates every rank (each collective waiting for all its members): the tests check both give
the same step time, memory and schedule on small cases.

Examples
--------
>>> from workbench.cluster import Cluster
>>> from workbench.costs.llm import parse_spec
>>> from workbench.transforms.parallel import Strategy, parallelize
>>> plan = parallelize(parse_spec("gpt:layers=4,hidden=512,heads=8,seq=256"),
...                    Cluster.preset("8xA100-80g"),
...                    Strategy(tp=2, pp=2, dp=2, mbs=2, global_batch=16))
>>> r = simulate_training(plan)
>>> r.feasible, r.n_ranks_simulated, len(r.tasks[0])
(True, 2, 8)
>>> b = r.breakdown()
>>> sorted(b)
['bubble', 'compute', 'dp', 'optimizer', 'pp', 'recompute', 'step', 'tp']
>>> abs(sum(v for k, v in b.items() if k != "step") - b["step"]) < 1e-6
True
>>> r.step_ms == simulate_training(plan, ranks="all").step_ms
True
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field

from ..errors import PlanError
from .collectives import collective_ms, p2p_ms

__all__ = ["TrainingResult", "chunk_program", "identical_ranks", "op_collectives",
           "simulate_training"]


# ---------------------------------------------------------------------- per-chunk programs
def _div(o, t: int, sp: bool) -> int:
    return t if (o.split or sp) else 1


def _comm(o, phase: str, t: int, sp: bool):
    if t <= 1:
        return None
    table = o.comm_fwd if phase == "f" else o.comm_bwd
    return table.get("sp" if sp else "tp")


def op_collectives(o, phase: str, t: int, sp: bool, ep: int) -> list:
    """The program items of the collectives after op ``o``'s forward (``f``) or backward:
    its tensor-parallel one (``("x", Comm)``), or under expert parallelism its ``ep_fwd`` /
    ``ep_bwd`` sequence where it has one (an all-to-all as ``("a", bytes of the rank)``: each
    tensor-parallel rank sends ``1 / t`` of the copies). The searches' per-op costs
    (:func:`workbench.solvers.hybrid.costs.op_vectors`) read the same items.

    >>> from workbench.costs.llm import Comm
    >>> from types import SimpleNamespace
    >>> o = SimpleNamespace(comm_fwd={"tp": Comm("allreduce", 8.0)}, comm_bwd={},
    ...                     ep_fwd=(Comm("alltoall", 4.0),), ep_bwd=None)
    >>> op_collectives(o, "f", 2, False, 1), op_collectives(o, "f", 2, False, 2)
    ([('x', Comm(kind='allreduce', nbytes=8.0))], [('a', 2.0)])
    """
    table = (o.ep_fwd if phase == "f" else o.ep_bwd) if ep > 1 else None
    if table is None:
        cm = _comm(o, phase, t, sp)
        return [] if cm is None else [("x", cm)]
    return [("a", c.nbytes / t) if c.kind == "alltoall" else ("x", c) for c in table
            if c.kind == "alltoall" or t > 1]


def _layer_groups(ops) -> dict:
    groups: dict = defaultdict(list)
    for o in ops:
        groups[o.layer].append(o)
    return groups


def chunk_program(plan, c: int) -> dict:
    """What one rank of chunk ``c`` runs per micro-batch: ``fwd``/``bwd`` segments (``("c",
    ms, per-op ms)`` compute, ``("r", ms, per-op ms)`` recomputation, ``("x", Comm)`` a
    tensor-parallel collective, ``("a", bytes)`` an expert-parallel all-to-all of the rank's
    bytes, ``("g", bytes)`` a gradient bucket ready, ``("ge", bytes)`` one of expert
    gradients under expert parallelism), ``stash`` (activation bytes kept from the
    forward to the backward), ``transient`` (recomputed bytes while the backward runs),
    ``params`` (of the shard, experts' included), ``eparams`` (the experts' of the shard:
    ``experts / ep`` of them; 0 without expert parallelism), ``send`` (bytes of the output
    sent to the next chunk by each rank) and ``out`` (the replica's whole output). With
    per-stage widths the chunk's stage's ``tp`` and share of the micro-batch.
    """
    s, cfg, gpu = plan.strategy, plan.config, plan.gpu
    t, sp, half = s.width_of(c % s.pp)[0], s.sp, cfg.precision != "fp32"
    rec = s.recompute_of(c % s.pp)       # the recomputation of the chunk's stage
    ep = s.ep                            # expert parallelism (1: none)
    ops = plan.chunk_ops(c)
    gbytes = 4 if cfg.precision == "fp32" else 2
    bucket = s.bucket_mb * 1e6

    from ..costs.llm import (fused_softmax_available, megatron_cross_entropy_ms,
                             unfused_softmax_ms)
    unfused = s.softmax == "megatron" and not fused_softmax_available(cfg, t)

    def kernels(o, d, backward):
        """GPU ms of each kernel of op ``o`` (one, the unfused softmax's five, or Megatron's
        cross-entropy's six forward and two backward)."""
        if unfused and o.op_type == "Softmax":
            return unfused_softmax_ms(gpu, o.bytes / d / (2 * cfg.act_bytes), backward, half)
        if s.softmax == "megatron" and o.op_type == "SoftmaxCrossEntropyWithLogits":
            return megatron_cross_entropy_ms(gpu, o.bytes / d / (2 * cfg.act_bytes), backward,
                                             half)
        if backward:
            return (gpu.op_ms(o.bwd_flops / d, o.bwd_bytes / d, half=half),)
        return (gpu.op_ms(o.flops / d, o.bytes / d, half=half),)

    def fwd_items(only_core=False):
        items = []
        for o in ops:
            if only_core and not o.core:
                continue
            ks = kernels(o, _div(o, t, sp), False)
            items.append(("c", sum(ks), ks))
            if not only_core:
                items += op_collectives(o, "f", t, sp, ep)
        return items

    bwd: list = []
    if rec == "full":
        bwd += [("r",) + x[1:] if x[0] == "c" else x for x in fwd_items()]
    elif rec == "selective":
        core = fwd_items(only_core=True)
        bwd += [("r", sum(x[1] for x in core), tuple(k for x in core for k in x[2]))]
    acc, eacc = 0.0, 0.0
    for o in reversed(ops):
        ks = kernels(o, _div(o, t, sp), True)
        bwd.append(("c", sum(ks), ks))
        if ep > 1 and o.expert:       # expert gradients: their own buckets (expert-DP group)
            eacc += gbytes * o.params / (t if o.split else 1) / ep
            if eacc >= bucket:
                bwd.append(("ge", eacc))
                eacc = 0.0
        else:
            acc += gbytes * o.params / (t if o.split else 1)
            if acc >= bucket:
                bwd.append(("g", acc))
                acc = 0.0
        bwd += op_collectives(o, "b", t, sp, ep)
    if acc > 0:
        bwd.append(("g", acc))
    if eacc > 0:
        bwd.append(("ge", eacc))
    stash_of = {o.name: o.saved / _div(o, t, sp) for o in ops}
    groups = _layer_groups(ops)
    blocks = {k: v for k, v in groups.items() if 0 <= k < cfg.blocks}
    ends = sum(stash_of[o.name] for k, v in groups.items() if k not in blocks for o in v)
    per_block = {k: sum(stash_of[o.name] for o in v) for k, v in blocks.items()}
    core = {k: sum(o.core_saved / _div(o, t, sp) for o in v) for k, v in blocks.items()}
    if rec == "full":     # each block's input kept (its first op's residual stream),
        # and once what the blocks also read (an encoder-decoder's encoder output: one tensor)
        kept = (sum(v[0].resid for v in blocks.values()) +
                max((v[0].carry for v in blocks.values()), default=0.0)) / (t if sp else 1)
        stash, transient = ends + kept, max(per_block.values(), default=0.0)
    elif rec == "selective":
        stash = ends + sum(per_block.values()) - sum(core.values())
        transient = max(core.values(), default=0.0)
    else:
        stash, transient = ends + sum(per_block.values()), 0.0
    params = sum(o.params / (t if o.split else 1) for o in ops if not (ep > 1 and o.expert))
    eparams = sum(o.params / (t if o.split else 1) / ep for o in ops if ep > 1 and o.expert)
    send = ops[-1].out / t
    return {"fwd": _merge(fwd_items()), "bwd": _merge(bwd), "stash": stash,
            "transient": transient, "params": params + eparams, "eparams": eparams,
            "send": send, "out": ops[-1].out}


def _merge(items: list) -> list:
    """Adjacent compute segments of the same kind joined into one."""
    out: list = []
    for it in items:
        if out and it[0] in ("c", "r") and out[-1][0] == it[0]:
            out[-1] = (it[0], out[-1][1] + it[1], out[-1][2] + it[2])
        else:
            out.append(it)
    return out


# ---------------------------------------------------------------------- result
@dataclass
class TrainingResult:
    """What :func:`simulate_training` found.

    ``step_ms`` (the slowest rank's end), ``tasks[rank]`` (``(start, end, kind, chunk,
    micro-batch, recompute ms)``, kind ``F``/``B``), ``links`` (``(rank, channel, start, end, what, asked)``, ``asked`` the
    time it was ready to start (it waited for the channel until ``start``), what
    ``tp``, ``pp`` (sends), ``dp`` (gradient buckets, ZeRO gathers of the updated weights),
    ``zero3`` (parameter gathers) or ``ep`` (expert-parallel all-to-alls)), ``memory[rank]`` (``(time, bytes)`` after
    each change), ``peak[rank]``, ``oom`` (None, or the first rank over its device's memory:
    ``{"device", "rank", "time_ms", "bytes", "capacity"}``), ``parts[rank]`` (step time by
    cause, see :meth:`breakdown`), ``events`` (heap events processed).
    """

    plan: object
    step_ms: float
    tasks: dict
    links: list
    memory: dict
    peak: dict
    oom: dict | None
    parts: dict
    events: int
    ranks: str
    stage_of: dict = field(default_factory=dict)

    @property
    def feasible(self) -> bool:
        return self.oom is None

    @property
    def n_ranks_simulated(self) -> int:
        return len(self.tasks)

    @property
    def critical_rank(self) -> int:
        return max(self.parts, key=lambda r: (self.parts[r]["step"], -r))

    def breakdown(self, rank: int | None = None) -> dict:
        """Step time of ``rank`` (default: the slowest) split into ``compute``, ``recompute``,
        ``tp`` (blocking collectives), ``pp`` (waiting for a sent input), ``bubble`` (waiting
        for a producer still at work), ``dp`` (gradient synchronisation not hidden, ZeRO
        gathers), ``optimizer`` and, with expert parallelism only, ``ep`` (the blocking
        all-to-alls); they add up to ``step``."""
        return dict(self.parts[self.critical_rank if rank is None else rank])

    def throughput(self) -> float:
        """Tokens per second of the whole step."""
        s, cfg = self.plan.strategy, self.plan.config
        return s.global_batch * cfg.seq / (self.step_ms / 1e3)

    def mfu(self) -> float:
        """Model FLOPs utilisation: the model's training FLOPs (forward and backward, no
        recomputation: 3x the forward) per second over the peak of all ranks."""
        plan = self.plan
        fwd = sum(o.flops for o in plan.ops) * plan.n_micro * plan.strategy.dp
        peak = plan.gpu.half_flops * plan.strategy.devices
        return 3 * fwd / (self.step_ms * peak)

    def summary(self) -> dict:
        b = self.breakdown()
        return {"strategy": self.plan.strategy.describe(), "step_ms": round(self.step_ms, 3),
                "feasible": self.feasible, "peak_gib": round(max(self.peak.values()) / 2**30, 2),
                "mfu": round(self.mfu(), 4),
                **{f"{k}_ms": round(v, 3) for k, v in b.items() if k != "step"}}


# ---------------------------------------------------------------------- the event core
class _Core:
    """Heap, channels, keys (arrivals) and collective rendezvous."""

    def __init__(self):
        self.heap: list = []
        self.seq = 0
        self.events = 0
        self.free: dict = defaultdict(float)     # (rank, channel) -> free from
        self.queues: dict = defaultdict(deque)   # (rank, channel) -> requests in line
        self.keys: dict = {}                     # key -> value (arrival time, ...)
        self.waiters: dict = defaultdict(list)
        self.rdv: dict = {}
        self.gens: dict = {}
        self.now: dict = {}
        self.links: list = []
        self.record_links = True
        self.reserve_sends = False

    def push(self, t: float, r: int, value=None) -> None:
        heapq.heappush(self.heap, (t, self.seq, r, value))
        self.seq += 1

    def run(self) -> None:
        for r in self.gens:
            self.push(0.0, r)
        heap = self.heap
        while heap:
            t, _, r, value = heapq.heappop(heap)
            self.events += 1
            self._advance(r, t, value)
        stuck = [r for r, g in self.gens.items() if g is not None]
        if stuck:
            raise PlanError(f"training schedule deadlocks: rank {stuck[0]} waits forever")

    def set_key(self, key, value) -> None:
        self.keys[key] = value
        for r in self.waiters.pop(key, ()):
            self.push(value[0], r, value)

    def submit(self, req: list) -> None:
        """Queue ``req`` = ``[chans, t, dur, ready, done]`` on its channels (FIFO): it starts
        once ready (every member joined) and first in line on every channel, at the latest of
        ``t`` and the channels' free times; ``done(start, end)`` is then called."""
        q = self.queues
        if req[3] and not any(q.get(ch) for ch in req[0]):
            self._start(req)
            return
        for ch in req[0]:
            q[ch].append(req)
        self._drain(req[0])

    def _start(self, req: list) -> None:
        chans, t, dur = req[0], req[1], req[2]
        free = self.free
        start = max([t] + [free[ch] for ch in chans])
        end = start + dur
        for ch in chans:
            free[ch] = end
        req[4](start, end)

    def _drain(self, chans) -> None:
        q = self.queues
        work = list(chans)
        while work:
            ch = work.pop()
            head = q[ch][0] if q.get(ch) else None
            if head is None or not head[3] or any(q[c][0] is not head for c in head[0]):
                continue
            for c in head[0]:
                q[c].popleft()
            self._start(head)
            work.extend(head[0])

    def _advance(self, r: int, t: float, value) -> None:
        self.now[r] = t
        g = self.gens[r]
        while True:
            try:
                req = g.send(value)
            except StopIteration:
                self.gens[r] = None
                return
            op = req[0]
            value = None
            if op == "c":
                self.push(t + req[1], r)
                return
            if op == "w":
                v = self.keys.get(req[1])
                if v is None:
                    self.waiters[req[1]].append(r)
                    return
                if v[0] > t:
                    self.push(v[0], r, v)
                    return
                value = v
            elif op == "t":
                if self._alone(r, t, *req[1:]):
                    return
            elif op == "x":
                if self._collective(r, t, *req[1:]):
                    return
            elif op == "s":
                self._send(t, *req[1:])

    def _alone(self, r, t, chans, dur, blocking, done_key, what) -> bool:
        """A collective simulated on one rank for its group (identical ranks): it starts when
        the rank's channels are free (nothing ever waits in their queues then)."""
        free = self.free
        start = t
        for ch in chans:
            if free[ch] > start:
                start = free[ch]
        end = start + dur
        for ch in chans:
            free[ch] = end
        if self.record_links and what:
            for ch in chans:
                self.links.append((ch[0], ch[1], start, end, what, t))
        if done_key is not None:
            self.set_key(done_key, (end, start))
        if blocking:
            self.push(end, r, (end, start))
        return blocking

    def _collective(self, r, t, gkey, n_sim, chans, dur, blocking, done_key, what) -> bool:
        """Join a collective; True when ``r`` must wait for it (blocking)."""
        entry = self.rdv.get(gkey)
        if entry is None:
            req = [[], t, dur, False, None]
            entry = self.rdv[gkey] = [0, req, [], []]
            req[4] = lambda start, end, e=entry, w=what: self._collective_done(e, w, start, end)
        req = entry[1]
        entry[0] += 1
        req[1] = max(req[1], t)
        if done_key is not None:
            entry[3].append(done_key)
        if blocking:
            entry[2].append(r)
        complete = entry[0] >= n_sim
        if complete:
            del self.rdv[gkey]
            req[3] = True
        if n_sim == 1:
            req[0] = chans
            self.submit(req)
        else:
            req[0].extend(chans)
            for ch in chans:
                self.queues[ch].append(req)
            self._drain(req[0] if complete else chans)
        return blocking

    def _collective_done(self, entry, what, start, end) -> None:
        if self.record_links and what:
            for ch in dict.fromkeys(entry[1][0]):
                self.links.append((ch[0], ch[1], start, end, what, entry[1][1]))
        for k in entry[3]:
            self.set_key(k, (end, start))
        for w in entry[2]:
            self.push(end, w, (end, start))

    def _send(self, t, chans, dur, key, what) -> None:
        def done(start, end):
            if self.record_links and chans:
                self.links.append((chans[0][0], chans[0][1], start, end, what, t))
            self.set_key(key, (end, t))
        if self.reserve_sends:     # many-to-many sends: no FIFO wait (it could be cyclic)
            self._start([chans, t, dur, True, done])
        else:
            self.submit([chans, t, dur, True, done])


# ---------------------------------------------------------------------- the ranks
_PARTS = ("compute", "recompute", "tp", "pp", "bubble", "dp", "optimizer")


class _Sim:
    """One simulation: the programs, the groups, and a generator per simulated rank."""

    def __init__(self, plan, full: bool):
        from ..costs.llm import state_bytes_per_param

        self.plan, self.full = plan, full
        s = self.s = plan.strategy
        self.progs = [chunk_program(plan, c) for c in range(plan.n_chunks)]
        self.core = _Core()
        self.intra, self.inter = plan.cluster.intra_host, plan.cluster.inter_host
        self.hosts = plan.hosts
        self.pb, self.gb, self.ob = state_bytes_per_param(plan.config.precision)
        self.cap = {r: plan.cluster.devices[r].memory for r in range(s.devices)}
        self._dur: dict = {}
        self._routes: dict = {}
        self.out = {k: {} for k in ("tasks", "memory", "peak", "parts")}
        self.oom = None

    def group(self, kind: str, stage: int, rep: int, tpr: int) -> tuple:
        """``(members, nodes, fabrics)`` of the rank's tensor-parallel (``tp``),
        data-parallel (``dp``), expert-parallel (``ep``: ``ep`` consecutive replicas) or
        expert-data-parallel (``edp``: the ``dp / ep`` replicas holding the same experts)
        group."""
        plan = self.plan
        t, d = self.s.width_of(stage)
        ep = self.s.ep
        if kind == "tp":
            members = [plan.rank(stage, rep, x) for x in range(t)]
        elif kind == "ep":          # consecutive replicas (Megatron-Core: EP inside DP)
            members = [plan.rank(stage, rep - rep % ep + x, tpr) for x in range(ep)]
        elif kind == "edp":         # the replicas holding the same experts
            members = [plan.rank(stage, rep % ep + x * ep, tpr) for x in range(d // ep)]
        else:
            members = [plan.rank(stage, x, tpr) for x in range(d)]
        nodes = len({self.hosts[m] for m in members})
        fabrics = ("nvl",) if nodes == 1 else (("nic",) if nodes == len(members)
                                              else ("nvl", "nic"))
        return members, nodes, fabrics

    def coll(self, rank, counters, gname, group, kind, nbytes, blocking, done_key, what):
        """The request for a collective of ``group`` (as built by :meth:`group`)."""
        members, nodes, fabrics = group
        key = (kind, nbytes, len(members), nodes)
        dur = self._dur.get(key)
        if dur is None:
            dur = self._dur[key] = collective_ms(kind, nbytes, len(members), nodes, self.intra,
                                                 self.inter, self.s.algorithm)
        if not self.full:      # the group is this rank alone: no rendezvous
            return ("t", [(rank, f) for f in fabrics], dur, blocking, done_key, what)
        n = counters[gname] = counters.get(gname, 0) + 1
        gkey = (gname, members[0], n)
        return ("x", gkey, len(members), [(rank, f) for f in fabrics], dur, blocking, done_key,
                what)

    def send(self, rank, dst, nbytes, key, what):
        if dst == rank:
            return ("s", [], 0.0, key, "")
        same = self.hosts[rank] == self.hosts[dst]
        fab, link = ("nvl", self.intra) if same else ("nic", self.inter)
        return ("s", [(rank, fab), (dst, fab)], p2p_ms(nbytes, link), key, what)

    def issue(self, host: list, now: float, kernels) -> float:
        """GPU time, from ``now``, of ops taking ``kernels`` ms each on the GPU, each issued
        ``host_op_ms`` after the previous one by a host free from ``host[0]`` (advanced): an op
        starts once issued and once the previous op has ended (a CUDA stream)."""
        lane, h, g = self.plan.gpu.host_op_ms, host[0], now
        for k in kernels:
            h += lane
            g = (g if g > h else h) + k
        host[0] = h
        return g - now

    def static_bytes(self, params: float, dp: int, eparams: float = 0.0) -> float:
        """Parameters, gradients and optimizer states of ``params``, sharded under ZeRO over
        the stage's ``dp`` replicas; of those, the experts' ``eparams`` (expert
        parallelism) over the ``dp / ep`` expert-data-parallel replicas."""
        z = self.s.zero

        def per(d):
            return self.pb / (d if z >= 3 else 1) + self.gb / (d if z >= 2 else 1) + \
                self.ob / (d if z >= 1 else 1)

        if self.s.ep == 1:
            return params * per(dp)
        return (params - eparams) * per(dp) + eparams * per(dp // self.s.ep)

    def routes(self, c: int, kind: str) -> tuple:
        """``(sends, sources)`` of chunk ``c``'s output (``F``: to chunk ``c + 1``) or input
        gradient (``B``: to chunk ``c - 1``): ``sends[rank]`` its ``(receiver, bytes)``,
        ``sources[rank]`` the ranks it receives from (:meth:`TrainingPlan.route`)."""
        key = (c, kind)
        if key not in self._routes:
            plan, pp = self.plan, self.s.pp
            a = c if kind == "F" else c - 1           # the chunk whose output travels
            dst = c + 1 if kind == "F" else c - 1
            seqs = plan.micro_seqs // self.s.width_of(a % pp)[1]
            sends: dict = defaultdict(list)
            sources: dict = defaultdict(list)
            for (x, y), b in plan.route(c % pp, dst % pp, self.progs[a]["out"], seqs).items():
                sends[x].append((y, b))
                sources[y].append(x)
            self._routes[key] = (sends, sources)
        return self._routes[key]

    def memory(self, rank, t, delta, state) -> None:
        state[0] += delta
        self.out["memory"][rank].append((t, state[0]))
        if state[0] > self.out["peak"][rank]:
            self.out["peak"][rank] = state[0]
        if self.oom is None and state[0] > self.cap[rank] * (1 + 1e-12):
            self.oom = {"device": self.plan.device_name(rank), "rank": rank, "time_ms": t,
                        "bytes": state[0], "capacity": self.cap[rank]}

    def proc(self, stage: int, rep: int, tpr: int):
        """The generator of one rank (see the module docstring)."""
        plan, s, core, progs = self.plan, self.s, self.core, self.progs
        rank = plan.rank(stage, rep, tpr)
        nch, pp, last_mb = plan.n_chunks, s.pp, plan.n_micro - 1
        dp = s.width_of(stage)[1]
        tp_group, dp_group = self.group("tp", stage, rep, tpr), self.group("dp", stage, rep, tpr)
        here = [c for c in range(nch) if c % pp == stage]
        params = sum(progs[c]["params"] for c in here)
        eparams = sum(progs[c]["eparams"] for c in here)
        parts = dict.fromkeys(_PARTS + (("ep",) if s.ep > 1 else ()), 0.0)
        ep_groups = (self.group("ep", stage, rep, tpr), self.group("edp", stage, rep, tpr)) \
            if s.ep > 1 else None
        tasks = self.out["tasks"][rank] = []
        self.out["memory"][rank] = []
        self.out["peak"][rank] = 0.0
        state = [0.0]
        self.memory(rank, 0.0, self.static_bytes(params, dp, eparams), state)
        counters: dict = {}
        grad_keys: list = []
        lane, host = plan.gpu.host_op_ms, [0.0]
        order = plan.orders[stage]
        zero3 = s.zero >= 3 and dp > 1
        gathered = [self.pb * progs[c]["params"] * (dp - 1) / dp for c in range(nch)]

        def gather(i):
            c = order[i][1]
            return self.coll(rank, counters, "dp", dp_group, "allgather",
                             self.pb * progs[c]["params"], False, ("z", rank, i), "zero3")

        if zero3:
            yield gather(0)
        for i, (kind, c, m) in enumerate(order):
            t0 = core.now[rank]
            need = kind == "F" and c > 0 or kind == "B" and c < nch - 1
            if need:
                asked = None
                src = self.routes(c - 1 if kind == "F" else c + 1, kind)[1][rank]
                for x in src:
                    v = yield ("w", (kind, c, m, rank, x))
                    if v is not None:
                        asked = v[1] if asked is None else max(asked, v[1])
                now = core.now[rank]
                if asked is not None and now > t0:
                    bub = max(0.0, min(asked, now) - t0)
                    parts["bubble"] += bub
                    parts["pp"] += now - t0 - bub
                host[0] = max(host[0], now)
            if zero3:
                t1 = core.now[rank]
                yield ("w", ("z", rank, i))
                parts["dp"] += core.now[rank] - t1
                if i + 1 < len(order):
                    yield gather(i + 1)
                self.memory(rank, core.now[rank], gathered[c], state)
            start = core.now[rank]
            prog = progs[c]
            if kind == "B" and prog["transient"]:
                self.memory(rank, start, prog["transient"], state)
            sync = dp > 1 and s.overlap_grad and (s.zero >= 2 or m == last_mb)
            rec = 0.0
            for seg in prog["fwd" if kind == "F" else "bwd"]:
                typ = seg[0]
                if typ == "c" or typ == "r":
                    dur = self.issue(host, core.now[rank], seg[2]) if lane else seg[1]
                    yield ("c", dur)
                    parts["compute" if typ == "c" else "recompute"] += dur
                    if typ == "r":
                        rec += dur
                elif typ == "x":
                    ta = core.now[rank]
                    if lane:                  # issued by the host like any op
                        host[0] += lane
                        if host[0] > ta:
                            yield ("c", host[0] - ta)
                    yield self.coll(rank, counters, "tp", tp_group, seg[1].kind,
                                    seg[1].nbytes, True, None, "tp")
                    parts["tp"] += core.now[rank] - ta
                elif typ == "a":              # blocking, on the rank's stream as tp's
                    ta = core.now[rank]
                    yield self.coll(rank, counters, "ep", ep_groups[0], "alltoall", seg[1],
                                    True, None, "ep")
                    parts["ep"] += core.now[rank] - ta
                elif sync:
                    req = self._grad(rank, counters, seg, dp_group, ep_groups, grad_keys)
                    if req is not None:
                        yield req
            end = core.now[rank]
            tasks.append((start, end, kind, c, m, rec))
            if lane and ((kind == "F" and c + 1 < nch) or (kind == "B" and c > 0)):
                host[0] = max(host[0], end)
            if kind == "F":
                self.memory(rank, end, prog["stash"], state)
            else:
                self.memory(rank, end, -prog["stash"] - prog["transient"], state)
            if kind == "F" and c + 1 < nch or kind == "B" and c > 0:
                nxt = c + 1 if kind == "F" else c - 1
                for dst, nbytes in self.routes(c, kind)[0][rank]:
                    yield self.send(rank, dst, nbytes, (kind, nxt, m, dst, rank), "pp")
            if zero3:
                self.memory(rank, end, -gathered[c], state)
        if host[0] > core.now[rank]:       # the host still issuing when the GPU is done
            parts["compute"] += host[0] - core.now[rank]
            yield ("c", host[0] - core.now[rank])
        yield from self._finish(rank, here, (dp_group, ep_groups), counters, grad_keys,
                                (params, eparams), parts)

    def _grad(self, rank, counters, seg, dp_group, ep_groups, grad_keys):
        """The request synchronising gradient bucket ``seg``: all-reduced (reduce-scattered
        under ZeRO) over the data-parallel group, an expert bucket (``ge``) over the
        expert-data-parallel one (nothing to do when ``ep = dp``)."""
        group = ep_groups[1] if seg[0] == "ge" else dp_group
        if len(group[0]) <= 1:
            return None
        key = ("g", rank, len(grad_keys))
        grad_keys.append(key)
        return self.coll(rank, counters, "edp" if seg[0] == "ge" else "dp", group,
                         "allreduce" if self.s.zero == 0 else "reducescatter", seg[1], False,
                         key, "dp")

    def _finish(self, rank, here, groups, counters, grad_keys, params, parts):
        """Gradients not yet synchronised, the optimizer step, ZeRO-1/2's parameter gather
        (the experts' over the expert-data-parallel group)."""
        from ..costs.llm import ADAM_FLOPS

        s, core = self.s, self.core
        dp_group, ep_groups = groups
        params, eparams = params
        dp = len(dp_group[0])
        if dp > 1 and not s.overlap_grad:
            for c in here:
                for seg in self.progs[c]["bwd"]:
                    req = self._grad(rank, counters, seg, dp_group, ep_groups, grad_keys) \
                        if seg[0] in ("g", "ge") else None
                    if req is not None:
                        yield req
        t0 = core.now[rank]
        for key in grad_keys:
            yield ("w", key)
        parts["dp"] += core.now[rank] - t0
        if s.ep == 1:
            n = params / (dp if s.zero >= 1 else 1)
        else:
            n = (params - eparams) / (dp if s.zero >= 1 else 1) + \
                eparams / (dp // s.ep if s.zero >= 1 else 1)
        ms = self.plan.gpu.op_ms(ADAM_FLOPS * n, (self.pb + self.gb + 2 * self.ob) * n,
                                 half=False)
        yield ("c", ms)
        parts["optimizer"] += ms
        if s.zero in (1, 2) and dp > 1:
            t1 = core.now[rank]
            if s.ep == 1:
                yield self.coll(rank, counters, "dp", dp_group, "allgather", self.pb * params,
                                True, None, "dp")
            else:
                yield self.coll(rank, counters, "dp", dp_group, "allgather",
                                self.pb * (params - eparams), True, None, "dp")
                if len(ep_groups[1][0]) > 1:
                    yield self.coll(rank, counters, "edp", ep_groups[1], "allgather",
                                    self.pb * eparams, True, None, "dp")
            parts["dp"] += core.now[rank] - t1
        parts["step"] = core.now[rank]
        self.out["parts"][rank] = parts


def identical_ranks(plan) -> bool:
    """Whether every replica and tensor-parallel rank of a stage is interchangeable: the same
    device figures, tensor- and data-parallel groups of the same shape (ranks, nodes), and
    pipeline sends over the same kind of link -- where simulating one rank per stage is exact.

    >>> from workbench.cluster import Cluster, Device
    >>> from workbench.transforms.parallel import Strategy, parallelize
    >>> identical_ranks(parallelize("gpt:layers=2,hidden=64,heads=4", Cluster.preset("64xA100-80g"),
    ...                             Strategy(tp=4, pp=2, dp=8)))
    True
    >>> odd = Cluster([Device(f"g{i}", memory=80e9, host=f"n{i // 3}") for i in range(4)])
    >>> identical_ranks(parallelize("gpt:layers=2,hidden=64,heads=4", odd,
    ...                             Strategy(dp=4), gpu="A100-80G"))
    False
    """
    s, devs, hosts = plan.strategy, plan.cluster.devices, plan.hosts

    def shape(members):
        per_node = Counter(hosts[m] for m in members).values()
        return len(members), len(per_node), min(per_node) == max(per_node)

    used = [devs[r] for r in range(s.devices)]
    if len({(d.memory, d.speed, d.kind) for d in used}) > 1:
        return False
    if len({s.width_of(st) for st in range(s.pp)}) > 1:     # sends reshard between widths
        return False
    tp, dp = s.width_of(0)
    for st in range(s.pp):
        tp_shapes = {shape([plan.rank(st, r, x) for x in range(tp)]) for r in range(dp)}
        dp_shapes = {shape([plan.rank(st, x, t) for x in range(dp)]) for t in range(tp)}
        sends = {hosts[plan.rank(st, r, t)] == hosts[plan.rank((st + 1) % s.pp, r, t)]
                 for r in range(dp) for t in range(tp)}
        if len(tp_shapes) > 1 or len(dp_shapes) > 1 or len(sends) > 1 or \
                not all(sh[2] for sh in tp_shapes | dp_shapes):
            return False
        if s.ep > 1 and not _identical_ep_groups(plan, st, shape):
            return False
    return True


def _identical_ep_groups(plan, st: int, shape) -> bool:
    """Whether stage ``st``'s expert-parallel groups (``ep`` consecutive replicas) have one
    shape, and so have its expert-data-parallel groups (the replicas holding the same
    experts)."""
    (tp, dp), e = plan.strategy.width_of(st), plan.strategy.ep
    for members in (lambda r, t: [plan.rank(st, r - r % e + x, t) for x in range(e)],
                    lambda r, t: [plan.rank(st, r % e + x * e, t) for x in range(dp // e)]):
        shapes = {shape(members(r, t)) for r in range(dp) for t in range(tp)}
        if len(shapes) > 1 or not all(sh[2] for sh in shapes):
            return False
    return True


def simulate_training(plan, *, ranks: str = "reduced", record_links: bool = True
                      ) -> TrainingResult:
    """Judge a :class:`~workbench.transforms.parallel.TrainingPlan` (see the module docstring).

    ``ranks="reduced"`` simulates one rank per pipeline stage where that is exact
    (:func:`identical_ranks`; otherwise every rank), ``"all"`` every rank;
    ``record_links=False`` keeps no list of link events (large runs).
    """
    # the TrainingPlan's fields (transforms sit above the judge: no import of the class)
    if not all(hasattr(plan, a) for a in ("strategy", "orders", "cuts", "gpu", "chunk_ops")):
        hint = " (an op-level Plan is judged by workbench.simulate)" \
            if type(plan).__name__ == "Plan" else ""
        raise PlanError(f"simulate_training judges a TrainingPlan (parallelize(model, cluster, "
                        f"strategy)), got {type(plan).__name__}{hint}")
    if ranks not in ("reduced", "all"):
        raise PlanError(f"ranks must be 'reduced' or 'all', got {ranks!r}")
    s = plan.strategy
    if ranks == "reduced" and not identical_ranks(plan):
        ranks = "all"
    full = ranks == "all"
    sim = _Sim(plan, full)
    sim.core.record_links = record_links
    sim.core.reserve_sends = len({s.width_of(st) for st in range(s.pp)}) > 1
    stage_of = {}
    for st in range(s.pp):
        t, d = s.width_of(st)
        for rep in range(d if full else 1):
            for tpr in range(t if full else 1):
                r = plan.rank(st, rep, tpr)
                stage_of[r] = st
                sim.core.gens[r] = sim.proc(st, rep, tpr)
                sim.core.now[r] = 0.0
    sim.core.run()
    out = sim.out
    step = max(p["step"] for p in out["parts"].values())
    return TrainingResult(plan, step, out["tasks"], sim.core.links, out["memory"],
                          out["peak"], sim.oom, out["parts"], sim.core.events, ranks, stage_of)
