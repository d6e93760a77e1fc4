"""The catalogue of wrong attempts every checker must answer with the right Chinese verdict.

Generic attempts (built from the exercise's reference, so they fit any exercise): not done yet,
raising, returning None, the wrong type, shape, dtype or device, NaN, editing the inputs in place,
not passing a function, an endless loop. Then the exercise's own typical mistakes, each expected
to get its own hint. ``tests/test_exercises.py`` asserts every verdict; ``tools/exercise_report.py``
counts them per exercise for ``docs/exercise-catalogue.md``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable

import torch

from transformer_course.exercises._core import NOT_DONE, Exercise

ENDLESS_LOOP_LIMIT_S = 0.5  # the endless loop is tried with this time limit instead of the default


def _map(out: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    return tuple(_map(o, fn) for o in out) if isinstance(out, tuple) else fn(out)


def _raises(*a):
    raise RuntimeError("boom")


def _not_done(*a):
    raise NotImplementedError


def _endless(*a):
    while True:
        pass


def _other_dtype(t: torch.Tensor) -> torch.Tensor:
    """The dtype mistakes learners make: a 0/1 mask, integer results (``//``, ``.long()``), float token ids."""
    if t.dtype == torch.bool:
        return t.int()
    return t.long() if t.is_floating_point() else t.float()


GENERIC: dict[str, tuple[Callable[[Callable], Any], str]] = {  # name -> (make attempt from reference, verdict)
    "not done": (lambda ref: _not_done, NOT_DONE),
    "raises": (lambda ref: _raises, "RuntimeError：boom"),
    "returns None": (lambda ref: (lambda *a: None), "返回了 None"),
    "wrong type": (lambda ref: (lambda *a: _map(ref(*a), lambda t: t.tolist())), "torch.Tensor"),
    "wrong shape": (lambda ref: (lambda *a: _map(ref(*a), lambda t: t[..., :-1])), "形状不对"),
    "wrong dtype": (lambda ref: (lambda *a: _map(ref(*a), _other_dtype)), "dtype 应为"),
    "wrong device": (lambda ref: (lambda *a: _map(ref(*a), lambda t: t.to("meta"))), "设备不对"),
    "NaN": (lambda ref: (lambda *a: _map(ref(*a), lambda t: torch.full_like(t, float("nan")))), "NaN"),
    "in place": (lambda ref: (lambda *a: ref(*(a[0].mul_(2),) + a[1:])), "修改了传入的张量"),
    "not callable": (lambda ref: 42, "请传入你写的函数本身"),
    "endless loop": (lambda ref: _endless, "死循环"),
}


@dataclass(frozen=True)
class Outcome:
    """One wrong attempt: its label, whether the verdict was right, the verdict, seconds it took."""

    label: str
    rejected: bool
    message: str
    seconds: float


def attempts(exercise: Exercise) -> list[tuple[str, Any, str]]:
    """``(label, attempt, expected text in the verdict)`` for every generic attempt and typical mistake."""
    generic = [(f"generic: {name}", make(exercise.reference), text) for name, (make, text) in GENERIC.items()]
    own = [(f"mistake {i}", m.fn, m.hint) for i, m in enumerate(exercise.mistakes, start=1)]
    return generic + own


def try_attempt(exercise: Exercise, label: str, attempt: Any, expected: str) -> Outcome:
    """Evaluate one attempt; it is rejected when the verdict fails it and contains ``expected``."""
    if label == "generic: endless loop":
        exercise = replace(exercise, time_limit_s=ENDLESS_LOOP_LIMIT_S)
    start = time.perf_counter()
    verdict = exercise.evaluate(attempt)
    seconds = time.perf_counter() - start
    return Outcome(label, not verdict.passed and expected in verdict.message, verdict.message, seconds)
