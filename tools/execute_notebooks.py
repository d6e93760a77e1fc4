"""Run chapters top to bottom and store their outputs in place (what nbval compares against).

    python tools/execute_notebooks.py                      # every chapter
    python tools/execute_notebooks.py book/03_self_attention.ipynb

Prints each chapter's wall time. Run it after editing a chapter, then commit the notebook.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from common import chapters


def execute(path: Path, timeout: int = 600) -> float:
    """Execute ``path`` in a fresh kernel (working directory: its folder), save it, return seconds."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    seconds = time.perf_counter() - start
    nbformat.write(nb, path)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chapters", nargs="*", type=Path, help="the chapters to run (default: every chapter)")
    for path in parser.parse_args(argv).chapters or chapters():
        print(f"{path.name}: {execute(path):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
