"""The didactic attention against PyTorch's fused implementation, the masks, and bad input."""
import pytest
import torch
import torch.nn.functional as F

import transformer_course as tc

B, H, TQ, TK, DK, DV = 2, 3, 5, 7, 4, 6


def _qkv(t_q: int = TQ, t_k: int = TK) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    return (torch.randn(B, H, t_q, DK, generator=g), torch.randn(B, H, t_k, DK, generator=g),
            torch.randn(B, H, t_k, DV, generator=g))


def test_additive_bias_equals_torch_float_mask():
    q, k, v = _qkv()
    bias = torch.randn(H, TQ, TK, generator=torch.Generator().manual_seed(2))
    out, _ = tc.scaled_dot_product_attention(q, k, v, position_bias=bias, mask=tc.causal_mask(TQ, TK))
    float_mask = bias.masked_fill(~tc.causal_mask(TQ, TK), float("-inf"))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=float_mask), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("scale", [None, 0.3])
def test_equals_torch_sdpa_with_and_without_mask(scale):
    q, k, v = _qkv()
    mask = torch.rand(B, 1, TQ, TK, generator=torch.Generator().manual_seed(1)) > 0.3
    mask[..., 0] = True  # no fully masked rows here (torch gives NaN there, we give zeros)
    for m in (None, mask):
        out, w = tc.scaled_dot_product_attention(q, k, v, mask=m, scale=scale)
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=scale)
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
        assert w.shape == (B, H, TQ, TK) and (w >= 0).all()
        torch.testing.assert_close(w.sum(-1), torch.ones(B, H, TQ))


def test_causal_mask_with_cache_offset_matches_full_computation():
    """The last Tq queries against all Tk keys equal the last Tq rows of full causal attention."""
    q, k, v = _qkv(TK, TK)
    full, _ = tc.scaled_dot_product_attention(q, k, v, mask=tc.causal_mask(TK))
    tail, _ = tc.scaled_dot_product_attention(q[..., -2:, :], k, v, mask=tc.causal_mask(2, TK))
    torch.testing.assert_close(tail, full[..., -2:, :])
    torch.testing.assert_close(full, F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-5, rtol=1e-5)


def test_future_weights_exactly_zero_and_fully_masked_row_is_zero_not_nan():
    q, k, v = _qkv(TK, TK)
    _, w = tc.scaled_dot_product_attention(q, k, v, mask=tc.causal_mask(TK))
    assert (w[..., ~tc.causal_mask(TK)] == 0).all()
    mask = torch.ones(TQ, TK, dtype=torch.bool)
    mask[2] = False
    out, w = tc.scaled_dot_product_attention(*_qkv(), mask=mask)
    assert not out.isnan().any() and (out[..., 2, :] == 0).all() and (w[..., 2, :] == 0).all()


def test_padding_mask_hides_padded_keys():
    lengths = torch.tensor([3, 7])
    mask = tc.padding_mask(lengths, TK)  # (B, 1, 1, TK)
    assert mask.shape == (B, 1, 1, TK) and mask[0, 0, 0].tolist() == [True] * 3 + [False] * 4
    _, w = tc.scaled_dot_product_attention(*_qkv(), mask=mask)
    assert (w[0, ..., 3:] == 0).all() and (w[1] > 0).all()


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda q, k, v: tc.scaled_dot_product_attention(q.numpy(), k, v), ["q", "torch.Tensor"]),
        (lambda q, k, v: tc.scaled_dot_product_attention(q[..., :3], k, v), ["q and k", "d_k", "(2, 3, 5, 3)"]),
        (lambda q, k, v: tc.scaled_dot_product_attention(q, k, v[..., :4, :]), ["k and v", "Tk", "(2, 3, 4, 6)"]),
        (lambda q, k, v: tc.scaled_dot_product_attention(q.long(), k, v), ["q", "floating-point", "int64"]),
        (lambda q, k, v: tc.scaled_dot_product_attention(q[0, 0, 0], k, v), ["q", "(..., T, d)", "(4,)"]),
        (lambda q, k, v: tc.scaled_dot_product_attention(q, k, v, mask=torch.ones(TQ, TK)),
         ["mask", "bool", "float32"]),
        (lambda q, k, v: tc.scaled_dot_product_attention(q, k, v, mask=torch.ones(TK, TQ, dtype=torch.bool)),
         ["mask", "(7, 5)", "(2, 3, 5, 7)"]),
        (lambda q, k, v: tc.scaled_dot_product_attention(q, k, v, position_bias=torch.ones(TK)),
         ["position_bias", "(7,)"]),
        (lambda q, k, v: tc.causal_mask(0), ["t_q", "int >= 1", "0"]),
        (lambda q, k, v: tc.causal_mask(5, 3), ["t_q must be <= t_k", "t_q=5", "t_k=3"]),
        (lambda q, k, v: tc.padding_mask(torch.tensor([1.0]), 4), ["lengths", "integer", "float32"]),
    ],
)
def test_bad_input_names_argument_expected_and_actual(call, words):
    with pytest.raises(ValueError) as info:
        call(*_qkv())
    for word in words:
        assert word in str(info.value)
