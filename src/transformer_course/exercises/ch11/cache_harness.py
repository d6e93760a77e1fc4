"""Run a learner's KV-cache class inside a model and check every answer it gives (chapter 11, 练习 2).

The learner writes a class; check_doubling_kv_cache(cls) turns it into the function the Exercise
evaluates: a small seeded model gets new instances of the class as its cache and is fed the tokens
chunk by chunk (a prefill, then decoding steps or chunks); the result is the logits of every
position, compared with the same run on tc.KVCache. While the model uses the learner's cache, each
of its answers is checked against what it was given (its pos; each update's K/V, exact copies in
order) and against the statement's capacity rule: the returned k_all and v_all must live in new
memory (another storage data_ptr than in the forward before) exactly in the forwards where
pos + T_new outgrows the capacity, so a wrong cache gets a sentence on what it did.
"""
from __future__ import annotations

import collections
import copy
import sys
import types
from typing import Any, Callable

import torch
from torch import Tensor, nn

from ...config import TransformerConfig
from ...kv_cache import KVCache
from ...models import DecoderOnly
from .._guards import _Watch


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
            raise CacheError(f"{self.label}layer({i}) 应返回一个有 update(k, v) 方法的对象，"
                             f"你的返回了 {_returned(obj)}")
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
                                 f"{end} 没有超过容量 {o.caps[f]}：装得下时要原地写进原来的缓冲区，"
                                 "返回它的切片（视图）")
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
