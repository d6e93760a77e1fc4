"""The machinery shared by every checker: run the learner's function on seeded cases, compare with
the reference, and explain a mismatch in one Chinese sentence.

A checker is an :class:`Exercise`: a reference implementation, a case generator (cases of different
sizes, so that a swapped axis cannot pass by accident, plus cases of large magnitude, edge positions
and a "twin" with the shapes of an earlier case and new values, so that a cached answer shows) and a
list of typical mistakes. The learner's function runs on every case; a mistake's hint is the verdict
only when the learner's answers match that mistake on every case. Otherwise the verdict names the
case, the index and the size of the first difference. Shortcuts the statement forbids
(:class:`Forbidden`), side effects (in-place edits, ``requires_grad`` on an input, a changed default
dtype or grad mode), endless loops, exceptions and odd return values never escape: each gets one line.
"""
from __future__ import annotations

import math
import os
import signal
import sys
import threading
import types
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import torch
from torch.overrides import TorchFunctionMode

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
class Case:
    """One test input: the positional ``args`` of the learner's function.

    ``atol`` replaces the exercise's tolerance for this case (inputs of large magnitude, where float32
    rounding is larger); ``note`` is added to a mismatch on this case (what the case is there to test).
    """

    args: tuple
    atol: float | None = None
    note: str = ""


@dataclass(frozen=True)
class Forbidden:
    """A shortcut the exercise statement rules out, with the Chinese ``reason`` shown when it is taken.

    functions: torch functions or ``Tensor`` methods the learner's code must not call.
    course: no function of the course package (``tc.*``; the checkers' own helpers excepted).
    indexing: no lookup with a tensor or list as the index (``weight[ids]``).
    loops: the number of torch calls must not depend on the input's size (no Python loop over rows).
    max_numel: no tensor made by a torch call may have more than ``max_numel(*args)`` elements.
    example: an attempt that takes the shortcut (tried by ``tests/wrong_attempts.py``).
    """

    reason: str
    functions: tuple[Callable[..., Any], ...] = ()
    course: bool = False
    indexing: bool = False
    loops: bool = False
    max_numel: Callable[..., int] | None = None
    example: Callable[..., Any] | None = None


@dataclass(frozen=True)
class _Outcome:
    """What one call of a function gave: its ``value``, or the ``error`` it raised; torch ``calls`` made."""

    value: Any = None
    error: BaseException | None = None
    calls: int = 0


@dataclass(frozen=True)
class Exercise:
    """One coding exercise: ``make_cases()`` gives each case's positional arguments (a tuple or a :class:`Case`).

    ``dtype``: the exact dtype the statement asks for, of every float result (``None``: any float).
    ``reference_dtype``: the reference runs on float inputs cast to it (float64: the comparison is
    against exact values, so that a float32 answer summed in any order passes); ``None``: as given.
    """

    name: str
    reference: Callable[..., Any]
    make_cases: Callable[[], Sequence[tuple | Case]]
    mistakes: Sequence[Mistake] = field(default_factory=tuple)
    atol: float = 1e-5
    time_limit_s: float = 5.0
    forbidden: Sequence[Forbidden] = field(default_factory=tuple)
    dtype: torch.dtype | None = None
    reference_dtype: torch.dtype | None = torch.float64

    def cases(self) -> list[Case]:
        """The cases as :class:`Case` objects."""
        return [c if isinstance(c, Case) else Case(tuple(c)) for c in self.make_cases()]

    def expected(self, case: Case) -> Any:
        """The reference's answer on ``case`` (in ``reference_dtype`` where that is set)."""
        args = _clone(case.args)
        if self.reference_dtype is not None:
            args = tuple(a.to(self.reference_dtype) if _is_float_tensor(a) else a for a in args)
        with torch.enable_grad():
            return self.reference(*args)

    def evaluate(self, fn: Any) -> Verdict:
        """Run ``fn`` on every case and return a pass, or the one-line verdict on what is wrong."""
        if not callable(fn):
            return Verdict(False, f"{self.name}：请传入你写的函数本身（不要加括号调用它），收到的是 {type(fn).__name__}。")
        cases = self.cases()
        outcomes: list[_Outcome] = []
        for i, case in enumerate(cases, start=1):
            outcome = self._run(fn, case, i)
            if isinstance(outcome, str):  # a problem that needs no comparison (not done, timeout, side effect, ...)
                return Verdict(False, f"{self.name}：{outcome}")
            outcomes.append(outcome)
        refs = [self.expected(case) for case in cases]
        problems = [self._problem(o, ref, case) for o, ref, case in zip(outcomes, refs, cases)]
        loops = self._loop_problem([o for o, p in zip(outcomes, problems) if p is None])
        if loops is not None:
            return Verdict(False, f"{self.name}：{loops}")
        if all(p is None for p in problems):
            return Verdict(True, f"{self.name}：{PASS}（{len(cases)} 组随机测试全部正确）")
        for mistake in self.mistakes:
            if self._matches(mistake, cases, refs, outcomes):
                return Verdict(False, f"{self.name}：{mistake.hint}")
        stale = self._stale(cases, refs, outcomes, problems)
        if stale is not None:
            return Verdict(False, f"{self.name}：{stale}")
        i = next(k for k, p in enumerate(problems) if p is not None)
        note = f"（{cases[i].note}）" if cases[i].note else ""
        return Verdict(False, f"{self.name}：第 {i + 1} 组测试（输入 {_describe_args(cases[i].args)}）"
                              f"{problems[i]}{note}")

    def check(self, fn: Any) -> None:
        """Evaluate ``fn`` and print the one-line verdict (what the notebook's check cell calls).

        Returns nothing, so that the cell shows exactly one line; tests call :meth:`evaluate`.
        """
        print(self.evaluate(fn).message)

    # ---- one call of the learner's function --------------------------------------------------

    def _run(self, fn: Callable[..., Any], case: Case, i: int) -> _Outcome | str:
        """Call ``fn`` on a copy of the case; a string is a verdict that needs no comparison."""
        args = _clone(case.args)
        default_dtype = torch.get_default_dtype()
        watch = _Watch(self.forbidden, args) if self.forbidden else None
        value, error = None, None
        timer, grad_changed = _Timer(), False
        try:
            with torch.enable_grad(), (watch or _nothing()):
                try:
                    with _time_limit(self.time_limit_s) as timer:
                        value = fn(*args)
                finally:
                    grad_changed = not torch.is_grad_enabled()  # leaving enable_grad restores the caller's mode
        except KeyboardInterrupt:
            raise
        except _Timeout:
            timer.fired = True
        except BaseException as e:  # the learner's bug (SystemExit included), reported kindly
            error = e
        finally:
            dtype_changed = torch.get_default_dtype() != default_dtype
            torch.set_default_dtype(default_dtype)
        side_effect = _global_side_effect(grad_changed, dtype_changed, default_dtype)
        if side_effect is not None:
            return side_effect
        if isinstance(error, NotImplementedError):
            return f"{NOT_DONE}——把 NotImplementedError 那一行换成你的实现，再运行本单元。"
        if timer.fired:
            return f"第 {i} 组测试运行超过 {self.time_limit_s:g} 秒，可能有死循环（超时无法被 try/except 吞掉）。"
        if isinstance(error, SystemExit):
            return "你的函数调用了 exit()（抛出了 SystemExit）：请删掉 sys.exit / exit / quit，用 return 返回结果。"
        if watch is not None and watch.broken is not None:
            rule, what = watch.broken
            return f"{rule.reason}（你的代码里用到了 {what}）"
        for k, (before, after) in enumerate(zip(case.args, args), start=1):
            if not isinstance(before, torch.Tensor):
                continue
            if not _unchanged(before, after):
                return "你的函数修改了传入的张量（原地操作，如 +=、masked_fill_、x[...] = ...）；请不要改动输入，需要时先 clone()。"
            if (after.requires_grad and not before.requires_grad) or after.grad is not None:
                return (f"你的函数给传入的第 {k} 个参数打开了 requires_grad（或留下了 .grad），调用者的张量被改动了："
                        "需要求导时先复制一份，x = x.clone().requires_grad_()。")
        return _Outcome(value, error, watch.calls if watch else 0)

    def _loop_problem(self, right: list[_Outcome]) -> str | None:
        """The rule against loops is broken when the right answers took different numbers of torch calls."""
        rule = next((r for r in self.forbidden if r.loops), None)
        counts = sorted({o.calls for o in right})
        if rule is None or len(counts) < 2:
            return None
        return (f"{rule.reason}（在不同大小的输入上，你的函数调用 torch 运算的次数不同：{counts[0]}～{counts[-1]} 次，"
                "像是用了 Python 循环）")

    # ---- comparing ----------------------------------------------------------------------------

    def _atol(self, case: Case) -> float:
        return self.atol if case.atol is None else case.atol

    def _problem(self, outcome: _Outcome, ref: Any, case: Case) -> str | None:
        if outcome.error is not None:
            e = outcome.error
            detail = str(e).splitlines()[0] if str(e).strip() else ""
            return f"时你的函数抛出了 {type(e).__name__}：{detail}".rstrip("：")
        problem = _compare(outcome.value, ref, self._atol(case), self.dtype)
        return None if problem is None else f"：{problem}"

    def _matches(self, mistake: Mistake, cases: list[Case], refs: list[Any], outcomes: list[_Outcome]) -> bool:
        """The learner's answers are the mistake's on every case, and some case tells the mistake from the reference.

        Where the mistake happens to agree with the reference, a right answer counts as agreeing with it too.
        """
        told_apart = False
        for case, ref, got in zip(cases, refs, outcomes):
            wrong = _call_quietly(mistake.fn, case.args)
            atol = self._atol(case)
            if wrong.error is not None:  # the mistake raises here: so must the learner's function, alike
                if got.error is None or _first_line(got.error) != _first_line(wrong.error):
                    return False
                told_apart = True
                continue
            if got.error is not None:
                return False
            like_ref = _compare(wrong.value, ref, atol) is None
            if _compare(got.value, wrong.value, atol) is None:
                told_apart = told_apart or not like_ref
            elif not (like_ref and _compare(got.value, ref, atol, self.dtype) is None):
                return False
        return told_apart

    def _stale(self, cases: list[Case], refs: list[Any], outcomes: list[_Outcome],
               problems: list[str | None]) -> str | None:
        """A wrong answer that repeats an earlier right one, where the right answers differ: state kept between calls."""
        for i, (case, got) in enumerate(zip(cases, outcomes)):
            if problems[i] is None or got.error is not None:
                continue
            for j in range(i):
                if (problems[j] is None and _compare(refs[i], refs[j], self._atol(case)) is not None
                        and _compare(got.value, outcomes[j].value, 0.0) is None):
                    return (f"第 {i + 1} 组测试返回的结果与第 {j + 1} 组完全相同，而两组的正确答案并不相同："
                            "你的函数似乎记住了之前调用的结果（全局变量、默认参数或 functools.cache 里的缓存）。"
                            "每次调用都要根据这一次的输入重新计算。")
        return None


def randn(g: torch.Generator, *shape: int) -> torch.Tensor:
    """Seeded standard-normal case data for checkers: ``randn(g, 2, 5, 4)``."""
    return torch.randn(*shape, generator=g)


# ---- time limit --------------------------------------------------------------------------------

class _Timeout(BaseException):
    """The alarm: a BaseException, so that the learner's ``except Exception`` cannot swallow it."""


@dataclass
class _Timer:
    armed: bool = True
    fired: bool = False


@contextmanager
def _time_limit(seconds: float) -> Iterator[_Timer]:
    """Interrupt an endless loop with SIGALRM where the platform allows it (Unix, main thread).

    The alarm repeats every 0.1 s while armed, and ``timer.fired`` records that it rang: a learner
    who catches even ``BaseException`` and returns is still reported as too slow.
    """
    timer = _Timer()
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield timer
        return

    def _raise(signum: int, frame: Any) -> None:
        if timer.armed:
            timer.fired = True
            raise _Timeout

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.1)
    try:
        yield timer
    finally:
        timer.armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


# ---- watching what the learner's code calls ---------------------------------------------------

_EXERCISES_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def torch_name(func: Any) -> str:
    """A readable name of a torch function as the learner writes it: ``F.softmax``, ``Tensor.softmax``."""
    qualname = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    module = getattr(func, "__module__", None) or ""
    short = qualname.split(".")[-1]
    if qualname.startswith(("TensorBase.", "Tensor.")):
        return f"Tensor.{short}"
    if qualname.startswith("_VariableFunctionsClass.") or module == "torch":
        return f"torch.{short}"
    if module in ("torch.nn.functional", "torch._C._nn"):
        return f"F.{short}"
    return f"{module}.{qualname}" if module else qualname


def _indexes_with_tensor(index: Any) -> bool:
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(p, (torch.Tensor, list)) for p in parts)


def _numel(out: Any) -> int:
    if isinstance(out, torch.Tensor):
        return out.numel()
    if isinstance(out, (tuple, list)):
        return max((_numel(o) for o in out), default=0)
    return 0


class _Watch(TorchFunctionMode):
    """While the learner's function runs: count the torch calls and keep the first rule broken.

    Torch calls are seen through ``__torch_function__`` (only those the learner's code makes: a torch
    function's own inner calls are not seen); calls into the course package through ``sys.setprofile``.
    """

    def __init__(self, rules: Sequence[Forbidden], args: tuple) -> None:
        super().__init__()
        self.functions = {f: rule for rule in rules for f in rule.functions}
        self.indexing = next((r for r in rules if r.indexing), None)
        self.limits = [(r, r.max_numel(*args)) for r in rules if r.max_numel is not None]
        self.course = next((r for r in rules if r.course), None)
        self.calls = 0
        self.broken: tuple[Forbidden, str] | None = None
        self._profile_before: Any = None

    def __enter__(self) -> "_Watch":
        if self.course is not None:
            self._profile_before = sys.getprofile()
            sys.setprofile(self._profile)
        return super().__enter__()

    def __exit__(self, *exc: Any) -> Any:
        try:
            return super().__exit__(*exc)
        finally:
            if self.course is not None:
                sys.setprofile(self._profile_before)

    def _profile(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event != "call" or self.broken is not None:
            return
        path = frame.f_code.co_filename
        if path.startswith(_PACKAGE_DIR) and not path.startswith(_EXERCISES_DIR):
            name = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
            self.broken = (self.course, f"课程包的 {name.replace('.<locals>', '')}")  # type: ignore[arg-type]

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        self.calls += 1
        if self.broken is None:
            try:
                rule = self.functions.get(func)
            except TypeError:  # an unhashable callable
                rule = None
            if rule is not None:
                self.broken = (rule, torch_name(func))
            elif (self.indexing is not None and func is torch.Tensor.__getitem__ and len(args) > 1
                  and _indexes_with_tensor(args[1])):
                self.broken = (self.indexing, "张量下标 x[ids]")
        out = func(*args, **(kwargs or {}))
        if self.broken is None:
            for rule, limit in self.limits:
                if _numel(out) > limit:
                    shape = tuple(out.shape) if isinstance(out, torch.Tensor) else "?"
                    self.broken = (rule, f"{torch_name(func)}，得到形状 {shape} 的张量")
                    break
        return out


# ---- side effects ------------------------------------------------------------------------------

def _global_side_effect(grad_changed: bool, dtype_changed: bool, default_dtype: torch.dtype) -> str | None:
    if dtype_changed:
        return (f"你的函数改动了全局的默认 dtype（torch.set_default_dtype），检查器已把它恢复为 {default_dtype}："
                "需要别的精度时，请对单个张量用 .double() 或 dtype= 参数。")
    if grad_changed:
        return ("你的函数关掉了全局的梯度计算（torch.set_grad_enabled(False)，或没有配合 with 使用的 torch.no_grad()），"
                "检查器已把它恢复：请用 with torch.no_grad(): 只包住需要的那几行。")
    return None


def _clone(args: tuple) -> tuple:
    return tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args)


def _is_float_tensor(a: Any) -> bool:
    return isinstance(a, torch.Tensor) and a.is_floating_point()


def _unchanged(before: torch.Tensor, after: torch.Tensor) -> bool:
    if not isinstance(after, torch.Tensor) or after.dtype != before.dtype or after.shape != before.shape:
        return False
    with torch.no_grad():
        return torch.equal(before, after) or (before.is_floating_point()
                                               and torch.allclose(before, after, rtol=0.0, atol=0.0, equal_nan=True))


def _first_line(e: BaseException) -> tuple[type, str]:
    return type(e), (str(e).splitlines() or [""])[0]


def _call_quietly(fn: Callable[..., Any], args: tuple) -> _Outcome:
    """Run one of the checker's own functions (a typical mistake) on a copy of ``args``."""
    try:
        with torch.enable_grad():
            return _Outcome(fn(*_clone(args)))
    except Exception as e:
        return _Outcome(error=e)


# ---- describing values in Chinese --------------------------------------------------------------

def _describe_args(args: tuple) -> str:
    parts = []
    for a in args:
        if isinstance(a, torch.Tensor):
            parts.append(f"{tuple(a.shape)}")
        elif isinstance(a, float):
            parts.append(_number(a))
        elif isinstance(a, (int, bool)):
            parts.append(repr(a))
        elif isinstance(a, torch.nn.Module):
            parts.append(type(a).__name__)
        elif callable(a):
            parts.append("函数")
        else:
            parts.append(type(a).__name__)
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
                return f"返回值的第 {k} 项：{problem}"
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
    if not expected.is_floating_point():  # token ids, counts: exactly equal
        wrong = got.long() != expected.long()
        return None if not wrong.any() else _where(wrong, got, expected, "有元素取值不对（整数结果应与参考答案完全相同）")
    g, e = got.double(), expected.double()
    g_nan, e_nan = torch.isnan(g), torch.isnan(e)
    if (g_nan & ~e_nan).any():
        flat = int((g_nan & ~e_nan).flatten().nonzero()[0])
        return (f"输出中出现了 NaN（共 {int((g_nan & ~e_nan).sum())} 个，第一个在下标 {_index(flat, g.shape)}，"
                f"那里应是 {_number(float(e.flatten()[flat]))}）——检查是否对整行 -inf 做了 softmax、除以了 0，或 exp/log 溢出。")
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
