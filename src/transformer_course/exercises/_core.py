"""The machinery shared by every checker: run the learner's function on seeded cases, compare with
the reference, and explain a mismatch in one Chinese sentence.

A checker is an :class:`Exercise`: a reference implementation, a case generator (each case a
different size, so that a swapped axis cannot pass by accident) and a list of typical mistakes.
When the learner's output is wrong, each mistake is run on the same input; if one matches, its hint
is the verdict. The learner's exceptions, endless loops and odd return values never escape.
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import torch

PASS = "通过"
NOT_DONE = "尚未完成"


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check: ``passed`` and the one-line Chinese ``message`` shown to the learner."""

    passed: bool
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Mistake:
    """A typical wrong implementation and the hint shown when the learner's output matches it."""

    hint: str
    fn: Callable[..., Any]


@dataclass(frozen=True)
class Exercise:
    """One coding exercise: ``make_cases(seed)`` gives the positional arguments of each case."""

    name: str
    reference: Callable[..., Any]
    make_cases: Callable[[], Sequence[tuple]]
    mistakes: Sequence[Mistake] = field(default_factory=tuple)
    atol: float = 1e-5
    time_limit_s: float = 5.0

    def evaluate(self, fn: Any) -> Verdict:
        """Run ``fn`` on every case and return the first problem found, or a pass."""
        if not callable(fn):
            return Verdict(False, f"{self.name}：请传入你写的函数本身（不要加括号调用它），收到的是 {type(fn).__name__}。")
        cases = self.make_cases()
        for i, args in enumerate(cases, start=1):
            problem = self._check_case(fn, args, i)
            if problem is not None:
                return Verdict(False, f"{self.name}：{problem}")
        return Verdict(True, f"{self.name}：{PASS}（{len(cases)} 组随机测试全部正确）")

    def check(self, fn: Any) -> None:
        """Evaluate ``fn`` and print the one-line verdict (what the notebook's check cell calls).

        Returns nothing, so that the cell shows exactly one line; tests call :meth:`evaluate`.
        """
        print(self.evaluate(fn).message)

    def _check_case(self, fn: Callable[..., Any], args: tuple, i: int) -> str | None:
        expected = self.reference(*args)
        learner_args = _clone(args)
        try:
            with _time_limit(self.time_limit_s):
                got = fn(*learner_args)
        except NotImplementedError:
            return f"{NOT_DONE}——把 NotImplementedError 那一行换成你的实现，再运行本单元。"
        except _Timeout:
            return f"第 {i} 组测试运行超过 {self.time_limit_s:.0f} 秒，可能有死循环。"
        except Exception as e:  # the learner's bug, reported kindly
            return f"第 {i} 组测试时你的函数抛出了 {type(e).__name__}：{str(e).splitlines()[0] if str(e) else ''}".rstrip("：")
        if not _same(args, learner_args, atol=0.0):
            return "你的函数修改了传入的张量（原地操作，如 +=、masked_fill_）；请不要改动输入。"
        problem = _compare(got, expected, self.atol)
        if problem is None:
            return None
        for mistake in self.mistakes:
            try:
                wrong = mistake.fn(*_clone(args))
            except Exception:
                continue
            if _compare(got, wrong, self.atol) is None:
                return mistake.hint
        return problem


def randn(g: torch.Generator, *shape: int) -> torch.Tensor:
    """Seeded standard-normal case data for checkers: ``randn(g, 2, 5, 4)``."""
    return torch.randn(*shape, generator=g)


class _Timeout(Exception):
    pass


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Interrupt an endless loop with SIGALRM where the platform allows it (Unix, main thread)."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def _raise(signum: int, frame: Any) -> None:
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _clone(args: tuple) -> tuple:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def _same(a: Any, b: Any, atol: float) -> bool:
    if isinstance(a, torch.Tensor) and not a.is_floating_point():  # integer inputs (token ids, lengths)
        return isinstance(b, torch.Tensor) and b.dtype == a.dtype and torch.equal(a, b)
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return all(_same(x, y, atol) for x, y in zip(a, b))
    return _compare(b, a, atol) is None


def _describe(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"形状 {tuple(x.shape)} 的张量"
    if isinstance(x, tuple):
        return f"含 {len(x)} 个元素的 tuple"
    return type(x).__name__


def _compare(got: Any, expected: Any, atol: float) -> str | None:
    """``None`` when ``got`` matches ``expected``; otherwise a Chinese description of the difference."""
    if got is None and expected is not None:
        return "你的函数返回了 None——是不是忘了写 return？"
    if isinstance(expected, tuple):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return f"应返回 {_describe(expected)}，你返回的是 {_describe(got)}。"
        for k, (g, e) in enumerate(zip(got, expected), start=1):
            problem = _compare(g, e, atol)
            if problem is not None:
                return f"返回值的第 {k} 项：{problem}"
        return None
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"应返回 torch.Tensor，你返回的是 {type(got).__name__}。"
        if got.shape != expected.shape:
            return f"形状不对：期望 {tuple(expected.shape)}，实际 {tuple(got.shape)}。"
        if got.device != expected.device:
            return f"设备不对：期望在 {expected.device} 上，实际在 {got.device} 上。"
        if expected.dtype == torch.bool:
            if got.dtype != torch.bool:
                return f"dtype 应为 torch.bool（True = 可以关注），实际是 {got.dtype}。"
            return None if torch.equal(got, expected) else "布尔矩阵中有元素取值不对。"
        # The kind must match (float32 vs float64 does not matter; float vs integer does).
        if got.is_floating_point() != expected.is_floating_point() or got.dtype == torch.bool:
            kind = "浮点类型（如 torch.float32）" if expected.is_floating_point() else "整数类型（如 torch.long）"
            return f"dtype 应为{kind}，实际是 {got.dtype}。"
        if not expected.is_floating_point():  # token ids, counts: exactly equal
            return None if torch.equal(got.long(), expected.long()) else "有元素取值不对（整数结果应与参考答案完全相同）。"
        if torch.isnan(got).any() and not torch.isnan(expected).any():
            return "输出中出现了 NaN——检查是否对整行 -inf 做了 softmax，或除以了 0。"
        if not torch.equal(torch.isnan(got), torch.isnan(expected)):
            return "NaN 出现的位置与参考答案不同。"
        diff = (got.double() - expected.double()).nan_to_num(0.0).abs().max().item()
        return None if diff <= atol else f"数值与参考答案不一致（最大误差 {diff:.3g}）。"
    return None if got == expected else f"期望 {expected!r}，实际 {got!r}。"
