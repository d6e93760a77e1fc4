"""Argument checks shared by the package: each raises a short English ``ValueError`` that names
the argument, what was expected and what was given."""
from __future__ import annotations

from collections.abc import Collection
from functools import lru_cache
from typing import TypeVar

import torch
from torch import Tensor

T = TypeVar("T")

_DTYPE_KINDS = {
    "float": ("a floating-point tensor", lambda t: t.is_floating_point()),
    "int": ("an integer tensor", lambda t: not t.is_floating_point() and not t.is_complex() and t.dtype != torch.bool),
    "mask": ("a bool or integer (0/1) tensor", lambda t: not t.is_floating_point() and not t.is_complex()),
}


@lru_cache(maxsize=None)
def _parse_layout(layout: str) -> tuple[bool, tuple[str, ...]]:
    """``"(B, T, C)"`` -> ``(False, ("B", "T", "C"))``; ``"(..., C)"`` -> ``(True, ("C",))``. Cached: the
    model checks its inputs on every decoding step, and parsing dominated that cost."""
    dims = tuple(d.strip() for d in layout.strip("()").split(",") if d.strip())
    return (True, dims[1:]) if dims[0] == "..." else (False, dims)


def check_tensor(name: str, x: object, layout: str, *, dtype: str = "float", **sizes: int) -> Tensor:
    """Raise unless ``x`` is a tensor of ``layout`` (e.g. ``"(B, T, C)"`` or ``"(..., C)"``) and dtype kind.

    Keyword arguments pin named dimensions; ``dtype`` is ``"float"``, ``"int"`` or ``"mask"`` (bool or integer).

    Example:
        >>> check_tensor("x", torch.zeros(2, 7, 24), "(B, T, C)", C=24).shape
        torch.Size([2, 7, 24])
    """
    if not isinstance(x, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of shape {layout}, got {type(x).__name__}")
    leading, dims = _parse_layout(layout)  # "(B, T, C)" -> (False, ("B", "T", "C"))
    named = list(zip(dims, x.shape[x.dim() - len(dims) :]))  # (name, size) of the trailing dims
    rank_ok = x.dim() >= len(dims) if leading else x.dim() == len(dims)
    if not rank_ok or any(size != sizes[d] for d, size in named if d in sizes):
        pinned = ", ".join(f"{d}={s}" for d, s in sizes.items())
        raise ValueError(f"{name} must have shape {layout}{' with ' + pinned if pinned else ''}, got {tuple(x.shape)}")
    kind, ok = _DTYPE_KINDS[dtype]
    if not ok(x):
        raise ValueError(f"{name} must be {kind}, got dtype {x.dtype}")
    return x


def check_mask(name: str, mask: object, shape: tuple[int, ...]) -> None:
    """Raise unless ``mask`` is a bool tensor broadcastable to ``shape`` (True = may attend)."""
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        got = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
        raise ValueError(f"{name} must be a bool tensor (True = may attend), got {got}")
    check_broadcastable(name, mask, shape)


def check_broadcastable(name: str, x: Tensor, shape: tuple[int, ...]) -> None:
    """Raise unless ``x`` broadcasts to exactly ``shape``."""
    try:
        ok = torch.broadcast_shapes(x.shape, shape) == torch.Size(shape)
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(f"{name} of shape {tuple(x.shape)} does not broadcast to {tuple(shape)}")


def check_int(name: str, value: object, *, minimum: int = 1) -> int:
    """Raise unless ``value`` is an int ``>= minimum``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def check_float(name: str, value: object, interval: str) -> float:
    """Raise unless ``value`` is a number in ``interval``, written like ``"(0, 1]"`` or ``"[0, inf)"``."""
    low, high = (float(s) for s in interval[1:-1].split(","))
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    ok = ok and (value > low if interval[0] == "(" else value >= low)
    ok = ok and (value < high if interval[-1] == ")" else value <= high)
    if not ok:
        raise ValueError(f"{name} must be a number in {interval}, got {value!r}")
    return float(value)


def check_choice(name: str, value: T, options: Collection[T]) -> T:
    """Raise unless ``value`` is one of ``options``."""
    if value not in options:
        raise ValueError(f"{name} must be one of {sorted(options)}, got {value!r}")
    return value
