"""Position-wise feed-forward networks: ``W_down · act(W_up · x)`` and SwiGLU.

"Position-wise" means the same two-layer MLP is applied to every position on its own:
``(B, T, C) -> (B, T, C)`` with no mixing along ``T`` (mixing across positions is attention's job).
"""
from __future__ import annotations

from functools import partial

from torch import Tensor, nn
from torch.nn import functional as F

from ._checks import check_choice, check_int, check_tensor
from .config import ACTIVATIONS, FFN_ACTIVATIONS

ACTIVATION_MODULES = {  # one per name in config.ACTIVATIONS
    "relu": nn.ReLU,
    "gelu": nn.GELU,  # exact, with erf (the GELU paper; Hugging Face BERT)
    "gelu_tanh": partial(nn.GELU, approximate="tanh"),  # the tanh approximation (GPT-2)
}


class FeedForward(nn.Module):
    """``down(act(up(x)))`` with ``up: C -> d_ff`` and ``down: d_ff -> C``; ``(..., C) -> (..., C)``."""

    def __init__(self, d_model: int, d_ff: int, *, activation: str = "gelu", bias: bool = True) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        self.up = nn.Linear(d_model, check_int("d_ff", d_ff), bias=bias)
        self.act = ACTIVATION_MODULES[check_choice("activation", activation, ACTIVATIONS)]()
        self.down = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        check_tensor("x", x, "(..., C)", C=self.d_model)
        return self.down(self.act(self.up(x)))  # (..., C) -> (..., d_ff) -> (..., C)


class SwiGLU(nn.Module):
    """``down(silu(gate(x)) * up(x))`` (Shazeer 2020, used by Llama); ``(..., C) -> (..., C)``.

    The gate decides, per hidden unit, how much of ``up(x)`` passes: three matrices instead of two.
    """

    def __init__(self, d_model: int, d_ff: int, *, bias: bool = False) -> None:
        super().__init__()
        self.d_model = check_int("d_model", d_model)
        self.gate = nn.Linear(d_model, check_int("d_ff", d_ff), bias=bias)
        self.up = nn.Linear(d_model, d_ff, bias=bias)
        self.down = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        check_tensor("x", x, "(..., C)", C=self.d_model)
        return self.down(F.silu(self.gate(x)) * self.up(x))  # (..., d_ff) gated, then (..., C)



def make_ffn(activation: str, d_model: int, d_ff: int, *, bias: bool = True) -> nn.Module:
    """A ``SwiGLU`` for ``activation="swiglu"``, else a ``FeedForward`` with that activation."""
    if check_choice("activation", activation, FFN_ACTIVATIONS) == "swiglu":
        return SwiGLU(d_model, d_ff, bias=bias)
    return FeedForward(d_model, d_ff, activation=activation, bias=bias)
