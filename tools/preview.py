"""Build a quick preview of some chapters from their stored outputs, and screenshot them.

    python tools/preview.py book/03_self_attention.ipynb [more chapters] [--out /tmp/preview]

Renders only the given chapters (plus the preface), without executing them, into OUT/_build/html,
then takes one full-page screenshot per chapter (OUT/NN_slug.png, needs Debian's ``chromium``).
``make book`` is the real build; this is for looking at a chapter while writing it.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import yaml

from common import ROOT


def stored_output_config(out: Path, toc_files: list[str] | None = None) -> list[str]:
    """Write a config (and optionally a toc) that renders stored outputs; return the extra CLI args."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    config["execute"]["execute_notebooks"] = "off"
    extensions = config["sphinx"]["local_extensions"]  # paths there are relative to the config file
    config["sphinx"]["local_extensions"] = {name: str(ROOT / path) for name, path in extensions.items()}
    out.mkdir(parents=True, exist_ok=True)
    # in the file's order: the widget scripts must stay require.js first, then embed-amd.js
    (out / "_config.yml").write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8")
    args = ["--config", str(out / "_config.yml"), "--path-output", str(out)]
    if toc_files is not None:
        toc = {"format": "jb-book", "root": "book/intro", "chapters": [{"file": f} for f in toc_files]}
        (out / "_toc.yml").write_text(yaml.safe_dump(toc), encoding="utf-8")
        args += ["--toc", str(out / "_toc.yml")]
    return args


def build(args: list[str]) -> subprocess.CompletedProcess:
    """``jupyter-book build --all -W -n --keep-going`` of this repository with extra ``args``."""
    jb = Path(sys.executable).parent / "jupyter-book"
    return subprocess.run([str(jb), "build", "--all", "-W", "-n", "--keep-going", *args, str(ROOT)],
                          capture_output=True, text=True, timeout=900)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chapters", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path("/tmp/preview"))
    parser.add_argument("--height", type=int, default=16000)
    args = parser.parse_args()
    files = [f"book/{Path(c).stem}" for c in args.chapters]
    result = build(stored_output_config(args.out, files))
    print(result.stdout[-3000:] if result.returncode else "build ok (no warnings)")
    if result.returncode:
        print(result.stderr[-3000:])
        return result.returncode
    html = args.out / "_build" / "html"
    for f in files:
        png = args.out / f"{Path(f).name}.png"
        subprocess.run([sys.executable, str(ROOT / "tools" / "screenshot.py"), str(html / f"{f}.html"), str(png),
                        "--root", str(html), "--height", str(args.height)], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
