"""Count, for every exercise, the wrong attempts tried on its checker and how many got the right verdict.

    python tools/exercise_report.py          # writes docs/exercise-catalogue.md, prints the slowest verdict

The attempts are the catalogue in ``tools/wrong_attempts.py``: the generic ones (crashes, endless
loops even inside ``try/except``, odd return types, side effects, state kept between calls, ...),
the exercise's own typical mistakes and the shortcuts its statement forbids. ``tests/test_exercises.py``
asserts every verdict and that the committed table is what this script writes.
"""
from __future__ import annotations

import sys
from collections.abc import Callable

import transformer_course.exercises as ex
from transformer_course.exercises._core import Exercise

from common import ROOT
from wrong_attempts import GENERIC, Outcome, attempts, generic_attempts, shortcuts, try_attempt

OUT = ROOT / "docs" / "exercise-catalogue.md"
HEADER = """# Wrong attempts tried on every exercise checker

Written by `python tools/exercise_report.py`; `tests/test_exercises.py` checks that this table is
current. "Rejected" counts attempts whose verdict failed them with the expected Chinese message.

Generic attempts ({n_generic}, built from each exercise's reference; "generic" counts those that apply):

{generic}

Own mistakes: the exercise's typical conceptual mistakes (including off-by-one formulas and
numerically naive versions: exp without subtracting the max, E[x²] − E[x]², log of a softmax), each
of which must get its own hint; a hint is given only when the answer matches that mistake on every
case. Shortcuts: what the statement forbids (a named torch function, the course package, indexing,
Python loops, a T×T matrix), each of which must get the rule's reason.

"""

CLASSES = {  # what each group of generic attempts checks, for the header
    "crashes": ["not done", "raises", "SystemExit", "not callable"],
    "never finishing": ["endless loop", "timeout swallowed by except Exception",
                        "timeout swallowed by except BaseException"],
    "odd return values": ["returns None", "list", "NumPy array", "sparse tensor", "list of tensors", "tensor subclass",
                          "dict", "generator", "Python float", "wrong shape", "wrong dtype",
                          "float32 where float64 is asked", "wrong device", "NaN", "0.1% off", "one integer off",
                          "int32 where int64 is asked", "one entry flipped"],
    "side effects": ["in place", "requires_grad on an input", "changes the default dtype", "turns grad mode off",
                     "edits a module's weights", "freezes a module", "switches a module's train/eval mode"],
    "no gradient where training needs one": ["computed under no_grad"],
    "state kept between calls": ["first answer forever", "cached by the inputs' shapes"],
}


def header() -> str:
    """The catalogue's header: every generic attempt, by class."""
    assert sorted(n for names in CLASSES.values() for n in names) == sorted(GENERIC), "classify every attempt"
    generic = "\n".join(f"- {cls}: {', '.join(names)}" for cls, names in CLASSES.items())
    return HEADER.format(n_generic=len(GENERIC), generic=generic)


def try_all(exercise: Exercise) -> list[Outcome]:
    """Every attempt of the catalogue on ``exercise``'s checker."""
    return [try_attempt(exercise, *attempt) for attempt in attempts(exercise)]


Row = tuple[str, str, int, int, int, int, float]


def rows(outcomes_of: Callable[[Exercise], list[Outcome]] = try_all) -> list[Row]:
    """``(chapter, exercise, generic, own mistakes, shortcuts, rejected, slowest verdict s)`` per exercise;
    ``outcomes_of(exercise)`` gives the outcomes of its attempts (by default: try them all now)."""
    result = []
    for chapter in ex.CHAPTERS:
        for exercise in getattr(ex, chapter).EXERCISES:
            outcomes = outcomes_of(exercise)
            for o in outcomes:
                if not o.rejected:
                    print(f"NOT REJECTED {exercise.name} {o.label}: {o.message}", file=sys.stderr)
            result.append((chapter, exercise.name, len(generic_attempts(exercise)), len(exercise.mistakes),
                           len(shortcuts(exercise)), sum(o.rejected for o in outcomes),
                           max((o.seconds for o in outcomes), default=0.0)))
    return result


def table(rows: list[tuple]) -> str:
    """The Markdown table (without the timing column, which varies from run to run)."""
    lines = ["| chapter | exercise | generic | own mistakes | shortcuts | tried | rejected |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {c} | `{name}` | {g} | {m} | {s} | {g + m + s} | {r} |" for c, name, g, m, s, r, _ in rows]
    tried, rejected = sum(g + m + s for _, _, g, m, s, _, _ in rows), sum(r[5] for r in rows)
    lines.append(f"| **all** | **{len(rows)} exercises** | | | | **{tried}** | **{rejected}** |")
    return "\n".join(lines) + "\n"


def main() -> int:
    found = rows()
    OUT.write_text(header() + table(found), encoding="utf-8")
    slowest = max(found, key=lambda r: r[6])
    print(f"wrote {OUT.relative_to(ROOT)}; slowest verdict {slowest[6]:.2f} s ({slowest[1]}, "
          f"attempts that never finish are cut off after 0.5 s)")
    return 0 if all(r[5] == r[2] + r[3] + r[4] for r in found) else 1


if __name__ == "__main__":
    sys.exit(main())
