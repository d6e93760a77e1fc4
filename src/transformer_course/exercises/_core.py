"""The machinery shared by every checker: run the learner's function on seeded cases, compare with
the reference, and explain a mismatch in one Chinese sentence.

A checker is an :class:`Exercise`: a reference implementation, a case generator (cases of different
sizes, so that a swapped axis cannot pass by accident, plus cases of large magnitude, edge positions
and a "twin" with the shapes of an earlier case and new values, so that a cached answer shows) and a
list of typical mistakes. The learner's function runs on every case; a mistake's hint is the verdict
only when the learner's answers match that mistake on every case. Otherwise the verdict names the
case, the index and the size of the first difference.

Hints escalate (:meth:`Exercise.check`): the first time a mistake shows, the learner sees a nudge that
locates it (which case, which entry, how far off, and the mistake's ``nudge``: which quantity to look
at); the same mistake again in the same kernel gets the hint with the fix. Shortcuts the statement forbids
(:class:`Forbidden`), side effects (in-place edits, ``requires_grad`` on an input, a changed default
dtype or grad mode), endless loops, exceptions and odd return values never escape: each gets one line.

The plain data types (``Verdict``, ``Mistake``, ``Case``, ``Forbidden``) are in ``_types``; the guards
around one call (time limit, watched torch calls, side effects) in ``_guards``; the Chinese wording of a
mismatch in ``_verdicts``.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch
from torch import nn

from ._guards import (_call_learner, _call_quietly, _clone, _global_side_effect, _module_change, _Outcome, _unchanged,
                      _Watch)
from ._types import Case, Forbidden, Mistake, Verdict
from ._verdicts import _compare, _describe_args, _first_line
from ._verdicts import _number  # noqa: F401  (imported from here by tests)

PASS = "通过"
NOT_DONE = "尚未完成"


@dataclass(frozen=True)
class Exercise:
    """One coding exercise: ``make_cases()`` gives each case's positional arguments (a tuple or a :class:`Case`).

    ``dtype``: the exact dtype the statement asks for, of every float result (``None``: any float).
    ``reference_dtype``: the reference runs on float inputs cast to it (float64: the comparison is
    against exact values, so that a float32 answer summed in any order passes); ``None``: as given.
    ``grad``: the result is trained through (a loss): on every case its gradient with respect to each
    float input must equal the reference's (an answer computed under ``no_grad`` or detached fails).
    ``arg_names``: the learner's names of the arguments, to describe a case (``None``: the reference's;
    ``()``: the arguments are the checker's own, and a case is described by its ``note`` alone).
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
    grad: bool = False
    arg_names: tuple[str, ...] | None = None

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
            return Verdict(False, f"{self.name}：请传入你写的函数本身（不要加括号调用它），"
                                  f"收到的是 {type(fn).__name__}。")
        cases = self.cases()
        outcomes: list[_Outcome] = []
        for i, case in enumerate(cases, start=1):
            outcome = self._run(fn, case, i)
            if isinstance(outcome, str):  # a problem that needs no comparison (not done, timeout, side effect, ...)
                return Verdict(False, f"{self.name}：{outcome}")
            outcomes.append(outcome)
        refs = [self.expected(case) for case in cases]
        problems = [self._problem(o, ref, case) for o, ref, case in zip(outcomes, refs, cases)]
        if self.grad and all(p is None for p in problems):
            gradient = next(filter(None, (self._gradient_problem(fn, case, i) for i, case in enumerate(cases, 1))),
                            None)
            if gradient is not None:
                return Verdict(False, f"{self.name}：{gradient}")
        loops = self._loop_problem([o for o, p in zip(outcomes, problems) if p is None])
        if loops is not None:
            return Verdict(False, f"{self.name}：{loops}")
        if all(p is None for p in problems):
            return Verdict(True, f"{self.name}：{PASS}（{len(cases)} 组随机测试全部正确）")
        i = next(k for k, p in enumerate(problems) if p is not None)
        where = self._where(cases[i], i, problems[i])
        for k, mistake in enumerate(self.mistakes):
            if self._matches(mistake, cases, refs, outcomes):
                question = mistake.nudge or GENERAL_NUDGE
                return Verdict(False, f"{self.name}：{mistake.hint}",
                               nudge=f"{self.name}：{where}{question}{AGAIN}", kind=f"mistake {k}")
        stale = self._stale(cases, refs, outcomes, problems)
        if stale is not None:
            return Verdict(False, f"{self.name}：{stale}")
        return Verdict(False, f"{self.name}：{where}")

    def check(self, fn: Any) -> None:
        """Evaluate ``fn`` and print the one-line verdict (what the notebook's check cell calls).

        Returns nothing, so that the cell shows exactly one line; tests call :meth:`evaluate`.
        """
        print(shown(self.name, self.evaluate(fn)))

    def _where(self, case: Case, i: int, problem: str) -> str:
        """``第 i 组测试（x 形状 (2, 5, 12)、n_heads = 3）：…`` in the learner's names (or the case's note)."""
        names = self.arg_names
        if names is None:
            names = tuple(inspect.signature(self.reference).parameters)
        if names:
            inputs = _describe_args(case.args, names)
            note = f"（{case.note}）" if case.note else ""
            return f"第 {i + 1} 组测试（{inputs}）{problem}{note}"
        return f"第 {i + 1} 组测试（{case.note}）{problem}" if case.note else f"第 {i + 1} 组测试{problem}"

    # ---- one call of the learner's function --------------------------------------------------

    def _run(self, fn: Callable[..., Any], case: Case, i: int) -> _Outcome | str:
        """Call ``fn`` on a copy of the case; a string is a verdict that needs no comparison."""
        args = _clone(case.args)
        watch = _Watch(self.forbidden, args) if self.forbidden else None
        call = _call_learner(fn, args, self.time_limit_s, watch)
        value, error = call.value, call.error
        side_effect = _global_side_effect(call.grad_changed, call.dtype_changed, torch.get_default_dtype())
        if side_effect is not None:
            return side_effect
        if isinstance(error, NotImplementedError):
            return f"{NOT_DONE}——把 NotImplementedError 那一行换成你的实现，再运行本单元。"
        if call.timed_out:
            return f"第 {i} 组测试运行超过 {self.time_limit_s:g} 秒，可能有死循环（超时无法被 try/except 吞掉）。"
        if isinstance(error, SystemExit):
            return "你的函数调用了 exit()（抛出了 SystemExit）：请删掉 sys.exit / exit / quit，用 return 返回结果。"
        if watch is not None and watch.broken is not None:
            rule, what = watch.broken
            return f"{rule.reason}（你的代码里用到了 {what}）"
        for k, (before, after) in enumerate(zip(case.args, args), start=1):
            if isinstance(before, nn.Module):
                change = _module_change(before, after)
                if change is not None:
                    return (f"你的函数{change}：传入的第 {k} 个参数 {type(before).__name__} 是调用者的模型，"
                            "只能读它的权重，不能改动它。")
                continue
            if not isinstance(before, torch.Tensor):
                continue
            if not _unchanged(before, after):
                return ("你的函数修改了传入的张量（原地操作，如 +=、masked_fill_、x[...] = ...）；"
                        "请不要改动输入，需要时先 clone()。")
            if (after.requires_grad and not before.requires_grad) or after.grad is not None:
                return (f"你的函数给传入的第 {k} 个参数打开了 requires_grad（或留下了 .grad），调用者的张量被改动了："
                        "需要求导时先复制一份，x = x.clone().requires_grad_()。")
        return _Outcome(value, error, watch.calls if watch else 0)

    def _gradient_problem(self, fn: Callable[..., Any], case: Case, i: int) -> str | None:
        """The gradient of the learner's result on ``case`` against the reference's (``grad`` exercises)."""
        floats = [k for k, a in enumerate(case.args) if _is_float_tensor(a)]
        mine = [a.detach().clone().requires_grad_() if k in floats else a for k, a in enumerate(_clone(case.args))]
        dtype = self.reference_dtype
        ref_args = [(a.detach().to(dtype or a.dtype).clone().requires_grad_() if k in floats else a)
                    for k, a in enumerate(mine)]
        call = _call_learner(fn, tuple(mine), self.time_limit_s)
        value = call.value
        if call.error is not None or not isinstance(value, torch.Tensor):
            return None  # the value check has already passed on this case: nothing more to say
        if not value.requires_grad:
            return (f"第 {i} 组测试：数值对了，但结果没有梯度（requires_grad=False）。它是训练时要反向传播的损失："
                    "不要在 torch.no_grad() 下计算，也不要 .detach()、.item() 或经 NumPy 绕一圈。")
        with torch.enable_grad():
            expected = self.reference(*ref_args)
            weight = torch.linspace(0.5, 1.5, expected.numel(), dtype=expected.dtype).reshape(expected.shape)
            want = torch.autograd.grad((expected * weight).sum(), [ref_args[k] for k in floats], allow_unused=True)
            got = torch.autograd.grad((value * weight.to(value.dtype)).sum(), [mine[k] for k in floats],
                                      allow_unused=True)
        for k, w, g in zip(floats, want, got):
            w = torch.zeros_like(mine[k], dtype=torch.float64) if w is None else w.double()
            g = torch.zeros_like(w) if g is None else g.double()
            if not torch.allclose(g, w, rtol=1e-4, atol=self._atol(case)):
                gap = (g - w).abs().max().item()
                return (f"第 {i} 组测试：数值对了，但对第 {k + 1} 个参数的梯度不对（最大差 {gap:.3g}）："
                        "有一部分计算被 .detach()、no_grad 或整数运算切断了，训练时这部分收不到梯度。")
        return None

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
        """A wrong answer that repeats an earlier right one, where the right answers differ: state kept
        between calls."""
        for i, (case, got) in enumerate(zip(cases, outcomes)):
            if problems[i] is None or got.error is not None:
                continue
            for j in range(i):
                if (problems[j] is None and _compare(refs[i], refs[j], self._atol(case)) is not None
                        and _compare(got.value, outcomes[j].value, 0.0) is None):
                    return (f"第 {i + 1} 组测试返回的结果与第 {j + 1} 组完全相同，而两组的正确答案并不相同："
                            "你的结果没有随这一次输入的数值变化——要么记住了之前调用的结果（全局变量、默认参数或 "
                            "functools.cache 里的缓存），要么只用到了输入的形状。"
                            "每次调用都要根据这一次的输入重新计算。")
        return None


GENERAL_NUDGE = "这正是一个常见错误的表现：回到题目，逐步核对你的每一步与题目的说法是否一致。"
AGAIN = "（同样的错误再出现一次，检查会直接说出原因和改法。）"
_LAST_FAILURE: dict[str, str] = {}  # exercise name -> the kind of its last failure in this kernel


def shown(name: str, verdict: Verdict) -> str:
    """What the check cell prints: a failure with a nudge shows the nudge the first time and the message
    (with the fix) when the same kind of failure comes again in a row."""
    if verdict.passed or not verdict.kind:
        _LAST_FAILURE.pop(name, None)
        return verdict.message
    again = _LAST_FAILURE.get(name) == verdict.kind
    _LAST_FAILURE[name] = verdict.kind
    return verdict.message if again or not verdict.nudge else verdict.nudge


def randn(g: torch.Generator, *shape: int, scale: float = 1.0) -> torch.Tensor:
    """Seeded normal case data for checkers (standard deviation ``scale``): ``randn(g, 2, 5, 4)``."""
    return torch.randn(*shape, generator=g) * scale


def _is_float_tensor(a: Any) -> bool:
    return isinstance(a, torch.Tensor) and a.is_floating_point()
