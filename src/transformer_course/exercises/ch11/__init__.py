"""Checkers for chapter 11 (KV Cache).

Each exercise lists the typical mistakes it recognises (among them a softmax that calls ``exp``
without subtracting the max, which only the cases with scores in the hundreds expose);
``tests/test_exercises.py`` proves that every one of them is rejected with its own hint. Edge cases:
an empty cache, one K/V head per query head (MHA) and one for all (MQA), lengths 0 and 1; the last
ordinary case of each exercise is the first case's twin (its sizes, new values).

Exercise 2 is a class: ``check_doubling_kv_cache(cls)`` runs small models with instances of it as
their cache (one layer and four, a prompt of one token, chunks after a prefill, two caches alive at
once; the default capacity, capacity 1 and 3 and one never outgrown, a chunk that needs two doublings
at once) and checks each of its answers on the way, including the forwards in which its buffers must
move to new memory.
"""
from __future__ import annotations


import torch
from torch import Tensor

from ...attention import causal_mask, scaled_dot_product_attention
from .._core import Case, Exercise, Mistake, randn as _randn
from .._stability import LARGE_ATOL, LARGE_NOTE, NAIVE_HINT, naive_softmax



from .doubling_cache import DOUBLING, check_doubling_kv_cache  # noqa: F401  (练习 2, a class)


# ---- 练习 1: one attention step with a cache ---------------------------------------------------

def _cached_cases() -> list[tuple | Case]:
    g = torch.Generator().manual_seed(20)
    cases: list[tuple | Case] = []
    # (B, H, T_past, T_new, d_head, d_v): a decode step (T_new = 1), two chunks, an empty cache (the
    # prefill), the first's twin; then scores in the hundreds
    for b, h, tp, tn, d, dv in [(2, 3, 5, 1, 4, 6), (1, 2, 7, 3, 8, 5), (3, 4, 6, 2, 5, 7), (2, 2, 0, 4, 3, 5),
                                (2, 3, 5, 1, 4, 6), (1, 2, 4, 3, 8, 2)]:
        q, k_new, v_new = _randn(g, b, h, tn, d), _randn(g, b, h, tn, d), _randn(g, b, h, tn, dv)
        cases.append((q, k_new, v_new, _randn(g, b, h, tp, d), _randn(g, b, h, tp, dv)))
    q, k_new, v_new, k_past, v_past = cases.pop()
    return cases + [Case((12.0 * q, 12.0 * k_new, v_new, 12.0 * k_past, v_past), atol=LARGE_ATOL, note=LARGE_NOTE)]


_Step = tuple[Tensor, Tensor, Tensor]  # (out (B, H, T_new, d_v), k_all, v_all)


def _cached_reference(q: Tensor, k_new: Tensor, v_new: Tensor, k_past: Tensor, v_past: Tensor) -> _Step:
    k_all = torch.cat([k_past, k_new], dim=2)  # (B, H, T_past + T_new, d_head)
    v_all = torch.cat([v_past, v_new], dim=2)
    mask = causal_mask(q.shape[2], k_all.shape[2])  # new token i sees the past and new tokens <= i
    return scaled_dot_product_attention(q, k_all, v_all, mask=mask)[0], k_all, v_all


# Pieces the mistakes are written with.

def _attend(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    return scaled_dot_product_attention(q, k, v, mask=mask)[0]  # (B, H, T_q, d_v)


def _naive_attend(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
    scores = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).masked_fill(~mask, float("-inf"))  # (B, H, T_q, T_k)
    return naive_softmax(scores) @ v  # exp without subtracting the max


def _joined(k_new: Tensor, v_new: Tensor, k_past: Tensor, v_past: Tensor) -> tuple[Tensor, Tensor]:
    return torch.cat([k_past, k_new], dim=2), torch.cat([v_past, v_new], dim=2)  # the past first


def _no_past(q: Tensor, k_new: Tensor, v_new: Tensor, k_past: Tensor, v_past: Tensor) -> _Step:
    k_all, v_all = _joined(k_new, v_new, k_past, v_past)
    return _attend(q, k_new, v_new, causal_mask(q.shape[2])), k_all, v_all  # attends to the new K/V only


def _not_stored(q: Tensor, k_new: Tensor, v_new: Tensor, k_past: Tensor, v_past: Tensor) -> _Step:
    k_all, v_all = _joined(k_new, v_new, k_past, v_past)
    return _attend(q, k_all, v_all, causal_mask(q.shape[2], k_all.shape[2])), k_past, v_past  # the old cache


def _new_first(q: Tensor, k_new: Tensor, v_new: Tensor, k_past: Tensor, v_past: Tensor) -> _Step:
    k_all, v_all = torch.cat([k_new, k_past], dim=2), torch.cat([v_new, v_past], dim=2)
    return _attend(q, k_all, v_all, causal_mask(q.shape[2], k_all.shape[2])), k_all, v_all


def _no_mask(q: Tensor, k_new: Tensor, v_new: Tensor, k_past: Tensor, v_past: Tensor) -> _Step:
    k_all, v_all = _joined(k_new, v_new, k_past, v_past)
    return _attend(q, k_all, v_all, None), k_all, v_all


def _mask_one_too_far(q: Tensor, k_new: Tensor, v_new: Tensor, k_past: Tensor, v_past: Tensor) -> _Step:
    k_all, v_all = _joined(k_new, v_new, k_past, v_past)
    mask = torch.ones(q.shape[2], k_all.shape[2], dtype=torch.bool).tril(k_past.shape[2] + 1)  # sees i + 1 too
    return _attend(q, k_all, v_all, mask), k_all, v_all


def _naive(q: Tensor, k_new: Tensor, v_new: Tensor, k_past: Tensor, v_past: Tensor) -> _Step:
    k_all, v_all = _joined(k_new, v_new, k_past, v_past)
    return _naive_attend(q, k_all, v_all, causal_mask(q.shape[2], k_all.shape[2])), k_all, v_all


def _mask_without_offset(q: Tensor, k_new: Tensor, v_new: Tensor, k_past: Tensor, v_past: Tensor) -> _Step:
    k_all, v_all = _joined(k_new, v_new, k_past, v_past)
    mask = torch.ones(q.shape[2], k_all.shape[2], dtype=torch.bool).tril()  # diagonal 0: wrong
    return _attend(q, k_all, v_all, mask), k_all, v_all


CACHED = Exercise(
    name="attend_with_cache",
    reference=_cached_reference,
    make_cases=_cached_cases,
    mistakes=(
        Mistake("只关注了新 token：新的 query 要和缓存里的全部历史 K/V 加上新的 K/V 一起做注意力。", _no_past,
                nudge="新 token 的 query 能看到哪些位置？k_past 在你的注意力里起作用了吗？"),
        Mistake("新的 K/V 没有存进缓存：返回的 k_all、v_all 应是历史与新值沿位置维（dim=2）拼接的结果。", _not_stored,
                nudge="看返回值[1]、[2]（k_all、v_all）：下一步解码时，缓存里应当有哪些位置？"),
        Mistake("拼接顺序反了：历史在前、新 token 在后（torch.cat([k_past, k_new], dim=2)），位置才对得上。",
                _new_first, nudge="k_all 的第 0 个位置应是哪个 token 的键？"),
        Mistake("一次送进多个新 token 时还需要因果掩码：第 i 个新 token 不能看到排在它后面的新 token。", _no_mask,
                nudge="只送 1 个新 token 的那几组测试都对：一次送进好几个新 token 时，它们之间谁能看见谁？"),
        Mistake("掩码少了偏移：新 token 排在历史之后，第 i 个新 token 能看到的是前 T_past + i + 1 个位置，"
                "即 tril(diagonal=T_past)，而不是左上角的三角。", _mask_without_offset,
                nudge="把你的掩码打印出来：第 0 个新 token 在整个序列里排第几？它能看到多少个位置？"),
        Mistake("掩码的偏移多了一：第 i 个新 token 能看到前 T_past + i + 1 个位置，即 tril(diagonal=T_past)；"
                "tril(diagonal=T_past + 1) 让它看到了下一个新 token。", _mask_one_too_far,
                nudge="把你的掩码打印出来：数一数第 0 个新 token 能看到的位置，是不是正好 T_past + 1 个？"),
        Mistake(NAIVE_HINT, _naive),
    ),
)
check_attend_with_cache = CACHED.check


# ---- 练习 3: grouped-query attention ----------------------------------------------------------

def _gqa_cases() -> list[tuple | Case]:
    g = torch.Generator().manual_seed(21)
    cases: list[tuple | Case] = []
    # (B, H, H_kv, T, d, d_v): groups of 2 and 4, H_kv = H (plain MHA), H_kv = 1 (MQA), the first's
    # twin; then scores in the hundreds
    for b, h, h_kv, t, d, dv in [(2, 6, 3, 5, 4, 7), (1, 4, 2, 6, 8, 3), (3, 8, 2, 4, 5, 6), (2, 3, 3, 4, 6, 5),
                                 (1, 4, 1, 3, 2, 6), (2, 6, 3, 5, 4, 7), (2, 4, 2, 5, 8, 3)]:
        cases.append((_randn(g, b, h, t, d), _randn(g, b, h_kv, t, d), _randn(g, b, h_kv, t, dv)))
    q, k, v = cases.pop()
    return cases + [Case((12.0 * q, 12.0 * k, v), atol=LARGE_ATOL, note=LARGE_NOTE)]


def _gqa_reference(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    n_rep = q.shape[1] // k.shape[1]  # query heads per K/V head
    k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)  # head h: K/V head h // n_rep
    return scaled_dot_product_attention(q, k, v, mask=causal_mask(q.shape[2]))[0]  # (B, H, T, d_v)


def _grouped(kv: Tensor, q: Tensor) -> Tensor:
    return kv.repeat_interleave(q.shape[1] // kv.shape[1], dim=1)  # (B, H, T, d): head h gets K/V head h // n_rep


def _tiled(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    n_rep = q.shape[1] // k.shape[1]
    k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)  # head h gets K/V head h % H_kv
    return _attend(q, k, v, causal_mask(q.shape[2]))


def _first_head_only(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    k, v = k[:, :1].expand(-1, q.shape[1], -1, -1), v[:, :1].expand(-1, q.shape[1], -1, -1)  # K/V head 0
    return _attend(q, k, v, causal_mask(q.shape[2]))


def _unscaled(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    return scaled_dot_product_attention(q, _grouped(k, q), _grouped(v, q), mask=causal_mask(q.shape[2]), scale=1.0)[0]


GQA = Exercise(
    name="grouped_query_attention",
    reference=_gqa_reference,
    make_cases=_gqa_cases,
    mistakes=(
        Mistake("分组方式不对：相邻的 H // H_kv 个查询头共用一个 K/V 头（头 h 用 K/V 头 h // (H // H_kv)），"
                "应使用 repeat_interleave，而不是 repeat（那样头 h 用的是 h % H_kv）。",
                _tiled, nudge="写出 H = 4、H_kv = 2 时每个查询头用的 K/V 头编号，再和题目的公式 ⌊h / (H/H_kv)⌋ 对照。"),
        Mistake("缺少因果掩码：解码器里位置 i 只能关注 j <= i。",
                lambda q, k, v: _attend(q, _grouped(k, q), _grouped(v, q), None),
                nudge="只有最后一个位置的输出是对的：其他位置看到了哪些 key？"),
        Mistake("所有查询头都用了第 0 个 K/V 头：那是多查询注意力（MQA），这里每组查询头有自己的 K/V 头。",
                _first_head_only, nudge="H_kv = 1 的那组测试是对的：有不止一个 K/V 头时，查询头 h 用的是哪一个？"),
        Mistake("缺少缩放：softmax 之前要把分数除以 √d_head。",
                _unscaled, nudge="softmax 之前的分数有多大？和第 3、4 章的缩放点积注意力逐项对照。"),
        Mistake(NAIVE_HINT, lambda q, k, v: _naive_attend(q, _grouped(k, q), _grouped(v, q), causal_mask(q.shape[2]))),
    ),
)
check_grouped_query_attention = GQA.check


# ---- 练习 4: the memory formula -----------------------------------------------------------------

GIB = 2**30


def _gib_cases() -> list[tuple]:
    # (seq_lens, n_layers, n_heads, n_kv_heads, d_head, batch_size, bytes_per_value)
    # lengths 0 and 1, unsorted; the last is the first's twin (its sizes and model, other lengths)
    return [
        (torch.tensor([128, 1024, 4096]), 12, 12, 4, 64, 3, 2),
        (torch.tensor([512, 8192]), 32, 32, 8, 128, 5, 2),
        (torch.tensor([16, 64, 256, 1024]), 6, 8, 2, 32, 7, 4),
        (torch.tensor([1, 0, 300, 77, 2048]), 4, 16, 16, 8, 1, 1),
        (torch.tensor([2048, 7, 640]), 12, 12, 4, 64, 3, 2),
    ]


def _gib_reference(seq_lens: Tensor, n_layers: int, n_heads: int, n_kv_heads: int, d_head: int, batch_size: int,
                   bytes_per_value: int) -> Tensor:
    per_position = 2 * n_layers * n_kv_heads * d_head * bytes_per_value  # K and V of every layer, in bytes
    return seq_lens.double() * per_position * batch_size / GIB  # (N,)


GIB_EXERCISE = Exercise(
    name="kv_cache_gib",
    reference=_gib_reference,
    make_cases=_gib_cases,
    mistakes=(
        Mistake("少了因子 2：每个位置既要存 K，也要存 V。",
                lambda s, L, H, Hkv, d, B, nb: s.double() * (L * Hkv * d * nb) * B / GIB,
                nudge="你的结果恰好是答案的一半：每个位置要存哪几个向量？"),
        Mistake("用了查询头数 n_heads：缓存里存的是 K/V 头，分组查询注意力时应乘 n_kv_heads。",
                lambda s, L, H, Hkv, d, B, nb: s.double() * (2 * L * H * d * nb) * B / GIB,
                nudge="n_heads = n_kv_heads 的那组测试是对的：缓存里存的是哪一种头？"),
        Mistake("单位不对：GiB 是 2**30 字节，而不是 10**9 字节（那是 GB）。",
                lambda s, L, H, Hkv, d, B, nb: s.double() * (2 * L * Hkv * d * nb) * B / 1e9,
                nudge="每组都差同一个比例（约 7%）：1 GiB 是多少字节？"),
        Mistake("少乘了层数：每一层都有自己的 K/V 缓存。",
                lambda s, L, H, Hkv, d, B, nb: s.double() * (2 * Hkv * d * nb) * B / GIB,
                nudge="每组测试里，答案都恰好是你的结果的 n_layers 倍：缓存里有哪几份东西是每层各存一份的？"),
        Mistake("少乘了 batch 大小：batch 里每条序列都有自己的缓存。",
                lambda s, L, H, Hkv, d, B, nb: s.double() * (2 * L * Hkv * d * nb) / GIB,
                nudge="batch_size = 1 的那组测试是对的：同时服务几条序列时，缓存该怎样变？"),
        Mistake("位置数差了一：长度为 N 的序列缓存 N 个位置的 K/V，不要加 1。",
                lambda s, L, H, Hkv, d, B, nb: (s.double() + 1) * (2 * L * Hkv * d * nb) * B / GIB,
                nudge="每组多出的量都一样，恰好是一个位置的缓存：长度为 N 的序列存几个位置？"),
    ),
    dtype=torch.float64,  # the statement asks for float64
)
check_kv_cache_gib = GIB_EXERCISE.check

EXERCISES = (CACHED, DOUBLING, GQA, GIB_EXERCISE)
