"""The Transformer block: attention and a feed-forward network, each inside a residual connection.

Where the norm sits is a part, not a flag: ``PreNormResidual`` computes ``x + f(norm(x))``
(GPT-2, Llama: stable to train deep), ``PostNormResidual`` computes ``norm(x + f(x))`` (the original
Transformer, BERT). A block wraps self-attention, optionally cross-attention, and the FFN in
such residuals; ``(B, T, C) -> (B, T, C)``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from torch import Tensor, nn

from ._checks import check_choice, check_float
from .config import NORM_POSITIONS
from .ffn import make_ffn
from .kv_cache import LayerCache
from .moe import MoEFeedForward, Routing
from .multihead import MultiHeadAttention
from .norm import make_norm
from .trace import AttentionTrace, LayerTrace

if TYPE_CHECKING:
    from .config import TransformerConfig


class _Residual(nn.Module):
    """A residual connection around a sublayer, holding its norm and its dropout."""

    def __init__(self, norm: nn.Module, *, dropout: float = 0.0) -> None:
        super().__init__()
        self.norm = norm
        self.dropout = nn.Dropout(check_float("dropout", dropout, "[0, 1)"))


class PreNormResidual(_Residual):
    """``x + dropout(sublayer(norm(x)))``: the residual path stays an identity; ``(B, T, C) -> (B, T, C)``."""

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        return x + self.dropout(sublayer(self.norm(x)))


class PostNormResidual(_Residual):
    """``norm(x + dropout(sublayer(x)))``: every block's output is normalised; ``(B, T, C) -> (B, T, C)``."""

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        return self.norm(x + self.dropout(sublayer(x)))


RESIDUALS = {"pre": PreNormResidual, "post": PostNormResidual}  # one per name in config.NORM_POSITIONS


class TransformerBlock(nn.Module):
    """Self-attention, then (optionally) cross-attention to ``context``, then the FFN, each residual.

    The mask is the caller's: pass ``causal_mask(...)`` for a decoder, a padding mask or ``None``
    for an encoder. ``forward(x (B, T, C), ...) -> (B, T, C)``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        *,
        n_kv_heads: int | None = None,
        norm_position: str = "pre",
        norm: str = "layernorm",
        activation: str = "gelu",
        cross_attention: bool = False,
        dropout: float = 0.0,
        bias: bool = True,
        eps: float = 1e-5,
        ffn: nn.Module | None = None,
    ) -> None:
        super().__init__()
        Residual = RESIDUALS[check_choice("norm_position", norm_position, NORM_POSITIONS)]

        def residual() -> nn.Module:
            return Residual(make_norm(norm, d_model, eps=eps, bias=bias), dropout=dropout)

        self.self_attn = MultiHeadAttention(d_model, n_heads, n_kv_heads=n_kv_heads, bias=bias, dropout=dropout)
        self.self_attn_residual = residual()
        if cross_attention:
            self.cross_attn = MultiHeadAttention(d_model, n_heads, cross_attention=True, bias=bias, dropout=dropout)
            self.cross_attn_residual = residual()
        else:
            self.cross_attn = None
        # The FFN is a part: the one given (a dense FFN, or a mixture of experts, whose forward also returns
        # its routing, handed to the caller), or a dense one with `activation`.
        self.ffn = make_ffn(activation, d_model, d_ff, bias=bias) if ffn is None else ffn
        self.ffn_residual = residual()

    @classmethod
    def from_config(cls, config: TransformerConfig, *, cross_attention: bool = False) -> TransformerBlock:
        """A block with the sizes and choices of ``config``; its FFN is a ``MoEFeedForward`` when
        ``config.n_experts`` is set."""
        ffn = (None if config.n_experts is None else
               MoEFeedForward(config.d_model, config.d_ff, n_experts=config.n_experts, top_k=config.moe_top_k,
                              activation=config.activation, bias=config.bias))
        return cls(
            config.d_model,
            config.n_heads,
            config.d_ff,
            n_kv_heads=config.n_kv_heads,
            norm_position=config.norm_position,
            norm=config.norm,
            activation=config.activation,
            cross_attention=cross_attention,
            dropout=config.dropout,
            bias=config.bias,
            eps=config.norm_eps,
            ffn=ffn,
        )

    def forward(
        self,
        x: Tensor,
        *,
        mask: Tensor | None = None,
        cache: LayerCache | None = None,
        rope_cos_sin: tuple[Tensor, Tensor] | None = None,
        position_bias: Tensor | None = None,
        context: Tensor | None = None,
        context_mask: Tensor | None = None,
        trace: list[LayerTrace] | None = None,
        routing: list[Routing] | None = None,
    ) -> Tensor:
        """``x (B, T, C) -> (B, T, C)``; ``mask``, ``cache``, ``rope_cos_sin``, ``position_bias`` go to self-attention,
        ``context (B, S, C)`` and ``context_mask`` (broadcastable to ``(B, H, T, S)``) to cross-attention.
        ``trace``: a list to append this block's ``LayerTrace`` to (see ``TransformerStack.forward``);
        ``routing``: a list to append a mixture-of-experts FFN's ``Routing`` to (nothing for a dense FFN)."""
        attn: list[AttentionTrace] | None = None if trace is None else []
        cross: list[AttentionTrace] | None = None if trace is None else []
        x = self.self_attn_residual(
            x, lambda h: self.self_attn(h, mask=mask, cache=cache, rope_cos_sin=rope_cos_sin,
                                        position_bias=position_bias, trace=attn)[0]
        )
        if self.cross_attn is not None:
            x = self.cross_attn_residual(
                x, lambda h: self.cross_attn(h, context=context, mask=context_mask, trace=cross)[0]
            )
        elif context is not None:
            raise ValueError("context was given, but this block has no cross-attention (cross_attention=False)")
        routed: list[Routing] = []  # a mixture of experts also returns where it sent each token

        def ffn(h: Tensor) -> Tensor:  # (B, T, C) -> (B, T, C)
            if not isinstance(self.ffn, MoEFeedForward):
                return self.ffn(h)
            out, routed_here = self.ffn(h)
            routed.append(routed_here)
            return out

        x = self.ffn_residual(x, ffn)
        if routing is not None:
            routing.extend(routed)
        if trace is not None:
            trace.append(LayerTrace(self_attention=attn[0], cross_attention=cross[0] if cross else None, output=x,
                                    experts=routed[0].chosen if routed else None))
        return x
