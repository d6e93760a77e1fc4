"""Checkers for chapter 6 (位置编码).

Each exercise lists the typical mistakes it recognises; ``tests/test_exercises.py`` proves that
every one of them is rejected with its own hint.
"""
from __future__ import annotations

import torch
from torch import Tensor

from ..positional import ALiBi, RotaryEmbedding, SinusoidalPositions, apply_rope, inverse_frequencies, rotate_half
from ._core import Exercise, Mistake


def _positions(start: int, length: int) -> Tensor:
    """``length`` consecutive positions from ``start`` (as after a KV cache), int64 ``(T,)``."""
    return torch.arange(start, start + length)


def _freq(d: int, exponent_step: int = 2, sign: float = -1.0) -> Tensor:
    """``10000^(sign · exponent_step · i / d)`` for the ``d/2`` pairs; step 2 and sign -1 are right."""
    i = torch.arange(d // 2).float()
    return 10000.0 ** (sign * exponent_step * i / d)  # (d/2,)


def _interleave(even: Tensor, odd: Tensor) -> Tensor:
    """``(T, d/2), (T, d/2) -> (T, d)``: even, odd, even, odd, ..."""
    return torch.stack((even, odd), dim=-1).flatten(-2)


# ---- 练习 1: sinusoidal encodings -------------------------------------------------------------

def _sinusoidal_cases() -> list[tuple[Tensor, int]]:
    # (start, T, d_model): T and d_model differ in each case; positions do not start at 0
    return [(_positions(s, t), d) for s, t, d in [(3, 5, 8), (0, 7, 12), (20, 4, 6)]]


def _sinusoidal_reference(positions: Tensor, d_model: int) -> Tensor:
    return SinusoidalPositions(d_model)(positions)  # (T, d_model)


def _sinusoidal(positions: Tensor, d: int, freq: Tensor, swap: bool = False, halves: bool = False) -> Tensor:
    angles = positions.float()[:, None] * freq[None, :]  # (T, d/2)
    s, c = angles.sin(), angles.cos()
    if swap:
        s, c = c, s
    return torch.cat((s, c), dim=-1) if halves else _interleave(s, c)


SINUSOIDAL = Exercise(
    name="sinusoidal_encoding",
    reference=_sinusoidal_reference,
    make_cases=_sinusoidal_cases,
    atol=1e-4,
    mistakes=(
        Mistake("sin 与 cos 放反了：偶数维（0, 2, 4, …）是 sin，奇数维是 cos。",
                lambda p, d: _sinusoidal(p, d, _freq(d), swap=True)),
        Mistake("排列方式不对：sin 和 cos 应交错排列（sin, cos, sin, cos, …），你把所有 sin 放在前半、所有 cos 放在后半。",
                lambda p, d: _sinusoidal(p, d, _freq(d), halves=True)),
        Mistake("频率的指数不对：第 i 对（维度 2i 和 2i+1）的频率是 1/10000^(2i/d)，你用的是 1/10000^(i/d)。",
                lambda p, d: _sinusoidal(p, d, _freq(d, exponent_step=1))),
        Mistake("频率写反了：应除以 10000^(2i/d)（越往后的维度转得越慢），你乘上了它。",
                lambda p, d: _sinusoidal(p, d, _freq(d, sign=1.0))),
        Mistake("用了 0..T-1 而不是传入的 positions：位置不一定从 0 开始（例如有 KV cache 时从 cache.pos 开始）。",
                lambda p, d: _sinusoidal(torch.arange(len(p)), d, _freq(d))),
    ),
)
check_sinusoidal_encoding = SINUSOIDAL.check


# ---- 练习 2: a fixed offset is a linear map ------------------------------------------------------

def _shift_cases() -> list[tuple[Tensor, int]]:
    g = torch.Generator().manual_seed(62)
    cases = []
    for t, d, k in [(4, 8, 3), (6, 10, 5), (3, 16, 11)]:  # (T, d_model, k)
        positions = torch.randperm(40, generator=g)[:t]  # unknown to the learner, not sorted
        cases.append((SinusoidalPositions(d)(positions), k))
    return cases


def _shift(pe: Tensor, k: int, freq: Tensor) -> Tensor:
    """Rotate every (sin, cos) pair of ``pe (T, d)`` by the angle ``k · freq``."""
    s, c = pe[:, 0::2], pe[:, 1::2]  # (T, d/2): sin(p ω), cos(p ω)
    ck, sk = torch.cos(k * freq), torch.sin(k * freq)  # (d/2,)
    return _interleave(s * ck + c * sk, c * ck - s * sk)  # sin((p+k)ω), cos((p+k)ω)


def _shift_reference(pe: Tensor, k: int) -> Tensor:
    return _shift(pe, k, inverse_frequencies(pe.shape[-1]))


SHIFT = Exercise(
    name="shift_encoding",
    reference=_shift_reference,
    make_cases=_shift_cases,
    atol=1e-4,
    mistakes=(
        Mistake("转反了方向：你得到的是位置 p − k 的编码。sin((p+k)ω) = sin(pω)cos(kω) + cos(pω)sin(kω)，"
                "cos((p+k)ω) = cos(pω)cos(kω) − sin(pω)sin(kω)。",
                lambda pe, k: _shift(pe, -k, inverse_frequencies(pe.shape[-1]))),
        Mistake("位置编码不能直接相加：PE(p) + PE(k) ≠ PE(p + k)。偏移 k 对应的是每一对 (sin, cos) 的一次旋转，"
                "即乘一个只依赖 k 的矩阵。",
                lambda pe, k: pe + SinusoidalPositions(pe.shape[-1])(torch.tensor([k]))),
        Mistake("每一对的旋转角应是 k·ω_i，各对的频率 ω_i = 1/10000^(2i/d) 不同；你让所有对都转了同一个角度 k。",
                lambda pe, k: _shift(pe, k, torch.ones(pe.shape[-1] // 2))),
        Mistake("频率的指数不对：第 i 对的频率是 1/10000^(2i/d)，你用的是 1/10000^(i/d)。",
                lambda pe, k: _shift(pe, k, _freq(pe.shape[-1], exponent_step=1))),
    ),
)
check_shift_encoding = SHIFT.check


# ---- 练习 3: RoPE --------------------------------------------------------------------------------

def _rope_cases() -> list[tuple[Tensor, Tensor]]:
    g = torch.Generator().manual_seed(63)
    # (B, T, d, start): B, T, d differ in each case; d even; positions start after a "cache"
    dims = [(2, 5, 8, 3), (3, 4, 6, 0), (1, 6, 12, 9)]
    return [(torch.randn(b, t, d, generator=g), _positions(s, t)) for b, t, d, s in dims]


def _rope_reference(x: Tensor, positions: Tensor) -> Tensor:
    cos, sin = RotaryEmbedding(x.shape[-1])(positions)  # (T, d) each
    return apply_rope(x, cos, sin)  # (B, T, d)


def _angles(positions: Tensor, d: int) -> Tensor:
    return positions.float()[:, None] * _freq(d)[None, :]  # (T, d/2)


def _rope_half(x: Tensor, angles: Tensor, sign: float = 1.0) -> Tensor:
    """Half-split pairs (i, i + d/2) rotated by ``sign · angles`` laid out as given ``(T, d)``."""
    return x * angles.cos() + sign * rotate_half(x) * angles.sin()


def _rope_interleaved(x: Tensor, positions: Tensor) -> Tensor:
    """Adjacent pairs (2i, 2i+1) rotated (RoFormer's layout)."""
    a = _angles(positions, x.shape[-1])  # (T, d/2)
    x1, x2 = x[..., 0::2], x[..., 1::2]  # (B, T, d/2) each
    return _interleave(x1 * a.cos() - x2 * a.sin(), x1 * a.sin() + x2 * a.cos())


ROPE = Exercise(
    name="rope",
    reference=_rope_reference,
    make_cases=_rope_cases,
    atol=1e-4,
    mistakes=(
        Mistake("旋转方向反了：x·cos + rotate_half(x)·sin，其中 rotate_half([x1, x2]) = [−x2, x1]；"
                "你转的是 −θ（sin 前的符号或 rotate_half 的符号错了）。",
                lambda x, p: _rope_half(x, _angles(p, x.shape[-1]).repeat(1, 2), sign=-1.0)),
        Mistake("配对方式与题目约定不同：本题（与 Llama 的 Hugging Face 实现一样）把维度 i 与 i + d/2 配成一对，"
                "你配的是相邻的 2i 与 2i+1（RoFormer 原文的写法）。",
                lambda x, p: _rope_interleaved(x, p)),
        Mistake("角度的排布与配对方式不一致：维度 i 和 i + d/2 共用 θ_i，cos/sin 表应是 cat([θ, θ])，"
                "你用了 repeat_interleave（θ0, θ0, θ1, θ1, …）。",
                lambda x, p: _rope_half(x, _angles(p, x.shape[-1]).repeat_interleave(2, dim=-1))),
        Mistake("用了 0..T-1 而不是传入的 positions：有 KV cache 时，新 token 的位置从 cache.pos 开始。",
                lambda x, p: _rope_half(x, _angles(torch.arange(len(p)), x.shape[-1]).repeat(1, 2))),
        Mistake("频率的指数不对：第 i 对的频率是 1/10000^(2i/d)，你用的是 1/10000^(i/d)。",
                lambda x, p: _rope_half(x, (p.float()[:, None] * _freq(x.shape[-1], 1)[None, :]).repeat(1, 2))),
    ),
)
check_rope = ROPE.check


# ---- 练习 4: ALiBi ---------------------------------------------------------------------------------

def _alibi_cases() -> list[tuple[Tensor, int]]:
    # (start, T, H): T and H differ in each case; H a power of two
    return [(_positions(s, t), h) for s, t, h in [(0, 5, 4), (7, 3, 2), (2, 6, 8)]]


def _alibi_reference(positions: Tensor, n_heads: int) -> Tensor:
    return ALiBi(n_heads)(positions, positions)  # (H, T, T)


def _alibi(positions: Tensor, slopes: Tensor, signed: bool = False, sign: float = -1.0) -> Tensor:
    distance = positions[:, None] - positions[None, :]  # (T, T): i - j
    distance = distance if signed else distance.abs()
    return sign * slopes[:, None, None] * distance  # (H, T, T)


def _slopes(n: int, first: int = 1) -> Tensor:
    return torch.tensor([2.0 ** (-8 * (h + first) / n) for h in range(n)])  # (H,)


ALIBI = Exercise(
    name="alibi_bias",
    reference=_alibi_reference,
    make_cases=_alibi_cases,
    mistakes=(
        Mistake("符号反了：ALiBi 是惩罚，距离越远分数减得越多：bias = −m·|i − j|。",
                lambda p, h: _alibi(p, _slopes(h), sign=1.0)),
        Mistake("距离要取绝对值 |i − j|：你用的是 i − j，query 右边的 key（j > i）反而得到了加分。",
                lambda p, h: _alibi(p, _slopes(h), signed=True)),
        Mistake("斜率差了一位：H 个头的斜率是 2^(−8·1/H), 2^(−8·2/H), …, 2^(−8)，从 h = 1 数起；"
                "你从 h = 0 数起，第一个头的斜率成了 1。",
                lambda p, h: _alibi(p, _slopes(h, first=0))),
        Mistake("斜率的顺序反了：第一个头最陡（2^(−8/H)），最后一个头最平（2^(−8)）。",
                lambda p, h: _alibi(p, _slopes(h).flip(0))),
        Mistake("每个头要有自己的斜率（一组几何级数），你给所有头用了同一个斜率。",
                lambda p, h: _alibi(p, _slopes(h)[:1].expand(h))),
    ),
)
check_alibi_bias = ALIBI.check

EXERCISES = (SINUSOIDAL, SHIFT, ROPE, ALIBI)
