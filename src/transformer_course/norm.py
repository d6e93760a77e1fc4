"""LayerNorm and RMSNorm from scratch (they match ``torch.nn.LayerNorm`` / ``torch.nn.RMSNorm``).

Both normalise each position's feature vector on its own: statistics are taken over the last
dimension ``C`` only, never across positions or the batch.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from ._checks import check_choice, check_float, check_int, check_tensor


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
        centred = x - x.mean(dim=-1, keepdim=True)  # (..., C) zero mean
        var = centred.pow(2).mean(dim=-1, keepdim=True)  # (..., 1) biased (divide by C), as in the paper
        x_hat = centred * torch.rsqrt(var + self.eps)  # (..., C) unit variance; rsqrt = 1/sqrt
        return x_hat * self.weight if self.bias is None else x_hat * self.weight + self.bias


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


NORMS = ("layernorm", "rmsnorm")


def make_norm(kind: str, d_model: int, *, eps: float = 1e-5, bias: bool = True) -> nn.Module:
    """A ``LayerNorm`` (``kind="layernorm"``) or an ``RMSNorm`` (``kind="rmsnorm"``, which has no bias)."""
    if check_choice("norm", kind, NORMS) == "rmsnorm":
        return RMSNorm(d_model, eps=eps)
    return LayerNorm(d_model, eps=eps, bias=bias)
