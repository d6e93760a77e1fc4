"""Scaled dot-product attention, written to be read, and the masks it uses.

Mask convention (everywhere in the course): a boolean tensor, ``True`` = may attend,
broadcastable to ``(B, H, Tq, Tk)``.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from ._checks import check_broadcastable, check_int, check_mask, check_tensor


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    scale: float | None = None,
    position_bias: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """softmax(q kᵀ · scale + position_bias) v, returning the output and the attention weights.

    Args:
        q: queries ``(..., Tq, d_k)``.
        k: keys ``(..., Tk, d_k)``.
        v: values ``(..., Tk, d_v)``.
        mask: optional boolean, ``True`` = may attend, broadcastable to ``(..., Tq, Tk)``.
        scale: multiplier of the scores; default ``1 / sqrt(d_k)``.
        position_bias: optional float added to the scores, broadcastable to ``(..., Tq, Tk)`` (ALiBi;
            not the ``bias`` of a Linear layer).

    Returns:
        ``(out, weights)`` with shapes ``(..., Tq, d_v)`` and ``(..., Tq, Tk)``. Each row of
        ``weights`` is non-negative and sums to 1; a fully masked row is all zeros (never NaN).

    Example:
        >>> q = k = v = torch.randn(2, 5, 8)
        >>> out, w = scaled_dot_product_attention(q, k, v, mask=causal_mask(5, 5))
        >>> out.shape, w.shape
        (torch.Size([2, 5, 8]), torch.Size([2, 5, 5]))
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, x, "(..., T, d)")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share the last dim d_k, got q {tuple(q.shape)} and k {tuple(k.shape)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must share the length Tk (dim -2), got k {tuple(k.shape)} and v {tuple(v.shape)}")
    d_k = q.shape[-1]
    scale = 1.0 / math.sqrt(d_k) if scale is None else scale

    scores = (q @ k.transpose(-2, -1)) * scale  # (..., Tq, Tk)
    if position_bias is not None:
        check_tensor("position_bias", position_bias, "(..., Tq, Tk)")
        check_broadcastable("position_bias", position_bias, scores.shape)
        scores = scores + position_bias
    if mask is not None:
        check_mask("mask", mask, scores.shape)
        scores = scores.masked_fill(~mask, float("-inf"))  # masked BEFORE softmax
    weights = torch.softmax(scores, dim=-1)  # (..., Tq, Tk), each row sums to 1
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # a fully masked row (all -inf → NaN) becomes 0
    return weights @ v, weights  # (..., Tq, d_v), (..., Tq, Tk)


def causal_mask(t_q: int, t_k: int | None = None, device: torch.device | str | None = None) -> Tensor:
    """Boolean ``(Tq, Tk)`` mask where query i may attend to keys ``j <= i + (Tk - Tq)``.

    With a KV cache the ``Tq`` new queries are the *last* ``Tq`` positions of ``Tk`` keys,
    hence the offset ``Tk - Tq``; without a cache ``Tq == Tk`` and this is the lower triangle.

    Example:
        >>> causal_mask(2, 4).int()
        tensor([[1, 1, 1, 0],
                [1, 1, 1, 1]], dtype=torch.int32)
    """
    t_k = t_q if t_k is None else t_k
    check_int("t_q", t_q), check_int("t_k", t_k)
    if t_q > t_k:
        raise ValueError(f"t_q must be <= t_k (queries are the last t_q of t_k positions), got t_q={t_q}, t_k={t_k}")
    return torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril(diagonal=t_k - t_q)


def padding_mask(lengths: Tensor, t_k: int) -> Tensor:
    """Boolean ``(B, 1, 1, Tk)`` mask: key j of sequence b is real iff ``j < lengths[b]``."""
    if not isinstance(lengths, Tensor) or lengths.dim() != 1 or lengths.is_floating_point():
        got = (f"shape {tuple(lengths.shape)}, dtype {lengths.dtype}" if isinstance(lengths, Tensor)
               else type(lengths).__name__)
        raise ValueError(f"lengths must be a 1-D integer tensor (B,), got {got}")
    check_int("t_k", t_k)
    positions = torch.arange(t_k, device=lengths.device)  # (Tk,)
    return (positions[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, Tk)
