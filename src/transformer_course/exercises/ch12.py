"""Checkers for chapter 12 (上下文窗口).

Each exercise lists the typical mistakes it recognises; ``tests/test_exercises.py`` proves that
every one of them is rejected with its own hint.
"""
from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F

from ._core import Exercise, Mistake

_F64 = torch.float64  # byte and token counts: exact integers far beyond 2**24


# ---- 练习 1: KV cache size against the context length ---------------------------------------

def _kv_cases() -> list[tuple]:
    # (lengths, n_layers, n_heads, n_kv_heads, d_head, batch_size, bytes_per_value): the factors
    # 2, n_layers, batch_size, bytes_per_value and n_heads / n_kv_heads all differ within a case,
    # so that every forgotten factor gives a different answer.
    return [
        (torch.tensor([128.0, 1024.0, 4096.0], dtype=_F64), 12, 12, 4, 64, 3, 4),
        (torch.tensor([16.0, 100.0, 2048.0, 8192.0], dtype=_F64), 5, 8, 8, 16, 7, 8),
        (torch.tensor([1.0, 64.0, 512.0, 32768.0, 131072.0], dtype=_F64), 32, 32, 8, 128, 3, 4),
    ]


def _kv_bytes(lengths: Tensor, n_layers: int, n_heads: int, n_kv_heads: int, d_head: int,
              batch_size: int, bytes_per_value: int) -> Tensor:
    return 2 * n_layers * n_kv_heads * d_head * batch_size * bytes_per_value * lengths  # (N,)


KV_CACHE = Exercise(
    name="kv_cache_size",
    reference=_kv_bytes,
    make_cases=_kv_cases,
    mistakes=(
        Mistake("少了因子 2：KV cache 同时存 K 和 V 两份张量。",
                lambda n, L, h, kv, d, b, by: _kv_bytes(n, L, h, kv, d, b, by) / 2),
        Mistake("漏了层数：每一层注意力都有自己的 K/V 缓存，要乘 n_layers。",
                lambda n, L, h, kv, d, b, by: _kv_bytes(n, L, h, kv, d, b, by) / L),
        Mistake("漏了 batch：同时生成的每条序列各有一份缓存，要乘 batch_size。",
                lambda n, L, h, kv, d, b, by: _kv_bytes(n, L, h, kv, d, b, by) / b),
        Mistake("漏了每个数的字节数 bytes_per_value（fp32 为 4，fp16/bf16 为 2）：结果要以字节计。",
                lambda n, L, h, kv, d, b, by: _kv_bytes(n, L, h, kv, d, b, by) / by),
        Mistake("用了查询头数 n_heads：分组查询注意力（GQA）里只有 n_kv_heads 组 K/V 需要缓存。",
                lambda n, L, h, kv, d, b, by: _kv_bytes(n, L, h, h, d, b, by)),
        Mistake("长度用成了平方：KV cache 每个位置存一份 K/V，随长度线性增长；随 N² 增长的是注意力分数矩阵。",
                lambda n, L, h, kv, d, b, by: _kv_bytes(n, L, h, kv, d, b, by) * n),
    ),
)
check_kv_cache_size = KV_CACHE.check


# ---- 练习 2: the usable context window = min of three limits --------------------------------

GIB = 2.0**30


def _window_cases() -> list[tuple]:
    # (gpu_bytes, weight_bytes, kv_bytes_per_token, position_limit, train_len). Each case has a GPU
    # too small for the weights, one where memory binds at a non-integer ratio, and ones where the
    # position limit or the training length binds.
    return [
        (torch.tensor([8.0, 16.0, 24.0], dtype=_F64) * GIB, 13.5 * GIB, 2.0**18 * 3, 32768, 4096),
        (torch.tensor([0.5, 2.0, 16.0, 48.0], dtype=_F64) * GIB, 1.0 * GIB, 2.0**17 * 5, 2048, 8192),
        (torch.tensor([6.0, 10.0, 11.0, 40.0, 141.0], dtype=_F64) * GIB, 7.5 * GIB, 2.0**15 * 7, 131072, 65536),
    ]


def _memory_limit(gpu: Tensor, weights: float, per_token: float, *, subtract: bool = True,
                  floor: bool = True, clamp: bool = True) -> Tensor:
    free = gpu - weights if subtract else gpu  # (M,) bytes left for the cache
    if clamp:
        free = free.clamp(min=0)
    tokens = free / per_token
    return tokens.floor() if floor else tokens


def _window(gpu: Tensor, weights: float, per_token: float, position_limit: int, train_len: int,
            **memory_options: bool) -> Tensor:
    memory = _memory_limit(gpu, weights, per_token, **memory_options)  # (M,)
    return memory.clamp(max=min(position_limit, train_len))  # min of the three limits


WINDOW = Exercise(
    name="usable_window",
    reference=_window,
    make_cases=_window_cases,
    mistakes=(
        Mistake("三道闸门要取最小值：任何一道不满足，窗口就到头了；你取的是最大值。",
                lambda g, w, p, pos, tr: torch.maximum(_memory_limit(g, w, p), torch.full_like(g, max(pos, tr)))),
        Mistake("显存要先放下模型权重，剩下的才能给 KV cache：先减去 weight_bytes。",
                lambda g, w, p, pos, tr: _window(g, w, p, pos, tr, subtract=False)),
        Mistake("token 数必须是整数：可用的 token 数要向下取整（torch.floor）。",
                lambda g, w, p, pos, tr: _window(g, w, p, pos, tr, floor=False)),
        Mistake("显存连权重都放不下时，可用窗口是 0，不能是负数：先把剩余显存截到 0 以上。",
                lambda g, w, p, pos, tr: _window(g, w, p, pos, tr, clamp=False)),
        Mistake("漏了训练长度这道闸门：模型没在更长的序列上训练过，质量就没有保证。",
                lambda g, w, p, pos, tr: _window(g, w, p, pos, 10**12)),
        Mistake("漏了位置编码这道闸门：位置编码不支持的长度，模型根本无法正确运行。",
                lambda g, w, p, pos, tr: _window(g, w, p, 10**12, tr)),
    ),
)
check_usable_window = WINDOW.check


# ---- 练习 3: loss at each position (the tool of the extrapolation experiment) ----------------

def _loss_cases() -> list[tuple[Tensor, Tensor]]:
    g = torch.Generator().manual_seed(12)
    dims = [(3, 5, 7), (2, 9, 4), (5, 6, 11)]  # (B, T, V)
    return [(torch.randn(b, t, v, generator=g) * 2, torch.randint(0, v, (b, t), generator=g)) for b, t, v in dims]


def _token_losses(logits: Tensor, targets: Tensor) -> Tensor:
    return F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (B, V, T) -> (B, T)


def _loss_by_position(logits: Tensor, targets: Tensor) -> Tensor:
    return _token_losses(logits, targets).mean(dim=0)  # (T,)


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
                lambda lg, tg: -_loss_by_position(lg, tg)),
        Mistake("用了概率而不是对数概率：交叉熵是 -log p(目标)，不是 -p(目标)。",
                lambda lg, tg: -_picked(lg.softmax(-1), tg).mean(dim=0)),
        Mistake("softmax 的维度不对：概率要在词表维度（最后一维，dim=-1）上归一化。",
                lambda lg, tg: -_picked(lg.log_softmax(1), tg).mean(dim=0)),
        Mistake("多移了一位：targets[:, t] 已经是位置 t 要预测的 token，不需要再错开。",
                lambda lg, tg: _loss_by_position(lg[:, :-1], tg[:, 1:])),
    ),
)
check_loss_by_position = LOSS.check

EXERCISES = (KV_CACHE, WINDOW, LOSS)
