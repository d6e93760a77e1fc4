"""The book a reader builds is the book the repository stores.

``make book`` executes every chapter; myst-nb writes each executed notebook to
``_build/jupyter_execute/book/``. ``make test`` runs ``make book`` first, and the tests here compare that
one fresh execution with the stored chapters (``book/*.ipynb``): the same outputs per cell in kind and
order as the page shows them (stdout, stderr, display, figure), no empty output anywhere, every captioned
figure cell with exactly one image, every figure label in the built page once and with its picture, and
the checked cells (``# NBVAL_CHECK_OUTPUT``) printing the same text. Without a fresh build these tests skip, unless
``TC_REQUIRE_FRESH_BUILD=1`` (set by ``make test``) makes that a failure. The stored notebooks are checked
for empty outputs whether or not a build is there.
"""
import os
import re
from pathlib import Path

import pytest

from common import chapters
from conftest import ROOT
from sphinx_course import merge_streams

nbformat = pytest.importorskip("nbformat")

BUILD = Path(os.environ.get("TC_FRESH_BUILD", ROOT / "_build"))
MARK = "# NBVAL_CHECK_OUTPUT"
CHAPTERS = chapters()


def as_shown(outputs: list) -> list:
    """The outputs as the book shows them (``sphinx_course.merge_streams``, which the build uses): how the
    kernel split a cell's prints into messages is not the book's."""
    return merge_streams(outputs)


def kind(output) -> str:
    """``stdout``, ``stderr``, ``figure`` (an image), ``display`` (anything else shown) or ``error``."""
    if output.output_type == "stream":
        return output.name
    if output.output_type == "error":
        return "error"
    return "figure" if any(m.startswith("image/") for m in output.get("data", {})) else "display"


def is_empty(output) -> bool:
    """What the page would show as an empty box: blank text and nothing else."""
    if output.output_type == "stream":
        return not output.text.strip()
    data = output.get("data", {})
    return set(data) <= {"text/plain"} and not "".join(data.get("text/plain", "")).strip()


def checked_text(cell) -> str:
    """What a checked cell printed or returned, as the book shows it."""
    def text(o) -> str:
        if o.output_type == "stream":
            return o.text if o.name == "stdout" else ""
        return "".join(o.get("data", {}).get("text/plain", ""))
    return "".join(text(o) for o in as_shown(cell.outputs))


def checked_outputs(nb) -> dict[int, str]:
    """Cell index -> what each checked cell printed or returned."""
    return {i: checked_text(c) for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and c.source.lstrip().startswith(MARK)}


def fresh(chapter: Path):
    """The chapter as ``make book`` last executed it; skips (or fails under TC_REQUIRE_FRESH_BUILD=1)
    where there is no build, fails where the build is older than the chapter's code."""
    path = BUILD / "jupyter_execute" / "book" / chapter.name
    if not path.exists():
        if os.environ.get("TC_REQUIRE_FRESH_BUILD") == "1":
            pytest.fail(f"no fresh build of {chapter.name} in {BUILD}: run make book")
        pytest.skip("no fresh build: run make book first (make test does)")
    nb = nbformat.read(path, as_version=4)
    stored = nbformat.read(chapter, as_version=4)
    code = lambda n: [c.source for c in n.cells if c.cell_type == "code"]  # noqa: E731
    assert code(nb) == code(stored), f"{path} was built from other code than {chapter}: run make book again"
    return nb, stored


def test_the_books_merge_joins_a_cells_prints_exactly_and_leaves_the_notebook_alone():
    v4 = nbformat.v4
    outputs = [v4.new_output("stream", name="stdout", text="44 merges:"), v4.new_output("display_data", data={
        "text/plain": "x"}), v4.new_output("stream", name="stdout", text=" True\n"),
        v4.new_output("stream", name="stdout", text="step 1\rstep 2, ab\x08c\n")]
    shown = as_shown(outputs)
    assert [kind(o) for o in shown] == ["stdout", "display"]
    assert shown[0].text == "44 merges: True\nstep 2, ac\n"      # myst-nb's own merge gave "merges:\n True"
    assert outputs[0].text == "44 merges:" and len(outputs) == 4  # ... and changed the notebook in place


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_no_stored_output_is_empty(chapter):
    nb = nbformat.read(chapter, as_version=4)
    empty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" for o in as_shown(c.outputs) if is_empty(o)]
    assert not empty, f"cells {empty} store an empty output: the page shows it as an empty grey box"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_fresh_execution_equals_the_stored_chapter(chapter):
    nb, stored = fresh(chapter)
    differ, empty, figures = [], [], []
    for i, (new, old) in enumerate(zip(nb.cells, stored.cells)):
        if new.cell_type != "code":
            continue
        got, want = [kind(o) for o in as_shown(new.outputs)], [kind(o) for o in as_shown(old.outputs)]
        if got != want:
            differ.append(f"cell {i}: fresh {got}, stored {want}")
        empty += [i for o in as_shown(new.outputs) if is_empty(o)]
        if "figure" in new.metadata.get("mystnb", {}):  # the caption goes to the first display output
            shown = [kind(o) for o in new.outputs if kind(o) in ("figure", "display")]
            if shown != ["figure"]:
                figures.append(f"cell {i} ({new.metadata.mystnb.figure.name}): {shown}")
        if new.source.lstrip().startswith(MARK) and checked_text(new) != checked_text(old):
            differ.append(f"cell {i} (checked): fresh {checked_text(new)!r}, stored {checked_text(old)!r}")
    assert not differ, "the fresh build differs from the stored chapter:\n" + "\n".join(differ)
    assert not empty, f"cells {empty} left an empty output in the fresh build"
    assert not figures, "captioned cells must show exactly one picture:\n" + "\n".join(figures)


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_every_figure_label_is_one_picture_in_the_built_page(chapter):
    fresh(chapter)
    page = (BUILD / "html" / "book" / f"{chapter.stem}.html").read_text(encoding="utf-8")
    nb = nbformat.read(chapter, as_version=4)
    labels = [c.metadata["mystnb"]["figure"]["name"] for c in nb.cells
              if "figure" in c.metadata.get("mystnb", {})]
    for label in labels:
        assert page.count(f'id="{label}"') == 1, f"{label}: not exactly one target in the page"
        figure = re.search(rf'<figure[^>]*id="{label}".*?</figure>', page, flags=re.S)
        assert figure and "<img" in figure[0], f"{label}: its figure holds no picture"
