"""The LLM training-step builders (issue 43): specs, graphs, and the check against PyTorch."""

import pytest

from workbench.costs.llm import PRESETS, chain, parse_spec, state_bytes_per_param
from workbench.costs.llm_graph import training_graph
from workbench.errors import GraphError

GPT_SMALL = "gpt:layers=2,hidden=128,heads=4,seq=64,mbs=2,vocab=1000"
LLAMA_SMALL = "llama:layers=2,hidden=128,heads=4,kv_heads=2,seq=64,mbs=2,vocab=1000,ffn=352"


def _flops(g, kinds=("fwd", "bwd", "update")):
    return sum(g.op(v).get("flops", 0.0) for v in g.ops if g.op(v)["kind"] in kinds)


def _captured(spec):
    """The same model built with transformers (random weights), captured by from_torch."""
    torch = pytest.importorskip("torch")
    tr = pytest.importorskip("transformers")
    from workbench.io.torch import from_torch
    from workbench.io.torch_models import _logits_module

    c = parse_spec(spec)
    common = {"use_cache": False, "attn_implementation": "eager", "vocab_size": c.vocab}
    if c.arch == "gpt":
        hf = tr.GPT2Config(n_layer=c.layers, n_embd=c.hidden, n_head=c.heads,
                           n_positions=c.seq, n_inner=c.ffn, resid_pdrop=0.0, embd_pdrop=0.0,
                           attn_pdrop=0.0, bos_token_id=0, eos_token_id=0, **common)
        model = _logits_module(tr.GPT2LMHeadModel(hf), "logits", "input_ids", True)
    else:
        hf = tr.LlamaConfig(num_hidden_layers=c.layers, hidden_size=c.hidden,
                            num_attention_heads=c.heads, num_key_value_heads=c.kv_heads,
                            intermediate_size=c.ffn, max_position_embeddings=c.seq,
                            bos_token_id=0, eos_token_id=0, pad_token_id=0, **common)
        model = _logits_module(tr.LlamaForCausalLM(hf), "logits", "input_ids", True)
    x = torch.randint(0, c.vocab, (c.mbs, c.seq))
    return c, from_torch(model, (x,), optimizer="adam", profile=None, loss="cross_entropy")


@pytest.mark.parametrize("spec", [GPT_SMALL, LLAMA_SMALL])
def test_builder_matches_torch_capture(spec):
    """FLOPs of forward + backward + Adam within 2 %, parameter bytes within 1 %."""
    c, cap = _captured(spec)
    ours = training_graph(parse_spec(spec + ",precision=fp32"))
    assert abs(_flops(ours) / _flops(cap) - 1) < 0.02, (_flops(ours), _flops(cap))
    fwd = _flops(ours, ("fwd",)) / _flops(cap, ("fwd",))
    assert abs(fwd - 1) < 0.02
    param_bytes = sum(ours.op(v).get("param_bytes", 0.0) for v in ours.ops)
    assert abs(param_bytes / cap.meta["param_bytes"] - 1) < 0.01
    assert ours.meta["params"] * 4 == param_bytes


def test_graph_carries_every_state():
    g = training_graph(GPT_SMALL)
    c = parse_spec(GPT_SMALL)
    n = c.params()
    pb, gb, ob = state_bytes_per_param("bf16")
    assert sum(g.op(v).get("param_bytes", 0) for v in g.ops) == pb * n
    assert sum(g.op(v).get("grad_bytes", 0) for v in g.ops) == gb * n
    assert sum(g.op(v).get("optimizer_bytes", 0) for v in g.ops) == ob * n
    act = sum(g.op(v).get("activation_bytes", 0) for v in g.ops)
    assert act == sum(o.saved for o in chain(c))
    assert all(g.op(v)["compute"]["gpu"] > 0 for v in g.ops)
    assert g.n_ops == 2 * len(chain(c)) + c.layers + 2


def test_presets_and_korthikanti_activations():
    # Narayanan et al. 2021 Table 1: 1.3 B, 13 B, 175 B (within 2 %)
    for name, n in (("gpt:1.3b", 1.3e9), ("gpt:13b", 13e9), ("gpt:175b", 175e9)):
        assert abs(PRESETS[name].params() / n - 1) < 0.02, name
    c = PRESETS["gpt:175b"]
    s, b, h, a = c.seq, c.mbs, c.hidden, c.heads
    layer = sum(o.saved for o in chain(c) if o.layer == 5)
    assert layer == s * b * h * (34 + 5 * a * s / h)          # Korthikanti 2022 eq. (1)
    gqa = parse_spec("llama:70b")
    assert abs(gqa.params() / 69e9 - 1) < 0.02


@pytest.mark.parametrize("bad, msg", [
    ("gpt:hidden=100,heads=3", "not a multiple"), ("bert:layers=2", "unknown model"),
    ("gpt:7b", "unknown size"), ("gpt:1.3b,layers", "bad part"), ("gpt:precision=int8", "precision"),
    ("llama:heads=8,kv_heads=3", "kv_heads")])
def test_bad_specs(bad, msg):
    with pytest.raises(GraphError, match=msg):
        parse_spec(bad)


def test_spec_round_trip():
    for spec in (GPT_SMALL, LLAMA_SMALL, "gpt:175b,mbs=1", "llama:70b"):
        c = parse_spec(spec)
        assert parse_spec(c.spec) == c


def test_resolve_names_llm_specs():
    from workbench.workloads import check, resolve

    g, own = resolve("gpt:layers=2,hidden=64,heads=4,seq=32,mbs=4,vocab=500")
    assert own is None and g.meta["source"] == "llm" and g.meta["batch"] == 4
    assert check("llama:layers=1,hidden=64,heads=4,seq=16,vocab=100") is False
    with pytest.raises(GraphError, match="gpt:layers=2,hidden=63"):
        resolve("gpt:layers=2,hidden=63,heads=4")


def test_cli_info_takes_llm_spec(capsys):
    from workbench.cli import main

    assert main(["info", "gpt:layers=1,hidden=64,heads=4,seq=16,vocab=100"]) in (0, None)
    assert "gpt:" in capsys.readouterr().out
    assert main(["info", "gpt:hidden=63,heads=4"]) == 2
    assert "error: gpt:hidden=63,heads=4: gpt: hidden=63 is not a multiple" in \
        capsys.readouterr().err


def test_step_flops_match_narayanan():
    """Narayanan et al. 2021, 5.1: 72 B s l h^2 (1 + s/6h + V/12lh) FLOPs a step (no
    recomputation), from the matmuls alone; ours adds the element-wise ops (under 2 %)."""
    c = PRESETS["gpt:175b"]
    B, s, l, h, V = c.mbs, c.seq, c.layers, c.hidden, c.vocab
    ref = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))
    ours = sum(o.flops + o.bwd_flops for o in chain(c))
    assert 1.0 <= ours / ref < 1.02
