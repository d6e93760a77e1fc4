"""Checkers for chapter 5 (多头注意力).

Each exercise lists the typical mistakes it recognises and the shortcuts its statement forbids (the
course package: so the references here do not call it either); ``tests/test_exercises.py`` proves
that every one of them is rejected with its own hint. Edge cases: one head, one feature per head,
scores in the hundreds, the shortest sequence; the last ordinary case is the first case's twin.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from torch.nn import functional as F

from .. import multihead as course
from ._core import Case, Exercise, Forbidden, Mistake, randn as _randn
from ._stability import LARGE_ATOL, LARGE_NOTE, NAIVE_HINT, naive_softmax


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """``(B, T, C) -> (B, H, T, C/H)``: head h owns the h-th slice of features."""
    B, T, C = x.shape
    return x.view(B, T, n_heads, C // n_heads).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """``(B, H, T, d) -> (B, T, H·d)``: the inverse of :func:`split_heads`."""
    B, H, T, d = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d)



# Ways to cut (B, T, C) into heads, each with the merge that undoes it.
def _split_view(x: Tensor, n_heads: int) -> Tensor:  # heads cut out of the flat memory
    B, T, C = x.shape
    return x.reshape(B, n_heads, T, C // n_heads)


def _merge_view(x: Tensor) -> Tensor:
    B, H, T, d = x.shape
    return x.reshape(B, T, H * d)


def _split_interleaved(x: Tensor, n_heads: int) -> Tensor:  # head h gets features h, h+H, ...
    B, T, C = x.shape
    return x.reshape(B, T, C // n_heads, n_heads).permute(0, 3, 1, 2)


def _merge_interleaved(x: Tensor) -> Tensor:
    B, H, T, d = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, T, d * H)


def _split_transposed_first(x: Tensor, n_heads: int) -> Tensor:
    B, T, C = x.shape
    return x.transpose(1, 2).reshape(B, n_heads, T, C // n_heads)


SPLIT_NUDGE = ("取第 0 个 token 的 C 个特征，看它们去了哪些头、哪些位置："
               "每个头拿到的，是不是同一个 token 上连续的 d_head 个特征？")


# ---- 练习 1: split into heads ---------------------------------------------------------------

def _split_cases() -> list[tuple[Tensor, int]]:
    g = torch.Generator().manual_seed(51)
    # (B, T, C, H): d_head differs from all; one head; one feature per head; the first's twin
    dims = [(2, 5, 12, 3), (3, 7, 10, 2), (1, 6, 20, 4), (2, 3, 4, 1), (4, 2, 3, 3), (2, 5, 12, 3)]
    return [(_randn(g, b, t, c), h) for b, t, c, h in dims]


SPLIT = Exercise(
    name="split_heads",
    reference=split_heads,
    make_cases=_split_cases,
    mistakes=(
        Mistake("直接 view 成 (B, H, T, d_head) 会把不同 token 的特征混进同一个头：先 view 成 (B, T, H, d_head)，"
                "再交换 T 和 H 两个轴（transpose(1, 2)）。",
                _split_view, nudge=SPLIT_NUDGE),
        Mistake("头拿到的特征是交错的（第 h 个头拿了第 h、h+H、h+2H… 个特征）：应 view 成 (B, T, H, d_head)，"
                "让每个头拿连续的一段。",
                _split_interleaved, nudge=SPLIT_NUDGE),
        Mistake("先转置再 reshape 会打乱 token 与特征的对应：应先 view 成 (B, T, H, d_head)，再 transpose(1, 2)。",
                _split_transposed_first, nudge=SPLIT_NUDGE),
    ),
    forbidden=(
        Forbidden("本题要求自己写出切分，不要调用课程包的 tc.split_heads", course=True, example=course.split_heads),
    ),
)
check_split_heads = SPLIT.check


# ---- 练习 2: the multi-head forward pass ----------------------------------------------------

def _mha_cases() -> list[tuple | Case]:
    g = torch.Generator().manual_seed(52)
    dims = [(2, 5, 12, 3), (3, 4, 10, 2), (1, 7, 16, 4), (2, 3, 6, 1), (2, 5, 12, 3)]  # (B, T, C, H); twin
    cases: list[tuple | Case] = [(_randn(g, b, t, c), _randn(g, c, 3 * c) / c**0.5, _randn(g, c, c) / c**0.5, h)
                                 for b, t, c, h in dims]
    large = (12.0 * _randn(g, 2, 4, 8), _randn(g, 8, 24) / 8**0.5, _randn(g, 8, 8) / 8**0.5, 2)  # scores ~ ±300
    return cases + [Case(large, atol=LARGE_ATOL, note=LARGE_NOTE)]


def _mha_reference(x: Tensor, w_qkv: Tensor, w_o: Tensor, n_heads: int) -> Tensor:
    q, k, v = (split_heads(t, n_heads) for t in (x @ w_qkv).split(x.shape[-1], dim=-1))  # (B, H, T, d_head) each
    weights = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)  # (B, H, T, T)
    return merge_heads(weights @ v) @ w_o  # (B, T, C)


# The mistakes: heads cut by a given ``split``, each head's output ``weights(q, k) @ v`` (``_per_head``); a
# mistake gives the wrong split or the wrong weights, or merges and projects wrongly.
def _qkv(x: Tensor, w_qkv: Tensor, n_heads: int, split: Callable[[Tensor, int], Tensor]) -> tuple[Tensor, ...]:
    return tuple(split(t, n_heads) for t in (x @ w_qkv).split(x.shape[-1], dim=-1))  # 3 × (B, H, T, d_head)


def _per_head(x: Tensor, w_qkv: Tensor, n_heads: int, split: Callable[[Tensor, int], Tensor],
              weights: Callable[[Tensor, Tensor], Tensor]) -> Tensor:
    q, k, v = _qkv(x, w_qkv, n_heads, split)
    return weights(q, k) @ v  # (B, H, T, d_head)


def _scores(q: Tensor, k: Tensor, scale: float) -> Tensor:
    return q @ k.transpose(-2, -1) * scale  # (B, H, T, T)


def _softmax_weights(q: Tensor, k: Tensor) -> Tensor:
    return torch.softmax(_scores(q, k, q.shape[-1] ** -0.5), dim=-1)  # (B, H, T, T)


MHA = Exercise(
    name="multi_head_attention",
    reference=_mha_reference,
    make_cases=_mha_cases,
    mistakes=(
        Mistake("拼接之后还要乘 W_O（concat @ w_o）：没有它，头之间永远不交流。",
                lambda x, w, o, h: merge_heads(_per_head(x, w, h, split_heads, _softmax_weights)),  # no @ o
                nudge="数一数你的函数用到了哪几个参数：w_o 在哪里起作用？"),
        Mistake("缩放因子要用每个头的维度：除以 √d_head（= √(C/H)），而不是 √C。",
                lambda x, w, o, h: merge_heads(_per_head(x, w, h, split_heads, lambda q, k: torch.softmax(
                    _scores(q, k, x.shape[-1] ** -0.5), dim=-1))) @ o,
                nudge="只有一个头（H = 1）的那组测试是对的吗？看看分数除以的那个数，在每个头里它应是多少。"),
        Mistake("缺少缩放：softmax 之前要把每个头的分数除以 √d_head（d_head = C // H）。",
                lambda x, w, o, h: merge_heads(_per_head(x, w, h, split_heads, lambda q, k: torch.softmax(
                    _scores(q, k, 1.0), dim=-1))) @ o,
                nudge="softmax 之前的分数有多大？和第 3、4 章的缩放点积注意力逐项对照。"),
        Mistake("切分头时不能直接 view 成 (B, H, T, d_head)：先 view 成 (B, T, H, d_head) 再 transpose(1, 2)，"
                "拼接时反过来。",
                lambda x, w, o, h: _merge_view(_per_head(x, w, h, _split_view, _softmax_weights)) @ o,
                nudge=SPLIT_NUDGE),
        Mistake("每个头应拿连续的 d_head 个特征，你的切分是交错的（view 成 (B, T, d_head, H) 了）。",
                lambda x, w, o, h: _merge_interleaved(_per_head(x, w, h, _split_interleaved, _softmax_weights)) @ o,
                nudge=SPLIT_NUDGE),
        Mistake("切分对了，拼接错了：各头的输出是 (B, H, T, d_head)，要先 transpose(1, 2) 回到 (B, T, H, d_head)，"
                "再 reshape 成 (B, T, C)；直接 reshape 会把不同位置的输出拼进同一个 token。",
                lambda x, w, o, h: _merge_view(_per_head(x, w, h, split_heads, _softmax_weights)) @ o,
                nudge="切分那一步没问题。把各头的输出拼回 (B, T, C) 时，"
                      "第 t 个 token 拿到的是哪些位置、哪些头的输出？"),
        Mistake("softmax 的维度不对：每个 query 的权重要在所有 key 上归一化，即 dim=-1。",
                lambda x, w, o, h: merge_heads(_per_head(x, w, h, split_heads, lambda q, k: torch.softmax(
                    _scores(q, k, q.shape[-1] ** -0.5), dim=-2))) @ o,
                nudge="打印一个头的注意力权重：哪个方向上的和是 1？每个 query 的权重应该在哪些数上归一化？"),
        Mistake("缩放因子差了一点：除以 √d_head（d_head = C // H），你的结果像是除以了 √(d_head + 1)。",
                lambda x, w, o, h: merge_heads(_per_head(x, w, h, split_heads, lambda q, k: torch.softmax(
                    _scores(q, k, (x.shape[-1] // h + 1) ** -0.5), dim=-1))) @ o,
                nudge="差得不多，而且每组都差一点：核对分数除以的那个数。"),
        Mistake(NAIVE_HINT, lambda x, w, o, h: merge_heads(_per_head(x, w, h, split_heads, lambda q, k: naive_softmax(
            _scores(q, k, q.shape[-1] ** -0.5)))) @ o,
            nudge="只有分数很大（几百）的那组测试出了问题：exp 在那里会发生什么？"),
    ),
    forbidden=(
        Forbidden("本题要求只用 torch 的基本运算（可以用你自己写的 split_heads），不要调用课程包（tc.*）",
                  course=True, example=lambda x, w, o, h: course.merge_heads(
                      _per_head(x, w, h, course.split_heads, _softmax_weights)) @ o),
        Forbidden("本题要求只用 torch 的基本运算写出多头注意力，"
                  "不要调用 F.scaled_dot_product_attention 或 nn.MultiheadAttention",
                  functions=(F.scaled_dot_product_attention, F.multi_head_attention_forward),
                  example=lambda x, w, o, h: merge_heads(
                      F.scaled_dot_product_attention(*_qkv(x, w, h, split_heads))) @ o),
    ),
)
check_multi_head_attention = MHA.check


# ---- 练习 3: a previous-token detector ------------------------------------------------------

def _prev_cases() -> list[tuple[Tensor]]:
    g = torch.Generator().manual_seed(53)
    dims = [(2, 3, 5), (4, 2, 6), (1, 5, 7), (3, 4, 2), (2, 3, 5)]  # (B, H, T); the shortest T; the first's twin
    return [(torch.softmax(2.0 * _randn(g, b, h, t, t), dim=-1),) for b, h, t in dims]


def _prev_reference(weights: Tensor) -> Tensor:
    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, 2))  # (H,)


PREVIOUS = Exercise(
    name="previous_token_score",
    reference=_prev_reference,
    make_cases=_prev_cases,
    mistakes=(
        Mistake("你量的是「看后一个」：query i 看前一个是 weights[..., i, i-1]，在对角线下方（diagonal(offset=-1)）。",
                lambda w: w.diagonal(offset=1, dim1=-2, dim2=-1).mean(dim=(0, 2)),
                nudge="weights[..., i, j] 是 query i 放在 key j 上的权重：「前一个位置」的 (i, j) 满足什么关系？"),
        Mistake("你量的是「看自己」（对角线）：前一个位置在对角线下方一格，offset=-1。",
                lambda w: w.diagonal(offset=0, dim1=-2, dim2=-1).mean(dim=(0, 2)),
                nudge="weights[..., i, j] 是 query i 放在 key j 上的权重：「前一个位置」的 (i, j) 满足什么关系？"),
        Mistake("第 0 个 query 没有前一个位置，不该计入平均：只对 i ≥ 1 的 T−1 个 query 取平均。",
                lambda w: w.diagonal(offset=-1, dim1=-2, dim2=-1).sum(dim=(0, 2)) / (w.shape[0] * w.shape[-1]),
                nudge="结果比答案略小：平均时除以的个数对吗？每个序列里有几个 query 有「前一个位置」？"),
        Mistake("要的是平均比例（0 到 1 之间），不是总和：对批次和 query 取 mean。",
                lambda w: w.diagonal(offset=-1, dim1=-2, dim2=-1).sum(dim=(0, 2)),
                nudge="结果能大于 1 吗？题目要的是一个比例。"),
    ),
)
check_previous_token_score = PREVIOUS.check

EXERCISES = (SPLIT, MHA, PREVIOUS)
