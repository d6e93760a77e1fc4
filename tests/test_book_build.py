"""The book builds with zero Sphinx warnings (-W), from the outputs stored in the chapters.

``make book`` executes every chapter; here the stored outputs are rendered instead, because nbval
and the exercise-version tests already execute every chapter (see docs/CONTRIBUTING.md).
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from conftest import ROOT


def test_book_builds_without_warnings(tmp_path):
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    config["execute"]["execute_notebooks"] = "off"
    extensions = config["sphinx"]["local_extensions"]  # paths there are relative to the config file
    config["sphinx"]["local_extensions"] = {name: str(ROOT / path) for name, path in extensions.items()}
    cfg = tmp_path / "_config.yml"
    cfg.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    jb = shutil.which("jupyter-book", path=str(Path(sys.executable).parent))
    result = subprocess.run(
        [jb, "build", "--all", "-W", "-n", "--keep-going", "--config", str(cfg), "--path-output", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=600,
    )
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    html = tmp_path / "_build" / "html"
    assert (html / "index.html").exists()
    for chapter in (ROOT / "book").glob("[0-9][0-9]_*.ipynb"):
        page = (html / "book" / f"{chapter.stem}.html").read_text(encoding="utf-8")
        assert "colab.research.google.com" in page           # the launch button
        assert "NBVAL_CHECK_OUTPUT" in page                  # executed code is shown
    index = (html / "searchindex.js").read_text(encoding="utf-8")
    assert json.dumps("注意力")[1:-1] in index  # jieba segmented the Chinese text: search finds words
