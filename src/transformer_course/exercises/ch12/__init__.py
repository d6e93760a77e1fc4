"""Checkers for chapter 12 (上下文窗口).

Each exercise lists the typical mistakes it recognises (among them the numerically naive ones,
which only logits in the thousands expose); ``tests/test_exercises.py`` proves that every one of them
is rejected with its own hint. The last ordinary case of each exercise is the first case's twin.

The generation exercise runs the learner's loop on small seeded models with learned positions
(max_len = window), built without touching the global random state; every greedy choice of the
reference wins by a clear logit gap, so tokens are compared exactly; the model's ValueError for an
input longer than the window reaches the learner as a Chinese sentence.
"""
from __future__ import annotations


import torch
from torch import Tensor
from torch.nn import functional as F

from .._core import Case, Exercise, Mistake
from .sliding_window import GENERATE  # 练习 1, the sliding-window loop: its own module
from .._stability import (BIG_LOGITS_NOTE, LOG_OF_SOFTMAX_HINT, NAIVE_LSE_HINT, naive_log_softmax,
                         overflowing_log_softmax)

_F64 = torch.float64  # byte and token counts: exact integers far beyond 2**24


# ---- 练习 2: one layer's attention scores against the whole KV cache --------------------------

def _scores_cases() -> list[tuple]:
    # (lengths, n_layers, n_heads, n_kv_heads, d_head). The first case has every factor different
    # (2, n_layers, n_heads, n_kv_heads, n_heads / n_kv_heads) and a length where the two sizes are
    # exactly equal (24); then GPT-2 small (multi-head) and a 7B-like model with grouped-query
    # attention. The last is the first's twin (its model, other lengths, among them 1). Both sizes
    # are returned: a ratio alone cannot tell "cache of n_heads" from "scores of n_kv_heads".
    return [
        (torch.tensor([16.0, 24.0, 100.0, 1000.0], dtype=_F64), 3, 4, 2, 8),
        (torch.tensor([64.0, 1024.0, 8192.0], dtype=_F64), 12, 12, 12, 64),
        (torch.tensor([512.0, 2048.0, 4096.0, 32768.0, 131072.0], dtype=_F64), 32, 32, 8, 128),
        (torch.tensor([1.0, 48.0, 7.0, 4096.0], dtype=_F64), 3, 4, 2, 8),
    ]


def _scores_and_cache(lengths: Tensor, n_layers: int, n_heads: int, n_kv_heads: int,
                      d_head: int) -> tuple[Tensor, Tensor]:
    """Values in one layer's score matrices and in the whole KV cache, batch 1: two (N,) tensors."""
    scores = n_heads * lengths * lengths  # one N x N matrix per query head
    cache = 2 * n_layers * n_kv_heads * d_head * lengths  # K and V of every layer and position
    return scores, cache


SCORES = Exercise(
    name="scores_vs_cache",
    reference=_scores_and_cache,
    make_cases=_scores_cases,
    mistakes=(
        Mistake("缓存少了因子 2：KV cache 每个位置既存 K，也存 V。",
                lambda n, L, H, Hkv, d: (H * n * n, L * Hkv * d * n)),  # K only
        Mistake("缓存用了查询头数 n_heads：分组查询注意力（GQA）里只缓存 n_kv_heads 组 K/V。",
                lambda n, L, H, Hkv, d: (H * n * n, 2 * L * H * d * n)),  # a K/V pair per query head
        Mistake("分数矩阵用了 K/V 头数 n_kv_heads：分组查询注意力里几个查询头共用一组 K/V，"
                "但每个查询头仍各算一张 N×N 的分数矩阵，一层共 n_heads 张。",
                lambda n, L, H, Hkv, d: (Hkv * n * n, 2 * L * Hkv * d * n)),  # a score matrix per K/V head
        Mistake("缓存只算了一层：要比较的是一层的分数矩阵和全部 n_layers 层的 KV cache。",
                lambda n, L, H, Hkv, d: (H * n * n, 2 * Hkv * d * n)),  # one layer's cache
        Mistake("分数矩阵漏了头数：每个查询头各有一张 N×N 的分数矩阵，一层共 n_heads 张。",
                lambda n, L, H, Hkv, d: (n * n, 2 * L * Hkv * d * n)),  # one head's scores
        Mistake("分数矩阵的大小不对：每个头是 N×N（每个 query 对每个 key 一个分数），随 N² 增长；"
                "N×d_head 是 Q 或 K 的大小。",
                lambda n, L, H, Hkv, d: (H * n * d, 2 * L * Hkv * d * n)),  # N x d_head: the size of Q
        Mistake("只数了因果掩码下的一半分数：可读实现存下的是完整的 N×N 矩阵，被遮住的位置也占着内存"
                "（分数里是 -inf，权重里是 0）。",
                lambda n, L, H, Hkv, d: (H * n * (n + 1) / 2, 2 * L * Hkv * d * n)),  # the kept half only
        Mistake("缓存里只有 K 和 V：因子是 2，不是 3（Q 用过就丢，不进缓存）。",
                lambda n, L, H, Hkv, d: (H * n * n, 3 * L * Hkv * d * n)),  # Q, K and V
    ),
    dtype=_F64,  # the statement asks for float64
)
check_scores_vs_cache = SCORES.check


# ---- 练习 3: the usable context window = min of three limits --------------------------------

GIB = 2.0**30


def _window_cases() -> list[tuple]:
    # (gpu_bytes, weight_bytes, kv_bytes_per_token, position_limit, train_len). Each case has a GPU
    # too small for the weights, one where memory binds at a non-integer ratio, and ones where the
    # position limit or the training length binds.
    # The third has a fraction above 1/2 (10 GiB: 11702.86 tokens) and an exact fit (11 GiB: 16384);
    # the last is the first's twin: a GPU that holds the weights and nothing more.
    return [
        (torch.tensor([8.0, 16.0, 24.0], dtype=_F64) * GIB, 13.5 * GIB, 2.0**18 * 3, 32768, 4096),
        (torch.tensor([0.5, 2.0, 16.0, 48.0], dtype=_F64) * GIB, 1.0 * GIB, 2.0**17 * 5, 2048, 8192),
        (torch.tensor([6.0, 10.0, 11.0, 40.0, 141.0], dtype=_F64) * GIB, 7.5 * GIB, 2.0**15 * 7, 131072, 65536),
        (torch.tensor([13.5, 14.0, 100.0], dtype=_F64) * GIB, 13.5 * GIB, 2.0**18 * 3, 32768, 4096),
    ]


def _window_reference(gpu: Tensor, weights: float, per_token: float, position_limit: int, train_len: int) -> Tensor:
    free = (gpu - weights).clamp(min=0)  # (M,) bytes left for the cache once the weights are in, never below 0
    memory = (free / per_token).floor()  # whole tokens only
    return memory.clamp(max=min(position_limit, train_len))  # min of the three limits


def _free_tokens(gpu: Tensor, weights: float, per_token: float) -> Tensor:
    return (gpu - weights).clamp(min=0) / per_token  # (M,) tokens the free memory holds, not yet whole


WINDOW = Exercise(
    name="usable_window",
    arg_names=("gpu_bytes", "weight_bytes", "kv_bytes_per_token", "position_limit", "train_len"),
    reference=_window_reference,
    make_cases=_window_cases,
    mistakes=(
        Mistake("三道闸门要取最小值：任何一道不满足，窗口就到头了；你取的是最大值。",
                lambda g, w, p, pos, tr: _free_tokens(g, w, p).floor().clamp(min=max(pos, tr))),  # the largest
        Mistake("显存要先放下模型权重，剩下的才能给 KV cache：先减去 weight_bytes。",
                lambda g, w, p, pos, tr: (g.clamp(min=0) / p).floor().clamp(max=min(pos, tr))),
        Mistake("token 数必须是整数：可用的 token 数要向下取整（torch.floor）。",
                lambda g, w, p, pos, tr: _free_tokens(g, w, p).clamp(max=min(pos, tr))),
        Mistake("显存连权重都放不下时，可用窗口是 0，不能是负数：先把剩余显存截到 0 以上。",
                lambda g, w, p, pos, tr: ((g - w) / p).floor().clamp(max=min(pos, tr))),
        Mistake("漏了训练长度这道闸门：模型没在更长的序列上训练过，质量就没有保证。",
                lambda g, w, p, pos, tr: _free_tokens(g, w, p).floor().clamp(max=pos)),
        Mistake("漏了位置编码这道闸门：位置编码不支持的长度，模型根本无法正确运行。",
                lambda g, w, p, pos, tr: _free_tokens(g, w, p).floor().clamp(max=tr)),
        Mistake("取整的方向不对：装不下的那一点零头不能算一个 token，要向下取整（torch.floor），不是四舍五入。",
                lambda g, w, p, pos, tr: _free_tokens(g, w, p).round().clamp(max=min(pos, tr))),
        Mistake("取整的方向不对：要向下取整（torch.floor）；向上取整会多算一个放不下的 token。",
                lambda g, w, p, pos, tr: _free_tokens(g, w, p).ceil().clamp(max=min(pos, tr))),
    ),
    dtype=_F64,  # the statement asks for float64
)
check_usable_window = WINDOW.check


# ---- 练习 4: loss at each position (the tool of the extrapolation experiment) ----------------

def _loss_cases() -> list[tuple | Case]:
    g = torch.Generator().manual_seed(12)
    dims = [(3, 5, 7), (2, 9, 4), (5, 6, 11), (4, 1, 6), (3, 5, 7)]  # (B, T, V); T = 1; the first's twin
    cases: list[tuple | Case] = [(torch.randn(b, t, v, generator=g) * 2, torch.randint(0, v, (b, t), generator=g))
                                 for b, t, v in dims]
    # logits in the thousands; at position 0 every target is the likeliest token (loss ~0)
    logits, targets = 500.0 * torch.randn(3, 4, 6, generator=g), torch.randint(0, 6, (3, 4), generator=g)
    targets[:, 0] = logits[:, 0].argmax(-1)
    return cases + [Case((logits, targets), atol=1e-2, note=BIG_LOGITS_NOTE)]  # losses ~ 1e3


def _token_losses(logits: Tensor, targets: Tensor) -> Tensor:
    return F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (B, V, T) -> (B, T)


def _loss_by_position(logits: Tensor, targets: Tensor) -> Tensor:
    losses = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (B, V, T) -> (B, T)
    return losses.mean(dim=0)  # (T,)


def _picked(values: Tensor, targets: Tensor) -> Tensor:
    return values.gather(-1, targets[..., None]).squeeze(-1)  # (B, T): the target's entry


LOSS = Exercise(
    name="loss_by_position",
    reference=_loss_by_position,
    make_cases=_loss_cases,
    mistakes=(
        Mistake("平均的维度不对：要对 batch（dim=0）求平均、保留每个位置，得到形状 (T,)；你对位置求了平均。",
                lambda lg, tg: _token_losses(lg, tg).mean(dim=1)),
        Mistake("对 batch 求了和而不是平均：每个位置的损失应是 B 条序列的平均值。",
                lambda lg, tg: _token_losses(lg, tg).sum(dim=0)),
        Mistake("少了负号：交叉熵是 -log p(目标)，应为正数。",
                lambda lg, tg: -_token_losses(lg, tg).mean(dim=0)),
        Mistake("用了概率而不是对数概率：交叉熵是 -log p(目标)，不是 -p(目标)。",
                lambda lg, tg: -_picked(lg.softmax(-1), tg).mean(dim=0)),
        Mistake("softmax 的维度不对：概率要在词表维度（最后一维，dim=-1）上归一化。",
                lambda lg, tg: -_picked(lg.log_softmax(1), tg).mean(dim=0)),
        Mistake("多移了一位：targets[:, t] 已经是位置 t 要预测的 token，不需要再错开。",
                lambda lg, tg: _token_losses(lg[:, :-1], tg[:, 1:]).mean(dim=0)),
        Mistake(LOG_OF_SOFTMAX_HINT, lambda lg, tg: -_picked(naive_log_softmax(lg), tg).mean(dim=0)),
        Mistake(NAIVE_LSE_HINT, lambda lg, tg: -_picked(overflowing_log_softmax(lg), tg).mean(dim=0)),
    ),
)
check_loss_by_position = LOSS.check

check_generate_sliding = GENERATE.check

EXERCISES = (GENERATE, SCORES, WINDOW, LOSS)
