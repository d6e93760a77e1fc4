"""Checkers for chapter 10 (训练与推理：模型存了什么，怎样逐个生成).

Each exercise lists the typical mistakes it recognises (among them the numerically naive ones,
which only logits in the thousands expose); top-k forbids the course package and beam search an
exhaustive search, as their statements do; ``tests/test_exercises.py`` proves that every one of them
is rejected with its own hint. Edge cases: k = 1 and k = V, a nucleus of one token, the shortest
sequence; beam width 1 (greedy), a width of V ** (n_new - 1) (an exhaustive search, with fewer
candidates than the width at the first step), one new token, a prompt of one token. The last
ordinary case of each exercise is the first case's twin (its sizes, new values).
"""
from __future__ import annotations


import torch
from torch import Tensor

from ...generate import top_k_filter as course_top_k_filter
from ...generate import top_p_filter
from .beam_search import BEAM  # 练习 4, beam search: its own module
from .._core import Case, Exercise, Forbidden, Mistake
from .._stability import (BIG_LOGITS_NOTE, LARGE_ATOL, LOG_OF_SOFTMAX_HINT, NAIVE_HINT, NAIVE_LSE_HINT,
                         naive_log_softmax, naive_softmax, overflowing_log_softmax)

NEG_INF = float("-inf")


def _logits(g: torch.Generator, rows: int, vocab: int) -> Tensor:
    return 2.0 * torch.randn(rows, vocab, generator=g)  # spread out, like a trained model's


# ---- 练习 1: top-k ---------------------------------------------------------------------------

def _top_k_cases() -> list[tuple[Tensor, int]]:
    g = torch.Generator().manual_seed(10)
    # (B, V), k: k = 1 and k = V (nothing filtered) among them; the last is the first's twin
    return [(_logits(g, 2, 11), 3), (_logits(g, 4, 23), 5), (_logits(g, 3, 7), 1), (_logits(g, 5, 6), 6),
            (_logits(g, 2, 11), 3)]


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """The checker's own top-k (the learner may not call the course package, so neither may the reference)."""
    kth = logits.topk(k, dim=-1).values[..., -1:]  # (B, 1): the k-th largest logit of each row
    return logits.masked_fill(logits < kth, NEG_INF)  # (B, V)


def _top_k_reference(logits: Tensor, k: int) -> Tensor:
    return top_k_filter(logits, k)


def _kth_largest(logits: Tensor, k: int) -> Tensor:
    return logits.topk(k, dim=-1).values[..., -1:]  # (B, 1)


TOP_K = Exercise(
    name="top_k_filter",
    reference=_top_k_reference,
    make_cases=_top_k_cases,
    mistakes=(
        Mistake("被过滤的 logit 应设为 -inf，而不是 0：e^0 = 1，这些 token 仍然会被抽到。",
                lambda z, k: z.masked_fill(z < _kth_largest(z, k), 0.0)),
        Mistake("留下的是最小的 k 个：top-k 要保留 logit 最大的 k 个（topk 默认 largest=True）。",
                lambda z, k: z.masked_fill(z > z.topk(k, dim=-1, largest=False).values[..., -1:], NEG_INF)),
        Mistake("少留了一个：第 k 大的 logit 本身也要保留，"
                "比较时应去掉「小于」第 k 大的值（<），而不是「小于等于」（<=）。",
                lambda z, k: z.masked_fill(z <= _kth_largest(z, k), NEG_INF)),
        Mistake("应返回过滤后的 logits（被去掉的位置是 -inf），而不是 softmax 之后的概率。",
                lambda z, k: z.masked_fill(z < _kth_largest(z, k), NEG_INF).softmax(dim=-1)),
        Mistake("多留了一个：保留最大的 k 个，你留下了 k + 1 个（第 k 大的值是 topk(k).values[..., -1]）。",
                lambda z, k: z.masked_fill(z < _kth_largest(z, k + 1), NEG_INF)),
    ),
    forbidden=(
        Forbidden("本题要求只用 torch 的基本运算（如 topk、masked_fill），不要调用课程包（tc.top_k_filter）",
                  course=True, example=course_top_k_filter),
    ),
)
check_top_k = TOP_K.check


# ---- 练习 2: top-p (nucleus) -----------------------------------------------------------------

def _top_p_cases() -> list[tuple[Tensor, float]]:
    g = torch.Generator().manual_seed(11)
    # The last case puts the mass before the third likeliest token exactly at p (exact in float32):
    # the nucleus is complete without it, which tells ">= p" from "> p".
    exact = torch.tensor([[0.125, 0.0625, 0.5, 0.0625, 0.25]]).log()  # (1, 5)
    # Then a nucleus of a single token (p below the largest probability), logits in the thousands
    # (one token holds all the mass; exp overflows), and the first case's twin.
    return [(_logits(g, 3, 13), 0.8), (_logits(g, 2, 29), 0.6), (_logits(g, 5, 8), 0.9),
            (exact, 0.75), (_logits(g, 4, 6), 0.05),
            Case((500.0 * torch.randn(2, 9, generator=g), 0.9), atol=LARGE_ATOL, note=BIG_LOGITS_NOTE),
            (_logits(g, 3, 13), 0.8)]  # (B, V), p


def _top_p_reference(logits: Tensor, p: float) -> Tensor:
    return top_p_filter(logits, p)


# Each wrong nucleus filter: the sort, the mass ranked above each token and the rule that drops it.

def _unsorted(logits: Tensor, order: Tensor, drop: Tensor) -> Tensor:
    """``logits`` with -inf where ``drop`` (in the sorted order ``order``) says so: back in vocabulary order."""
    return logits.masked_fill(drop.scatter(-1, order, drop), NEG_INF)


def _crossing_dropped(logits: Tensor, p: float) -> Tensor:
    probs, order = logits.softmax(dim=-1).sort(dim=-1, descending=True)  # (B, V)
    return _unsorted(logits, order, probs.cumsum(dim=-1) > p)  # drops the token that crosses p as well


def _strictly_above(logits: Tensor, p: float) -> Tensor:
    probs, order = logits.softmax(dim=-1).sort(dim=-1, descending=True)
    return _unsorted(logits, order, probs.cumsum(dim=-1) - probs > p)  # keeps one where the mass before is p


def _logits_summed(logits: Tensor, p: float) -> Tensor:
    values, order = logits.sort(dim=-1, descending=True)  # logits where probabilities belong
    return _unsorted(logits, order, values.cumsum(dim=-1) - values >= p)


def _ascending(logits: Tensor, p: float) -> Tensor:
    probs, order = logits.softmax(dim=-1).sort(dim=-1)  # the least likely token first
    return _unsorted(logits, order, probs.cumsum(dim=-1) - probs >= p)


def _left_sorted(logits: Tensor, p: float) -> Tensor:
    probs = logits.softmax(dim=-1).sort(dim=-1, descending=True).values
    drop = probs.cumsum(dim=-1) - probs >= p
    return logits.sort(dim=-1, descending=True).values.masked_fill(drop, NEG_INF)  # never put back in order


def _naive_nucleus(logits: Tensor, p: float) -> Tensor:
    probs, order = naive_softmax(logits).sort(dim=-1, descending=True)  # exp without subtracting the max
    return _unsorted(logits, order, probs.cumsum(dim=-1) - probs >= p)


TOP_P = Exercise(
    name="top_p_filter",
    reference=_top_p_reference,
    make_cases=_top_p_cases,
    mistakes=(
        Mistake("边界错了：让累计概率「跨过」p 的那个 token 也要保留（否则可能一个都不剩）。"
                "判断一个 token 去留时，看的是排在它前面的概率之和是否已经 >= p。",
                _crossing_dropped),
        Mistake("边界多留了一个：排在前面的概率之和恰好等于 p 时，核已经凑够了，这个 token 不该再留。"
                "判断条件是「前面的概率之和 >= p 就去掉」，而不是「> p」。",
                _strictly_above),
        Mistake("累加的应是 softmax 之后的概率，而不是 logits：只有概率才能和阈值 p 比较。",
                _logits_summed),
        Mistake("排序方向反了：核采样从最可能的 token 开始累加（descending=True）。",
                _ascending),
        Mistake("忘了把结果放回词表顺序：排序后得到的掩码要用 scatter（或按 argsort 的逆）映射回原来的位置。",
                _left_sorted),
        Mistake(NAIVE_HINT, _naive_nucleus),
    ),
    reference_dtype=None,  # the boundary case is exact in float32, as the learner computes it
)
check_top_p = TOP_P.check


# ---- 练习 3: log-probability of a continuation -----------------------------------------------

def _log_prob_cases() -> list[tuple | Case]:
    g = torch.Generator().manual_seed(12)
    cases = []
    for b, t, v in [(2, 5, 9), (3, 8, 6), (1, 4, 13), (4, 2, 5), (2, 5, 9)]:  # (B, T, V); T = 2; twin
        cases.append((_logits(g, b * t, v).view(b, t, v), torch.randint(0, v, (b, t), generator=g)))
    # logits in the thousands; in row 0 every next token is the likeliest one (its log-probability ~0)
    logits, tokens = 250.0 * _logits(g, 12, 7).view(2, 6, 7), torch.randint(0, 7, (2, 6), generator=g)
    tokens[0, 1:] = logits[0, :-1].argmax(-1)
    return cases + [Case((logits, tokens), atol=1e-2, note=BIG_LOGITS_NOTE)]  # sums of log-probabilities ~ -1e3


def _log_prob_reference(logits: Tensor, tokens: Tensor) -> Tensor:
    log_probs = logits.log_softmax(dim=-1)[:, :-1]  # (B, T - 1, V): position t predicts token t + 1
    return log_probs.gather(-1, tokens[:, 1:, None]).squeeze(-1).sum(dim=-1)  # (B,)


def _of_next(log_probs: Tensor, tokens: Tensor) -> Tensor:
    """``log_probs[:, t, tokens[:, t + 1]]`` for t < T - 1: ``(B, T - 1)`` (whatever ``log_probs`` holds)."""
    return log_probs[:, :-1].gather(-1, tokens[:, 1:, None]).squeeze(-1)


LOG_PROB = Exercise(
    name="sequence_log_prob",
    reference=_log_prob_reference,
    make_cases=_log_prob_cases,
    atol=1e-4,  # sums of up to 7 log-probabilities of ~-5: float32 rounds them to ~2e-6
    mistakes=(
        Mistake("错位了：位置 t 的 logits 预测的是下一个 token tokens[:, t+1]，"
                "所以要用 logits[:, :-1] 去对 tokens[:, 1:]。",
                lambda z, x: z.log_softmax(dim=-1).gather(-1, x[..., None]).squeeze(-1).sum(dim=-1)),
        Mistake("直接取了 logits：logits 不是对数概率，要先做 log_softmax（在词表那一维上）。",
                lambda z, x: _of_next(z, x).sum(dim=-1)),
        Mistake("log_softmax 的维度不对：要在最后一维（词表 V）上归一化，即 dim=-1。",
                lambda z, x: _of_next(z.log_softmax(dim=1), x).sum(dim=-1)),
        Mistake("应把各步的对数概率相加（序列概率是各步概率之积），而不是取平均。",
                lambda z, x: _of_next(z.log_softmax(dim=-1), x).mean(dim=-1)),
        Mistake(LOG_OF_SOFTMAX_HINT, lambda z, x: _of_next(naive_log_softmax(z), x).sum(dim=-1)),
        Mistake(NAIVE_LSE_HINT, lambda z, x: _of_next(overflowing_log_softmax(z), x).sum(dim=-1)),
    ),
)
check_sequence_log_prob = LOG_PROB.check


check_beam_search = BEAM.check

EXERCISES = (TOP_K, TOP_P, LOG_PROB, BEAM)
