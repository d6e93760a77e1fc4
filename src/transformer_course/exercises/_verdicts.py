"""The Chinese wording of a verdict: how a returned value differs from the reference's (shape, dtype,
type, the worst wrong element and how far off it is), how a case's inputs and an exception are named.
"""
from __future__ import annotations

import math
import types
from typing import Any

import torch


# ---- describing values in Chinese --------------------------------------------------------------

def _describe_args(args: tuple, names: tuple[str, ...]) -> str:
    """``x 形状 (2, 5, 12)、n_heads = 3、attn 是 MultiHeadAttention``: each argument by the learner's name."""
    parts = []
    for name, a in zip(names, args):
        if isinstance(a, torch.Tensor):
            parts.append(f"{name} 形状 {tuple(a.shape)}" if a.dim() else f"{name} = {_number(a.item())}")
        elif isinstance(a, float):
            parts.append(f"{name} = {_number(a)}")
        elif isinstance(a, (int, bool, str)):
            parts.append(f"{name} = {a!r}")
        elif isinstance(a, torch.nn.Module):
            parts.append(f"{name} 是 {type(a).__name__}")
        elif callable(a):
            parts.append(f"{name} 是一个函数")
        else:
            parts.append(f"{name} 是 {type(a).__name__}")
    return "、".join(parts)


def _describe(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"形状 {tuple(x.shape)} 的张量"
    if isinstance(x, tuple):
        return f"含 {len(x)} 个元素的 tuple"
    return _type_words(x)


def _type_words(x: Any) -> str:
    if type(x).__module__ == "numpy" and type(x).__name__ == "ndarray":
        return "NumPy 数组（ndarray）"
    if isinstance(x, types.GeneratorType):
        return "生成器（generator）"
    if isinstance(x, (list, tuple)) and x and all(isinstance(t, torch.Tensor) for t in x):
        return f"含 {len(x)} 个张量的 {type(x).__name__}"
    if isinstance(x, bool):
        return "bool 值"
    if isinstance(x, (int, float)):
        return f"Python 的 {type(x).__name__} 数值"
    return type(x).__name__


def _not_a_tensor(got: Any) -> str:
    words = _type_words(got)
    if type(got).__module__ == "numpy":
        return f"应返回 torch.Tensor，你返回的是 {words}：请全程用 torch 运算，或用 torch.from_numpy 转回张量。"
    if isinstance(got, (list, tuple)) and got and all(isinstance(t, torch.Tensor) for t in got):
        return f"应返回一个 torch.Tensor，你返回的是{words}：用 torch.stack（或 torch.cat）把它们拼成一个张量。"
    if isinstance(got, types.GeneratorType):
        return f"应返回 torch.Tensor，你返回的是{words}：是不是写了 yield，或返回了 (… for …) 表达式？"
    return f"应返回 torch.Tensor，你返回的是 {words}。"


def _number(x: float) -> str:
    """A float as a reader wants to see it: NaN, ±inf, 0.1234, 3.2×10^-7, 1.8×10^308."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0 or 1e-4 <= abs(x) < 1e6:
        if abs(x) >= 1000:
            return f"{x:.0f}" if x == int(x) else f"{x:.1f}"
        return f"{x:.4g}"
    exponent = math.floor(math.log10(abs(x)))
    mantissa = x / 10.0**exponent
    if abs(mantissa) >= 9.95:  # 9.96 rounds to 10.0
        mantissa, exponent = mantissa / 10, exponent + 1
    return f"{mantissa:.2g}×10^{exponent}"


def _gap(got: float, expected: float) -> str:
    if math.isnan(got):
        return "出现了 NaN"
    if math.isinf(got):
        return "出现了 inf，常见原因是 exp 溢出、log(0) 或除以 0" if not math.isinf(expected) else "无穷的符号不对"
    if math.isinf(expected):
        return f"这里应是 {_number(expected)}（被遮住或被过滤的位置）"
    diff = abs(got - expected)
    if diff >= 1e5:
        return f"相差约 {_number(diff)}，是一个极大的数，数值溢出了吗"
    return f"相差 {_number(diff)}"


def _index(flat: int, shape: torch.Size) -> str:
    idx = []
    for size in reversed(shape):
        idx.append(flat % size)
        flat //= size
    return "[" + ", ".join(map(str, reversed(idx))) + "]"


def _compare(got: Any, expected: Any, atol: float, dtype: torch.dtype | None = None) -> str | None:
    """``None`` when ``got`` matches ``expected``; otherwise a Chinese description of the difference."""
    try:
        return _compare_unsafe(got, expected, atol, dtype)
    except Exception as e:  # an object that cannot even be read (a strange tensor subclass, ...)
        return f"无法读取你返回的 {type(got).__name__}（{type(e).__name__}）：请返回普通的 torch.Tensor。"


def _compare_unsafe(got: Any, expected: Any, atol: float, dtype: torch.dtype | None) -> str | None:
    if got is None and expected is not None:
        return "你的函数返回了 None——是不是忘了写 return？"
    if isinstance(expected, tuple):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return f"应返回 {_describe(expected)}，你返回的是 {_describe(got)}。"
        for k, (g, e) in enumerate(zip(got, expected), start=1):
            problem = _compare_unsafe(g, e, atol, dtype)
            if problem is not None:
                return f"返回值[{k - 1}]（第 {k} 个返回值）：{problem}"
        return None
    if not isinstance(expected, torch.Tensor):
        return None if got == expected else f"期望 {expected!r}，实际 {got!r}。"
    if not isinstance(got, torch.Tensor):
        return _not_a_tensor(got)
    if type(got) is not torch.Tensor:
        return f"应返回普通的 torch.Tensor，你返回的是它的子类 {type(got).__name__}：用 torch 运算的结果即可。"
    if got.layout != torch.strided:
        return f"你返回的是稀疏张量（layout={got.layout}）：请返回普通的稠密张量（例如 .to_dense()）。"
    if got.shape != expected.shape:
        return f"形状不对：期望 {tuple(expected.shape)}，实际 {tuple(got.shape)}。"
    if got.device != expected.device:
        return f"设备不对：期望在 {expected.device} 上，实际在 {got.device} 上。"
    got, expected = got.detach(), expected.detach()
    if expected.dtype == torch.bool:
        if got.dtype != torch.bool:
            return f"dtype 应为 torch.bool（True = 可以关注），实际是 {got.dtype}。"
        wrong = got != expected
        return None if not wrong.any() else _where(wrong, got, expected, "布尔矩阵中有元素取值不对")
    # The kind must match (float32 vs float64 does not matter unless asked; float vs integer does).
    if got.is_floating_point() != expected.is_floating_point() or got.dtype == torch.bool or got.is_complex():
        kind = "浮点类型（如 torch.float32）" if expected.is_floating_point() else "整数类型（如 torch.long）"
        return f"dtype 应为{kind}，实际是 {got.dtype}。"
    if dtype is not None and got.is_floating_point() and got.dtype != dtype:
        return f"dtype 应为 {dtype}（题目要求），实际是 {got.dtype}。"
    if not expected.is_floating_point() and got.dtype != expected.dtype:  # int32 and uint8 are not int64
        return f"dtype 应为 {expected.dtype}，实际是 {got.dtype}（整数结果要用题目要求的整数类型，uint8 还会回绕）。"
    if not expected.is_floating_point():  # token ids, counts: exactly equal
        wrong = got != expected  # the same dtype, checked above
        return None if not wrong.any() else _where(wrong, got, expected,
                                                   "有元素取值不对（整数结果应与参考答案完全相同）")
    g, e = got.double(), expected.double()
    g_nan, e_nan = torch.isnan(g), torch.isnan(e)
    if (g_nan & ~e_nan).any():
        flat = int((g_nan & ~e_nan).flatten().nonzero()[0])
        return (f"输出中出现了 NaN（共 {int((g_nan & ~e_nan).sum())} 个，第一个在下标 {_index(flat, g.shape)}，"
                f"那里应是 {_number(float(e.flatten()[flat]))}）——"
                "检查是否对整行 -inf 做了 softmax、除以了 0，或 exp/log 溢出。")
    with torch.no_grad():
        close = (g == e) | ((g - e).abs() <= atol) | (g_nan & e_nan)
    if bool(close.all()):
        return None
    return _where(~close, g, e, "数值与参考答案不一致", atol)


def _where(wrong: torch.Tensor, got: torch.Tensor, expected: torch.Tensor, what: str, atol: float | None = None) -> str:
    """Where the worst wrong element is, what it should be, how far off, and how many are wrong."""
    flat_wrong = wrong.flatten()
    g, e = got.flatten(), expected.flatten()
    if g.is_floating_point():
        finite = torch.isfinite(g) & torch.isfinite(e)
        badness = torch.where(finite, (g - e).abs(), torch.full_like(g, math.inf))
        badness = torch.where(flat_wrong, badness.nan_to_num(math.inf), torch.full_like(g, -1.0))
        flat = int(badness.argmax())
        gv, ev = float(g[flat]), float(e[flat])
        detail = f"下标 {_index(flat, got.shape)} 处应为 {_number(ev)}，你的是 {_number(gv)}（{_gap(gv, ev)}）"
    else:
        flat = int(flat_wrong.nonzero()[0])
        detail = f"下标 {_index(flat, got.shape)} 处应为 {e[flat].item()}，你的是 {g[flat].item()}"
    count = f"共 {int(flat_wrong.sum())}/{flat_wrong.numel()} 个元素不对"
    if atol is not None:
        count += f"（允许误差 {_number(atol)}）"
    return f"{what}：{detail}；{count}。"


def _first_line(e: BaseException) -> tuple[type, str]:
    return type(e), (str(e).splitlines() or [""])[0]
