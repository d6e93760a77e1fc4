"""Positions: RoPE invariants and parity with Hugging Face Llama; ALiBi slopes as in the paper; sinusoids."""
from __future__ import annotations

import math

import pytest
import torch
from tiny import B, D_HEAD, D_MODEL, MAX_LEN, N_HEADS, T

from transformer_course.positional import (
    ALiBi,
    LearnedPositions,
    RotaryEmbedding,
    alibi_slopes,
    apply_rope,
    sinusoidal_table,
)


def paper_get_slopes(n: int) -> list[float]:
    """Verbatim from the ALiBi reference code (ofirpress/attention_with_linear_biases)."""

    def get_slopes_power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        ratio = start
        return [start * ratio**i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return (
        get_slopes_power_of_2(closest_power_of_2)
        + paper_get_slopes(2 * closest_power_of_2)[0::2][: n - closest_power_of_2]
    )


def test_alibi_slopes_for_8_heads_are_powers_of_one_half():
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0**-i for i in range(1, 9)]))


@pytest.mark.parametrize("n_heads", [1, 3, 6, 8, 12, 16, 20])
def test_alibi_slopes_match_the_reference_get_slopes(n_heads):
    torch.testing.assert_close(alibi_slopes(n_heads), torch.tensor(paper_get_slopes(n_heads)))


def test_alibi_bias_is_minus_slope_times_distance():
    bias = ALiBi(N_HEADS)(torch.arange(3, 3 + T), torch.arange(3 + T))  # T queries after 3 cached positions
    assert bias.shape == (N_HEADS, T, 3 + T)
    i, j = 5, 1  # query 5 sits at position 8
    torch.testing.assert_close(bias[:, i, j], -alibi_slopes(N_HEADS) * 7)
    assert (bias[:, torch.arange(T), torch.arange(3, 3 + T)] == 0).all()  # a token and itself: no penalty


@pytest.fixture
def qk() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(B, N_HEADS, T, D_HEAD, generator=g), torch.randn(B, N_HEADS, T, D_HEAD, generator=g)


def test_rope_preserves_norms(qk):
    q, _ = qk
    cos, sin = RotaryEmbedding(D_HEAD)(torch.arange(100, 100 + T))
    torch.testing.assert_close(apply_rope(q, cos, sin).norm(dim=-1), q.norm(dim=-1))


def test_rope_dot_product_depends_only_on_the_offset(qk):
    rope = RotaryEmbedding(D_HEAD)
    q, k = qk[0][0, 0, :1], qk[1][0, 0, :1]  # one query and one key vector, (1, d_head) each

    def score(m: int, n: int) -> torch.Tensor:
        cos, sin = rope(torch.tensor([m, n]))
        return apply_rope(q, cos[:1], sin[:1]) @ apply_rope(k, cos[1:], sin[1:]).T

    for shift in (1, 10, 1000):
        torch.testing.assert_close(score(9, 4), score(9 + shift, 4 + shift), atol=1e-4, rtol=1e-4)
    assert not torch.allclose(score(9, 4), score(9, 5))  # a different offset gives a different score


@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_rope_equals_hugging_face_llama(qk, base):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    config = LlamaConfig(
        hidden_size=D_MODEL, num_attention_heads=N_HEADS, num_key_value_heads=N_HEADS, num_hidden_layers=1,
        intermediate_size=40, vocab_size=50, max_position_embeddings=64,
        rope_theta=base, rope_parameters={"rope_type": "default", "rope_theta": base},  # transformers 4.x, 5.x
    )
    q, k = qk
    position_ids = torch.arange(5, 5 + T)[None].expand(B, T)
    hf_cos, hf_sin = LlamaRotaryEmbedding(config=config)(q, position_ids)
    hf_q, hf_k = apply_rotary_pos_emb(q, k, hf_cos, hf_sin)

    cos, sin = RotaryEmbedding(D_HEAD, base=base)(torch.arange(5, 5 + T))
    torch.testing.assert_close(apply_rope(q, cos, sin), hf_q, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(apply_rope(k, cos, sin), hf_k, atol=1e-6, rtol=1e-5)


def test_sinusoidal_table_follows_the_formula():
    table = sinusoidal_table(MAX_LEN, D_MODEL)
    assert table.shape == (MAX_LEN, D_MODEL)
    p, i = 11, 5
    angle = p / 10000 ** (2 * i / D_MODEL)
    torch.testing.assert_close(table[p, 2 * i], torch.tensor(math.sin(angle)))
    torch.testing.assert_close(table[p, 2 * i + 1], torch.tensor(math.cos(angle)))


def test_learned_positions_stop_at_max_len():
    learned = LearnedPositions(MAX_LEN, D_MODEL)
    assert learned(torch.arange(MAX_LEN)).shape == (MAX_LEN, D_MODEL)
    with pytest.raises(ValueError, match="max_len=16"):
        learned(torch.arange(MAX_LEN + 1))


def test_fixed_tables_are_non_persistent_buffers():
    assert RotaryEmbedding(D_HEAD).state_dict() == {}
    assert ALiBi(N_HEADS).state_dict() == {}
    assert [name for name, _ in ALiBi(N_HEADS).named_buffers()] == ["slopes"]
