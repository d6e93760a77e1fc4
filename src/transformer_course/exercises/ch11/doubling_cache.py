"""Chapter 11, 练习 2: a KV-cache class that needs no max_len and reallocates only when it doubles.

The cases, the ``Exercise`` and the class-taking check function (each typical mistake is a small wrong
cache class in ``doubling_variants``); the harness that runs a learner's cache inside a model is in
``cache_harness``. ``ch11`` lists the exercise.
"""
from __future__ import annotations

from typing import Any

import torch

from .cache_harness import DEFAULT_CAPACITY, _as_function, _capacities, _doubling_reference, _model
from .._core import Case, Exercise, Forbidden, Mistake, shown
from .doubling_variants import (_AdvanceByOne, _Catting, _class_attribute, _DefaultDtypeBuffers, _DoublingOnce,
                                 _GrowingByCapacity,
                                 _NoAdvance, _NotCopying, _OneLayerForAll, _PackageCacheInside, _PosInUpdate,
                                 _PosSetToN, _ReturningBuffer, _ReturningNew, _SwappingKV, _with_layers,
                                 _WritingAtZero)

# ---- 练习 2: a KV cache that doubles its buffers -------------------------------------------------
#
# The learner writes a class; check_doubling_kv_cache(cls) turns it into the function the Exercise
# evaluates: a small seeded model gets new instances of the class as its cache and is fed the tokens
# chunk by chunk (a prefill, then decoding steps or chunks); the result is the logits of every
# position, compared with the same run on tc.KVCache. While the model uses the learner's cache, each
# of its answers is checked against what it was given (its pos; each update's K/V, exact copies in
# order) and against the statement's capacity rule: the returned k_all and v_all must live in new
# memory (another storage data_ptr than in the forward before) exactly in the forwards where
# pos + T_new outgrows the capacity, so a wrong cache gets a sentence on what it did.

_DOUBLING_CASES = [
    # (n_layers, n_heads, d_model, vocab, positional, B, chunks, n_caches, capacity[, dtype])
    # a prefill of 3, then single tokens and pairs up to 17 positions: full at 4, 8, 16, new buffers at
    # 5, 9 and 17 (growing by 4 would move them at 13 too)
    (2, 4, 24, 37, "learned", 2, (3, 1, 1, 2, 1, 1, 2, 2, 2, 1, 1), 1, 4),
    # one layer, batch 1, a prompt of one token, capacity 1: the chunk of 12 doubles 4 -> 8 -> 16 at once
    (1, 2, 16, 29, "rope", 1, (1, 1, 1, 12, 1, 1), 1, 1),
    # capacity 3: the first chunk already needs 6; then 12 and 24
    (3, 3, 30, 41, "alibi", 3, (4, 3, 2, 1, 3), 1, 3),
    # two caches alive at once (rows 0 | 1, 2)
    (2, 2, 20, 23, "sinusoidal", 3, (3, 2, 1, 1, 2), 2, 4),
    # four layers, one head, a chunk of 4 mid-decode; capacity 10 is never outgrown (full at the end)
    (4, 1, 12, 19, "rope", 2, (2, 1, 4, 1, 1, 1), 1, 10),
    # a float64 model: the buffers take k's dtype (a float32 buffer would round the history)
    (2, 3, 18, 31, "alibi", 2, (2, 3, 1, 1), 1, 2, torch.float64),
    # the first case's twin: its model, other tokens
    (2, 4, 24, 37, "learned", 2, (3, 1, 1, 2, 1, 1, 2, 2, 2, 1, 1), 1, 4),
]


def _plan(chunks: tuple[int, ...], capacity: int) -> str:
    """The statement's capacity rule on one case, in words (for the case's note)."""
    caps = _capacities(list(chunks), capacity)
    moves = [f + 1 for f in range(1, len(caps)) if caps[f] != caps[f - 1]]
    start = "默认容量 4" if capacity == DEFAULT_CAPACITY else f"capacity={capacity}"
    if not moves:
        return f"{start}，容量 {caps[0]} 一直够用，缓冲区不应换新"
    steps = " → ".join(str(c) for c in dict.fromkeys(caps))
    return f"{start}，容量依次为 {steps}，缓冲区应在第 {'、'.join(map(str, moves))} 次前向换新（共 {len(moves)} 次）"


def _doubling_cases() -> list[Case]:
    g = torch.Generator().manual_seed(22)
    cases = []
    for seed, (n_layers, n_heads, d_model, vocab, positional, b, chunks, n_caches, capacity, *dtype) in enumerate(
            _DOUBLING_CASES):
        seed = 0 if seed == len(_DOUBLING_CASES) - 1 else seed  # the twin: the first case's weights
        model = _model(n_layers, n_heads, d_model, vocab, positional, sum(chunks) + 3, 100 + seed).to(*dtype)
        idx = torch.randint(0, vocab, (b, sum(chunks)), generator=g)
        two = "；两个缓存同时使用（batch 的行分给两个实例，轮流前向），实例之间不能共享状态" if n_caches > 1 else ""
        kind = "、float64 的模型" if dtype else ""
        note = (f"{n_layers} 层{kind}、{n_heads} 个头、d_head = {d_model // n_heads}、{positional} 位置编码、"
                f"batch {b}，每次前向送入的 token 数依次为 {list(chunks)}；{_plan(chunks, capacity)}{two}")
        cases.append(Case((idx, torch.tensor(chunks), model, n_caches, capacity), note=note))
    return cases


# The typical wrong classes. _Layer and _Cache are the right design (one object per layer, buffers
# written in place at pos, doubled until they fit, the history copied once); each mistake changes one thing.

DOUBLING = Exercise(
    name="doubling_kv_cache",
    arg_names=(),  # the harness's own arguments: a case is told by its note
    reference=_doubling_reference,
    make_cases=_doubling_cases,
    mistakes=(
        Mistake("每次前向返回的 k_all 都换了一块新内存：torch.cat（或 clone()、contiguous()）每一步都把全部历史搬一遍，"
                "这正是 11.2 节的 GrowingCache。请在缓冲区里原地写入 [pos, pos + T_new)，返回它前 pos + T_new 个位置的"
                "切片（视图，不复制），只在装不下时才换缓冲区。", _as_function(_with_layers(_Catting))),
        Mistake("容量装不下时要翻倍（capacity *= 2），你每次只加了一个初始容量：那样生成 n 个 token 要换约 "
                "n / capacity 次缓冲区，翻倍只要约 log₂(n / capacity) 次。",
                _as_function(_with_layers(_GrowingByCapacity))),
        Mistake("一次送入的位置可能多到要连续翻倍不止一次（pos + T_new 超过容量的两倍）：要用 while 循环翻倍，"
                "直到装得下，而不是只翻倍一次（if）。", _as_function(_with_layers(_DoublingOnce))),
        Mistake("换缓冲区时忘了复制历史：新缓冲区的前 pos 个位置要先从旧缓冲区复制过来"
                "（new_k[:, :, :pos] = self.k[:, :, :pos]），再写入新位置。", _as_function(_with_layers(_NotCopying))),
        Mistake("缓冲区的 dtype 和设备要取自 k（k.new_zeros(...)，或 torch.zeros(..., dtype=k.dtype, "
                "device=k.device)）：你的缓冲区是默认的 float32、在 CPU 上，"
                "float64（或 GPU 上）的模型的历史会被改写或放错设备。",
                _as_function(_with_layers(_DefaultDtypeBuffers)),
                nudge="只有 float64 模型的那组测试不对：你的缓冲区是什么 dtype？"),
        Mistake("update 要返回前 pos + T_new 个位置（self.k[:, :, :pos + T_new]），你返回了整个缓冲区"
                "（capacity 个位置，后面是还没写入的空位）。", _as_function(_with_layers(_ReturningBuffer))),
        Mistake("新位置要写进 [pos, pos + T_new)，你写在了缓冲区的开头 [0, T_new)，把历史覆盖了。",
                _as_function(_with_layers(_WritingAtZero))),
        Mistake("pos 前进得太多：update 每一层都会调用一次，pos 只应在 advance(n) 里前进（模型在所有层都写完之后"
                "调用一次 advance）。", _as_function(_PosInUpdate)),
        Mistake("所有层共用了同一个缓存对象：每一层要有自己的 K/V。[x] * n_layers 得到的是同一个对象的 n_layers "
                "个引用，要用 [Layer(...) for _ in range(n_layers)]。", _as_function(_OneLayerForAll)),
        Mistake("不同的缓存实例共用了同一份 K/V：类体里（方法之外）写的列表、字典（如 layers = []）是类属性，"
                "可变的默认参数也一样，所有实例共用一份；请在 __init__ 里为每个实例新建（self.layers = [...]）。",
                _as_function(_class_attribute)),
        Mistake("update 要返回到目前为止的全部 K/V（历史加上新传入的，长度 pos + T_new），你只返回了新传入的 k、v。",
                _as_function(_with_layers(_ReturningNew))),
        Mistake("pos 没有前进：advance(n) 要把 pos 加上 n，否则下一次前向的新 token 会被当成从位置 0 开始。",
                _as_function(_NoAdvance)),
        Mistake("advance(n) 要让 pos 前进 n（这次前向送入的 token 数），你每次只加了 1："
                "prefill 和分块送入时 n 大于 1。", _as_function(_AdvanceByOne)),
        Mistake("advance(n) 要把 n 加到 pos 上（self.pos += n），你把 pos 设成了 n。", _as_function(_PosSetToN)),
        Mistake("update 应按 (k_all, v_all) 的顺序返回，你把 K 和 V 对调了。",
                _as_function(_with_layers(_SwappingKV))),
    ),
    atol=1e-4,
    forbidden=(
        Forbidden("这道题要你自己写缓存：不要在类里使用课程包的 tc.KVCache（或课程包的其他函数），"
                  "用 torch 的张量和切片赋值即可", course=True, example=_as_function(_PackageCacheInside)),
    ),
)


def check_doubling_kv_cache(cls: Any) -> None:
    """Check a KV-cache class (pass the class itself) in small models; print one Chinese line.

    The verdicts are the exercise's; a problem the checker found while the model used the cache is
    told as what the cache did, and "你的函数" reads "你的缓存类" (the learner wrote a class).
    """
    if not isinstance(cls, type):
        print(f"{DOUBLING.name}：请传入你写的类本身（不要加括号创建实例），收到的是 {type(cls).__name__}。")
        return
    message = shown(DOUBLING.name, DOUBLING.evaluate(_as_function(cls)))
    print(message.replace("时你的函数抛出了 CacheError：", "：").replace("你的函数", "你的缓存类"))
