"""Chapter 11, 练习 2: a right doubling KV cache written as a learner writes it (``_Layer``, ``_Cache``)
and each typical mistake as a small variant of it; ``doubling_cache`` lists them as the mistakes.
"""
from __future__ import annotations

import types
from typing import Any

import torch
from torch import Tensor

from ...kv_cache import KVCache
from .cache_harness import DEFAULT_CAPACITY


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


class _DefaultDtypeBuffers(_Layer):
    def moved(self, old: Tensor | None, new: Tensor, size: int) -> Tensor:
        buf = torch.zeros(new.shape[0], new.shape[1], size, new.shape[3])  # float32 on the CPU, whatever k is
        if old is not None:
            buf[:, :, :self.cache.pos] = old[:, :, :self.cache.pos]
        return buf


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
