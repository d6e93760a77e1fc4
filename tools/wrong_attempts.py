"""The catalogue of wrong attempts every checker must answer with the right Chinese verdict.

Generic attempts are built from the exercise's reference, so they fit any exercise:

* not done, raising, ``SystemExit``, not a function, an endless loop, and an endless loop whose
  timeout is "swallowed" by ``try/except Exception`` or ``except BaseException``;
* the wrong return value: ``None``, a list, a NumPy array, a sparse tensor, a list of tensors, a
  tensor subclass, a dict, a generator, a Python float, the wrong shape, dtype (float32 where the
  statement asks for float64) or device, NaN or an answer 0.1% off (float results), one token off
  or int32 where int64 is asked (integer results), one entry flipped (boolean masks);
* side effects: editing an input in place, ``requires_grad`` on an input, changing the default
  dtype or the grad mode; editing, freezing or switching the train/eval mode of a module argument;
* a loss computed under ``no_grad`` (exercises whose result is trained through, ``Exercise.grad``);
* state kept between calls: the first call's answer returned forever, and answers cached by the
  inputs' shapes (caught by the "twin" case: an earlier case's shapes with new values).

Then the exercise's own typical mistakes, each expected to get its own hint, and the shortcuts its
statement forbids (``Forbidden.example``), each expected to get the rule's reason.
``tests/test_exercises.py`` asserts every verdict; ``tools/exercise_report.py`` counts them per
exercise for ``docs/exercise-catalogue.md`` (and the test checks those counts against its own tries).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable

import torch
from torch import nn

from transformer_course.exercises._core import NOT_DONE, Exercise

ENDLESS_LOOP_LIMIT_S = 0.5  # attempts that never finish are tried with this time limit instead of the default


def _map(out: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    return tuple(_map(o, fn) for o in out) if isinstance(out, tuple) else fn(out)


def _raises(*a):
    raise RuntimeError("boom")


def _not_done(*a):
    raise NotImplementedError


def _exits(*a):
    raise SystemExit(0)


def _endless(*a):
    while True:
        pass


def _swallows_timeout(*a):
    try:
        while True:
            pass
    except Exception:  # the learner's "safety net": the checker's alarm must get through it
        return None


def _swallows_everything(ref: Callable) -> Callable:
    def attempt(*a):
        try:
            while True:
                pass
        except BaseException:  # even this: the checker notices that its alarm rang
            return ref(*a)
    return attempt


def _other_dtype(t: torch.Tensor) -> torch.Tensor:
    """The dtype mistakes learners make: a 0/1 mask, integer results (``//``, ``.long()``), float token ids."""
    if t.dtype == torch.bool:
        return t.int()
    return t.long() if t.is_floating_point() else t.float()


class _Tagged(torch.Tensor):
    """A tensor subclass, as some libraries return."""


def _first_answer_forever(ref: Callable) -> Callable:
    first: list = []

    def attempt(*a):
        if not first:
            first.append(ref(*a))
        return first[0]
    return attempt


def _cached_by_shape(ref: Callable) -> Callable:
    cache: dict = {}

    def attempt(*a):
        key = tuple(tuple(x.shape) if isinstance(x, torch.Tensor) else
                    repr(x) if isinstance(x, (int, float, str)) else type(x).__name__ for x in a)
        if key not in cache:
            cache[key] = ref(*a)
        return cache[key]
    return attempt


def _first_float_input(a: tuple) -> int | None:
    return next((i for i, x in enumerate(a) if isinstance(x, torch.Tensor) and x.is_floating_point()), None)


def _in_place(ref: Callable) -> Callable:
    def attempt(*a):
        next(x for x in a if isinstance(x, torch.Tensor)).mul_(2)  # the first tensor (a model may come first)
        return ref(*a)
    return attempt


def _grad_on_input(ref: Callable) -> Callable:
    def attempt(*a):
        a[_first_float_input(a)].requires_grad_()
        return ref(*a)
    return attempt


def _first_module(a: tuple) -> nn.Module:
    return next(x for x in a if isinstance(x, nn.Module))


def _edits_module(ref: Callable) -> Callable:
    def attempt(*a):
        with torch.no_grad():
            next(_first_module(a).parameters()).mul_(2)  # "fixing" a weight of the caller's model
        return ref(*a)
    return attempt


def _freezes_module(ref: Callable) -> Callable:
    def attempt(*a):
        _first_module(a).requires_grad_(False)
        return ref(*a)
    return attempt


def _flips_mode(ref: Callable) -> Callable:
    def attempt(*a):
        module = _first_module(a)
        module.train(not module.training)
        return ref(*a)
    return attempt


def _under_no_grad(ref: Callable) -> Callable:
    def attempt(*a):
        with torch.no_grad():
            return ref(*a)
    return attempt


def _has_module(exercise: Exercise) -> bool:
    return any(isinstance(x, nn.Module) and any(True for _ in x.parameters()) for x in exercise.cases()[0].args)


def _int64_result(exercise: Exercise) -> bool:
    tensors = _result_tensors(exercise)
    return bool(tensors) and all(t.dtype == torch.int64 for t in tensors)


def _sets_default_dtype(ref: Callable) -> Callable:
    def attempt(*a):
        torch.set_default_dtype(torch.float64)
        return ref(*a)
    return attempt


def _turns_grad_off(ref: Callable) -> Callable:
    def attempt(*a):
        torch.set_grad_enabled(False)
        return ref(*a)
    return attempt


def _has_float_input(exercise: Exercise) -> bool:
    return _first_float_input(exercise.cases()[0].args) is not None


def _asks_float64(exercise: Exercise) -> bool:
    return exercise.dtype == torch.float64


def _result_tensors(exercise: Exercise) -> list[torch.Tensor]:
    out = exercise.expected(exercise.cases()[0])
    return [t for t in (out if isinstance(out, tuple) else (out,)) if isinstance(t, torch.Tensor)]


def _float_result(exercise: Exercise) -> bool:
    """NaN and "0.1% off" are wrong floats; an integer result (token ids) is compared exactly instead."""
    tensors = _result_tensors(exercise)
    return bool(tensors) and all(t.is_floating_point() for t in tensors)


def _integer_result(exercise: Exercise) -> bool:
    tensors = _result_tensors(exercise)
    return bool(tensors) and not any(t.is_floating_point() or t.dtype == torch.bool for t in tensors)


def _bool_result(exercise: Exercise) -> bool:
    tensors = _result_tensors(exercise)
    return bool(tensors) and all(t.dtype == torch.bool for t in tensors)


def _last_flipped(t: torch.Tensor) -> torch.Tensor:
    out = t.clone()
    out.view(-1)[-1] = ~out.view(-1)[-1]
    return out


@dataclass(frozen=True)
class Generic:
    """A generic wrong attempt: ``make(reference)`` builds it, ``expected`` is text its verdict must contain."""

    make: Callable[[Callable], Any]
    expected: str
    applies: Callable[[Exercise], bool] = lambda exercise: True


GENERIC: dict[str, Generic] = {
    "not done": Generic(lambda ref: _not_done, NOT_DONE),
    "raises": Generic(lambda ref: _raises, "RuntimeError：boom"),
    "SystemExit": Generic(lambda ref: _exits, "SystemExit"),
    "not callable": Generic(lambda ref: 42, "请传入你写的函数本身"),
    "endless loop": Generic(lambda ref: _endless, "死循环"),
    "timeout swallowed by except Exception": Generic(lambda ref: _swallows_timeout, "死循环"),
    "timeout swallowed by except BaseException": Generic(_swallows_everything, "死循环"),
    "returns None": Generic(lambda ref: (lambda *a: None), "返回了 None"),
    "list": Generic(lambda ref: (lambda *a: _map(ref(*a), lambda t: t.tolist())), "torch.Tensor"),
    "NumPy array": Generic(lambda ref: (lambda *a: _map(ref(*a), lambda t: t.detach().numpy())), "NumPy"),
    "sparse tensor": Generic(lambda ref: (lambda *a: _map(ref(*a), lambda t: t.to_sparse())), "稀疏张量"),
    "list of tensors": Generic(lambda ref: (lambda *a: _map(ref(*a), lambda t: list(t.unbind(0)) if t.dim() else [t])),
                               "torch.stack"),
    "tensor subclass": Generic(lambda ref: (lambda *a: _map(ref(*a), lambda t: t.as_subclass(_Tagged))), "子类"),
    "dict": Generic(lambda ref: (lambda *a: {"result": ref(*a)}), "dict"),
    "generator": Generic(lambda ref: (lambda *a: (x for x in [ref(*a)])), "生成器"),
    "Python float": Generic(lambda ref: (lambda *a: _map(ref(*a), lambda t: float(t.double().sum()))), "float"),
    "wrong shape": Generic(lambda ref: (lambda *a: _map(ref(*a), lambda t: t[..., :-1] if t.dim() else t.reshape(1))),
                           "形状不对"),
    "wrong dtype": Generic(lambda ref: (lambda *a: _map(ref(*a), _other_dtype)), "dtype 应为"),
    "float32 where float64 is asked": Generic(lambda ref: (lambda *a: _map(ref(*a), lambda t: t.float())),
                                              "torch.float64（题目要求）", _asks_float64),
    "wrong device": Generic(lambda ref: (lambda *a: _map(ref(*a), lambda t: t.to("meta"))), "设备不对"),
    "NaN": Generic(lambda ref: (lambda *a: _map(ref(*a), lambda t: torch.full_like(t, float("nan")))), "NaN",
                   _float_result),
    "0.1% off": Generic(lambda ref: (lambda *a: _map(ref(*a), lambda t: t * 1.001)), "数值与参考答案不一致",
                        _float_result),
    "one integer off": Generic(lambda ref: (lambda *a: _map(ref(*a), lambda t: t + (t == t.flatten()[-1]))),
                               "整数结果应与参考答案完全相同", _integer_result),
    "one entry flipped": Generic(lambda ref: (lambda *a: _map(ref(*a), _last_flipped)), "布尔矩阵中有元素取值不对",
                                 _bool_result),
    "int32 where int64 is asked": Generic(lambda ref: (lambda *a: _map(ref(*a), lambda t: t.int())),
                                          "dtype 应为 torch.int64", _int64_result),
    "in place": Generic(_in_place, "修改了传入的张量"),
    "edits a module's weights": Generic(_edits_module, "改动了权重", _has_module),
    "freezes a module": Generic(_freezes_module, "冻结或解冻", _has_module),
    "switches a module's train/eval mode": Generic(_flips_mode, "train()/eval()", _has_module),
    "computed under no_grad": Generic(_under_no_grad, "没有梯度", lambda exercise: exercise.grad),
    "requires_grad on an input": Generic(_grad_on_input, "requires_grad", _has_float_input),
    "changes the default dtype": Generic(_sets_default_dtype, "默认 dtype"),
    "turns grad mode off": Generic(_turns_grad_off, "梯度计算"),
    "first answer forever": Generic(_first_answer_forever, "记住了之前调用的结果"),
    "cached by the inputs' shapes": Generic(_cached_by_shape, "记住了之前调用的结果"),
}


@dataclass(frozen=True)
class Outcome:
    """One wrong attempt: its label, whether the verdict was right, the verdict (and the nudge shown
    before it, if any), seconds it took."""

    label: str
    rejected: bool
    message: str
    seconds: float
    nudge: str = ""


def generic_attempts(exercise: Exercise) -> list[str]:
    """The names of the generic attempts that apply to ``exercise``."""
    return [name for name, g in GENERIC.items() if g.applies(exercise)]


def shortcuts(exercise: Exercise) -> list[tuple[str, Any, str]]:
    """``(label, attempt, reason)`` for every forbidden shortcut of the exercise that has an example."""
    return [(f"shortcut {i}", rule.example, rule.reason)
            for i, rule in enumerate(exercise.forbidden, start=1) if rule.example is not None]


def attempts(exercise: Exercise) -> list[tuple[str, Any, str]]:
    """``(label, attempt, expected text in the verdict)`` for every generic attempt, mistake and shortcut."""
    generic = [(f"generic: {name}", GENERIC[name].make(exercise.reference), GENERIC[name].expected)
               for name in generic_attempts(exercise)]
    own = [(f"mistake {i}", m.fn, m.hint) for i, m in enumerate(exercise.mistakes, start=1)]
    return generic + own + shortcuts(exercise)


def try_attempt(exercise: Exercise, label: str, attempt: Any, expected: str) -> Outcome:
    """Evaluate one attempt; it is rejected when the verdict fails it and contains ``expected``."""
    if "endless" in label or "timeout" in label:
        exercise = replace(exercise, time_limit_s=ENDLESS_LOOP_LIMIT_S)
    start = time.perf_counter()
    verdict = exercise.evaluate(attempt)
    seconds = time.perf_counter() - start
    return Outcome(label, not verdict.passed and expected in verdict.message, verdict.message, seconds, verdict.nudge)
