"""The notebooks a reader opens on Colab or in Jupyter: exercises/ (solutions stubbed) and colab/ (the
full chapters, where the book's Colab button leads) are up to date with book/, hold the book's setup
cell, and show no MyST syntax, neither in their source nor once a plain Markdown renderer has made
HTML of them (markdown-it-py in CommonMark mode with tables and raw HTML, as Jupyter and Colab render
Markdown)."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import make_exercises
import notebook_setup
from common import chapters
from conftest import ROOT
from myst_markdown import (SOLUTION_NOTE, SOLUTION_TITLE, Context, collect_labels, myst_to_markdown,
                           read_bibliography)

MarkdownIt = pytest.importorskip("markdown_it").MarkdownIt

CHAPTERS = chapters()
FOLDERS = ("exercises", "colab")

# What MyST syntax looks like; none of it may reach a notebook's Markdown outside code.
MYST = [re.compile(p, re.MULTILINE) for p in (
    r"^\s*\([^()\s]+\)=\s*$",         # (label)= target
    r"```\s*\{",                       # ```{directive}
    r"~~~\s*\{",
    r":::",                            # colon fence
    r"\{[\w:-]+\}`",                   # {role}`...`
    r"\{\{",                           # {{ substitution }}
    r"^\s*:(label|class|nonumber|name|dropdown):",  # directive options
    r"\{(exercise|solution|solution-start|solution-end|admonition|ref|numref|doc)\}",
    r"\$\$[ \t]*\([^()\s]+\)[ \t]*$",  # $$ ... $$ (label)
    r"\\label\{",
)]
CODE = re.compile(r"^ {0,3}(`{3,}|~{3,})[^`\n]*\n.*?^ {0,3}\1[`~]*\s*$|(`+)(?!`).+?(?<!`)\2(?!`)",
                  re.MULTILINE | re.DOTALL)


def markdown_cells(nb: dict) -> list[str]:
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]


def myst_left(text: str) -> list[str]:
    """The pieces of MyST syntax in ``text``."""
    return [m.group(0) for pattern in MYST for m in pattern.finditer(text)]


def renderer() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """Fresh output of ``make exercises``: ``{folder: {chapter name: notebook text}}``."""
    out = tmp_path_factory.mktemp("generated")
    make_exercises.main(["--out", str(out / "exercises")])
    return {folder: {c.name: (out / folder / c.name).read_text(encoding="utf-8") for c in CHAPTERS}
            for folder in FOLDERS}


@pytest.mark.parametrize("folder", FOLDERS)
def test_committed_notebooks_are_up_to_date(generated, folder):
    for chapter in CHAPTERS:
        committed = ROOT / folder / chapter.name
        assert committed.exists() and committed.read_text(encoding="utf-8") == generated[folder][chapter.name], \
            f"run `make exercises` and commit {folder}/{chapter.name}"
    names = {p.name for p in (ROOT / folder).glob("*.ipynb")}
    assert names == {c.name for c in CHAPTERS}, "a notebook there has no chapter"


@pytest.mark.parametrize("folder", FOLDERS)
def test_notebooks_hold_no_myst_syntax_and_the_books_setup_cell(folder):
    for chapter in CHAPTERS:
        book = json.loads(chapter.read_text(encoding="utf-8"))
        nb = json.loads((ROOT / folder / chapter.name).read_text(encoding="utf-8"))
        for i, text in enumerate(markdown_cells(nb)):
            assert not myst_left(CODE.sub("", text)), f"{folder}/{chapter.name} markdown cell {i}"
        index = notebook_setup.setup_cell_index(nb)
        assert index == notebook_setup.setup_cell_index(book) == 1
        assert nb["cells"][index]["source"] == "".join(book["cells"][index]["source"])
        assert nb["cells"][index]["metadata"]["tags"] == book["cells"][index]["metadata"]["tags"]
        assert all(c.get("outputs", []) == [] for c in nb["cells"])
        code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
        assert any(make_exercises.BEGIN in s for s in code) == (folder == "colab")


def _count(pattern: str, texts: list[str]) -> int:
    return sum(len(re.findall(pattern, t, re.MULTILINE)) for t in texts)


@pytest.mark.parametrize("folder", FOLDERS)
def test_plain_markdown_renders_callouts_exercises_and_answers_without_myst(folder):
    md = renderer()
    for chapter in CHAPTERS:
        book = markdown_cells(json.loads(chapter.read_text(encoding="utf-8")))
        nb = json.loads((ROOT / folder / chapter.name).read_text(encoding="utf-8"))
        html = "\n".join(md.render(text) for text in markdown_cells(nb))
        visible = re.sub(r"<pre>.*?</pre>|<code>.*?</code>", "", html, flags=re.DOTALL)
        assert not myst_left(visible), f"{folder}/{chapter.name}: {myst_left(visible)[:3]}"
        # every admonition a blockquote whose first line is its bold title; a folded one (the hints
        # after an exercise) folded here too
        folded = len(re.findall(r"^:::\{admonition\}[^\n]*\n:class: dropdown", "\n".join(book), re.MULTILINE))
        admonitions = _count(r"^:::\{admonition\}", book) - folded
        assert len(re.findall(r"<blockquote>\n<p><strong>[⚠ℹ] ", html)) == admonitions, chapter.name
        hints = html.count("<details><summary>提示：")
        assert hints == folded, chapter.name
        # every exercise a heading, numbered as in the book (练习 3.1, 3.2 …) unless :nonumber:
        numbered = _count(r"^```\{exercise\}", book) - _count(r"^:nonumber:", book)
        numbers = re.findall(r"<h[3-6]>练习 (\d+\.\d+)", html)
        assert numbers == [f"{int(chapter.name[:2])}.{n}" for n in range(1, numbered + 1)], chapter.name
        answers = _count(r"^```\{solution\}", book)
        gates = _count(r"^```\{solution-start\}", book)
        if folder == "colab":  # written answers folded, code answers under a heading
            assert html.count(f"<details><summary>{SOLUTION_TITLE}</summary>") == answers
            assert html.count("</details>") == answers + hints
            assert len(re.findall(rf"<h[4-6]>{SOLUTION_TITLE}</h[4-6]>", html)) == gates
        else:
            assert html.count(md.renderInline(SOLUTION_NOTE)) == answers
            assert html.count("<details>") == hints and f">{SOLUTION_TITLE}</h" not in html


def test_links_to_colab_are_resolved_to_this_repository():
    colab = make_exercises.substitutions()["colab"]
    repo = notebook_setup.repo_url()
    assert make_exercises.substitutions()["repo"] == repo  # read without yaml, same as with it
    branch = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["repository"]["branch"]
    assert colab == f"https://colab.research.google.com/github/{repo.split('github.com/')[1]}/blob/{branch}"
    for chapter in CHAPTERS:
        text = "".join(markdown_cells(json.loads((ROOT / "colab" / chapter.name).read_text(encoding="utf-8"))))
        if "{{" in "".join(markdown_cells(json.loads(chapter.read_text(encoding="utf-8")))):
            assert f"]({colab}/exercises/{chapter.name})" in text, chapter.name


CONTEXT = {"colab": "https://colab.example/blob/main", "repo": "https://github.com/a/b"}
LABELS = collect_labels({
    "01_a": "(ch-a)=\n# 第 1 章　甲\n\n(sec-a)=\n## 1.1 小节\n\n```{exercise} 写一个\n:label: ex-a\n```\n"
            "```{exercise} 测验\n:label: q-a\n:nonumber:\n```\n```{exercise}\n:label: ex-b\n```\n",
    "appendix_b": "# 附录 B　环境\n"})


@pytest.mark.parametrize("myst, markdown", [
    ("(ch-a)=\n# 第 1 章　甲", "# 第 1 章　甲"),
    ("见 {ref}`ch-a`、{ref}`这一节 <sec-a>`、{numref}`ex-a` 与 {ref}`ex-b`",
     "见 第 1 章　甲、这一节、练习 1.1（写一个） 与 练习 1.2"),
    ("{ref}`q-a`，{doc}`../book/appendix_b`，{doc}`附录 <appendix_b>`", "测验，附录 B　环境，附录"),
    ("{math}`x^2`、{sub}`2`、{kbd}`Ctrl`、{abbr}`LLM (large language model)`、{term}`词表 <vocab>`",
     "$x^2$、<sub>2</sub>、<kbd>Ctrl</kbd>、LLM (large language model)、词表"),
    ("{{ '[打开](' ~ colab ~ \"/x.ipynb)\" }} 与 {{repo}}",
     "[打开](https://colab.example/blob/main/x.ipynb) 与 https://github.com/a/b"),
    ("`{ref}` 与 `` {{ x }} `` 原样", "`{ref}` 与 `` {{ x }} `` 原样"),
    ("```python\n:::{note}\n{ref}`x`\n```", "```python\n:::{note}\n{ref}`x`\n```"),
    ("$$\ny = 1 \\label{eq-y}\n$$ (eq-y)", "$$\ny = 1 \n$$"),
    ("$$ a = {b}` $$ (eq)", "$$ a = {b}` $$"),
    ("```{math}\n:label: m\na^2\n```", "$$\na^2\n$$"),
    ("## 练习\n\n```{exercise} 甲\n:label: x\n\n正文 {ref}`sec-a`\n```\n"
     "```{exercise} 乙\n:label: y\n:nonumber:\n```",
     "## 练习\n\n### 练习 1　甲\n\n正文 1.1 小节\n\n### 乙"),
    (":::{admonition} 「误区」\n:class: warning\n第一行\n\n- 一项\n:::\n接着",
     "> **⚠ 「误区」**\n>\n> 第一行\n>\n> - 一项\n\n接着"),
    ("::::{note}\n:::{tip} 小提示\n内层\n:::\n::::", "> **ℹ 注意**\n>\n> > **ℹ 小提示**\n> >\n> > 内层"),
    (":::{admonition} 提示\n:class: dropdown tip\n检查器认得 `a`\n:::",
     "<details><summary>提示</summary>\n\n检查器认得 `a`\n\n</details>"),
    ("## 练习\n\n```{solution-start} x\n:class: dropdown\n```", "## 练习\n\n#### 解答"),
    ("```{solution-end}\n```", ""),
    ("```{solution} x\n:class: dropdown\n\n答案 $a$\n```",
     "<details><summary>解答</summary>\n\n答案 $a$\n\n</details>"),
])
def test_myst_to_markdown_converts_each_construct(myst, markdown):
    assert myst_to_markdown(myst, Context(CONTEXT, LABELS)) == markdown


def test_exercise_version_points_to_the_book_for_written_answers_and_drops_gates():
    ctx = Context(CONTEXT, LABELS, solutions=False)
    assert myst_to_markdown("```{solution} x\n:class: dropdown\n\n答案\n```", ctx) == SOLUTION_NOTE
    assert myst_to_markdown("```{solution-start} x\n:class: dropdown\n```", ctx) == ""


BIB = """% a comment line, then entries as references.bib writes them
@inproceedings{xiong2020layer,
  author    = {Xiong, Ruibin and Yang, Yunchang and He, Di},
  title     = {{On Layer Normalization in the Transformer Architecture}},
  year      = {2020},
  url       = {https://arxiv.org/abs/2002.04745}
}
@article{zhang2019root, author = {Zhang, Biao and Sennrich, Rico},
  title = "Root Mean Square {Layer} Normalization", year = 2019, url = {https://arxiv.org/abs/1910.07467}}
@article{shazeer2020glu, author = {Noam Shazeer}, title = {{GLU} Variants}, year = {2020},
  url = {https://arxiv.org/abs/2002.05202}}
@article{gemma2024gemma2, author = {{Gemma Team}}, title = {{Gemma 2}}, year = {2024},
  url = {https://arxiv.org/abs/2408.00118}}
@article{olsson2022context, author = {Olsson, Catherine and Elhage, Nelson and others}, title = {{In-context}},
  year = {2022}, url = {https://transformer-circuits.pub/x}}
"""


@pytest.mark.parametrize("myst, markdown", [
    ("文献中的说法{cite:p}`xiong2020layer`是",
     "文献中的说法（[Xiong 等，2020](https://arxiv.org/abs/2002.04745)）是"),
    ("{cite}`zhang2019root`", "（[Zhang 与 Sennrich，2019](https://arxiv.org/abs/1910.07467)）"),
    ("{cite:t}`shazeer2020glu`写道", "Shazeer（[2020](https://arxiv.org/abs/2002.05202)）写道"),
    ("都这样做{cite:p}`gemma2024gemma2, olsson2022context`。",
     "都这样做（[Gemma Team，2024](https://arxiv.org/abs/2408.00118)；"
     "[Olsson 等，2022](https://transformer-circuits.pub/x)）。"),
    ("`{cite:p}`x`` 原样", "`{cite:p}`x`` 原样"),
])
def test_citations_become_author_year_links(tmp_path, myst, markdown):
    """``{cite:p}``/``{cite}`` and ``{cite:t}`` read as the book renders them (tools/sphinx_course.py's
    ``author_year_zh``), with the entry's url as the link; an unknown key is an error."""
    bib = tmp_path / "refs.bib"
    bib.write_text(BIB, encoding="utf-8")
    ctx = Context(CONTEXT, LABELS, bibliography=bib)
    assert myst_to_markdown(myst, ctx) == markdown
    with pytest.raises(ValueError, match="no entry 'nobody1999'"):
        myst_to_markdown("{cite:p}`xiong2020layer,nobody1999`", ctx)
    bib.write_text(BIB.replace("Elhage, Nelson and others", "others"), encoding="utf-8")
    with pytest.raises(ValueError, match="^refs.bib: entry 'olsson2022context': "
                                         "list at least two names before `and others`$"):
        read_bibliography(bib)


def test_two_entries_that_would_read_the_same_get_a_and_b(tmp_path):
    twin = BIB.replace("@inproceedings{xiong2020layer,", "@inproceedings{xiong2020b,") + BIB.split("@article")[0]
    (tmp_path / "refs.bib").write_text(twin, encoding="utf-8")
    ctx = Context(CONTEXT, LABELS, bibliography=tmp_path / "refs.bib")
    assert myst_to_markdown("{cite:p}`xiong2020layer`，{cite:t}`xiong2020b`", ctx) == (
        "（[Xiong 等，2020b](https://arxiv.org/abs/2002.04745)），Xiong 等（[2020a](https://arxiv.org/abs/2002.04745)）")


def test_every_bibliography_entry_has_authors_a_year_and_a_url():
    entries = read_bibliography(ROOT / "references.bib")
    assert len(entries) >= 40
    for key, (authors, year, url) in entries.items():
        assert authors and " others" not in authors and re.fullmatch(r"(19|20)\d\d[a-z]?", year), key
        assert url.startswith("https://"), key


@pytest.mark.parametrize("myst", ["```{figure} a.png\n```", "{eq}`x`", "{ref}`no-such-label`",
                                  "{{ unknown }}", "{{ colab | upper }}", ":::\n:::"])
def test_what_it_cannot_convert_is_an_error_not_raw_text(myst):
    with pytest.raises(ValueError):
        myst_to_markdown(myst, Context(CONTEXT, LABELS))


def test_the_books_colab_button_opens_the_colab_version(tmp_path):
    """A one-chapter book built with the course's configuration and Sphinx extension: its Colab
    launch button points at colab/NN_slug.ipynb. (The full book is built in tests/test_book_build.py.)"""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    config["execute"]["execute_notebooks"] = "off"
    config["sphinx"]["local_extensions"] = {"sphinx_course": str(ROOT / "tools")}
    config["sphinx"]["config"].pop("html_extra_path")
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    chapter = CHAPTERS[2].stem
    toc = {"format": "jb-book", "root": "book/intro", "chapters": [{"file": f"book/{chapter}"}]}
    (tmp_path / "_toc.yml").write_text(yaml.safe_dump(toc), encoding="utf-8")
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "intro.md").write_text("# 前言\n", encoding="utf-8")
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": "# 第 3 章　标题\n\n正文"}],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "book" / f"{chapter}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    jb = [str(Path(sys.executable).parent / "jupyter-book"), "build", "--all", str(tmp_path)]
    result = subprocess.run(jb, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    page = (tmp_path / "_build" / "html" / "book" / f"{chapter}.html").read_text(encoding="utf-8")
    colab = make_exercises.substitutions()["colab"]
    launch = re.findall(r'href="(https://colab\.research\.google\.com/[^"]+)"', page)
    assert launch == [f"{colab}/colab/{chapter}.ipynb"], launch
