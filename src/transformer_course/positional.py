"""Where a token is: four ways to tell the model.

* added to the input: ``SinusoidalPositions`` (fixed) and ``LearnedPositions`` (trained), ``(T,) -> (T, C)``;
* rotating q and k: RoPE, ``apply_rope(x, cos, sin)`` with ``RotaryEmbedding`` making ``cos, sin``;
* added to the attention scores: ALiBi, ``ALiBi(q_positions, k_positions) -> (H, Tq, Tk)``.

Positions are integer tensors ``(T,)``; with a KV cache the new tokens' positions start at ``cache.pos``.
A batch of left-padded prompts has one row of positions per prompt, ``(B, T)``: every module takes
``(..., T)`` and returns one more axis (``(B, T, C)``, ``(B, T, d_head)``, ``(B, H, Tq, Tk)``).
Fixed tables (frequencies, slopes) are non-persistent buffers: they move with ``.to(device)`` and
are not saved in a ``state_dict``.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ._checks import check_float, check_int, check_tensor
from .config import RopeScaling


def inverse_frequencies(dim: int, *, base: float = 10000.0) -> Tensor:
    """The ``dim / 2`` angular frequencies ``base^(-2i/dim)``, fast to slow; ``(dim/2,)`` float32.

    Example:
        >>> inverse_frequencies(4, base=100.0)
        tensor([1.0000, 0.1000])
    """
    if check_int("dim", dim) % 2:
        raise ValueError(f"dim must be even (sin/cos pairs), got {dim}")
    check_float("base", base, "(1, inf)")
    return 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))  # (dim/2,)


def scaled_inverse_frequencies(dim: int, *, base: float, scaling: RopeScaling | None) -> tuple[Tensor, float]:
    """RoPE's ``dim / 2`` frequencies under ``scaling``, and the factor ``cos`` and ``sin`` are multiplied by.

    * ``None``: ``base^(-2i/dim)``, factor 1;
    * ``"linear"`` (position interpolation): every frequency ``/ factor``, as if position ``p`` were ``p / factor``;
    * ``"ntk"``: base ``× factor^(dim/(dim-2))``: the slowest frequency becomes ``/ factor``, the fastest stays;
    * ``"yarn"``: the pair indices that turn ``beta_fast`` and ``beta_slow`` times within ``original_max_len``,
      rounded outward (floor, ceil), bound a ramp linear in the pair index: pairs before it keep their
      frequency, pairs after it are divided by ``factor`` (the reference implementation's and transformers'
      convention; the paper's ramp is linear in turns, which differs where a head has few pairs);
      cos and sin are multiplied by ``0.1 ln(factor) + 1``, which sharpens the softmax (Peng et al., 2023).
    """
    inv_freq = inverse_frequencies(dim, base=base)  # (dim/2,) fast to slow
    if scaling is None:
        return inv_freq, 1.0
    s = scaling.factor
    if scaling.kind == "linear":
        return inv_freq / s, 1.0
    if scaling.kind == "ntk":
        return inverse_frequencies(dim, base=base * s ** (dim / (dim - 2))), 1.0

    def dim_turning(turns: float) -> float:  # the (fractional) dimension index that turns `turns` times
        return dim * math.log(scaling.original_max_len / (turns * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(dim_turning(scaling.beta_fast)), 0)
    high = min(math.ceil(dim_turning(scaling.beta_slow)), dim - 1)
    ramp = ((torch.arange(dim // 2).float() - low) / max(high - low, 1e-3)).clamp(0, 1)  # (dim/2,) 0 keep, 1 divide
    return inv_freq / s * ramp + inv_freq * (1 - ramp), (0.1 * math.log(s) + 1.0 if s > 1 else 1.0)


def _angles(positions: Tensor, inv_freq: Tensor) -> Tensor:
    """``positions ⊗ inv_freq`` in float32: ``(..., T), (dim/2,) -> (..., T, dim/2)``."""
    check_tensor("positions", positions, "(..., T)", dtype="int")
    return positions.float()[..., None] * inv_freq.float()  # (..., T, dim/2)


def sinusoidal_table(max_len: int, d_model: int, *, base: float = 10000.0) -> Tensor:
    """The fixed encodings of positions ``0 .. max_len-1``: ``PE[p, 2i] = sin(p ω_i)``, ``PE[p, 2i+1] = cos(p ω_i)``.

    Returns ``(max_len, d_model)`` (Vaswani et al. 2017, section 3.5).

    Example:
        >>> sinusoidal_table(3, 4)[1]  # position 1: sin(1), cos(1), sin(0.01), cos(0.01)
        tensor([0.8415, 0.5403, 0.0100, 0.9999])
    """
    return SinusoidalPositions(d_model, base=base)(torch.arange(check_int("max_len", max_len)))  # (max_len, d_model)


class SinusoidalPositions(nn.Module):
    """Fixed sinusoidal encodings, computed for any position: ``positions (T,) -> (T, d_model)``."""

    def __init__(self, d_model: int, *, base: float = 10000.0) -> None:
        super().__init__()
        self.register_buffer("inv_freq", inverse_frequencies(d_model, base=base), persistent=False)  # (C/2,)

    def forward(self, positions: Tensor) -> Tensor:
        angles = _angles(positions, self.inv_freq)  # (T, C/2)
        table = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # (T, C/2, 2) -> (T, C): sin, cos, ...
        return table.to(self.inv_freq.dtype)


class LearnedPositions(nn.Module):
    """One trained vector per position ``0 .. max_len-1`` (GPT-2): ``positions (T,) -> (T, d_model)``.

    There is no vector for a position ``>= max_len``: asking for one raises ``ValueError``.
    """

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.max_len = check_int("max_len", max_len)
        self.embedding = nn.Embedding(max_len, check_int("d_model", d_model))

    def forward(self, positions: Tensor, *, end: int | None = None) -> Tensor:
        """``end``: a caller that knows every position is below ``end`` (the model does) says so, and the
        check needs no look at the tensor: no wait for the GPU at every decoding step."""
        check_tensor("positions", positions, "(..., T)", dtype="int")
        if end is None and positions.numel():
            end = int(positions.max()) + 1  # reads the tensor: a host synchronisation on a GPU
        if end is not None and end > self.max_len:
            raise ValueError(
                f"positions go up to {end - 1}, but learned positions exist only for "
                f"0..{self.max_len - 1} (max_len={self.max_len}): the sequence is longer than the model's context"
            )
        return self.embedding(positions)  # (T, C)


def rotate_half(x: Tensor) -> Tensor:
    """``[x1, x2] -> [-x2, x1]`` on the last dim (Hugging Face's half-split RoPE layout); ``(..., d) -> (..., d)``."""
    x1, x2 = x.chunk(2, dim=-1)  # (..., d/2) each
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate each pair ``(x[i], x[i + d/2])`` of every position by its angle: ``x cos + rotate_half(x) sin``.

    Args:
        x: queries or keys ``(..., T, d_head)``, e.g. ``(B, H, T, d_head)``.
        cos, sin: ``(T, d_head)`` from ``RotaryEmbedding`` for the same positions as ``x``, or ``(B, T, d_head)``
            for one row of positions per sequence (padded batches; ``x`` is then ``(B, H, T, d_head)``).

    Returns:
        ``(..., T, d_head)``, each vector rotated, so its norm is unchanged.
    """
    check_tensor("x", x, "(..., T, d_head)")
    T, d_head = x.shape[-2:]
    check_tensor("cos", cos, "(..., T, d_head)", T=T, d_head=d_head)
    check_tensor("sin", sin, "(..., T, d_head)", T=T, d_head=d_head)
    if cos.dim() == 3:  # (B, T, d_head): per-sequence positions, the same for every head
        cos, sin = cos[:, None], sin[:, None]  # (B, 1, T, d_head)
    return x * cos.to(x.dtype) + rotate_half(x) * sin.to(x.dtype)


class RotaryEmbedding(nn.Module):
    """RoPE's ``cos, sin`` tables for given positions: ``positions (T,) -> ((T, d_head), (T, d_head))``.

    Frequency ``ω_i`` serves dims ``i`` and ``i + d_head/2`` (the half-split layout of Llama in
    Hugging Face), so ``q·k`` after rotation depends only on the offset between the two positions.
    """

    def __init__(self, d_head: int, *, base: float = 10000.0, scaling: RopeScaling | None = None) -> None:
        super().__init__()
        inv_freq, self.attention_factor = scaled_inverse_frequencies(d_head, base=base, scaling=scaling)
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # (d_head/2,)

    def forward(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        angles = _angles(positions, self.inv_freq)  # (T, d_head/2)
        angles = torch.cat((angles, angles), dim=-1)  # (T, d_head): dims i and i + d_head/2 share ω_i
        cos, sin = angles.cos(), angles.sin()
        if self.attention_factor != 1.0:  # YaRN: scores scaled by its square
            cos, sin = cos * self.attention_factor, sin * self.attention_factor
        return cos.to(self.inv_freq.dtype), sin.to(self.inv_freq.dtype)


def alibi_slopes(n_heads: int) -> Tensor:
    """ALiBi's per-head slopes ``(H,)``, as in Press et al. (2022) and their reference ``get_slopes``.

    For ``n`` a power of two: the geometric sequence ``2^(-8/n), 2^(-16/n), ..., 2^(-8)``. Otherwise take
    that sequence for the largest power of two ``p < n``, then every other slope of the ``2p`` sequence.

    Example:
        >>> alibi_slopes(4)
        tensor([0.2500, 0.0625, 0.0156, 0.0039])
    """

    def geometric(n: int) -> list[float]:
        return [2 ** (-8 * (i + 1) / n) for i in range(n)]

    p = 2 ** math.floor(math.log2(check_int("n_heads", n_heads)))  # largest power of two <= n_heads
    return torch.tensor(geometric(p) + geometric(2 * p)[0::2][: n_heads - p])  # (H,)


class ALiBi(nn.Module):
    """The additive score bias ``-slope_h · |i - j|`` for query position ``i`` and key position ``j``.

    ``forward(q_positions (Tq,), k_positions (Tk,)) -> (H, Tq, Tk)`` (``(B, H, Tq, Tk)`` from ``(B, Tq)``,
    ``(B, Tk)``); add it to the scores before the
    softmax (``MultiHeadAttention(..., position_bias=...)``). Under a causal mask this is the paper's
    ``-slope · (i - j)``; without one (an encoder) it penalises distance in both directions.
    """

    def __init__(self, n_heads: int) -> None:
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(n_heads), persistent=False)  # (H,)

    def forward(self, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        check_tensor("q_positions", q_positions, "(..., Tq)", dtype="int")
        check_tensor("k_positions", k_positions, "(..., Tk)", dtype="int")
        distance = (q_positions[..., :, None] - k_positions[..., None, :]).abs()  # (..., Tq, Tk)
        return -self.slopes[:, None, None] * distance.unsqueeze(-3)  # (H, Tq, Tk), or (B, H, Tq, Tk)
