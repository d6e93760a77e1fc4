"""Transformer block: pre-LN keeps an identity path, post-LN normalises, causal and cross-attention."""
from __future__ import annotations

import pytest
import torch
from tiny import B, D_FF, D_MODEL, N_HEADS, T

from transformer_course.attention import causal_mask
from transformer_course.block import PostNormResidual, PreNormResidual, TransformerBlock


def _block(**kwargs: object) -> TransformerBlock:
    return TransformerBlock(D_MODEL, N_HEADS, D_FF, **kwargs).eval()


def test_pre_ln_block_is_the_identity_when_its_sublayers_output_zero():
    block = _block(norm_position="pre")
    with torch.no_grad():
        for linear in (block.self_attn.out_proj, block.ffn.down):
            linear.weight.zero_()
            linear.bias.zero_()
    x = 5 * torch.randn(B, T, D_MODEL)
    torch.testing.assert_close(block(x), x)  # the residual path carries x through unchanged


def test_post_ln_block_output_is_normalised_at_every_position():
    y = _block(norm_position="post", norm="layernorm")(5 * torch.randn(B, T, D_MODEL))
    torch.testing.assert_close(y.mean(-1), torch.zeros(B, T), atol=1e-5, rtol=0)


@pytest.mark.parametrize("norm_position, wrapper", [("pre", PreNormResidual), ("post", PostNormResidual)])
def test_the_norm_position_is_a_part(norm_position, wrapper):
    block = _block(norm_position=norm_position, cross_attention=True)
    residuals = [block.self_attn_residual, block.cross_attn_residual, block.ffn_residual]
    assert all(type(r) is wrapper for r in residuals)


def test_causal_block_ignores_later_positions():
    block = _block(activation="swiglu", norm="rmsnorm")
    x = torch.randn(B, T, D_MODEL)
    changed = x.clone()
    changed[:, 4:] = torch.randn(B, T - 4, D_MODEL)
    mask = causal_mask(T, T)
    torch.testing.assert_close(block(x, mask=mask)[:, :4], block(changed, mask=mask)[:, :4])
    assert not torch.allclose(block(x)[:, :4], block(changed)[:, :4])  # without the mask they matter


def test_cross_attention_block_reads_the_context():
    block = _block(cross_attention=True)
    x, context = torch.randn(B, T, D_MODEL), torch.randn(B, 5, D_MODEL)
    out = block(x, context=context)
    assert out.shape == (B, T, D_MODEL)
    assert not torch.allclose(out, block(x, context=torch.randn(B, 5, D_MODEL)))
