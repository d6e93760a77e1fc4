"""The classes of wrong answer a checker looks for besides a wrong value, one small object each.

An :class:`Exercise` lists its rules (``rules``, :data:`DEFAULT_RULES` unless it says otherwise) and asks
each, in order, at up to three moments: after every call of the learner's function (``after_call``: the call
disturbed something, was not done, took too long, took a forbidden shortcut), once all answers are compared
(``after_answers``: right values with a cut gradient, or computed by a Python loop), and after no typical
mistake matched (``after_mistakes``: an answer remembered from an earlier call). A rule returns one Chinese
line, or ``None``. ``on_cases`` checks the exercise's own cases (its authors' rule, run by the tests).

A new class of wrong answer is one new ``Rule`` here, listed in :data:`DEFAULT_RULES` or by the exercises
that need it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
from torch import nn

from ._guards import (_Call, _call_learner, _clone, _global_side_effect, _module_change, _Outcome, _unchanged,
                      _Watch)
from ._types import Case
from ._verdicts import _compare

Exercise = Any  # an ``_core.Exercise`` (not imported: ``_core`` imports this module)

NOT_DONE = "尚未完成"


@dataclass(frozen=True)
class Called:
    """One guarded call: the ``case`` (number ``i``, from 1), what it gave (``call``), the arguments after
    the call (``args``) and the watch on the torch calls it made (``watch``, with ``forbidden`` rules)."""

    case: Case
    i: int
    call: _Call
    args: tuple
    watch: _Watch | None


@dataclass(frozen=True)
class Answers:
    """Every case's call: the learner's function ``fn``, the ``cases``, the reference answers ``refs``,
    the ``outcomes`` and, per case, the value ``problems`` (``None``: right)."""

    fn: Callable[..., Any]
    cases: list[Case]
    refs: list[Any]
    outcomes: list[_Outcome]
    problems: list[str | None]


class Rule:
    """One class of wrong answer; each hook returns the verdict's line, or ``None`` (nothing found)."""

    def after_call(self, exercise: Exercise, called: Called) -> str | None:
        return None

    def after_answers(self, exercise: Exercise, answers: Answers) -> str | None:
        return None

    def after_mistakes(self, exercise: Exercise, answers: Answers) -> str | None:
        return None

    def on_cases(self, exercise: Exercise, cases: list[Case]) -> str | None:
        return None


# ---- after each call --------------------------------------------------------------------------

class GlobalState(Rule):
    """The call turned grad mode off or changed torch's default dtype (both are restored for the caller)."""

    def after_call(self, exercise: Exercise, called: Called) -> str | None:
        call = called.call
        return _global_side_effect(call.grad_changed, call.dtype_changed, torch.get_default_dtype())


class NotDone(Rule):
    """The template's ``raise NotImplementedError`` is still there."""

    def after_call(self, exercise: Exercise, called: Called) -> str | None:
        if isinstance(called.call.error, NotImplementedError):
            return f"{NOT_DONE}——把 NotImplementedError 那一行换成你的实现，再运行本单元。"
        return None


class TimeLimit(Rule):
    """An endless (or far too slow) call, stopped by the alarm."""

    def after_call(self, exercise: Exercise, called: Called) -> str | None:
        if called.call.timed_out:
            return (f"第 {called.i} 组测试运行超过 {exercise.time_limit_s:g} 秒，可能有死循环"
                    "（超时无法被 try/except 吞掉）。")
        return None


class NoExit(Rule):
    """``exit()`` instead of ``return``."""

    def after_call(self, exercise: Exercise, called: Called) -> str | None:
        if isinstance(called.call.error, SystemExit):
            return "你的函数调用了 exit()（抛出了 SystemExit）：请删掉 sys.exit / exit / quit，用 return 返回结果。"
        return None


class ForbiddenRoutes(Rule):
    """A shortcut the statement rules out (the exercise's ``forbidden``), by any library route the watch sees."""

    def after_call(self, exercise: Exercise, called: Called) -> str | None:
        if called.watch is not None and called.watch.broken is not None:
            rule, what = called.watch.broken
            return f"{rule.reason}（你的代码里用到了 {what}）"
        return None


class InputsUnchanged(Rule):
    """The caller's tensors and modules come back as they went in: values, ``requires_grad``, ``.grad``,
    a module's weights, flags and train/eval mode."""

    def after_call(self, exercise: Exercise, called: Called) -> str | None:
        for k, (before, after) in enumerate(zip(called.case.args, called.args), start=1):
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
        return None


# ---- once all answers are compared ------------------------------------------------------------

class Gradient(Rule):
    """``grad`` exercises: where every value is right, the gradient with respect to each float input must
    equal the reference's (an answer computed under ``no_grad`` or detached fails)."""

    def after_answers(self, exercise: Exercise, answers: Answers) -> str | None:
        if not exercise.grad or any(p is not None for p in answers.problems):
            return None
        return next(filter(None, (self._problem(exercise, answers.fn, case, i)
                                  for i, case in enumerate(answers.cases, 1))), None)

    @staticmethod
    def _problem(exercise: Exercise, fn: Callable[..., Any], case: Case, i: int) -> str | None:
        floats = [k for k, a in enumerate(case.args) if _is_float_tensor(a)]
        mine = [a.detach().clone().requires_grad_() if k in floats else a
                for k, a in enumerate(_clone(case.args))]
        dtype = exercise.reference_dtype
        ref_args = [(a.detach().to(dtype or a.dtype).clone().requires_grad_() if k in floats else a)
                    for k, a in enumerate(mine)]
        call = _call_learner(fn, tuple(mine), exercise.time_limit_s)
        value = call.value
        if call.error is not None or not isinstance(value, torch.Tensor):
            return None  # the value check has already passed on this case: nothing more to say
        if not value.requires_grad:
            return (f"第 {i} 组测试：数值对了，但结果没有梯度（requires_grad=False）。它是训练时要反向传播的损失："
                    "不要在 torch.no_grad() 下计算，也不要 .detach()、.item() 或经 NumPy 绕一圈。")
        with torch.enable_grad():
            expected = exercise.reference(*ref_args)
            weight = torch.linspace(0.5, 1.5, expected.numel(), dtype=expected.dtype).reshape(expected.shape)
            want = torch.autograd.grad((expected * weight).sum(), [ref_args[k] for k in floats], allow_unused=True)
            got = torch.autograd.grad((value * weight.to(value.dtype)).sum(), [mine[k] for k in floats],
                                      allow_unused=True)
        for k, w, g in zip(floats, want, got):
            w = torch.zeros_like(mine[k], dtype=torch.float64) if w is None else w.double()
            g = torch.zeros_like(w) if g is None else g.double()
            if not torch.allclose(g, w, rtol=1e-4, atol=exercise.atol_of(case)):
                gap = (g - w).abs().max().item()
                return (f"第 {i} 组测试：数值对了，但对第 {k + 1} 个参数的梯度不对（最大差 {gap:.3g}）："
                        "有一部分计算被 .detach()、no_grad 或整数运算切断了，训练时这部分收不到梯度。")
        return None


class NoLoops(Rule):
    """A ``Forbidden(loops=True)`` rule: the right answers took different numbers of torch calls on
    inputs of different sizes (a Python loop over rows)."""

    def after_answers(self, exercise: Exercise, answers: Answers) -> str | None:
        rule = next((r for r in exercise.forbidden if r.loops), None)
        counts = sorted({o.calls for o, p in zip(answers.outcomes, answers.problems) if p is None})
        if rule is None or len(counts) < 2:
            return None
        return (f"{rule.reason}（在不同大小的输入上，你的函数调用 torch 运算的次数不同：{counts[0]}～{counts[-1]} 次，"
                "像是用了 Python 循环）")


# ---- when no typical mistake matched ----------------------------------------------------------

class FreshAnswers(Rule):
    """A wrong answer that repeats an earlier right one where the right answers differ: state kept
    between calls (a global, a default argument, ``functools.cache``) or only the input's shape used."""

    def after_mistakes(self, exercise: Exercise, answers: Answers) -> str | None:
        cases, refs, outcomes, problems = answers.cases, answers.refs, answers.outcomes, answers.problems
        for i, (case, got) in enumerate(zip(cases, outcomes)):
            if problems[i] is None or got.error is not None:
                continue
            for j in range(i):
                if (problems[j] is None and _compare(refs[i], refs[j], exercise.atol_of(case)) is not None
                        and _compare(got.value, outcomes[j].value, 0.0) is None):
                    return (f"第 {i + 1} 组测试返回的结果与第 {j + 1} 组完全相同，而两组的正确答案并不相同："
                            "你的结果没有随这一次输入的数值变化——要么记住了之前调用的结果（全局变量、默认参数或 "
                            "functools.cache 里的缓存），要么只用到了输入的形状。"
                            "每次调用都要根据这一次的输入重新计算。")
        return None


# ---- the exercise's own cases (checked by the tests) -------------------------------------------

class VariedCases(Rule):
    """At least three different shapes (a swapped axis shows), and a twin: a later case with an earlier
    case's shapes and another answer (an answer cached by shape shows)."""

    def on_cases(self, exercise: Exercise, cases: list[Case]) -> str | None:
        shapes = [_shapes(c.args) for c in cases]
        if len(set(shapes)) < 3:
            return f"{exercise.name}: fewer than 3 distinct case shapes: {shapes}"
        twins = [(i, j) for j in range(len(cases)) for i in range(j) if shapes[i] == shapes[j]]
        if not any(_differ(exercise.expected(cases[i]), exercise.expected(cases[j])) for i, j in twins):
            return f"{exercise.name}: no later case repeats an earlier case's shapes with another answer: {shapes}"
        return None


DEFAULT_RULES: tuple[Rule, ...] = (GlobalState(), NotDone(), TimeLimit(), NoExit(), ForbiddenRoutes(),
                                   InputsUnchanged(), Gradient(), NoLoops(), FreshAnswers(), VariedCases())


def _is_float_tensor(a: Any) -> bool:
    return isinstance(a, torch.Tensor) and a.is_floating_point()


def _shapes(args: Sequence[Any]) -> tuple:
    return tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor))


def _differ(a: Any, b: Any) -> bool:
    if isinstance(a, tuple):
        return any(_differ(x, y) for x, y in zip(a, b))
    return a.shape != b.shape or not torch.equal(a.nan_to_num(), b.nan_to_num())
