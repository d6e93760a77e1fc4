"""tools/ as a maintainer relies on it (tools/__init__.py, docs/howto.md "Adding a tool"): one definition of
which notebooks are chapters, one browser layer, no ``sys.path`` edits outside the shared layer, every tool
importable as ``tools.NAME`` and named in the package's docstring, and ``python tools/NAME.py --help`` working
for the tools that take arguments."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import common
from conftest import ROOT

TOOLS = sorted(p for p in (ROOT / "tools").glob("*.py") if p.name != "__init__.py")
SHARED = {"__init__.py", "common.py"}  # the layer allowed to define the glob, serve pages and edit sys.path
PYTHON_FILES = sorted([*TOOLS, *(ROOT / "tests").glob("*.py"), *(ROOT / "src").rglob("*.py")])


def _tree(path):
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_the_chapter_glob_is_written_once():
    assert common.CHAPTER_GLOB in (ROOT / "tools" / "common.py").read_text(encoding="utf-8")
    elsewhere = [str(p.relative_to(ROOT)) for p in PYTHON_FILES
                 if p.name != "common.py" and common.CHAPTER_GLOB in p.read_text(encoding="utf-8")]
    assert not elsewhere, f"use common.chapters() instead of the glob in {elsewhere}"
    names = [p.name for p in common.chapters()]
    assert len(names) >= 16 and names[0].startswith("01_") and names == sorted(names)


def test_no_tool_edits_sys_path_outside_the_shared_layer():
    """Python puts tools/ on ``sys.path`` for ``python tools/NAME.py``, Jupyter Book for the Sphinx extension,
    pytest (``pythonpath``) for the tests: a tool imports a sibling by its plain name, with no edit."""
    edits = []
    for path in TOOLS:
        if path.name in SHARED:
            continue
        for node in ast.walk(_tree(path)):
            if (isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name)
                    and node.value.id == "sys") or (isinstance(node, ast.Constant) and isinstance(node.value, str)
                                                    and "sys.path." in node.value):
                edits.append(f"{path.name}:{node.lineno}")
    assert not edits, f"use the plain-name imports or common.use_source_tree(): {edits}"


def test_browser_code_lives_in_the_shared_layer():
    """Serving a folder and starting Chromium: ``common.serve``, ``common.chromium``, ``common.webdriver``."""
    own = []
    for path in [*TOOLS, *(ROOT / "tests").glob("*.py")]:
        if path.name in SHARED or path.name == Path(__file__).name:
            continue
        for node in ast.walk(_tree(path)):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "http.server" or n.startswith("selenium.webdriver.chrome") for n in names):
                own.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if isinstance(node, ast.Constant) and node.value == "--headless":  # Chromium started by hand
                own.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not own, f"use tools/common.py's browser layer: {own}"


def test_every_tool_imports_as_a_package_module_and_is_listed():
    names = [p.stem for p in TOOLS]
    code = ("import importlib, sys\n"
            f"for name in {names!r}:\n"
            "    importlib.import_module('tools.' + name)\n"
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
    listing = _tree(ROOT / "tools" / "__init__.py")
    docstring = ast.get_docstring(listing)
    assert not [p.name for p in TOOLS if p.name not in docstring], "name the new tool in tools/__init__.py"


def _cheap_command_line_tools() -> list[str]:
    """Tools with an ``argparse`` command line that import neither torch nor the package at the top."""
    cheap = []
    for path in TOOLS:
        tree = _tree(path)
        heavy = any(isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            n.split(".")[0] in ("torch", "transformer_course", "transformers")
            for n in ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]))
            for node in tree.body)
        if "argparse.ArgumentParser" in ast.unparse(tree) and not heavy:
            cheap.append(path.name)
    return cheap


@pytest.mark.parametrize("tool", _cheap_command_line_tools())
def test_help_runs_from_the_repository_root(tool):
    """``python tools/NAME.py --help`` as the Makefile, README and docs run the tools."""
    out = subprocess.run([sys.executable, f"tools/{tool}", "--help"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("usage:"), out.stderr[-3000:]
