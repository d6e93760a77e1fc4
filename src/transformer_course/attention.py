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


def tiled_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, scale: float | None = None,
                    position_bias: Tensor | None = None, *, block_size: int = 128) -> Tensor:
    """``scaled_dot_product_attention``'s output without ever holding the ``(Tq, Tk)`` score matrix: the keys
    are read ``block_size`` at a time and the softmax is built online (the algorithm behind FlashAttention).

    For each query row it keeps a running maximum ``m``, a running denominator ``denom = Σ exp(s - m)`` and a
    running numerator ``acc = Σ exp(s - m) v``. A new block with a larger maximum ``m'`` rescales what was
    accumulated by ``exp(m - m')``, so after the last block ``acc / denom`` is exactly ``softmax(s) v``. Memory
    for scores is ``(..., Tq, block_size)``: it grows like ``T``, not ``T²``. Same arguments as
    ``scaled_dot_product_attention`` (a fully masked row gives zeros); returns ``(..., Tq, d_v)``.
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, x, "(..., T, d)")
    check_int("block_size", block_size)
    t_q, t_k = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores_shape = torch.broadcast_shapes(q.shape[:-1] + (t_k,), k.shape[:-2] + (t_q, t_k))  # (..., Tq, Tk)
    if mask is not None:
        check_mask("mask", mask, scores_shape)
        mask = mask.expand(*mask.shape[:-1], t_k)  # a view: a broadcast key dim can be sliced too
    if position_bias is not None:
        check_broadcastable("position_bias", position_bias, scores_shape)
        position_bias = position_bias.expand(*position_bias.shape[:-1], t_k)

    acc = q.new_zeros(scores_shape[:-1] + (v.shape[-1],))  # (..., Tq, d_v) running Σ exp(s - m) v
    m = q.new_full(scores_shape[:-1] + (1,), float("-inf"))  # (..., Tq, 1) running max of the scores
    denom = q.new_zeros(scores_shape[:-1] + (1,))  # (..., Tq, 1) running Σ exp(s - m)
    for start in range(0, t_k, block_size):
        keys = slice(start, start + block_size)
        s = (q @ k[..., keys, :].transpose(-2, -1)) * scale  # (..., Tq, b): one block of scores
        if position_bias is not None:
            s = s + position_bias[..., keys]
        if mask is not None:
            s = s.masked_fill(~mask[..., keys], float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (..., Tq, 1)
        m_safe = m_new.masked_fill(m_new == float("-inf"), 0.0)  # a row masked so far: exp(-inf - 0) = 0
        p = torch.exp(s - m_safe)  # (..., Tq, b)
        rescale = torch.exp(m - m_safe)  # (..., Tq, 1): what was summed under the old max, under the new one
        denom = denom * rescale + p.sum(dim=-1, keepdim=True)
        acc = acc * rescale + p @ v[..., keys, :]  # (..., Tq, d_v)
        m = m_new
    return torch.where(denom > 0, acc / denom.clamp_min(torch.finfo(denom.dtype).tiny), 0.0)  # (..., Tq, d_v)


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


def sliding_window_mask(t_q: int, t_k: int | None, window: int, device: torch.device | str | None = None) -> Tensor:
    """``causal_mask`` limited to the last ``window`` positions: query i (at key index ``i + Tk - Tq``) may
    attend keys ``j`` with ``i + Tk - Tq - window < j <= i + Tk - Tq``; ``(Tq, Tk)`` bool.

    Example:
        >>> sliding_window_mask(4, 4, window=2).int()
        tensor([[1, 0, 0, 0],
                [1, 1, 0, 0],
                [0, 1, 1, 0],
                [0, 0, 1, 1]], dtype=torch.int32)
    """
    t_k = t_q if t_k is None else t_k
    causal = causal_mask(t_q, t_k, device=device)  # (Tq, Tk)
    recent = torch.ones_like(causal).triu(diagonal=t_k - t_q - check_int("window", window) + 1)  # j > i' - window
    return causal & recent


def padding_mask(lengths: Tensor, t_k: int) -> Tensor:
    """Boolean ``(B, 1, 1, Tk)`` mask: key j of sequence b is real iff ``j < lengths[b]``."""
    if not isinstance(lengths, Tensor) or lengths.dim() != 1 or lengths.is_floating_point():
        got = (f"shape {tuple(lengths.shape)}, dtype {lengths.dtype}" if isinstance(lengths, Tensor)
               else type(lengths).__name__)
        raise ValueError(f"lengths must be a 1-D integer tensor (B,), got {got}")
    check_int("t_k", t_k)
    positions = torch.arange(t_k, device=lengths.device)  # (Tk,)
    return (positions[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, Tk)
