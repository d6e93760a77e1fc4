"""Every checker of every chapter: the reference passes, each typical mistake is rejected with its
own hint, and the generic wrong attempts of ``wrong_attempts.py`` (crash, None, wrong type, shape,
dtype or device, NaN, in-place edits, endless loop, not done yet) get the right Chinese verdict,
in time, without raising."""
import pytest
import torch

import exercise_report
import transformer_course.exercises as ex
from conftest import ROOT
from transformer_course.exercises._core import PASS, Exercise
from wrong_attempts import GENERIC, try_attempt

MODULES = [getattr(ex, name) for name in ex.CHAPTERS]
EXERCISES = [e for module in MODULES for e in module.EXERCISES]
IDS = [e.name for e in EXERCISES]


def test_every_chapter_module_lists_its_exercises():
    assert MODULES and all(isinstance(e, Exercise) for e in EXERCISES)  # else every test below is vacuous


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


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
@pytest.mark.parametrize("attempt", list(GENERIC))
def test_generic_wrong_attempts_get_the_right_verdict_in_time(exercise, attempt):
    make, expected = GENERIC[attempt]
    outcome = try_attempt(exercise, f"generic: {attempt}", make(exercise.reference), expected)
    assert outcome.rejected, outcome.message
    assert outcome.seconds < exercise.time_limit_s + 2, outcome  # never hangs: the endless loop is cut off


def test_the_catalogue_lists_every_exercise_with_its_counts():
    """docs/exercise-catalogue.md (written by tools/exercise_report.py) matches the exercises as they are.
    The tests above try every attempt, so the table is rebuilt from the counts, without trying them again."""
    rows = exercise_report.rows(run=False)
    assert exercise_report.table(rows) in (ROOT / "docs" / "exercise-catalogue.md").read_text(encoding="utf-8"), \
        "run: python tools/exercise_report.py"


def test_check_prints_one_line(capsys):
    EXERCISES[0].check(EXERCISES[0].reference)
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and PASS in out
