"""A real Chinese corpus: 唐诗三百首 (313 poems) and 101 Song-dynasty poems (宋诗), public domain.

``data/poems.txt`` is made by ``tools/make_poems.py`` from Debian's ``fortunes-zh`` 2.98 (its header
lists the source and every kind of change). ``load_poems()`` reads it into ``Poem`` records; a
deterministic train/validation split by poem (~10% validation) is decided by a hash of title and author,
so it does not depend on the file's order or on Python's per-process ``hash()``.

Example:
    >>> poem = next(p for p in load_poems(collection="tang") if p.title == "夜思")  # 静夜思
    >>> print(poem.author, poem_form(poem)); print(poem.text)
    李白 五言
    床前明月光，疑是地上霜。
    举头望明月，低头思故乡。
"""
from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from importlib import resources
from typing import NamedTuple

from ._checks import check_choice

PREFACE = "序："  # in poems.txt, a line of the poet's prose preface
SPLITS = ("all", "train", "val")
COLLECTIONS = ("all", "tang", "song")
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\U00020000-\U0003134f"  # CJK ideographs (basic + extensions A-H)
_FORMS = {n: re.compile(f"(?:[{_HAN}]{{{n}}}[，。？！])+") for n in (5, 7)}  # n characters, then a stop


class Poem(NamedTuple):
    """One poem: ``lines`` is the poem itself (one couplet per line), ``preface`` the poet's prose
    preface when the title ends in 并序 (else empty)."""

    title: str
    author: str
    collection: str  # "tang" or "song"
    lines: tuple[str, ...]
    preface: tuple[str, ...] = ()

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
