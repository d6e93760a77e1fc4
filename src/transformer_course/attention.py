"""Scaled dot-product attention, written to be read, and the masks it uses.

Mask convention (everywhere in the course): a boolean tensor, ``True`` = may attend,
broadcastable to ``(B, H, Tq, Tk)``.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor


def _require_tensor(name: str, x: object, min_dim: int) -> Tensor:
    if not isinstance(x, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() < min_dim:
        raise ValueError(f"{name} must have at least {min_dim} dims (..., T, d), got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    return x


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, scale: float | None = None
) -> tuple[Tensor, Tensor]:
    """softmax(q kᵀ · scale) v, returning the output and the attention weights.

    Args:
        q: queries ``(..., Tq, d_k)``.
        k: keys ``(..., Tk, d_k)``.
        v: values ``(..., Tk, d_v)``.
        mask: optional boolean, ``True`` = may attend, broadcastable to ``(..., Tq, Tk)``.
        scale: multiplier of the scores; default ``1 / sqrt(d_k)``.

    Returns:
        ``(out, weights)`` with shapes ``(..., Tq, d_v)`` and ``(..., Tq, Tk)``. Each row of
        ``weights`` is non-negative and sums to 1; a fully masked row is all zeros (never NaN).

    Example:
        >>> q = k = v = torch.randn(2, 5, 8)
        >>> out, w = scaled_dot_product_attention(q, k, v, mask=causal_mask(5, 5))
        >>> out.shape, w.shape
        (torch.Size([2, 5, 8]), torch.Size([2, 5, 5]))
    """
    _require_tensor("q", q, 2), _require_tensor("k", k, 2), _require_tensor("v", v, 2)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share the last dim d_k, got q {tuple(q.shape)} and k {tuple(k.shape)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must share the length Tk (dim -2), got k {tuple(k.shape)} and v {tuple(v.shape)}")
    d_k = q.shape[-1]
    scale = 1.0 / math.sqrt(d_k) if scale is None else scale

    scores = (q @ k.transpose(-2, -1)) * scale  # (..., Tq, Tk)
    if mask is not None:
        if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
            got = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
            raise ValueError(f"mask must be a bool tensor (True = may attend), got {got}")
        try:
            torch.broadcast_shapes(mask.shape, scores.shape)
        except RuntimeError:
            raise ValueError(
                f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape {tuple(scores.shape)}"
            ) from None
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
    for name, val in (("t_q", t_q), ("t_k", t_k)):
        if not isinstance(val, int) or val < 1:
            raise ValueError(f"{name} must be a positive int, got {val!r}")
    if t_q > t_k:
        raise ValueError(f"t_q must be <= t_k (queries are the last t_q of t_k positions), got t_q={t_q}, t_k={t_k}")
    return torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril(diagonal=t_k - t_q)


def padding_mask(lengths: Tensor, t_k: int) -> Tensor:
    """Boolean ``(B, 1, 1, Tk)`` mask: key j of sequence b is real iff ``j < lengths[b]``."""
    if not isinstance(lengths, Tensor) or lengths.dim() != 1 or lengths.is_floating_point():
        got = f"shape {tuple(lengths.shape)}, dtype {lengths.dtype}" if isinstance(lengths, Tensor) else type(lengths).__name__
        raise ValueError(f"lengths must be a 1-D integer tensor (B,), got {got}")
    if not isinstance(t_k, int) or t_k < 1:
        raise ValueError(f"t_k must be a positive int, got {t_k!r}")
    positions = torch.arange(t_k, device=lengths.device)  # (Tk,)
    return (positions[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, Tk)
