"""Build src/transformer_course/data/poems.txt from Debian's fortunes-zh (唐诗三百首 and 宋诗).

The package's ``tang300`` (313 entries) and ``song100`` files are fortune databases: UTF-8 text with
terminal colour codes, entries separated by ``%`` lines, each a 《title》 line, an author line, then
the text. This script keeps titles, authors and texts, cleans them (every kind of change is counted
and listed in the header of the output) and writes them in a simple format, deterministically:

    # provenance comment lines
    (blank line)
    《title》        one block per poem, blocks separated by one blank line
    author
    tang | song     the collection (the source file's name)
    序：...          zero or more lines of the poet's prose preface (only in titles with 并序)
    text lines      the poem itself, one line per couplet as in the source

Usage:
    python tools/make_poems.py [SOURCE] [--out PATH]
SOURCE is a fortunes-zh .deb or a folder it was extracted to (``dpkg -x fortunes-zh_2.98_all.deb DIR``);
without it the script runs ``apt-get download fortunes-zh`` in a temporary folder. Standard library only.
"""
from __future__ import annotations

import argparse
import gzip
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src" / "transformer_course" / "data" / "poems.txt"
FORTUNES = Path("usr/share/games/fortunes")
CHANGELOG = Path("usr/share/doc/fortunes-zh/changelog.gz")
COLLECTIONS = ("tang", "song")  # the source files, in output order
PREFACE = "序："  # marks a line of a prose preface in the output

ESCAPE = re.compile(r"\x1b\[[0-9;]*m")  # terminal colour codes: ESC[32m ... ESC[m
SEPARATOR = re.compile(r"^%[ \t]*$")  # one song100 separator is "%" + 4 spaces (fortune then merges 2 poems)
HEADING = re.compile(r"^其[一二三四五六七八九十]+$")  # a part heading inside a song100 entry (其一, 其二)
LIFE_DATES = re.compile(r"（[０-９]+－[０-９？]+）$")  # song100 authors: 柳开（９４６－９９９）
AUTHOR_NOTE = re.compile(r"(〔[^〕]*〕|（《[^）]*）)")  # 宋徽宗〔赵佶〕, 朱淑真（《宋诗纪事》：“…”）
TITLE_CHARS = {",": "，", ".": "。", "・": "·"}  # half-width / katakana forms in titles -> Chinese forms

Changes = Counter  # kind of change -> how many times it was made


def split_entries(raw: str, changes: Changes) -> list[list[str]]:
    """The entries of a fortune file as lists of lines, colour codes and trailing spaces removed."""
    n_codes = len(ESCAPE.findall(raw))
    changes["colour escape codes removed"] += n_codes
    entries, current = [], []
    for line in ESCAPE.sub("", raw).split("\n"):
        changes["lines with trailing spaces stripped"] += line != line.rstrip()
        if SEPARATOR.match(line):
            changes["'%' separators with trailing spaces, which fortune misses (song)"] += line != "%"
            entries.append(current)
            current = []
        else:
            current.append(line.rstrip())
    entries.append(current)
    return [entry for entry in entries if any(entry)]


def _title(line: str, changes: Changes) -> tuple[str, str]:
    """``(title, suffix)`` of a title line: ``题目:《明妃曲》二首`` -> ``("明妃曲", "二首")``."""
    if line.startswith("题目:"):
        line = line[len("题目:") :]
        changes["'题目:' prefix removed from titles"] += 1
    match = re.fullmatch(r"《(.+)》(.*)", line)
    if match is None:
        raise ValueError(f"title line must look like 《title》, got {line!r}")
    title, suffix = match.groups()
    for old, new in TITLE_CHARS.items():
        if old in title:
            changes[f"{old!r} -> {new!r} in titles"] += title.count(old)
            title = title.replace(old, new)
    return title, suffix


def _author(line: str, changes: Changes) -> str:
    for prefix in ("作者：", "作者:"):
        if line.startswith(prefix):
            line = line[len(prefix) :]
            break
    else:
        raise ValueError(f"author line must start with 作者：, got {line!r}")
    if LIFE_DATES.search(line):
        line = LIFE_DATES.sub("", line)
        changes["life dates removed after the author (song)"] += 1
    if AUTHOR_NOTE.search(line):
        line = AUTHOR_NOTE.sub("", line)
        changes["bracketed notes removed after the author (song)"] += 1
    return line


def clean_entry(entry: list[str], collection: str, changes: Changes) -> list[tuple[str, ...]]:
    """One fortune entry -> poems ``(title, author, collection, *lines)``; an entry with 其一/其二
    headings becomes one poem per part, titled ``title·其一`` like tang300's own parts."""
    title, suffix = _title(entry[0], changes)
    author = _author(entry[1], changes)
    body = entry[2:]
    while body and not body[0].strip():
        body = body[1:]
    while body and not body[-1].strip():
        body = body[:-1]
    preface: list[str] = []
    if title.endswith("并序"):  # the poet's prose preface runs up to the first blank line
        end = next(i for i, line in enumerate(body) if not line.strip())
        preface, body = body[:end], body[end + 1 :]
        changes["prose prefaces kept apart as 序 lines (tang)"] += 1
    parts: list[tuple[str, list[str]]] = []  # (part name, lines)
    for line in body:
        text = line.strip()
        if HEADING.match(text):
            parts.append((text, []))
            changes["entries split at 其N headings (song)"] += len(parts) == 1
        elif not text:
            changes["blank lines inside an entry removed (around 其N headings, between stanzas; song)"] += 1
        else:
            if not parts:
                parts.append(("", []))
            if "、" in text:
                changes["'、' -> '，' between clauses of a verse line"] += text.count("、")
                text = text.replace("、", "，")
            parts[-1][1].append(text)
    if suffix == "二首":
        suffix = ""  # the parts are now separate poems
    elif suffix:
        changes["words after 《》 moved into the title (song)"] += 1
        suffix = suffix if suffix.startswith("（") else "·" + suffix  # 其二 -> ·其二, （选一） stays
    poems = []
    for name, lines in parts:
        full_title = title + suffix + (f"·{name}" if name else "")
        poems.append((full_title, author, collection, *(PREFACE + p for p in preface), *lines))
    return poems


def clean(raw: str, collection: str, changes: Changes) -> list[tuple[str, ...]]:
    """Every poem of one fortune file, in file order."""
    poems = []
    for entry in split_entries(raw, changes):
        poems.extend(clean_entry(entry, collection, changes))
    return poems


def format_poems(poems: list[tuple[str, ...]], changes: Changes, version: str) -> str:
    """The text of poems.txt: the provenance header, then one block per poem."""
    counts = Counter(poem[2] for poem in poems)
    header = [
        f"Chinese classical poems from Debian's fortunes-zh {version}: usr/share/games/fortunes/tang300",
        f"(唐诗三百首: {counts['tang']} poems, collection tang) and .../song100 (Song-dynasty shi 宋诗, not ci:",
        f"{counts['song']} poems, collection song; fortune counts 95 entries there, see the changes below).",
        "Licence: the package is GPL-3.0+ (Yu Guanghui et al.); the poems are Tang and Song dynasty works",
        "in the public domain, and only their titles, authors and texts are kept here.",
        "Made by tools/make_poems.py (do not edit by hand). Format: blocks separated by a blank line:",
        f"《title》, author, collection, then the prose preface's lines prefixed '{PREFACE}' (titles ending",
        "in 并序), then the poem's lines.",
        "Changes made to the source (kind: count):",
        *(f"  {kind}: {n}" for kind, n in sorted(changes.items())),
    ]
    blocks = ["\n".join([f"《{poem[0]}》", *poem[1:]]) for poem in poems]
    return "".join(f"# {line}".rstrip() + "\n" for line in header) + "\n" + "\n\n".join(blocks) + "\n"


def make_poems(root: Path) -> str:
    """poems.txt from a folder that fortunes-zh was extracted to."""
    version = gzip.decompress((root / CHANGELOG).read_bytes()).decode("utf-8").split("\n")[0]
    version = re.search(r"\(([^)]+)\)", version).group(1)  # fortune-zh (2.98) unstable; ... -> 2.98
    changes: Changes = Counter()
    poems = []
    for collection, name in zip(COLLECTIONS, ("tang300", "song100")):
        poems.extend(clean((root / FORTUNES / name).read_text(encoding="utf-8"), collection, changes))
    return format_poems(poems, changes, version)


def extract(source: Path | None, tmp: Path) -> Path:
    """The folder fortunes-zh is extracted to: ``source`` itself, or ``source`` (a .deb) extracted, or a
    freshly downloaded .deb extracted."""
    if source is not None and source.is_dir():
        return source
    if source is None:
        subprocess.run(["apt-get", "download", "fortunes-zh"], cwd=tmp, check=True)
        source = next(tmp.glob("fortunes-zh_*.deb"))
    subprocess.run(["dpkg", "-x", str(source), str(tmp / "x")], check=True)
    return tmp / "x"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", nargs="?", type=Path, help="fortunes-zh .deb or extracted folder")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        text = make_poems(extract(args.source, Path(tmp)))
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out} ({len(text.encode('utf-8')):,} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
