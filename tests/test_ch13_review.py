"""Chapter 13's review (a self-test instead of coding exercises): the reference answers pass, every
wrong option is answered with its own feedback, malformed answers get the right verdict without
raising, and the book shows every question and option the checker grades."""
import json

import pytest
import torch

from conftest import ROOT
from transformer_course.exercises import ch13
from transformer_course.exercises._core import NOT_DONE, PASS

REVIEWS = ch13.REVIEWS
IDS = [r.name for r in REVIEWS]


def test_twelve_questions_numbered_in_order_with_balanced_answers():
    assert [q.number for q in ch13.QUESTIONS] == list(range(1, 13))
    assert [n for r in REVIEWS for n in r.numbers] == list(range(1, 13))
    answers = [q.answer for q in ch13.QUESTIONS]
    assert all(answers.count(letter) == 3 for letter in ch13.LETTERS)  # no letter is a safe guess


def test_every_option_has_its_own_note():
    for q in ch13.QUESTIONS:
        assert len(q.options) == 4 and set(q.notes) == set(ch13.LETTERS)
        assert len(set(q.notes.values())) == 4 and len(set(q.options)) == 4


@pytest.mark.parametrize("review", REVIEWS, ids=IDS)
def test_reference_passes(review):
    verdict = review.evaluate(review.reference)
    assert verdict.passed and PASS in verdict.message


@pytest.mark.parametrize("review", REVIEWS, ids=IDS)
def test_each_wrong_option_gets_its_own_feedback(review):
    for q in review.questions:
        for letter in ch13.LETTERS:
            if letter == q.answer:
                continue
            answers = {**review.reference(), q.number: letter}
            verdict = review.evaluate(lambda answers=answers: answers)
            assert not verdict.passed
            assert ch13.plain(q.notes[letter]) in verdict.message, verdict.message
            assert f"第 {q.number} 题" in verdict.message


@pytest.mark.parametrize("review", REVIEWS, ids=IDS)
def test_answers_are_read_leniently(review):
    lenient = {str(k): f" {v.lower()} " for k, v in review.reference().items()}  # "1": " c "
    assert review.evaluate(lambda: lenient).passed


def _raises():
    raise RuntimeError("boom")


def _not_done():
    raise NotImplementedError


def _endless():
    while True:
        pass


def _swallows_timeout():
    try:
        while True:
            pass
    except Exception:
        return {}


def _swallows_everything():
    try:
        while True:
            pass
    except BaseException:
        return {}


def _exits():
    raise SystemExit(0)


def _sets_default_dtype():
    torch.set_default_dtype(torch.float64)
    return REVIEWS[0].reference()


class _Unreadable(dict):
    def items(self):
        raise RuntimeError("no")


@pytest.mark.parametrize("review", REVIEWS, ids=IDS)
@pytest.mark.parametrize("attempt, expected", [
    (lambda r: _not_done, NOT_DONE),
    (lambda r: _raises, "RuntimeError：boom"),
    (lambda r: (lambda: None), "返回了 None"),
    (lambda r: (lambda: list(r.reference().values())), "应返回 dict"),
    (lambda r: (lambda: {**r.reference(), "x": "A"}), "键应是题号"),
    (lambda r: (lambda: {**r.reference(), 99: "A"}), "多了第 99 题"),
    (lambda r: (lambda: dict(list(r.reference().items())[1:])), "还缺第"),
    (lambda r: (lambda: {**r.reference(), r.numbers[0]: "E"}), "A、B、C、D 中的一个字母"),
    (lambda r: (lambda: {**r.reference(), r.numbers[0]: 1}), "A、B、C、D 中的一个字母"),
    (lambda r: 42, "请传入你写的函数本身"),
    (lambda r: _exits, "SystemExit"),
    (lambda r: (lambda: _Unreadable(r.reference())), "无法读取"),
], ids=["not done", "raises", "None", "list", "bad key", "extra", "missing", "bad letter", "not a str",
        "not callable", "SystemExit", "unreadable mapping"])
def test_malformed_answers_get_the_right_verdict(review, attempt, expected):
    verdict = review.evaluate(attempt(review))
    assert not verdict.passed and expected in verdict.message, verdict.message


@pytest.mark.parametrize("attempt", [_endless, _swallows_timeout, _swallows_everything])
def test_endless_loop_is_stopped_even_inside_try_except(attempt):
    verdict = REVIEWS[0].evaluate(attempt)
    assert not verdict.passed and "死循环" in verdict.message


def test_a_changed_default_dtype_is_reported_and_restored():
    verdict = REVIEWS[0].evaluate(_sets_default_dtype)
    assert not verdict.passed and "全局设置" in verdict.message
    assert torch.get_default_dtype() == torch.float32


def test_check_prints_one_line(capsys):
    REVIEWS[0].check(REVIEWS[0].reference)
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and PASS in out


def test_the_book_shows_every_question_and_its_solution():
    cells = json.loads((ROOT / "book" / "13_design_philosophy.ipynb").read_text(encoding="utf-8"))["cells"]
    markdown = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    for q in ch13.QUESTIONS:
        assert q.markdown() in markdown and q.solution_markdown() in markdown, q.number
    for i, review in enumerate(REVIEWS, start=1):
        assert f"tc.exercises.ch13.check_review_{i}(review_{i})" in code
        literal = "{" + ", ".join(f'{k}: "{v}"' for k, v in review.reference().items()) + "}"
        assert f"return {literal}" in code  # the collapsed reference answers are the checker's


def test_widget_has_one_row_per_question_and_gives_feedback():
    pytest.importorskip("ipywidgets")
    box = ch13.quiz_widget()
    assert len(box.children) == len(ch13.QUESTIONS)
    q = ch13.QUESTIONS[0]
    buttons, feedback = box.children[0].children
    wrong = next(letter for letter in ch13.LETTERS if letter != q.answer)
    buttons.value = wrong
    assert ch13.plain(q.notes[wrong]) in feedback.value and "不对" in feedback.value
    buttons.value = q.answer
    assert "正确" in feedback.value
