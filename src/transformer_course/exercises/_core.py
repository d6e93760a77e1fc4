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
Each of these classes of wrong answer is a ``Rule`` object (``_rules``) that the exercise lists
(``Exercise.rules``); a new class is one new rule.

The plain data types (``Verdict``, ``Mistake``, ``Case``, ``Forbidden``) are in ``_types``; the guards
around one call (time limit, watched torch calls, side-effect probes) in ``_guards``; the Chinese wording
of a mismatch in ``_verdicts``.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from ._guards import _call_learner, _call_quietly, _clone, _Outcome, _Watch
from ._rules import DEFAULT_RULES, NOT_DONE, Answers, Called, Rule, _is_float_tensor
from ._types import Case, Forbidden, Mistake, Verdict
from ._verdicts import _compare, _describe_args, _first_line
from ._verdicts import _number  # noqa: F401  (imported from here by tests)

PASS = "通过"
__all__ = ["NOT_DONE", "PASS", "Case", "Exercise", "Forbidden", "Mistake", "Rule", "Verdict", "randn", "shown"]


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
    ``rules``: the classes of wrong answer looked for besides a wrong value (``_rules``), in order.
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
    rules: Sequence[Rule] = DEFAULT_RULES

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
        problems = [self._problem(o, ref, c) for o, ref, c in zip(outcomes, refs, cases)]
        answers = Answers(fn, cases, refs, outcomes, problems)
        found = next(filter(None, (rule.after_answers(self, answers) for rule in self.rules)), None)
        if found is not None:
            return Verdict(False, f"{self.name}：{found}")
        if all(p is None for p in problems):
            return Verdict(True, f"{self.name}：{PASS}（{len(cases)} 组随机测试全部正确）")
        i = next(k for k, p in enumerate(problems) if p is not None)
        where = self._where(cases[i], i, problems[i])
        for k, mistake in enumerate(self.mistakes):
            if self._matches(mistake, cases, refs, outcomes):
                question = mistake.nudge or GENERAL_NUDGE
                return Verdict(False, f"{self.name}：{mistake.hint}",
                               nudge=f"{self.name}：{where}{question}{AGAIN}", kind=f"mistake {k}")
        found = next(filter(None, (rule.after_mistakes(self, answers) for rule in self.rules)), None)
        return Verdict(False, f"{self.name}：{found or where}")

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
        """Call ``fn`` on a copy of the case; a string is a verdict that needs no comparison (a rule's)."""
        args = _clone(case.args)
        watch = _Watch(self.forbidden, args) if self.forbidden else None
        called = Called(case, i, _call_learner(fn, args, self.time_limit_s, watch), args, watch)
        found = next(filter(None, (rule.after_call(self, called) for rule in self.rules)), None)
        return found or _Outcome(called.call.value, called.call.error, watch.calls if watch else 0)

    # ---- comparing ----------------------------------------------------------------------------

    def atol_of(self, case: Case) -> float:
        """The tolerance on ``case``: its own, or the exercise's."""
        return self.atol if case.atol is None else case.atol

    def _problem(self, outcome: _Outcome, ref: Any, case: Case) -> str | None:
        if outcome.error is not None:
            e = outcome.error
            detail = str(e).splitlines()[0] if str(e).strip() else ""
            return f"时你的函数抛出了 {type(e).__name__}：{detail}".rstrip("：")
        problem = _compare(outcome.value, ref, self.atol_of(case), self.dtype)
        return None if problem is None else f"：{problem}"

    def _matches(self, mistake: Mistake, cases: list[Case], refs: list[Any], outcomes: list[_Outcome]) -> bool:
        """The learner's answers are the mistake's on every case, and some case tells the mistake from the reference.

        Where the mistake happens to agree with the reference, a right answer counts as agreeing with it too.
        """
        told_apart = False
        for case, ref, got in zip(cases, refs, outcomes):
            wrong = _call_quietly(mistake.fn, case.args)
            atol = self.atol_of(case)
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
