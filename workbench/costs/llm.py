"""Transformer language models as chains of costed ops: GPT (Megatron style) and Llama.

The formula room of the LLM workloads (issue 43). A model is an :class:`LLMConfig`; its
forward pass is a **chain** of :class:`ChainOp` (embedding, ``layers`` x the ops of a block,
final norm, LM head and loss), each op carrying, for one micro-batch of ``mbs`` sequences of
``seq`` tokens, its forward and backward FLOPs and bytes moved, its parameters, the activation
bytes it saves for the backward pass and the tensor-parallel collectives that follow it. The
graph builder (:mod:`workbench.costs.llm_graph`), the parallel strategies
(:mod:`workbench.transforms.parallel`) and the training judge (:mod:`workbench.judge.training`)
all read this chain, so every view of a model counts the same work.

Formulas (``b`` micro-batch, ``s`` sequence, ``h`` hidden, ``a`` heads, ``f`` MLP width,
``V`` vocabulary, ``T = b s`` tokens, ``t`` tensor-parallel degree):

* matmuls ``2 m n k`` forward and twice that backward (Narayanan et al. 2021, section 5.1:
  ``96 B s l h^2 (1 + s/6h + V/16lh)`` FLOPs a step with full recomputation, i.e.
  ``72 B s l h^2 (1 + s/6h + V/12lh)`` without it); attention scores and the attention-weighted values ``2 b s^2 h`` each;
  softmax ``5`` and norms ``8`` (backward ``10``) FLOPs per element, element-wise ops one per
  element per input beyond the first -- the families of :mod:`workbench.costs.roofline`, which
  is how :func:`workbench.io.torch.from_torch` counts the same model captured from PyTorch;
* saved activations per GPT layer ``s b h (34 + 5 a s / h)`` bytes at 2-byte precision with
  dropout (Korthikanti et al. 2022, eq. (1)): with tensor parallelism ``s b h (10 + 24/t +
  5 a s / (h t))``, with sequence parallelism everything ``/t`` (their Table 2); each op
  below carries its own term, flagged as split by ``t`` or replicated;
* parameters ``12 h^2 + 13 h`` per GPT layer (Narayanan et al. 2021, section 5.1) plus the
  embeddings ``(V + s) h``, the LM head tied to the word embedding (Megatron-LM); Llama: ``4
  h^2`` less the shared key/value heads (grouped-query attention), ``3 h f`` SwiGLU, two
  RMSNorms, an untied head;
* mixed precision (ZeRO, Rajbhandari et al. 2020, section 3.1): 2-byte parameters and
  gradients, fp32 master weights, Adam momentum and variance: ``2 + 2 + 12`` bytes per
  parameter (``fp32``: ``4 + 4 + 8``); Adam costs 12 FLOPs per parameter.

Tensor-parallel collectives (Shoeybi et al. 2019, Fig. 3: the ``f``/``g`` operators): an
all-reduce of the block output after the attention output projection and after the second MLP
matmul in the forward pass, and of the block input's gradient after the QKV and first MLP
matmuls in the backward pass; with sequence parallelism (Korthikanti et al. 2022, section
4.2.2) each becomes an all-gather before the column-parallel matmul and a reduce-scatter after
the row-parallel one (same bytes). The vocabulary-parallel embedding all-reduces its output.

Examples
--------
>>> cfg = parse_spec("gpt:layers=2,hidden=128,heads=4,seq=64,mbs=2,vocab=1000")
>>> cfg.params()
532992
>>> ops = chain(cfg)
>>> [o.name for o in ops[1:14]]   # the ops of the first block
['L0/ln1', 'L0/qkv', 'L0/score', 'L0/softmax', 'L0/attn_dropout', 'L0/attn_v', 'L0/proj', 'L0/dropout1', 'L0/ln2', 'L0/fc1', 'L0/gelu', 'L0/fc2', 'L0/dropout2']
>>> s, b, h, a = 64, 2, 128, 4
>>> sum(o.saved for o in ops if o.layer == 0) == s * b * h * (34 + 5 * a * s / h)
True
>>> PRESETS["gpt:175b"].params() / 1e9
174.6...
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

from ..cluster import Link
from ..errors import GraphError

__all__ = ["ARCHS", "ChainOp", "GPUSpec", "GPUS", "LLMConfig", "PRESETS", "Comm", "chain",
           "parse_spec", "state_bytes_per_param", "ADAM_FLOPS", "MAX_DIM", "MAX_LAYERS",
           "fused_softmax_available", "unfused_softmax_ms", "NCCL_A100_NODE",
           "megatron_cross_entropy_ms"]

MAX_LAYERS = 1024
"""Most transformer blocks a model may have (the largest published models have about 128; a
chain of 10**8 layers took minutes to build before it was refused, issue 41)."""
MAX_DIM = 2**31 - 1
"""Largest hidden size, heads, sequence, micro-batch, vocabulary or MLP width (the limit of
one tensor dimension, as for the example inputs of model files)."""

ADAM_FLOPS = 12
"""FLOPs per parameter of an Adam step (as :data:`workbench.io.torch.OPTIMIZERS` counts it)."""

_GBps = 1e6    # bytes per ms
_TF = 1e9      # FLOP per ms


@dataclass(frozen=True)
class GPUSpec:
    """Datasheet figures of one GPU and its node (dense, SXM boards).

    ``half_flops`` is the bf16/fp16 tensor-core peak (FLOP/ms), ``fp32_flops`` the fp32 one
    used for ``fp32`` training (TF32 tensor cores), ``mem_bw`` HBM bandwidth (bytes/ms),
    ``nvlink`` NVLink/NVSwitch bandwidth per GPU and direction, ``nic`` the InfiniBand
    bandwidth per GPU and direction (bytes/ms), ``launch_ms`` the cost of a kernel launch.

    Four achieved figures make a datasheet GPU a calibrated one (all ``1.0`` / ``0.0`` on
    the datasheet presets; :mod:`workbench.fidelity.public` fits them to measured iterations):
    ``compute_efficiency`` (of the tensor-core peak), ``memory_efficiency`` (of the HBM
    bandwidth), ``op_floor_ms``, the least GPU time an op of the chain takes however small it
    is (an op is several kernels, each with a fixed cost on the GPU), and ``host_op_ms``, the
    host's time to issue one op (Python, the framework's dispatcher, the launches of its
    kernels). The host runs ahead of the GPU, as a CUDA stream runs asynchronously from the
    CPU that fills it: the training judge (:mod:`workbench.judge.training`) then runs the host
    as a lane of its own, and an op starts on the GPU once issued and once the previous op is
    done; ``host_op_ms = 0`` (the presets) is a host that is never the bottleneck.

    ``nccl_intra``, where set, is what NCCL measurably achieves between the GPUs of one node, as
    a :class:`~workbench.cluster.Link`: ``call`` ms a collective call, ``latency`` ms a ring
    step, ``bandwidth`` the bus bandwidth (bytes/ms). A node built for a measured comparison
    (:mod:`workbench.fidelity.public`) times its intra-node collectives and sends with it
    instead of a fraction of the ``nvlink`` datasheet figure; ``None`` (no measurement) keeps
    the datasheet link.
    """

    name: str
    half_flops: float
    fp32_flops: float
    mem_bw: float
    memory: float
    nvlink: float
    nic: float
    launch_ms: float = 0.005
    source: str = ""
    compute_efficiency: float = 1.0
    memory_efficiency: float = 1.0
    op_floor_ms: float = 0.0
    host_op_ms: float = 0.0
    nccl_intra: Link | None = None

    def op_ms(self, flops: float, nbytes: float, *, half: bool = True) -> float:
        """Roofline time of one op (ms): ``max(flops / (peak e_c), bytes / (bw e_m)) +
        launch``, and at least ``op_floor_ms``.

        >>> round(GPUS["A100-80G"].op_ms(312e9, 0.0), 3)     # 312 GFLOP at 312 TFLOP/s
        1.005
        >>> from dataclasses import replace
        >>> slow = replace(GPUS["A100-80G"], compute_efficiency=0.5, op_floor_ms=0.08)
        >>> round(slow.op_ms(312e9, 0.0), 3), slow.op_ms(1.0, 0.0)
        (2.005, 0.08)
        """
        peak = (self.half_flops if half else self.fp32_flops) * self.compute_efficiency
        return max(max(flops / peak, nbytes / (self.mem_bw * self.memory_efficiency))
                   + self.launch_ms, self.op_floor_ms)


_GIB = float(2**30)
_NCCL_A100_MIB = (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96,
                  112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 896, 1024)
_NCCL_A100_US = {  # GPUs: all-reduce time (us) at each size of _NCCL_A100_MIB (MiB)
    2: (44.7, 52.3, 55.2, 60.7, 69.5, 71.5, 83.2, 87.1, 96.6, 107.3, 122.2, 130.7, 158.5, 175.4,
         201.3, 229.5, 271.6, 313.4, 365.2, 404.4, 496.3, 572.8, 674.8, 764.6, 934.4, 1104, 1294.3,
         1455.1, 1810.3, 2141.5, 2483.2, 2835.9, 3490.5, 4148.8, 4822.9, 5448.1),
    3: (63.7, 70.7, 76.9, 78.7, 82.5, 88.5, 93.5, 103, 119, 132.7, 142.2, 153.1, 189.6, 208.8,
         246.1, 265.2, 326.9, 386.4, 443.2, 499.6, 607.3, 708.8, 819.7, 929, 1150, 1366.8, 1573,
         1786.2, 2218.3, 2629.9, 3068.7, 3466.5, 4300.8, 5124.5, 5933.5, 6759.2),
    4: (52.1, 55.8, 64.3, 76.6, 83.7, 102.4, 108.7, 115.2, 130.1, 138.4, 166.3, 178.7, 198.5, 219,
         266.6, 282.9, 354.1, 395.6, 464.8, 542.2, 650.5, 761.8, 900.9, 999.6, 1250.1, 1443.5,
         1689, 1928.3, 2370.1, 2821.1, 3287.2, 3720.2, 4623.1, 5492.9, 6374.9, 7267.4),
    5: (62.5, 62.1, 67.6, 77.9, 88.7, 101.3, 108.8, 122, 148.3, 153.2, 164.2, 197.5, 226.3, 243.8,
         259.5, 322.6, 356.4, 441.3, 476.7, 567.3, 697, 826.8, 953.4, 1065.2, 1297.5, 1527.3,
         1760.2, 2036.5, 2496.6, 2953, 3424.8, 3934.1, 4830, 5796.7, 6693.2, 7650.1),
    6: (73.3, 74.3, 74.5, 81.3, 92.2, 104.2, 116.9, 125.2, 147.1, 175.7, 196.8, 201.1, 237.8,
         269.9, 289.4, 303.6, 393.8, 431.8, 523.3, 563, 703.7, 851.4, 989.8, 1120.8, 1368.4,
         1587.7, 1862.5, 2116.3, 2567.6, 3059.7, 3540.4, 4020.3, 5005.1, 5948.1, 6959.6, 7885.4),
    7: (77.8, 78.4, 79.1, 83.7, 93.4, 104.8, 118.2, 132.1, 148.3, 171.1, 203.2, 227.8, 246.7,
         285.9, 313.2, 333.2, 402.1, 468.1, 503.2, 598.7, 690.6, 836.5, 1002.6, 1146.3, 1382,
         1680.5, 1872.5, 2190.3, 2685.7, 3129.2, 3622.8, 4109.9, 5092.1, 6102.4, 7065.4, 8116.6),
    8: (92.5, 93.1, 92.9, 94.9, 96.3, 107.7, 118.2, 132.1, 156, 174.2, 196.8, 231.7, 266.8, 263.9,
         328.4, 356.9, 387.5, 438.6, 546.9, 579.8, 741.9, 827.1, 972.8, 1164, 1390, 1609.3, 1975.5,
         2160.2, 2734.6, 3147.2, 3673.4, 4189.6, 5172.4, 6184.7, 7224.4, 8194.7),
}
NCCL_A100_NODE = Link(latency=1.30e-3, bandwidth=201 * _GBps, call=41.1e-3, allreduce=tuple(
    (n, tuple(m * 2**20 for m in _NCCL_A100_MIB), tuple(t / 1e3 for t in us))
    for n, us in _NCCL_A100_US.items()))
"""NCCL on an 8-GPU A100 NVSwitch node as measured (not fitted to any training row). An
all-reduce over 2-8 of its GPUs costs what nccl-tests' ``all_reduce_perf`` measured for that
number of GPUs (``Link.allreduce``: the mean of its out-of-place and in-place times at 1-8 MiB
every MiB, then about four sizes an octave up to 1 GiB, interpolated between; vTrain's tables
for its A100 node, VIA-Research/vTrain ``trace/a100/AR_GPU{2..8}_1M_1024M_LUT``, MIT licence).
Other collectives, sends and counts take the curve 41.1 us a call + 1.30 us a ring step + bytes
at 201 GB/s of bus bandwidth, the least-squares fit (relative error, mean 5.5 %) of
``call + 2 (n-1) step + 2 (n-1)/n S / B`` to the same tables at 1-64 MiB on 2, 4 and 8 GPUs
(one curve for every count: 17 % low for 8 GPUs at 2 MiB, 16 % high for 4, which the table
corrects). The same NVSwitch fabric joins the GPUs of a DGX A100 40 GB and 80 GB."""

GPUS: dict[str, GPUSpec] = {
    # NVIDIA A100 Tensor Core GPU datasheet (2020/2021): 312 TFLOP/s BF16/FP16 dense, 156 TF32,
    # 1,555 GB/s (40 GB) / 2,039 GB/s (80 GB) HBM2(e), NVLink 600 GB/s (both directions); DGX
    # A100: 8 x 200 Gb/s HDR InfiniBand, one per GPU (25 GB/s per direction)
    "A100-40G": GPUSpec("A100-40G", 312 * _TF, 156 * _TF, 1555 * _GBps, 40 * _GIB,
                        300 * _GBps, 25 * _GBps, source="NVIDIA A100 datasheet; DGX A100",
                        nccl_intra=NCCL_A100_NODE),
    "A100-80G": GPUSpec("A100-80G", 312 * _TF, 156 * _TF, 2039 * _GBps, 80 * _GIB,
                        300 * _GBps, 25 * _GBps, source="NVIDIA A100 80GB datasheet; DGX A100",
                        nccl_intra=NCCL_A100_NODE),
    # NVIDIA H100 Tensor Core GPU datasheet (SXM5): 989 TFLOP/s BF16 dense, 495 TF32,
    # 3.35 TB/s HBM3, NVLink 900 GB/s; DGX H100: 8 x 400 Gb/s NDR (50 GB/s per direction)
    "H100-80G": GPUSpec("H100-80G", 989 * _TF, 495 * _TF, 3350 * _GBps, 80 * _GIB,
                        450 * _GBps, 50 * _GBps, source="NVIDIA H100 SXM5 datasheet; DGX H100"),
}


def fused_softmax_available(config, tp: int = 1) -> bool:
    """Whether Megatron's fused scale-mask-softmax kernel runs for ``config`` at tensor-parallel
    degree ``tp``: its warp-per-row kernel needs the key length in ``(16, 4096]`` and a
    multiple of 4, and the attention batches of a rank (``mbs x heads / tp``) a multiple of 4
    and of the rows a block of 128 threads takes (4 above 128 keys, 8 up to 128) (Megatron-LM
    ``fused_softmax.FusedScaleMaskSoftmax.is_kernel_available`` and ``get_batch_per_block``;
    the same test, up to 2,048 keys, in vTrain's copy of Megatron-DeepSpeed's module,
    ``src/model/fused_softmax.py``). Otherwise PyTorch runs it op by op (below).

    >>> cfg = parse_spec("gpt:layers=2,hidden=1024,heads=16,seq=1024,mbs=1")
    >>> fused_softmax_available(cfg, 4), fused_softmax_available(cfg, 8)
    (True, False)
    """
    batches, rest = divmod(config.mbs * config.heads, max(1, tp))
    if rest or not (16 < config.seq <= 4096 and config.seq % 4 == 0):
        return False
    pow2 = 1 << math.ceil(math.log2(config.seq))
    per_block = 128 // min(pow2, 32) * (2 if pow2 <= 128 else 1)
    return batches % 4 == 0 and batches % per_block == 0


UNFUSED_SOFTMAX_BYTES = {False: (6, 8, 8, 8, 6), True: (6, 12, 8, 8, 6)}
"""Bytes an attention-matrix element moves in each kernel of the unfused softmax (16-bit
activations, softmax in fp32): forward ``x.float()``, ``* scale``, ``masked_fill_``,
``softmax``, back to 16 bits; backward the five gradients in reverse (the softmax's reads the
output and its gradient)."""


MEGATRON_CROSS_ENTROPY_BYTES = {False: (6, 4, 8, 8, 4, 8), True: (8, 6)}
"""Bytes a logit moves in each large kernel of Megatron's vocabulary-parallel cross-entropy
on 16-bit logits (``cross_entropy(output.float(), labels)``, ``fp16_lm_cross_entropy`` off;
Megatron-DeepSpeed ``megatron/model/gpt_model.py`` and
``megatron/core/tensor_parallel/cross_entropy.py``, the same in Megatron-LM): forward the cast
to fp32, the max over the vocabulary, the subtraction of the max, ``exp``, the sum, the
division (the softmax kept for the backward); backward the multiplication by the loss's
gradient (in place) and the cast back to 16 bits. Its per-token bookkeeping (target masks,
the gather of the target logit) moves a few bytes a token and is left out."""


def megatron_cross_entropy_ms(gpu: GPUSpec, elements: float, backward: bool,
                              half: bool = True):
    """GPU ms of each large kernel of Megatron's cross-entropy over ``elements`` logits of a
    rank (tokens x vocabulary / tp), forward or backward (one FLOP an element each); with
    fp32 logits there is no cast, so its kernels are left out.

    >>> [round(ms, 3) for ms in megatron_cross_entropy_ms(GPUS["A100-80G"], 2**20 * 50, False)]
    [0.159, 0.108, 0.211, 0.211, 0.108, 0.211]
    """
    sizes = MEGATRON_CROSS_ENTROPY_BYTES[bool(backward)]
    if not half:           # fp32 logits: ``.float()`` returns them as they are
        sizes = sizes[:-1] if backward else sizes[1:]
    return tuple(gpu.op_ms(elements, b * elements, half=False) for b in sizes)


def unfused_softmax_ms(gpu: GPUSpec, elements: float, backward: bool, half: bool = True):
    """GPU ms of each of the five kernels of the unfused softmax over ``elements`` attention
    scores (forward or backward, 5 FLOPs an element in all).

    >>> [round(ms, 4) for ms in unfused_softmax_ms(GPUS["A100-80G"], 2**21, False)][:2]
    [0.0112, 0.0132]
    """
    return tuple(gpu.op_ms(elements, b * elements, half=half)
                 for b in UNFUSED_SOFTMAX_BYTES[bool(backward)])
"""GPU name -> :class:`GPUSpec`."""


ARCHS = ("gpt", "llama", "t5", "moe")
"""Model architectures :func:`parse_spec` reads (``gpt:...``, ``llama:...``, ``t5:...``,
``moe:...``)."""


@dataclass(frozen=True)
class LLMConfig:
    """A transformer and its micro-batch.

    ``arch`` is ``"gpt"`` (LayerNorm, GeLU MLP of ``ffn = 4 hidden``, learned positions,
    dropout, LM head tied to the embedding), ``"llama"`` (RMSNorm, SwiGLU, rotary
    positions, grouped-query attention with ``kv_heads``, no dropout, untied head), ``"t5"``
    (an encoder-decoder, Raffel et al. 2020: ``layers`` encoder blocks over ``seq`` tokens and
    ``dec_layers`` decoder blocks over ``dec_seq`` tokens, each decoder block with
    cross-attention over the encoder's output; RMS norms, ReLU MLP of ``ffn = 4 hidden``,
    relative position biases, dropout, LM head tied to the shared embedding) or ``"moe"`` (a
    Llama whose MLP is, every ``moe_every`` blocks, a mixture of ``experts`` SwiGLU experts
    with top-``topk`` routing: Mixtral, Jiang et al. 2024; Switch-style alternation with
    ``moe_every=2``). ``precision`` is ``bf16``/``fp16`` (2-byte activations, fp32 master
    weights) or ``fp32``.
    """

    arch: str = "gpt"
    layers: int = 24
    hidden: int = 2048
    heads: int = 16
    seq: int = 1024
    mbs: int = 1
    vocab: int = 50257
    ffn: int = 0
    kv_heads: int = 0
    precision: str = "bf16"
    dropout: bool = True
    dec_layers: int = 0
    dec_seq: int = 0
    experts: int = 0
    topk: int = 0
    moe_every: int = 0

    def __post_init__(self):
        if self.arch not in ARCHS:
            raise GraphError(f"unknown model architecture {self.arch!r}; use "
                             f"{', '.join(ARCHS)}")
        for f in ("layers", "hidden", "heads", "seq", "mbs", "vocab", "ffn", "kv_heads"):
            v = getattr(self, f)
            low = 0 if f in ("ffn", "kv_heads") else 1      # 0: derived from the others
            if not (isinstance(v, int) and not isinstance(v, bool) and v >= low):
                raise GraphError(f"{self.arch}: {f} must be "
                                 f"{'a positive' if low else 'a non-negative'} integer, got {v!r}")
            top = MAX_LAYERS if f == "layers" else MAX_DIM
            if v > top:
                raise GraphError(f"{self.arch}: {f}={v} is beyond the largest allowed, {top}")
        if not isinstance(self.dropout, bool):
            raise GraphError(f"{self.arch}: dropout must be True or False, got {self.dropout!r}")
        if self.hidden % self.heads:
            raise GraphError(f"{self.arch}: hidden={self.hidden} is not a multiple of "
                             f"heads={self.heads}")
        if self.precision not in ("bf16", "fp16", "fp32"):
            raise GraphError(f"{self.arch}: precision must be bf16, fp16 or fp32, got "
                             f"{self.precision!r}")
        if not self.ffn:
            ffn = 4 * self.hidden if self.arch in ("gpt", "t5") else \
                256 * math.ceil(int(8 * self.hidden / 3) / 256)
            object.__setattr__(self, "ffn", ffn)
        self._derive_kinds()
        if not self.kv_heads:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.heads % self.kv_heads:
            raise GraphError(f"{self.arch}: heads={self.heads} is not a multiple of "
                             f"kv_heads={self.kv_heads}")
        if self.arch in ("llama", "moe"):
            object.__setattr__(self, "dropout", False)

    def _derive_kinds(self) -> None:
        """The encoder-decoder's and the mixture of experts' own fields (0: their default;
        left 0 by the other architectures)."""
        own = {"t5": {"dec_layers": self.layers, "dec_seq": self.seq},
               "moe": {"experts": 8, "topk": 2, "moe_every": 1}}.get(self.arch, {})
        for f in ("dec_layers", "dec_seq", "experts", "topk", "moe_every"):
            v = getattr(self, f)
            if not (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
                raise GraphError(f"{self.arch}: {f} must be a non-negative integer, got {v!r}")
            top = MAX_LAYERS if f == "dec_layers" else MAX_DIM
            if v > top:
                raise GraphError(f"{self.arch}: {f}={v} is beyond the largest allowed, {top}")
            if v and f not in own:
                raise GraphError(f"{self.arch}: {f} is a field of "
                                 f"{'t5' if f.startswith('dec') else 'moe'} models only")
            if f in own and not v:
                object.__setattr__(self, f, own[f])
        if self.topk > self.experts:
            raise GraphError(f"moe: topk={self.topk} exceeds experts={self.experts}")

    @property
    def blocks(self) -> int:
        """Transformer blocks of the chain (an encoder-decoder's encoder and decoder blocks;
        chain layers ``0 .. blocks - 1``)."""
        return self.layers + self.dec_layers

    def is_moe(self, layer: int) -> bool:
        """Whether block ``layer`` has the mixture-of-experts MLP."""
        return self.arch == "moe" and layer % self.moe_every == self.moe_every - 1

    @property
    def act_bytes(self) -> int:
        """Bytes of one activation element (2 in mixed precision, 4 in fp32)."""
        return 4 if self.precision == "fp32" else 2

    @property
    def spec(self) -> str:
        """The name that :func:`parse_spec` reads back into this configuration."""
        base = LLMConfig(self.arch)
        derived = LLMConfig(self.arch, layers=self.layers, hidden=self.hidden, heads=self.heads,
                            seq=self.seq)
        keys = [f for f in _INT_KEYS + ("precision",) if getattr(self, f) != getattr(base, f)
                and not (f in ("ffn", "kv_heads", "dec_layers", "dec_seq") and
                         getattr(self, f) == getattr(derived, f))]
        return f"{self.arch}:" + ",".join(f"{k}={getattr(self, k)}" for k in keys)

    def params(self) -> int:
        """Parameter count (tied GPT and T5 heads counted once).

        >>> PRESETS["llama:7b"].params()
        6738415616
        """
        return sum(o.params for o in chain(self))


PRESETS: dict[str, LLMConfig] = {
    # Narayanan et al. 2021, Table 1 (GPT-3 shapes, sequence 2,048)
    "gpt:1.3b": LLMConfig("gpt", 24, 2048, 32, 2048),
    "gpt:13b": LLMConfig("gpt", 40, 5120, 40, 2048),
    "gpt:175b": LLMConfig("gpt", 96, 12288, 96, 2048),
    # Touvron et al. 2023 (Llama 2), Table 1 and the released configurations
    "llama:7b": LLMConfig("llama", 32, 4096, 32, 4096, vocab=32000, ffn=11008),
    "llama:13b": LLMConfig("llama", 40, 5120, 40, 4096, vocab=32000, ffn=13824),
    "llama:70b": LLMConfig("llama", 80, 8192, 64, 4096, vocab=32000, ffn=28672, kv_heads=8),
    # Raffel et al. 2020, section 3.7 (T5 base / large, sequence 512; vocabulary 32,128 as
    # released)
    "t5:base": LLMConfig("t5", 12, 768, 12, 512, vocab=32128, ffn=3072),
    "t5:large": LLMConfig("t5", 24, 1024, 16, 512, vocab=32128, ffn=4096),
    # Jiang et al. 2024 (Mixtral 8x7B: 32 blocks, hidden 4,096, 8 experts of width 14,336,
    # top-2, 8 key/value heads, vocabulary 32,000; sequence 4,096 here)
    "moe:8x7b": LLMConfig("moe", 32, 4096, 32, 4096, vocab=32000, ffn=14336, kv_heads=8,
                          experts=8, topk=2, moe_every=1),
}
"""Named sizes: ``gpt:1.3b``, ``gpt:13b``, ``gpt:175b``, ``llama:7b``, ``llama:13b``,
``llama:70b``, ``t5:base``, ``t5:large``, ``moe:8x7b``."""

_INT_KEYS = ("layers", "hidden", "heads", "seq", "mbs", "vocab", "ffn", "kv_heads",
             "dec_layers", "dec_seq", "experts", "topk", "moe_every")


def parse_spec(spec: str) -> LLMConfig:
    """The configuration a name describes: ``gpt:layers=24,hidden=2048,heads=16,seq=1024,mbs=4``,
    ``llama:7b`` or a named size with overrides (``gpt:175b,mbs=1``).

    >>> parse_spec("gpt:175b,mbs=2").mbs
    2
    >>> parse_spec("llama:hidden=256,heads=8,kv_heads=2,layers=2").ffn
    768
    >>> parse_spec("gpt:layers=two")
    Traceback (most recent call last):
    ...
    workbench.errors.GraphError: gpt:layers=two: layers must be an integer, got 'two'
    """
    if not isinstance(spec, str) or ":" not in spec:
        raise GraphError(f"expected gpt:..., llama:..., t5:... or moe:..., got {spec!r}")
    arch, _, rest = spec.partition(":")
    if arch not in ARCHS:
        raise GraphError(f"{spec}: unknown model {arch!r}; use gpt:..., llama:..., t5:... "
                         f"or moe:...")
    parts = [p.strip() for p in rest.split(",") if p.strip()]
    if not parts:
        raise GraphError(f"{spec}: names no size (e.g. {arch}:{'1.3b' if arch == 'gpt' else '7b'}) "
                         f"and no KEY=VALUE")
    base = LLMConfig(arch)
    if parts and "=" not in parts[0]:
        name = f"{arch}:{parts.pop(0).lower()}"
        if name not in PRESETS:
            known = ", ".join(k for k in PRESETS if k.startswith(arch))
            raise GraphError(f"{spec}: unknown size {name!r}; known: {known}")
        base = PRESETS[name]
    kw: dict = {}
    for p in parts:
        key, eq, val = p.partition("=")
        key = key.strip()
        if not eq or key not in _INT_KEYS + ("precision",):
            raise GraphError(f"{spec}: bad part {p!r}; expected KEY=VALUE with KEY one of "
                             f"{', '.join(_INT_KEYS)}, precision")
        if key in kw:
            raise GraphError(f"{spec}: {key} is given twice")
        if key == "precision":
            kw[key] = val.strip()
            continue
        if not re.fullmatch(r"\s*[+-]?[0-9]{1,30}\s*", val):  # ASCII digits, as written
            raise GraphError(f"{spec[:80]}: {key} must be an integer, got {val[:40]!r}")
        kw[key] = int(val)
    if ("hidden" in kw or "heads" in kw) and "ffn" not in kw:
        kw["ffn"] = 0
    if "heads" in kw and "kv_heads" not in kw and base.kv_heads == base.heads:
        kw["kv_heads"] = 0
    for key, dep in (("dec_layers", "layers"), ("dec_seq", "seq")):
        if dep in kw and key not in kw and getattr(base, key) == getattr(base, dep):
            kw[key] = 0
    try:
        return replace(base, **kw)
    except GraphError as e:
        raise GraphError(f"{spec}: {e}") from None


def state_bytes_per_param(precision: str) -> tuple[int, int, int]:
    """``(parameter, gradient, optimizer state)`` bytes per parameter (ZeRO's ``2 + 2 + 12``).

    >>> state_bytes_per_param("bf16"), state_bytes_per_param("fp32")
    ((2, 2, 12), (4, 4, 8))
    """
    return (4, 4, 8) if precision == "fp32" else (2, 2, 12)


@dataclass(frozen=True)
class Comm:
    """A tensor-parallel collective after an op: ``kind`` (``allreduce``, ``allgather``,
    ``reducescatter``) of a tensor of ``nbytes`` (the whole tensor, before any split)."""

    kind: str
    nbytes: float


@dataclass(frozen=True)
class ChainOp:
    """One forward op of the chain and what its backward costs (one micro-batch, ``t = 1``).

    ``split``: FLOPs, bytes and saved activations divide by the tensor-parallel degree
    (Megatron's column/row-parallel matmuls, attention heads, the vocabulary-parallel head);
    otherwise the op is replicated across tensor-parallel ranks and divides only under
    sequence parallelism (norms, dropout, residual adds). ``core``: part of the attention core
    that selective recomputation recomputes; ``core_saved`` the part of ``saved`` it then does
    not keep (the attention matrices; the queries, keys and values stay). ``comm_fwd``/``comm_bwd``: the collectives after
    the op's forward/backward, without (``tp``) and with (``sp``) sequence parallelism.
    ``out``: bytes of the op's output (what a pipeline stage cut after it sends), ``carry``
    included; ``resid``: bytes of the residual stream of the op's stack (``[b, s, h]``: what
    full recomputation keeps of a block, and the most a cut may send besides ``carry``);
    ``carry``: what a cut after the op must also pass on (an encoder-decoder's encoder
    output, which every decoder layer's cross-attention reads).
    ``expert``: the op is one of a mixture of experts' expert ops (its parameters split over
    the expert-parallel ranks, ``Strategy.ep``); ``ep_fwd``/``ep_bwd``: under expert
    parallelism (``ep > 1``; None: ``comm_fwd``/``comm_bwd`` as without it), the collectives
    after the op's forward/backward in their order -- ``alltoall`` the expert-parallel
    all-to-all of the replica's token copies (each tensor-parallel rank sending its ``1 / tp``),
    the others tensor-parallel (sequence-parallel) ones.
    """

    name: str
    op_type: str
    layer: int
    flops: float
    bytes: float
    bwd_flops: float
    bwd_bytes: float
    params: int = 0
    saved: float = 0.0
    out: float = 0.0
    split: bool = False
    core: bool = False
    core_saved: float = 0.0
    comm_fwd: dict = field(default_factory=dict)
    comm_bwd: dict = field(default_factory=dict)
    resid: float = 0.0
    carry: float = 0.0
    expert: bool = False
    ep_fwd: tuple | None = None
    ep_bwd: tuple | None = None


def _op(name, op_type, layer, flops, nbytes, *, bwd=2.0, bwd_bytes=None, **kw) -> ChainOp:
    """A chain op whose backward costs ``bwd`` x its forward FLOPs (bytes ``bwd_bytes``)."""
    return ChainOp(name, op_type, layer, float(flops), float(nbytes), float(bwd * flops),
                   float(2 * nbytes if bwd_bytes is None else bwd_bytes), **kw)


def _ar(nbytes: float, sp_kind: str) -> dict:
    """A Megatron ``f``/``g`` collective: all-reduce, or its sequence-parallel half."""
    return {"tp": Comm("allreduce", nbytes), "sp": Comm(sp_kind, nbytes)}


def _mm(name, layer, m, k, n, e, *, params, split=True, saved=None, **kw) -> ChainOp:
    """A matmul ``[m, k] x [k, n]`` of elements of ``e`` bytes, saving its input."""
    return _op(name, "MatMul", layer, 2 * m * k * n, e * (m * k + k * n + m * n),
               params=params, split=split, saved=e * m * k if saved is None else saved,
               out=e * m * n, **kw)


def _gpt_block(c: LLMConfig, i: int) -> list[ChainOp]:
    b, s, h, a, f, e = c.mbs, c.seq, c.hidden, c.heads, c.ffn, c.act_bytes
    T, x = b * s, b * s * h * e               # tokens, bytes of one [b, s, h] activation
    att = b * a * s * s                       # attention-matrix elements
    drop = c.dropout
    mask = T * h if drop else 0.0             # one byte per element (Korthikanti's masks)
    return [
        _op(f"L{i}/ln1", "LayerNormalization", i, 8 * T * h, 2 * x, bwd=10 / 8, params=2 * h,
            saved=x, out=x, comm_fwd={"sp": Comm("allgather", x)}),
        _mm(f"L{i}/qkv", i, T, h, 3 * h, e, params=3 * h * h + 3 * h,
            comm_bwd=_ar(x, "reducescatter")),
        _op(f"L{i}/score", "BatchMatMul", i, 2 * b * s * s * h, e * (2 * T * h + att),
            split=True, core=True, saved=2 * x, out=e * att),
        _op(f"L{i}/softmax", "Softmax", i, 5 * att, 2 * e * att, bwd=1.0, split=True,
            core=True, saved=e * att, core_saved=e * att, out=e * att),
        _op(f"L{i}/attn_dropout", "Dropout", i, att if drop else 0, 2 * e * att, bwd=1.0,
            split=True, core=True, saved=att if drop else 0, core_saved=att if drop else 0,
            out=e * att),
        _op(f"L{i}/attn_v", "BatchMatMul", i, 2 * b * s * s * h, e * (att + 2 * T * h),
            split=True, core=True, saved=e * att + x, core_saved=e * att if drop else 0,
            out=x),
        _mm(f"L{i}/proj", i, T, h, h, e, params=h * h + h,
            comm_fwd=_ar(x, "reducescatter")),
        _op(f"L{i}/dropout1", "Add", i, 2 * T * h, 3 * x, bwd=0.5, saved=mask, out=x,
            comm_bwd={"sp": Comm("allgather", x)}),
        _op(f"L{i}/ln2", "LayerNormalization", i, 8 * T * h, 2 * x, bwd=10 / 8, params=2 * h,
            saved=x, out=x, comm_fwd={"sp": Comm("allgather", x)}),
        _mm(f"L{i}/fc1", i, T, h, f, e, params=h * f + f, comm_bwd=_ar(x, "reducescatter")),
        _op(f"L{i}/gelu", "Gelu", i, 8 * T * f, 2 * e * T * f, bwd=1.0, split=True,
            saved=e * T * f, out=e * T * f),
        _mm(f"L{i}/fc2", i, T, f, h, e, params=f * h + h, comm_fwd=_ar(x, "reducescatter")),
        _op(f"L{i}/dropout2", "Add", i, 2 * T * h, 3 * x, bwd=0.5, saved=mask, out=x,
            comm_bwd={"sp": Comm("allgather", x)}),
    ]


def _llama_block(c: LLMConfig, i: int) -> list[ChainOp]:
    b, s, h, a, f, e = c.mbs, c.seq, c.hidden, c.heads, c.ffn, c.act_bytes
    T, x = b * s, b * s * h * e
    kv = c.kv_heads * (h // a)                # width of the key and value projections
    att = b * a * s * s
    return [
        _op(f"L{i}/rms1", "RMSNorm", i, 4 * T * h, 2 * x, bwd=1.5, params=h, saved=x, out=x,
            comm_fwd={"sp": Comm("allgather", x)}),
        _mm(f"L{i}/qkv", i, T, h, h + 2 * kv, e, params=h * (h + 2 * kv),
            comm_bwd=_ar(x, "reducescatter")),
        _op(f"L{i}/rope", "Rope", i, 3 * T * (h + kv), 2 * e * T * (h + kv), bwd=1.0,
            split=True, saved=0.0, out=e * T * (h + 2 * kv)),
        _op(f"L{i}/score", "BatchMatMul", i, 2 * b * s * s * h, e * (T * (h + kv) + att),
            split=True, core=True, saved=e * T * (h + 2 * kv), out=e * att),
        _op(f"L{i}/softmax", "Softmax", i, 5 * att, 2 * e * att, bwd=1.0, split=True,
            core=True, saved=e * att, core_saved=e * att, out=e * att),
        _op(f"L{i}/attn_v", "BatchMatMul", i, 2 * b * s * s * h, e * (att + T * (h + kv)),
            split=True, core=True, saved=0.0, out=x),
        _mm(f"L{i}/o", i, T, h, h, e, params=h * h, comm_fwd=_ar(x, "reducescatter")),
        _op(f"L{i}/residual1", "Add", i, T * h, 3 * x, bwd=0.0, bwd_bytes=0.0, out=x,
            comm_bwd={"sp": Comm("allgather", x)}),
        _op(f"L{i}/rms2", "RMSNorm", i, 4 * T * h, 2 * x, bwd=1.5, params=h, saved=x, out=x,
            comm_fwd={"sp": Comm("allgather", x)}),
        _mm(f"L{i}/gate_up", i, T, h, 2 * f, e, params=2 * h * f,
            comm_bwd=_ar(x, "reducescatter")),
        _op(f"L{i}/swiglu", "SwiGLU", i, 4 * T * f, 3 * e * T * f, bwd=1.5, split=True,
            saved=2 * e * T * f, out=e * T * f),
        _mm(f"L{i}/down", i, T, f, h, e, params=f * h, comm_fwd=_ar(x, "reducescatter")),
        _op(f"L{i}/residual2", "Add", i, T * h, 3 * x, bwd=0.0, bwd_bytes=0.0, out=x,
            comm_bwd={"sp": Comm("allgather", x)}),
    ]


def _moe_mlp(c: LLMConfig, i: int) -> list[ChainOp]:
    """A mixture-of-experts MLP (Mixtral's sparse block; Fedus et al. 2022's top-``k`` routing):
    the router's logits and top-``k``, each token's ``topk`` copies through their experts'
    SwiGLU (``2 x topk x 3 h f`` FLOPs a token; ``experts x 3 h f`` parameters, each expert
    split by the tensor-parallel degree as Megatron-LM's expert tensor parallelism does), and
    the weighted sum of the copies; its tensor-parallel collectives those of Megatron's
    all-gather dispatcher (the block's ``[b, s, h]`` activation gathered before the router and
    reduce-scattered after the combine). Under expert parallelism (``Strategy.ep > 1``, tokens
    sequence-parallel over the tensor-parallel ranks) those of Megatron-Core's
    ``MoEAlltoAllTokenDispatcher``: ``permute -> A2A(EP) -> AG(TP)`` before the experts and
    ``RS(TP) -> A2A(EP) -> unpermute`` after them, on the token copies (``tokens x topk x
    hidden`` elements), reversed in the backward."""
    b, s, h, f, e, E, k = c.mbs, c.seq, c.hidden, c.ffn, c.act_bytes, c.experts, c.topk
    T, x = b * s, b * s * h * e
    cp = e * T * k * h                        # the token copies a dispatch or combine moves
    a2a, ag, rs = Comm("alltoall", cp), Comm("allgather", cp), Comm("reducescatter", cp)
    return [
        _op(f"L{i}/router", "MatMul", i, 2 * T * h * E + 5 * T * E, e * (T * h + h * E + T * E),
            params=h * E, saved=e * T * E, out=x, ep_fwd=(a2a, ag)),
        _mm(f"L{i}/experts_gate_up", i, T * k, h, 2 * f, e, params=E * 2 * h * f,
            comm_bwd=_ar(x, "reducescatter"), expert=True, ep_bwd=(rs, a2a)),
        _op(f"L{i}/experts_swiglu", "SwiGLU", i, 4 * T * k * f, 3 * e * T * k * f, bwd=1.5,
            split=True, saved=2 * e * T * k * f, out=e * T * k * f, expert=True),
        _mm(f"L{i}/experts_down", i, T * k, f, h, e, params=E * f * h, expert=True,
            ep_fwd=(rs, a2a)),
        _op(f"L{i}/combine", "Mul", i, 2 * T * k * h, e * (T * k * h + T * h), bwd=1.0,
            saved=e * T * k, out=x, comm_fwd=_ar(x, "reducescatter"), ep_fwd=(),
            ep_bwd=(a2a, ag)),
    ]


def _moe_block(c: LLMConfig, i: int) -> list[ChainOp]:
    """A Llama block whose MLP is the mixture of experts on every ``moe_every``-th block
    (under expert parallelism the MLP's input stays sequence-parallel: no all-gather after
    the norm, none in the residual's backward)."""
    ops = _llama_block(c, i)
    if not c.is_moe(i):
        return ops
    k = next(j for j, o in enumerate(ops) if o.name.endswith("/gate_up"))
    return ops[:k - 1] + [replace(ops[k - 1], ep_fwd=())] + _moe_mlp(c, i) + \
        [replace(ops[-1], ep_bwd=())]


def _t5_attention(c: LLMConfig, i: int, tag: str, sq: int, skv: int, *, cross: bool,
                  bias: bool) -> list[ChainOp]:
    """A T5 attention sub-layer (pre-norm, no scaling, relative position bias added to the
    scores; cross-attention reads the encoder output for its keys and values) and its
    dropout + residual."""
    b, h, a, e = c.mbs, c.hidden, c.heads, c.act_bytes
    Tq, Tk = b * sq, b * skv
    x, xk = Tq * h * e, Tk * h * e
    att = b * a * sq * skv
    n = f"L{i}/{tag}"
    qkv = [_mm(f"{n}_q", i, Tq, h, h, e, params=h * h, comm_bwd=_ar(x, "reducescatter")),
           _mm(f"{n}_kv", i, Tk, h, 2 * h, e, params=2 * h * h, saved=0.0,
               comm_bwd=_ar(xk, "reducescatter"))] if cross else \
        [_mm(f"{n}_qkv", i, Tq, h, 3 * h, e, params=3 * h * h, comm_bwd=_ar(x, "reducescatter"))]
    return [
        _op(f"{n}_norm", "RMSNorm", i, 4 * Tq * h, 2 * x, bwd=1.5, params=h, saved=x, out=x,
            comm_fwd={"sp": Comm("allgather", x)}),
        *qkv,
        _op(f"{n}_score", "BatchMatMul", i, 2 * b * sq * skv * h + att,
            e * (Tq * h + Tk * h + 2 * att), split=True, core=True, saved=e * (Tq + Tk) * h,
            out=e * att, params=32 * a if bias else 0),
        _op(f"{n}_softmax", "Softmax", i, 5 * att, 2 * e * att, bwd=1.0, split=True, core=True,
            saved=e * att, core_saved=e * att, out=e * att),
        _op(f"{n}_dropout", "Dropout", i, att, 2 * e * att, bwd=1.0, split=True, core=True,
            saved=att, core_saved=att, out=e * att),
        _op(f"{n}_v", "BatchMatMul", i, 2 * b * sq * skv * h, e * (att + Tk * h + Tq * h),
            split=True, core=True, saved=e * att + e * Tk * h, core_saved=e * att, out=x),
        _mm(f"{n}_o", i, Tq, h, h, e, params=h * h, comm_fwd=_ar(x, "reducescatter")),
        _op(f"{n}_residual", "Add", i, 2 * Tq * h, 3 * x, bwd=0.5, saved=Tq * h, out=x,
            comm_bwd={"sp": Comm("allgather", x)}),
    ]


def _t5_block(c: LLMConfig, i: int) -> list[ChainOp]:
    """Encoder block ``i < layers`` (self-attention, MLP) or decoder block (self-attention,
    cross-attention over the encoder output, MLP); a decoder op's ``out`` carries the encoder
    output on to the next pipeline stage."""
    dec = i >= c.layers
    b, h, f, e = c.mbs, c.hidden, c.ffn, c.act_bytes
    s = c.dec_seq if dec else c.seq
    T, x = b * s, b * s * h * e
    first = i in (0, c.layers)
    ops = _t5_attention(c, i, "self", s, s, cross=False, bias=first)
    if dec:
        ops += _t5_attention(c, i, "cross", s, c.seq, cross=True, bias=False)
    ops += [
        _op(f"L{i}/mlp_norm", "RMSNorm", i, 4 * T * h, 2 * x, bwd=1.5, params=h, saved=x,
            out=x, comm_fwd={"sp": Comm("allgather", x)}),
        _mm(f"L{i}/fc1", i, T, h, f, e, params=h * f, comm_bwd=_ar(x, "reducescatter")),
        _op(f"L{i}/relu", "Relu", i, 2 * T * f, 2 * e * T * f, bwd=1.0, split=True,
            saved=e * T * f + T * f, out=e * T * f),
        _mm(f"L{i}/fc2", i, T, f, h, e, params=f * h, comm_fwd=_ar(x, "reducescatter")),
        _op(f"L{i}/mlp_residual", "Add", i, 2 * T * h, 3 * x, bwd=0.5, saved=T * h, out=x,
            comm_bwd={"sp": Comm("allgather", x)}),
    ]
    xe = b * c.seq * h * e
    if i == c.layers - 1:        # the encoder's final norm and dropout close its last block
        ops.append(_op("encoder_norm", "RMSNorm", i, 5 * T * h, 2 * x, bwd=1.5, params=h,
                       saved=x + T * h, out=x, comm_fwd={"sp": Comm("allgather", x)}))
    if i == c.layers:            # the decoder's token embedding (shared weights) opens it
        ops.insert(0, _op("decoder_embedding", "Gather", i, T * h, 3 * x, bwd=1.0, split=True,
                          saved=T * h, out=x, comm_fwd=_ar(x, "reducescatter")))
    carry = xe if dec else 0.0
    return [replace(o, resid=x, carry=carry, out=o.out + carry) for o in ops]


def _ends(c: LLMConfig) -> tuple[list[ChainOp], list[ChainOp]]:
    """The embedding before the blocks; the final norm, LM head and loss after them."""
    b, s, h, V, e = c.mbs, c.seq, c.hidden, c.vocab, c.act_bytes
    T, x, L = b * s, b * s * h * e, c.blocks
    gpt, tied = c.arch == "gpt", c.arch in ("gpt", "t5")
    emb_params = V * h + (s * h if gpt else 0)
    emb = [_op("embedding", "Gather", -1, T * h if c.arch in ("gpt", "t5") else 0, 3 * x,
               bwd=1.0, params=emb_params, split=True, out=x, saved=T * h if c.arch == "t5" else 0.0,
               comm_fwd=_ar(x, "reducescatter"), resid=x)]
    if c.arch == "t5":           # the head reads the decoder's tokens
        s = c.dec_seq
        T, x = b * s, b * s * h * e
    head = [
        # (T5: the dropout after the norm and the tied head's scaling by hidden^-1/2 with it)
        _op("final_norm", "LayerNormalization" if gpt else "RMSNorm", L,
            (8 if gpt else 6 if tied else 4) * T * h, 2 * x, bwd=10 / 8 if gpt else 1.5,
            params=2 * h if gpt else h, saved=x, out=x, comm_fwd={"sp": Comm("allgather", x)}),
        # tied to the embedding in GPT and T5 (its parameters counted there)
        _mm("lm_head", L, T, h, V, e, params=0 if tied else V * h, saved=x,
            comm_bwd=_ar(x, "reducescatter")),
        # vocabulary-parallel cross-entropy: fp32 logits kept for backward; the max, the sum
        # of exponentials and the target logit all-reduced across ranks (3 floats a token)
        _op("loss", "SoftmaxCrossEntropyWithLogits", L, 10 * T * V, 2 * e * T * V, bwd=1.0,
            split=True, saved=4 * T * V, out=4.0 * T,
            comm_fwd={"tp": Comm("allreduce", 12.0 * T), "sp": Comm("allreduce", 12.0 * T)}),
    ]
    return emb, [replace(o, resid=x) for o in head]


def chain(config: LLMConfig) -> list[ChainOp]:
    """The forward chain of ``config``: embedding, ``layers`` blocks, final norm, head, loss.

    >>> c = parse_spec("llama:layers=2,hidden=256,heads=8,kv_heads=2,seq=32,vocab=500")
    >>> len(chain(c)), chain(c)[-1].name
    (30, 'loss')
    """
    block = {"gpt": _gpt_block, "llama": _llama_block, "t5": _t5_block,
             "moe": _moe_block}[config.arch]
    emb, head = _ends(config)
    ops = list(emb)
    x = config.mbs * config.seq * config.hidden * config.act_bytes
    for i in range(config.blocks):
        ops.extend(o if o.resid else replace(o, resid=x) for o in block(config, i))
    return ops + head
