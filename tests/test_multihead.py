"""MultiHeadAttention: H single heads, torch.nn.MultiheadAttention parity, parameters, fast == didactic."""
from __future__ import annotations

import pytest
import torch
from tiny import B, D_HEAD, D_MODEL, N_HEADS, T

from transformer_course.attention import causal_mask, padding_mask, scaled_dot_product_attention
from transformer_course.kv_cache import KVCache
from transformer_course.multihead import MultiHeadAttention, merge_heads, split_heads
from transformer_course.positional import ALiBi, RotaryEmbedding
from transformer_course.utils import count_params

S = 5  # context length for cross-attention, different from T


@pytest.fixture
def x() -> torch.Tensor:
    return torch.randn(B, T, D_MODEL, generator=torch.Generator().manual_seed(0))


def test_split_then_merge_is_identity(x):
    heads = split_heads(x, N_HEADS)
    assert heads.shape == (B, N_HEADS, T, D_HEAD)
    torch.testing.assert_close(heads[:, 1], x[..., D_HEAD : 2 * D_HEAD])  # head 1 owns features 8..15
    torch.testing.assert_close(merge_heads(heads), x)


@pytest.mark.parametrize("need_weights", [False, True])
def test_equals_h_separate_single_head_attentions(x, need_weights):
    mha = MultiHeadAttention(D_MODEL, N_HEADS)
    mask = causal_mask(T, T)
    out, _ = mha(x, mask=mask, need_weights=need_weights)

    W_q, W_k, W_v = mha.qkv_proj.weight.split(D_MODEL)  # (C, C) each
    b_q, b_k, b_v = mha.qkv_proj.bias.split(D_MODEL)
    heads = []
    for h in range(N_HEADS):
        rows = slice(h * D_HEAD, (h + 1) * D_HEAD)  # this head's slice of each projection
        q, k, v = (x @ W[rows].T + b[rows] for W, b in ((W_q, b_q), (W_k, b_k), (W_v, b_v)))  # (B, T, d_head)
        heads.append(scaled_dot_product_attention(q, k, v, mask=mask)[0])
    expected = mha.out_proj(torch.cat(heads, dim=-1))  # concatenate the heads, then W_O
    torch.testing.assert_close(out, expected)


def test_self_attention_equals_torch_multihead_attention(x):
    ours = MultiHeadAttention(D_MODEL, N_HEADS).eval()
    ref = torch.nn.MultiheadAttention(D_MODEL, N_HEADS, batch_first=True).eval()
    with torch.no_grad():
        ours.qkv_proj.weight.copy_(ref.in_proj_weight)
        ours.qkv_proj.bias.copy_(ref.in_proj_bias)
        ours.out_proj.load_state_dict(ref.out_proj.state_dict())
    mask = causal_mask(T, T)
    expected, expected_weights = ref(x, x, x, attn_mask=~mask, average_attn_weights=False)  # torch: True = blocked
    out, weights = ours(x, mask=mask, need_weights=True)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(weights, expected_weights)


def test_cross_attention_equals_torch_multihead_attention(x):
    context = torch.randn(B, S, D_MODEL)
    ours = MultiHeadAttention(D_MODEL, N_HEADS, cross_attention=True).eval()
    ref = torch.nn.MultiheadAttention(D_MODEL, N_HEADS, batch_first=True).eval()
    with torch.no_grad():
        ours.q_proj.weight.copy_(ref.in_proj_weight[:D_MODEL])
        ours.q_proj.bias.copy_(ref.in_proj_bias[:D_MODEL])
        ours.kv_proj.weight.copy_(ref.in_proj_weight[D_MODEL:])
        ours.kv_proj.bias.copy_(ref.in_proj_bias[D_MODEL:])
        ours.out_proj.load_state_dict(ref.out_proj.state_dict())
    lengths = torch.tensor([S, 3])
    expected, _ = ref(x, context, context, key_padding_mask=torch.arange(S) >= lengths[:, None])
    out, _ = ours(x, context=context, mask=padding_mask(lengths, S))
    torch.testing.assert_close(out, expected)


def test_h_heads_of_width_d_over_h_have_the_parameters_of_one_full_head():
    multi, single = MultiHeadAttention(D_MODEL, N_HEADS), MultiHeadAttention(D_MODEL, 1)
    assert count_params(multi) == count_params(single) == 4 * D_MODEL * D_MODEL + 4 * D_MODEL


@pytest.mark.parametrize("with_alibi", [False, True])
def test_fast_path_equals_didactic_path(x, with_alibi):
    mha = MultiHeadAttention(D_MODEL, N_HEADS).eval()
    positions = torch.arange(T)
    bias = ALiBi(N_HEADS)(positions, positions) if with_alibi else None
    mask = padding_mask(torch.tensor([T, 4]), T) & causal_mask(T, T)
    fast, none = mha(x, mask=mask, position_bias=bias)
    slow, weights = mha(x, mask=mask, position_bias=bias, need_weights=True)
    assert none is None and weights.shape == (B, N_HEADS, T, T)
    torch.testing.assert_close(fast, slow)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, N_HEADS, T))
    assert (weights[1, :, :, 4:] == 0).all()  # padding of sequence 1 gets no weight


def test_cache_one_position_at_a_time_equals_full_sequence(x):
    mha = MultiHeadAttention(D_MODEL, N_HEADS).eval()
    rope = RotaryEmbedding(D_HEAD)
    full, _ = mha(x, mask=causal_mask(T, T), rope_cos_sin=rope(torch.arange(T)))
    cache = KVCache(n_layers=1, batch_size=B, n_heads=N_HEADS, d_head=D_HEAD, max_len=T + 3)
    steps = []
    with torch.inference_mode():
        for t in range(T):
            mask = causal_mask(1, t + 1)  # the new query sees all t + 1 keys
            out, _ = mha(x[:, t : t + 1], mask=mask, cache=cache.layer(0), rope_cos_sin=rope(torch.tensor([t])))
            cache.advance(1)
            steps.append(out)
    torch.testing.assert_close(torch.cat(steps, dim=1), full)
