"""``tc.tiled_attention`` (keys in blocks, online softmax) against PyTorch's fused attention and the
didactic one: causal and not, a cache offset, padding masks, a position bias, fully masked rows, block
sizes that do not divide the length, scores of ±300; and it never builds a ``(Tq, Tk)`` tensor."""
from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import transformer_course as tc


def qkv(b: int, h: int, t_q: int, t_k: int, d_k: int = 8, d_v: int = 5, scale: float = 1.0, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, h, t_q, d_k, generator=g) * scale, torch.randn(b, h, t_k, d_k, generator=g) * scale,
            torch.randn(b, h, t_k, d_v, generator=g))


CASES = {  # name: (B, H, Tq, Tk, mask maker, block sizes)
    "no mask": (2, 3, 7, 13, lambda tq, tk: None),
    "causal": (2, 3, 11, 11, lambda tq, tk: tc.causal_mask(tq)),
    "cache offset": (1, 4, 3, 17, lambda tq, tk: tc.causal_mask(tq, tk)),
    "padding": (3, 2, 9, 9, lambda tq, tk: tc.padding_mask(torch.tensor([9, 4, 1]), tk)),
    "one query": (2, 3, 1, 19, lambda tq, tk: None),
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("block_size", [1, 4, 5, 64])
def test_equals_fused_attention(name: str, block_size: int) -> None:
    b, h, t_q, t_k, make_mask = CASES[name]
    q, k, v = qkv(b, h, t_q, t_k)
    mask = make_mask(t_q, t_k)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    got = tc.tiled_attention(q, k, v, mask=mask, block_size=block_size)
    assert got.shape == expected.shape == (b, h, t_q, 5)
    assert (got - expected).abs().max() < 1e-5


def test_position_bias_large_scores_and_float64() -> None:
    q, k, v = qkv(2, 4, 6, 14, scale=6.0, seed=1)  # scores of a few hundred: exp overflows without the max
    bias = tc.alibi_slopes(4)[:, None, None] * -torch.arange(14.0).flip(0)  # (H, 1, Tk), ALiBi-like
    mask = tc.causal_mask(6, 14)
    expected, _ = tc.scaled_dot_product_attention(q.double(), k.double(), v.double(), mask=mask,
                                                  position_bias=bias.double())
    assert (q @ k.transpose(-2, -1)).abs().max() > 200
    got32 = tc.tiled_attention(q, k, v, mask=mask, position_bias=bias, block_size=3)
    got64 = tc.tiled_attention(q.double(), k.double(), v.double(), mask=mask, position_bias=bias.double(),
                               block_size=3)
    assert torch.isfinite(got32).all()
    assert (got32.double() - expected).abs().max() < 1e-4  # float32 with scores of ±300
    assert (got64 - expected).abs().max() < 1e-12


def test_fully_masked_rows_are_zero_like_the_didactic_attention() -> None:
    q, k, v = qkv(2, 1, 4, 6)
    mask = torch.ones(2, 1, 4, 6, dtype=torch.bool)
    mask[0, 0, 1] = False  # one query sees nothing
    mask[1, 0, :, 2:] = False  # keys 2.. hidden everywhere: the later blocks are all masked
    got = tc.tiled_attention(q, k, v, mask=mask, block_size=2)
    expected, _ = tc.scaled_dot_product_attention(q, k, v, mask=mask)
    assert torch.isfinite(got).all() and (got[0, 0, 1] == 0).all()
    assert (got - expected).abs().max() < 1e-6


class LargestTensor(TorchDispatchMode):
    """Records the number of elements of the largest tensor any operation allocates (views allocate nothing)."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs:  # not a view
                self.largest = max(self.largest, t.numel())
        return out


def test_memory_grows_with_the_block_not_with_the_square_of_the_length() -> None:
    B, H, T, d, block = 1, 2, 256, 8, 16
    q, k, v = qkv(B, H, T, T, d_k=d, d_v=d)
    mask = tc.causal_mask(T)
    with LargestTensor() as tiled:
        tc.tiled_attention(q, k, v, mask=mask, block_size=block)
    with LargestTensor() as didactic:
        tc.scaled_dot_product_attention(q, k, v, mask=mask)
    assert didactic.largest == B * H * T * T  # the full score matrix
    assert tiled.largest == B * H * T * block  # one block of scores: T x block, never T x T


def test_bad_arguments() -> None:
    q, k, v = qkv(1, 1, 3, 4)
    with pytest.raises(ValueError, match="block_size"):
        tc.tiled_attention(q, k, v, block_size=0)
    with pytest.raises(ValueError, match="mask"):
        tc.tiled_attention(q, k, v, mask=torch.ones(3, 5, dtype=torch.bool))
