"""The portability matrix: every chapter under nbval, once per CPU kernel path and thread count.

    python tools/portability.py                      # the whole matrix, table into docs/portability.md
    python tools/portability.py --only default:1     # one configuration (what make test adds)

A configuration is ``PATH:THREADS``. ``PATH`` is a PyTorch CPU kernel path (``ATEN_CPU_CAPABILITY``:
``default``, ``avx2``, ``avx512``; ``native`` leaves the variable unset) or ``mkl-compatible``
(``default`` kernels and MKL's conditional-reproducibility mode ``MKL_CBWR=COMPATIBLE``, which takes
MKL's matrix products off their machine-specific code path). Every configuration runs
``pytest --nbval-lax book/``, so a checked output must match the stored one everywhere. One-thread
configurations run two chapters at a time (two pytest workers), two-thread ones one at a time.
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import torch

from common import ROOT
from transformer_course.utils import cpu_name

CAPABILITIES = {"default": "DEFAULT", "avx2": "AVX2", "avx512": "AVX512"}


def native_capability() -> str:
    """The kernel path PyTorch picks on this machine, e.g. ``AVX2``."""
    return torch.backends.cpu.get_cpu_capability()


def default_matrix() -> list[str]:
    """native, default and every wider path this CPU runs (``avx2``; ``avx512`` where supported), each
    with 1 and 2 threads, plus ``mkl-compatible`` with 1 thread. A path equal to native is not repeated."""
    native = native_capability()
    paths = ["native", "default"]
    paths += [p for p in ("avx2", "avx512") if CAPABILITIES[p] != native and supports(p)]
    return [f"{p}:{t}" for p in paths for t in (1, 2)] + ["mkl-compatible:1"]


def supports(path: str) -> bool:
    """Whether this CPU can run the kernel path (PyTorch falls back silently when it cannot)."""
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
                         env={**os.environ, "ATEN_CPU_CAPABILITY": path}, capture_output=True, text=True)
    return out.stdout.strip() == CAPABILITIES[path]


def environment(config: str) -> dict[str, str]:
    """The environment variables of one configuration ``PATH:THREADS``."""
    path, threads = config.split(":")
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR")}
    env["OMP_NUM_THREADS"] = threads
    if path == "mkl-compatible":
        env.update(ATEN_CPU_CAPABILITY="default", MKL_CBWR="COMPATIBLE")
    elif path != "native":
        if path not in CAPABILITIES:
            raise ValueError(f"kernel path must be native, mkl-compatible or one of {sorted(CAPABILITIES)}, "
                             f"got {path!r}")
        env["ATEN_CPU_CAPABILITY"] = path
    return env


def run(config: str, report: Path, extra: list[str]) -> tuple[int, float]:
    """Run nbval over the book in one configuration; the exit status and the wall time."""
    workers = ["-n", "2", "--dist", "loadfile"] if config.endswith(":1") else ["-p", "no:xdist"]
    cmd = [sys.executable, "-m", "pytest", "--nbval-lax", "book/", "-q", "--no-header",
           f"--junitxml={report}", *workers, *extra]
    start = time.perf_counter()
    rc = subprocess.run(cmd, cwd=ROOT, env=environment(config)).returncode
    return rc, time.perf_counter() - start


def per_chapter(report: Path) -> dict[str, tuple[float, int]]:
    """``{chapter: (seconds, failed cells)}`` from a JUnit report of nbval's run."""
    out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for case in ET.parse(report).getroot().iter("testcase"):
        found = re.search(r"\d\d_\w+", case.get("classname", ""))  # "book.05_multi_head.ipynb"
        chapter = found[0] if found else case.get("classname", "?")
        out[chapter][0] += float(case.get("time", 0))
        out[chapter][1] += any(child.tag in ("failure", "error") for child in case)
    return {k: (v[0], int(v[1])) for k, v in sorted(out.items())}


def table(results: dict[str, tuple[int, float, dict]]) -> str:
    """A Markdown table: chapters × configurations, seconds of the chapter's cells, ✗ where a cell failed."""
    configs = list(results)
    chapters = sorted({c for _, _, chs in results.values() for c in chs})
    lines = ["| chapter | " + " | ".join(f"`{c}`" for c in configs) + " |",
             "| --- |" + " ---: |" * len(configs)]
    for ch in chapters:
        cells = []
        for c in configs:
            seconds, failed = results[c][2].get(ch, (0.0, 0))
            cells.append(f"{seconds:.1f} s" + (f" ✗ {failed}" if failed else ""))
        lines.append(f"| {ch} | " + " | ".join(cells) + " |")
    lines.append("| **all (wall)** | " + " | ".join(
        f"**{'pass' if results[c][0] == 0 else 'FAIL'}** {results[c][1]:.0f} s" for c in configs) + " |")
    return "\n".join(lines)


def document(out: Path, results: dict[str, tuple[int, float, dict]]) -> str:
    """``docs/portability.md``: this machine's table, after the tables of other machines already in ``out``."""
    machine = (f"{cpu_name()}, {os.cpu_count()} cores; native kernel path {native_capability()}; "
               f"torch {torch.__version__}; Python {platform.python_version()}")
    old = out.read_text("utf-8").split("\n## ")[1:] if out.exists() else []
    kept = [f"## {section.rstrip()}\n" for section in old if not section.startswith(cpu_name() + ",")]
    header = ("# Portability matrix\n\n"
              "Written by `python tools/portability.py` (`make portability`): every chapter run by nbval "
              "against its stored outputs in each configuration `PATH:THREADS` (see the tool's docstring). "
              "Seconds are the sum of the chapter's cells; ✗ n: n cells failed. One section per machine; "
              "a run replaces its own machine's section.\n")
    return "\n".join([header, *kept, f"## {machine}\n\n{table(results)}\n"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", metavar="PATH:THREADS", help="run only these configurations")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "portability.md",
                        help="where to write the table (not written with --only)")
    args, extra = parser.parse_known_args(argv)
    configs = args.only or default_matrix()
    reports = ROOT / "_build" / "portability"
    reports.mkdir(parents=True, exist_ok=True)
    results = {}
    for config in configs:
        print(f"== {config}", flush=True)
        report = reports / f"{config.replace(':', '-')}.xml"
        rc, seconds = run(config, report, extra)
        results[config] = (rc, seconds, per_chapter(report) if report.exists() else {})
        print(f"== {config}: {'pass' if rc == 0 else 'FAIL'} in {seconds:.0f} s", flush=True)
    text = table(results)
    print(text)
    if not args.only:
        args.out.write_text(document(args.out, results), encoding="utf-8")
    return max(rc for rc, _, _ in results.values())


if __name__ == "__main__":
    sys.exit(main())
