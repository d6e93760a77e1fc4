"""The layer the tools share: where the repository is, which notebooks are chapters, and a headless browser.

    from common import ROOT, chapters          # a tool imports its siblings by their plain names
    for path in chapters():                    # book/NN_*.ipynb, in order
        ...
    with serve(ROOT / "_build" / "html") as base:           # a folder over HTTP on a free localhost port
        chromium(f"{base}/index.html", "--screenshot=/tmp/index.png")
    with webdriver(ROOT / "_build" / "html") as (driver, base):  # the same, driven by Selenium
        driver.get(f"{base}/index.html")

Standard library only (Selenium is imported by ``webdriver`` alone), so that every tool can import it,
including ``tools/make_exercises.py``, which runs on any Python. The kernel that executes notebooks cell by
cell is ``kernel_runner.py``; ``execute_notebooks.py`` stores a chapter's outputs with nbclient.
"""
from __future__ import annotations

import contextlib
import functools
import http.server
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
SRC = ROOT / "src"
CHAPTER_GLOB = "[0-9][0-9]_*.ipynb"  # the one definition of "a chapter": book/03_self_attention.ipynb


def chapters(folder: Path = BOOK) -> list[Path]:
    """Every chapter notebook ``NN_*.ipynb`` of ``folder`` (the book's, unless told), in order."""
    return sorted(Path(folder).glob(CHAPTER_GLOB))


def use_source_tree() -> None:
    """Import ``transformer_course`` from this tree's ``src/``, installed or not: for the tools that write
    into the package (``ship_poet.py``, ``make_tang.py``) and must read the package they write."""
    if str(SRC) not in sys.path:
        sys.path.insert(0, str(SRC))


# --- the browser ---------------------------------------------------------------------------------------

# Headless Debian Chromium, quiet and offline: no GPU, no QUIC, no first-run page, no background updates.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def serve(folder: Path) -> Iterator[str]:
    """Serve ``folder`` over HTTP on a free localhost port (so that pages load scripts as on the web);
    yields the base address, ``http://127.0.0.1:PORT``."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def chromium(url: str, *flags: str, timeout: float = 120) -> None:
    """Open ``url`` once in headless Chromium (a fresh profile) with ``CHROMIUM_FLAGS`` and ``flags`` (e.g.
    ``--screenshot=out.png`` or ``--print-to-pdf=out.pdf``); raises if Chromium fails."""
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(["chromium", *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *flags, url],
                       check=True, capture_output=True, timeout=timeout)


def browser_missing() -> list[str]:
    """What ``webdriver`` needs and this machine lacks: ``chromium``, ``chromedriver``, ``selenium``."""
    missing = [name for name in ("chromium", "chromedriver") if shutil.which(name) is None]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium")
    return missing


@contextlib.contextmanager
def webdriver(folder: Path, *, flags: tuple[str, ...] = (),
              capabilities: dict[str, object] | None = None) -> Iterator[tuple[object, str]]:
    """``serve(folder)`` and a headless Chromium driven by Selenium (``CHROMIUM_FLAGS`` and ``flags``, and
    ``capabilities`` such as ``{"goog:loggingPrefs": {"browser": "ALL"}}``); yields the driver and the base
    address. Check ``browser_missing()`` first."""
    from selenium import webdriver as selenium_webdriver
    from selenium.webdriver.chrome.service import Service

    options = selenium_webdriver.ChromeOptions()
    for flag in (*CHROMIUM_FLAGS, *flags):
        options.add_argument(flag)
    for name, value in (capabilities or {}).items():
        options.set_capability(name, value)
    options.binary_location = shutil.which("chromium")
    with serve(folder) as base:
        driver = selenium_webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
        try:
            yield driver, base
        finally:
            driver.quit()
