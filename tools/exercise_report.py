"""Count, for every exercise, the wrong attempts tried on its checker and how many got the right verdict.

    python tools/exercise_report.py          # writes docs/exercise-catalogue.md, prints the slowest verdict

The attempts are the catalogue in ``tests/wrong_attempts.py``: the generic ones (not done, raising,
None, wrong type/shape/dtype/device, NaN, in-place edits, not a function, an endless loop) and the
exercise's own typical mistakes. ``tests/test_exercises.py`` asserts every verdict and that the
committed table is what this script writes.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import transformer_course.exercises as ex  # noqa: E402
from wrong_attempts import GENERIC, attempts, try_attempt  # noqa: E402

OUT = ROOT / "docs" / "exercise-catalogue.md"
HEADER = """# Wrong attempts tried on every exercise checker

Written by `python tools/exercise_report.py`; `tests/test_exercises.py` checks that this table is
current. Generic attempts ({n_generic}): {generic}. Own mistakes: the exercise's typical conceptual
mistakes, each of which must get its own hint. "Rejected" counts attempts whose verdict failed them
with the expected Chinese message.

"""


def rows(run: bool = True) -> list[tuple[str, str, int, int, int, float]]:
    """``(chapter, exercise, generic tried, own mistakes tried, rejected, slowest verdict s)`` per exercise.

    ``run=False`` counts without trying (every attempt rejected, no time): what the table must say when
    ``tests/test_exercises.py`` has already tried each attempt on its own."""
    result = []
    for chapter in ex.CHAPTERS:
        for exercise in getattr(ex, chapter).EXERCISES:
            tried = attempts(exercise)
            outcomes = [try_attempt(exercise, *attempt) for attempt in tried] if run else []
            rejected = sum(o.rejected for o in outcomes) if run else len(tried)
            result.append((chapter, exercise.name, len(GENERIC), len(exercise.mistakes), rejected,
                           max((o.seconds for o in outcomes), default=0.0)))
    return result


def table(rows: list[tuple]) -> str:
    """The Markdown table (without the timing column, which varies from run to run)."""
    lines = ["| chapter | exercise | generic | own mistakes | tried | rejected |", "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {c} | `{name}` | {g} | {m} | {g + m} | {r} |" for c, name, g, m, r, _ in rows]
    tried, rejected = sum(g + m for _, _, g, m, _, _ in rows), sum(r[4] for r in rows)
    lines.append(f"| **all** | **{len(rows)} exercises** | | | **{tried}** | **{rejected}** |")
    return "\n".join(lines) + "\n"


def main() -> int:
    found = rows()
    OUT.write_text(HEADER.format(n_generic=len(GENERIC), generic=", ".join(GENERIC)) + table(found), encoding="utf-8")
    slowest = max(found, key=lambda r: r[5])
    print(f"wrote {OUT.relative_to(ROOT)}; slowest verdict {slowest[5]:.2f} s ({slowest[1]}, "
          "the endless loop is cut off after 0.5 s per case)")
    return 0 if all(r[4] == r[2] + r[3] for r in found) else 1


if __name__ == "__main__":
    sys.exit(main())
