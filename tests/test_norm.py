"""LayerNorm and RMSNorm equal the formulas written out and torch's modules; the statistics they promise."""
from __future__ import annotations

import pytest
import torch
from tiny import B, D_MODEL, T

from transformer_course.norm import LayerNorm, RMSNorm


def _randomise(*modules: torch.nn.Module) -> None:
    """Give each module the same non-trivial gain (and shift), so the comparison covers them."""
    g = torch.Generator().manual_seed(0)
    gain, shift = torch.randn(D_MODEL, generator=g), torch.randn(D_MODEL, generator=g)
    with torch.no_grad():
        for m in modules:
            m.weight.copy_(gain)
            if getattr(m, "bias", None) is not None:
                m.bias.copy_(shift)


@pytest.mark.parametrize(
    "make_ours, make_ref",
    [
        (lambda: LayerNorm(D_MODEL, eps=1e-5), lambda: torch.nn.LayerNorm(D_MODEL, eps=1e-5)),
        (lambda: LayerNorm(D_MODEL, eps=1e-5, bias=False), lambda: torch.nn.LayerNorm(D_MODEL, eps=1e-5, bias=False)),
        pytest.param(lambda: RMSNorm(D_MODEL, eps=1e-6), lambda: torch.nn.RMSNorm(D_MODEL, eps=1e-6),
                     marks=pytest.mark.skipif(not hasattr(torch.nn, "RMSNorm"), reason="torch.nn.RMSNorm: torch 2.4+")),
    ],
    ids=["layernorm", "layernorm-no-bias", "rmsnorm"],
)
def test_equals_torch(make_ours, make_ref):
    ours, ref = make_ours(), make_ref()
    _randomise(ours, ref)
    x = 3 + 2 * torch.randn(B, T, D_MODEL)
    torch.testing.assert_close(ours(x), ref(x))


def test_each_position_is_normalised_on_its_own():
    x = 3 + 2 * torch.randn(B, T, D_MODEL)
    y = LayerNorm(D_MODEL)(x)
    torch.testing.assert_close(y.mean(-1), torch.zeros(B, T), atol=1e-5, rtol=0)
    torch.testing.assert_close(y.var(-1, unbiased=False), torch.ones(B, T), atol=1e-3, rtol=0)
    z = RMSNorm(D_MODEL)(x)
    torch.testing.assert_close(z.pow(2).mean(-1), torch.ones(B, T), atol=1e-3, rtol=0)


def test_layernorm_is_the_formula():
    """The fused kernel computes (x - mean) / sqrt(biased var + eps) * weight + bias (float64)."""
    ours = LayerNorm(D_MODEL, eps=1e-3).double()
    _randomise(ours)
    x = (3 + 2 * torch.randn(B, T, D_MODEL)).double()
    centred = x - x.mean(-1, keepdim=True)
    expected = centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + 1e-3) * ours.weight + ours.bias
    torch.testing.assert_close(ours(x), expected, rtol=1e-12, atol=1e-12)
