"""The setup cell every chapter starts with, generated from one template.

    python tools/notebook_setup.py          # write the cell into every chapter
    python tools/notebook_setup.py --check  # exit 1 if a chapter's setup cell differs (tests call this)

The repository address comes from ``_config.yml`` (``repository.url``), the one place it lives.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from common import ROOT, chapters
TAG = "course-setup"

TEMPLATE = '''\
# 课程环境：Colab 等还没有课程包的环境先安装它；已安装时这一段什么也不做。
# 从镜像或自己的 fork 安装：先设环境变量 TRANSFORMER_COURSE_URL（见附录 B）。
import importlib.util, os, subprocess, sys
if importlib.util.find_spec("transformer_course") is None:
    default = "git+{repo}.git"
    url = os.environ.get("TRANSFORMER_COURSE_URL", default)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "transformer-course @ " + url], check=True)

import torch
import transformer_course as tc

tc.viz.use_course_style()
device = tc.get_device()  # cuda > mps > cpu
torch.set_float32_matmul_precision("highest")  # GPU 上的矩阵乘法也不用 TF32
tc.set_seed(0)
print("device:", device)'''


def repo_url(root: Path = ROOT) -> str:
    """``repository.url`` of ``_config.yml``."""
    return yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))["repository"]["url"].rstrip("/")


def setup_source(root: Path = ROOT) -> str:
    """The setup cell's source for this repository."""
    return TEMPLATE.format(repo=repo_url(root))


def setup_cell_index(nb: dict) -> int:
    """Index of the cell tagged ``course-setup`` (there must be exactly one)."""
    found = [i for i, c in enumerate(nb["cells"]) if TAG in c.get("metadata", {}).get("tags", [])]
    if len(found) != 1:
        raise ValueError(f"expected exactly one cell tagged {TAG!r}, found {len(found)}")
    return found[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only report chapters whose setup cell differs")
    args = parser.parse_args(argv)
    source, stale = setup_source(), []
    for path in chapters():
        nb = json.loads(path.read_text(encoding="utf-8"))
        cell = nb["cells"][setup_cell_index(nb)]
        if "".join(cell["source"]) == source:
            continue
        stale.append(path.name)
        if not args.check:
            cell["source"] = source.splitlines(keepends=True)
            path.write_text(json.dumps(nb, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    if stale:
        print(("differs from the template: " if args.check else "updated: ") + ", ".join(stale))
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
