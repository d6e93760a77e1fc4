"""The multiple-choice self-test machinery of chapter 13: questions, a review answered by one function,
the clickable widget, and inline math as plain text. This folder's ``__init__`` holds the questions.
"""
from __future__ import annotations

from dataclasses import dataclass
import re
import sys
from typing import Any, Mapping

from .._core import NOT_DONE, PASS, Verdict
from .._guards import _call_learner

LETTERS = ("A", "B", "C", "D")


@dataclass(frozen=True)
class Question:
    """One question: the stem, four options, the right letter, and a note for every option.

    ``notes[answer]`` explains the right answer; every other note explains that misconception.
    """

    number: int
    stem: str
    options: tuple[str, str, str, str]
    answer: str
    notes: Mapping[str, str]
    source: str

    def markdown(self) -> str:
        """The question as it appears in the book: the stem, then the options A–D."""
        lines = [self.stem, ""] + [f"- **{k}.** {o}" for k, o in zip(LETTERS, self.options)]
        return "\n".join(lines)

    def solution_markdown(self) -> str:
        """The collapsed answer in the book: the right letter, why, and why each other option fails."""
        lines = [f"**答案：{self.answer}。** {self.notes[self.answer]}", ""]
        lines += [f"- **{k}** 错在：{self.notes[k]}" for k in LETTERS if k != self.answer]
        lines += ["", f"（见{self.source}）"]
        return "\n".join(lines)


@dataclass(frozen=True)
class Review:
    """A group of questions answered together by one function ``() -> {number: letter}``."""

    name: str
    questions: tuple[Question, ...]

    @property
    def numbers(self) -> tuple[int, ...]:
        return tuple(q.number for q in self.questions)

    def reference(self) -> dict[int, str]:
        """The right answers, in the form the learner's function returns."""
        return {q.number: q.answer for q in self.questions}

    def evaluate(self, fn: Any) -> Verdict:
        """Call ``fn()``, validate the answers and grade them; never raises (except KeyboardInterrupt)."""
        if not callable(fn):
            return Verdict(False, f"{self.name}：请传入你写的函数本身（不要加括号调用它），"
                                  f"收到的是 {type(fn).__name__}。")
        call = _call_learner(fn, (), 5.0)
        answers, error = call.value, call.error
        if call.grad_changed or call.dtype_changed:
            return Verdict(False, f"{self.name}：你的函数改动了 torch 的全局设置（默认 dtype 或梯度开关），"
                                  "检查器已把它恢复；这里只需要返回答案字典。")
        if isinstance(error, NotImplementedError):
            return Verdict(False, f"{self.name}：{NOT_DONE}——"
                                  "把 NotImplementedError 那一行换成 return {题号: 选项字母, ...}，再运行本单元。")
        if call.timed_out:
            return Verdict(False, f"{self.name}：你的函数运行超过 5 秒，可能有死循环（超时无法被 try/except 吞掉）。")
        if isinstance(error, SystemExit):
            return Verdict(False, f"{self.name}：你的函数调用了 exit()（抛出了 SystemExit）："
                                  "请删掉它，用 return 返回答案。")
        if error is not None:
            detail = str(error).splitlines()[0] if str(error).strip() else ""
            return Verdict(False, f"{self.name}：你的函数抛出了 {type(error).__name__}：{detail}".rstrip("："))
        try:
            problem = self._validate(answers)
            chosen = {} if problem else {int(k): str(v).strip().upper() for k, v in answers.items()}
        except Exception as e:  # a Mapping that cannot even be read
            problem = f"无法读取你返回的 {type(answers).__name__}（{type(e).__name__}）：请返回普通的 dict。"
        if problem is not None:
            return Verdict(False, f"{self.name}：{problem}")
        wrong = [q for q in self.questions if chosen[q.number] != q.answer]
        n = len(self.questions)
        if not wrong:
            return Verdict(True, f"{self.name}：{PASS}（{n} 题全部答对）")
        first = wrong[0]
        numbers = "、".join(str(q.number) for q in wrong)
        return Verdict(False, f"{self.name}：答对 {n - len(wrong)}/{n} 题（第 {numbers} 题没答对）。"
                              f"第 {first.number} 题选 {chosen[first.number]}："
                              f"{plain(first.notes[chosen[first.number]])}")

    def check(self, fn: Any) -> None:
        """Evaluate ``fn`` and print the one-line verdict (what the notebook's check cell calls).

        One write, so that a notebook never splits the line from its newline.
        """
        sys.stdout.write(self.evaluate(fn).message + "\n")

    def _validate(self, answers: Any) -> str | None:
        example = "{" + ", ".join(f'{k}: "A"' for k in self.numbers[:2]) + ", ...}"
        if answers is None:
            return "你的函数返回了 None——是不是忘了写 return？"
        if not isinstance(answers, Mapping):
            return f"应返回 dict（题号 → 选项字母），例如 {example}；你返回的是 {type(answers).__name__}。"
        keys = {}
        for k in answers:
            try:
                keys[int(k)] = k
            except (TypeError, ValueError):
                return f"字典的键应是题号（整数），收到 {k!r}。"
        extra = sorted(set(keys) - set(self.numbers))
        if extra:
            return f"这一组只有第 {self.numbers[0]}–{self.numbers[-1]} 题，多了第 {'、'.join(map(str, extra))} 题。"
        missing = [n for n in self.numbers if n not in keys]
        if missing:
            return f"还缺第 {'、'.join(map(str, missing))} 题的答案。"
        for n in self.numbers:
            value = answers[keys[n]]
            if not isinstance(value, str) or value.strip().upper() not in LETTERS:
                return f"第 {n} 题的答案应是 A、B、C、D 中的一个字母，收到 {value!r}。"
        return None


def quiz_widget(questions: tuple[Question, ...]) -> Any:
    """Clickable self-test for a running kernel: one row of A–D buttons per question, feedback on click."""
    import ipywidgets as widgets  # only needed in a notebook

    rows = []
    for q in questions:
        buttons = widgets.ToggleButtons(options=list(LETTERS), value=None, description=f"第 {q.number} 题",
                                        style={"button_width": "42px"})
        feedback = widgets.HTML(value="")

        def show(change: dict, q: Question = q, feedback: widgets.HTML = feedback) -> None:
            letter = change["new"]
            if letter is None:
                return
            verdict = "✔ 正确。" if letter == q.answer else "✘ 不对。"
            feedback.value = f"<span>{verdict}{plain(q.notes[letter])}</span>"

        buttons.observe(show, names="value")
        rows.append(widgets.VBox([buttons, feedback]))
    return widgets.VBox(rows)


_MATH = [
    (r"\\text\{([^}]*)\}", r"\1"),        # \text{model} -> model
    (r"\\sqrt\{([^}]*)\}", r"√\1"),       # \sqrt{d_k} -> √d_k
    (r"\\sqrt\s*", "√"),
    (r"_\{([^}]*)\}", r"_\1"),            # d_{model} -> d_model
    (r"\^\{([^}]*)\}", r"^\1"),
    (r"\\top", "ᵀ"), (r"\\le\b", "≤"), (r"\s*\\times\s*", " × "), (r"\\approx", "≈"), (r"\$", ""),
]


def plain(text: str) -> str:
    """Inline math as readable plain text (for printed verdicts and widgets, where no MathJax runs).

    Example:
        >>> plain(r"除以 $\\sqrt{d_k}$，$d_{\\text{model}}\\times d_k$")
        '除以 √d_k，d_model × d_k'
    """
    for pattern, repl in _MATH:
        text = re.sub(pattern, repl, text)
    return text
