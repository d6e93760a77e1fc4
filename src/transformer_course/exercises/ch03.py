"""Checkers for chapter 3 (Q/K/V 与自注意力).

Each exercise lists the typical mistakes it recognises (among them a softmax that calls ``exp``
without subtracting the max, which only a case with scores in the hundreds exposes) and the
shortcuts its statement forbids; ``tests/test_exercises.py`` proves that every one of them is
rejected with its own hint. The last case of each exercise is the first case's twin (new values).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.nn import functional as F

from .. import attention as course
from ._core import Case, Exercise, Forbidden, Mistake, randn as _randn
from ._stability import LARGE_ATOL, LARGE_NOTE, NAIVE_HINT, naive_softmax


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The checkers' own attention (the learner may not call the course package, so neither may the
    reference that the generic wrong attempts are built from): ``(out, weights)``."""
    scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5  # (..., Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def causal_mask(t: int) -> Tensor:
    return torch.ones(t, t, dtype=torch.bool).tril()  # (T, T): True = may attend


def _large(*tensors: Tensor, scale: float) -> tuple[Tensor, ...]:
    return tuple(t * scale for t in tensors)


# ---- 练习 1: scaled dot-product attention -------------------------------------------------

def _attention_cases() -> list[tuple | Case]:
    g = torch.Generator().manual_seed(3)
    # (B, Tq, Tk, d_k, d_v): every dimension differs within a case, so a swapped axis shows;
    # the last is the first's twin.
    dims = [(2, 3, 5, 4, 6), (1, 6, 4, 16, 3), (3, 4, 7, 9, 5), (2, 3, 5, 4, 6)]
    cases: list[tuple | Case] = [(_randn(g, b, tq, dk), _randn(g, b, tk, dk), _randn(g, b, tk, dv))
                                 for b, tq, tk, dk, dv in dims]
    q, k = _large(_randn(g, 2, 4, 8), _randn(g, 2, 6, 8), scale=12.0)  # scores ~ ±300
    return cases + [Case((q, k, _randn(g, 2, 6, 3)), atol=LARGE_ATOL, note=LARGE_NOTE)]


def _attention_reference(q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    return scaled_dot_product_attention(q, k, v)


def _scores(q: Tensor, k: Tensor, scale: float) -> Tensor:
    return q @ k.transpose(-2, -1) * scale  # (B, Tq, Tk)


def _scaled(q: Tensor, k: Tensor) -> Tensor:
    return _scores(q, k, q.shape[-1] ** -0.5)  # (B, Tq, Tk): divided by √d_k


def _weighted(w: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    return w @ v, w


def _fused(q: Tensor, k: Tensor, v: Tensor, **kwargs) -> tuple[Tensor, Tensor]:
    """The shortcut: torch's fused kernel for the output, the weights computed beside it."""
    weights = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)
    return F.scaled_dot_product_attention(q, k, v, **kwargs), weights


ATTENTION = Exercise(
    name="attention",
    reference=_attention_reference,
    make_cases=_attention_cases,
    mistakes=(
        Mistake("softmax 的维度不对：应在最后一维（每个 query 对所有 key）上归一化，即 dim=-1。",
                lambda q, k, v: _weighted(torch.softmax(_scores(q, k, q.shape[-1] ** -0.5), dim=-2), v)),
        Mistake("缺少缩放：softmax 之前要把分数除以 √d_k。",
                lambda q, k, v: _weighted(torch.softmax(_scores(q, k, 1.0), dim=-1), v)),
        Mistake("缩放因子不对：应除以 √d_k，而不是 d_k。",
                lambda q, k, v: _weighted(torch.softmax(_scores(q, k, 1.0 / q.shape[-1]), dim=-1), v)),
        Mistake("缩放放错了位置：要先除以 √d_k 再做 softmax，而不是对 softmax 的结果缩放。",
                lambda q, k, v: _weighted(torch.softmax(_scores(q, k, 1.0), dim=-1) / math.sqrt(q.shape[-1]), v)),
        Mistake("输出应是权重对 V 的加权和（weights @ v），你似乎乘的是 K。",
                lambda q, k, v: _weighted(torch.softmax(_scaled(q, k), dim=-1), k)),  # weights @ k
        Mistake("缩放因子差了一点：除以 √d_k（d_k = q.shape[-1]），你的结果像是除以了 √(d_k + 1)。",
                lambda q, k, v: _weighted(torch.softmax(_scores(q, k, (q.shape[-1] + 1) ** -0.5), dim=-1), v)),
        Mistake(NAIVE_HINT, lambda q, k, v: _weighted(naive_softmax(_scores(q, k, q.shape[-1] ** -0.5)), v)),
    ),
    forbidden=(
        Forbidden("本题要求只用 @、transpose、softmax 这些基本运算写出注意力，不要调用 F.scaled_dot_product_attention",
                  functions=(F.scaled_dot_product_attention,), example=_fused),
        Forbidden("本题要求只用 torch 的基本运算写出注意力，不要调用课程包（tc.*）",
                  course=True, example=lambda q, k, v: course.scaled_dot_product_attention(q, k, v)),
    ),
)
check_attention = ATTENTION.check


# ---- 练习 2: causal (masked) self-attention ------------------------------------------------

def _causal_cases() -> list[tuple | Case]:
    g = torch.Generator().manual_seed(4)
    dims = [(2, 5, 4, 3), (1, 7, 6, 5), (3, 4, 8, 2), (4, 1, 3, 6), (2, 5, 4, 3)]  # (B, T, d_k, d_v); T = 1; twin
    cases: list[tuple | Case] = [(_randn(g, b, t, dk), _randn(g, b, t, dk), _randn(g, b, t, dv))
                                 for b, t, dk, dv in dims]
    q, k = _large(_randn(g, 2, 6, 8), _randn(g, 2, 6, 8), scale=12.0)
    return cases + [Case((q, k, _randn(g, 2, 6, 3)), atol=LARGE_ATOL, note=LARGE_NOTE)]


def _causal_reference(q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    return scaled_dot_product_attention(q, k, v, mask=causal_mask(q.shape[-2]))


def _square(q: Tensor) -> Tensor:
    return torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool)  # (T, T), all True: cut it with tril / triu


CAUSAL = Exercise(
    name="causal_attention",
    reference=_causal_reference,
    make_cases=_causal_cases,
    mistakes=(
        Mistake("掩码加在了 softmax 之后：未来位置的权重虽被乘成 0，但 softmax 的分母里仍有未来位置的分数，"
                "输出会随未来的 token 变化（因果性被破坏），每行权重之和也不再是 1。"
                "应在 softmax 之前把未来位置的分数设为 -inf。",
                lambda q, k, v: _weighted(torch.softmax(_scaled(q, k), -1) * _square(q).tril(), v)),
        Mistake("被遮住的分数应设为 -inf，而不是 0：e^0 = 1，未来位置仍然分到了权重。",
                lambda q, k, v: _weighted(torch.softmax(_scaled(q, k).masked_fill(~_square(q).tril(), 0.0), -1), v)),
        Mistake("掩码方向反了：query i 只能看 j ≤ i（下三角，torch.tril），你保留的是上三角（未来）。",
                lambda q, k, v: _weighted(
                    torch.softmax(_scaled(q, k).masked_fill(~_square(q).triu(), -math.inf), -1), v)),
        Mistake("对角线也应保留：每个位置可以关注它自己（j = i），请用 tril(diagonal=0)。",
                lambda q, k, v: _weighted(
                    torch.softmax(_scaled(q, k).masked_fill(~_square(q).tril(-1), -math.inf), -1), v)),
        Mistake("缺少缩放：softmax 之前要把分数除以 √d_k。",
                lambda q, k, v: _weighted(
                    torch.softmax(_scores(q, k, 1.0).masked_fill(~_square(q).tril(), -math.inf), -1), v)),
        Mistake("掩码多放进了一个位置：tril(diagonal=1) 让 query i 看到了下一个 token i+1；应是 tril(diagonal=0)。",
                lambda q, k, v: _weighted(
                    torch.softmax(_scaled(q, k).masked_fill(~_square(q).tril(1), -math.inf), -1), v)),
        Mistake(NAIVE_HINT,
                lambda q, k, v: _weighted(naive_softmax(_scaled(q, k).masked_fill(~_square(q).tril(), -math.inf)), v)),
    ),
    forbidden=(
        Forbidden("本题要求自己构造因果掩码（torch.tril）并写出注意力，不要调用 F.scaled_dot_product_attention",
                  functions=(F.scaled_dot_product_attention,), example=lambda q, k, v: _fused(q, k, v, is_causal=True)),
        Forbidden("本题要求自己构造因果掩码（torch.tril）并写出注意力，不要调用课程包（tc.causal_mask、tc.scaled_dot_product_attention）",
                  course=True, example=lambda q, k, v: course.scaled_dot_product_attention(
                      q, k, v, mask=course.causal_mask(q.shape[-2]))),
    ),
)
check_causal_attention = CAUSAL.check


# ---- 练习 3: cross-attention ----------------------------------------------------------------

def _cross_cases() -> list[tuple | Case]:
    g = torch.Generator().manual_seed(5)
    # (B, T_dec, T_enc, d_model, d_k, d_v); the last is the first's twin
    dims = [(2, 3, 5, 8, 4, 6), (1, 6, 4, 10, 7, 3), (3, 2, 7, 6, 5, 9), (2, 3, 5, 8, 4, 6)]
    cases: list[tuple | Case] = [
        (_randn(g, b, td, dm), _randn(g, b, te, dm), _randn(g, dm, dk), _randn(g, dm, dk), _randn(g, dm, dv))
        for b, td, te, dm, dk, dv in dims
    ]
    x_dec, x_enc = _large(_randn(g, 2, 4, 6), _randn(g, 2, 5, 6), scale=6.0)  # scores ~ ±300 after projection
    large = (x_dec, x_enc, _randn(g, 6, 8), _randn(g, 6, 8), _randn(g, 6, 3))
    return cases + [Case(large, atol=LARGE_ATOL, note=LARGE_NOTE)]


def _cross_reference(x_dec: Tensor, x_enc: Tensor, w_q: Tensor, w_k: Tensor, w_v: Tensor) -> Tensor:
    q, k, v = x_dec @ w_q, x_enc @ w_k, x_enc @ w_v  # (B, T_dec, d_k), (B, T_enc, d_k), (B, T_enc, d_v)
    return scaled_dot_product_attention(q, k, v)[0]  # (B, T_dec, d_v)


# The mistakes: projections of the wrong inputs, or the wrong scale, given to the neutral ``_attend``.
def _attend(q: Tensor, k: Tensor, v: Tensor, scale: float) -> Tensor:
    return torch.softmax(_scores(q, k, scale), dim=-1) @ v  # (B, Tq, d_v)


def _naive_cross(x_dec: Tensor, x_enc: Tensor, w_q: Tensor, w_k: Tensor, w_v: Tensor) -> Tensor:
    q, k, v = x_dec @ w_q, x_enc @ w_k, x_enc @ w_v
    return naive_softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5) @ v  # exp of scores in the hundreds: inf


CROSS = Exercise(
    name="cross_attention",
    reference=_cross_reference,
    make_cases=_cross_cases,
    atol=1e-4,  # projections make scores of ~10: float32 rounds the output to ~3e-6
    mistakes=(
        Mistake("来源弄反了：Q 应来自 decoder（x_dec），K 和 V 来自 encoder（x_enc）。输出长度应等于 decoder 的长度。",
                lambda xd, xe, wq, wk, wv: _attend(xe @ wq, xd @ wk, xd @ wv, wq.shape[-1] ** -0.5)),
        Mistake("这是 decoder 的自注意力：cross-attention 的 K、V 要由 encoder 的输出 x_enc 投影得到。",
                lambda xd, xe, wq, wk, wv: _attend(xd @ wq, xd @ wk, xd @ wv, wq.shape[-1] ** -0.5)),
        Mistake("K 应由 w_k 投影，而你用了 w_q：Q 和 K 是两个独立学习的矩阵。",
                lambda xd, xe, wq, wk, wv: _attend(xd @ wq, xe @ wq, xe @ wv, wq.shape[-1] ** -0.5)),
        Mistake("缺少缩放：softmax 之前要把分数除以 √d_k。",
                lambda xd, xe, wq, wk, wv: _attend(xd @ wq, xe @ wk, xe @ wv, 1.0)),
        Mistake("缩放因子要用投影之后的维度 d_k（= w_q.shape[-1]），不是 d_model：除以 √d_k。",
                lambda xd, xe, wq, wk, wv: _attend(xd @ wq, xe @ wk, xe @ wv, xd.shape[-1] ** -0.5)),
        Mistake(NAIVE_HINT, _naive_cross),
    ),
)
check_cross_attention = CROSS.check

EXERCISES = (ATTENTION, CAUSAL, CROSS)
