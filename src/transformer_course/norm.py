"""LayerNorm and RMSNorm (they match ``torch.nn.LayerNorm`` / ``torch.nn.RMSNorm``).

RMSNorm is written out. LayerNorm hands its formula to PyTorch's fused kernel ``F.layer_norm``: the
same formula written out (``tests/test_norm.py``, chapter 8) costs about four times as much per training
step (one kernel per operation, forward and backward).

Both normalise each position's feature vector on its own: statistics are taken over the last dimension
``C`` only, never across positions or the batch.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ._checks import check_choice, check_float, check_int, check_tensor
from .config import NORMS


class LayerNorm(nn.Module):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the last dim; ``(..., C) -> (..., C)``."""

    def __init__(self, d_model: int, *, eps: float = 1e-5, bias: bool = True) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        self.eps = check_float("eps", eps, "(0, inf)")
        self.weight = nn.Parameter(torch.ones(d_model))  # (C,) the learned gain γ
        self.bias = nn.Parameter(torch.zeros(d_model)) if bias else None  # (C,) the learned shift β

    def forward(self, x: Tensor) -> Tensor:
        check_tensor("x", x, "(..., C)", C=self.d_model)
        # mean and biased variance (divide by C) of each position's C features, then
        # (x - mean) / sqrt(var + eps) * weight + bias, in one fused kernel
        return F.layer_norm(x, (self.d_model,), self.weight, self.bias, self.eps)  # (..., C)


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x²) + eps) * weight`` over the last dim (no centring, no bias); ``(..., C) -> (..., C)``."""

    def __init__(self, d_model: int, *, eps: float = 1e-5) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        self.eps = check_float("eps", eps, "(0, inf)")
        self.weight = nn.Parameter(torch.ones(d_model))  # (C,)

    def forward(self, x: Tensor) -> Tensor:
        check_tensor("x", x, "(..., C)", C=self.d_model)
        rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)  # (..., 1)
        return x / rms * self.weight



def make_norm(kind: str, d_model: int, *, eps: float = 1e-5, bias: bool = True) -> nn.Module:
    """A ``LayerNorm`` (``kind="layernorm"``) or an ``RMSNorm`` (``kind="rmsnorm"``, which has no bias)."""
    if check_choice("norm", kind, NORMS) == "rmsnorm":
        return RMSNorm(d_model, eps=eps)
    return LayerNorm(d_model, eps=eps, bias=bias)
