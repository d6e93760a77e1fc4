"""Every checker of every chapter: the reference passes, each typical mistake is rejected with its
own hint, and generic wrong attempts (crash, None, wrong type/shape/device, NaN, in-place edits,
endless loop, not done yet) get the right Chinese verdict without raising."""
import pytest
import torch

import transformer_course.exercises as ex
from transformer_course.exercises._core import NOT_DONE, PASS, Exercise

MODULES = [getattr(ex, name) for name in ex.CHAPTERS]
EXERCISES = [e for module in MODULES for e in module.EXERCISES]
IDS = [e.name for e in EXERCISES]


def _map(out, fn):
    return tuple(_map(o, fn) for o in out) if isinstance(out, tuple) else fn(out)


def test_every_chapter_module_lists_its_exercises():
    assert MODULES and all(isinstance(e, Exercise) for e in EXERCISES)


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_reference_passes(exercise):
    verdict = exercise.evaluate(exercise.reference)
    assert verdict.passed and PASS in verdict.message


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_cases_differ_in_every_dimension(exercise):
    shapes = [tuple(tuple(a.shape) for a in case if isinstance(a, torch.Tensor)) for case in exercise.make_cases()]
    assert len(shapes) >= 3 and len(set(shapes)) == len(shapes)


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_each_typical_mistake_is_rejected_with_its_own_hint(exercise):
    assert len(exercise.mistakes) >= 3
    for mistake in exercise.mistakes:
        verdict = exercise.evaluate(mistake.fn)
        assert not verdict.passed
        assert mistake.hint in verdict.message, (mistake.hint, verdict.message)


def _raises(*a):
    raise RuntimeError("boom")


def _not_done(*a):
    raise NotImplementedError


def _endless(*a):
    while True:
        pass


GENERIC = {
    "not done": (lambda ref: _not_done, NOT_DONE),
    "raises": (lambda ref: _raises, "RuntimeError：boom"),
    "returns None": (lambda ref: (lambda *a: None), "返回了 None"),
    "wrong type": (lambda ref: (lambda *a: _map(ref(*a), lambda t: t.tolist())), "torch.Tensor"),
    "wrong shape": (lambda ref: (lambda *a: _map(ref(*a), lambda t: t[..., :-1])), "形状不对"),
    "wrong device": (lambda ref: (lambda *a: _map(ref(*a), lambda t: t.to("meta"))), "设备不对"),
    "NaN": (lambda ref: (lambda *a: _map(ref(*a), lambda t: torch.full_like(t, float("nan")))), "NaN"),
    "in place": (lambda ref: (lambda *a: ref(*(a[0].mul_(2),) + a[1:])), "修改了传入的张量"),
    "not callable": (lambda ref: 42, "请传入你写的函数本身"),
}


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
@pytest.mark.parametrize("attempt", list(GENERIC))
def test_generic_wrong_attempts_get_the_right_verdict(exercise, attempt):
    make, expected = GENERIC[attempt]
    verdict = exercise.evaluate(make(exercise.reference))
    assert not verdict.passed and expected in verdict.message, verdict.message


def test_endless_loop_is_stopped_within_the_time_limit():
    exercise = EXERCISES[0]
    quick = Exercise(exercise.name, exercise.reference, exercise.make_cases, time_limit_s=0.5)
    verdict = quick.evaluate(_endless)
    assert not verdict.passed and "死循环" in verdict.message


def test_check_prints_one_line(capsys):
    EXERCISES[0].check(EXERCISES[0].reference)
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and PASS in out
