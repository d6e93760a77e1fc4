"""The book builds with zero Sphinx warnings (-W), from the outputs stored in the chapters, and works
in a real browser the way a reader uses it: on a phone (390 px) the ☰ button opens the chapter list
and the contents button the page's sections; on a desktop ☰ collapses the sidebar.

``make book`` executes every chapter; here the stored outputs are rendered instead, because the
run-twice and exercise-version tests already execute every chapter (see docs/design.md). The
browser tests need Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them) and
skip without them, unless ``TC_REQUIRE_BROWSER=1`` (set by ``.ci/run``) makes that a failure.
"""
import json
import os
import re
import shutil
import time

import pytest

import preview
import sphinx_course
from common import browser_missing, chapters, webdriver
from conftest import ROOT

CHAPTERS = chapters()
PHONE, DESKTOP = (390, 844), (1280, 900)


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    out = tmp_path_factory.mktemp("book")
    result = preview.build(preview.stored_output_config(out))
    return result, out / "_build" / "html"


def test_book_builds_without_warnings(book):
    result, html = book
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    assert (html / "index.html").exists()
    for chapter in CHAPTERS:
        page = (html / "book" / f"{chapter.stem}.html").read_text(encoding="utf-8")
        assert "colab.research.google.com" in page           # the launch button
        assert "NBVAL_CHECK_OUTPUT" in page                  # executed code is shown
        assert "_static/course.css" in page                 # code set to fit 88 columns
        assert "_static/sidebar-toggles.js" in page         # the ☰ and contents buttons work
        if not chapter.stem.startswith("13_"):               # exercises numbered per chapter: 练习 3.1
            number = int(chapter.stem[:2])
            assert f"练习 {number}.1" in page and f"练习 {number}.3" in page, chapter.stem
            assert not re.search(rf"练习 (?!{number}\.)\d+\.\d", page), chapter.stem
        captions = re.findall(r'class="caption-number">(图 \d+\.\d+) <', page)  # 图 3.1, 3.2 ... in order
        n_figures = sum("figure" in c["metadata"].get("mystnb", {})   # captioned by cell metadata
                        for c in json.loads(chapter.read_text(encoding="utf-8"))["cells"])
        assert captions == [f"图 {int(chapter.stem[:2])}.{k}" for k in range(1, n_figures + 1)] and all(
            re.fullmatch(r"(图|练习) \d+\.\d+", ref) for ref in re.findall(r'std-numref">([^<]*)<', page)), (
            chapter.stem, captions)                         # ... and every {numref} resolved to one such number
        untranslated = [e for e in sphinx_course.UI_STRINGS if f'="{e}"' in page] + ["© Copyright"] * (
            "© Copyright" in page)
        assert not untranslated, (chapter.stem, untranslated)  # the theme's strings in Chinese
        assert "widget-view+json" not in page                # no slider that would do nothing ...
        has_widget = "widget-view+json" in chapter.read_text(encoding="utf-8")
        assert (sphinx_course.WIDGET_NOTE in page) == has_widget, chapter.stem  # ... but a line instead
    index = (html / "searchindex.js").read_text(encoding="utf-8")
    assert json.dumps("注意力")[1:-1] in index  # jieba segmented the Chinese text: search finds words
    # the references page lists every entry of references.bib (each with its link) ...
    references = (html / "book" / "appendix_references.html").read_text(encoding="utf-8")
    keys = re.findall(r"^@\w+\{([^,\s]+),", (ROOT / "references.bib").read_text(encoding="utf-8"), re.MULTILINE)
    assert len(keys) >= 40 and not [k for k in keys if f'id="cite-{k}"' not in references]
    assert references.count('<a class="reference external" href="https://') >= len(keys)
    # ... and the chapters' citations link to it, written author–year the Chinese way: （Xiong 等，2020）
    cited = {c.stem: re.findall(r'href="appendix_references\.html#cite-([\w-]+)"',
                                (html / "book" / f"{c.stem}.html").read_text(encoding="utf-8")) for c in CHAPTERS}
    assert "xiong2020layer" in cited["08_residual_norm_block"], cited
    assert re.search(r'（<a [^>]*href="appendix_references\.html#cite-xiong2020layer"[^>]*>Xiong 等，2020</a>）',
                     (html / "book" / "08_residual_norm_block.html").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def browser(book):
    """A headless Chromium (WebDriver) and the address of the built book, served on localhost."""
    missing = browser_missing()
    if missing:
        if os.environ.get("TC_REQUIRE_BROWSER") == "1":
            pytest.fail(f"browser tests need {missing}")
        pytest.skip(f"browser tests need {missing}")
    with webdriver(book[1], capabilities={"goog:loggingPrefs": {"browser": "ALL"}}) as (driver, base):
        yield driver, base


def _open(browser, page: str, size: tuple[int, int]):
    driver, base = browser
    driver.set_window_size(*size)
    driver.get(f"{base}/{page}")
    time.sleep(1.0)  # the themes bind their handlers on DOMContentLoaded
    return driver


def _visible(driver, selector: str):
    from selenium.webdriver.common.by import By

    shown = [e for e in driver.find_elements(By.CSS_SELECTOR, selector) if e.is_displayed()]
    assert shown, f"no visible {selector}"
    return shown[0]


def test_phone_menu_button_opens_the_chapter_list(browser):
    from selenium.webdriver.common.by import By

    driver = _open(browser, "book/intro.html", PHONE)  # the preface: every chapter is another page
    drawer = driver.find_element(By.ID, "pst-primary-sidebar-modal")
    assert drawer.get_attribute("open") is None
    _visible(driver, ".primary-toggle").click()
    time.sleep(0.5)
    assert drawer.get_attribute("open") is not None, "the ☰ button did not open the drawer"
    links = [a.get_attribute("href") for a in drawer.find_elements(By.CSS_SELECTOR, "a.reference")
             if a.is_displayed()]
    for chapter in CHAPTERS:
        assert any(link.endswith(f"/book/{chapter.stem}.html") for link in links), chapter.stem


def test_phone_contents_button_opens_the_page_sections(browser):
    from selenium.webdriver.common.by import By

    driver = _open(browser, "book/03_self_attention.html", PHONE)
    _visible(driver, ".secondary-toggle").click()
    time.sleep(0.5)
    drawer = driver.find_element(By.ID, "pst-secondary-sidebar-modal")
    assert drawer.get_attribute("open") is not None, "the contents button did not open the drawer"
    sections = [a.text for a in drawer.find_elements(By.CSS_SELECTOR, "a") if a.is_displayed()]
    assert any(text.startswith("3.1") for text in sections), sections[:5]


def test_desktop_menu_button_collapses_and_restores_the_sidebar(browser):
    from selenium.webdriver.common.by import By

    driver = _open(browser, "book/03_self_attention.html", DESKTOP)
    sidebar = driver.find_element(By.ID, "pst-primary-sidebar")
    assert sidebar.is_displayed()
    _visible(driver, ".primary-toggle").click()
    time.sleep(0.5)
    assert not sidebar.is_displayed(), "the ☰ button did not collapse the sidebar"
    _visible(driver, ".primary-toggle").click()
    time.sleep(0.5)
    assert sidebar.is_displayed()


def test_no_page_scrolls_sideways_on_a_phone(browser, book):
    """At 390 px only code blocks, tables and formulas may be wider than the screen (each has its own
    scrollbar); the page itself must not scroll sideways."""
    pages = sorted(p.relative_to(book[1]).as_posix() for p in (book[1] / "book").glob("*.html"))
    assert len(pages) >= len(CHAPTERS) + 3
    wide = {}
    for page in pages:
        driver = _open(browser, page, PHONE)
        page_width, screen = driver.execute_script(
            "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        if page_width > screen:
            wide[page] = page_width - screen
    assert not wide, f"pages wider than a {PHONE[0]} px phone (px too wide): {wide}"


def test_no_page_logs_an_error_in_the_browser_console(browser, book):
    """Every page, opened as a reader's first visit (empty storage): no console error and no failed request
    (seen before: sphinx-thebe's script twice, the theme's empty default mode, /favicon.ico, the widget
    manager's icon fonts)."""
    driver, _ = browser
    pages = ["index.html", *sorted(p.relative_to(book[1]).as_posix() for p in (book[1] / "book").glob("*.html"))]
    errors = {}
    _open(browser, "index.html", DESKTOP)
    driver.execute_script("localStorage.clear()")
    for page in pages:
        driver.get_log("browser")  # what earlier pages left
        _open(browser, page, DESKTOP)
        driver.execute_script("localStorage.clear()")
        found = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        if found:
            errors[page] = found
    assert not errors, errors


PHONE_PROBE = r"""
const box = (e) => e.scrollWidth > e.clientWidth + 1;
const scrolls = (e) => ["auto", "scroll"].includes(getComputedStyle(e).overflowX);
const line = (e) => parseFloat(getComputedStyle(e).lineHeight) || 1.5 * parseFloat(getComputedStyle(e).fontSize);
const screen = document.documentElement.clientWidth;
return {
  code: [...document.querySelectorAll(".cell_input pre")].filter(box).length,
  outputs: [...document.querySelectorAll(".cell_output pre")].filter(
    (e) => box(e) && !e.closest(".aligned")).length,
  formulas: [...document.querySelectorAll('mjx-container[display="true"]')].filter(
    (m) => m.getBoundingClientRect().right > screen + 1 || (box(m) && !scrolls(m))).length,
  squeezed: [...document.querySelectorAll("td code, th code")].filter(
    (c) => c.getBoundingClientRect().height > 2 * line(c)).length,
};
"""


@pytest.fixture(scope="module")
def phone_pages(browser, book):
    """What a 390 px phone shows on each page: code blocks, prose-like outputs and formulas wider than
    their box without a scrollbar of their own, and code in table cells broken over several lines."""
    pages = sorted(p.relative_to(book[1]).as_posix() for p in (book[1] / "book").glob("*.html"))
    out = {}
    for page in pages:
        driver = _open(browser, page, PHONE)
        driver.execute_script("return window.MathJax && MathJax.startup && MathJax.startup.promise")
        out[page] = driver.execute_script(PHONE_PROBE)
    return out


@pytest.mark.parametrize("kind", ["code", "outputs", "formulas", "squeezed"])
def test_a_phone_shows_code_outputs_formulas_and_tables_without_scrolling_them(phone_pages, kind):
    """At 390 px code cells and prose-like outputs wrap (outputs whose columns line up keep a scrollbar),
    a wide formula scrolls in its own box instead of being cut, and code in a table cell stays on one
    line while the table scrolls (_static/course.css; the "aligned" mark from tools/sphinx_course.py)."""
    bad = {page: found[kind] for page, found in phone_pages.items() if found[kind]}
    assert not bad, f"{kind} that do not fit a {PHONE[0]} px phone, per page: {bad}"


def test_a_tap_on_a_solutions_title_opens_it_and_stays_on_the_page(browser):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    driver = _open(browser, "book/03_self_attention.html", PHONE)
    solution = driver.find_element(By.CSS_SELECTOR, "div.solution.dropdown")
    title = solution.find_element(By.CSS_SELECTOR, ".admonition-title")
    assert not title.find_elements(By.TAG_NAME, "a"), "the title holds a link: a tap jumps away"
    assert title.text.startswith("解答：练习 3.1（"), title.text
    url = driver.current_url
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", title)
    text = title.find_element(By.CSS_SELECTOR, ".solution-of")
    ActionChains(driver).move_to_element(text).click().perform()  # a tap where the exercise's name is
    time.sleep(0.5)
    code = solution.find_element(By.CSS_SELECTOR, ".cell_input pre")
    assert code.is_displayed() and driver.current_url == url
    assert "### BEGIN SOLUTION" not in code.text and "def attention" in code.text
    live = driver.page_source  # what the page's scripts wrote too (togglebutton.js adds its buttons)
    assert not re.search(r"Link to this|Toggle hidden|Show code cell|Hide code cell", live)


def test_pages_hold_no_english_interface_text_nor_solution_markers(book):
    english = re.compile(r"Link to this|Toggle hidden|Show code cell|Hide code cell|### (?:BEGIN|END) SOLUTION")
    found = {}
    for page in sorted((book[1] / "book").glob("*.html")):
        hits = sorted(set(english.findall(page.read_text(encoding="utf-8"))))
        if hits:
            found[page.name] = hits
    assert not found, found


def test_every_figure_opens_its_picture_full_size_on_a_tap(book):
    """On a phone a figure is shrunk to 390 px and its axis text to a few pixels: the picture is a link to
    itself, which the phone can zoom (tools/sphinx_course.py)."""
    figures = unlinked = 0
    for page in sorted((book[1] / "book").glob("*.html")):
        for figure in re.findall(r"<figure[^>]*>(.*?)</figure>", page.read_text(encoding="utf-8"), re.DOTALL):
            for src in re.findall(r'<img [^>]*src="([^"]+)"', figure):
                figures += 1
                unlinked += f'<a class="figure-zoom" href="{src}"' not in figure
                assert (page.parent / src).exists(), src
    assert figures > 3 * len(CHAPTERS) and not unlinked, (figures, unlinked)


def search_queries() -> list[tuple[str, list[str]]]:
    """(query, pages that must answer it): every glossary term with the chapters the glossary names for
    it, and every chapter's title (without 第 N 章) with that chapter."""
    queries = list(sphinx_course.glossary_terms(ROOT).items())
    queries += [(sphinx_course.chapter_title(chapter), [f"book/{chapter.stem}"]) for chapter in CHAPTERS]
    return queries


def test_search_finds_every_glossary_term_and_chapter_title_in_the_top_three(browser):
    """What a reader types into the search box: the page that explains it is among the first three
    results shown (the order the page lists them in)."""
    driver = _open(browser, "search.html", DESKTOP)
    for _ in range(100):
        if driver.execute_script("return typeof Search !== 'undefined' && Search._index !== null"):
            break
        time.sleep(0.1)
    queries = search_queries()
    assert len(queries) > 80
    assert all(pages for _, pages in queries), \
        f"glossary rows naming no chapter: {[q for q, pages in queries if not pages]}"
    missed = {}
    for query, pages in queries:
        shown = driver.execute_script(
            "const r = Search._performSearch(...Search._parseQuery(arguments[0]));"
            "return r.reverse().map(x => x[0]);", query)  # the page pops results from the end
        rank = next((i + 1 for i, doc in enumerate(shown) if doc in pages), None)
        if rank is None or rank > 3:
            missed[query] = (rank, shown[:3])
    assert not missed, f"search misses (query: rank, first three): {missed}"


def test_search_snippets_are_readable_text(browser):
    """The snippet under each result is prose: no raw TeX, no code, no printed output
    (_static/search-snippets.js)."""
    from selenium.webdriver.common.by import By

    snippets = []
    for query in ("缩放", "分组查询注意力"):  # the second finds "\(d_{\text{head}}=64\)" in chapter 11
        driver = _open(browser, f"search.html?q={query}", DESKTOP)
        found: list[str] = []
        for _ in range(60):  # results arrive one by one: wait until three or more stop changing
            time.sleep(0.5)
            now = [p.text for p in driver.find_elements(By.CSS_SELECTOR, "#search-results p.context")]
            if len(now) >= 3 and now == found:
                break
            found = now
        assert len(found) >= 3, found
        snippets += found
    raw = [s for s in snippets if re.search(r"\\[(\[]|\\[a-zA-Z]+|\$|NBVAL|tc\.claim|\n|\w_ ", s)]
    assert not raw, f"snippets with TeX or code: {raw}"
    assert any("缩放" in s for s in snippets), snippets
    assert any("d_head" in s for s in snippets), snippets  # \(d_{\text{head}}\), not "d_ head"


def test_the_whole_book_prints_as_one_pdf(book, tmp_path):
    """tools/pdf.py: every page of the toc joined in order, printed by Chromium; solutions stay folded."""
    import pdf

    if shutil.which("chromium") is None:
        if os.environ.get("TC_REQUIRE_BROWSER") == "1":
            pytest.fail("the PDF needs chromium")
        pytest.skip("the PDF needs chromium")
    html = book[1]
    joined = pdf.join_pages(html, pdf.toc_pages())
    text = joined.read_text(encoding="utf-8")
    headings = re.findall(r"<h1>([^<]*)", text)               # the page titles, in print order
    chapters = [h for h in headings if h.startswith("第 ")]
    assert chapters == [f"第 {int(c.stem[:2])} 章\u3000{sphinx_course.chapter_title(c)}" for c in CHAPTERS]
    out = tmp_path / "book.pdf"
    pdf.print_pdf(html, pdf.PRINT_PAGE, out)
    assert out.read_bytes().startswith(b"%PDF")
    assert pdf.page_count(out) > 10 * len(CHAPTERS)  # A4, each chapter from a new page
    css = (html / "_static" / "course.css").read_text(encoding="utf-8")
    assert "div.solution.dropdown > :not(.admonition-title)" in css  # the print rule folding them
