"""Screenshots of built pages in headless Chromium, to look at the book the way a reader does.

    python tools/screenshot.py _build/html/book/03_self_attention.html out.png [--height 12000]

Needs Debian's ``chromium``. Serves ``_build/html`` on localhost so that scripts load as on the web.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from common import chromium, serve


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("page", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--root", type=Path, default=Path("_build/html"))
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=2400)
    parser.add_argument("--wait-ms", type=int, default=6000, help="virtual time for MathJax and widgets to render")
    args = parser.parse_args()
    with serve(args.root) as base:
        chromium(f"{base}/{args.page.resolve().relative_to(args.root.resolve()).as_posix()}", "--hide-scrollbars",
                 f"--virtual-time-budget={args.wait_ms}", f"--window-size={args.width},{args.height}",
                 f"--screenshot={args.png.resolve()}")
    print(args.png)


if __name__ == "__main__":
    main()
