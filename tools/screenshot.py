"""Screenshots of built pages in headless Chromium, to look at the book the way a reader does.

    python tools/screenshot.py _build/html/book/03_self_attention.html out.png [--height 12000]

Needs Debian's ``chromium``. Serves ``_build/html`` on localhost so that scripts load as on the web.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import subprocess
import tempfile
import threading
from pathlib import Path


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("page", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--root", type=Path, default=Path("_build/html"))
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=2400)
    parser.add_argument("--wait-ms", type=int, default=6000, help="virtual time for MathJax and widgets to render")
    args = parser.parse_args()
    handler = functools.partial(_QuietHandler, directory=str(args.root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/{args.page.resolve().relative_to(args.root.resolve())}"
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        "--hide-scrollbars", f"--user-data-dir={profile}", f"--virtual-time-budget={args.wait_ms}",
                        f"--window-size={args.width},{args.height}", f"--screenshot={args.png.resolve()}", url],
                       check=True, capture_output=True, timeout=120)
    server.shutdown()
    print(args.png)


if __name__ == "__main__":
    main()
