"""Checkers for chapter 9 (三种架构，以及为什么 Decoder-only 赢了).

Each exercise lists the typical mistakes it recognises (among them the numerically naive ones,
which only the cases of large magnitude expose); ``tests/test_exercises.py`` proves that every one
of them is rejected with its own hint. Edge cases: prefix lengths 0, 1 and T; position 0 selected,
every position of a row selected; no sequence at full length, a sequence of one token. The last
ordinary case of each exercise is the first case's twin (its sizes, new values).
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor
from torch.nn import functional as F

from ..attention import scaled_dot_product_attention
from ._core import Case, Exercise, Mistake, randn as _randn
from ._stability import (BIG_LOGITS_NOTE, LARGE_ATOL, LARGE_NOTE, LOG_OF_SOFTMAX_HINT, NAIVE_HINT,
                         NAIVE_LSE_HINT, naive_log_softmax, naive_softmax, overflowing_log_softmax)



# ---- 练习 1: prefix-LM attention ----------------------------------------------------------

def _prefix_cases() -> list[tuple | Case]:
    g = torch.Generator().manual_seed(91)
    # (B, T, d_k, d_v, prefix_len): every dimension differs, 1 < prefix_len < T - 1; then the edges
    # prefix_len = 0 (plain causal), 1 and T (fully bidirectional); the last is the first's twin.
    dims = [(2, 6, 4, 3, 3), (1, 8, 5, 7, 2), (3, 7, 9, 2, 4), (2, 5, 3, 4, 0), (1, 4, 6, 5, 4),
            (3, 3, 2, 6, 1), (2, 6, 4, 3, 3)]
    cases: list[tuple | Case] = [(_randn(g, b, t, dk), _randn(g, b, t, dk), _randn(g, b, t, dv), p)
                                 for b, t, dk, dv, p in dims]
    q, k = 12.0 * _randn(g, 2, 7, 8), 12.0 * _randn(g, 2, 7, 8)  # scores ~ ±300
    return cases + [Case((q, k, _randn(g, 2, 7, 3), 3), atol=LARGE_ATOL, note=LARGE_NOTE)]


def _prefix_reference(q: Tensor, k: Tensor, v: Tensor, prefix_len: int) -> tuple[Tensor, Tensor]:
    i = torch.arange(q.shape[-2])[:, None]  # (T, 1) queries
    j = torch.arange(q.shape[-2])[None, :]  # (1, T) keys
    mask = (j <= i) | (j < prefix_len)  # (T, T): causal, and the prefix's keys open to every query
    return scaled_dot_product_attention(q, k, v, mask=mask)


def _attend_where(q: Tensor, k: Tensor, v: Tensor,
                  allowed: Callable[[Tensor, Tensor], Tensor]) -> tuple[Tensor, Tensor]:
    """Attention in which query i may see key j where ``allowed(i, j)`` (i: (T, 1), j: (1, T))."""
    i, j = torch.arange(q.shape[-2])[:, None], torch.arange(q.shape[-2])[None, :]
    return scaled_dot_product_attention(q, k, v, mask=allowed(i, j))


def _prefix_scores(q: Tensor, k: Tensor, prefix_len: int) -> Tensor:
    """The scaled scores (B, T, T), with -1e9 where the prefix-LM mask hides a key."""
    i, j = torch.arange(q.shape[-2])[:, None], torch.arange(q.shape[-2])[None, :]
    return (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).masked_fill(~((j <= i) | (j < prefix_len)), -1e9)


def _naive_prefix(q: Tensor, k: Tensor, v: Tensor, prefix_len: int) -> tuple[Tensor, Tensor]:
    w = naive_softmax(_prefix_scores(q, k, prefix_len))  # exp without subtracting the max
    return w @ v, w


def _mask_after_softmax(q: Tensor, k: Tensor, v: Tensor, prefix_len: int) -> tuple[Tensor, Tensor]:
    w = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)  # (B, T, T)
    i, j = torch.arange(q.shape[-2])[:, None], torch.arange(q.shape[-2])[None, :]
    w = w * ((j <= i) | (j < prefix_len))  # masked after the softmax: rows no longer sum to 1
    return w @ v, w


PREFIX_LM = Exercise(
    name="prefix_lm_attention",
    reference=_prefix_reference,
    make_cases=_prefix_cases,
    mistakes=(
        Mistake("这是普通的因果掩码：前缀内部应当双向可见——前缀里的 key（j < prefix_len）对所有 query 都开放。",
                lambda q, k, v, p: _attend_where(q, k, v, lambda i, j: j <= i)),
        Mistake("完全没有遮挡：前缀之后的部分仍然是因果的，位置 i ≥ prefix_len 不能看见它之后的 token。",
                lambda q, k, v, p: scaled_dot_product_attention(q, k, v)),
        Mistake("方向反了：应当是「前缀里的 key 谁都能看」（按列 j < prefix_len 放开），"
                "而不是「前缀里的 query 能看见一切」（按行放开会让前缀偷看到后面的答案）。",
                lambda q, k, v, p: _attend_where(q, k, v, lambda i, j: (j <= i) | (i < p))),
        Mistake("前缀长度差了一：前缀是位置 0 … prefix_len-1，共 prefix_len 个位置（条件是 j < prefix_len）。",
                lambda q, k, v, p: _attend_where(q, k, v, lambda i, j: (j <= i) | (j < p + 1))),
        Mistake("掩码加在了 softmax 之后：被遮住的权重归零了，但每行之和不再是 1。应在 softmax 之前把分数设为 -inf。",
                _mask_after_softmax),
        Mistake("前缀少了一个位置：前缀是位置 0 … prefix_len-1（条件 j < prefix_len），你只放开了 j < prefix_len − 1。",
                lambda q, k, v, p: _attend_where(q, k, v, lambda i, j: (j <= i) | (j < p - 1))),
        Mistake(NAIVE_HINT, _naive_prefix),
    ),
)
check_prefix_lm_attention = PREFIX_LM.check


# ---- 练习 2: the masked-language-model loss -------------------------------------------------

def _mlm_cases() -> list[tuple | Case]:
    g = torch.Generator().manual_seed(92)
    cases: list[tuple | Case] = []
    for b, t, v in [(2, 7, 11), (3, 5, 9), (4, 9, 6), (2, 7, 11)]:  # (B, T, V); the last: the first's twin
        logits = _randn(g, b, t, v)
        targets = torch.randint(0, v, (b, t), generator=g)
        selected = torch.rand(b, t, generator=g) < 0.3
        selected[:, 1] = True  # at least one scored and one unscored position in every sequence
        selected[:, 0] = False
        cases.append((logits, targets, selected))
    # edges: position 0 selected, the last position alone, every position of a row
    selected = torch.tensor([[True, False, False, True], [False, False, False, True], [True, True, True, True]])
    cases.append((_randn(g, 3, 4, 5), torch.randint(0, 5, (3, 4), generator=g), selected))
    # logits in the thousands: the softmax of a target that is not the likeliest underflows to 0.
    # In row 0 every target is the likeliest token (every loss is ~0, and finite even then).
    logits = 500.0 * _randn(g, 2, 5, 7)
    targets = torch.randint(0, 7, (2, 5), generator=g)
    targets[0] = logits[0].argmax(-1)
    selected = torch.tensor([[False, False, True, False, False], [True, False, True, True, False]])
    return cases + [Case((logits, targets, selected), atol=LARGE_ATOL, note=BIG_LOGITS_NOTE)]


def _nll(log_probs: Tensor, targets: Tensor) -> Tensor:
    return -log_probs.gather(-1, targets[..., None]).squeeze(-1)  # (B, T)


def _token_losses(logits: Tensor, targets: Tensor) -> Tensor:
    return F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (B, T)


def _mlm_reference(logits: Tensor, targets: Tensor, selected: Tensor) -> Tensor:
    losses = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (B, T): at every position
    sel = selected.float()
    return (losses * sel).sum(1) / sel.sum(1)  # (B,) mean over the selected positions only


def _mean_over(losses: Tensor, weights: Tensor) -> Tensor:
    return (losses * weights).sum(1) / weights.sum(1)


MLM_LOSS = Exercise(
    name="masked_lm_loss",
    reference=_mlm_reference,
    make_cases=_mlm_cases,
    mistakes=(
        Mistake("你在所有位置上都算了损失（这是 CLM 的做法）：MLM 只在被选中（selected 为 True）的位置上计算交叉熵。",
                lambda lo, t, s: _token_losses(lo, t).mean(1)),
        Mistake("分母不对：应除以这条序列被选中的位置数 selected.sum(1)，而不是序列长度 T。",
                lambda lo, t, s: (_token_losses(lo, t) * s.float()).sum(1) / lo.shape[1]),
        Mistake("选反了：你平均的是没被选中的位置。MLM 的损失来自被遮住（selected 为 True）的位置。",
                lambda lo, t, s: _mean_over(_token_losses(lo, t), (~s).float())),
        Mistake("交叉熵要先做 log_softmax（或直接用 F.cross_entropy）：不能直接取目标 logit 的负值。",
                lambda lo, t, s: _mean_over(-lo.gather(-1, t[..., None]).squeeze(-1), s.float())),
        Mistake("log_softmax 的维度不对：要在最后一维（词表 V）上归一化，即 dim=-1。",
                lambda lo, t, s: _mean_over(_nll(torch.log_softmax(lo, dim=1), t), s.float())),
        Mistake(LOG_OF_SOFTMAX_HINT, lambda lo, t, s: _mean_over(_nll(naive_log_softmax(lo), t), s.float())),
        Mistake(NAIVE_LSE_HINT, lambda lo, t, s: _mean_over(_nll(overflowing_log_softmax(lo), t), s.float())),
    ),
)
check_masked_lm_loss = MLM_LOSS.check


# ---- 练习 3: sentence embeddings and their cosine similarities --------------------------------

def _similarity_cases() -> list[tuple[Tensor, Tensor]]:
    g = torch.Generator().manual_seed(93)
    cases = []
    for b, t, c in [(3, 5, 4), (4, 7, 6), (5, 6, 8), (3, 5, 4)]:  # (B, T, C); the last: the first's twin
        hidden = _randn(g, b, t, c) + 0.5  # an offset, so that padding changes the mean visibly
        lengths = torch.randint(2, t, (b,), generator=g)  # (B,): every sequence is padded
        lengths[0] = t  # ... except the first
        cases.append((hidden, lengths))
    # edges: no sequence at full length, and a sequence of a single token
    return cases + [(_randn(g, 4, 6, 3) + 0.5, torch.tensor([3, 1, 5, 2]))]


def _real(hidden: Tensor, lengths: Tensor) -> Tensor:
    return (torch.arange(hidden.shape[1])[None, :] < lengths[:, None]).float()  # (B, T): 1 = real token


def _pooled(hidden: Tensor, weights: Tensor) -> Tensor:
    return (hidden * weights[..., None]).sum(1) / weights.sum(1, keepdim=True)  # (B, C)


def _cosine(e: Tensor) -> Tensor:
    e = F.normalize(e, dim=-1)  # (B, C), unit length
    return e @ e.T  # (B, B)


def _with_cosine(pooled: Tensor) -> tuple[Tensor, Tensor]:
    return pooled, _cosine(pooled)  # what the exercise returns: (pooled (B, C), sims (B, B))


def _masked_sum(hidden: Tensor, lengths: Tensor) -> Tensor:
    return (hidden * _real(hidden, lengths)[..., None]).sum(1)  # (B, C): real tokens only, not averaged


def _similarity_reference(hidden: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
    real = (torch.arange(hidden.shape[1])[None, :] < lengths[:, None]).float()  # (B, T): 1 = real token
    pooled = (hidden * real[..., None]).sum(1) / real.sum(1, keepdim=True)  # (B, C): mean of the real tokens
    unit = F.normalize(pooled, dim=-1)  # (B, C)
    return pooled, unit @ unit.T  # (B, C), (B, B)


# The cosine matrix alone cannot tell a wrong denominator of the mean: a cosine ignores the length of
# each sentence vector. That is why the exercise returns the pooled vectors as well.
SIMILARITY = Exercise(
    name="similarity",
    reference=_similarity_reference,
    make_cases=_similarity_cases,
    mistakes=(
        Mistake("平均时把 padding 也算进去了：只对每条序列的前 lengths[b] 个真实位置取平均。",
                lambda h, n: _with_cosine(h.mean(1))),
        Mistake("padding 要按每条序列自己的长度去掉：第 b 条只平均前 lengths[b] 个位置；"
                "你只截到了整批最长的 lengths.max()。",
                lambda h, n: _with_cosine(h[:, : int(n.max())].mean(1))),
        Mistake("分母不对：padding 已经去掉了，但平均时要除以这条序列真实 token 的个数 lengths[b]，而不是序列长度 T。"
                "（余弦相似度不在乎句向量的长度，所以 sims 看不出这个错，pooled 却只有正确值的 lengths[b] / T。）",
                lambda h, n: _with_cosine(_masked_sum(h, n) / h.shape[1])),
        Mistake("只求了和，没有取平均：真实 token 的和还要除以它们的个数 lengths[b]。"
                "（余弦相似度不在乎句向量的长度，所以 sims 看不出这个错，pooled 却不对。）",
                lambda h, n: _with_cosine(_masked_sum(h, n))),
        Mistake("pooled 应是归一化之前的平均向量：单位长度的向量只用来计算余弦相似度，不要把它当作 pooled 返回。",
                lambda h, n: (lambda p: (F.normalize(p, dim=-1), _cosine(p)))(_pooled(h, _real(h, n)))),
        Mistake("忘了归一化：余弦相似度要先把每个句向量缩放到单位长度（F.normalize），再做点积。",
                lambda h, n: (lambda p: (p, p @ p.T))(_pooled(h, _real(h, n)))),
        Mistake("只用了第一个位置的向量：这里要求对所有真实 token 取平均（mean pooling）。",
                lambda h, n: _with_cosine(h[:, 0])),
        Mistake("归一化放错了地方：先对真实 token 取平均得到句向量，再把句向量归一化；"
                "只归一化每个 token 而不归一化平均结果，得到的不是余弦。",
                lambda h, n: (lambda p: (p, p @ p.T))(_pooled(F.normalize(h, dim=-1), _real(h, n)))),
    ),
)
check_similarity = SIMILARITY.check

EXERCISES = (PREFIX_LM, MLM_LOSS, SIMILARITY)
