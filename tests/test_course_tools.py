"""The book's conventions: one setup cell from one template, exercise versions in sync and never
clobbering a learner's edits, a table of contents listing only existing chapters, checked cells marked,
code no wider than the page."""
import ast
import json
import re
import shutil

import pytest
import yaml

import make_exercises
import notebook_setup
from common import chapters
from conftest import ROOT

CHAPTERS = chapters()


def test_there_is_a_chapter_and_the_toc_lists_only_existing_files():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = [toc["root"]] + [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert CHAPTERS
    for f in files:
        assert (ROOT / f).with_suffix(".ipynb").exists() or (ROOT / f).with_suffix(".md").exists(), f
    for chapter in CHAPTERS:
        assert f"book/{chapter.stem}" in files, f"{chapter.name} is not in _toc.yml"


def test_every_chapter_starts_with_the_generated_setup_cell():
    assert notebook_setup.main(["--check"]) == 0
    repo = notebook_setup.repo_url()
    for chapter in CHAPTERS:
        nb = json.loads(chapter.read_text(encoding="utf-8"))
        assert notebook_setup.setup_cell_index(nb) == 1  # right after the title cell
        assert sum(repo in "".join(c["source"]) for c in nb["cells"]) == 1  # the address only there


def test_setup_cell_template_follows_config(tmp_path):
    (tmp_path / "_config.yml").write_text("repository:\n  url: https://github.com/a/b/\n")
    assert "git+https://github.com/a/b.git" in notebook_setup.setup_source(tmp_path)


def test_checked_cells_are_marked_and_exercise_checks_are_checked():
    for chapter in CHAPTERS:
        cells = json.loads(chapter.read_text(encoding="utf-8"))["cells"]
        code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        checks = [s for s in code if "tc.exercises." in s]
        solutions = [s for s in code if make_exercises.BEGIN in s]
        assert len(solutions) >= 3 and len(checks) >= len(solutions), chapter.name
        assert all(s.startswith("# NBVAL_CHECK_OUTPUT") for s in checks)
        asserted = [s for s in code if "assert " in s]
        assert all("# NBVAL_CHECK_OUTPUT" in s for s in asserted if "print(" in s), chapter.name
        for c in cells:  # every stored output is free of errors
            assert all(o["output_type"] != "error" for o in c.get("outputs", []))


def test_printed_text_is_english_except_data_and_learner_feedback():
    """docs/design.md, "Language of printed output": a string a chapter prints holds Chinese only as data
    (a word or a short phrase it quotes) or as a hint to the learner (starting with 练习 or 先完成)."""
    for chapter in CHAPTERS:
        for i, cell in enumerate(json.loads(chapter.read_text(encoding="utf-8"))["cells"]):
            if cell["cell_type"] != "code":
                continue
            source = "\n".join(line for line in "".join(cell["source"]).splitlines()
                               if not line.lstrip().startswith(("%", "!")))
            for node in ast.walk(ast.parse(source)):
                if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print"):
                    continue
                for text in (n.value for a in node.args for n in ast.walk(a)
                             if isinstance(n, ast.Constant) and isinstance(n.value, str)):
                    feedback = text.startswith(("练习", "先完成"))
                    long_runs = [run for run in re.findall(r"[\u4e00-\u9fff，。：；！？]+", text) if len(run) > 8]
                    assert feedback or not long_runs, f"{chapter.name} cell {i}: {text!r}"


def test_code_lines_fit_the_page():
    """At most 88 columns: what _static/course.css shows without a scrollbar at 1280 px and up."""
    for chapter in CHAPTERS:
        for i, cell in enumerate(json.loads(chapter.read_text(encoding="utf-8"))["cells"]):
            if cell["cell_type"] == "code":
                long = [line for line in "".join(cell["source"]).splitlines() if len(line) > 88]
                assert not long, f"{chapter.name} cell {i}: {long}"


def test_strip_solutions_keeps_indentation_and_signature():
    src = "def f(x):\n    '''doc'''\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n"
    assert make_exercises.strip_solutions(src) == f"def f(x):\n    '''doc'''\n    {make_exercises.STUB}"
    with pytest.raises(ValueError):
        make_exercises.strip_solutions("### BEGIN SOLUTION\nx = 1\n")


def test_committed_exercise_versions_are_up_to_date(tmp_path):
    make_exercises.main(["--out", str(tmp_path / "exercises")])  # and the full chapters to colab/
    for chapter in CHAPTERS:
        fresh = (tmp_path / "exercises" / chapter.name).read_text(encoding="utf-8")
        committed = ROOT / "exercises" / chapter.name
        assert committed.exists() and committed.read_text(encoding="utf-8") == fresh, \
            f"run `make exercises` and commit exercises/{chapter.name}"
        text = json.loads(fresh)
        sources = "".join("".join(c["source"]) for c in text["cells"])
        assert "SOLUTION" not in sources and "{solution" not in sources
        assert all(c.get("outputs", []) == [] for c in text["cells"])


def test_generation_never_overwrites_a_learners_edit(tmp_path, capsys):
    book = tmp_path / "book"
    book.mkdir()
    shutil.copy(CHAPTERS[0], book / CHAPTERS[0].name)
    out = tmp_path / "ex"
    make_exercises.main(["--book", str(book), "--out", str(out)])
    target = out / CHAPTERS[0].name
    nb = json.loads(target.read_text(encoding="utf-8"))
    nb["cells"][-1]["source"] = "my own answer"
    target.write_text(json.dumps(nb), encoding="utf-8")
    edited = target.read_text(encoding="utf-8")

    make_exercises.main(["--book", str(book), "--out", str(out)])  # the learner runs it again
    assert target.read_text(encoding="utf-8") == edited
    assert re.search(r"kept .*you have edited it", capsys.readouterr().out)
    make_exercises.main(["--book", str(book), "--out", str(out), "--force"])
    assert target.read_text(encoding="utf-8") != edited
