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

import collections
import copy
import sys
import types
from typing import Any, Callable

import torch
from torch import Tensor, nn

from ..attention import causal_mask, scaled_dot_product_attention
from ..config import TransformerConfig
from ..kv_cache import KVCache
from ..models import DecoderOnly
from ._core import Case, Exercise, Forbidden, Mistake, randn as _randn
from ._guards import _Watch
from ._stability import LARGE_ATOL, LARGE_NOTE, NAIVE_HINT, naive_softmax



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


def _attend(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, softmax=None) -> Tensor:
    if softmax is not None:
        scores = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).masked_fill(~mask, float("-inf"))
        return softmax(scores) @ v
    return scaled_dot_product_attention(q, k, v, mask=mask)[0]


def _cached_reference(q: Tensor, k_new: Tensor, v_new: Tensor, k_past: Tensor, v_past: Tensor):
    k_all = torch.cat([k_past, k_new], dim=2)  # (B, H, T_past + T_new, d_head)
    v_all = torch.cat([v_past, v_new], dim=2)
    mask = causal_mask(q.shape[2], k_all.shape[2])  # new token i sees the past and new tokens <= i
    return _attend(q, k_all, v_all, mask), k_all, v_all


def _no_past(q, k_new, v_new, k_past, v_past):
    _, k_all, v_all = _cached_reference(q, k_new, v_new, k_past, v_past)
    return _attend(q, k_new, v_new, causal_mask(q.shape[2])), k_all, v_all


def _not_stored(q, k_new, v_new, k_past, v_past):
    out, _, _ = _cached_reference(q, k_new, v_new, k_past, v_past)
    return out, k_past, v_past


def _new_first(q, k_new, v_new, k_past, v_past):
    k_all, v_all = torch.cat([k_new, k_past], dim=2), torch.cat([v_new, v_past], dim=2)
    return _attend(q, k_all, v_all, causal_mask(q.shape[2], k_all.shape[2])), k_all, v_all


def _no_mask(q, k_new, v_new, k_past, v_past):
    _, k_all, v_all = _cached_reference(q, k_new, v_new, k_past, v_past)
    return _attend(q, k_all, v_all, None), k_all, v_all


def _mask_one_too_far(q, k_new, v_new, k_past, v_past):
    _, k_all, v_all = _cached_reference(q, k_new, v_new, k_past, v_past)
    mask = torch.ones(q.shape[2], k_all.shape[2], dtype=torch.bool).tril(k_past.shape[2] + 1)  # sees i + 1 too
    return _attend(q, k_all, v_all, mask), k_all, v_all


def _naive(q, k_new, v_new, k_past, v_past):
    _, k_all, v_all = _cached_reference(q, k_new, v_new, k_past, v_past)
    return _attend(q, k_all, v_all, causal_mask(q.shape[2], k_all.shape[2]), softmax=naive_softmax), k_all, v_all


def _mask_without_offset(q, k_new, v_new, k_past, v_past):
    _, k_all, v_all = _cached_reference(q, k_new, v_new, k_past, v_past)
    mask = torch.ones(q.shape[2], k_all.shape[2], dtype=torch.bool).tril()  # diagonal 0: wrong
    return _attend(q, k_all, v_all, mask), k_all, v_all


CACHED = Exercise(
    name="attend_with_cache",
    reference=_cached_reference,
    make_cases=_cached_cases,
    mistakes=(
        Mistake("只关注了新 token：新的 query 要和缓存里的全部历史 K/V 加上新的 K/V 一起做注意力。", _no_past),
        Mistake("新的 K/V 没有存进缓存：返回的 k_all、v_all 应是历史与新值沿位置维（dim=2）拼接的结果。", _not_stored),
        Mistake("拼接顺序反了：历史在前、新 token 在后（torch.cat([k_past, k_new], dim=2)），位置才对得上。",
                _new_first),
        Mistake("一次送进多个新 token 时还需要因果掩码：第 i 个新 token 不能看到排在它后面的新 token。", _no_mask),
        Mistake("掩码少了偏移：新 token 排在历史之后，第 i 个新 token 能看到的是前 T_past + i + 1 个位置，"
                "即 tril(diagonal=T_past)，而不是左上角的三角。", _mask_without_offset),
        Mistake("掩码的偏移多了一：第 i 个新 token 能看到前 T_past + i + 1 个位置，即 tril(diagonal=T_past)；"
                "tril(diagonal=T_past + 1) 让它看到了下一个新 token。", _mask_one_too_far),
        Mistake(NAIVE_HINT, _naive),
    ),
)
check_attend_with_cache = CACHED.check


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

class CacheError(Exception):
    """What the learner's cache did wrong, seen while the model used it (a Chinese sentence)."""


SHARED = ("类属性（类体里、方法之外的列表或字典）或可变的默认参数（def __init__(self, n_layers, k=[])）里存了 K/V："
          "它们只有一份，每个缓存实例改的都是它")
DEFAULT_CAPACITY = 4  # the statement's default: cases with this capacity call cls(n_layers) without it


def _capacities(chunks: list[int], capacity: int) -> list[int]:
    """The capacity after each forward, by the statement's rule: doubled until pos + T_new fits."""
    caps, end = [], 0
    for n in chunks:
        end += n
        while capacity < end:
            capacity *= 2
        caps.append(capacity)
    return caps


def _holds_tensor(x: Any, depth: int, seen: set[int]) -> bool:
    """Whether ``x`` reaches a tensor through containers and attributes, in ``depth`` steps at most."""
    if isinstance(x, torch.Tensor):
        return True
    if (depth == 0 or id(x) in seen or len(seen) > 5000
            or isinstance(x, (type, types.ModuleType, types.FunctionType, str, bytes))):
        return False
    seen.add(id(x))
    try:
        if isinstance(x, dict):
            items = list(x.values())
        elif isinstance(x, (list, tuple, set, frozenset, collections.deque)):
            items = list(x)
        else:
            items = list(vars(x).values()) if hasattr(x, "__dict__") else []
    except Exception:  # an object that cannot be looked into holds nothing we can see
        return False
    return any(_holds_tensor(item, depth - 1, seen) for item in items)


class _ClassState:
    """State kept on the learner's classes (class attributes, mutable default arguments) that holds
    tensors: K/V shared by every instance. A tensor that is itself a class attribute is allowed while
    it stays the same object (a constant), not when it is rebound."""

    def __init__(self) -> None:
        self.classes: list[type] = []
        self.tensors: dict[tuple[type, str], int] = {}

    def add(self, cls: type) -> None:
        new = [c for c in cls.__mro__ if c not in self.classes and c.__module__ not in ("builtins", "abc")
               and not c.__module__.startswith("torch")]
        if new:
            self.classes += new
            holds, tensors = self._look(new)
            self.tensors.update(tensors)
            if holds:
                raise CacheError(SHARED)

    def shared(self) -> bool:
        holds, tensors = self._look(self.classes)
        return holds or tensors != self.tensors

    @staticmethod
    def _look(classes: list[type]) -> tuple[bool, dict[tuple[type, str], int]]:
        holds, tensors = False, {}
        for c in classes:
            for name, value in list(vars(c).items()):
                if isinstance(value, torch.Tensor):
                    tensors[c, name] = id(value)
                    continue
                fns = ((value.fget, value.fset) if isinstance(value, property)
                       else (value.__func__,) if isinstance(value, (staticmethod, classmethod)) else (value,))
                defaults = [d for f in fns if isinstance(f, types.FunctionType)
                            for d in (*(f.__defaults__ or ()), *(f.__kwdefaults__ or {}).values())]
                stored = [d for d in defaults if not isinstance(d, torch.Tensor)]  # __init__(self, n, k=[])
                dunder = name.startswith("__") and name.endswith("__")  # __dict__, __doc__, ...: not state
                if not dunder and not isinstance(value, (property, types.FunctionType, staticmethod, classmethod)):
                    stored.append(value)
                holds = holds or any(_holds_tensor(s, 4, set()) for s in stored)
        return holds, tensors


def _kind(t: Tensor) -> str:
    layout = "" if t.layout == torch.strided else f"，{t.layout}"
    return f"{t.dtype}（在 {t.device} 上{layout}）"


def _returned(x: Any) -> str:
    if x is None:
        return "None——是不是忘了写 return？"
    if isinstance(x, (tuple, list)):
        return f"含 {len(x)} 个元素的 {type(x).__name__}"
    return type(x).__name__


class _Watched:
    """What the model sees as its cache: the learner's instance, each call into it made with the
    course-package rule on, each answer checked; ``pos`` is the number of positions given so far and
    ``caps[f]`` the capacity the statement's rule gives after forward ``f + 1``."""

    def __init__(self, cls: type, n_layers: int, capacity: int, caps: list[int], profile: Any,
                 state: _ClassState, label: str) -> None:
        self.profile, self.state, self.label, self.caps = profile, state, label, caps
        self.given: list[list[tuple[Tensor, Tensor]]] = [[] for _ in range(n_layers)]  # copies of each layer's k, v
        self.last: list[Any] = [None] * n_layers  # what each layer returned in the forward before
        self.pos = self.forward = self.t_new = 0
        kwargs = {} if capacity == DEFAULT_CAPACITY else {"capacity": capacity}
        self.cache = self.call(cls, n_layers, **kwargs)

    def call(self, f: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self.profile is None:
            return f(*args, **kwargs)
        sys.setprofile(self.profile)  # the learner's code runs watched; the model does not
        try:
            return f(*args, **kwargs)
        finally:
            sys.setprofile(None)

    def check_pos(self, when: str) -> None:
        pos = self.call(getattr, self.cache, "pos")
        if isinstance(pos, bool) or not isinstance(pos, int):
            raise CacheError(f"{self.label}cache.pos 应是一个 int（已经存下的位置数），你的是 {type(pos).__name__}")
        if pos != self.pos:
            raise CacheError(f"{self.label}{when}，cache.pos 应为 {self.pos}（已经存下的位置数），你的是 {pos}")

    def before(self, t_new: int) -> None:
        self.forward, self.t_new = self.forward + 1, t_new
        self.check_pos("新建时" if self.forward == 1 else f"第 {self.forward} 次前向之前")

    def layer(self, i: int) -> _WatchedLayer:
        obj = self.call(self.cache.layer, i)
        if not callable(getattr(obj, "update", None)):
            raise CacheError(f"{self.label}layer({i}) 应返回一个有 update(k, v) 方法的对象，你的返回了 {_returned(obj)}")
        self.state.add(type(obj))
        return _WatchedLayer(self, i, obj)

    def advance(self, n: int) -> None:
        self.call(self.cache.advance, n)
        self.pos += n


class _WatchedLayer:
    def __init__(self, owner: _Watched, index: int, obj: Any) -> None:
        self.owner, self.index, self.obj = owner, index, obj

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        o, i = self.owner, self.index
        o.given[i].append((k.clone(), v.clone()))
        out = o.call(self.obj.update, k, v)
        where = f"{o.label}第 {o.forward} 次前向中 layer({i}).update"
        if not (isinstance(out, (tuple, list)) and len(out) == 2 and all(isinstance(t, torch.Tensor) for t in out)):
            raise CacheError(f"{where} 应返回 (k_all, v_all) 两个张量，你的返回了 {_returned(out)}")
        end, f = o.pos + o.t_new, o.forward - 1
        for j, (name, got, new) in enumerate([("k_all", out[0], k), ("v_all", out[1], v)]):
            expected = torch.cat([kv[j] for kv in o.given[i]], dim=2)  # (B, H, pos + T_new, d_head)
            if got.shape != expected.shape:
                raise CacheError(f"{where} 返回的 {name} 形状为 {tuple(got.shape)}，应为 {tuple(expected.shape)}，"
                                 f"即 (B, H, pos + T_new, d_head)，这里 pos = {o.pos}、T_new = {o.t_new}")
            if (got.dtype, got.device, got.layout) != (new.dtype, new.device, new.layout):
                raise CacheError(f"{where} 返回的 {name} 是 {_kind(got)}，应与传入的 {name[0]} 相同：{_kind(new)}")
            # new memory: another storage than in the forward before (which is kept alive, so its
            # address cannot be reused)
            moved = f > 0 and got.untyped_storage().data_ptr() != o.last[i][j].untyped_storage().data_ptr()
            wrong = (got != expected).flatten(3).any(-1).any(1).any(0)  # (pos + T_new,) positions that differ
            if wrong.any():
                p = int(wrong.nonzero()[0])
                if moved and p < o.pos:
                    raise CacheError(f"{where} 返回的 {name} 换到了新的内存，之前存下的位置却不对：换缓冲区时，"
                                     f"前 pos = {o.pos} 个位置的历史没有一起复制过去")
                should = (f"之前存下的第 {p} 个位置" if p < o.pos else f"这次传入的 {name[0]} 的第 {p - o.pos} 个位置")
                raise CacheError(f"{where} 返回的 {name} 在位置 {p} 上不对，应是{should}"
                                 f"（历史在前，新的在 [pos, pos + T_new)，长度 pos + T_new）")
            grows = f > 0 and o.caps[f] != o.caps[f - 1]  # the statement's rule: new buffers in this forward
            if moved and not grows:
                raise CacheError(f"{where} 返回的 {name} 换了一块新内存（存储的 data_ptr 变了），可 pos + T_new = "
                                 f"{end} 没有超过容量 {o.caps[f]}：装得下时要原地写进原来的缓冲区，返回它的切片（视图）")
            if grows and not moved:
                raise CacheError(f"{where}：pos + T_new = {end} 超过了容量 {o.caps[f - 1]}，应换成容量为 {o.caps[f]} "
                                 f"的新缓冲区（翻倍到装得下，历史复制一次），你返回的 {name} 却还在原来的内存里")
        o.last[i] = out
        return out[0], out[1]


def _feed(model: nn.Module, rows: tuple[Tensor, ...], chunks: Tensor, caches: list[Any]) -> Tensor:
    """Each cache's rows, chunk by chunk, the caches in turn: the logits ``(B, T, V)``."""
    logits: list[list[Tensor]] = [[] for _ in caches]
    start = 0
    for n in chunks.tolist():
        for out, r, cache in zip(logits, rows, caches):
            if isinstance(cache, _Watched):
                cache.before(n)
            out.append(model(r[:, start:start + n], cache=cache))  # (b, n, V)
        start += n
    for cache in caches:
        if isinstance(cache, _Watched):
            cache.check_pos("最后一次前向之后")
    return torch.cat([torch.cat(out, dim=1) for out in logits], dim=0)


def _play(model: nn.Module, idx: Tensor, chunks: Tensor, n_caches: int, capacity: int, cls: type | None) -> Tensor:
    """Feed ``idx (B, T)`` to ``model`` in chunks of ``chunks (S,)`` tokens, the rows split among
    ``n_caches`` instances of ``cls`` (starting capacity ``capacity``) alive at once; the logits
    ``(B, T, V)``. ``cls=None``: the same run in float64 on ``tc.KVCache`` (the reference).

    The rule against the course package watches calls with ``sys.setprofile``. The model is course
    code, so that profile is off while it runs and on around each call into the learner's cache
    (any other profiler, such as cProfile, is left alone).
    """
    profile = sys.getprofile()
    if not isinstance(getattr(profile, "__self__", None), _Watch):
        profile = None
    if profile is not None:
        sys.setprofile(None)
    try:
        with torch.no_grad():
            rows = idx.tensor_split(n_caches, dim=0)  # one group of rows per cache
            if cls is None:
                model = copy.deepcopy(model).double()
                caches = [KVCache.from_config(model.config, batch_size=r.shape[0], dtype=torch.float64) for r in rows]
                return _feed(model, rows, chunks, caches)
            state = _ClassState()
            caps = _capacities(chunks.tolist(), capacity)
            try:
                state.add(cls)
                labels = [f"第 {c + 1} 个缓存：" if n_caches > 1 else "" for c in range(n_caches)]
                caches = [_Watched(cls, model.config.n_layers, capacity, caps, profile, state, label)
                          for label in labels]
                logits = _feed(model, rows, chunks, caches)
            except NotImplementedError:
                raise
            except Exception as e:
                if state.shared():
                    raise CacheError(SHARED) from e
                raise
            if state.shared():
                raise CacheError(SHARED)
            return logits
    finally:
        if profile is not None:
            sys.setprofile(profile)


def _as_function(cls: type | Callable[[], type]) -> Callable[..., Tensor]:
    """The function the Exercise evaluates, for a cache class (or a function making a new class per case)."""
    def run(idx: Tensor, chunks: Tensor, model: nn.Module, n_caches: int, capacity: int) -> Tensor:
        return _play(model, idx, chunks, n_caches, capacity, cls if isinstance(cls, type) else cls())
    return run


def _doubling_reference(idx: Tensor, chunks: Tensor, model: nn.Module, n_caches: int, capacity: int) -> Tensor:
    return _play(model, idx, chunks, n_caches, capacity, None)


def _model(n_layers: int, n_heads: int, d_model: int, vocab: int, positional: str, max_len: int,
           seed: int) -> DecoderOnly:
    """A small seeded model whose logits are of order one (the default init of 0.02 gives nearly
    uniform attention, where a wrong cache changes little)."""
    config = TransformerConfig(vocab_size=vocab, d_model=d_model, n_heads=n_heads, n_layers=n_layers,
                               d_ff=2 * d_model, max_len=max_len, positional=positional)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = DecoderOnly(config)
        for m in model.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=m.in_features ** -0.5)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight)
    return model.eval()


_DOUBLING_CASES = [
    # (n_layers, n_heads, d_model, vocab, positional, B, chunks, n_caches, capacity)
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
    for seed, (n_layers, n_heads, d_model, vocab, positional, b, chunks, n_caches, capacity) in enumerate(
            _DOUBLING_CASES):
        seed = 0 if seed == len(_DOUBLING_CASES) - 1 else seed  # the twin: the first case's weights
        model = _model(n_layers, n_heads, d_model, vocab, positional, sum(chunks) + 3, 100 + seed)
        idx = torch.randint(0, vocab, (b, sum(chunks)), generator=g)
        two = "；两个缓存同时使用（batch 的行分给两个实例，轮流前向），实例之间不能共享状态" if n_caches > 1 else ""
        note = (f"{n_layers} 层、{n_heads} 个头、d_head = {d_model // n_heads}、{positional} 位置编码、batch {b}，"
                f"每次前向送入的 token 数依次为 {list(chunks)}；{_plan(chunks, capacity)}{two}")
        cases.append(Case((idx, torch.tensor(chunks), model, n_caches, capacity), note=note))
    return cases


# The typical wrong classes. _Layer and _Cache are the right design (one object per layer, buffers
# written in place at pos, doubled until they fit, the history copied once); each mistake changes one thing.

class _Layer:
    def __init__(self, cache: Any) -> None:
        self.cache, self.k, self.v = cache, None, None

    def size(self, end: int) -> int:  # the capacity that holds `end` positions
        size = self.cache.capacity if self.k is None else self.k.shape[2]
        while size < end:
            size *= 2
        return size

    def moved(self, old: Tensor | None, new: Tensor, size: int) -> Tensor:  # a new buffer with the history
        buf = new.new_zeros(new.shape[0], new.shape[1], size, new.shape[3])
        if old is not None:
            buf[:, :, :self.cache.pos] = old[:, :, :self.cache.pos]
        return buf

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        pos, end = self.cache.pos, self.cache.pos + k.shape[2]
        size = self.size(end)
        if self.k is None or size > self.k.shape[2]:
            self.k, self.v = self.moved(self.k, k, size), self.moved(self.v, v, size)
        self.k[:, :, pos:end], self.v[:, :, pos:end] = k, v
        return self.k[:, :, :end], self.v[:, :, :end]


class _Cache:
    layer_class: type = _Layer

    def __init__(self, n_layers: int, capacity: int = DEFAULT_CAPACITY) -> None:
        self.layers = [self.layer_class(self) for _ in range(n_layers)]
        self.capacity, self.pos = capacity, 0

    def layer(self, i: int) -> Any:
        return self.layers[i]

    def advance(self, n: int) -> None:
        self.pos += n


def _with_layers(layer: type) -> type:
    """The right cache, with each layer's object of class ``layer``."""
    return type("Cache", (_Cache,), {"layer_class": layer})


class _Catting(_Layer):  # the chapter's GrowingCache
    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        if self.k is None:
            self.k, self.v = k, v
        else:
            self.k, self.v = torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2)
        return self.k, self.v


class _GrowingByCapacity(_Layer):
    def size(self, end: int) -> int:
        size = self.cache.capacity if self.k is None else self.k.shape[2]
        while size < end:
            size += self.cache.capacity  # should double
        return size


class _DoublingOnce(_Layer):
    def size(self, end: int) -> int:
        size = self.cache.capacity if self.k is None else self.k.shape[2]
        if size < end:  # should be `while`
            size *= 2
        return size


class _NotCopying(_Layer):
    def moved(self, old: Tensor | None, new: Tensor, size: int) -> Tensor:
        return new.new_zeros(new.shape[0], new.shape[1], size, new.shape[3])  # the history is lost


class _ReturningBuffer(_Layer):
    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        super().update(k, v)
        return self.k, self.v  # all capacity positions


class _WritingAtZero(_Layer):
    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        end = self.cache.pos + k.shape[2]
        size = self.size(end)
        if self.k is None or size > self.k.shape[2]:
            self.k, self.v = self.moved(self.k, k, size), self.moved(self.v, v, size)
        self.k[:, :, :k.shape[2]], self.v[:, :, :k.shape[2]] = k, v  # should be pos:end
        return self.k[:, :, :end], self.v[:, :, :end]


class _ReturningNew(_Layer):
    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        super().update(k, v)
        return k, v


class _SwappingKV(_Layer):
    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        k_all, v_all = super().update(k, v)
        return v_all, k_all


class _MovingPos(_Layer):
    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        out = super().update(k, v)
        self.cache.pos += k.shape[2]  # every layer moves it: n_layers times per forward
        return out


class _PosInUpdate(_Cache):
    layer_class = _MovingPos

    def advance(self, n: int) -> None:
        pass


class _OneLayerForAll(_Cache):
    def __init__(self, n_layers: int, capacity: int = DEFAULT_CAPACITY) -> None:
        super().__init__(n_layers, capacity)
        self.layers = [_Layer(self)] * n_layers  # n_layers references to one object


class _NoAdvance(_Cache):
    def advance(self, n: int) -> None:
        pass


class _AdvanceByOne(_Cache):
    def advance(self, n: int) -> None:
        self.pos += 1  # as if every forward brought one token


class _PosSetToN(_Cache):
    def advance(self, n: int) -> None:
        self.pos = n  # should be +=


def _class_attribute() -> type:
    """A new class per case (the checker's own mistake must not remember the last evaluation)."""
    class Cache(_Cache):
        layers: list = []  # a class attribute: every instance appends to, and reads, this one list

        def __init__(self, n_layers: int, capacity: int = DEFAULT_CAPACITY) -> None:
            self.capacity, self.pos = capacity, 0
            self.layers.extend(_Layer(self) for _ in range(n_layers))
    return Cache


class _PackageCacheInside:
    """The shortcut: a tc.KVCache inside, swapped for a longer one (the history copied) when full."""

    def __init__(self, n_layers: int, capacity: int = DEFAULT_CAPACITY) -> None:
        self.n_layers, self.capacity, self.inner = n_layers, capacity, None

    @property
    def pos(self) -> int:
        return 0 if self.inner is None else self.inner.pos

    def layer(self, i: int) -> Any:
        return types.SimpleNamespace(update=lambda k, v: self.update(i, k, v))

    def update(self, i: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        size = self.capacity if self.inner is None else self.inner.max_len
        while size < self.pos + k.shape[2]:
            size *= 2
        if self.inner is None or size > self.inner.max_len:
            new = KVCache(n_layers=self.n_layers, batch_size=k.shape[0], n_heads=k.shape[1], d_head=k.shape[3],
                          max_len=size, dtype=k.dtype)
            if self.inner is not None:  # (L, B, H, max_len, d_head): copy the first pos positions
                old, p = self.inner, self.pos
                new.k[..., :p, :], new.v[..., :p, :], new.pos = old.k[..., :p, :], old.v[..., :p, :], p
            self.inner = new
        return self.inner.layer(i).update(k, v)

    def advance(self, n: int) -> None:
        self.inner.advance(n)


DOUBLING = Exercise(
    name="doubling_kv_cache",
    reference=_doubling_reference,
    make_cases=_doubling_cases,
    mistakes=(
        Mistake("每次前向返回的 k_all 都换了一块新内存：torch.cat（或 clone()、contiguous()）每一步都把全部历史搬一遍，"
                "这正是 11.2 节的 GrowingCache。请在缓冲区里原地写入 [pos, pos + T_new)，返回它前 pos + T_new 个位置的"
                "切片（视图，不复制），只在装不下时才换缓冲区。", _as_function(_with_layers(_Catting))),
        Mistake("容量装不下时要翻倍（capacity *= 2），你每次只加了一个初始容量：那样生成 n 个 token 要换约 n / capacity "
                "次缓冲区，翻倍只要约 log₂(n / capacity) 次。", _as_function(_with_layers(_GrowingByCapacity))),
        Mistake("一次送入的位置可能多到要连续翻倍不止一次（pos + T_new 超过容量的两倍）：要用 while 循环翻倍，"
                "直到装得下，而不是只翻倍一次（if）。", _as_function(_with_layers(_DoublingOnce))),
        Mistake("换缓冲区时忘了复制历史：新缓冲区的前 pos 个位置要先从旧缓冲区复制过来"
                "（new_k[:, :, :pos] = self.k[:, :, :pos]），再写入新位置。", _as_function(_with_layers(_NotCopying))),
        Mistake("update 要返回前 pos + T_new 个位置（self.k[:, :, :pos + T_new]），你返回了整个缓冲区"
                "（capacity 个位置，后面是还没写入的空位）。", _as_function(_with_layers(_ReturningBuffer))),
        Mistake("新位置要写进 [pos, pos + T_new)，你写在了缓冲区的开头 [0, T_new)，把历史覆盖了。",
                _as_function(_with_layers(_WritingAtZero))),
        Mistake("pos 前进得太多：update 每一层都会调用一次，pos 只应在 advance(n) 里前进（模型在所有层都写完之后"
                "调用一次 advance）。", _as_function(_PosInUpdate)),
        Mistake("所有层共用了同一个缓存对象：每一层要有自己的 K/V。[x] * n_layers 得到的是同一个对象的 n_layers 个引用，"
                "要用 [Layer(...) for _ in range(n_layers)]。", _as_function(_OneLayerForAll)),
        Mistake("不同的缓存实例共用了同一份 K/V：类体里（方法之外）写的列表、字典（如 layers = []）是类属性，"
                "可变的默认参数也一样，所有实例共用一份；请在 __init__ 里为每个实例新建（self.layers = [...]）。",
                _as_function(_class_attribute)),
        Mistake("update 要返回到目前为止的全部 K/V（历史加上新传入的，长度 pos + T_new），你只返回了新传入的 k、v。",
                _as_function(_with_layers(_ReturningNew))),
        Mistake("pos 没有前进：advance(n) 要把 pos 加上 n，否则下一次前向的新 token 会被当成从位置 0 开始。",
                _as_function(_NoAdvance)),
        Mistake("advance(n) 要让 pos 前进 n（这次前向送入的 token 数），你每次只加了 1：prefill 和分块送入时 n 大于 1。",
                _as_function(_AdvanceByOne)),
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
    message = DOUBLING.evaluate(_as_function(cls)).message
    print(message.replace("时你的函数抛出了 CacheError：", "：").replace("你的函数", "你的缓存类"))


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


def _gqa(q: Tensor, k: Tensor, v: Tensor, *, expand: str = "interleave", causal: bool = True,
         scale: float | None = None, naive: bool = False) -> Tensor:
    n_rep = q.shape[1] // k.shape[1]
    if expand == "interleave":  # query head h uses K/V head h // n_rep
        k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
    elif expand == "tile":  # query head h uses K/V head h % H_kv (wrong grouping)
        k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)
    else:  # every query head uses K/V head 0
        k, v = k[:, :1].expand(-1, q.shape[1], -1, -1), v[:, :1].expand(-1, q.shape[1], -1, -1)
    mask = causal_mask(q.shape[2]) if causal else None
    if naive:
        return _attend(q, k, v, causal_mask(q.shape[2]), softmax=naive_softmax)
    return scaled_dot_product_attention(q, k, v, mask=mask, scale=scale)[0]


def _gqa_reference(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    return _gqa(q, k, v)


GQA = Exercise(
    name="grouped_query_attention",
    reference=_gqa_reference,
    make_cases=_gqa_cases,
    mistakes=(
        Mistake("分组方式不对：相邻的 n_rep 个查询头共用一个 K/V 头（头 h 用 K/V 头 h // n_rep），"
                "应使用 repeat_interleave，而不是 repeat（那样头 h 用的是 h % H_kv）。",
                lambda q, k, v: _gqa(q, k, v, expand="tile")),
        Mistake("缺少因果掩码：解码器里位置 i 只能关注 j <= i。",
                lambda q, k, v: _gqa(q, k, v, causal=False)),
        Mistake("所有查询头都用了第 0 个 K/V 头：那是多查询注意力（MQA），这里每组查询头有自己的 K/V 头。",
                lambda q, k, v: _gqa(q, k, v, expand="first")),
        Mistake("缺少缩放：softmax 之前要把分数除以 √d_head。",
                lambda q, k, v: _gqa(q, k, v, scale=1.0)),
        Mistake(NAIVE_HINT, lambda q, k, v: _gqa(q, k, v, naive=True)),
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


def _gib(seq_lens: Tensor, n_layers: int, heads: int, d_head: int, batch_size: int,
         bytes_per_value: int, *, kv: int = 2, unit: float = GIB, extra: int = 0) -> Tensor:
    per_position = kv * n_layers * heads * d_head * bytes_per_value
    return (seq_lens.double() + extra) * per_position * batch_size / unit  # (N,)


def _gib_reference(seq_lens, n_layers, n_heads, n_kv_heads, d_head, batch_size, bytes_per_value):
    return _gib(seq_lens, n_layers, n_kv_heads, d_head, batch_size, bytes_per_value)


GIB_EXERCISE = Exercise(
    name="kv_cache_gib",
    reference=_gib_reference,
    make_cases=_gib_cases,
    mistakes=(
        Mistake("少了因子 2：每个位置既要存 K，也要存 V。",
                lambda s, L, H, Hkv, d, B, nb: _gib(s, L, Hkv, d, B, nb, kv=1)),
        Mistake("用了查询头数 n_heads：缓存里存的是 K/V 头，分组查询注意力时应乘 n_kv_heads。",
                lambda s, L, H, Hkv, d, B, nb: _gib(s, L, H, d, B, nb)),
        Mistake("单位不对：GiB 是 2**30 字节，而不是 10**9 字节（那是 GB）。",
                lambda s, L, H, Hkv, d, B, nb: _gib(s, L, Hkv, d, B, nb, unit=1e9)),
        Mistake("少乘了层数：每一层都有自己的 K/V 缓存。",
                lambda s, L, H, Hkv, d, B, nb: _gib(s, 1, Hkv, d, B, nb)),
        Mistake("少乘了 batch 大小：batch 里每条序列都有自己的缓存。",
                lambda s, L, H, Hkv, d, B, nb: _gib(s, L, Hkv, d, 1, nb)),
        Mistake("位置数差了一：长度为 N 的序列缓存 N 个位置的 K/V，不要加 1。",
                lambda s, L, H, Hkv, d, B, nb: _gib(s, L, Hkv, d, B, nb, extra=1)),
    ),
    dtype=torch.float64,  # the statement asks for float64
)
check_kv_cache_gib = GIB_EXERCISE.check

EXERCISES = (CACHED, DOUBLING, GQA, GIB_EXERCISE)
