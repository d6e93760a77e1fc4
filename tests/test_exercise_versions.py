"""The exercise version of every chapter runs top to bottom, twice in one kernel ("Run All" twice,
as a learner does), and every check cell says 尚未完成 both times."""
import pytest

import make_exercises
import notebook_setup
from conftest import run_all_repeatedly
from transformer_course.exercises._core import NOT_DONE

nbformat = pytest.importorskip("nbformat")


def _check_outputs(cells) -> list[str]:
    return ["".join(o.get("text", "") for o in c.outputs) for c in cells
            if c.cell_type == "code" and "tc.exercises." in c.source]


@pytest.mark.parametrize("chapter", notebook_setup.chapters(), ids=lambda p: p.stem)
def test_exercise_version_runs_twice_and_reports_not_done(chapter, tmp_path):
    nb = nbformat.from_dict(make_exercises.render(chapter))
    stubs = [c for c in nb.cells if c.cell_type == "code" and make_exercises.STUB in c.source]
    assert len(stubs) >= 3 or chapter.stem.startswith("13_"), "at least three coding exercises"
    for run in run_all_repeatedly(nb, tmp_path, runs=2):
        checks = _check_outputs(nb.cells)
        assert checks, "no check cells"
        for text in checks:
            assert NOT_DONE in text and text.count("\n") == 1, (run, text)
