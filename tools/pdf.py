"""The whole book as one PDF for offline readers: the built pages, joined and printed by headless Chromium.

    python tools/pdf.py                          # build from the stored outputs, then _build/pdf/book.pdf
    python tools/pdf.py --html _build/html       # print an existing HTML build instead

Sphinx's ``singlehtml`` builder cannot render myst-nb's collapsed code cells, so this joins the article
of every page of ``_toc.yml`` (in its order) into one page, ``book/_print.html``, next to the chapter
pages so that every relative link to images, CSS and the vendored MathJax still resolves. Chromium
prints it (A4, no header or footer) after MathJax and the page's scripts have run, so solutions and the
setup cell stay collapsed as on the web. The print rules of ``_static/course.css`` start each chapter on
a new page and keep a code cell, an output or a figure from being split across two pages.
Needs Debian's ``chromium``.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml
from bs4 import BeautifulSoup

import preview
from common import ROOT, chromium, serve
PRINT_PAGE = "book/_print.html"


def toc_pages() -> list[str]:
    """The book's pages in reading order, as paths like ``book/03_self_attention``."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    return [toc["root"]] + [c["file"] for part in toc["parts"] for c in part["chapters"]]


def join_pages(html: Path, pages: list[str]) -> Path:
    """Write ``PRINT_PAGE``: the first page's head, then the article of every page, one per chapter."""
    first = BeautifulSoup((html / f"{pages[0]}.html").read_text(encoding="utf-8"), "html.parser")
    articles = []
    for page in pages:
        soup = BeautifulSoup((html / f"{page}.html").read_text(encoding="utf-8"), "html.parser")
        article = soup.find("article", class_="bd-article")
        if article is None:
            raise ValueError(f"{page}.html has no <article class='bd-article'>: is it a Jupyter Book page?")
        articles.append(f'<section class="print-chapter">{article.decode_contents()}</section>')
    head = str(first.head).replace("<title>", "<title>PDF · ", 1)
    body = '<body class="print-book"><main class="bd-main"><div class="bd-content">' + "\n".join(articles)
    out = html / PRINT_PAGE
    out.write_text(f"<!DOCTYPE html>\n<html lang=\"zh-CN\">{head}{body}</div></main></body></html>",
                   encoding="utf-8")
    return out


def print_pdf(html: Path, page: str, pdf: Path, wait_ms: int = 60000) -> None:
    """Serve ``html`` on localhost and let headless Chromium print ``page`` to ``pdf``."""
    pdf.parent.mkdir(parents=True, exist_ok=True)
    with serve(html) as base:
        chromium(f"{base}/{page}", f"--virtual-time-budget={wait_ms}", "--no-pdf-header-footer",
                 f"--print-to-pdf={pdf.resolve()}", timeout=600)


def page_count(pdf: Path) -> int:
    """The number of pages of a PDF written by Chromium (its page objects), without a PDF library."""
    return len(re.findall(rb"/Type\s*/Page(?![s\w])", pdf.read_bytes()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--html", type=Path, help="an existing HTML build (default: build one into --work)")
    parser.add_argument("--work", type=Path, default=ROOT / "_build" / "pdf")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "pdf" / "book.pdf")
    args = parser.parse_args()
    html = args.html
    if html is None:
        result = preview.build(preview.stored_output_config(args.work))
        if result.returncode:
            print(result.stdout[-3000:], result.stderr[-3000:])
            return result.returncode
        html = args.work / "_build" / "html"
    join_pages(html, toc_pages())
    print_pdf(html, PRINT_PAGE, args.out)
    print(f"{args.out}: {page_count(args.out)} pages, {args.out.stat().st_size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
