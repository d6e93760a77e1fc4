"""Every checker of every chapter: the reference passes; each typical mistake is rejected with its own
hint; each forbidden shortcut with the rule's reason; and the generic wrong attempts of
``wrong_attempts.py`` (crashes, endless loops even inside ``try/except``, odd return types, side
effects, state kept between calls, ...) get the right Chinese verdict, in time, without raising.
Then the machinery itself: the hint rule, the readable numbers, the global state left as it was."""
import math

import pytest
import torch

import exercise_report
import transformer_course.exercises as ex
from conftest import ROOT
from transformer_course.exercises._core import PASS, Case, Exercise, Mistake, _number
from wrong_attempts import GENERIC, Outcome, attempts, generic_attempts, shortcuts, try_attempt

MODULES = [getattr(ex, name) for name in ex.CHAPTERS]
EXERCISES = [e for module in MODULES for e in module.EXERCISES]
IDS = [e.name for e in EXERCISES]
TRIED: dict[str, dict[str, Outcome]] = {}  # exercise -> attempt label -> what the tests below saw


def _record(exercise: Exercise, outcome: Outcome) -> Outcome:
    TRIED.setdefault(exercise.name, {})[outcome.label] = outcome
    return outcome


def test_every_chapter_module_lists_its_exercises():
    assert MODULES and all(isinstance(e, Exercise) for e in EXERCISES)  # else every test below is vacuous


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_reference_passes(exercise):
    verdict = exercise.evaluate(exercise.reference)
    assert verdict.passed and PASS in verdict.message


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_the_cases_pass_every_rule_on_cases(exercise):
    """E.g. ``VariedCases``: at least three different sizes (a swapped axis shows), and a twin: a later case
    with an earlier case's shapes and a different answer (an answer cached by shape shows)."""
    cases = exercise.cases()
    assert [found for rule in exercise.rules if (found := rule.on_cases(exercise, cases))] == []


def test_a_new_class_of_wrong_answer_is_one_rule_object_listed_by_the_exercise():
    """The mutation of a rule list: an exercise without ``InputsUnchanged`` lets an in-place edit through;
    one rule more (here: no negative results) rejects an answer every default rule accepts."""
    from transformer_course.exercises import _rules

    def double(x):
        return 2 * x

    def double_in_place(x):
        return x.mul_(2)

    class NoNegatives(_rules.Rule):
        def after_call(self, exercise, called):
            value = called.call.value
            return "结果里不应有负数。" if isinstance(value, torch.Tensor) and (value < 0).any() else None

    cases = lambda: [(torch.randn(2, 3),), (torch.randn(4, 5),), (torch.randn(3, 1),)]  # noqa: E731
    strict = Exercise("double", double, cases)
    loose = Exercise("double", double, cases, rules=[r for r in _rules.DEFAULT_RULES
                                                    if not isinstance(r, _rules.InputsUnchanged)])
    extra = Exercise("double", double, cases, rules=(*_rules.DEFAULT_RULES, NoNegatives()))
    assert strict.evaluate(double).passed and loose.evaluate(double).passed
    verdict = strict.evaluate(double_in_place)
    assert not verdict.passed and "修改了传入的张量" in verdict.message
    assert loose.evaluate(double_in_place).passed
    assert extra.evaluate(double).message == "double：结果里不应有负数。"


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_each_typical_mistake_is_rejected_with_its_own_hint(exercise):
    assert len(exercise.mistakes) >= 3
    assert len({m.hint for m in exercise.mistakes}) == len(exercise.mistakes)
    for i, mistake in enumerate(exercise.mistakes, start=1):
        outcome = _record(exercise, try_attempt(exercise, f"mistake {i}", mistake.fn, mistake.hint))
        assert outcome.rejected, (mistake.hint, outcome.message)
        # the first time, a nudge that locates the mistake (which case) without its fix
        assert "组测试" in outcome.nudge and mistake.hint not in outcome.nudge, outcome.nudge
        assert mistake.nudge in outcome.nudge and "\n" not in outcome.nudge and "e+" not in outcome.nudge


@pytest.mark.parametrize("exercise", [e for e in EXERCISES if shortcuts(e)],
                         ids=[e.name for e in EXERCISES if shortcuts(e)])
def test_each_forbidden_shortcut_is_rejected_with_its_reason(exercise):
    for label, attempt, reason in shortcuts(exercise):
        outcome = _record(exercise, try_attempt(exercise, label, attempt, reason))
        assert outcome.rejected, (label, outcome.message)
        assert attempt(*exercise.cases()[0].args) is not None  # the shortcut itself runs


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
@pytest.mark.parametrize("attempt", list(GENERIC))
def test_generic_wrong_attempts_get_the_right_verdict_in_time(exercise, attempt):
    if attempt not in generic_attempts(exercise):
        pytest.skip("does not apply to this exercise")
    generic = GENERIC[attempt]
    before = torch.get_default_dtype(), torch.is_grad_enabled()
    outcome = _record(exercise, try_attempt(exercise, f"generic: {attempt}", generic.make(exercise.reference),
                                            generic.expected))
    assert outcome.rejected, outcome.message
    assert outcome.seconds < exercise.time_limit_s + 2, outcome  # never hangs: the endless loop is cut off
    assert (torch.get_default_dtype(), torch.is_grad_enabled()) == before  # global state restored
    assert "\n" not in outcome.message and "e+" not in outcome.message


def test_the_catalogue_lists_every_exercise_with_its_counts():
    """docs/exercise-catalogue.md (written by tools/exercise_report.py) matches the exercises as they are,
    rebuilt from the verdicts the tests above saw (same file, same worker: they ran first); an attempt they
    did not try (this test run alone, ``-k``) is tried here. Rejections are counted, not assumed."""
    def outcomes_of(exercise: Exercise) -> list[Outcome]:
        seen = TRIED.get(exercise.name, {})
        return [seen.get(label) or try_attempt(exercise, label, attempt, expected)
                for label, attempt, expected in attempts(exercise)]

    rows = exercise_report.rows(outcomes_of)
    assert all(r[5] == r[2] + r[3] + r[4] for r in rows), [r[:2] for r in rows if r[5] != r[2] + r[3] + r[4]]
    text = (ROOT / "docs" / "exercise-catalogue.md").read_text(encoding="utf-8")
    assert exercise_report.table(rows) in text and exercise_report.header() in text, \
        "run: python tools/exercise_report.py"


def test_check_prints_one_line(capsys):
    EXERCISES[0].check(EXERCISES[0].reference)
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and PASS in out


def test_hints_escalate_a_nudge_first_then_the_fix_for_the_same_mistake(capsys):
    """The first failure locates the problem; the same mistake again gets the hint with the fix; another
    failure in between, or a pass, starts over."""
    from transformer_course.exercises import ch05

    mistake = next(m for m in ch05.MHA.mistakes if "√C" in m.hint)
    printed = []
    for fn in (mistake.fn, mistake.fn, mistake.fn, ch05.MHA.mistakes[0].fn, mistake.fn, ch05.MHA.reference,
               mistake.fn):
        ch05.check_multi_head_attention(fn)
        printed.append(capsys.readouterr().out.strip())
    first, again, third, other, back, passed, fresh = printed
    assert mistake.nudge in first and "第 1 组测试（x 形状 (2, 5, 12)、w_qkv 形状 (12, 36)" in first
    assert "√C" not in first and again.endswith(mistake.hint) and third == again
    assert ch05.MHA.mistakes[0].nudge in other and back == first and PASS in passed and fresh == first


# ---- the machinery, on a small exercise of its own --------------------------------------------

def _double(x):
    return 2 * x


def _toy_cases():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(2, 3, generator=g), torch.randn(4, 1, generator=g), torch.zeros(3, 2), torch.ones(2, 2)]


TOY = Exercise("toy", _double, lambda: [(x,) for x in _toy_cases()],
               mistakes=(Mistake("乘成了 3。", lambda x: 3 * x),))


def test_a_hint_needs_the_mistake_on_every_case():
    assert TOY.evaluate(lambda x: 3 * x).message == "toy：乘成了 3。"
    # right on the first case, the mistake elsewhere: not the mistake, but where and by how much
    verdict = TOY.evaluate(lambda x: 2 * x if x.shape == (2, 3) else 3 * x)
    assert "乘成了 3" not in verdict.message and "第 2 组测试" in verdict.message and "下标 [" in verdict.message
    assert "相差" in verdict.message


def test_cases_where_the_mistake_is_right_do_not_count_against_it():
    """On the all-zero case the mistake is within the tolerance of the right answer; so is the learner's
    answer, though not within the tolerance of the mistake's: that case does not count against the hint."""
    nudged = Exercise("toy", _double, TOY.make_cases, mistakes=(Mistake("乘成了 3。", lambda x: 3 * x + 8e-6),))
    assert nudged.evaluate(lambda x: 3 * x + (8e-6 if x.abs().sum() else -8e-6)).message == "toy：乘成了 3。"


def test_inf_and_huge_numbers_are_described_in_words():
    huge = TOY.evaluate(lambda x: 2 * x.double() + 1.5e308).message
    assert "e+" not in huge and "1.5×10^308" in huge and "极大" in huge
    inf = TOY.evaluate(lambda x: 2 * x + math.inf).message
    assert "出现了 inf" in inf
    assert (_number(1.5e308) == "1.5×10^308" and _number(3.2e-7) == "3.2×10^-7" and _number(131072.0) == "131072"
            and _number(0.12346) == "0.1235")


def test_keyboard_interrupt_is_left_alone():
    def interrupted(x):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        TOY.evaluate(interrupted)


def test_a_check_leaves_no_watcher_behind():
    import sys
    watched = next(e for e in EXERCISES if any(r.course for r in e.forbidden))
    profile = sys.getprofile()
    for attempt in (watched.reference, GENERIC["raises"].make(watched.reference)):
        watched.evaluate(attempt)
    assert sys.getprofile() is profile
    assert not torch.overrides._get_current_function_mode_stack()


def test_a_case_can_loosen_the_tolerance_and_explain_itself():
    big = Exercise("toy", _double, lambda: [(torch.ones(2, 3),), (torch.ones(4, 1),),
                                            Case((torch.full((3, 2), 1e4),), atol=1e-2, note="这一组的数很大")])
    assert big.evaluate(lambda x: 2 * x + 5e-3 * (x > 100)).passed  # within the large case's own tolerance
    verdict = big.evaluate(lambda x: 2 * x + 0.5 * (x > 100))
    assert "第 3 组测试" in verdict.message and verdict.message.endswith("（这一组的数很大）")


def test_a_mistake_that_raises_is_named_when_the_learner_raises_alike():
    """A mistake may raise on some cases (an index past the end): the learner's answers match it when
    their function raises the same error there and gives the mistake's values elsewhere."""
    def shifted(x):
        if x.shape[0] == 4:
            raise IndexError("index 4 is out of bounds")
        return 2 * x + 1
    raising = Exercise("toy", _double, TOY.make_cases, mistakes=(Mistake("加了 1。", shifted),))
    assert raising.evaluate(shifted).message == "toy：加了 1。"
    never_raises = raising.evaluate(lambda x: 2 * x + 1).message  # where the mistake raises, it answers
    assert "加了 1" not in never_raises and "数值与参考答案不一致" in never_raises


# ---- routes around a rule that a narrow rule would miss (chapters 14-16's hidden attempts) ------------

def _verdict(exercise: Exercise, attempt) -> str:
    verdict = exercise.evaluate(attempt)
    assert not verdict.passed
    return verdict.message


def test_a_python_loop_over_an_inputs_values_breaks_the_rule_against_loops():
    def loop(mask, t_new):  # no torch call inside the loop: the call count alone cannot see it
        rows = mask.tolist()
        t_k = len(rows[0])
        return torch.tensor([[[j <= t_k - t_new + i and (r[j] == 1 or r[t_k - t_new + i] == 0) for j in range(t_k)]
                              for i in range(t_new)] for r in rows])
    assert "不用循环" in _verdict(ex.ch16.BATCH_MASK, loop)
    assert "不用循环" in _verdict(ex.ch16.BATCH_MASK, lambda m, t: torch.stack(
        [ex.ch16._batch_mask_reference(r[None], t)[0] for r in m]))


def test_every_library_route_to_a_softmax_or_an_attention_is_a_shortcut():
    def via_softmin(m, denom, acc, scores, v):
        m_new = torch.maximum(m, scores.amax(-1))
        return m_new, denom, acc + torch.nn.functional.softmin(-scores, dim=-1) @ v
    assert "不要调用 softmax" in _verdict(ex.ch15.ONLINE, via_softmin)

    def via_module(x, attn):
        mha = torch.nn.MultiheadAttention(x.shape[-1], attn.n_heads, batch_first=True)
        return mha(x, x, x, need_weights=False)[0]
    assert "F.multi_head_attention_forward" in _verdict(ex.ch14.CAUSAL_SELF_ATTENTION, via_module)


def test_a_clamp_that_guards_masked_rows_fails_on_real_scores_below_it():
    def floor_at(floor):
        def attempt(m, denom, acc, scores, v):
            m_new = torch.maximum(m, scores.amax(dim=-1))
            shift = m_new.clamp(min=floor)
            p, r = torch.exp(scores - shift[:, None]), torch.exp(m - shift)
            return m_new, denom * r + p.sum(dim=-1), acc * r[:, None] + p @ v
        return attempt
    assert all("clamp" in _verdict(ex.ch15.ONLINE, floor_at(f)) for f in (-1e3, -1e4, -15000.0))


def test_a_gradient_cut_anywhere_in_a_trained_loss_is_found():
    def detached_probabilities(logits, chosen):  # the value is right, the router would learn nothing
        share = torch.bincount(chosen.flatten(), minlength=logits.shape[1]) / chosen.numel()
        return logits.shape[1] * (share * logits.softmax(-1).mean(0).detach()).sum()
    assert "梯度" in _verdict(ex.ch16.BALANCE, detached_probabilities)

    def half_detached(logits, chosen):  # gradient through half of the tokens only
        n = logits.shape[0] // 2
        mixed = torch.cat([logits[:n].detach(), logits[n:]])
        return ex.ch16._balance_reference(mixed, chosen)
    assert "梯度不对" in _verdict(ex.ch16.BALANCE, half_detached)


def test_the_tone_reference_counts_what_poetics_counts_on_real_poems():
    from transformer_course import poems, poetics
    sounds, code = poems.sounds(), {"平": 0, "仄": 1}
    by_form: dict[str, list] = {}
    for poem in poems.load_tang()[:300]:
        by_form.setdefault(poetics.regular_form(poem.text), []).append(poem.text)
    assert set(by_form) >= set(poems.REGULAR_FORMS)
    for form in poems.REGULAR_FORMS:
        texts = by_form[form]
        tones = torch.tensor([[[code.get(sounds.tone.get(c), 2) for c in clause] for clause in poetics.clauses(t)]
                              for t in texts])
        passed, checked = ex.ch14._tones_reference(tones)
        assert list(zip(passed.tolist(), checked.tolist())) == [poetics.tone_checks(t) for t in texts]
