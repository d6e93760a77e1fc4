"""Every chapter, as a reader runs it: "Run All" twice in one kernel without an error, and the checked
outputs (cells marked ``# NBVAL_CHECK_OUTPUT``) identical in both runs and equal to the stored ones,
which came from another fresh run (``make execute``). nbval checks one fresh run; this adds the second
run in the same kernel, where leftover state (an exhausted generator, a mutated global, an unseeded
draw) would show."""
import pytest

import notebook_setup
from conftest import run_all_repeatedly

nbformat = pytest.importorskip("nbformat")

MARK = "# NBVAL_CHECK_OUTPUT"


def checked_outputs(nb) -> dict[int, str]:
    """Cell index -> the text a checked cell printed or returned (what nbval compares)."""
    def text(output) -> str:
        if output.output_type == "stream":
            return output.text if output.name == "stdout" else ""
        return output.get("data", {}).get("text/plain", "")
    return {i: "".join(text(o) for o in c.outputs) for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and c.source.lstrip().startswith(MARK)}


@pytest.mark.parametrize("chapter", notebook_setup.chapters(), ids=lambda p: p.stem)
def test_chapter_runs_twice_with_identical_checked_outputs(chapter, tmp_path):
    stored = checked_outputs(nbformat.read(chapter, as_version=4))
    assert stored, "a chapter asserts and prints its claims in checked cells"
    nb = nbformat.read(chapter, as_version=4)
    for run in run_all_repeatedly(nb, tmp_path, runs=2):
        got = checked_outputs(nb)
        differ = {i: (stored[i], got[i]) for i in stored if got[i] != stored[i]}
        assert not differ, f"run {run}: checked cells differ from the stored outputs: {differ}"
