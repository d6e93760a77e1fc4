"""Poem metrics on texts whose answers are known by hand, and decoding rules that hold on every sample."""
from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

import pytest
import torch
from tiny import tiny_config

from transformer_course.generate import generate, generate_steps, next_token
from transformer_course.models import DecoderOnly
from transformer_course.poems import REGULAR_FORMS, Sounds, load_tang, sounds
from transformer_course.poetics import (
    VerseRules,
    clause_set,
    clauses,
    copy_rate,
    distinct_rate,
    poem_metrics,
    regular_form,
    repeat_rate,
    rhymes,
    tone_checks,
)

JING = "床前看月光，疑是地上霜。\n举头望山月，低头思故乡。"  # 静夜思 as 全唐诗 has it: 霜 乡 rhyme (唐)
DENG = "白日依山尽，黄河入海流。\n欲穷千里目，更上一层楼。"  # 登鹳雀楼: every tone rule holds
EOT, FORM_TOKENS = "<|endoftext|>", [f"<|{f}|>" for f in REGULAR_FORMS]
SHAPES = {"五绝": (4, 5), "七绝": (4, 7), "五律": (8, 5), "七律": (8, 7)}


class Vocab:
    """The minimum ``VerseRules`` reads: specials (longer than one character), stops, characters."""

    def __init__(self, chars: str) -> None:
        self.itos = [EOT, "<unk>", *FORM_TOKENS, "，", "。", "？", "\n", "a", *sorted(set(chars))]
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        self.eot = 0


@lru_cache(maxsize=1)
def _vocab() -> Vocab:
    """The 90 commonest characters of the training poems, those of JING and DENG, and the acrostics."""
    counts = Counter(c for p in load_tang("train") for c in re.sub(r"[，。？！；\n]", "", p.text))
    return Vocab("".join(c for c, _ in counts.most_common(90)) + JING + DENG + "春江花月夜山水")


def test_clauses_and_regular_form_accept_exactly_the_regular_shapes():
    assert clauses("床前看月光，疑是地上霜。\n举头 望山月！低头思") == ["床前看月光", "疑是地上霜", "举头望山月"]
    assert regular_form(JING) == "五绝"
    val = load_tang("val")
    assert all(regular_form(p.text) == p.form for p in val)  # the four forms, ？ and ； stops included
    lu = next(p.text for p in val if p.form == "五律")
    broken = [
        "",
        JING.replace("床前", "床前明"),  # a 6-character clause
        JING.replace("，", "、", 1),  # not a stop
        JING.replace("\n", ""),  # a line of four clauses
        JING + "\n",  # a trailing line break
        JING.replace("\n", "\n\n"),  # an empty line
        JING.replace("床", "a"),  # not a Han character
        JING.split("\n")[0],  # one couplet only
        "\n".join(lu.split("\n")[:3]),  # 6 clauses
        JING.split("\n")[0] + "\n" + "欲穷千里目更，黄河入海流。",  # a 5-character and a 6-character couplet
        "朝辞白帝彩云间，千里江陵一日还。\n" + JING.split("\n")[1],  # 7 then 5 characters
    ]
    assert [regular_form(text) for text in broken] == [None] * len(broken)


def test_rhymes_needs_one_rhyme_class_at_the_end_of_the_even_clauses():
    assert rhymes(JING) is True  # 霜 乡: 唐
    assert rhymes(JING.replace("故乡", "故家")) is False  # 家: 麻
    assert rhymes(JING.replace("月光", "月明")) is True  # odd clauses may end anywhere
    assert rhymes(JING.replace("\n", "")) is None  # not regular
    assert rhymes(JING, Sounds(tone={}, rhyme={"霜": "唐"})) is None  # 乡 has no known class
    assert rhymes(JING, Sounds(tone={}, rhyme={"霜": "唐", "乡": "唐"})) is True
    lu = "寒惊蓟门叶，秋发小山枝。\n松阴背日转，竹影避风移。\n提壶菊花岸，高兴芙蓉池。\n欲知凉气早，巢空燕不窥。"
    assert rhymes(lu) is False  # 枝 is 支 in Mandarin, 移 池 窥 are 齐 (one rhyme in Tang times)
    assert rhymes(lu, Sounds(tone={}, rhyme=dict.fromkeys("枝移池窥", "支"))) is True


def test_tone_checks_counted_by_hand():
    # 静夜思: (a) 前平/月仄 pass, 是仄/上仄 fail, 头平/山平 fail, 头平/故仄 pass; (b) 前/是 pass, 头/头 fail;
    # (c) 是仄/头平 fail. 看 (两) is never compared.
    assert tone_checks(JING) == (3, 7)
    assert tone_checks(DENG) == (7, 7)
    assert tone_checks(JING.replace("\n", "")) == (0, 0)
    # A 七绝 with made-up tones at positions 2, 4, 6 (the rest unknown):
    text = "甲乙丙丁戊己庚，辛壬癸子丑寅卯。\n辰巳午未申酉戌，亥金木水火土日。"
    tone = dict(zip("乙丁己" "壬子寅" "巳" "金水土", "平仄平" "仄仄两" "仄" "两平仄"))
    # (a) 乙丁 pass, 丁己 pass, 壬子 fail, 子寅 skip (两), 巳未 skip (unknown), 未酉 skip, 金水 skip, 水土 pass;
    # (b) 乙壬 pass, 巳金 skip; (c) 壬巳 pass.
    assert tone_checks(text, Sounds(tone=tone, rhyme={})) == (5, 6)


def test_repeat_distinct_copy_and_poem_metrics():
    pair = "青青河畔草，郁郁园中柳。"  # two repeated pairs of 8, 8 distinct characters of 10
    assert repeat_rate([pair]) == 2 / 8 and repeat_rate([pair, JING]) == 2 / 24
    assert distinct_rate([pair, JING]) == pytest.approx((8 / 10 + 18 / 20) / 2)  # 静夜思 has 月 and 头 twice
    assert repeat_rate([]) == distinct_rate([]) == copy_rate([], set()) == 0.0
    jing = next(p for p in load_tang() if p.text == JING)
    train = clause_set([jing])
    assert train == set(clauses(JING)) == clause_set([JING])
    assert copy_rate([pair, JING], train) == 4 / 6
    deng = DENG.replace("层楼", "层家")  # still regular, no longer rhymes; tones unchanged
    metrics = poem_metrics([pair, JING, deng], train)
    assert metrics == pytest.approx({"form": 2 / 3, "rhyme": 1 / 2, "tone": (3 + 7) / (7 + 7), "repeat": 2 / 40,
                                     "distinct": (0.8 + 0.9 + 1.0) / 3, "copy": 4 / 10})
    unknown = poem_metrics([JING], train, Sounds(tone={}, rhyme={"霜": "唐"}))  # 乡: rhymes() is None
    assert unknown == {"form": 1.0, "rhyme": 0.0, "tone": 0.0, "repeat": 0.0, "distinct": 0.9, "copy": 1.0}


def _allowed(rules: VerseRules, text: str, *then: str) -> set[str]:
    """The tokens ``rules`` allow after ``<|五绝|>``, ``text`` and the tokens ``then``."""
    vocab = _vocab()
    row = [vocab.stoi["<|五绝|>"], *(vocab.stoi[c] for c in text), *(vocab.stoi[s] for s in then)]
    return {vocab.itos[i] for i in rules.allowed(row).nonzero().flatten().tolist()}


def test_verse_rules_allow_exactly_the_next_tokens():
    vocab, snd = _vocab(), sounds()
    han = {s for s in vocab.itos if re.fullmatch(r"[\u4e00-\u9fff]", s)}
    rules = VerseRules(vocab, "五绝")
    assert _allowed(rules, "") == han
    assert _allowed(rules, "床前") == han - {"前"}  # no_repeat
    assert _allowed(rules, "床前看月光") == {"，"}
    assert _allowed(rules, "床前看月光，疑是地上霜") == {"。"}
    assert _allowed(rules, "床前看月光，疑是地上霜。") == {"\n"}
    opening = _allowed(rules, "床前看月光，疑是地上")  # a level tone and a rhyme class
    assert "霜" in opening and "月" not in opening and all(snd.tone[c] in "平两" for c in opening)
    last = _allowed(rules, JING[:-2])
    assert last == {c for c in han if snd.rhyme.get(c) == "唐"} - {"霜"} and "乡" in last
    assert _allowed(rules, JING) == _allowed(rules, JING, EOT, EOT) == {EOT}
    assert _allowed(VerseRules(vocab, "五绝", rhyme=False), JING[:-2]) == han - {"故"}
    acrostic = VerseRules(vocab, "五绝", acrostic="床疑")
    assert _allowed(acrostic, "") == {"床"} and _allowed(acrostic, "床前看月光，") == {"疑"}
    assert _allowed(acrostic, JING[:13]) == han  # the acrostic is over
    # __call__: each row its own rules (special tokens skipped), -inf elsewhere, allowed logits untouched
    rows = [[vocab.stoi[s] for s in tokens] for tokens in (["<|五绝|>", *"床前看月光"], [EOT, EOT, *"床前看月"])]
    logits = torch.randn(2, len(vocab.itos), generator=torch.Generator().manual_seed(0))
    out = rules(torch.tensor(rows), logits)
    assert torch.equal(out.isfinite(), torch.stack([rules.allowed(r) for r in rows]))
    assert torch.equal(out[out.isfinite()], logits[out.isfinite()])
    with pytest.raises(ValueError, match="at most 4"):
        VerseRules(vocab, "五绝", acrostic="春江花月夜")
    with pytest.raises(ValueError, match="Han characters of the vocabulary"):
        VerseRules(vocab, "五律", acrostic="春龘")
    with pytest.raises(ValueError, match="form"):
        VerseRules(vocab, "六绝")
    with pytest.raises(ValueError, match="start of a 五绝"):
        _allowed(rules, "床前看月光明")


def _poet(seed: int = 0) -> DecoderOnly:
    torch.manual_seed(seed)
    return DecoderOnly(tiny_config(vocab_size=len(_vocab().itos), max_len=72)).double().eval()


def _sample(form: str, logits_filter, *, n: int = 16, use_cache: bool = True, seed: int = 0) -> list[list[int]]:
    """``n`` rows sampled at temperature 1.5 after ``<|form|>``, long enough for the form and its eot."""
    clauses_, chars = SHAPES[form]
    new = clauses_ * (chars + 1) + clauses_ // 2  # characters and stops, line breaks, eot
    idx = torch.full((n, 1), _vocab().stoi[f"<|{form}|>"])
    out = generate(_poet(), idx, new, temperature=1.5, generator=torch.Generator().manual_seed(seed),
                   use_cache=use_cache, logits_filter=logits_filter)
    return out[:, 1:].tolist()


def _texts(rows: list[list[int]]) -> list[str]:
    """The text before the first eot of each row."""
    itos = _vocab().itos
    return ["".join(itos[i] for i in row).split(EOT)[0] for row in rows]


@pytest.mark.parametrize(("form", "acrostic"), [("五绝", ""), ("七绝", "山水"), ("五律", "春江花月夜"), ("七律", "")])
def test_every_constrained_sample_has_the_form_the_acrostic_and_the_rhyme(form, acrostic):
    rows = _sample(form, VerseRules(_vocab(), form, acrostic=acrostic))
    texts = _texts(rows)
    assert all(row[-1] == _vocab().eot for row in rows)  # the poem ends where the form ends
    assert len(set(texts)) == len(texts)  # sampling, not one poem repeated
    for text in texts:
        assert regular_form(text) == form, text
        assert re.fullmatch(r"(?:[^，。？\n]+，[^，。？\n]+。\n)*[^，。？\n]+，[^，。？\n]+。", text)  # ， then 。
        assert rhymes(text) is True, text
        ends = [c[-1] for c in clauses(text)[1::2]]
        assert len(set(ends)) == len(ends) and sounds().tone[ends[0]] in "平两"
        assert [c[0] for c in clauses(text)][: len(acrostic)] == list(acrostic)
    assert repeat_rate(texts) == 0.0


def test_each_rule_is_needed_a_filter_without_it_fails():
    vocab = _vocab()
    assert any(regular_form(t) != "五律" for t in _texts(_sample("五律", None)))
    assert any(rhymes(t) is not True for t in _texts(_sample("五律", VerseRules(vocab, "五律", rhyme=False))))
    assert repeat_rate(_texts(_sample("五律", VerseRules(vocab, "五律", no_repeat=False)))) > 0
    texts = _texts(_sample("五律", VerseRules(vocab, "五律", acrostic="春")))
    assert all(t[0] == "春" for t in texts) and not all(t[6] == "江" for t in texts)


def test_logits_filter_none_changes_nothing_and_cached_equals_uncached_with_a_filter():
    model, form = _poet(), "七绝"
    idx = torch.full((4, 1), _vocab().stoi[f"<|{form}|>"])
    tokens, g = idx, torch.Generator().manual_seed(3)
    with torch.no_grad():  # the loop generate runs, written out: nothing filtered
        for _ in range(20):
            logits = model.next_token_logits(tokens)
            tokens = torch.cat([tokens, next_token(logits, temperature=1.5, generator=g)[:, None]], dim=1)

    def run(**kwargs) -> torch.Tensor:
        return generate(model, idx, 20, temperature=1.5, generator=torch.Generator().manual_seed(3), **kwargs)

    assert torch.equal(run(), tokens)
    assert torch.equal(run(logits_filter=lambda t, logits: logits), tokens)
    rules = VerseRules(_vocab(), form)
    assert _sample(form, rules, seed=4) == _sample(form, rules, seed=4, use_cache=False)
    assert torch.equal(run(logits_filter=rules, top_k=5), run(logits_filter=rules, top_k=5, use_cache=False))
    greedy = generate(model, idx, 34, temperature=0.0, logits_filter=rules)  # 4 * (7 + 1) + 1 + eot
    assert all(regular_form(text) == form for text in _texts(greedy[:, 1:].tolist()))
    steps = list(generate_steps(model, idx, 20, temperature=1.5, logits_filter=rules,
                                generator=torch.Generator().manual_seed(3)))
    assert all(s.logits.isfinite().all() for s in steps)  # Step.logits: the model's, not filtered
    assert torch.equal(steps[-1].tokens, run(logits_filter=rules))
