"""Multi-head attention: project, split into heads, attend in each head, merge, project back.

With ``H`` heads of width ``d_head = d_model / H``, each head attends in its own subspace, and
the parameters are the same as one full-width head: ``W_Q, W_K, W_V, W_O`` are ``d_model × d_model``.

Grouped-query attention (``n_kv_heads < n_heads``; multi-query when it is 1): K and V have only
``n_kv_heads`` heads, each shared by a group of ``G = n_heads / n_kv_heads`` query heads (query head
``h`` reads K/V head ``h // G``), so ``W_K, W_V`` are ``d_model × (n_kv_heads · d_head)`` and the KV cache
is ``G`` times smaller. K and V are never copied ``G`` times: the group's queries are stacked along
the query axis, ``(B, H, T, d_head) -> (B, n_kv_heads, G·T, d_head)``, and attend to their shared head.

Mask convention: boolean, ``True`` = may attend, broadcastable to ``(B, H, Tq, Tk)``.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ._checks import check_broadcastable, check_float, check_int, check_mask, check_tensor
from .attention import scaled_dot_product_attention
from .kv_cache import LayerCache
from .positional import apply_rope
from .trace import AttentionTrace


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """``(B, T, C) -> (B, H, T, d_head)``, ``d_head = C / H``: head h owns features ``h·d_head:(h+1)·d_head``."""
    check_tensor("x", x, "(B, T, C)")
    B, T, C = x.shape
    if C % check_int("n_heads", n_heads):
        raise ValueError(f"x's last dim C={C} must be divisible by n_heads={n_heads}")
    return x.view(B, T, n_heads, C // n_heads).transpose(1, 2)  # (B, H, T, d_head)


def merge_heads(x: Tensor) -> Tensor:
    """``(B, H, T, d_head) -> (B, T, H·d_head)``: concatenate the heads' outputs (inverse of ``split_heads``)."""
    check_tensor("x", x, "(B, H, T, d_head)")
    B, H, T, d_head = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d_head)  # (B, T, C)


def fold_groups(t: Tensor, n_kv_heads: int, n_heads: int, t_q: int) -> Tensor:
    """A tensor broadcastable to ``(B, H, Tq, X)`` (queries, a mask, a position bias), as
    ``(B, n_kv_heads, G·Tq, X)``: the ``G = H / n_kv_heads`` query heads that share a K/V head, one after another."""
    t = t.reshape((1,) * (4 - t.dim()) + tuple(t.shape))  # (b, h, tq, X), b, h, tq each 1 or full
    return t.expand(t.shape[0], n_heads, t_q, t.shape[-1]).reshape(t.shape[0], n_kv_heads, -1, t.shape[-1])


class MultiHeadAttention(nn.Module):
    """Self-attention (``qkv_proj``: one fused ``C -> C + 2·n_kv_heads·d_head`` Linear) or cross-attention
    (``q_proj: C -> C`` on ``x``, fused ``kv_proj`` on ``context``), then ``out_proj`` (W_O).

    ``forward(x (B, T, C), ...) -> (out (B, T, C), weights (B, H, T, Tk) or None)``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        n_kv_heads: int | None = None,
        cross_attention: bool = False,
        bias: bool = True,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if check_int("d_model", d_model) % check_int("n_heads", n_heads):
            raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
        n_kv_heads = n_heads if n_kv_heads is None else check_int("n_kv_heads", n_kv_heads)
        if n_heads % n_kv_heads:
            raise ValueError(f"n_kv_heads must divide n_heads={n_heads}, got n_kv_heads={n_kv_heads}")
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.n_kv_heads, self.kv_width = n_kv_heads, n_kv_heads * self.d_head  # K's (and V's) width
        self.cross_attention = cross_attention
        self.dropout = check_float("dropout", dropout, "[0, 1)")  # on the attention weights, in training
        if cross_attention:
            self.q_proj = nn.Linear(d_model, d_model, bias=bias)  # W_Q, applied to x
            self.kv_proj = nn.Linear(d_model, 2 * self.kv_width, bias=bias)  # [W_K; W_V], applied to context
        else:
            self.qkv_proj = nn.Linear(d_model, d_model + 2 * self.kv_width, bias=bias)  # [W_Q; W_K; W_V]
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)  # W_O

    def forward(
        self,
        x: Tensor,
        *,
        context: Tensor | None = None,
        mask: Tensor | None = None,
        cache: LayerCache | None = None,
        rope_cos_sin: tuple[Tensor, Tensor] | None = None,
        position_bias: Tensor | None = None,
        need_weights: bool = False,
        trace: list[AttentionTrace] | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``x`` to itself (self-attention) or to ``context`` (cross-attention).

        Args:
            x: ``(B, T, C)`` the queries' inputs.
            context: ``(B, S, C)`` keys' and values' inputs; required for cross-attention, else ``None``.
            mask: bool, ``True`` = may attend, broadcastable to ``(B, H, T, Tk)``; ``Tk`` is ``T``, ``S``,
                or with a cache the number of positions so far.
            cache: this layer's part of the cache (self-attention only; ``kv_cache.LayerCache``): new k, v are stored.
            rope_cos_sin: ``(cos, sin)``, each ``(T, d_head)``, for the positions of ``x``: rotates q and k
                (RoPE; the stack's ``RotaryEmbedding`` module makes them).
            position_bias: float, added to the scores, broadcastable to ``(B, H, T, Tk)`` (ALiBi).
            need_weights: also return the attention weights, computed by the didactic
                ``tc.attention.scaled_dot_product_attention`` (slower; call ``.eval()`` first).
            trace: a list to append an ``AttentionTrace`` (q, k, v, weights) to; weights as above.

        Returns:
            ``(out, weights)``: ``(B, T, C)`` and ``(B, H, T, Tk)``, or ``None`` without ``need_weights``.
        """
        check_tensor("x", x, "(B, T, C)", C=self.d_model)
        B, T, C = x.shape
        if self.cross_attention:
            check_tensor("context", context, "(B, S, C)", B=B, C=C)
            if cache is not None or rope_cos_sin is not None:
                raise ValueError("cache and rope_cos_sin apply to self-attention only; got them for cross-attention")
            q = self.q_proj(x)  # (B, T, C)
            k, v = self.kv_proj(context).split(self.kv_width, dim=-1)  # (B, S, H_kv·d_head) each
        else:
            if context is not None:
                raise ValueError("context is for cross-attention: build MultiHeadAttention(..., cross_attention=True)")
            # (B, T, C), then K and V (B, T, H_kv·d_head) each
            q, k, v = self.qkv_proj(x).split([C, self.kv_width, self.kv_width], dim=-1)
        q = split_heads(q, self.n_heads)  # (B, H, T, d_head)
        k = split_heads(k, self.n_kv_heads)  # (B, H_kv, S, d_head), S = T for self-attention
        v = split_heads(v, self.n_kv_heads)  # (B, H_kv, S, d_head)
        if rope_cos_sin is not None:
            q, k = apply_rope(q, *rope_cos_sin), apply_rope(k, *rope_cos_sin)  # rotate by position, before caching
        if cache is not None:
            k, v = cache.update(k, v)  # (B, H_kv, Tk, d_head): all keys and values so far

        scores_shape = (B, self.n_heads, T, k.shape[2])  # (B, H, T, Tk)
        if mask is not None:
            check_mask("mask", mask, scores_shape)
        if position_bias is not None:
            check_tensor("position_bias", position_bias, "(..., T, Tk)")
            check_broadcastable("position_bias", position_bias, scores_shape)
        with_weights = need_weights or trace is not None
        grouped = self.n_kv_heads < self.n_heads
        if grouped:  # each K/V head serves its group's G query heads, stacked along the query axis
            q_heads = q
            q, mask, position_bias = (None if t is None else fold_groups(t, self.n_kv_heads, self.n_heads, T)
                                      for t in (q, mask, position_bias))  # (B, H_kv, G·T, ...)
        if with_weights:
            out, weights = self._attend_with_weights(q, k, v, mask, position_bias)  # (B, H_kv, G·T, d_head), (…, Tk)
        else:
            out, weights = self._attend_fast(q, k, v, mask, position_bias), None
        if grouped:  # back to one row per query head
            q, out = q_heads, out.reshape(B, self.n_heads, T, self.d_head)  # (B, H, T, d_head)
            weights = None if weights is None else weights.reshape(scores_shape)  # (B, H, T, Tk)
        if trace is not None:
            trace.append(AttentionTrace(queries=q, keys=k, values=v, weights=weights))
        return self.out_proj(merge_heads(out)), weights if need_weights else None  # (B, T, C)

    def _attend_fast(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, position_bias: Tensor | None
    ) -> Tensor:
        """PyTorch's fused kernel; it takes a bool mask (True = may attend) or a float one added to the scores."""
        if position_bias is not None:
            bias = position_bias.to(q.dtype)
            mask = bias if mask is None else torch.where(mask, bias, float("-inf"))  # (…, T, Tk) additive
        dropout_p = self.dropout if self.training else 0.0
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)  # (B, H, T, d_head)

    def _attend_with_weights(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, position_bias: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        """The course's readable attention, which returns the weights ``(B, H, T, Tk)`` too."""
        if self.training and self.dropout > 0:
            raise ValueError("need_weights=True is for inspection: call .eval() first (dropout is on in training)")
        # (B, H, T, d_head), (B, H, T, Tk)
        return scaled_dot_product_attention(q, k, v, mask=mask, position_bias=position_bias)
