"""Real Chinese poems, public domain: 唐诗三百首 (313 poems) with 101 Song-dynasty poems (宋诗), and the
36,198 regular poems of 全唐诗 (五绝, 七绝, 五律, 七律).

``data/poems.txt`` is made by ``tools/make_poems.py`` from Debian's ``fortunes-zh`` 2.98 (its header
lists the source and every kind of change). ``load_poems()`` reads it into ``Poem`` records; a
deterministic train/validation split by poem (~10% validation) is decided by a hash of title and author,
so it does not depend on the file's order or on Python's per-process ``hash()``.

``CharVocab`` numbers their characters (one token per character, plus ``<|endoftext|>``, ``<unk>`` and
special tokens such as the form tokens of chapter 14).

``data/tang.tsv.xz`` is made by ``tools/make_tang.py`` from the npm package ``chinese-poetry`` 2.0.1 (MIT).
``load_tang()`` reads it; its validation split is stored in the file (decided by the tool: by hash, plus
every variant of a validation poem, and every 全唐诗 variant of 唐诗三百首's validation poems, so 静夜思 and
登鹳雀楼 are unseen by any model trained on either training split). ``data/tang_sounds.tsv`` gives each
character's tone class (平 / 仄 / 两) and rhyme class (《中华新韵》); ``sounds()`` reads it.

Example:
    >>> poem = next(p for p in load_poems(collection="tang") if p.title == "夜思")  # 静夜思
    >>> print(poem.author, poem_form(poem)); print(poem.text)
    李白 五言
    床前明月光，疑是地上霜。
    举头望明月，低头思故乡。
"""
from __future__ import annotations

import hashlib
import lzma
import re
from functools import lru_cache
from importlib import resources
from typing import Iterable, Iterator, NamedTuple, Sequence

from ._checks import check_choice

PREFACE = "序："  # in poems.txt, a line of the poet's prose preface
SPLITS = ("all", "train", "val")
COLLECTIONS = ("all", "tang", "song")
REGULAR_FORMS = ("五绝", "七绝", "五律", "七律")  # 4 or 8 clauses of 5 or 7 characters
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\U00020000-\U0003134f"  # CJK ideographs (basic + extensions A-H)
_FORMS = {n: re.compile(f"(?:[{_HAN}]{{{n}}}[，。？！])+") for n in (5, 7)}  # n characters, then a stop


class Poem(NamedTuple):
    """One poem: ``lines`` is the poem itself (one couplet per line), ``preface`` the poet's prose
    preface when the title ends in 并序 (else empty)."""

    title: str
    author: str
    collection: str  # "tang" or "song" (唐诗三百首 / 宋诗), "quantang" (全唐诗)
    lines: tuple[str, ...]
    preface: tuple[str, ...] = ()
    form: str = ""  # for 全唐诗: one of REGULAR_FORMS

    @property
    def text(self) -> str:
        """The poem's lines joined by newlines (without the preface)."""
        return "\n".join(self.lines)


def _is_val(title: str, author: str) -> bool:
    """About one poem in ten is for validation: SHA-256 of ``title\\nauthor`` is 0 mod 10."""
    digest = hashlib.sha256(f"{title}\n{author}".encode("utf-8")).digest()
    return int.from_bytes(digest, "big") % 10 == 0


@lru_cache(maxsize=1)
def _all_poems() -> tuple[Poem, ...]:
    text = (resources.files("transformer_course") / "data" / "poems.txt").read_text(encoding="utf-8")
    body = "\n".join(line for line in text.split("\n") if not line.startswith("#"))
    poems = []
    for block in body.strip("\n").split("\n\n"):
        title, author, collection, *rest = block.split("\n")
        preface = tuple(line[len(PREFACE) :] for line in rest if line.startswith(PREFACE))
        lines = tuple(line for line in rest if not line.startswith(PREFACE))
        poems.append(Poem(title.strip("《》"), author, collection, lines, preface))
    return tuple(poems)


def load_poems(split: str = "all", collection: str = "all") -> list[Poem]:
    """The shipped poems, in file order (tang first), filtered by ``split`` (``"all"``, ``"train"``,
    ``"val"``) and ``collection`` (``"all"``, ``"tang"``, ``"song"``)."""
    check_choice("split", split, SPLITS)
    check_choice("collection", collection, COLLECTIONS)
    in_split = {"all": lambda p: True, "val": lambda p: _is_val(p.title, p.author)}
    in_split["train"] = lambda p: not _is_val(p.title, p.author)
    return [p for p in _all_poems() if collection in ("all", p.collection) and in_split[split](p)]


def poem_form(poem: Poem) -> str | None:
    """``"五言"`` or ``"七言"`` when every line is made of clauses of 5 (resp. 7) Chinese characters, each
    followed by one of ，。？！ (``床前明月光，疑是地上霜。``); else ``None``."""
    for n, name in ((5, "五言"), (7, "七言")):
        if poem.lines and all(_FORMS[n].fullmatch(line) for line in poem.lines):
            return name
    return None


def _data_path(name: str):
    return resources.files("transformer_course") / "data" / name


@lru_cache(maxsize=1)
def _tang() -> tuple[tuple[str, Poem], ...]:
    text = lzma.decompress(_data_path("tang.tsv.xz").read_bytes()).decode("utf-8")
    out = []
    for line in text.split("\n"):
        if line and not line.startswith("#"):
            split, form, author, title, body = line.split("\t")
            out.append((split, Poem(title, author, "quantang", tuple(body.split("/")), form=form)))
    return tuple(out)


def load_tang(split: str = "all", form: str | None = None) -> list[Poem]:
    """The regular poems of 全唐诗 (36,198), in file order, filtered by ``split`` (``"all"``, ``"train"``,
    ``"val"``: 1,980 poems) and ``form`` (one of ``REGULAR_FORMS``, or ``None`` for all)."""
    check_choice("split", split, SPLITS)
    if form is not None:
        check_choice("form", form, REGULAR_FORMS)
    return [p for s, p in _tang() if split in ("all", s) and form in (None, p.form)]


class Sounds(NamedTuple):
    tone: dict[str, str]  # character -> "平", "仄" or "两" (two readings in use); absent: unknown
    rhyme: dict[str, str]  # character -> one of the 14 rhyme classes of 《中华新韵》; absent: unknown


@lru_cache(maxsize=1)
def sounds() -> Sounds:
    """Tone and rhyme class of every character of 全唐诗's regular poems (see ``tools/make_tang.py``)."""
    tone, rhyme = {}, {}
    for line in _data_path("tang_sounds.tsv").read_text(encoding="utf-8").split("\n"):
        if line and not line.startswith("#"):
            char, t, r = line.split("\t")
            if t:
                tone[char] = t
            if r:
                rhyme[char] = r
    return Sounds(tone, rhyme)


EOT, UNK = "<|endoftext|>", "<unk>"


class CharVocab:
    """Token ids of characters: ``0`` is ``<|endoftext|>``, ``1`` is ``<unk>``, then the ``specials`` (such
    as the form tokens ``<|五绝|>``), then the sorted characters.

    Example:
        >>> vocab = CharVocab("床前明月光")
        >>> vocab.encode("明月光，"), vocab.decode(vocab.encode("明月"))
        ([5, 6, 2, 1], '明月')
    """

    def __init__(self, chars: Iterable[str], specials: Sequence[str] = ()) -> None:
        self.specials = tuple(specials)
        chars = sorted(set(chars) - {EOT, UNK})
        longer = [c for c in chars if len(c) != 1]
        if longer:
            raise ValueError(f"chars must be single characters, got {longer[:3]!r}")
        if any(len(t) < 2 or t in (EOT, UNK) for t in self.specials) or len(set(self.specials)) < len(specials):
            raise ValueError(f"specials must be distinct strings of 2+ characters, got {self.specials!r}")
        self.itos = [EOT, UNK, *self.specials, *chars]
        self.stoi = {c: i for i, c in enumerate(self.itos)}
        self.eot, self.unk = 0, 1

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> list[int]:
        """One id per character; the text ``<|endoftext|>`` is just its 13 characters, never the token."""
        return [self.stoi.get(c, self.unk) for c in text]

    def encode_iterable(self, texts: Iterable[str]) -> Iterator[int]:
        """``encode("".join(texts))``, one piece at a time (a file's lines, say): nothing is held back,
        since every character is a token of its own."""
        for text in texts:
            yield from self.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.itos[i] for i in ids)
