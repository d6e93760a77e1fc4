"""The exercise version of every chapter runs top to bottom, twice in one kernel ("Run All" twice, as a
learner does): every check cell says 尚未完成 both times, and the chapter's checked cells before the
first exercise print exactly what the stored chapter printed, in both runs. The second run is where
leftover state (an exhausted generator, a mutated global, an unseeded draw) would show. The full chapter's
own fresh run is ``make book``'s, compared with the stored outputs in ``test_fresh_build.py``."""
import pytest

import make_exercises
from common import chapters
from conftest import run_all_repeatedly
from transformer_course.exercises._core import NOT_DONE

nbformat = pytest.importorskip("nbformat")

MARK = "# NBVAL_CHECK_OUTPUT"


def _check_outputs(cells) -> list[str]:
    return ["".join(o.get("text", "") for o in c.outputs) for c in cells
            if c.cell_type == "code" and "tc.exercises." in c.source]


def _checked(cells, before_first_stub: bool) -> dict[str, str]:
    """Source -> printed text of the checked cells (in an exercise version: those before its first stub)."""
    code = [c for c in cells if c.cell_type == "code"]
    first = next((i for i, c in enumerate(code) if make_exercises.STUB in c.source), len(code))

    def text(o) -> str:
        if o.output_type == "stream":
            return o.text if o.name == "stdout" else ""
        return "".join(o.get("data", {}).get("text/plain", ""))
    return {c.source: "".join(text(o) for o in c.outputs) for c in (code[:first] if before_first_stub else code)
            if c.source.lstrip().startswith(MARK)}


@pytest.mark.parametrize("chapter", chapters(), ids=lambda p: p.stem)
def test_exercise_version_runs_twice_and_reports_not_done(chapter, tmp_path):
    stored = _checked(nbformat.read(chapter, as_version=4).cells, before_first_stub=False)
    nb = nbformat.from_dict(make_exercises.render(chapter))
    stubs = [c for c in nb.cells if c.cell_type == "code" and make_exercises.STUB in c.source]
    assert len(stubs) >= 3 or chapter.stem.startswith("13_"), "at least three coding exercises"
    for run in run_all_repeatedly(nb, tmp_path, runs=2):
        checks = _check_outputs(nb.cells)
        assert checks, "no check cells"
        for text in checks:
            assert NOT_DONE in text and text.count("\n") == 1, (run, text)
        got = _checked(nb.cells, before_first_stub=True)
        common = got.keys() & stored.keys()  # cells the exercise version keeps as the chapter has them
        assert common, "the exercise version keeps the chapter's checked cells"
        differ = {src.splitlines()[1][:60]: (stored[src], got[src]) for src in common if got[src] != stored[src]}
        assert not differ, f"run {run}: checked cells differ from the stored outputs: {differ}"
