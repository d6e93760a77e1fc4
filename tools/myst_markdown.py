"""MyST Markdown → plain Markdown, so that a chapter reads cleanly on Colab and in plain Jupyter.

The book is written in MyST (Jupyter Book); Colab and Jupyter render CommonMark plus ``$`` math and a
little HTML, and show MyST's own syntax as raw text. ``myst_to_markdown`` converts one markdown cell:

========================================  ============================================================
MyST                                      plain Markdown
========================================  ============================================================
``(label)=`` target line                  dropped
``:::{admonition} title`` / ``{note}``,   a blockquote: ``> **⚠ title**`` (``ℹ`` for note, tip and the
``{warning}``, ``{tip}``… (``:class:``)   like), then the body, each line quoted; with ``:class: dropdown``
                                          ``<details><summary>title</summary>`` … ``</details>``
```` ```{exercise} title ```` with         a heading one level below the last heading seen,
``:label:`` (``:nonumber:``)              ``### 练习 C.N　title`` (C the chapter, N its numbered
                                          exercises; ``:nonumber:`` gives ``### title``), then the body
```` ```{solution} label ````             full version: ``<details><summary>解答</summary>`` … ``</details>``;
                                          exercise version: ``SOLUTION_NOTE`` (the answer is in the book)
```` ```{solution-start} label ````       full version: a heading ``#### 解答`` (one level below the
                                          exercise); exercise version: dropped
```` ```{solution-end} ````               dropped
```` ```{math} ````                       a ``$$`` block
``$$ … $$ (label)``, ``\\label{…}``        the ``(label)`` and ``\\label{…}`` dropped
``{ref}`text <label>``` and the same      ``text`` (the web book has no fixed address, so no link);
with ``{numref}``, ``{doc}``,             without a text, the target's title: a chapter's or section's
``{term}``, ``{download}``                heading, ``练习 N`` for an exercise, a document's first heading,
                                          ``图 N.k`` for a figure (labels from make_exercises.book_labels)
``{math}`x```                             ``$x$``
``{sub}``, ``{sup}``, ``{kbd}``           ``<sub>``, ``<sup>``, ``<kbd>``
``{abbr}`LLM (large language model)```    ``LLM (large language model)``
``{{ colab }}``, ``{{ '[a](' ~ colab ~    the substitution evaluated: quoted strings and names joined
'/x.ipynb)' }}``                          by ``~``, names from ``substitutions`` (``colab``, ``repo``)
``{cite:p}`a,b``` (``{cite}`a```)          ``（[Vaswani 等，2017](url)；[Ba 等，2016](url)）``: author and
                                          year from references.bib, as the book writes them
``{cite:t}`a```                           ``Vaswani 等（[2017](url)）``
========================================  ============================================================

Code blocks, code spans and math are left as they are (a role written inside a code span is text).
A directive or role not in this table raises ``ValueError``: extend the table rather than let MyST
syntax reach a reader. Standard library only, like tools/make_exercises.py, its one user.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

SOLUTION_NOTE = "*（参考答案在书中本章的对应位置，先自己想一想再去看。）*"
SOLUTION_TITLE = "解答"  # what the book's folded solutions are called, and what the chapters' prose says

ADMONITIONS = {"admonition": "", "note": "注意", "tip": "提示", "hint": "提示", "important": "重要",
               "seealso": "另见", "attention": "注意", "caution": "小心", "warning": "警告",
               "danger": "危险", "error": "错误"}
WARNING_KINDS = {"attention", "caution", "warning", "danger", "error"}
TEXT_ROLES = {"ref", "numref", "doc", "term", "download"}
HTML_ROLES = {"sub", "sup", "kbd"}
CITE_ROLES = {"cite": "p", "cite:p": "p", "cite:t": "t"}  # sphinxcontrib-bibtex: {cite} is {cite:p}
BIBLIOGRAPHY = Path(__file__).resolve().parents[1] / "references.bib"
# How a citation reads, in the book (tools/sphinx_course.py builds its sphinxcontrib-bibtex reference
# style from these) and in the notebooks: （Xiong 等，2020）, Zhang 与 Sennrich（2019）, （A，2019；B 等，2019）.
CITATION = {"left": "（", "right": "）", "sep": "；", "author_year_sep": "，", "two_authors": " 与 ",
            "more_authors": " 等"}

FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,}|:{3,})(?P<info>.*)$")
DIRECTIVE = re.compile(r"^\{(?P<name>[\w-]+)\}\s*(?P<arg>.*)$")
TARGET = re.compile(r"^\s*\((?P<label>[^()\s]+)\)=\s*$")
HEADING = re.compile(r"^ {0,3}(?P<hashes>#{1,6})(?:\s|$)")
OPTION = re.compile(r"^\s*:(?P<key>[\w-]+):\s*(?P<value>.*)$")
INLINE = re.compile(
    r"(?P<math>\$\$.*?\$\$|\$(?=\S)[^$\n]*?(?<=\S)\$)"           # math: left alone
    r"|(?:\{(?P<role>[\w:-]+)\})?(?<!`)(?P<ticks>`+)(?!`)(?P<code>.+?)(?<!`)(?P=ticks)(?!`)"
    r"|\{\{(?P<expr>.*?)\}\}")
EXPLICIT = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.DOTALL)
EXERCISE = re.compile(r"^ {0,3}(?:`{3,}|:{3,})\{exercise\}(?P<title>.*)\n(?P<options>(?:[ \t]*:[\w-]+:.*\n?)*)",
                      re.MULTILINE)
TERM = re.compile(r"\s*(?:'(?P<single>[^']*)'|\"(?P<double>[^\"]*)\"|(?P<name>[A-Za-z_]\w*))\s*")
BIB_ENTRY = re.compile(r"@(\w+)\s*\{\s*([^,\s]+)\s*,")
BIB_FIELD = re.compile(r"\s*(\w+)\s*=\s*")
BIB_COMMA = re.compile(r"\s*,?")


@dataclass
class Context:
    """What converting one notebook needs: its settings and what it has seen so far."""

    substitutions: dict[str, str]           # MyST substitutions: {"colab": ..., "repo": ...}
    labels: dict[str, str] = field(default_factory=dict)  # label or "doc:stem" -> text (collect_labels)
    solutions: bool = True                  # False: the exercise version (written answers removed)
    exercises: int = 0                      # numbered exercises met so far
    chapter: int | None = None              # the chapter's number: 练习 3.1 as in the book (None: 练习 1)
    heading_level: int = 1                  # level of the last heading met
    bibliography: Path = BIBLIOGRAPHY       # the .bib file that ``{cite}`` keys are looked up in


def myst_to_markdown(source: str, ctx: Context) -> str:
    """One markdown cell in plain Markdown (see the module docstring for what becomes what)."""
    return "\n".join(_blocks(source.splitlines(), ctx)).strip("\n")


def _blocks(lines: list[str], ctx: Context) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        if TARGET.match(line):
            i += 1
        elif fence and (directive := DIRECTIVE.match(fence["info"].strip())):
            end = _closing(lines, i, fence["fence"])
            body = _directive(directive["name"], directive["arg"].strip(), lines[i + 1:end], ctx)
            if body and out and out[-1].strip():
                out.append("")
            out += body
            i = end + 1
            if body and i < len(lines) and lines[i].strip():
                out.append("")  # or the next paragraph would continue a blockquote lazily
        elif fence:
            if fence["fence"][0] == ":":
                raise ValueError(f"colon fence without a directive: {line!r}")
            end = _closing(lines, i, fence["fence"])
            out += lines[i:end + 1]  # a code block, verbatim
            i = end + 1
        elif line.lstrip().startswith("$$"):
            end = i
            while "\n".join(lines[i:end + 1]).count("$$") < 2 and end + 1 < len(lines):
                end += 1
            math = "\n".join(lines[i:end + 1])
            math = re.sub(r"\\label\{[^{}]*\}", "", math)
            out += re.sub(r"\$\$[ \t]*\([^()\s]+\)[ \t]*$", "$$", math).splitlines()
            i = end + 1
        else:
            if heading := HEADING.match(line):
                ctx.heading_level = len(heading["hashes"])
            out.append(_inline(line, ctx))
            i += 1
    return out


def _closing(lines: list[str], start: int, fence: str) -> int:
    """Index of the line closing the fence opened at ``start`` (CommonMark: same character, as long)."""
    for j in range(start + 1, len(lines)):
        stripped = lines[j].strip()
        if len(stripped) >= len(fence) and set(stripped) == {fence[0]}:
            return j
    return len(lines)


def _options(body: list[str]) -> tuple[dict[str, str], list[str]]:
    """A directive's ``:key: value`` options (or a ``---`` YAML block of them) and the rest of its body."""
    options: dict[str, str] = {}
    i = 0
    if body and body[0].strip() == "---":
        end = next((j for j in range(1, len(body)) if body[j].strip() == "---"), len(body))
        for line in body[1:end]:
            key, _, value = line.partition(":")
            options[key.strip()] = value.strip()
        i = end + 1
    while i < len(body) and (option := OPTION.match(body[i])):
        options[option["key"]] = option["value"]
        i += 1
    while i < len(body) and not body[i].strip():
        i += 1
    return options, body[i:]


def _directive(name: str, arg: str, body: list[str], ctx: Context) -> list[str]:
    options, body = _options(body)
    if name in ADMONITIONS:
        kinds = {name, *options.get("class", "").split()}
        icon = "⚠" if kinds & WARNING_KINDS else "ℹ"
        title = _inline(arg or ADMONITIONS[name] or "注意", ctx)
        if "dropdown" in kinds:  # folded on the page: folded here too
            return [f"<details><summary>{title}</summary>", "", *_blocks(body, ctx), "", "</details>"]
        quoted = [f"> {line}" if line.strip() else ">" for line in _blocks(body, ctx)]
        return [f"> **{icon} {title}**", ">", *quoted]
    if name == "exercise":
        if "nonumber" in options:
            heading = arg or "练习"
        else:
            ctx.exercises += 1
            number = ctx.exercises if ctx.chapter is None else f"{ctx.chapter}.{ctx.exercises}"
            heading = f"练习 {number}" + (f"\u3000{arg}" if arg else "")
        level = min(ctx.heading_level + 1, 6)
        return ["#" * level + " " + _inline(heading, ctx), "", *_blocks(body, ctx)]
    if name == "solution":
        if not ctx.solutions:
            return [SOLUTION_NOTE]
        return [f"<details><summary>{SOLUTION_TITLE}</summary>", "", *_blocks(body, ctx), "", "</details>"]
    if name == "solution-start":
        return ["#" * min(ctx.heading_level + 2, 6) + f" {SOLUTION_TITLE}"] if ctx.solutions else []
    if name == "solution-end":
        return []
    if name == "math":
        return ["$$", *body, "$$"]
    raise ValueError(f"myst_markdown cannot convert the directive {{{name}}}: add it to tools/myst_markdown.py")


def _inline(line: str, ctx: Context) -> str:
    return INLINE.sub(lambda m: _replace(m, ctx), line)


def _replace(match: re.Match, ctx: Context) -> str:
    if match["math"]:
        return match["math"]
    if match["expr"] is not None:
        return _substitute(match["expr"], ctx)
    role, code = match["role"], match["code"]
    if role is None:
        return match[0]  # a code span
    if role == "math":
        return f"${code}$"
    if role in HTML_ROLES:
        return f"<{role}>{code}</{role}>"
    if role == "abbr":
        return code
    if role in CITE_ROLES:
        return _cite(code, CITE_ROLES[role], ctx)
    if role not in TEXT_ROLES:
        raise ValueError(f"myst_markdown cannot convert the role {{{role}}}: add it to tools/myst_markdown.py")
    explicit = EXPLICIT.match(code)
    if explicit and explicit["text"]:
        return explicit["text"]
    target = explicit["target"] if explicit else code
    if role in ("term", "download"):
        return target
    key = f"doc:{Path(target).stem}" if role == "doc" else target
    if key not in ctx.labels:
        raise ValueError(f"{{{role}}}`{code}`: no such target in the book")
    return ctx.labels[key]


def _cite(keys: str, kind: str, ctx: Context) -> str:
    """``{cite:p}`` (kind ``p``) or ``{cite:t}`` (``t``) of comma-separated ``keys``, author–year, linked."""
    entries = read_bibliography(ctx.bibliography)
    parts = []
    for key in (k.strip() for k in keys.split(",")):
        if key not in entries:
            raise ValueError(f"{{cite}}`{keys}`: no entry {key!r} in {ctx.bibliography.name}")
        authors, year, url = entries[key]
        if kind == "p":
            parts.append(f"[{authors}{CITATION['author_year_sep']}{year}]({url})")
        else:
            parts.append(f"{authors}{CITATION['left']}[{year}]({url}){CITATION['right']}")
    joined = CITATION["sep"].join(parts)
    return f"{CITATION['left']}{joined}{CITATION['right']}" if kind == "p" else joined


def author_text(last_names: list[str]) -> str:
    """How a citation names the authors: ``Shazeer``; ``Zhang 与 Sennrich``; ``Vaswani 等`` for three or
    more (a list ending in BibTeX's ``others`` counts as more, after at least two names)."""
    if len(last_names) == 2 and last_names[1] == "others":  # sphinxcontrib-bibtex would write 「A 与 others」
        raise ValueError("list at least two names before `and others`")
    if len(last_names) <= 2:
        return CITATION["two_authors"].join(last_names)
    return last_names[0] + CITATION["more_authors"]


def citation_labels(cited: dict[str, tuple[str, str]]) -> dict[str, str]:
    """``{key: label}`` from ``{key: (author_text, year)}``: the label is the citation, 「Xiong 等，2020」;
    entries whose authors and year coincide get 2023a, 2023b … in the order of their keys."""
    groups: dict[tuple[str, str], list[str]] = {}
    for key, authors_year in cited.items():
        groups.setdefault(authors_year, []).append(key)
    labels = {}
    for (authors, year), keys in groups.items():
        for i, key in enumerate(sorted(keys)):
            suffix = "abcdefghijklmnopqrstuvwxyz"[i] if len(keys) > 1 else ""
            labels[key] = f"{authors}{CITATION['author_year_sep']}{year}{suffix}"
    return labels


def read_bibliography(path: Path) -> dict[str, tuple[str, str, str]]:
    """``{key: (authors, year, url)}`` of a BibTeX file, as a citation writes them: the authors' last names
    (``Vaswani 等``, ``Zhang 与 Sennrich``: sphinxcontrib-bibtex's ``last`` name style) and the year, with
    a letter where two entries would read the same (``2023a``; ``citation_labels``).
    A small reader for the file's own plain form: ``@type{key,`` then ``field = {value}`` (braces nest),
    ``"value"`` or a number; ``@comment``, ``@string`` and ``@preamble`` are skipped."""
    return _parse_bibliography(path.read_text(encoding="utf-8"), path.name)


@functools.lru_cache(maxsize=4)
def _parse_bibliography(text: str, name: str) -> dict[str, tuple[str, str, str]]:
    fields_of: dict[str, dict[str, str]] = {}
    for start in BIB_ENTRY.finditer(text):
        kind, key = start[1].lower(), start[2]
        if kind in ("comment", "string", "preamble"):
            continue
        fields, pos = {}, start.end()
        while (found := BIB_FIELD.match(text, pos)):
            value, pos = _bib_value(text, found.end())
            fields[found[1].lower()] = " ".join(value.split())
            pos = BIB_COMMA.match(text, pos).end()
        missing = {"author", "year", "url"} - fields.keys()
        if missing or text[pos:pos + 1] != "}":
            raise ValueError(f"{name}: entry {key!r} " + (f"has no {sorted(missing)}" if missing
                                                          else "is not closed where expected"))
        fields_of[key] = fields
    cited = {}
    for key, fields in fields_of.items():
        try:
            cited[key] = (author_text([_last_name(n) for n in _bib_names(fields["author"])]), fields["year"])
        except ValueError as error:
            raise ValueError(f"{name}: entry {key!r}: {error}") from None
    labels = citation_labels(cited)
    return {key: (cited[key][0], labels[key].rpartition(CITATION["author_year_sep"])[2], fields["url"])
            for key, fields in fields_of.items()}


def _bib_value(text: str, pos: int) -> tuple[str, int]:
    """A field value starting at ``pos`` and the position after it."""
    if text[pos] == "{":
        depth, end = 0, pos
        for end in range(pos, len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                break
        return text[pos + 1:end], end + 1
    if text[pos] == '"':
        end = text.index('"', pos + 1)
        return text[pos + 1:end], end + 1
    number = re.compile(r"\d+").match(text, pos)
    if not number:
        raise ValueError(f"cannot read the BibTeX value at {text[pos:pos + 30]!r}")
    return number[0], number.end()


def _bib_names(field_value: str) -> list[str]:
    """The names of a BibTeX ``author`` field: split at `` and `` outside braces."""
    names, depth, current = [], 0, ""
    for word in re.split(r"(\s+and\s+|[{}])", field_value):
        if word in ("{", "}"):
            depth += 1 if word == "{" else -1
            current += word
        elif depth == 0 and re.fullmatch(r"\s+and\s+", word):
            names.append(current.strip())
            current = ""
        else:
            current += word
    return names + [current.strip()]


def _last_name(name: str) -> str:
    if name.startswith("{") and name.endswith("}"):
        return name[1:-1]  # a corporate author: {Gemma Team}
    if "," in name:
        last = name.split(",")[0]
    else:
        last = name.split()[-1]
    return last.replace("{", "").replace("}", "").strip()


def _substitute(expr: str, ctx: Context) -> str:
    """A MyST (Jinja) substitution made of quoted strings and names joined by ``~``."""
    parts, pos = [], 0
    while True:
        term = TERM.match(expr, pos)
        if not term:
            raise ValueError(f"myst_markdown cannot evaluate the substitution {{{{{expr}}}}}")
        if term["name"] is None:
            parts.append(term["single"] if term["single"] is not None else term["double"])
        elif term["name"] in ctx.substitutions:
            parts.append(ctx.substitutions[term["name"]])
        else:
            raise ValueError(f"unknown substitution {term['name']!r} in {{{{{expr}}}}}")
        pos = term.end()
        if pos == len(expr):
            return "".join(parts)
        if expr[pos] != "~":
            raise ValueError(f"myst_markdown cannot evaluate the substitution {{{{{expr}}}}}")
        pos += 1


def collect_labels(documents: dict[str, str]) -> dict[str, str]:
    """``{label: text}`` for the ``{ref}`` and ``{doc}`` targets of ``documents`` (``{stem: markdown}``).

    A ``(label)=`` line names the heading after it; an exercise's ``:label:`` names ``练习 N（title）``
    (N: ``3.1`` in chapter ``03_…``, as the book numbers it; ``1`` elsewhere); ``doc:STEM`` names a
    document's first heading.
    """
    labels: dict[str, str] = {}
    for stem, text in documents.items():
        if first := re.search(r"^#{1,6}\s+(.+?)\s*$", text, re.MULTILINE):
            labels[f"doc:{stem}"] = first[1]
        for target in re.finditer(r"^\(([^()\s]+)\)=\s*\n\s*#{1,6}\s+(.+?)\s*$", text, re.MULTILINE):
            labels[target[1]] = target[2]
        number, chapter = 0, re.match(r"(\d\d)_", stem)
        for exercise in EXERCISE.finditer(text):
            options = dict(OPTION.match(line).groups() for line in exercise["options"].splitlines())
            title = exercise["title"].strip()
            if "nonumber" not in options:
                number += 1
                shown = f"{int(chapter[1])}.{number}" if chapter else number
                title = f"练习 {shown}" + (f"（{title}）" if title else "")
            if "label" in options:
                labels[options["label"]] = title or "练习"
    return labels
