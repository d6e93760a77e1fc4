"""The book builds with zero Sphinx warnings (-W), from the outputs stored in the chapters.

``make book`` executes every chapter; here the stored outputs are rendered instead, because nbval
and the exercise-version tests already execute every chapter (see docs/CONTRIBUTING.md).
"""
import json

import preview
from conftest import ROOT


def test_book_builds_without_warnings(tmp_path):
    result = preview.build(preview.stored_output_config(tmp_path))
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    html = tmp_path / "_build" / "html"
    assert (html / "index.html").exists()
    for chapter in (ROOT / "book").glob("[0-9][0-9]_*.ipynb"):
        page = (html / "book" / f"{chapter.stem}.html").read_text(encoding="utf-8")
        assert "colab.research.google.com" in page           # the launch button
        assert "NBVAL_CHECK_OUTPUT" in page                  # executed code is shown
        assert "_static/course.css" in page                 # code set to fit 88 columns
    index = (html / "searchindex.js").read_text(encoding="utf-8")
    assert json.dumps("注意力")[1:-1] in index  # jieba segmented the Chinese text: search finds words
