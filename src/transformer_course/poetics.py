"""Metrics of regular Chinese verse (近体诗) and decoding rules that enforce its shape.

Metrics take poem texts in the format of ``load_tang()``'s ``Poem.text``: one couplet per line, each clause
closed by one of ，。？！；. Sounds (tone and rhyme class of a character) come from ``poems.sounds()``:
rhyme classes are the 14 of 《中华新韵》 (Mandarin), so some Tang rhymes fall apart; measure real poems first.

``VerseRules`` is a ``logits_filter`` for ``generate``: it sets to ``-inf`` every token that would break
the form (clause lengths and stops), an acrostic (藏头), the rhyme, or repeat the previous character.

Example:
    >>> text = "白日依山尽，黄河入海流。\\n欲穷千里目，更上一层楼。"
    >>> regular_form(text), rhymes(text), tone_checks(text)
    ('五绝', True, (7, 7))
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import torch
from torch import Tensor

from ._checks import check_choice, check_tensor
from .poems import _HAN, REGULAR_FORMS, Poem, Sounds, sounds as _default_sounds

STOPS = "，。？！；"
SHAPES = {"五绝": (4, 5), "七绝": (4, 7), "五律": (8, 5), "七律": (8, 7)}  # form -> (clauses, characters)
_CLAUSE = re.compile(f"([^{STOPS}]*)[{STOPS}]")
_NOT_HAN = re.compile(f"[^{_HAN}]")
_COUPLET = {n: re.compile(f"(?:[{_HAN}]{{{n}}}[{STOPS}]){{2}}") for n in (5, 7)}
_LEVEL = ("平", "两")  # tones a rhyme character may have (两: one of its readings is 平)


def clauses(text: str) -> list[str]:
    """The clauses of ``text``: the Han characters before each stop ，。？！； (non-empty ones only)."""
    return [c for c in (_NOT_HAN.sub("", m) for m in _CLAUSE.findall(text)) if c]


def regular_form(text: str) -> str | None:
    """One of ``REGULAR_FORMS`` when ``text`` is exactly a regular poem: 2 or 4 lines separated by ``"\\n"``,
    each line two clauses of n Han characters closed by a stop, n = 5 or 7 in every clause; else ``None``."""
    lines = text.split("\n")
    for n in (5, 7):
        if len(lines) in (2, 4) and all(_COUPLET[n].fullmatch(line) for line in lines):
            return next(form for form, shape in SHAPES.items() if shape == (2 * len(lines), n))
    return None


def rhymes(text: str, sounds: Sounds | None = None) -> bool | None:
    """Whether a regular poem rhymes: the last characters of the even clauses (2nd, 4th, ...) share one
    rhyme class. ``None`` when ``text`` is not regular or one of those characters has no known class."""
    if regular_form(text) is None:
        return None
    rhyme = (sounds or _default_sounds()).rhyme
    classes = [rhyme.get(c[-1]) for c in clauses(text)[1::2]]
    return None if None in classes else len(set(classes)) == 1


def _tone_pairs(cs: list[str]) -> Iterator[tuple[str, str, bool]]:
    """(character, character, should the tones be the same) for each rule of ``tone_checks``."""
    for c in cs:  # (a) 二四六分明
        yield c[1], c[3], False
        if len(c) == 7:
            yield c[3], c[5], False
    for k in range(0, len(cs), 2):
        yield cs[k][1], cs[k + 1][1], False  # (b) 对
        if k + 2 < len(cs):
            yield cs[k + 1][1], cs[k + 2][1], True  # (c) 粘


def tone_checks(text: str, sounds: Sounds | None = None) -> tuple[int, int]:
    """``(passed, checked)`` over the tone rules of regular verse; ``(0, 0)`` when ``text`` is not regular.

    Positions count from 1 inside a clause; each rule compares the tones (平 / 仄) of two characters:

    - (a) 二四六分明: in every clause, positions 2 and 4 differ (and 4 and 6 in a 7-character clause);
    - (b) 对: in every couplet, position 2 of its first clause and of its second clause differ;
    - (c) 粘: position 2 of a couplet's second clause equals position 2 of the next couplet's first clause.

    A comparison is skipped (not checked) when either tone is ``两`` (two readings) or unknown; a 五绝
    makes at most 4 + 2 + 1 = 7 checks, a 七律 at most 16 + 4 + 3 = 23.
    """
    if regular_form(text) is None:
        return 0, 0
    tone = (sounds or _default_sounds()).tone
    passed = checked = 0
    for a, b, same in _tone_pairs(clauses(text)):
        ta, tb = tone.get(a), tone.get(b)
        if ta in ("平", "仄") and tb in ("平", "仄"):
            checked += 1
            passed += (ta == tb) == same
    return passed, checked


def repeat_rate(texts: Iterable[str]) -> float:
    """叠字率: repeated pairs / pairs, over the adjacent character pairs inside every clause of every text
    (a pair is repeated when both are the same character, as 青青); 0.0 when there is no pair."""
    pairs = [(a, b) for text in texts for c in clauses(text) for a, b in zip(c, c[1:])]
    return sum(a == b for a, b in pairs) / max(1, len(pairs))


def distinct_rate(texts: Iterable[str]) -> float:
    """The mean over texts of distinct characters / characters, counting the Han characters of each text
    (a text without any counts 0.0); 0.0 for no texts."""
    rates = [len(set(chars)) / max(1, len(chars)) for chars in (_NOT_HAN.sub("", t) for t in texts)]
    return sum(rates) / max(1, len(rates))


def clause_set(poems_or_texts: Iterable[Poem | str]) -> set[str]:
    """Every clause of the poems (``Poem`` records or texts), for ``copy_rate``."""
    return {c for p in poems_or_texts for c in clauses(p.text if isinstance(p, Poem) else p)}


def copy_rate(texts: Iterable[str], train_clauses: set[str]) -> float:
    """Copied clauses / clauses, over every clause of every text: a clause is copied when it is found
    verbatim in ``train_clauses`` (see ``clause_set``); 0.0 when there is no clause."""
    found = [c in train_clauses for text in texts for c in clauses(text)]
    return sum(found) / max(1, len(found))


def poem_metrics(texts: Iterable[str], train_clauses: set[str], sounds: Sounds | None = None) -> dict[str, float]:
    """Every metric of a list of poems, each in [0, 1] (0.0 for an empty denominator):

    - ``form``: texts in a regular form / texts (``regular_form``);
    - ``rhyme``: regular texts that rhyme / regular texts (``rhymes`` is True; None counts as not);
    - ``tone``: passed / checked tone comparisons, summed over all texts (``tone_checks``);
    - ``repeat``, ``distinct``, ``copy``: ``repeat_rate``, ``distinct_rate``, ``copy_rate``.
    """
    texts = list(texts)
    sounds = sounds or _default_sounds()
    regular = [t for t in texts if regular_form(t) is not None]
    passed, checked = (sum(x) for x in zip((0, 0), *(tone_checks(t, sounds) for t in regular)))
    return {
        "form": len(regular) / max(1, len(texts)),
        "rhyme": sum(rhymes(t, sounds) is True for t in regular) / max(1, len(regular)),
        "tone": passed / max(1, checked),
        "repeat": repeat_rate(texts),
        "distinct": distinct_rate(texts),
        "copy": copy_rate(texts, train_clauses),
    }


class VerseRules:
    """A ``logits_filter`` for ``generate``: ``rules(tokens (B, t), logits (B, V)) -> logits (B, V)`` with
    ``-inf`` at every token that breaks a rule, decided from each row's text so far (special tokens, those
    of ``vocab.itos`` longer than one character, such as the start token, are skipped):

    - form: a clause takes Han characters until it has n, then its stop: ``，`` after an odd clause,
      ``。`` after an even one, then ``"\\n"``; after the last clause only ``vocab.eot``. Never ``<unk>``;
    - ``acrostic``: clause i starts with ``acrostic[i]``;
    - ``rhyme``: the 2nd clause ends in a level-tone (平 or 两) character of a known rhyme class, each later
      even clause in a new character of that class;
    - ``no_repeat``: never the previous character again.
    """

    def __init__(self, vocab, form: str, *, acrostic: str = "", rhyme: bool = True, no_repeat: bool = True,
                 sounds: Sounds | None = None) -> None:
        self.n_clauses, self.n = SHAPES[check_choice("form", form, REGULAR_FORMS)]
        self.form, self.rhyme, self.no_repeat = form, rhyme, no_repeat
        self.chars = [s if len(s) == 1 else "" for s in vocab.itos]  # "" for special tokens
        self.stoi, self.eot = vocab.stoi, vocab.eot
        for s in ("，", "。", "\n"):
            if s not in self.stoi:
                raise ValueError(f"vocab must contain {s!r}")
        if len(acrostic) > self.n_clauses:
            raise ValueError(f"acrostic must have at most {self.n_clauses} characters for a {form}, got {acrostic!r}")
        missing = [c for c in acrostic if c not in self.stoi or _NOT_HAN.match(c)]
        if missing:
            raise ValueError(f"acrostic characters must be Han characters of the vocabulary, got {missing!r}")
        self.acrostic = [self.stoi[c] for c in acrostic]
        self.han = torch.tensor([bool(c) and not _NOT_HAN.match(c) for c in self.chars])  # (V,)
        snd = sounds or _default_sounds()
        self.rhyme_of = [snd.rhyme.get(c) if ok else None for c, ok in zip(self.chars, self.han.tolist())]
        self.classes = {r: torch.tensor([x == r for x in self.rhyme_of]) for r in set(self.rhyme_of) - {None}}
        # a rhyme class can open the rhyme if it has a character for every even clause (and one to spare)
        roomy = {r for r, mask in self.classes.items() if mask.sum() > self.n_clauses // 2}
        opens = [r in roomy and snd.tone.get(c) in _LEVEL for c, r in zip(self.chars, self.rhyme_of)]
        self.opens = torch.tensor(opens)  # (V,) may end the 2nd clause

    def _only(self, token: int) -> Tensor:
        return torch.arange(len(self.chars)) == token  # (V,) token alone

    def allowed(self, row: list[int]) -> Tensor:
        """The tokens that may follow ``row`` (token ids so far): a bool mask ``(V,)``."""
        text = "".join(self.chars[i] for i in row)
        *done, current = re.split(f"[{STOPS}]", text.replace("\n", ""))
        k = len(done)  # clauses complete
        if any(len(c) != self.n for c in done) or len(current) > self.n or k > self.n_clauses:
            raise ValueError(f"tokens must be the start of a {self.form}, got {text!r}")
        if k == self.n_clauses:
            return self._only(self.eot)
        if len(current) == self.n:
            return self._only(self.stoi["，" if k % 2 == 0 else "。"])
        if not current and k % 2 == 0 and k > 0 and not text.endswith("\n"):
            return self._only(self.stoi["\n"])
        if not current and k < len(self.acrostic):
            return self._only(self.acrostic[k])
        mask = self.han.clone()
        if self.rhyme and k % 2 == 1 and len(current) == self.n - 1:  # the rhyme character
            if k == 1:
                mask &= self.opens
            elif (cls := self.rhyme_of[self.stoi[done[1][-1]]]) is None:
                raise ValueError(f"the 2nd clause must end in a character of known rhyme class, got {done[1]!r}")
            else:
                mask &= self.classes[cls]
                mask[[self.stoi[c[-1]] for c in done[1::2]]] = False
        if self.no_repeat and current:
            mask[self.stoi[current[-1]]] = False
        return mask

    def __call__(self, tokens: Tensor, logits: Tensor) -> Tensor:
        check_tensor("tokens", tokens, "(B, t)", dtype="int")
        check_tensor("logits", logits, "(B, V)", B=tokens.shape[0], V=len(self.chars))
        allowed = torch.stack([self.allowed(row) for row in tokens.tolist()]).to(logits.device)  # (B, V)
        return logits.masked_fill(~allowed, float("-inf"))
