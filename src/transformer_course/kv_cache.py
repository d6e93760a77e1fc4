"""The KV cache: keys and values already computed, kept so that decoding step t costs O(t), not O(t²).

One ``KVCache`` holds every layer, head and position (never token ids: a token's key depends on
its position and everything before it). It is preallocated for ``max_len`` positions and has
one position counter ``pos``, shared by all layers:

* attention in layer ``i`` calls ``cache.layer(i).update(k, v)``, which writes the new positions
  ``pos .. pos+T-1`` and returns a view of all keys and values so far, ``(B, H, pos+T, d_head)``;
* after every layer has written, the model calls ``cache.advance(T)``.

That is all a model asks of a cache: the protocol ``Cache`` (and ``LayerCache``) below, which chapter 11's
readers implement in their own classes too. ``RollingKVCache`` is the other kind: a ring buffer of the last
``window`` positions for sliding-window attention, which also says where its keys start (``first_kept``).

Use it under ``torch.inference_mode()`` (``generate`` does): it is written in place.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import torch
from torch import Tensor

from ._checks import check_int, check_tensor

if TYPE_CHECKING:
    from .config import TransformerConfig


class LayerCache(Protocol):
    """One layer's part of a cache, as the attention layer uses it."""

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store this layer's new ``k, v (B, H, T, d_head)`` at positions ``pos .. pos+T-1``; return every key
        and value the new queries attend to, oldest first: ``(B, H, Tk, d_head)`` each."""
        ...


class Cache(Protocol):
    """What ``TransformerStack.forward`` calls on a cache: ``pos`` (positions stored so far: the new tokens
    sit at ``pos .. pos+T-1``), ``layer(i).update(k, v)`` in each layer, then ``advance(T)`` once. A cache
    whose keys do not start at position 0 also has ``first_kept`` (absent: 0, every position is kept)."""

    pos: int

    def layer(self, index: int) -> LayerCache:
        """The part that attention layer ``index`` writes to."""
        ...

    def advance(self, n: int) -> None:
        """Move ``pos`` past ``n`` new positions, after every layer has written them."""
        ...


class _Buffers:
    """Keys and values ``(n_layers, B, H, slots, d_head)`` and the counter ``pos``: what both kinds of cache hold."""

    def __init__(self, *, n_layers: int, batch_size: int, n_heads: int, d_head: int, slots: int,
                 dtype: torch.dtype, device: torch.device | str | None, slots_name: str) -> None:
        sizes = {"n_layers": n_layers, "batch_size": batch_size, "n_heads": n_heads, slots_name: slots,
                 "d_head": d_head}
        shape = tuple(check_int(name, size) for name, size in sizes.items())
        self.k = torch.zeros(shape, dtype=dtype, device=device)  # (L, B, H, slots, d_head)
        self.v = torch.zeros(shape, dtype=dtype, device=device)  # (L, B, H, slots, d_head)
        self.pos = 0  # positions 0 .. pos-1 have been written, in every layer

    @property
    def nbytes(self) -> int:
        """Bytes of the positions held, in K and V of every layer."""
        return 2 * self.k[:, :, :, : self.pos].numel() * self.k.element_size()  # slicing stops at the slots

    def _check_layer(self, index: int) -> None:
        if not isinstance(index, int) or not 0 <= index < self.k.shape[0]:
            raise ValueError(f"index must be an int in [0, {self.k.shape[0]}), got {index!r}")

    def reset(self) -> None:
        """Forget everything (the buffers are reused, not freed)."""
        self.pos = 0


class KVCache(_Buffers):
    """Preallocated keys and values ``(n_layers, B, H, max_len, d_head)`` and one counter ``pos``.

    ``n_heads`` counts K/V heads: the model's ``n_kv_heads`` (fewer than its query heads with
    grouped-query attention); ``from_config`` takes it from the configuration.

    Example:
        >>> cache = KVCache(n_layers=2, batch_size=1, n_heads=3, d_head=4, max_len=10)
        >>> k, v = cache.layer(0).update(torch.ones(1, 3, 5, 4), torch.ones(1, 3, 5, 4))
        >>> k.shape, cache.pos  # layer 1 would write the same positions 0..4, then:
        (torch.Size([1, 3, 5, 4]), 0)
        >>> cache.advance(5); cache.pos
        5
    """

    def __init__(
        self,
        *,
        n_layers: int,
        batch_size: int,
        n_heads: int,
        d_head: int,
        max_len: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__(n_layers=n_layers, batch_size=batch_size, n_heads=n_heads, d_head=d_head, slots=max_len,
                         dtype=dtype, device=device, slots_name="max_len")  # (L, B, H, max_len, d_head)

    @classmethod
    def from_config(
        cls,
        config: TransformerConfig,
        *,
        batch_size: int,
        max_len: int | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> KVCache | RollingKVCache:
        """A cache for a model built from ``config``; ``max_len`` defaults to ``config.max_len``. With
        ``config.sliding_window`` a ``RollingKVCache`` of that many positions (``max_len`` is then unused)."""
        sizes = dict(n_layers=config.n_layers, batch_size=batch_size, d_head=config.d_head, dtype=dtype,
                     n_heads=config.n_kv_heads or config.n_heads, device=device)  # K/V heads: fewer with GQA
        if config.sliding_window is not None:
            return RollingKVCache(window=config.sliding_window, **sizes)
        return cls(max_len=config.max_len if max_len is None else max_len, **sizes)

    @property
    def max_len(self) -> int:
        """How many positions the cache can hold."""
        return self.k.shape[3]

    @property
    def first_kept(self) -> int:
        """The first position whose keys the next ``update`` returns: 0, every position is kept."""
        return 0

    def layer(self, index: int) -> LayerKVCache:
        """The view that attention layer ``index`` writes to."""
        self._check_layer(index)
        return LayerKVCache(self, index)

    def advance(self, n: int) -> None:
        """Move the position counter past ``n`` new positions (after all layers wrote them)."""
        if check_int("n", n) + self.pos > self.max_len:
            raise ValueError(f"n={n} would move pos={self.pos} past max_len={self.max_len}")
        self.pos += n

    def truncate(self, pos: int) -> None:
        """Keep positions ``0 .. pos-1`` and forget the rest (the next update writes at ``pos``):
        rewind to re-run a step, or drop a rejected continuation."""
        if check_int("pos", pos, minimum=0) > self.pos:
            raise ValueError(f"pos must be <= the filled positions ({self.pos}), got {pos}")
        self.pos = pos



class _LayerView:
    """One layer's slice of a cache's buffers, ``(B, H, slots, d_head)`` each, and the cache (for ``pos``)."""

    def __init__(self, cache: KVCache | RollingKVCache, index: int) -> None:
        self.cache = cache
        self.k = cache.k[index]  # (B, H, slots, d_head), a view
        self.v = cache.v[index]  # (B, H, slots, d_head), a view


class LayerKVCache(_LayerView):
    """One layer's view of a ``KVCache``: ``update(k, v)`` writes at the shared counter ``pos``."""

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store ``k, v`` ``(B, H, T, d_head)`` at positions ``pos .. pos+T-1``.

        Returns views of all keys and values so far, ``(B, H, pos+T, d_head)`` each.
        """
        B, H, _, d_head = self.k.shape
        check_tensor("k", k, "(B, H, T, d_head)", B=B, H=H, d_head=d_head)
        check_tensor("v", v, "(B, H, T, d_head)", B=B, H=H, T=k.shape[2], d_head=d_head)
        start = self.cache.pos
        end = start + k.shape[2]
        if end > self.cache.max_len:
            max_len = self.cache.max_len
            raise ValueError(f"k has {k.shape[2]} new positions after pos={start}: more than max_len={max_len}")
        self.k[:, :, start:end] = k
        self.v[:, :, start:end] = v
        return self.k[:, :, :end], self.v[:, :, :end]  # (B, H, end, d_head)


class RollingKVCache(_Buffers):
    """A ring buffer of the last ``window`` positions, for sliding-window attention: its memory does not
    grow with the length. Position ``p`` lives in slot ``p % window``; ``pos`` counts every position ever
    written (no ``max_len``). An ``update`` of ``T`` new positions returns the kept ones, oldest first,
    then the new: ``(B, H, min(pos, window) + T, d_head)``; the model's window mask hides what is too old.

    Example:
        >>> cache = RollingKVCache(n_layers=1, batch_size=1, n_heads=1, d_head=2, window=3)
        >>> for _ in range(5):
        ...     _ = cache.layer(0).update(torch.ones(1, 1, 1, 2), torch.ones(1, 1, 1, 2)); cache.advance(1)
        >>> cache.pos, cache.first_kept, cache.nbytes  # 3 positions x 2 (K, V) x 2 dims x 4 bytes
        (5, 2, 48)
    """

    def __init__(self, *, n_layers: int, batch_size: int, n_heads: int, d_head: int, window: int,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> None:
        super().__init__(n_layers=n_layers, batch_size=batch_size, n_heads=n_heads, d_head=d_head, slots=window,
                         dtype=dtype, device=device, slots_name="window")  # (L, B, H, window, d_head)

    @property
    def window(self) -> int:
        """How many of the latest positions the cache keeps."""
        return self.k.shape[3]

    def advance(self, n: int) -> None:
        """Move the position counter past ``n`` new positions: no limit, old positions are overwritten."""
        self.pos += check_int("n", n)

    @property
    def first_kept(self) -> int:
        """The oldest position still held (the next ``update`` returns keys from there on)."""
        return max(0, self.pos - self.window)

    def layer(self, index: int) -> RollingLayerKVCache:
        """The view that attention layer ``index`` writes to."""
        self._check_layer(index)
        return RollingLayerKVCache(self, index)


class RollingLayerKVCache(_LayerView):
    """One layer's view of a ``RollingKVCache``."""

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store ``k, v`` ``(B, H, T, d_head)`` at positions ``pos .. pos+T-1`` (the last ``window`` of them);
        return the kept positions, oldest first, and the new ones, ``(B, H, min(pos, window) + T, d_head)``."""
        B, H, window, d_head = self.k.shape
        check_tensor("k", k, "(B, H, T, d_head)", B=B, H=H, d_head=d_head)
        check_tensor("v", v, "(B, H, T, d_head)", B=B, H=H, T=k.shape[2], d_head=d_head)
        start, T = self.cache.pos, k.shape[2]
        kept = torch.arange(self.cache.first_kept, start, device=k.device) % window  # slots, oldest first
        keys, values = torch.cat([self.k[:, :, kept], k], dim=2), torch.cat([self.v[:, :, kept], v], dim=2)
        last = min(T, window)  # only the newest `window` positions survive
        slots = torch.arange(start + T - last, start + T, device=k.device) % window
        self.k[:, :, slots], self.v[:, :, slots] = k[:, :, T - last:], v[:, :, T - last:]
        return keys, values  # (B, H, kept + T, d_head)


def kv_cache_bytes(
    config: TransformerConfig | None,
    seq_len: int,
    batch_size: int = 1,
    dtype: torch.dtype = torch.float32,
    *,
    n_kv_heads: int | None = None,
    n_layers: int | None = None,
    n_heads: int | None = None,
    d_head: int | None = None,
) -> int:
    """Bytes to cache ``seq_len`` positions: ``2 (K, V) × layers × batch × kv heads × seq_len × d_head × bytes``.

    The sizes come from ``config``; ``n_layers``, ``n_heads``, ``d_head``, ``n_kv_heads`` given as numbers
    replace them (with ``config=None`` the first three are needed). ``n_kv_heads`` defaults to the config's,
    else to ``n_heads`` (multi-head attention); a smaller value gives the size for grouped-query
    attention, where groups of query heads share one K/V head.

    Example:
        >>> from transformer_course.config import TransformerConfig
        >>> kv_cache_bytes(TransformerConfig.gpt2_small(), 1024, dtype=torch.float16) / 2**20  # MiB
        36.0
        >>> kv_cache_bytes(None, 1024, n_layers=12, n_heads=12, d_head=64, dtype=torch.float16) / 2**20
        36.0
    """
    sizes = {"n_layers": n_layers, "n_heads": n_heads, "d_head": d_head}
    for name, value in sizes.items():
        if value is None and config is None:
            raise ValueError(f"{name} is needed when config is None, got None")
        sizes[name] = getattr(config, name) if value is None else check_int(name, value)
    if n_kv_heads is None:
        n_kv_heads = (None if config is None else config.n_kv_heads) or sizes["n_heads"]
    check_int("n_kv_heads", n_kv_heads)
    if sizes["n_heads"] % n_kv_heads:
        raise ValueError(f"n_kv_heads must divide n_heads={sizes['n_heads']}, got {n_kv_heads}")
    per_position = 2 * sizes["n_layers"] * n_kv_heads * sizes["d_head"] * dtype.itemsize
    return per_position * check_int("seq_len", seq_len) * check_int("batch_size", batch_size)
