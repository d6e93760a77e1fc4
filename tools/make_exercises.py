"""Make the exercise version of every chapter: reference solutions replaced by a stub.

    python tools/make_exercises.py                # book/*.ipynb → exercises/*.ipynb
    python tools/make_exercises.py --out DIR      # write elsewhere
    python tools/make_exercises.py --force        # also overwrite notebooks you have edited

In each code cell, the lines from ``### BEGIN SOLUTION`` to ``### END SOLUTION`` become
``raise NotImplementedError(...)`` at the same indentation; reference answers to conceptual
questions (``{solution}`` blocks) and the book-only solution gates are removed; outputs are cleared.

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

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = 'raise NotImplementedError("练习：删掉这一行，写下你的实现")'
SOLUTION_BLOCK = re.compile(r"^\s*(```|:::)\{solution(-start|-end)?\}", re.MULTILINE)
NOTE = "*（参考答案在书中本章的对应位置，先自己想一想再去看。）*"


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


def exercise_cells(nb: dict) -> list[dict]:
    """The cells of the exercise version of notebook ``nb``."""
    cells = []
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and SOLUTION_BLOCK.match(source):
            if re.match(r"^\s*(```|:::)\{solution\}", source):  # a written answer: point to the book
                cells.append({"cell_type": "markdown", "metadata": {}, "source": NOTE})
            continue  # solution-start / solution-end gates only matter in the book
        new = {"cell_type": cell["cell_type"], "metadata": {"tags": cell.get("metadata", {}).get("tags", [])},
               "source": strip_solutions(source) if cell["cell_type"] == "code" else source}
        if not new["metadata"]["tags"]:
            new["metadata"] = {}
        if cell["cell_type"] == "code":
            new.update(execution_count=None, outputs=[])
        cells.append(new)
    return cells


def fingerprint(cells: list[dict]) -> str:
    """A hash of the cells' sources and outputs: it changes when the learner edits or runs them."""
    keep = [(c["cell_type"], "".join(c["source"]), c.get("outputs", [])) for c in cells]
    return hashlib.sha256(json.dumps(keep, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


def render(src: Path) -> dict:
    """The exercise-version notebook of chapter ``src``."""
    nb = json.loads(src.read_text(encoding="utf-8"))
    cells = exercise_cells(nb)
    metadata = {k: v for k, v in nb.get("metadata", {}).items() if k in ("kernelspec", "language_info")}
    metadata["transformer_course"] = {"exercise_version_of": f"book/{src.name}", "fingerprint": fingerprint(cells)}
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--book", type=Path, default=ROOT / "book", help="folder of the chapters")
    parser.add_argument("--out", type=Path, default=ROOT / "exercises", help="where to write (default: exercises/)")
    parser.add_argument("--force", action="store_true", help="overwrite notebooks even if you edited them")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for src in sorted(args.book.glob("[0-9][0-9]_*.ipynb")):
        dst = args.out / src.name
        text = json.dumps(render(src), ensure_ascii=False, indent=1) + "\n"
        if dst.exists() and dst.read_text(encoding="utf-8") == text:
            print(f"unchanged  {dst}")
        elif learner_edited(dst) and not args.force:
            print(f"kept       {dst}: you have edited it; move it away or use --force to replace it")
        else:
            dst.write_text(text, encoding="utf-8")
            print(f"written    {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
