"""Checkers for chapter 6 (位置编码).

Each exercise lists the typical mistakes it recognises (among them the off-by-one ones: base 10001,
position + 1) and forbids the course package, as the statements do; ``tests/test_exercises.py``
proves that every one of them is rejected with its own hint. Positions are consecutive from an
offset (as after a KV cache), shuffled, with gaps, include 0, and reach a few hundred: large enough
that base 10001 moves an angle by ~1e-3, small enough that float32 keeps it to ~1e-5. The
references compute in float64. Every exercise has a twin case (an earlier case's sizes, new positions).
"""
from __future__ import annotations

import torch
from torch import Tensor

from .. import positional as course
from ._core import Exercise, Forbidden, Mistake

NO_COURSE = "本章的练习只用 torch 的基本运算，不要调用课程包（tc.SinusoidalPositions、tc.apply_rope、tc.ALiBi 等）"


def _positions(start: int, length: int) -> Tensor:
    """``length`` consecutive positions from ``start`` (as after a KV cache), int64 ``(T,)``."""
    return torch.arange(start, start + length)


# The mistakes' building blocks (the references write their own): the frequencies ω_i = 1/10000^(2i/d) of the
# d/2 pairs (float64), and the two wrong ones that typical mistakes use.
def _omega(d: int) -> Tensor:
    return 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)


def _omega_exponent_i(d: int) -> Tensor:
    return 10000.0 ** (-torch.arange(d // 2, dtype=torch.float64) / d)  # 1/10000^(i/d): the 2 left out


def _omega_base_10001(d: int) -> Tensor:
    return 10001.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # base 10001


def _interleave(even: Tensor, odd: Tensor) -> Tensor:
    """``(T, d/2), (T, d/2) -> (T, d)``: even, odd, even, odd, ..."""
    return torch.stack((even, odd), dim=-1).flatten(-2)


def _angles(positions: Tensor, freq: Tensor) -> Tensor:
    return positions.to(freq.dtype)[:, None] * freq[None, :]  # (T, d/2)


def _sin_cos(angles: Tensor) -> Tensor:
    return _interleave(angles.sin(), angles.cos())  # (T, d): sin, cos, sin, cos, ...


# ---- 练习 1: sinusoidal encodings -------------------------------------------------------------

def _sinusoidal_cases() -> list[tuple[Tensor, int]]:
    # (positions, d_model): consecutive from an offset, from 0, shuffled with gaps up to 500; the
    # last has the first's sizes and other positions (the twin).
    return [
        (_positions(3, 5), 8),
        (_positions(0, 7), 12),
        (torch.tensor([417, 0, 36, 251, 9, 128]), 16),
        (torch.tensor([20, 500, 2, 77]), 6),
        (torch.tensor([40, 7, 300, 0, 123]), 8),
    ]


def _sinusoidal_reference(positions: Tensor, d_model: int) -> Tensor:
    freq = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (d/2,): ω_i = 1/10000^(2i/d)
    angles = positions.to(torch.float64)[:, None] * freq  # (T, d/2): p·ω_i
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # (T, d_model): sin, cos, sin, cos, ...


SINUSOIDAL = Exercise(
    name="sinusoidal_encoding",
    reference=_sinusoidal_reference,
    make_cases=_sinusoidal_cases,
    atol=1e-4,
    mistakes=(
        Mistake("sin 与 cos 放反了：偶数维（0, 2, 4, …）是 sin，奇数维是 cos。",
                lambda p, d: _interleave(_angles(p, _omega(d)).cos(), _angles(p, _omega(d)).sin())),
        Mistake("排列方式不对：sin 和 cos 应交错排列（sin, cos, sin, cos, …），"
                "你把所有 sin 放在前半、所有 cos 放在后半。",
                lambda p, d: torch.cat((_angles(p, _omega(d)).sin(), _angles(p, _omega(d)).cos()), dim=-1)),
        Mistake("频率的指数不对：第 i 对（维度 2i 和 2i+1）的频率是 1/10000^(2i/d)，你用的是 1/10000^(i/d)。",
                lambda p, d: _sin_cos(_angles(p, _omega_exponent_i(d)))),
        Mistake("频率写反了：应除以 10000^(2i/d)（越往后的维度转得越慢），你乘上了它。",
                lambda p, d: _sin_cos(_angles(p, 10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)))),
        Mistake("用了 0..T-1 而不是传入的 positions：位置不一定从 0 开始，"
                "也不一定连续（例如有 KV cache 时从 cache.pos 开始）。",
                lambda p, d: _sin_cos(_angles(torch.arange(len(p)), _omega(d)))),
        Mistake("底数差了一：ω_i = 1/10000^(2i/d)，底数是 10000，你的结果像是用了 10001。",
                lambda p, d: _sin_cos(_angles(p, _omega_base_10001(d)))),
        Mistake("位置差了一：第 t 行是位置 positions[t] 的编码，不要加 1。",
                lambda p, d: _sin_cos(_angles(p + 1, _omega(d)))),
    ),
    forbidden=(
        Forbidden(NO_COURSE, course=True, example=lambda p, d: course.SinusoidalPositions(d)(p)),
    ),
)
check_sinusoidal_encoding = SINUSOIDAL.check


# ---- 练习 2: a fixed offset is a linear map ------------------------------------------------------

def _shift_cases() -> list[tuple[Tensor, int]]:
    g = torch.Generator().manual_seed(62)
    cases = []
    # (T, d_model, k): k = 0 (no shift), negative, and large (where base 10001 shows); the last is
    # the first's twin
    for t, d, k in [(4, 8, 3), (6, 10, 5), (3, 16, 11), (5, 12, 0), (2, 6, -7), (7, 16, 450), (4, 8, 3)]:
        positions = torch.randperm(40, generator=g)[:t]  # unknown to the learner, not sorted
        cases.append((_sinusoidal_reference(positions, d).float(), k))
    return cases


def _shift_reference(pe: Tensor, k: int) -> Tensor:
    d = pe.shape[-1]
    angle = k * 10000.0 ** (-torch.arange(0, d, 2, dtype=pe.dtype) / d)  # (d/2,): k·ω_i, the turn of pair i
    s, c = pe[:, 0::2], pe[:, 1::2]  # (T, d/2): sin(pω), cos(pω)
    # sin((p+k)ω) = sin(pω)cos(kω) + cos(pω)sin(kω), cos((p+k)ω) = cos(pω)cos(kω) − sin(pω)sin(kω)
    shifted = (s * angle.cos() + c * angle.sin(), c * angle.cos() - s * angle.sin())
    return torch.stack(shifted, dim=-1).flatten(-2)  # (T, d)


def _rotate_pairs(pe: Tensor, angle: Tensor) -> Tensor:
    """Every (sin, cos) pair i of ``pe (T, d)`` turned by ``angle[i]`` (the mistakes give the wrong angles)."""
    s, c = pe[:, 0::2], pe[:, 1::2]  # (T, d/2)
    return _interleave(s * angle.cos() + c * angle.sin(), c * angle.cos() - s * angle.sin())


SHIFT = Exercise(
    name="shift_encoding",
    reference=_shift_reference,
    make_cases=_shift_cases,
    atol=1e-4,
    mistakes=(
        Mistake("转反了方向：你得到的是位置 p − k 的编码。sin((p+k)ω) = sin(pω)cos(kω) + cos(pω)sin(kω)，"
                "cos((p+k)ω) = cos(pω)cos(kω) − sin(pω)sin(kω)。",
                lambda pe, k: _rotate_pairs(pe, -k * _omega(pe.shape[-1]).float())),
        Mistake("位置编码不能直接相加：PE(p) + PE(k) ≠ PE(p + k)。偏移 k 对应的是每一对 (sin, cos) 的一次旋转，"
                "即乘一个只依赖 k 的矩阵。",
                lambda pe, k: pe + _sin_cos(_angles(torch.tensor([k]), _omega(pe.shape[-1]))).float()),
        Mistake("每一对的旋转角应是 k·ω_i，各对的频率 ω_i = 1/10000^(2i/d) 不同；你让所有对都转了同一个角度 k。",
                lambda pe, k: _rotate_pairs(pe, k * torch.ones(pe.shape[-1] // 2))),
        Mistake("频率的指数不对：第 i 对的频率是 1/10000^(2i/d)，你用的是 1/10000^(i/d)。",
                lambda pe, k: _rotate_pairs(pe, k * _omega_exponent_i(pe.shape[-1]).float())),
        Mistake("底数差了一：ω_i = 1/10000^(2i/d)，底数是 10000，你的结果像是用了 10001。",
                lambda pe, k: _rotate_pairs(pe, k * _omega_base_10001(pe.shape[-1]).float())),
        Mistake("多转了一步：你得到的是位置 p + k + 1 的编码；每一对只转 k·ω_i。",
                lambda pe, k: _rotate_pairs(pe, (k + 1) * _omega(pe.shape[-1]).float())),
    ),
    forbidden=(
        Forbidden(NO_COURSE, course=True,
                  example=lambda pe, k: _rotate_pairs(pe, k * course.inverse_frequencies(pe.shape[-1]))),
    ),
)
check_shift_encoding = SHIFT.check


# ---- 练习 3: RoPE --------------------------------------------------------------------------------

def _rope_cases() -> list[tuple[Tensor, Tensor]]:
    g = torch.Generator().manual_seed(63)
    # (B, d, positions): B, T, d differ between cases; d even; positions after a "cache", from 0,
    # shuffled with gaps up to 400; the last is the first's twin
    cases = [(2, 8, _positions(3, 5)), (3, 6, _positions(0, 4)), (1, 12, _positions(9, 6)),
             (2, 16, torch.tensor([400, 0, 57, 233, 12, 301, 88])), (2, 8, torch.tensor([61, 4, 350, 0, 17]))]
    return [(torch.randn(b, len(p), d, generator=g), p) for b, d, p in cases]


def _rotate_half(x: Tensor) -> Tensor:
    x1, x2 = x.chunk(2, dim=-1)  # (..., d/2) each
    return torch.cat((-x2, x1), dim=-1)


def _rope_reference(x: Tensor, positions: Tensor) -> Tensor:
    d = x.shape[-1]
    theta = positions.to(x.dtype)[:, None] * 10000.0 ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)  # (T, d/2)
    angles = torch.cat((theta, theta), dim=-1)  # (T, d): dimensions i and i + d/2 share θ_i
    x1, x2 = x.chunk(2, dim=-1)  # (B, T, d/2) each
    return x * angles.cos() + torch.cat((-x2, x1), dim=-1) * angles.sin()  # (B, T, d)


# The mistakes: ``_turn`` turns the pairs (i, i + d/2) of x by the given angles (T, d); a mistake gives it the
# wrong positions or frequencies or lays the angles out wrongly, turns the wrong way or pairs the wrong dimensions.
def _turn(x: Tensor, angles: Tensor) -> Tensor:
    return x * angles.cos() + _rotate_half(x) * angles.sin()  # (B, T, d)


def _rope_backwards(x: Tensor, positions: Tensor) -> Tensor:
    angles = _angles(positions, _omega(x.shape[-1]).float()).repeat(1, 2)  # (T, d)
    return x * angles.cos() - _rotate_half(x) * angles.sin()  # turned by −θ


def _rope_interleaved(x: Tensor, positions: Tensor) -> Tensor:
    """Adjacent pairs (2i, 2i+1) rotated (RoFormer's layout)."""
    a = _angles(positions, _omega(x.shape[-1]).to(x.dtype))  # (T, d/2)
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
                _rope_backwards),
        Mistake("配对方式与题目约定不同：本题（与 Llama 的 Hugging Face 实现一样）把维度 i 与 i + d/2 配成一对，"
                "你配的是相邻的 2i 与 2i+1（RoFormer 原文的写法）。",
                _rope_interleaved),
        Mistake("角度的排布与配对方式不一致：维度 i 和 i + d/2 共用 θ_i，cos/sin 表应是 cat([θ, θ])，"
                "你用了 repeat_interleave（θ0, θ0, θ1, θ1, …）。",
                lambda x, p: _turn(x, _angles(p, _omega(x.shape[-1]).float()).repeat_interleave(2, dim=-1))),
        Mistake("用了 0..T-1 而不是传入的 positions：有 KV cache 时，新 token 的位置从 cache.pos 开始，也不一定连续。",
                lambda x, p: _turn(x, _angles(torch.arange(len(p)), _omega(x.shape[-1]).float()).repeat(1, 2))),
        Mistake("频率的指数不对：第 i 对的频率是 1/10000^(2i/d)，你用的是 1/10000^(i/d)。",
                lambda x, p: _turn(x, _angles(p, _omega_exponent_i(x.shape[-1]).float()).repeat(1, 2))),
        Mistake("底数差了一：θ_i = 1/10000^(2i/d)，底数是 10000，你的结果像是用了 10001。",
                lambda x, p: _turn(x, _angles(p, _omega_base_10001(x.shape[-1]).float()).repeat(1, 2))),
        Mistake("位置差了一：第 t 个向量按位置 positions[t] 旋转，不要加 1。",
                lambda x, p: _turn(x, _angles(p + 1, _omega(x.shape[-1]).float()).repeat(1, 2))),
    ),
    forbidden=(
        Forbidden(NO_COURSE, course=True,
                  example=lambda x, p: course.apply_rope(x, *course.RotaryEmbedding(x.shape[-1])(p))),
    ),
)
check_rope = ROPE.check


# ---- 练习 4: ALiBi ---------------------------------------------------------------------------------

def _alibi_cases() -> list[tuple[Tensor, int]]:
    # (positions, H): T and H differ between cases; H a power of two; consecutive from 0 and from
    # an offset, shuffled with gaps; the last is the third's twin (its sizes, other positions)
    return [(_positions(0, 5), 4), (_positions(7, 3), 2), (_positions(2, 6), 8),
            (torch.tensor([30, 2, 0, 91, 17, 64, 5]), 16), (torch.tensor([9, 0, 44, 3, 70, 12]), 8)]


def _alibi_reference(positions: Tensor, n_heads: int) -> Tensor:
    slopes = torch.tensor([2.0 ** (-8 * h / n_heads) for h in range(1, n_heads + 1)], dtype=torch.float64)  # (H,)
    distance = (positions[:, None] - positions[None, :]).abs()  # (T, T): |p_i − p_j|
    return -slopes[:, None, None] * distance  # (H, T, T)


# The mistakes: the right slopes and distances (``_slopes``, ``_distance``) or wrong ones, made a bias by ``_penalty``.
def _slopes(n: int) -> Tensor:
    return torch.tensor([2.0 ** (-8 * h / n) for h in range(1, n + 1)], dtype=torch.float64)  # (H,)


def _slopes_from_zero(n: int) -> Tensor:
    return torch.tensor([2.0 ** (-8 * h / n) for h in range(n)], dtype=torch.float64)  # (H,): the first is 1


def _distance(positions: Tensor) -> Tensor:
    return (positions[:, None] - positions[None, :]).abs()  # (T, T)


def _penalty(slopes: Tensor, distance: Tensor) -> Tensor:
    return -slopes[:, None, None] * distance  # (H, T, T)


ALIBI = Exercise(
    name="alibi_bias",
    reference=_alibi_reference,
    make_cases=_alibi_cases,
    atol=1e-4,  # biases up to ~60 with slopes 2^(-1/2), 2^(-1), ...: float32 rounds them to ~4e-6
    mistakes=(
        Mistake("符号反了：ALiBi 是惩罚，距离越远分数减得越多：bias = −m·|i − j|。",
                lambda p, h: _slopes(h)[:, None, None] * _distance(p)),  # no minus
        Mistake("距离要取绝对值 |i − j|：你用的是 i − j，query 右边的 key（j > i）反而得到了加分。",
                lambda p, h: _penalty(_slopes(h), p[:, None] - p[None, :])),
        Mistake("斜率差了一位：H 个头的斜率是 2^(−8·1/H), 2^(−8·2/H), …, 2^(−8)，从 h = 1 数起；"
                "你从 h = 0 数起，第一个头的斜率成了 1。",
                lambda p, h: _penalty(_slopes_from_zero(h), _distance(p))),
        Mistake("斜率的顺序反了：第一个头最陡（2^(−8/H)），最后一个头最平（2^(−8)）。",
                lambda p, h: _penalty(_slopes(h).flip(0), _distance(p))),
        Mistake("每个头要有自己的斜率（一组几何级数），你给所有头用了同一个斜率。",
                lambda p, h: _penalty(_slopes(h)[:1].expand(h), _distance(p))),
        Mistake("用了 0..T-1 而不是传入的 positions：距离是位置之差 |p_i − p_j|，位置不一定连续。",
                lambda p, h: _penalty(_slopes(h), _distance(torch.arange(len(p))))),
        Mistake("距离多算了 1：bias[h, i, j] = −m_h·|p_i − p_j|，位置相同时偏置是 0。",
                lambda p, h: _penalty(_slopes(h), _distance(p) + 1)),
    ),
    forbidden=(
        Forbidden(NO_COURSE, course=True, example=lambda p, h: course.ALiBi(h)(p, p)),
    ),
)
check_alibi_bias = ALIBI.check

EXERCISES = (SINUSOIDAL, SHIFT, ROPE, ALIBI)
