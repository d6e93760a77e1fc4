"""Make the notebooks a reader opens on Colab or in Jupyter: the exercise version and the full chapter.

    python tools/make_exercises.py                # book/*.ipynb → exercises/*.ipynb and colab/*.ipynb
    python tools/make_exercises.py --out DIR      # exercise versions to DIR, full chapters to DIR/../colab
    python tools/make_exercises.py --colab DIR    # full chapters to DIR
    python tools/make_exercises.py --force        # also overwrite notebooks you have edited

- ``exercises/NN_slug.ipynb``, the exercise version: in each code cell, the lines from
  ``### BEGIN SOLUTION`` to ``### END SOLUTION`` become ``raise NotImplementedError(...)`` at the same
  indentation; reference answers to conceptual questions (``{solution}`` blocks) become a pointer to
  the book and the book-only solution gates are removed.
- ``colab/NN_slug.ipynb``, the full chapter (the book's Colab button opens it): every solution kept,
  each solution code cell under a heading 解答, each written answer folded in ``<details>``.

In both, outputs are cleared, the setup cell is the book's, and the markdown is plain Markdown:
tools/myst_markdown.py converts the book's MyST (labels, admonitions, exercises, roles,
substitutions), which Colab and Jupyter would show as raw text. A figure's caption (the
``mystnb.figure`` metadata of its code cell, which the book renders as 图 N.k) becomes a markdown cell
under that cell, ``*图 N.k*　caption``, so that the prose's ``{numref}`` reads 图 N.k there too.

Your work is never lost: each generated notebook records a fingerprint of its cells. A notebook
whose cells no longer match its fingerprint (you edited or ran it) is left alone and reported,
unless you pass ``--force``. Standard library only, so it runs anywhere.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

from common import ROOT, chapters
from myst_markdown import Context, collect_labels, myst_to_markdown
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = 'raise NotImplementedError("练习：删掉这一行，写下你的实现")'


def strip_solutions(source: str) -> str:
    """Replace each ``### BEGIN SOLUTION`` … ``### END SOLUTION`` region by an indented stub."""
    out, inside = [], False
    for line in source.splitlines():
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise ValueError(f"nested {BEGIN!r}")
            inside = True
            out.append(line[: len(line) - len(line.lstrip())] + STUB)
        elif stripped == END:
            if not inside:
                raise ValueError(f"{END!r} without {BEGIN!r}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{BEGIN!r} without {END!r}")
    return "\n".join(out)


def colab_base(repo_url: str, branch: str) -> str:
    """``https://github.com/OWNER/REPO`` → the Colab address of that repository's ``branch``."""
    path = repo_url.rstrip("/").removesuffix(".git").split("github.com/", 1)[-1]
    return f"https://colab.research.google.com/github/{path}/blob/{branch}"


def substitutions(root: Path = ROOT) -> dict[str, str]:
    """The book's MyST substitutions: ``repo`` (``repository.url`` of ``_config.yml``) and ``colab``.

    Read without a YAML parser (standard library only): ``url:`` and ``branch:`` under ``repository:``.
    """
    config = (root / "_config.yml").read_text(encoding="utf-8")
    block = re.search(r"^repository:[ \t]*\n((?:[ \t]+.*\n?|[ \t]*\n)*)", config, re.MULTILINE)[1]

    def value(key: str) -> str | None:
        found = re.search(rf"^[ \t]+{key}:[ \t]*(?:&\S+[ \t]+)?([^\s#]+)", block, re.MULTILINE)
        return found[1].strip("'\"") if found else None

    repo = value("url").rstrip("/")
    return {"repo": repo, "colab": colab_base(repo, value("branch") or "main")}


def figure_of(cell: dict) -> dict | None:
    """The ``mystnb.figure`` options (``name``, ``caption``) of a code cell whose image is a figure."""
    return cell.get("metadata", {}).get("mystnb", {}).get("figure") if cell["cell_type"] == "code" else None


def book_labels(book: Path) -> dict[str, str]:
    """The ``{ref}``/``{doc}`` targets of every chapter and page in ``book`` (myst_markdown.collect_labels),
    and each named figure as ``图 N.k``: chapter N's k-th captioned code cell, numbered as in the book."""
    documents, figures = {}, {}
    for path in sorted(book.glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        documents[path.stem] = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        named = [figure.get("name") for figure in map(figure_of, cells) if figure is not None]
        figures.update({name: f"图 {int(path.stem[:2])}.{k}" for k, name in enumerate(named, start=1) if name})
    for path in sorted(book.glob("*.md")):
        documents[path.stem] = path.read_text(encoding="utf-8")
    return {**collect_labels(documents), **figures}


def notebook_cells(nb: dict, ctx: Context) -> list[dict]:
    """The cells of notebook ``nb`` in plain Markdown, outputs cleared; solutions stubbed unless
    ``ctx.solutions``. A markdown cell left empty (a solution gate) is dropped."""
    cells = []
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            source = myst_to_markdown(source, ctx)
            if not source.strip():
                continue
        elif cell["cell_type"] == "code" and not ctx.solutions:
            source = strip_solutions(source)
        new = {"cell_type": cell["cell_type"], "metadata": {"tags": cell.get("metadata", {}).get("tags", [])},
               "source": source}
        if not new["metadata"]["tags"]:
            new["metadata"] = {}
        if cell["cell_type"] == "code":
            new.update(execution_count=None, outputs=[])
        cells.append(new)
        if (figure := figure_of(cell)) is not None:  # its caption under it, numbered as in the book
            number = ctx.labels.get(figure.get("name", ""), "图")
            caption = myst_to_markdown(str(figure.get("caption", "")), ctx)
            cells.append({"cell_type": "markdown", "metadata": {}, "source": f"*{number}*　{caption}"})
    return cells


def fingerprint(cells: list[dict]) -> str:
    """A hash of the cells' sources and outputs: it changes when the learner edits or runs them."""
    keep = [(c["cell_type"], "".join(c["source"]), c.get("outputs", [])) for c in cells]
    return hashlib.sha256(json.dumps(keep, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


def render(src: Path, full: bool = False, labels: dict[str, str] | None = None) -> dict:
    """The exercise version of chapter ``src``, or with ``full`` its full version for colab/."""
    nb = json.loads(src.read_text(encoding="utf-8"))
    labels = book_labels(src.parent) if labels is None else labels
    chapter = int(src.name[:2]) if src.name[:2].isdigit() else None
    cells = notebook_cells(nb, Context(substitutions(), labels, solutions=full, chapter=chapter))
    metadata = {k: v for k, v in nb.get("metadata", {}).items() if k in ("kernelspec", "language_info")}
    origin = "colab_version_of" if full else "exercise_version_of"
    metadata["transformer_course"] = {origin: f"book/{src.name}", "fingerprint": fingerprint(cells)}
    return {"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}


def learner_edited(path: Path) -> bool:
    """True if ``path`` exists and its cells no longer match the fingerprint written with them."""
    if not path.exists():
        return False
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
        recorded = nb["metadata"]["transformer_course"]["fingerprint"]
    except (ValueError, KeyError, TypeError):
        return True  # not ours, or unreadable: do not touch it
    return fingerprint(nb["cells"]) != recorded


def write(dst: Path, nb: dict, force: bool) -> None:
    """Write ``nb`` to ``dst`` unless unchanged, or edited by the learner (and not ``force``)."""
    text = json.dumps(nb, ensure_ascii=False, indent=1) + "\n"
    if dst.exists() and dst.read_text(encoding="utf-8") == text:
        print(f"unchanged  {dst}")
    elif learner_edited(dst) and not force:
        print(f"kept       {dst}: you have edited it; move it away or use --force to replace it")
    else:
        dst.write_text(text, encoding="utf-8")
        print(f"written    {dst}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--book", type=Path, default=ROOT / "book", help="folder of the chapters")
    parser.add_argument("--out", type=Path, default=ROOT / "exercises",
                        help="where to write the exercise versions (default: exercises/)")
    parser.add_argument("--colab", type=Path, default=None,
                        help="where to write the full chapters (default: colab/ next to --out)")
    parser.add_argument("--force", action="store_true", help="overwrite notebooks even if you edited them")
    args = parser.parse_args(argv)
    colab = args.colab or args.out.parent / "colab"
    labels = book_labels(args.book)
    for folder, full in ((args.out, False), (colab, True)):
        folder.mkdir(parents=True, exist_ok=True)
        for src in chapters(args.book):
            write(folder / src.name, render(src, full, labels), args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
