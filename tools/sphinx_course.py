"""Tiny Sphinx extension for the course's book.

- Derives the Colab addresses from the one repository address in _config.yml: adds the MyST substitution
  ``colab`` (e.g. ``https://colab.research.google.com/github/OWNER/REPO/blob/main``), so that a page can
  link to a notebook on Colab with ``{{ '[在 Colab 打开](' ~ colab ~ '/exercises/03_self_attention.ipynb)' }}``.
- Points each chapter's Colab launch button at ``colab/NN_slug.ipynb``, the chapter in plain Markdown
  (written by tools/make_exercises.py), instead of ``book/NN_slug.ipynb``, whose MyST syntax Colab
  would show as raw text.
- Gives the Chinese search a jieba user dictionary of the course's own terms (the glossary's Chinese
  terms and the chapter titles), so that 位置编码 is indexed as a word and not only as 位置 + 编码;
  a query is looked up whole, so without it the book's own titles found nothing.
- Replaces every ipywidgets control in the rendered book by one line saying where it works: a static page
  has no kernel, so a slider there would move and change nothing (the chapters show the slider's
  settings as static figures next to it). In the notebooks (Colab, Jupyter) the widgets stay live.
- Numbers exercises and figures per chapter, 练习 3.1, 3.2 … and 图 3.1, 3.2 … (Sphinx and sphinx-exercise
  number them across the whole book, so that chapter 11 began at 练习 54 while its text says 练习 2), in
  the titles and captions and in every reference.
- Puts the theme strings the themes leave in English (or in Traditional Chinese: 列印) into Simplified
  Chinese, in the written pages (tooltips, screen-reader labels, the search box, the footer).
- Adds each glossary term as an index entry of the chapters the glossary names for it, so that a search
  for a term lands on the chapter that explains it, even where the chapter calls it by its English
  name (旋转位置编码 → chapter 6, which says RoPE).
- Cites author–year, the Chinese way: （Xiong 等，2020） for ``{cite:p}``, Zhang 与 Sennrich（2019） for
  ``{cite:t}``. Registers the reference style ``author_year_zh`` and the bibliography style ``plain_zh``
  (pybtex's ``plain`` whose labels are those same author–year texts, 2023a/2023b where two would be
  equal), named in _config.yml; the text comes from ``myst_markdown``, which writes it into the notebooks.
"""
from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pybtex.plugin
import sphinxcontrib.bibtex.plugin
from docutils import nodes
from pybtex.richtext import Text
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.template import join, node
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinxcontrib.bibtex.style.referencing import BaseReferenceStyle, BracketStyle, GroupReferenceStyle
from sphinxcontrib.bibtex.style.referencing.basic_label import BasicLabelParentheticalReferenceStyle
from sphinxcontrib.bibtex.style.template import join2, post_text, pre_text, reference

from common import chapters
from make_exercises import BEGIN, END, colab_base  # one Colab address and one pair of solution markers
from myst_markdown import CITATION, author_text, citation_labels  # a citation reads the same in the notebooks


def _citation_brackets() -> BracketStyle:
    return BracketStyle(left=CITATION["left"], right=CITATION["right"], sep=CITATION["sep"])


class ChineseAuthorYearLabels(BaseLabelStyle):
    """Each entry's label is its citation, 「Xiong 等，2020」 (``myst_markdown.citation_labels``): the
    reference list shows it, and the citations in the text are made of it, so the two always agree."""

    def format_labels(self, sorted_entries):
        entries = list(sorted_entries)
        cited = {e.key: (author_text([_last_name(p) for p in e.persons.get("author", [])]), e.fields["year"])
                 for e in entries}
        labels = citation_labels(cited)
        return (labels[e.key] for e in entries)


def _last_name(person) -> str:
    """A person's last name as the citation writes it (von part included), braces removed."""
    parts = person.rich_prelast_names + person.rich_last_names
    return " ".join(part.render_as("text") for part in parts)


class ChinesePlainStyle(PlainStyle):
    """pybtex's ``plain`` (sorted by author, year, title) with the labels of ``ChineseAuthorYearLabels``."""

    default_label_style = "author_year_zh"


@node
def _label_part(children, data, part: str):
    """The author part (「Xiong 等」) or the year part (「2020」, 「2023a」) of an entry's label."""
    authors, _, year = data["formatted_entry"].label.rpartition(CITATION["author_year_sep"])
    return Text(authors if part == "authors" else year)


@dataclass
class _TextualByLabel(BaseReferenceStyle):
    """``{cite:t}``: Xiong 等（2020）, the year linked."""

    def role_names(self):
        return [f"{capfirst}t{full}" for capfirst in ("", "c") for full in ("", "s")]

    def outer(self, role_name, children):
        return _citation_brackets().outer(children, brackets=False, capfirst=False)

    def inner(self, role_name):
        return join[
            _label_part(part="authors"),
            CITATION["left"],
            join2(sep1=" ", sep2=CITATION["author_year_sep"])[pre_text, reference[_label_part(part="year")],
                                                               post_text],
            CITATION["right"],
        ]


@dataclass
class ChineseAuthorYearStyle(GroupReferenceStyle):
    """``{cite:p}`` → （Xiong 等，2020）, ``{cite:t}`` → Xiong 等（2020）; several keys joined by ；."""

    def __post_init__(self):
        self.styles.extend([
            BasicLabelParentheticalReferenceStyle(bracket=_citation_brackets(), pre_text_sep=" ",
                                                  post_text_sep=CITATION["author_year_sep"]),
            _TextualByLabel(),
        ])
        super().__post_init__()


def _add_substitutions(app: Sphinx, config: Config) -> None:
    options = config.html_theme_options or {}
    repo, branch = options.get("repository_url", ""), options.get("repository_branch", "main")
    config.myst_substitutions = {**config.myst_substitutions, "colab": colab_base(repo, branch)}


CHAPTER_PAGE = re.compile(r"book/(?P<stem>\d\d_[\w-]+)")


def _launch_colab_version(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Rewrite the Colab launch button that sphinx-book-theme's ``add_launch_buttons`` (priority 501)
    has put in ``context["header_buttons"]``: ``.../blob/BRANCH/book/NN_slug.ipynb`` becomes
    ``.../blob/BRANCH/colab/NN_slug.ipynb``. The button is data until the page template renders it."""
    chapter = CHAPTER_PAGE.fullmatch(pagename)
    if not chapter:
        return
    for group in context.get("header_buttons", []):
        for button in group.get("buttons", []):
            url = button.get("url", "")
            if button.get("text") == "Colab" and url.endswith(f"/{pagename}.ipynb"):
                button["url"] = url.removesuffix(f"{pagename}.ipynb") + f"colab/{chapter['stem']}.ipynb"


def _number_exercises_per_chapter(app: Sphinx, env) -> list[str]:
    """Renumber sphinx-exercise's ``exercise`` nodes and the figures (a code cell's image captioned by its
    ``mystnb.figure`` metadata) chapter by chapter: ``book/03_x`` gets (3, 1), (3, 2) ... of each type.

    Runs after Sphinx has assigned book-wide numbers (``env-get-updated``, the toctree collector at the
    default priority) and keeps their order; ``env.toc_fignumbers`` is what titles and references read.
    """
    for docname, numbers in env.toc_fignumbers.items():
        chapter = CHAPTER_PAGE.fullmatch(docname)
        for figtype in ("exercise", "figure"):
            nodes_of_type = numbers.get(figtype)
            if chapter and nodes_of_type:
                ordered = sorted(nodes_of_type, key=nodes_of_type.get)
                numbers[figtype] = {key: (int(chapter["stem"][:2]), i) for i, key in enumerate(ordered, start=1)}
    return []


# Attribute values (title, aria-label, placeholder ...) of sphinx-book-theme 1.x / pydata-sphinx-theme 0.x
# that have no zh_CN translation there, and the footer's copyright line.
UI_STRINGS = {
    "Color mode": "配色", "System Settings": "跟随系统", "Launch interactive content": "在线运行",
    "Launch on Colab": "在 Colab 打开", "Search this book...": "搜索本书…",
    "Toggle primary sidebar": "显示或隐藏目录", "Toggle secondary sidebar": "显示或隐藏本页目录",
    "Toggle hidden content": "展开或收起", "Link to this heading": "链接到本节", "Main": "正文",
    "Link to this image": "链接到本图", "Link to this table": "链接到本表", "Link to this equation": "链接到本公式",
    "Link to this code": "链接到本段代码", "Link to this definition": "链接到本定义",
    "Page": "本页", "列印成 PDF": "打印成 PDF",
}


# sphinx-exercise titles a solution "解答" + a link to its exercise: on a phone most of the title is that
# link, and a tap jumped to the exercise instead of opening the solution. The link becomes text.
_SOLUTION_TITLE = re.compile(r'(<p class="admonition-title">解答)<a class="reference internal" href="[^"]*">\s*'
                             r'(练习(?: [\d.]+)?) \((.*?)\)</a>')


# A figure's picture shrinks to a phone's width, where its axis labels are a few pixels high: a tap opens
# the picture itself, which the phone can zoom.
_FIGURE_IMAGE = re.compile(r'(<figure[^>]*>\s*)(<img [^>]*src="([^"]+\.(?:png|svg|jpg))"[^>]*/>)')


def translate_ui(html: str) -> str:
    """``html`` with the theme's English attribute values and copyright line in Simplified Chinese,
    each solution's title as plain text (``解答：练习 3.1（缩放点积注意力）``) and each figure's picture
    a link to itself."""
    for english, chinese in UI_STRINGS.items():
        html = html.replace(f'="{english}"', f'="{chinese}"')
    html = _SOLUTION_TITLE.sub(r'\1<span class="solution-of">：\2（\3）</span>', html)
    html = _FIGURE_IMAGE.sub(r'\1<a class="figure-zoom" href="\3" title="打开原图（可放大）">\2</a>', html)
    return re.sub(r"© Copyright (\d{4})\.", r"© \1 版权所有", html)


def _translate_ui_strings(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    # togglebutton.js writes its button's aria-label into every page when it runs
    for page in [*Path(app.outdir).rglob("*.html"), Path(app.outdir) / "_static" / "togglebutton.js"]:
        if not page.exists():
            continue
        text = page.read_text(encoding="utf-8")
        translated = translate_ui(text)
        if translated != text:
            page.write_text(translated, encoding="utf-8")


_CJK = re.compile(r"[\u4e00-\u9fff]")
_SEPARATORS = re.compile(r"[\s/（）()、，：；「」]+|与|以及|和")


def glossary_terms(root: Path) -> dict[str, list[str]]:
    """``{term: [docname of each chapter the glossary names for it]}`` from book/appendix_glossary.md.

    A row's first cell may hold several terms (``查询 / 键 / 值``) and a synonym in brackets
    (``Jacobian（雅可比矩阵）``); its last cell names chapters (``3、9``) or an appendix (``附录 C``).
    """
    docs = {int(p.name[:2]): f"book/{p.stem}" for p in chapters(root / "book")}
    docs_by_appendix = {"附录 C": "book/appendix_performance"}
    out: dict[str, list[str]] = {}
    for line in (root / "book" / "appendix_glossary.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)]  # `<\|七绝\|>` is one cell
        if len(cells) < 6 or cells[1] in ("", "中文") or set(cells[1]) <= {"-", " "}:
            continue
        where = [docs[int(n)] for n in re.findall(r"\d+", cells[4]) if int(n) in docs]
        where += [doc for name, doc in docs_by_appendix.items() if name in cells[4]]
        synonyms = [s for s in re.findall(r"（(.*?)）", cells[1]) if _CJK.search(s) and "正文" not in s]
        for term in [t.strip() for t in re.sub(r"（.*?）", "", cells[1]).split("/")] + synonyms:
            if term:
                out.setdefault(term, []).extend(where)
    return out


def chapter_title(chapter: Path) -> str:
    """A chapter's heading without its number: ``第 6 章　位置编码`` -> ``位置编码``."""
    first = json.loads(chapter.read_text(encoding="utf-8"))["cells"][0]["source"]
    heading = next(line for line in "".join(first).splitlines() if line.startswith("# "))
    return heading.split("\u3000", 1)[1]


def search_terms(root: Path) -> list[str]:
    """The glossary's Chinese terms and the pieces of the chapter titles, each holding Chinese."""
    phrases = list(glossary_terms(root))
    phrases += [chapter_title(chapter) for chapter in chapters(root / "book")]
    terms = {piece for phrase in phrases for piece in _SEPARATORS.split(phrase)}
    return sorted(t for t in terms if len(t) >= 2 and _CJK.search(t) and " " not in t)


def _add_search_dictionary(app: Sphinx, config: Config) -> None:
    root = Path(app.srcdir)
    if not (root / "book" / "appendix_glossary.md").exists():
        return
    path = Path(app.doctreedir).parent / "jieba-course-terms.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{term} 100000\n" for term in search_terms(root)), encoding="utf-8")
    config.html_search_options = {**(config.html_search_options or {}), "dict": str(path)}


WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = ("【交互控件】在 Colab 或本地的 Jupyter 里运行本章时，这里是一组滑块或按钮；"
               "网页上没有运行中的 Python，拖动或点选不会有任何反应，所以这里不显示它们。")


def _replace_widgets(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    for raw in list(doctree.findall(nodes.raw)):
        if WIDGET_MIME in raw.astext():
            raw.replace_self(nodes.paragraph(WIDGET_NOTE, WIDGET_NOTE, classes=["widget-note"]))


def _add_index_entries(app: Sphinx, doctree: nodes.document) -> None:
    root = Path(app.srcdir)
    if not (root / "book" / "appendix_glossary.md").exists():
        return
    entries = [("single", term, "", "main", None)
               for term, docs in glossary_terms(root).items() if app.env.docname in docs]
    if entries:
        doctree.insert(0, addnodes.index(entries=entries, inline=False))


_SOLUTION_MARKER = re.compile(rf"^[ \t]*(?:{re.escape(BEGIN)}|{re.escape(END)})[ \t]*\n", re.M)
_ALIGNED = re.compile(r"\S {2,}\S")


def _tidy_code_blocks(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """The ``### BEGIN/END SOLUTION`` lines (markers for the exercise version) leave the page's code, and
    an output whose columns line up (two or more lines with a run of spaces inside) is marked ``aligned``,
    so that a phone scrolls it rather than wrapping it (_static/course.css)."""
    for block in list(doctree.findall(nodes.literal_block)):
        text = block.astext()
        if "output" in block["classes"]:
            if sum(bool(_ALIGNED.search(line)) for line in text.splitlines()) >= 2:
                block["classes"].append("aligned")
        elif "SOLUTION" in text and _SOLUTION_MARKER.search(text + "\n"):
            kept = _SOLUTION_MARKER.sub("", text + "\n").rstrip("\n")
            block.children = [nodes.Text(kept)]
            block.rawsource = kept


_CARRIAGE_RETURN = re.compile(r".*\r(?=[^\n])")  # a line rewritten in place: keep what follows the \r
_BACKSPACE = re.compile("[^\n]\x08")  # a character erased by a backspace


def merge_streams(outputs: list) -> list:
    """A cell's outputs as the book shows them: every stream of a name joined, exactly, where it first
    appears; carriage returns and backspaces applied as a terminal would; a copy (the notebook keeps its own).

    Replaces myst-nb's merge (``nb_merge_streams``), which strips each piece and adds a newline after it: a
    line the kernel happened to send in two messages ("... merges:", then " True") became two lines,
    differently on each build, and it joined in place, so the executed notebook myst-nb saves held every
    later piece twice."""
    merged, first = [], {}
    for output in outputs:
        if output["output_type"] == "stream" and output["name"] in first:
            first[output["name"]]["text"] += output["text"]
            continue
        output = copy.deepcopy(output)
        if output["output_type"] == "stream":
            first[output["name"]] = output
        merged.append(output)
    for stream in first.values():
        text = stream["text"]
        while (shorter := _BACKSPACE.sub("", text)) != text:
            text = shorter
        stream["text"] = _CARRIAGE_RETURN.sub("", text)
    return merged


# --- A quiet browser console ---------------------------------------------------------------------------------------
def _drop_duplicate_scripts(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Jupyter Book 1 sets up sphinx-thebe and sphinx-togglebutton twice, so their inline scripts came twice
    into every page (once with ``filename=None``, once with ``""``: Sphinx's own de-duplication misses them),
    and the second ``const THEBE_JS_URL`` threw a SyntaxError on every page. Keep the first of each inline
    script (same body and attributes); scripts loaded from files stay as they are, in their order."""
    seen: set[tuple] = set()
    kept = []
    for script in context.get("script_files", []):
        key = tuple(sorted(getattr(script, "attributes", {}).items()))
        if getattr(script, "filename", None):  # a file: kept, in its place
            kept.append(script)
        elif key not in seen:  # an inline script: its first copy
            seen.add(key)
            kept.append(script)
    context["script_files"] = kept


def _theme_mode_auto(app: Sphinx, config: Config) -> None:
    """The pydata theme's default mode (``html_context["default_mode"]``) is empty, which it reports as an
    error on a reader's first visit ("Got invalid theme mode") before it falls back to "auto": say "auto"
    ourselves (light or dark as the reader's system is)."""
    config.html_context = {**config.html_context, "default_mode": "auto"}


# --- Chapter 14's live poet (issue 32) ---------------------------------------------------------------------------
def _export_poet(app: Sphinx, exception: Exception | None) -> None:
    """Where ``html_extra_path`` has copied the widget (web/poet/ -> poet/), write the shipped poet's weights
    beside it (``tools/poet_web.py export``): made from data/poet.pt at every build, never committed twice."""
    widget = Path(app.outdir) / "poet"
    if exception is None and app.builder.format == "html" and (widget / "page.js").exists():
        import poet_web  # tools/, like this extension

        poet_web.export(widget)


def setup(app: Sphinx) -> dict:
    pybtex.plugin.register_plugin("pybtex.style.labels", "author_year_zh", ChineseAuthorYearLabels, force=True)
    pybtex.plugin.register_plugin("pybtex.style.formatting", "plain_zh", ChinesePlainStyle, force=True)
    sphinxcontrib.bibtex.plugin.register_plugin(
        "sphinxcontrib.bibtex.style.referencing", "author_year_zh", ChineseAuthorYearStyle, force=True)
    import myst_nb.core.render

    myst_nb.core.render.coalesce_streams = merge_streams  # what nb_merge_streams calls (see merge_streams)
    app.connect("doctree-resolved", _replace_widgets)
    app.connect("doctree-resolved", _tidy_code_blocks)
    app.connect("html-page-context", _launch_colab_version, priority=600)  # after the theme's 501
    app.connect("env-get-updated", _number_exercises_per_chapter, priority=900)  # after Sphinx's numbers
    app.connect("build-finished", _translate_ui_strings)
    app.connect("build-finished", _export_poet)
    app.connect("html-page-context", _drop_duplicate_scripts, priority=999)  # after every script is added
    app.connect("config-inited", _theme_mode_auto, priority=900)
    app.connect("doctree-read", _add_index_entries, priority=400)
    app.connect("config-inited", _add_substitutions, priority=900)
    app.connect("config-inited", _add_search_dictionary, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
