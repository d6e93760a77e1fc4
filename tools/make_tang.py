"""Build src/transformer_course/data/tang.tsv.xz and tang_sounds.tsv from the npm package chinese-poetry.

chinese-poetry 2.0.1 (MIT, https://github.com/chinese-poetry/chinese-poetry) holds 全唐诗 as JSON in
traditional characters (``dist/quantangshi/poet.tang.*.json``: title, author, paragraphs) and a 平仄
annotation of every character of those poems (``dist/strains/json/poet.tang.*.json``, matched by id).
This script keeps the **regular** poems (近体诗 by shape: 4 or 8 clauses, all of 5 or all of 7
characters, each closed by ，。？！ or ；), converts them to simplified characters with OpenCC ``t2s``,
labels the form (五绝 / 七绝 / 五律 / 七律), removes duplicates and decides the validation split:

- duplicates: the same text (after conversion) is kept once, the first in file order;
- validation: a poem whose SHA-256 of its text is 0 mod 20, every poem that shares two or more clauses
  with a validation poem of 唐诗三百首 (``load_poems("val")``, which chapter 14 quotes as never seen: its
  静夜思 appears in 全唐诗 as 床前看月光 …), and then, until nothing moves, every poem that shares two or
  more clauses with a validation poem (variants of one poem stay on one side);

and writes two files, deterministically (same input, same bytes):

``tang.tsv.xz``: comment lines (``#``), then one poem per line:
``split<TAB>form<TAB>author<TAB>title<TAB>text`` with the text's couplets separated by ``/``.

``tang_sounds.tsv``: for every character of the corpus, its tone class and rhyme class:
``char<TAB>平|仄|两<TAB>rhyme class``. The tone class is the annotation's majority over the character's
occurrences in the corpus (``两`` when the minority is over a quarter: 看, 思, 听 … have two readings);
the rhyme class is one of the 14 classes of 《中华新韵》 (2005) computed from the character's most common
Mandarin reading (pypinyin). Its limits: Tang poets rhymed by the sounds of their time (切韵 / 平水韵),
so some real rhymes fall apart in Mandarin (斜/家, 入声 characters); the held-out real poems measure how
often (chapter 14's table).

Usage (tools only, not needed to read the book):
    npm pack chinese-poetry@2.0.1            # 83 MB, in any folder
    pip install opencc==1.4.2 pypinyin==0.55.0
    python tools/make_tang.py chinese-poetry-2.0.1.tgz
"""
from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import re
import tarfile
from collections import Counter, defaultdict
from pathlib import Path

from common import ROOT, use_source_tree

DATA = ROOT / "src" / "transformer_course" / "data"
HAN = "\u3400-\u4dbf\u4e00-\u9fff"
CLAUSE = re.compile(f"([{HAN}]+)([，。？！；])")
FORMS = {(4, 5): "五绝", (4, 7): "七绝", (8, 5): "五律", (8, 7): "七律"}
VAL_MOD = 20

# 《中华新韵》 (2005): 14 rhyme classes by the Mandarin final.
NEW_RHYMES = {
    "麻": ("a", "ia", "ua"), "波": ("o", "uo", "e"), "皆": ("ie", "ve", "ue"), "开": ("ai", "uai"),
    "微": ("ei", "ui", "uei"), "豪": ("ao", "iao"), "尤": ("ou", "iu", "iou"),
    "寒": ("an", "ian", "uan", "van"), "文": ("en", "in", "un", "uen", "vn"),
    "唐": ("ang", "iang", "uang"), "庚": ("eng", "ing", "ong", "iong", "ueng"),
    "齐": ("i", "v", "er"), "姑": ("u",),
}  # 支 (the -i after zh ch sh r z c s) is decided from the initial
FINAL_TO_RHYME = {final: name for name, finals in NEW_RHYMES.items() for final in finals}


def read_tarball(path: Path) -> tuple[list[dict], dict[str, list[str]]]:
    """The 全唐诗 poems (file order: poet.tang.0, 1000, ...) and the strains by poem id."""
    poems, strains = [], {}
    with tarfile.open(path) as tar:
        members = {m.name: m for m in tar.getmembers()}

        def load(name: str) -> list:
            return json.load(tar.extractfile(members[name]))

        def numbered(folder: str) -> list[str]:
            names = [n for n in members if re.fullmatch(rf"package/dist/{folder}/poet\.tang\.\d+\.json", n)]
            return sorted(names, key=lambda n: int(n.rsplit(".", 2)[1]))

        for name in numbered("quantangshi"):
            poems.extend(load(name))
        for name in numbered("strains/json"):
            strains.update((s["id"], s["strains"]) for s in load(name))
    return poems, strains


def regular(paragraphs: list[str]) -> list[tuple[str, str]] | None:
    """The clauses ``(characters, stop)`` when the poem is regular, else None."""
    text = "".join(paragraphs)
    clauses = CLAUSE.findall(text)
    if "".join(a + b for a, b in clauses) != text:
        return None  # notes, brackets, unknown characters (□), other punctuation
    lengths = {len(c) for c, _ in clauses}
    if len(lengths) != 1 or (len(clauses), lengths.pop()) not in FORMS:
        return None
    return clauses


def sha_mod(text: str, mod: int) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest(), "big") % mod


def rhyme_class(char: str) -> str:
    from pypinyin import Style, pinyin

    initial = pinyin(char, style=Style.INITIALS, strict=False)[0][0]
    final = pinyin(char, style=Style.FINALS, strict=True)[0][0]
    if final == "i" and initial in ("zh", "ch", "sh", "r", "z", "c", "s"):
        return "支"
    return FINAL_TO_RHYME.get(final, "")


def build(tarball: Path) -> tuple[bytes, bytes, dict]:
    import opencc

    use_source_tree()
    from transformer_course.poems import load_poems

    t2s = opencc.OpenCC("t2s")
    raw, strains = read_tarball(tarball)
    stats: Counter = Counter(raw_poems=len(raw))
    seen, poems = set(), []  # poems: dicts with form, author, title, clauses, text
    votes: dict[str, Counter] = defaultdict(Counter)
    for p in raw:
        clauses = regular(p["paragraphs"])
        if clauses is None:
            continue
        stats["regular"] += 1
        simple = [(t2s.convert(c), s) for c, s in clauses]
        text = "".join(c + s for c, s in simple)
        if text in seen or len(text) != sum(len(c) + 1 for c, _ in clauses):
            stats["duplicates removed"] += 1
            continue
        seen.add(text)
        marks = "".join(strains.get(p["id"], []))
        if len(marks) == len(text):  # the annotation, aligned character by character
            for ch, mark in zip(text, marks):
                if mark in "平仄":
                    votes[ch][mark] += 1
        couplets = [simple[i][0] + simple[i][1] + simple[i + 1][0] + simple[i + 1][1]
                    for i in range(0, len(simple), 2)]
        poems.append({"form": FORMS[(len(simple), len(simple[0][0]))], "author": t2s.convert(p["author"]),
                      "title": t2s.convert(p["title"]).replace("\t", " "), "clauses": [c for c, _ in simple],
                      "couplets": couplets, "text": text})
    # the validation split: by hash, then 唐诗三百首's validation poems, then variants of validation poems
    val = {i for i, p in enumerate(poems) if sha_mod(p["text"], VAL_MOD) == 0}
    stats["validation by hash"] = len(val)
    by_clause = defaultdict(set)
    for i, p in enumerate(poems):
        for c in p["clauses"]:
            by_clause[c].add(i)

    def sharing(clauses: list[str]) -> set[int]:
        hits = Counter(j for c in clauses for j in by_clause.get(c, ()))
        return {j for j, n in hits.items() if n >= 2}

    quoted = set()
    for q in load_poems("val"):
        quoted |= sharing(re.findall(f"[{HAN}]+", q.text))
    stats["validation: variants of 唐诗三百首's validation poems"] = len(quoted - val)
    val |= quoted
    frontier = set(val)
    while frontier:
        new = set().union(*(sharing(poems[i]["clauses"]) for i in frontier)) - val
        stats["validation: variants of validation poems"] += len(new)
        val |= new
        frontier = new
    lines = []
    for i, p in enumerate(poems):
        split = "val" if i in val else "train"
        lines.append("\t".join((split, p["form"], p["author"], p["title"], "/".join(p["couplets"]))))
        stats[f"{split} {p['form']}"] += 1
    chars = Counter("".join(p["text"] for p in poems))
    header = [
        "# 全唐诗: the regular poems (五绝 七绝 五律 七律), simplified characters. Made by tools/make_tang.py",
        "# from the npm package chinese-poetry 2.0.1 (MIT; https://github.com/chinese-poetry/chinese-poetry),",
        "# converted with OpenCC t2s; duplicates removed; the validation split decided as the tool describes.",
        "# split<TAB>form<TAB>author<TAB>title<TAB>text (couplets separated by /)",
        *(f"# {k}: {v}" for k, v in sorted(stats.items())),
    ]
    tsv = ("\n".join(header + lines) + "\n").encode("utf-8")
    sound_lines = ["# char<TAB>tone (平 仄 or 两: annotation majority in chinese-poetry's strains)"
                   "<TAB>rhyme class (《中华新韵》 14 classes from pypinyin's most common reading)"]
    for ch in sorted(chars):
        v = votes[ch]
        tone = "" if not v else ("两" if min(v["平"], v["仄"]) > 0.25 * sum(v.values()) else v.most_common(1)[0][0])
        sound_lines.append(f"{ch}\t{tone}\t{rhyme_class(ch)}")
    stats["distinct characters"] = len(chars)
    stats["characters"] = sum(chars.values())
    return tsv, ("\n".join(sound_lines) + "\n").encode("utf-8"), stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tarball", type=Path, help="chinese-poetry-2.0.1.tgz (npm pack chinese-poetry@2.0.1)")
    parser.add_argument("--out", type=Path, default=DATA)
    args = parser.parse_args()
    tsv, sounds, stats = build(args.tarball)
    xz = lzma.compress(tsv, format=lzma.FORMAT_XZ, preset=9 | lzma.PRESET_EXTREME)
    (args.out / "tang.tsv.xz").write_bytes(xz)
    (args.out / "tang_sounds.tsv").write_bytes(sounds)
    for k, v in sorted(stats.items()):
        print(f"{k}: {v}")
    print(f"tang.tsv.xz: {len(xz):,} bytes (text {len(tsv):,} bytes, sha256 {hashlib.sha256(tsv).hexdigest()[:16]})")
    print(f"tang_sounds.tsv: {len(sounds):,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
