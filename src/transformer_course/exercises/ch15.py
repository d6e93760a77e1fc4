"""Checkers for chapter 15 (注意力的现代形态).

Each exercise lists the typical mistakes it recognises; ``tests/test_exercises.py`` proves that every
one of them is rejected with its own hint. The last ordinary case of each exercise is an earlier case's
twin (its sizes, new values).

练习 1 (one block of the online softmax) starts from the empty state (m = -inf, l = 0, acc = 0), has
rows whose block is fully masked (all -inf), before and after finite scores, and scores in the
hundreds. 练习 2 (mean-pooling an MHA checkpoint's K/V heads into GQA heads) has groups of 2, 3 and 4,
H_kv = H (nothing to pool) and H_kv = 1 (multi-query). 练习 3 (one write into a ring buffer) covers an
empty cache, a cache not yet full, one that has wrapped around, a chunk longer than the window and a
window of 1.
"""
from __future__ import annotations


import torch
from torch import Tensor
from torch.nn import functional as F

from .. import attention as course_attention
from .. import kv_cache as course_cache
from ._core import Case, Exercise, Forbidden, Mistake, randn as _randn
from ._stability import LARGE_ATOL

_INF = float("inf")
_State = tuple[Tensor, Tensor, Tensor]  # (m, l, acc) of the online softmax


# ---- 练习 1: one block of the online softmax ----------------------------------------------------

def _online_cases() -> list[tuple | Case]:
    g = torch.Generator().manual_seed(1501)

    def state(n: int, d_v: int, scale: float = 1.0) -> _State:
        m = _randn(g, n, scale=scale)  # a running max, a positive sum, any accumulator
        return m, torch.rand(n, generator=g) * 3 + 0.5, _randn(g, n, d_v)

    cases: list[tuple | Case] = []
    # (N rows, b keys in the block, d_v): the empty start state (m = -inf, l = 0, acc = 0) ...
    n, b, dv = 3, 4, 5
    cases.append((torch.full((n,), -_INF), torch.zeros(n), torch.zeros(n, dv), _randn(g, n, b), _randn(g, b, dv)))
    # ... running states whose blocks raise some rows' max and not others' (the max is shifted by +-2)
    for n, b, dv in [(4, 6, 2), (2, 3, 7), (5, 1, 3)]:
        m, s, acc = state(n, dv)
        scores = _randn(g, n, b) + torch.tensor([2.0, -2.0] * n)[:n, None]
        cases.append((m, s, acc, scores, _randn(g, b, dv)))
    # rows fully masked so far (m = -inf) and blocks fully masked (all -inf), in every combination
    n, b, dv = 4, 3, 6
    m, s, acc = state(n, dv)
    m[:2], s[:2], acc[:2] = -_INF, 0.0, 0.0  # rows 0, 1: nothing seen yet
    scores = _randn(g, n, b)
    scores[0], scores[2] = -_INF, -_INF  # row 0: still nothing; row 2: a masked block after real keys
    scores[3, 1] = -_INF  # row 3: one masked key
    cases.append((m, s, acc, scores, _randn(g, b, dv)))
    # the twin of the second case (its sizes, new values)
    m, s, acc = state(4, 2)
    cases.append((m, s, acc, _randn(g, 4, 6) - 1.5, _randn(g, 6, 2)))
    # real scores far below zero (about -20000): a guard that clamps the max to a finite floor such as
    # -1e4 (instead of replacing only -inf) shifts these rows wrongly and their exp underflows to 0
    m, s, acc = state(3, 2)
    m = m - 20000.0
    cases.append(Case((m, s, acc, _randn(g, 3, 4) - 20000.0, _randn(g, 4, 2)), atol=LARGE_ATOL,
                      note="这一组的分数都在 −20000 附近：它们是真实的分数，不是被遮住的位置"))
    # scores in the hundreds: exp without subtracting the max overflows
    m, s, acc = state(3, 4, scale=200.0)
    cases.append(Case((m, s, acc, _randn(g, 3, 5, scale=200.0), _randn(g, 5, 4)), atol=LARGE_ATOL,
                      note="这一组的分数在数百的量级：exp 一定要在减去新的最大值之后再算，否则会溢出成 inf"))
    return cases


def _online_reference(m: Tensor, denom: Tensor, acc: Tensor, scores: Tensor, v: Tensor) -> _State:
    m_new = torch.maximum(m, scores.amax(dim=-1))  # (N,) the max over everything seen
    shift = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)  # rows with nothing seen: exp(-inf) = 0
    p = torch.exp(scores - shift[:, None])  # (N, b) the block's terms under the new max
    r = torch.exp(m - shift)  # (N,) the old sums, moved from the old max to the new one
    return m_new, denom * r + p.sum(dim=-1), acc * r[:, None] + p @ v  # (N,), (N,), (N, d_v)


def _no_acc_rescale(m: Tensor, denom: Tensor, acc: Tensor, scores: Tensor, v: Tensor) -> _State:
    m_new = torch.maximum(m, scores.amax(dim=-1))
    shift = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
    p = torch.exp(scores - shift[:, None])
    r = torch.exp(m - shift)
    return m_new, denom * r + p.sum(dim=-1), acc + p @ v  # acc keeps the old max's scale


def _no_l_rescale(m: Tensor, denom: Tensor, acc: Tensor, scores: Tensor, v: Tensor) -> _State:
    m_new = torch.maximum(m, scores.amax(dim=-1))
    shift = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
    p = torch.exp(scores - shift[:, None])
    r = torch.exp(m - shift)
    return m_new, denom + p.sum(dim=-1), acc * r[:, None] + p @ v  # denom keeps the old max's scale


def _flipped_rescale(m: Tensor, denom: Tensor, acc: Tensor, scores: Tensor, v: Tensor) -> _State:
    m_new = torch.maximum(m, scores.amax(dim=-1))
    shift = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
    p = torch.exp(scores - shift[:, None])
    r = torch.exp(shift - m)  # exp(m_new - m): the sign flipped
    return m_new, denom * r + p.sum(dim=-1), acc * r[:, None] + p @ v


def _block_max_only(m: Tensor, denom: Tensor, acc: Tensor, scores: Tensor, v: Tensor) -> _State:
    m_new = scores.amax(dim=-1)  # the block's max, not compared with the running max
    shift = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
    p = torch.exp(scores - shift[:, None])
    r = torch.exp(m - shift)
    return m_new, denom * r + p.sum(dim=-1), acc * r[:, None] + p @ v


def _minus_inf_minus_inf(m: Tensor, denom: Tensor, acc: Tensor, scores: Tensor, v: Tensor) -> _State:
    m_new = torch.maximum(m, scores.amax(dim=-1))
    p = torch.exp(scores - m_new[:, None])  # -inf - (-inf) = NaN where nothing has been seen
    r = torch.exp(m - m_new)
    return m_new, denom * r + p.sum(dim=-1), acc * r[:, None] + p @ v


def _clamped_guard(m: Tensor, denom: Tensor, acc: Tensor, scores: Tensor, v: Tensor) -> _State:
    m_new = torch.maximum(m, scores.amax(dim=-1))
    shift = m_new.clamp(min=-1e4)  # a finite floor instead of "0 where nothing was seen"
    p = torch.exp(scores - shift[:, None])
    r = torch.exp(m - shift)
    return m_new, denom * r + p.sum(dim=-1), acc * r[:, None] + p @ v


def _online_via_softmax(m: Tensor, denom: Tensor, acc: Tensor, scores: Tensor, v: Tensor) -> _State:
    m_new = torch.maximum(m, scores.amax(dim=-1))
    return m_new, denom, acc + torch.softmax(scores, dim=-1) @ v  # the block's softmax, not its update


ONLINE = Exercise(
    name="online_softmax_update",
    arg_names=("m", "l", "acc", "scores", "v"),
    reference=_online_reference,
    make_cases=_online_cases,
    mistakes=(
        Mistake("acc 没有重新缩放：最大值从 m 变成 m_new 时，旧的 acc 是按 exp(s − m) 累加的，"
                "要先乘以 exp(m − m_new) 再加上本块的 p @ v。", _no_acc_rescale,
                nudge="返回的 m 和 l 都对，只有 acc 不对：本块的最大值比之前大时，"
                      "旧的 acc 是在哪个最大值下累加的？"),
        Mistake("l 没有重新缩放：旧的分母 l 是按旧的最大值 m 累加的，要先乘以 exp(m − m_new) 再加上本块的 Σp。",
                _no_l_rescale, nudge="返回的 m 和 acc 都对，只有 l 不对：旧的 l 是在哪个最大值下累加的？"),
        Mistake("缩放因子的符号反了：应乘以 exp(m − m_new)（≤ 1，把旧的和换到更大的新最大值之下），"
                "而不是 exp(m_new − m)。", _flipped_rescale,
                nudge="新的最大值比旧的大时，旧的和应该变大还是变小？看看你乘上的那个因子。"),
        Mistake("新的最大值只取了本块的最大值：m_new = max(m, 本块的最大值)，要和之前的最大值比较。",
                _block_max_only, nudge="看返回的 m：如果之前见过的分数比本块的都大，新的最大值是多少？"),
        Mistake("一行还什么都没看到（m = −inf）而本块又全被遮住时，m_new 也是 −inf，−inf − (−inf) = NaN："
                "这时把减去的最大值当作 0（exp(−inf) = 0，l 和 acc 保持 0）。两处减法（本块的 s − m_new 和旧和的 "
                "m − m_new）都要这样保护。", _minus_inf_minus_inf,
                nudge="出现 NaN 的是哪几行？那些行的 m 是多少，本块的分数又是多少？算一算你的每一处减法。"),
        Mistake("用 clamp 给最大值设了一个有限的下限来防 NaN：真实分数比这个下限还小的行（如 −20000）也被改了，"
                "exp(s − 下限) 下溢成 0。只在 m_new 是 −inf 的那些行把它换成 0（torch.where）。", _clamped_guard,
                nudge="只有分数都在 −20000 附近的那组不对：在那些行里，你减去的是不是真正的最大值？"),
    ),
    forbidden=(
        Forbidden("本题要求手写分块 softmax 的更新（exp、max、求和），不要调用 softmax 或 logsumexp",
                  functions=(torch.softmax, F.softmax, torch.Tensor.softmax, torch.logsumexp,
                             torch.Tensor.logsumexp, F.log_softmax, torch.log_softmax, torch.Tensor.log_softmax,
                             F.softmin, torch.special.softmax, torch.special.log_softmax,
                             torch.special.logsumexp),
                  example=_online_via_softmax),
        Forbidden("本题要求手写分块 softmax 的更新，不要调用课程包（tc.tiled_attention 等）",
                  course=True, example=lambda m, denom, acc, scores, v: (
                      torch.maximum(m, scores.amax(-1)), denom,
                      course_attention.tiled_attention(scores[:, None, :1], scores[:, None, :1], acc[:, None])[:, 0])),
    ),
)
check_online_softmax_update = ONLINE.check


# ---- 练习 2: mean-pool an MHA checkpoint's K/V heads into GQA heads ----------------------------

def _pool_cases() -> list[tuple]:
    g = torch.Generator().manual_seed(1502)
    # (n_heads, n_kv_heads, d_head, C): groups of 3, 4 and 2, nothing to pool (H_kv = H), multi-query
    # (H_kv = 1), then the first case's twin
    sizes = [(6, 2, 4, 5), (8, 2, 3, 7), (6, 3, 5, 4), (4, 4, 2, 3), (6, 1, 3, 5), (6, 2, 4, 5)]
    return [(_randn(g, h * d, c), h, h_kv) for h, h_kv, d, c in sizes]


def _pool_reference(w: Tensor, n_heads: int, n_kv_heads: int) -> Tensor:
    group = n_heads // n_kv_heads
    d_head = w.shape[0] // n_heads
    heads = w.reshape(n_kv_heads, group, d_head, w.shape[1])  # head h = g * group + i sits at [g, i]
    return heads.mean(dim=1).reshape(n_kv_heads * d_head, w.shape[1])  # (H_kv * d_head, C)


def _pool_interleaved(w: Tensor, n_heads: int, n_kv_heads: int) -> Tensor:
    d_head = w.shape[0] // n_heads
    heads = w.reshape(n_heads // n_kv_heads, n_kv_heads, d_head, w.shape[1])  # groups h % H_kv
    return heads.mean(dim=0).reshape(n_kv_heads * d_head, w.shape[1])


def _pool_first_head(w: Tensor, n_heads: int, n_kv_heads: int) -> Tensor:
    d_head = w.shape[0] // n_heads
    heads = w.reshape(n_kv_heads, n_heads // n_kv_heads, d_head, w.shape[1])
    return heads[:, 0].reshape(n_kv_heads * d_head, w.shape[1])  # keeps one head per group


def _pool_sum(w: Tensor, n_heads: int, n_kv_heads: int) -> Tensor:
    d_head = w.shape[0] // n_heads
    heads = w.reshape(n_kv_heads, n_heads // n_kv_heads, d_head, w.shape[1])
    return heads.sum(dim=1).reshape(n_kv_heads * d_head, w.shape[1])  # G times too large


def _pool_rows_within_head(w: Tensor, n_heads: int, n_kv_heads: int) -> Tensor:
    group = n_heads // n_kv_heads
    d_head = w.shape[0] // n_heads
    rows = w.reshape(n_kv_heads, d_head, group, w.shape[1])  # consecutive rows taken as the group axis
    return rows.mean(dim=2).reshape(n_kv_heads * d_head, w.shape[1])


POOL = Exercise(
    name="pool_kv_heads",
    reference=_pool_reference,
    make_cases=_pool_cases,
    mistakes=(
        Mistake("分组方式不对：一组是相邻的 G = H / H_kv 个头（头 h 属于组 h // G），"
                "不是相隔 H_kv 的头（h % H_kv）。先 reshape 成 (H_kv, G, d_head, C)。", _pool_interleaved,
                nudge="写出 H = 4、H_kv = 2 时每一组包含哪几个头：是相邻的头，还是相隔的头？"),
        Mistake("只保留了每组的第一个头：GQA 论文的做法是把一组的 G 个头取平均（mean pooling）。", _pool_first_head,
                nudge="你的结果里，每组除第一个头以外的头起作用了吗？"),
        Mistake("求和而不是平均：一组 G 个头加起来大了 G 倍，要除以 G（用 mean）。", _pool_sum,
                nudge="每组测试里，你的结果都恰好是答案的 G = H / H_kv 倍：合并一组头时，该求和还是求平均？"),
        Mistake("reshape 的顺序不对：权重的行是「头 0 的 d_head 行、头 1 的 d_head 行……」，"
                "应 reshape 成 (H_kv, G, d_head, C) 再对 G 那一维取平均，而不是 (H_kv, d_head, G, C)。",
                _pool_rows_within_head,
                nudge="w 的第 0 行到第 d_head − 1 行属于哪个头？看看你 reshape 出的每一维各是什么。"),
    ),
)
check_pool_kv_heads = POOL.check


# ---- 练习 3: one write into a ring buffer -------------------------------------------------------

def _rolling_cases() -> list[tuple]:
    g = torch.Generator().manual_seed(1503)
    # (window W, d, pos already written, T new): an empty cache, not yet full, wrapped around (pos not a
    # multiple of W), a chunk longer than the window on a wrapped cache, a window of 1, a chunk that wraps
    # during the write, then the third case's twin (its sizes and pos, new values)
    sizes = [(4, 3, 0, 2), (5, 2, 3, 1), (5, 2, 13, 1), (3, 4, 7, 5), (1, 3, 5, 1), (6, 5, 9, 4), (5, 2, 13, 1)]
    return [(_randn(g, w, d), _randn(g, t, d), pos) for w, d, pos, t in sizes]


def _rolling_reference(buffer: Tensor, new: Tensor, pos: int) -> tuple[Tensor, Tensor]:
    window, t = buffer.shape[0], new.shape[0]
    kept = buffer[[p % window for p in range(max(0, pos - window), pos)]]  # oldest first, before writing
    out = buffer.clone()
    for i in range(max(0, t - window), t):  # only the last `window` new positions survive
        out[(pos + i) % window] = new[i]
    return out, torch.cat([kept, new])  # (W, d), (min(pos, W) + T, d)


def _ring(buffer: Tensor, new: Tensor, pos: int, slot) -> Tensor:
    out = buffer.clone()
    for i in range(max(0, new.shape[0] - buffer.shape[0]), new.shape[0]):
        out[slot(pos + i)] = new[i]
    return out


def _rolling_modulo_minus_one(buffer: Tensor, new: Tensor, pos: int) -> tuple[Tensor, Tensor]:
    w = buffer.shape[0]
    slot = (lambda p: p % (w - 1)) if w > 1 else (lambda p: 0)
    kept = buffer[[slot(p) for p in range(max(0, pos - w), pos)]]
    return _ring(buffer, new, pos, slot), torch.cat([kept, new])


def _rolling_first_kept_plus_one(buffer: Tensor, new: Tensor, pos: int) -> tuple[Tensor, Tensor]:
    w = buffer.shape[0]
    kept = buffer[[p % w for p in range(max(0, pos - w + 1), pos)]]  # one position too few
    return _ring(buffer, new, pos, lambda p: p % w), torch.cat([kept, new])


def _rolling_slot_order(buffer: Tensor, new: Tensor, pos: int) -> tuple[Tensor, Tensor]:
    w = buffer.shape[0]
    kept = buffer[: min(pos, w)]  # slots 0, 1, ...: not the order of the positions once wrapped
    return _ring(buffer, new, pos, lambda p: p % w), torch.cat([kept, new])


def _rolling_new_first(buffer: Tensor, new: Tensor, pos: int) -> tuple[Tensor, Tensor]:
    w = buffer.shape[0]
    kept = buffer[[p % w for p in range(max(0, pos - w), pos)]]
    return _ring(buffer, new, pos, lambda p: p % w), torch.cat([new, kept])


def _rolling_read_after_write(buffer: Tensor, new: Tensor, pos: int) -> tuple[Tensor, Tensor]:
    w = buffer.shape[0]
    out = _ring(buffer, new, pos, lambda p: p % w)
    kept = out[[p % w for p in range(max(0, pos - w), pos)]]  # read after the new keys overwrote some
    return out, torch.cat([kept, new])


def _rolling_with_course(buffer: Tensor, new: Tensor, pos: int) -> tuple[Tensor, Tensor]:
    w, d = buffer.shape
    cache = course_cache.RollingKVCache(n_layers=1, batch_size=1, n_heads=1, d_head=d, window=w,
                                        dtype=buffer.dtype)
    cache.k[0, 0, 0], cache.pos = buffer, pos
    keys, _ = cache.layer(0).update(new[None, None], new[None, None])
    return cache.k[0, 0, 0].clone(), keys[0, 0]


def _rolling_repeated_slots(buffer: Tensor, new: Tensor, pos: int) -> tuple[Tensor, Tensor]:
    w = buffer.shape[0]
    kept = buffer[[p % w for p in range(max(0, pos - w), pos)]]
    out = buffer.clone()
    out[(pos + torch.arange(new.shape[0])) % w] = new  # every new position, some slots twice
    return out, torch.cat([kept, new])


ROLLING = Exercise(
    name="rolling_update",
    reference=_rolling_reference,
    make_cases=_rolling_cases,
    mistakes=(
        Mistake("槽位算错了：位置 p 写进槽位 p % W（W 是窗口大小，也就是 buffer 的行数），不是 p % (W − 1)。",
                _rolling_modulo_minus_one, nudge="位置 W 应写进哪个槽位？把你的公式代进去算一算。"),
        Mistake("保留的位置少了一个：写入之前缓存里还有最近的 min(pos, W) 个位置，"
                "第一个是 max(0, pos − W)，不是 pos − W + 1。", _rolling_first_kept_plus_one,
                nudge="数一数返回值[1] 里旧位置的个数：写入之前，缓存已满时里面有几个位置？"),
        Mistake("保留的键按槽位顺序返回了：绕过一圈之后，槽位 0 不再是最早的位置；"
                "要按位置 first_kept, …, pos − 1 的顺序读取槽位 p % W。", _rolling_slot_order,
                nudge="还没绕过一圈的几组测试都对：绕过一圈之后，最早的那个位置在哪个槽位？"),
        Mistake("拼接顺序反了：缓存里的旧位置在前，新位置在后（位置从小到大）。", _rolling_new_first,
                nudge="返回值[1] 的第 0 行应是哪个位置的键？"),
        Mistake("先写后读：新位置会覆盖最旧的槽位，要在写入之前先把保留的旧键读出来。",
                _rolling_read_after_write,
                nudge="缓存还没满的几组测试都对：满了之后，你读出的「旧键」是在写入之前还是之后读的？"),
    ),
    forbidden=(
        Forbidden("本题要求自己用张量运算写出环形缓冲区，不要调用课程包（tc.RollingKVCache）",
                  course=True, example=_rolling_with_course),
        Forbidden("同一个槽位在一次赋值里被写了不止一次（新位置比窗口还多时，(pos + i) % W 会重复）："
                  "PyTorch 不保证留下的是哪一个值（在 GPU 上真的会变）。只写最后 W 个新位置",
                  unique_writes=True, example=_rolling_repeated_slots),
    ),
)
check_rolling_update = ROLLING.check

EXERCISES = (ONLINE, POOL, ROLLING)
