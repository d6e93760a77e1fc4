"""Grouped-query attention (``n_kv_heads``) and Llama-style models against ``transformers.LlamaForCausalLM``
(and ``MistralForCausalLM``: the same with a sliding window).

Configurations are small with every size distinct (vocab 53, width 48, 6 query heads of 8, FFN 80,
3 layers), K/V heads 2 (groups of 3), 1 (multi-query) and 6 (plain multi-head), RoPE base and
RMSNorm epsilon off their defaults so that a value read from the wrong field shows.
"""
from __future__ import annotations

import pytest
import torch

import transformer_course as tc

transformers = pytest.importorskip("transformers")

KV_HEADS = (2, 1, 6)


def hf_llama(n_kv_heads: int, tie: bool = False, dtype: torch.dtype = torch.float32, family: str = "Llama",
             **overrides):
    """A random ``{family}ForCausalLM`` (``Llama`` or ``Mistral``, same layout) of the sizes above."""
    torch.manual_seed(n_kv_heads)
    config = getattr(transformers, f"{family}Config")(
        vocab_size=53, hidden_size=48, intermediate_size=80, num_hidden_layers=3, num_attention_heads=6,
        num_key_value_heads=n_kv_heads, max_position_embeddings=64, rms_norm_eps=1e-6, rope_theta=5000.0,
        tie_word_embeddings=tie, attn_implementation="eager", bos_token_id=None, eos_token_id=None,
        **overrides)  # no end-of-sequence token: generate must not stop or suppress one
    model = getattr(transformers, f"{family}ForCausalLM")(config).eval().to(dtype)
    with torch.no_grad():  # norms start at ones: give them other values, so that a skipped one shows
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    return model


def tokens(batch: int = 2, t: int = 11, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 53, (batch, t), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("n_kv_heads", KV_HEADS)
# float64: transformers computes RoPE's angles and RMSNorm in float32 whatever the model's dtype, so the
# two agree to ~5e-8 there, not to float64 rounding (our model computes both in float64).
@pytest.mark.parametrize("dtype,atol", [(torch.float32, 1e-5), (torch.float64, 1e-6)])
def test_logits_match_llama(n_kv_heads: int, dtype: torch.dtype, atol: float) -> None:
    hf = hf_llama(n_kv_heads, tie=n_kv_heads == 1, dtype=dtype)
    ours = tc.from_hf_llama(hf).eval()
    assert ours.config.n_kv_heads == n_kv_heads and ours.config.rope_base == 5000.0
    assert next(ours.parameters()).dtype == dtype
    idx = tokens()
    with torch.no_grad():
        expected = hf(idx).logits
        got = ours(idx)
    print(f"n_kv_heads={n_kv_heads} {dtype}: max |dlogits| = {(got - expected).abs().max().item():.1e}")
    assert (got - expected).abs().max().item() < atol


@pytest.mark.parametrize("n_kv_heads", KV_HEADS)
def test_cached_decode_and_greedy_tokens_match_llama(n_kv_heads: int) -> None:
    hf = hf_llama(n_kv_heads)
    ours = tc.from_hf_llama(hf).eval()
    idx = tokens(batch=1, t=7, seed=1)
    with torch.no_grad():
        full = ours(idx)
        cache = tc.KVCache.from_config(ours.config, batch_size=1, max_len=20)
        assert cache.k.shape == (3, 1, n_kv_heads, 20, 8)  # the cache holds K/V heads only
        step_logits = torch.cat([ours(idx[:, t:t + 1], cache=cache) for t in range(7)], dim=1)
    assert (step_logits - full).abs().max().item() < 1e-5
    with torch.no_grad():
        expected = hf.generate(idx, attention_mask=torch.ones_like(idx), max_new_tokens=12, do_sample=False,
                               pad_token_id=0)
    for use_cache in (True, False):
        assert torch.equal(tc.generate(ours, idx, 12, use_cache=use_cache, temperature=0.0), expected)


def test_gqa_is_multi_head_attention_with_shared_key_value_heads() -> None:
    """A GQA layer equals a multi-head layer whose K/V weights repeat each K/V head for its group: with a
    causal and a padding mask, an ALiBi-style bias, fast and didactic paths, weights and trace."""
    torch.manual_seed(0)
    C, H, H_kv, B, T = 40, 4, 2, 3, 6
    gqa = tc.MultiHeadAttention(C, H, n_kv_heads=H_kv).eval()
    mha = tc.MultiHeadAttention(C, H).eval()
    d = C // H
    with torch.no_grad():
        w_q, w_k, w_v = gqa.qkv_proj.weight.split([C, H_kv * d, H_kv * d])
        b_q, b_k, b_v = gqa.qkv_proj.bias.split([C, H_kv * d, H_kv * d])
        def repeat(t): return t.unflatten(0, (H_kv, d)).repeat_interleave(H // H_kv, dim=0).flatten(0, 1)
        mha.qkv_proj.weight.copy_(torch.cat([w_q, repeat(w_k), repeat(w_v)]))
        mha.qkv_proj.bias.copy_(torch.cat([b_q, repeat(b_k), repeat(b_v)]))
        mha.out_proj.load_state_dict(gqa.out_proj.state_dict())
    x = torch.randn(B, T, C)
    mask = tc.causal_mask(T) & tc.padding_mask(torch.tensor([6, 4, 1]), T)  # (B, 1, T, T)
    bias = torch.randn(H, T, T)  # one bias per query head
    for kwargs in ({}, {"mask": mask}, {"mask": mask, "position_bias": bias}, {"mask": tc.causal_mask(T)}):
        with torch.no_grad():
            fast = gqa(x, **kwargs)[0]
            trace: list = []
            slow, weights = gqa(x, need_weights=True, trace=trace, **kwargs)
            ref, ref_weights = mha(x, need_weights=True, **kwargs)
        assert (fast - ref).abs().max() < 1e-6 and (slow - ref).abs().max() < 1e-6
        assert weights.shape == (B, H, T, T) and (weights - ref_weights).abs().max() < 1e-6
        assert trace[0].keys.shape == (B, H_kv, T, d) and trace[0].queries.shape == (B, H, T, d)


def test_gqa_cache_bytes_formula_equals_measured() -> None:
    base = tc.TransformerConfig(vocab_size=53, d_model=48, n_heads=6, n_layers=3, d_ff=80, max_len=64,
                                positional="rope")
    measured = {}
    for n_kv in (6, 3, 2, 1):
        config = base.replace(n_kv_heads=n_kv)
        model = tc.DecoderOnly(config).eval()
        cache = tc.KVCache.from_config(config, batch_size=2, max_len=30)
        with torch.no_grad():
            model(tokens(t=13), cache=cache)
        assert cache.nbytes == tc.kv_cache_bytes(config, 13, batch_size=2)
        measured[n_kv] = cache.nbytes
    assert all(measured[6] == measured[n] * (6 // n) for n in measured)
    assert tc.kv_cache_bytes(base, 13, batch_size=2) == measured[6]  # n_kv_heads=None: multi-head


def test_bad_kv_heads_and_unsupported_llama_configs_are_refused() -> None:
    with pytest.raises(ValueError, match="n_kv_heads must divide n_heads=6, got n_kv_heads=4"):
        tc.TransformerConfig(vocab_size=5, d_model=12, n_heads=6, n_kv_heads=4, n_layers=1, d_ff=8, max_len=4)
    with pytest.raises(ValueError, match="n_kv_heads must divide n_heads=6, got n_kv_heads=4"):
        tc.MultiHeadAttention(12, 6, n_kv_heads=4)
    with pytest.raises(ValueError, match="n_kv_heads"):
        tc.TransformerConfig(vocab_size=5, d_model=12, n_heads=6, n_kv_heads=0, n_layers=1, d_ff=8, max_len=4)
    refused = {
        "rope_type='dynamic'": dict(rope_scaling={"rope_type": "dynamic", "factor": 2.0}),
        "rope_type='llama3'": dict(rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 16}),
        "'mscale': 0.7": dict(rope_scaling={"rope_type": "yarn", "factor": 4.0, "mscale": 0.7, "mscale_all_dim": 1.0,
                                            "original_max_position_embeddings": 16}),
        "attention_bias=True": dict(attention_bias=True),
        "mlp_bias=True": dict(mlp_bias=True),
        "hidden_act='gelu'": dict(hidden_act="gelu"),
        "head_dim=12": dict(head_dim=12),
    }
    for message, overrides in refused.items():
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
            tc.from_hf_llama(hf_llama(2, **overrides))


SCALINGS = {
    "linear": {"rope_type": "linear", "factor": 2.5},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
    "yarn, own betas": {"rope_type": "yarn", "factor": 3.0, "original_max_position_embeddings": 20,
                        "beta_fast": 16.0, "beta_slow": 2.0},
}


@pytest.mark.parametrize("name", SCALINGS)
def test_rope_scaling_matches_llama_past_the_original_length(name: str) -> None:
    """Position interpolation and YaRN as transformers computes them, at 40 positions (YaRN trained on 16)."""
    hf = hf_llama(2, rope_scaling=dict(SCALINGS[name], rope_theta=5000.0))
    ours = tc.from_hf_llama(hf).eval()
    assert ours.config.rope_scaling.kind == name.split(",")[0]
    idx = tokens(t=40, seed=3)
    with torch.no_grad():
        gap = (ours(idx) - hf(idx).logits).abs().max().item()
        plain = tc.DecoderOnly(ours.config.replace(rope_scaling=None)).eval()
        plain.load_state_dict(ours.state_dict())
        unscaled_gap = (plain(idx) - hf(idx).logits).abs().max().item()
    assert gap < 1e-5 and unscaled_gap > 1e-3  # the scaling is what makes them agree


def test_ntk_scaling_divides_the_slowest_frequency_by_the_factor_and_keeps_the_fastest() -> None:
    from transformer_course.positional import inverse_frequencies, scaled_inverse_frequencies

    plain = inverse_frequencies(10, base=500.0).double()
    ntk, attention_factor = scaled_inverse_frequencies(10, base=500.0, scaling=tc.RopeScaling("ntk", 4.0))
    assert attention_factor == 1.0 and ntk[0] == plain[0] == 1.0
    assert abs(ntk[-1].item() - plain[-1].item() / 4.0) < 1e-9
    assert ((ntk.double() / plain)[1:] < 1).all() and (ntk.double() / plain).diff().le(0).all()  # more for slower
    linear, _ = scaled_inverse_frequencies(10, base=500.0, scaling=tc.RopeScaling("linear", 4.0))
    assert torch.allclose(linear.double(), plain / 4.0)
    with pytest.raises(ValueError, match="original_max_len"):
        tc.RopeScaling("yarn", 2.0)
    with pytest.raises(ValueError, match="rope_scaling needs positional='rope'"):
        tc.TransformerConfig(vocab_size=5, d_model=8, n_heads=2, n_layers=1, d_ff=8, max_len=4,
                             rope_scaling=tc.RopeScaling("linear", 2.0))


def test_mistral_sliding_window_matches_mistral() -> None:
    """transformers' ``sliding_window=W`` keeps key j for query i iff i - W < j <= i: W keys, itself included,
    as our ``sliding_window``. 29 tokens, window 5; decoding past the window with the rolling cache."""
    hf = hf_llama(2, family="Mistral", sliding_window=5)
    ours = tc.from_hf_llama(hf).eval()
    assert ours.config.sliding_window == 5 and ours.config.rope_base == 5000.0
    idx = tokens(t=29, seed=4)
    with torch.no_grad():
        expected = hf(idx).logits
        gap = (ours(idx) - expected).abs().max().item()
        gaps = {}  # the same weights with no window, or one key fewer or more: the test can fail
        for window in (None, 4, 6):
            other = tc.DecoderOnly(ours.config.replace(sliding_window=window)).eval()
            other.load_state_dict(ours.state_dict())
            gaps[window] = (other(idx) - expected).abs().max().item()
    print(f"max |dlogits| = {gap:.1e}, other windows: {gaps}")
    assert gap < 1e-4 and min(gaps.values()) > 0.1
    rolling = tc.KVCache.from_config(ours.config, batch_size=2)
    assert isinstance(rolling, tc.RollingKVCache) and rolling.k.shape == (3, 2, 2, 5, 8)
    full_cache = tc.KVCache(n_layers=3, batch_size=2, n_heads=2, d_head=8, max_len=29)  # keeps every position
    for cache in (rolling, full_cache):
        with torch.no_grad():  # a prompt longer than the window, then one token at a time
            steps = [ours(idx[:, :9], cache=cache)] + [ours(idx[:, t:t + 1], cache=cache) for t in range(9, 29)]
        assert (torch.cat(steps, dim=1) - expected).abs().max().item() < 1e-4
    prompt = idx[:, :9]
    with torch.no_grad():  # transformers' sliding cache keeps W - 1 positions + the new one
        hf_tokens = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=20,
                                do_sample=False, pad_token_id=0)
    for use_cache in (True, False):  # True: tc.generate makes a RollingKVCache from the config
        assert torch.equal(tc.generate(ours, prompt, 20, use_cache=use_cache, temperature=0.0), hf_tokens)


def test_llama_configs_without_a_window_load_as_before() -> None:
    """Llama has no ``sliding_window``; Qwen2-style configs keep one but turn it off (``use_sliding_window``)."""
    plain = hf_llama(2)
    assert not hasattr(plain.config, "sliding_window") and tc.from_hf_llama(plain).config.sliding_window is None
    hf = hf_llama(2, use_sliding_window=False, sliding_window=5)
    ours = tc.from_hf_llama(hf).eval()
    idx = tokens(t=29, seed=4)
    with torch.no_grad():
        assert ours.config.sliding_window is None and (ours(idx) - hf(idx).logits).abs().max().item() < 1e-5
    mixed = ["sliding_attention", "full_attention", "sliding_attention"]  # per-layer windows (Qwen2, Ministral)
    with pytest.raises(ValueError, match=r"layer_types=\['full_attention', 'sliding_attention'\] is not implemented"):
        tc.from_hf_llama(hf_llama(2, family="Mistral", sliding_window=5, layer_types=mixed))
