"""Checkers for chapter 4 (为什么除以 √d_k).

Each exercise lists the typical mistakes it recognises (among them the numerically naive ones,
which only the cases with scores in the hundreds expose) and the shortcuts its statement forbids
(autograd, Python loops, a T×T matrix); ``tests/test_exercises.py`` proves that every one of them is
rejected with its own hint. The last ordinary case of each exercise is the first case's twin.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from ._core import Case, Exercise, Forbidden, Mistake, randn as _randn
from ._stability import LARGE_ATOL, LARGE_NOTE, NAIVE_HINT, naive_softmax

AUTOGRAD = (torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad)



# ---- 练习 1: the Jacobian of softmax, for a batch ------------------------------------------

def _jacobian_cases() -> list[tuple[Tensor]]:
    g = torch.Generator().manual_seed(41)
    dims = [(2, 5), (3, 4), (1, 7), (2, 5)]  # (B, T): B != T, so a swapped axis shows; the first's twin
    cases = [(torch.softmax(2.0 * _randn(g, b, t), dim=-1),) for b, t in dims]
    edges = torch.tensor([[0.0, 0.0, 1.0], [1 / 3, 1 / 3, 1 / 3], [0.5, 0.5, 0.0], [0.2, 0.7, 0.1]])  # one-hot, uniform
    return cases + [(edges,)]


def _jacobian_loop(p: Tensor) -> Tensor:
    return torch.stack([torch.diag(row) - torch.outer(row, row) for row in p])  # (B, T, T), one row at a time


def _jacobian_autograd(p: Tensor) -> Tensor:
    J = torch.autograd.functional.jacobian(lambda s: s.softmax(-1), p.log())  # (B, T, B, T): softmax(log p) = p
    return J.diagonal(dim1=0, dim2=2).permute(2, 0, 1)


def _jacobian_reference(p: Tensor) -> Tensor:
    return torch.diag_embed(p) - p[:, :, None] * p[:, None, :]  # (B, T, T)


JACOBIAN = Exercise(
    name="softmax_jacobian_batched",
    reference=_jacobian_reference,
    make_cases=_jacobian_cases,
    mistakes=(
        Mistake("只算了对角线 p(1−p)：非对角线元素应为 −p_i·p_j，一个分数变大会挤走所有其他权重。",
                lambda p: torch.diag_embed(p * (1 - p))),
        Mistake("漏了对角项：J = diag(p) − p pᵀ，你只算了 −p pᵀ。",
                lambda p: -p[:, :, None] * p[:, None, :]),
        Mistake("符号反了：J = diag(p) − p pᵀ，而不是 p pᵀ − diag(p)。",
                lambda p: p[:, :, None] * p[:, None, :] - torch.diag_embed(p)),
        Mistake("δ_ij 被当成了 1：J[i, j] = p_i(δ_ij − p_j)，只有 i = j 时括号里才是 1 − p_j。",
                lambda p: p[:, :, None] * (1 - p[:, None, :])),
    ),
    forbidden=(
        Forbidden("本题要求不用循环：用广播（p[:, :, None] * p[:, None, :]）和 torch.diag_embed 一次算出整批",
                  loops=True, example=_jacobian_loop),
        Forbidden("本题要求按公式 J = diag(p) − p pᵀ 直接计算，"
                  "不要调用 autograd（torch.autograd.functional.jacobian 等）",
                  functions=AUTOGRAD, example=_jacobian_autograd),
    ),
)
check_softmax_jacobian = JACOBIAN.check


# ---- 练习 2: backward through softmax without the Jacobian ---------------------------------

def _backward_cases() -> list[tuple | Case]:
    g = torch.Generator().manual_seed(42)
    dims = [(2, 6), (4, 3), (1, 9), (2, 6)]  # (B, T); the first's twin
    cases: list[tuple | Case] = [(2.0 * _randn(g, b, t), _randn(g, b, t)) for b, t in dims]
    return cases + [Case((100.0 * _randn(g, 3, 5), _randn(g, 3, 5)), atol=LARGE_ATOL, note=LARGE_NOTE)]


def _backward_with_jacobian(scores: Tensor, grad_p: Tensor) -> Tensor:
    p = torch.softmax(scores, dim=-1)
    J = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]  # (B, T, T): what the statement rules out
    return (grad_p[:, None, :] @ J).squeeze(1)


def _backward_autograd(scores: Tensor, grad_p: Tensor) -> Tensor:
    s = scores.clone().requires_grad_()
    return torch.autograd.grad((torch.softmax(s, dim=-1) * grad_p).sum(), s)[0]


def _backward_reference(scores: Tensor, grad_p: Tensor) -> Tensor:
    p = torch.softmax(scores, dim=-1)
    return p * (grad_p - (grad_p * p).sum(dim=-1, keepdim=True))  # (B, T)


BACKWARD = Exercise(
    name="softmax_backward",
    reference=_backward_reference,
    make_cases=_backward_cases,
    mistakes=(
        Mistake("漏了 −⟨g, p⟩ 这一项：softmax 的输出要归一化，一个 p 变大，其余的 p 必然变小，"
                "梯度里要减去 g 与 p 的内积。",
                lambda s, g: torch.softmax(s, -1) * g),
        Mistake("只用了 Jacobian 的对角线 p(1−p)：非对角线 −p_i·p_j 同样贡献梯度，正确结果是 p ⊙ (g − ⟨g, p⟩)。",
                lambda s, g: (lambda p: p * (1 - p) * g)(torch.softmax(s, -1))),
        Mistake("少乘了 p：∂L/∂s = p ⊙ (g − ⟨g, p⟩)，每个分数的梯度都被它自己的权重 p_j 门控。",
                lambda s, g: g - (g * torch.softmax(s, -1)).sum(-1, keepdim=True)),
        Mistake("公式里的 p 是 softmax 的输出，不是分数本身：先算 p = softmax(scores)。",
                lambda s, g: s * (g - (g * s).sum(-1, keepdim=True))),
        Mistake(NAIVE_HINT, lambda s, g: (lambda p: p * (g - (g * p).sum(-1, keepdim=True)))(naive_softmax(s))),
    ),
    forbidden=(
        Forbidden("本题要求用 p ⊙ (g − ⟨g, p⟩) 直接计算，不要构造 T×T 的 Jacobian 矩阵",
                  max_numel=lambda scores, grad_p: 2 * scores.numel(), example=_backward_with_jacobian),
        Forbidden("本题要求用 p ⊙ (g − ⟨g, p⟩) 直接计算，不要调用 autograd（.backward()、torch.autograd.grad）",
                  functions=AUTOGRAD, example=_backward_autograd),
    ),
)
check_softmax_backward = BACKWARD.check


# ---- 练习 3: how saturated is each row? -----------------------------------------------------

def _saturation_cases() -> list[tuple | Case]:
    g = torch.Generator().manual_seed(43)
    dims = [(2, 3, 5), (1, 4, 6), (3, 2, 8), (2, 3, 5)]  # (B, Tq, Tk); the first's twin
    cases: list[tuple | Case] = [(3.0 * _randn(g, b, tq, tk),) for b, tq, tk in dims]
    # Huge scores, as without scaling at a large d_k: some p underflow to exactly 0 (in 7 of the
    # 10 rows), so p * p.log() gives 0 * (-inf) = NaN there, while log_softmax stays finite.
    # Then scores in the hundreds, where exp itself overflows.
    return cases + [(35.0 * _randn(g, 2, 5, 16),),
                    Case((150.0 * _randn(g, 3, 2, 7),), atol=LARGE_ATOL, note=LARGE_NOTE)]


def _naive_entropy(scores: Tensor) -> tuple[Tensor, Tensor]:
    p = torch.softmax(scores, dim=-1)
    return _stats(p, p.log())  # log(0) = -inf, and 0 * (-inf) = NaN


def _stats(p: Tensor, log_p: Tensor) -> tuple[Tensor, Tensor]:
    return p.amax(dim=-1), -(p * log_p).sum(dim=-1)


def _saturation_reference(scores: Tensor) -> tuple[Tensor, Tensor]:
    return _stats(torch.softmax(scores, dim=-1), torch.log_softmax(scores, dim=-1))


def _over_queries(scores: Tensor) -> tuple[Tensor, Tensor]:
    p = torch.softmax(scores, dim=-2)  # the wrong axis, reduced over the keys as asked
    return _stats(p, torch.log_softmax(scores, dim=-2))


SATURATION = Exercise(
    name="saturation",
    reference=_saturation_reference,
    make_cases=_saturation_cases,
    mistakes=(
        Mistake("分数很大时（如不缩放、d_k 很大），softmax 会把一些 p 下溢成 0，p.log() 得 −inf，"
                "0·(−inf) = NaN，熵就成了 NaN。用 torch.log_softmax(scores, dim=-1) 求 log p"
                "（它在那里是有限的大负数），或按 0·log 0 = 0 处理这些项。",
                _naive_entropy),
        Mistake("softmax 的维度不对：每个 query 的权重要在所有 key 上归一化，即 dim=-1。",
                _over_queries),
        Mistake("熵要用自然对数（单位 nat，与 log 16 ≈ 2.77 对照），你用的似乎是 log2（单位 bit）。",
                lambda s: _stats(torch.softmax(s, -1), torch.log_softmax(s, -1) / math.log(2))),
        Mistake("熵的符号反了：H(p) = −Σ p log p ≥ 0，别漏了前面的负号。",
                lambda s: (lambda mx, ent: (mx, -ent))(*_saturation_reference(s))),
        Mistake("max_p 应是 softmax 之后的最大权重（0 到 1 之间），你返回的似乎是最大的原始分数。",
                lambda s: (s.amax(-1), _saturation_reference(s)[1])),
        Mistake(NAIVE_HINT, lambda s: _stats(naive_softmax(s), torch.log_softmax(s, dim=-1))),
    ),
)
check_saturation = SATURATION.check

EXERCISES = (JACOBIAN, BACKWARD, SATURATION)
