"""Parallel training strategies: the plan a Megatron-LM / DeepSpeed training system would run.

:func:`parallelize` turns a model (:class:`~workbench.costs.llm.LLMConfig`), a cluster and a
:class:`Strategy` into a :class:`TrainingPlan`, which :func:`workbench.judge.training.simulate_training`
executes. What each knob means, and the reference it follows:

* **tensor parallelism** ``tp`` (Shoeybi et al. 2019, "Megatron-LM", section 3): QKV and the
  first MLP matmul split by columns, the attention output projection and second MLP matmul by
  rows, attention heads and the vocabulary (embedding, LM head, cross-entropy) split across
  the ``tp`` ranks; two all-reduces per block forward and two backward (the ``f``/``g``
  operators, :class:`~workbench.costs.llm.ChainOp` ``comm_fwd``/``comm_bwd``). With ``sp=True``
  (sequence parallelism, Korthikanti et al. 2022, section 4.2.2) the replicated norms and
  dropouts are split along the sequence and each all-reduce becomes a reduce-scatter plus an
  all-gather of the same bytes.
* **pipeline parallelism** ``pp``: the chain is cut into ``pp x virtual`` contiguous chunks,
  chunk ``c`` on stage ``c % pp`` (Narayanan et al. 2021, section 2.2.2) -- from a balanced
  split of the layers (embedding with the first, head and loss with the last chunk, as
  Megatron-LM does), from explicit layer counts (``layers_per_stage``), or from any op-level
  cut (``cuts``: chain positions, see :func:`cuts_from_placement` for a placement made by an
  op-placing solver such as the pipeline DP of Tarnawski et al.). Micro-batches are ordered
  **GPipe** (all forwards, then all backwards: Huang et al. 2019), **1F1B** (PipeDream-Flush:
  ``pp - stage - 1`` warm-up forwards, then one forward one backward) or **interleaved 1F1B**
  (``virtual`` chunks per stage, Megatron-LM's schedule: ``2 (pp - stage - 1) + (virtual - 1)
  pp`` warm-up forwards; micro-batches a multiple of ``pp``).
* **data parallelism** ``dp``: replicas of the pipeline; gradients accumulate over the
  micro-batches and are all-reduced in buckets of ``bucket_mb`` MB (PyTorch DDP's
  ``bucket_cap_mb = 25``) as the last micro-batch's backward produces them, overlapping it
  (``overlap_grad=True``, Li et al. 2020 "PyTorch Distributed", section 3.2.3); else after it.
* **ZeRO** (Rajbhandari et al. 2020): ``zero=1`` shards the optimizer states over ``dp``
  (gradients reduce-scattered, updated parameters all-gathered); ``zero=2`` also the gradients
  (reduce-scattered after every micro-batch's backward); ``zero=3`` also the parameters
  (all-gathered before every forward and backward of a chunk, prefetched one task ahead).
* **activation recomputation** ``recompute`` (Chen et al. 2016; Korthikanti et al. 2022,
  section 5): ``none``; ``selective`` keeps everything but the attention core (scores,
  softmax, dropout, attention over values), recomputed in the backward pass; ``full`` keeps
  only each block's input and re-runs the whole block forward (with its collectives) before
  its backward. ``stage_recompute`` (one setting per pipeline stage) chooses it stage by stage:
  under 1F1B stage ``k`` holds ``pp - k`` micro-batches' activations, so the first stages may
  need recomputation where the last do not (per-stage recomputation, as Megatron Core's
  ``--recompute-num-layers`` per pipeline rank and Aceso's per-stage search do).
* **softmaxes** ``softmax`` (:data:`SOFTMAX`): ``fused`` (default) the attention's softmax
  and the loss's softmax cross-entropy one fused kernel each; ``megatron`` as Megatron runs
  them: its fused scale-mask-softmax where its kernel accepts the shape and PyTorch's five
  ops (cast, scale, mask, softmax, cast) elsewhere, and its vocabulary-parallel
  cross-entropy on fp32 logits as six kernels forward (cast, max, subtract, exp, sum,
  divide) and two backward, each issued and run as an op of its own (how the
  public-fidelity model judges Megatron's measured runs).

* **per-stage widths** ``stage_widths`` (one ``(tp, dp)`` pair per stage): each stage its
  own tensor-parallel and data-parallel degree, ``sum tp_k x dp_k`` GPUs -- the replication
  of PipeDream and Tarnawski et al. (appendix C.2: each stage replicated on its own number
  of devices) and Megatron Core's heterogeneous stages (``--encoder-tensor-model-parallel-size``).
  A micro-batch holds ``mbs x max dp_k`` sequences; stage ``k``'s replicas share each
  micro-batch, ``micro / dp_k`` sequences each (``dp_k`` must divide it); between stages of
  unequal widths the activations are resharded (:meth:`TrainingPlan.route`).

Rank layout (Megatron-LM): ``rank = stage x (dp x tp) + replica x tp + tp_rank`` (with
per-stage widths the stages' blocks of ``tp_k x dp_k`` ranks follow each other), ranks
filling the cluster's hosts in order, so tensor-parallel groups stay inside a node when ``tp``
divides the GPUs per node.

Examples
--------
>>> from workbench.cluster import Cluster
>>> from workbench.costs.llm import parse_spec
>>> cfg = parse_spec("gpt:layers=8,hidden=512,heads=8,seq=256,mbs=2")
>>> s = Strategy(tp=2, pp=2, dp=2, global_batch=16, schedule="1f1b", recompute="full")
>>> p = parallelize(cfg, Cluster.preset("8xA100-80g"), s)
>>> p.n_micro, [p.chunk_layers(c) for c in range(p.n_chunks)]
(4, [(0, 4), (4, 8)])
>>> [f"{k}{m}" for k, c, m in p.orders[0]]
['F0', 'F1', 'B0', 'F2', 'B1', 'F3', 'B2', 'B3']
>>> p.strategy.describe()
'tp2 pp2 dp2 mbs2 gbs16 1f1b recompute=full zero0'
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property, lru_cache

from ..costs.llm import GPUS, GPUSpec, LLMConfig, chain, parse_spec
from ..errors import PlanError

__all__ = ["MAX_MICRO", "SCHEDULES", "RECOMPUTE", "SOFTMAX", "Strategy", "TrainingPlan", "check_inputs",
           "cuts_from_placement", "gpu_of",
           "parallelize", "schedule_orders", "PRESET_GPUS"]

SCHEDULES = ("gpipe", "1f1b", "interleaved")
MAX_MICRO = 8192
"""Most micro-batches a replica may run in one step (the judge simulates each; a global batch
of 10**9 sequences ran for minutes before it was refused, issue 41)."""
RECOMPUTE = ("none", "selective", "full")
SOFTMAX = ("fused", "megatron")
"""How the softmaxes run: ``fused`` each as one fused kernel; ``megatron`` as Megatron runs
them: the attention's as its fused kernel where it is available and as five PyTorch ops
elsewhere (:func:`workbench.costs.llm.fused_softmax_available`: at ``mbs x heads / tp`` not a
multiple of 4, e.g. 16 heads, tp 8, micro-batch 1), the loss's as the kernels of its
vocabulary-parallel cross-entropy on fp32 logits
(:data:`workbench.costs.llm.MEGATRON_CROSS_ENTROPY_BYTES`)."""

PRESET_GPUS = {"8xA100-80g": "A100-80G", "64xA100-80g": "A100-80G", "512xA100-80g": "A100-80G",
               "8xA100-40g": "A100-40G", "64xA100-40g": "A100-40G", "512xA100-40g": "A100-40G",
               "8xH100": "H100-80G", "64xH100": "H100-80G", "512xH100": "H100-80G"}
"""Cluster preset -> its GPU (:data:`workbench.costs.llm.GPUS`)."""


@dataclass(frozen=True)
class Strategy:
    """How a training step is parallelised (see the module docstring for each field).

    ``mbs`` (sequences per micro-batch, default: the model's) and ``global_batch``
    (sequences per step, default ``mbs x dp``) set the micro-batches per replica,
    ``global_batch / (mbs x dp)``.
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    mbs: int = 0
    global_batch: int = 0
    schedule: str = "1f1b"
    virtual: int = 1
    recompute: str = "none"
    zero: int = 0
    sp: bool = False
    bucket_mb: float = 25.0
    overlap_grad: bool = True
    algorithm: str = "ring"
    stage_recompute: tuple = ()
    stage_widths: tuple = ()
    softmax: str = "fused"
    ep: int = 1

    def __post_init__(self):
        self._check_stage_widths()
        for f in ("tp", "pp", "dp", "virtual", "ep"):
            v = getattr(self, f)
            if not (isinstance(v, int) and not isinstance(v, bool) and v >= 1):
                raise PlanError(f"strategy: {f} must be an integer >= 1, got {v!r}")
        for f in ("mbs", "global_batch"):
            v = getattr(self, f)
            if not (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
                raise PlanError(f"strategy: {f} must be a non-negative integer, got {v!r}")
        if self.schedule not in SCHEDULES:
            raise PlanError(f"strategy: schedule must be one of {', '.join(SCHEDULES)}, got "
                            f"{self.schedule!r}")
        if self.virtual > 1 and self.schedule != "interleaved":
            raise PlanError(f"strategy: virtual={self.virtual} needs schedule='interleaved'")
        if self.recompute not in RECOMPUTE:
            raise PlanError(f"strategy: recompute must be one of {', '.join(RECOMPUTE)}, got "
                            f"{self.recompute!r}")
        self._check_stage_recompute()
        if isinstance(self.zero, bool) or not isinstance(self.zero, int) or \
                self.zero not in (0, 1, 2, 3):
            raise PlanError(f"strategy: zero must be 0, 1, 2 or 3, got {self.zero!r}")
        for f in ("sp", "overlap_grad"):
            if not isinstance(getattr(self, f), bool):
                raise PlanError(f"strategy: {f} must be True or False, got {getattr(self, f)!r}")
        if self.sp and self.tp == 1:
            raise PlanError("strategy: sequence parallelism (sp=True) splits the tensor-parallel "
                            "ranks' work; it needs tp > 1")
        if self.softmax not in SOFTMAX:
            raise PlanError(f"strategy: softmax must be one of {', '.join(SOFTMAX)}, got "
                            f"{self.softmax!r}")
        if self.algorithm not in ("ring", "tree"):
            raise PlanError(f"strategy: algorithm must be 'ring' or 'tree', got "
                            f"{self.algorithm!r}")
        if isinstance(self.bucket_mb, bool) or not (
                isinstance(self.bucket_mb, (int, float)) and 0 < self.bucket_mb < math.inf):
            raise PlanError(f"strategy: bucket_mb must be > 0, got {self.bucket_mb!r}")
        self._check_ep()

    def _check_ep(self) -> None:
        """``ep``: the expert-parallel degree, carved out of the data-parallel ranks as
        Megatron-Core's ``--expert-model-parallel-size`` is (``dp / ep`` expert-data-parallel
        replicas of each expert); the model's expert count is checked by :func:`parallelize`.

        >>> Strategy(dp=8, ep=4).describe()
        'tp1 pp1 dp8 ep4 mbs0 gbs0 1f1b recompute=none zero0'
        >>> Strategy(dp=6, ep=4)
        Traceback (most recent call last):
        ...
        workbench.errors.PlanError: strategy: ep=4 must divide dp=6 (expert-parallel ranks are carved out of the data-parallel ones: dp / ep expert-data-parallel replicas)
        """
        if self.ep == 1:
            return
        if self.stage_widths:
            raise PlanError(f"strategy: ep={self.ep} with per-stage widths (stage_widths) is not "
                            f"modelled; expert parallelism needs one dp for every stage")
        if self.dp % self.ep:
            raise PlanError(f"strategy: ep={self.ep} must divide dp={self.dp} (expert-parallel "
                            f"ranks are carved out of the data-parallel ones: dp / ep "
                            f"expert-data-parallel replicas)")
        if self.tp > 1 and not self.sp:
            raise PlanError(f"strategy: ep={self.ep} with tp={self.tp} needs sequence "
                            f"parallelism (sp=True), as Megatron-Core's TransformerConfig "
                            f"requires: its all-to-all dispatcher takes each tensor-parallel "
                            f"rank's 1 / tp of the tokens")
        if self.zero >= 3:
            raise PlanError(f"strategy: ep={self.ep} with zero=3 is not modelled (Megatron-Core "
                            f"shards optimizer states and gradients, ZeRO-1/2, over the "
                            f"expert-data-parallel ranks; it has no ZeRO-3 of the experts)")

    def _check_stage_widths(self) -> None:
        """``stage_widths``: empty, or one ``(tp, dp)`` pair per stage (per-stage widths);
        ``tp`` and ``dp`` then name the widest stage's degrees (``dp`` sets the micro-batch:
        ``mbs x dp`` sequences, shared out over each stage's replicas). Pairs equal on every
        stage are kept as given: the judge then runs its general resharding path, which the
        tests check against the uniform strategy."""
        w = self.stage_widths
        if isinstance(w, str) or not isinstance(w, (tuple, list)):
            raise PlanError(f"strategy: stage_widths must be a tuple of one (tp, dp) pair per "
                            f"stage, got {w!r}")
        if not w:
            return
        pairs = []
        for pair in w:
            ok = isinstance(pair, (tuple, list)) and len(pair) == 2 and all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in pair)
            if not ok:
                raise PlanError(f"strategy: stage_widths must hold (tp, dp) pairs of integers "
                                f">= 1, got {pair!r} in {w!r}")
            pairs.append((pair[0], pair[1]))
        if len(pairs) != self.pp:
            raise PlanError(f"strategy: stage_widths gives {len(pairs)} stages, pp={self.pp}")
        object.__setattr__(self, "stage_widths", tuple(pairs))
        object.__setattr__(self, "tp", max(t for t, _ in pairs))
        object.__setattr__(self, "dp", max(d for _, d in pairs))

    def width_of(self, stage: int) -> tuple[int, int]:
        """``(tp, dp)`` of pipeline stage ``stage``.

        >>> s = Strategy(pp=2, stage_widths=((2, 1), (1, 4)))
        >>> s.width_of(0), s.width_of(1), s.tp, s.dp, s.devices
        ((2, 1), (1, 4), 2, 4, 6)
        """
        return self.stage_widths[stage] if self.stage_widths else (self.tp, self.dp)

    def _check_stage_recompute(self) -> None:
        """``stage_recompute``: empty, or one setting of :data:`RECOMPUTE` per stage; the
        same setting on every stage is kept as the uniform ``recompute`` (one strategy, one
        spelling), and ``recompute`` then names the heaviest stage's."""
        per = self.stage_recompute
        if isinstance(per, str) or not isinstance(per, (tuple, list)):
            raise PlanError(f"strategy: stage_recompute must be a tuple of one setting per "
                            f"stage, got {per!r}")
        if not per:
            return
        per = tuple(per)
        if len(per) != self.pp or any(r not in RECOMPUTE for r in per):
            raise PlanError(f"strategy: stage_recompute must give pp={self.pp} settings of "
                            f"{', '.join(RECOMPUTE)}, got {per!r}")
        if len(set(per)) == 1:
            object.__setattr__(self, "recompute", per[0])
            per = ()
        else:
            object.__setattr__(self, "recompute", max(per, key=RECOMPUTE.index))
        object.__setattr__(self, "stage_recompute", per)

    def recompute_of(self, stage: int) -> str:
        """The recomputation of pipeline stage ``stage``.

        >>> s = Strategy(pp=3, stage_recompute=("full", "selective", "none"))
        >>> [s.recompute_of(k) for k in range(3)], s.recompute, s.recompute_label
        (['full', 'selective', 'none'], 'full', 'full/selective/none')
        >>> Strategy(pp=2, stage_recompute=("full", "full")) == Strategy(pp=2, recompute="full")
        True
        """
        return self.stage_recompute[stage] if self.stage_recompute else self.recompute

    @property
    def recompute_label(self) -> str:
        """``recompute``, or each stage's joined by ``/`` where they differ."""
        return "/".join(self.stage_recompute) if self.stage_recompute else self.recompute

    @property
    def devices(self) -> int:
        if self.stage_widths:
            return sum(t * d for t, d in self.stage_widths)
        return self.tp * self.pp * self.dp

    def describe(self) -> str:
        """One line: the fields a board, a report or ``diff`` shows (per-stage widths as
        ``widths=TPxDP/...``).

        >>> Strategy(pp=2, stage_widths=((1, 1), (1, 3)), mbs=1).describe()
        'widths=1x1/1x3 pp2 mbs1 gbs0 1f1b recompute=none zero0'
        """
        sched = self.schedule + (f"(v={self.virtual})" if self.virtual > 1 else "")
        if self.stage_widths:
            w = "/".join(f"{t}x{d}" for t, d in self.stage_widths)
            return (f"widths={w}{'+sp' if self.sp else ''} pp{self.pp} mbs{self.mbs} "
                    f"gbs{self.global_batch} {sched} recompute={self.recompute_label} "
                    f"zero{self.zero}")
        ep = f" ep{self.ep}" if self.ep > 1 else ""
        return (f"tp{self.tp}{'+sp' if self.sp else ''} pp{self.pp} dp{self.dp}{ep} "
                f"mbs{self.mbs} gbs{self.global_batch} {sched} "
                f"recompute={self.recompute_label} zero{self.zero}")

    def to_dict(self) -> dict:
        """The fields (``ep`` only when above 1: records of strategies without expert
        parallelism stay as they were).

        >>> "ep" in Strategy(dp=2).to_dict(), Strategy(dp=2, ep=2).to_dict()["ep"]
        (False, 2)
        """
        out = asdict(self)
        if self.ep == 1:
            del out["ep"]
        return out


def schedule_orders(schedule: str, pp: int, n_micro: int, virtual: int = 1) -> list[list]:
    """Each stage's order of ``(kind, chunk, micro-batch)``, kind ``F`` or ``B``; chunk ``c``
    runs on stage ``c % pp`` (``c = stage + pp x model chunk``).

    >>> [f"{k}{m}" for k, c, m in schedule_orders("gpipe", 2, 3)[1]]
    ['F0', 'F1', 'F2', 'B0', 'B1', 'B2']
    >>> [f"{k}{c}.{m}" for k, c, m in schedule_orders("interleaved", 2, 2, 2)[0]]
    ['F0.0', 'F0.1', 'F2.0', 'F2.1', 'B2.0', 'B2.1', 'B0.0', 'B0.1']
    """
    orders = []
    for s in range(pp):
        if schedule == "gpipe":
            order = [("F", s, m) for m in range(n_micro)] + [("B", s, m) for m in range(n_micro)]
        elif schedule == "1f1b":
            order = _one_f_one_b(n_micro, min(pp - s - 1, n_micro),
                                 lambda k: (s, k), lambda k: (s, k))
        else:
            total = n_micro * virtual

            def chunk_mb(k, backward, s=s):
                group, pos = divmod(k, pp * virtual)
                model_chunk = pos // pp
                if backward:
                    model_chunk = virtual - 1 - model_chunk
                return s + pp * model_chunk, group * pp + pos % pp

            warm = total if n_micro == pp else min(total, 2 * (pp - s - 1) + (virtual - 1) * pp)
            order = _one_f_one_b(total, warm, lambda k: chunk_mb(k, False),
                                 lambda k: chunk_mb(k, True))
        orders.append(order)
    return orders


@lru_cache(maxsize=512)
def _orders(schedule: str, pp: int, n_micro: int, virtual: int) -> tuple:
    """:func:`schedule_orders` kept (each stage's order a tuple): a search builds thousands of
    plans of a few schedules."""
    return tuple(tuple(o) for o in schedule_orders(schedule, pp, n_micro, virtual))


def _one_f_one_b(total: int, warm: int, fwd, bwd) -> list:
    """Warm-up forwards, then one forward one backward, then the cool-down backwards."""
    order = [("F", *fwd(k)) for k in range(warm)]
    b = 0
    for k in range(warm, total):
        order.append(("F", *fwd(k)))
        order.append(("B", *bwd(b)))
        b += 1
    order += [("B", *bwd(k)) for k in range(b, total)]
    return order


@dataclass
class TrainingPlan:
    """A model, a cluster and a strategy made concrete: chunks, ranks and each stage's order.

    ``cuts`` are the chain positions where chunks start (``cuts[0] == 0``, ``len == pp x
    virtual``); ``orders[s]`` is stage ``s``'s micro-batch order (every replica and
    tensor-parallel rank of the stage runs the same); ``gpu`` the roofline of the devices.
    """

    config: LLMConfig
    cluster: object
    strategy: Strategy
    cuts: list
    orders: list
    gpu: GPUSpec
    info: dict = field(default_factory=dict)

    @cached_property
    def ops(self) -> list:
        return chain(self.config)

    @property
    def n_chunks(self) -> int:
        return len(self.cuts)

    @property
    def n_micro(self) -> int:
        s = self.strategy
        return s.global_batch // (s.mbs * s.dp)

    def chunk_ops(self, c: int) -> list:
        """The chain ops of chunk ``c`` (as a replica of its stage runs them)."""
        end = self.cuts[c + 1] if c + 1 < len(self.cuts) else len(self.ops)
        return self.stage_ops(c % self.strategy.pp)[self.cuts[c]:end]

    def chunk_layers(self, c: int) -> tuple[int, int]:
        """``(first, last + 1)`` block of chunk ``c`` (embedding and head not counted)."""
        layers = [o.layer for o in self.chunk_ops(c) if 0 <= o.layer < self.config.blocks]
        return (min(layers), max(layers) + 1) if layers else (0, 0)

    def rank(self, stage: int, replica: int = 0, tp_rank: int = 0) -> int:
        s = self.strategy
        if not s.stage_widths:
            return stage * s.dp * s.tp + replica * s.tp + tp_rank
        return self._offsets[stage] + replica * s.stage_widths[stage][0] + tp_rank

    @cached_property
    def _offsets(self) -> list:
        """First rank of each stage (stages of ``tp x dp`` ranks, one after the other)."""
        out, at = [], 0
        for t, d in self.strategy.stage_widths:
            out.append(at)
            at += t * d
        return out

    @property
    def micro_seqs(self) -> int:
        """Sequences of one pipeline micro-batch (``mbs x dp``; with per-stage widths each of
        stage ``k``'s replicas runs ``micro_seqs / dp_k`` of them)."""
        return self.strategy.mbs * self.strategy.dp

    def stage_ops(self, stage: int) -> list:
        """The chain as one replica of ``stage`` runs it: at its share of the micro-batch
        (:attr:`ops` but for per-stage widths of unequal ``dp``)."""
        d = self.strategy.width_of(stage)[1]
        local = self.micro_seqs // d
        if local == self.config.mbs:
            return self.ops
        return _local_chain(self.config, local)

    def route(self, src_stage: int, dst_stage: int, nbytes: float, seqs: int) -> dict:
        """The sends that carry one micro-batch's activation (or its gradient), ``nbytes``
        for ``seqs`` sequences, from the ranks of ``src_stage`` to those of ``dst_stage``:
        ``{(sender, receiver): bytes}``. Each
        receiving replica gets its sequences from the sending replicas that hold them, and
        each of its tensor-parallel ranks its ``1 / tp`` share, cut in ``lcm(tp_src,
        tp_dst)`` pieces spread over the senders' ranks (with equal widths: one send of
        ``1 / tp`` of the replica's activation from each rank to its counterpart, Megatron's
        scatter of the pipeline send).

        >>> from workbench.cluster import Cluster
        >>> p = parallelize("gpt:layers=2,hidden=64,heads=4,seq=16,vocab=100",
        ...                 Cluster.preset("8xA100-80g"),
        ...                 Strategy(pp=2, mbs=1, global_batch=6,
        ...                          stage_widths=((1, 1), (2, 3))))
        >>> sorted(p.route(0, 1, 10.0, 1).items())
        [((0, 1), 5.0), ((0, 2), 5.0), ((0, 3), 5.0), ((0, 4), 5.0), ((0, 5), 5.0), ((0, 6), 5.0)]
        >>> sorted(p.route(1, 0, 10.0, 1).items())[:2]
        [((1, 0), 5.0), ((2, 0), 5.0)]
        """
        s, M = self.strategy, self.micro_seqs
        (ta, da), (tb, db) = s.width_of(src_stage), s.width_of(dst_stage)
        L = math.lcm(ta, tb)
        out: dict = {}
        for ra in range(da):
            lo_a, hi_a = ra * M // da, (ra + 1) * M // da
            for rb in range(db):
                ov = min(hi_a, (rb + 1) * M // db) - max(lo_a, rb * M // db)
                if ov <= 0:
                    continue
                piece = nbytes * (ov / seqs) / L
                for x in range(L):
                    key = (self.rank(src_stage, ra, x % ta), self.rank(dst_stage, rb, x % tb))
                    out[key] = out.get(key, 0.0) + piece
        return out

    @cached_property
    def hosts(self) -> list:
        """Host of each rank (the cluster's devices in order)."""
        return [d.host for d in self.cluster.devices[:self.strategy.devices]]

    def device_name(self, rank: int) -> str:
        return self.cluster.devices[rank].name

    def to_plan(self):
        """The op-level :class:`~workbench.plan.Plan` of one micro-batch's training step
        (:func:`workbench.costs.llm_graph.training_graph`) on the first rank of each stage:
        forward and backward ops on their chunk's rank, each layer's update with its first op;
        ``info["strategy"]`` records the strategy (``info["describe"]`` its line), so the
        general judge, :func:`workbench.diff` and comparison tables can take it beside the
        plans of op-placing solvers.

        >>> from workbench.cluster import Cluster
        >>> p = parallelize("gpt:layers=2,hidden=64,heads=4,seq=16,vocab=100",
        ...                 Cluster.preset("8xA100-80g"), Strategy(pp=2, dp=2, global_batch=4))
        >>> plan = p.to_plan()
        >>> plan.method, plan.devices_used(), plan.info["strategy"]["pp"]
        ('megatron', ['gpu0', 'gpu2'], 2)
        """
        from ..costs.llm_graph import training_graph
        from ..plan import Plan

        graph = training_graph(self.config, gpu=self.gpu.name)
        where: dict = {}
        for c in range(self.n_chunks):
            dev = self.device_name(self.rank(c % self.strategy.pp))
            for o in self.chunk_ops(c):
                where[o.name] = where[f"{o.name}/bwd"] = dev
        for v in graph.ops:
            if v not in where:      # a layer's update: with the layer's first op
                layer = graph.op(v)["layer"]
                first = next(o.name for o in self.ops if o.layer == layer)
                where[v] = where[first]
        return Plan(graph, where, method="megatron", status="heuristic",
                    info={"strategy": self.strategy.to_dict(),
                          "describe": self.strategy.describe(), "cuts": list(self.cuts),
                          "model": self.config.spec})

    def summary(self) -> dict:
        """What the plan records of itself (model, cluster, strategy, chunks)."""
        return {"model": self.config.spec, "cluster": self.cluster.name, "gpu": self.gpu.name,
                **self.strategy.to_dict(), "n_micro": self.n_micro, "cuts": list(self.cuts)}


@lru_cache(maxsize=64)
def _local_chain(config: LLMConfig, mbs: int) -> list:
    """The chain of ``config`` at ``mbs`` sequences a micro-batch (kept: a search builds many
    plans of one model)."""
    return chain(replace(config, mbs=mbs))


@lru_cache(maxsize=256)
def _chain_sizes(config: LLMConfig) -> tuple[int, tuple]:
    """``(ops of the chain, chain position where each block starts)`` (searches build many
    plans of one model; blocks may differ in ops: an encoder-decoder's, a mixture of
    experts')."""
    ops = chain(config)
    starts: dict = {}
    for i, o in enumerate(ops):
        if 0 <= o.layer < config.blocks:
            starts.setdefault(o.layer, i)
    return len(ops), tuple(starts[k] for k in range(config.blocks))


def _balanced_cuts(config: LLMConfig, n_chunks: int, layers_per_stage) -> list:
    starts = _chain_sizes(config)[1]
    n = config.blocks
    if layers_per_stage is not None:
        layers_per_stage = _integers(layers_per_stage, "layers_per_stage")
    if layers_per_stage is None:
        if n < n_chunks:
            raise PlanError(f"{n} layers cannot fill {n_chunks} pipeline chunks")
        q, r = divmod(n, n_chunks)
        layers_per_stage = [q + (1 if c < r else 0) for c in range(n_chunks)]
    if len(layers_per_stage) != n_chunks or sum(layers_per_stage) != n or \
            min(layers_per_stage) < 0:
        raise PlanError(f"layers_per_stage {list(layers_per_stage)} must give {n_chunks} "
                        f"chunks adding up to {n} layers")
    cuts, done = [0], 0                                 # the embedding opens chunk 0
    for k in layers_per_stage[:-1]:
        done += k
        cuts.append(starts[done])
    return cuts


def _integers(values, what: str) -> list:
    """``values`` as a list of ints: whole numbers only (2.0 is 2; 2.5, True, 'a' refused)."""
    try:
        items = list(values)
    except TypeError:
        raise PlanError(f"{what} must be a list of integers, got {values!r}") from None
    out = []
    for v in items:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or \
                (isinstance(v, float) and not v.is_integer()):
            raise PlanError(f"{what} must be a list of integers, got {v!r} in {items!r}")
        out.append(int(v))
    return out


def check_inputs(config, cluster, strategy) -> LLMConfig:
    """The model (an :class:`~workbench.costs.llm.LLMConfig` or a ``gpt:``/``llama:`` name), a
    :class:`~workbench.cluster.Cluster` and a :class:`Strategy`, or a PlanError naming what
    was given instead (an op-level graph goes to :func:`workbench.solve`)."""
    from ..cluster import Cluster
    from ..graph import OpGraph

    if isinstance(config, str):
        config = parse_spec(config)
    if isinstance(config, OpGraph):
        raise PlanError(f"parallel strategies take an LLM (gpt:..., llama:... or an LLMConfig), "
                        f"not the op graph {config.name!r}; place an op graph with "
                        f"workbench.solve")
    if not isinstance(config, LLMConfig):
        raise PlanError(f"the model must be an LLMConfig or a gpt:.../llama:... name, got "
                        f"{type(config).__name__}")
    if not isinstance(cluster, Cluster):
        raise PlanError(f"the cluster must be a Cluster (e.g. Cluster.preset('8xA100-80g')), "
                        f"got {type(cluster).__name__}")
    if not isinstance(strategy, Strategy):
        raise PlanError(f"the strategy must be a Strategy(tp=..., pp=..., dp=...), got "
                        f"{type(strategy).__name__}")
    return config


def cuts_from_placement(config: LLMConfig, placement: dict) -> list:
    """Chunk starts from an op-level placement of
    :func:`workbench.costs.llm_graph.training_graph` (forward op name -> device, e.g.
    ``Plan.placement`` of the pipeline DP of Tarnawski et al.): each device's forward ops must
    be one contiguous run of the chain; the runs, in chain order, are the pipeline stages.

    >>> cfg = parse_spec("gpt:layers=2,hidden=64,heads=4,seq=16,vocab=100")
    >>> names = [o.name for o in chain(cfg)]
    >>> cuts_from_placement(cfg, {v: ("g1" if i < 10 else "g0") for i, v in enumerate(names)})
    [0, 10]
    >>> cuts_from_placement(cfg, {v: ("g1" if i % 2 else "g0") for i, v in enumerate(names)})
    Traceback (most recent call last):
    ...
    workbench.errors.PlanError: the forward ops on 'g0' are not one contiguous run of the chain (it comes back at op 'L0/qkv'): not a pipeline split
    """
    names = [o.name for o in chain(config)]
    missing = [v for v in names if v not in placement]
    if missing:
        raise PlanError(f"placement leaves chain op {missing[0]!r} unplaced")
    seq = [placement[v] for v in names]
    cuts = [0] + [i for i in range(1, len(seq)) if seq[i] != seq[i - 1]]
    seen: set = set()
    for c in cuts:
        if seq[c] in seen:
            raise PlanError(f"the forward ops on {seq[c]!r} are not one contiguous run of the "
                            f"chain (it comes back at op {names[c]!r}): not a pipeline split")
        seen.add(seq[c])
    return cuts


def _rank_count(s: Strategy) -> str:
    """How the strategy's GPU count is made, for messages."""
    if s.stage_widths:
        return " + ".join(f"{t} x {d}" for t, d in s.stage_widths) + " (tp x dp a stage)"
    return "tp x pp x dp"


def gpu_of(cluster, gpu) -> GPUSpec:
    """The GPU figures of ``gpu`` (a name of :data:`~workbench.costs.llm.GPUS` or a
    :class:`~workbench.costs.llm.GPUSpec`), else of the cluster's preset name."""
    if isinstance(gpu, GPUSpec):
        return gpu
    name = gpu or PRESET_GPUS.get(getattr(cluster, "name", ""))
    if name is None:
        raise PlanError(f"cluster {cluster.name!r} is no GPU preset; pass gpu= one of "
                        f"{', '.join(GPUS)}")
    if name not in GPUS:
        raise PlanError(f"unknown GPU {name!r}; known: {', '.join(GPUS)}")
    return GPUS[name]


def parallelize(config: LLMConfig | str, cluster, strategy: Strategy, *,
                layers_per_stage=None, cuts=None, gpu=None) -> TrainingPlan:
    """The :class:`TrainingPlan` of ``config`` on ``cluster`` under ``strategy``.

    Raises :class:`~workbench.errors.PlanError` when the strategy does not fit the model or
    the cluster (more ranks than devices, heads or vocabulary not divisible by ``tp``,
    micro-batches not dividing the global batch, interleaving without a multiple of ``pp``
    micro-batches, ...).
    """
    config = check_inputs(config, cluster, strategy)
    s = strategy
    mbs = s.mbs or config.mbs
    gbs = s.global_batch or mbs * s.dp
    s = replace(s, mbs=mbs, global_batch=gbs)
    config = replace(config, mbs=mbs)
    if s.devices > len(cluster.devices):
        raise PlanError(f"strategy needs {_rank_count(s)} = {s.devices} GPUs; cluster "
                        f"{cluster.name!r} has {len(cluster.devices)}")
    for k, (t, d) in enumerate(s.stage_widths or [(s.tp, s.dp)]):
        where = f" (stage {k})" if s.stage_widths else ""
        if config.heads % t or config.kv_heads % t and t % config.kv_heads:
            raise PlanError(f"tp={t}{where} does not divide the {config.heads} attention heads")
        if config.ffn % t or config.hidden % t:
            raise PlanError(f"tp={t}{where} does not divide hidden={config.hidden} / "
                            f"ffn={config.ffn}")
        if s.sp and config.seq % t:
            raise PlanError(f"sequence parallelism: tp={t}{where} does not divide "
                            f"seq={config.seq}")
        if (mbs * s.dp) % d:
            raise PlanError(f"stage {k}'s dp={d} does not divide the micro-batch of mbs x "
                            f"dp = {mbs} x {s.dp} = {mbs * s.dp} sequences (the widest "
                            f"stage's replicas run mbs each; every stage shares the same "
                            f"micro-batches out over its replicas)")
    if s.ep > 1 and not config.experts:
        raise PlanError(f"ep={s.ep} needs a model with experts (moe:...); {config.spec} has "
                        f"none")
    if s.ep > 1 and config.experts % s.ep:
        raise PlanError(f"ep={s.ep} does not divide the model's {config.experts} experts "
                        f"(each expert-parallel rank holds experts / ep of them)")
    if gbs % (mbs * s.dp):
        raise PlanError(f"global batch {gbs} is not a multiple of mbs x dp = {mbs * s.dp}")
    n_micro = gbs // (mbs * s.dp)
    if n_micro > MAX_MICRO:
        raise PlanError(f"global batch {gbs} makes {n_micro} micro-batches of {mbs} per replica; "
                        f"at most {MAX_MICRO} are judged (raise mbs or dp)")
    cpu = next((d for d in cluster.devices[:s.devices] if d.kind == "cpu"), None)
    if cpu is not None:
        raise PlanError(f"rank {cluster.devices.index(cpu)} would run on {cpu.name!r}, a CPU; "
                        f"the training judge runs GPUs (tp x pp x dp = {s.devices} ranks on "
                        f"the first devices of cluster {cluster.name!r})")
    if s.schedule == "interleaved" and n_micro % s.pp:
        raise PlanError(f"interleaved 1F1B needs micro-batches ({n_micro}) to be a multiple "
                        f"of pp={s.pp} (as Megatron-LM requires)")
    n_chunks = s.pp * s.virtual
    if cuts is None:
        cuts = _balanced_cuts(config, n_chunks, layers_per_stage)
    cuts = _integers(cuts, "cuts")
    n_ops = _chain_sizes(config)[0]
    if len(cuts) != n_chunks or cuts[0] != 0 or any(b <= a for a, b in zip(cuts, cuts[1:])) \
            or cuts[-1] >= n_ops:
        raise PlanError(f"cuts {cuts} must be {n_chunks} increasing chain positions from 0 "
                        f"(below {n_ops})")
    orders = list(_orders(s.schedule, s.pp, n_micro, s.virtual))
    return TrainingPlan(config, cluster, s, cuts, orders, gpu_of(cluster, gpu))
