"""The exercise version of every chapter runs top to bottom, and each check says 尚未完成."""
import pytest

import make_exercises
import notebook_setup
from transformer_course.exercises._core import NOT_DONE

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")


@pytest.mark.parametrize("chapter", notebook_setup.chapters(), ids=lambda p: p.stem)
def test_exercise_version_runs_and_reports_not_done(chapter, tmp_path):
    nb = nbformat.from_dict(make_exercises.render(chapter))
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    checks = [c for c in nb.cells if c.cell_type == "code" and "tc.exercises." in c.source]
    stubs = [c for c in nb.cells if c.cell_type == "code" and make_exercises.STUB in c.source]
    assert checks and len(stubs) >= 3
    for cell in checks:
        text = "".join(o.get("text", "") for o in cell.outputs)
        assert NOT_DONE in text and text.count("\n") == 1, text
