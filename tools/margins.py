"""The perturbation study: how far every training-outcome claim stays from its bound, over seeds, CPU
kernel paths, math-library code paths and machines.

    python tools/margins.py                          # every chapter with a tc.claim: 5 seeds x 5 variants
    python tools/margins.py book/07_ffn.ipynb --seeds 8
    python tools/margins.py book/07_ffn.ipynb --seeds 5 --first-seed 5 --variants native default

A chapter checks a training outcome with ``tc.claim(name, value, op, bound)`` and asserts the result.
This tool executes each such chapter in a fresh kernel, once per seed shift (``TC_SEED_SHIFT``: every
``tc.set_seed`` of the chapter moves to other seeds, so initialisation and training order change) and per
*variant* of the machine's arithmetic, each of which rounds differently and so stands in for another
machine's summation order:

- ``native``, ``avx2``, ``default``: PyTorch's CPU kernel path (``ATEN_CPU_CAPABILITY``);
- ``onednn-avx``: oneDNN's instruction set capped at AVX (``ONEDNN_MAX_CPU_ISA=AVX``);
- ``mkl-compatible``: MKL's conditional-reproducibility mode (``MKL_CBWR=COMPATIBLE``), which takes MKL's
  matrix products off their machine-specific code path.

``TC_CLAIMS_LOG`` records every claim's value. A run executes the chapter up to its last cell that makes a
claim (later cells cannot change one), figures are not drawn (``MPLBACKEND=agg``), cells keep running
after a failed assert. Each run records the machine and the variant it actually used; a new run replaces
the earlier run of the same chapter, seed, variant and machine, so studies on several machines add up.
Runs stay current while the chapter's code is unchanged up to prints and comments (``code_fingerprint``).
It writes ``docs/margins.md`` (runs, worst value and margin against each bound) and ``docs/margins.json``.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from transformer_course.utils import _OPS, cpu_name  # _OPS: the comparisons tc.claim makes

from common import ROOT, chapters
from portability import native_capability, supports

VARIANTS = {  # name -> environment; ATEN_CPU_CAPABILITY unset is the native path
    "native": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "default": {"ATEN_CPU_CAPABILITY": "default"},
    "onednn-avx": {"ONEDNN_MAX_CPU_ISA": "AVX"},
    "mkl-compatible": {"MKL_CBWR": "COMPATIBLE"},
}
REQUIRED_KERNELS = ("avx2", "default")  # every chapter's study has these (any x86-64 machine runs them)
MIN_RUNS = 40  # runs per chapter that makes a claim, all machines together


def _without_prints(source: str) -> str:
    """``source`` without comments and ``print(...)`` statements (they cannot change a claim); the text
    itself where it is not plain Python (a cell magic)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source

    class Strip(ast.NodeTransformer):
        def visit_Expr(self, node: ast.Expr):
            call = node.value
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "print":
                return None  # removed (a body left empty still unparses, and still hashes the same)
            return node

    return ast.unparse(Strip().visit(tree))


def code_fingerprint(path: Path) -> str:
    """A hash of the chapter's code cells up to prints and comments: a study is current while it holds."""
    nb = json.loads(path.read_text("utf-8"))
    code = "\n\x00".join(_without_prints("".join(c["source"])) for c in nb["cells"] if c["cell_type"] == "code")
    return hashlib.sha256(code.encode("utf-8")).hexdigest()[:16]


def chapters_with_claims() -> list[Path]:
    """The chapters whose code calls ``tc.claim``."""
    return [p for p in chapters() if "tc.claim(" in p.read_text("utf-8")]


def variant_of(name: str) -> str:
    """What ``name`` actually runs here, e.g. ``native`` -> ``avx512``, ``onednn-avx`` -> ``avx512+onednn-avx``
    (a kernel path the CPU lacks falls back to the native one)."""
    native = native_capability().lower()
    if name not in VARIANTS:
        raise ValueError(f"variant must be one of {sorted(VARIANTS)}, got {name!r}")
    if name in ("native", "avx2", "default"):
        return native if name == "native" or not supports(name) else name
    return f"{native}+{name}"


def execute_once(path: Path, seed: int, name: str, kernel: str) -> dict:
    """Run ``path`` with seed shift ``seed`` under variant ``name`` (``kernel`` here) in a subprocess; its
    claims and time."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "claims.jsonl"
        env = {k: v for k, v in os.environ.items()
               if k not in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_CBWR")}
        env.update(TC_SEED_SHIFT=str(seed), TC_CLAIMS_LOG=str(log), OMP_NUM_THREADS="1", TC_DEVICE="cpu",
                   MPLBACKEND="agg", **VARIANTS[name])
        start = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--execute", str(path)], env=env, check=True)
        seconds = time.perf_counter() - start
        claims = [json.loads(line) for line in log.read_text("utf-8").splitlines()] if log.exists() else []
    return {"chapter": path.stem, "code": code_fingerprint(path), "seed": seed, "kernel": kernel,
            "machine": cpu_name(), "seconds": seconds, "claims": claims}


def _execute_in_kernel(path: Path) -> None:
    """Execute a notebook up to its last cell that makes a claim (errors allowed, outputs discarded)."""
    import nbformat

    from kernel_runner import run_all_repeatedly

    nb = nbformat.read(path, as_version=4)
    claims = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "claim(" in c.source]
    nb.cells = nb.cells[: claims[-1] + 1] if claims else nb.cells
    for _ in run_all_repeatedly(nb, path.parent, runs=1, cell_timeout=600, allow_errors=True):
        pass


def summarise(runs: list[dict]) -> list[dict]:
    """One row per (chapter, claim): the values over all runs against the bound, the worst one and its
    margin (how far the worst value is on the right side of the bound; negative where it failed)."""
    rows: dict[tuple[str, str], dict] = {}
    for run in runs:
        seen: dict[str, int] = {}
        for c in run["claims"]:
            seen[c["name"]] = seen.get(c["name"], 0) + 1
            name = c["name"] if seen[c["name"]] == 1 else f"{c['name']} (#{seen[c['name']]})"
            row = rows.setdefault((run["chapter"], name), {"chapter": run["chapter"], "claim": name,
                                                          "op": c["op"], "bound": c["bound"], "values": []})
            row["values"].append(c["value"])
    out = []
    for row in rows.values():
        v = row["values"]
        holds = [_OPS[row["op"]](x, row["bound"]) for x in v]
        above = row["op"].startswith(">")
        worst = min(v) if above else max(v)
        margin = worst - row["bound"] if above else row["bound"] - worst
        out.append({**row, "n": len(v), "min": min(v), "median": statistics.median(v), "max": max(v),
                    "failed": holds.count(False), "worst": worst, "margin": margin,
                    "relative": margin / abs(row["bound"]) if row["bound"] else None})
    return out


def tightest(rows: list[dict], k: int = 5) -> list[dict]:
    """The ``k`` claims closest to their bounds, relative to the bound (bound 0: by the absolute margin)."""
    return sorted(rows, key=lambda r: (r["relative"] if r["relative"] is not None else r["margin"]))[:k]


def _fmt(x: float) -> str:
    return f"{x:.3g}" if x == 0 or 1e-3 <= abs(x) < 1e4 else f"{x:.1e}"


def _rel(r: dict) -> str:
    return "–" if r["relative"] is None else f"{r['relative']:.0%}" if abs(r["relative"]) < 100 else "≥100×"


def markdown(study: dict) -> str:
    """``docs/margins.md`` from the study ``{"runs"}`` (each run names its seed, variant and machine)."""
    runs = study["runs"]
    rows = summarise(runs)
    total = sum(r["seconds"] for r in runs)
    where: dict[str, dict[tuple[str, str], list[int]]] = {}
    for r in runs:
        where.setdefault(r["chapter"], {}).setdefault((r["machine"], r["kernel"]), []).append(r["seed"])
    lines = [
        "# Perturbation study of the training-outcome claims",
        "",
        "Written by `python tools/margins.py` (`make margins`); do not edit by hand. Each chapter that",
        "checks a training outcome with `tc.claim(name, value, op, bound)` was executed in a fresh kernel,",
        "one thread, for several seed shifts (`TC_SEED_SHIFT`: every `tc.set_seed` of the chapter moves to",
        "other seeds, so initialisation, dropout and whatever else draws from the global generator change;",
        "task data drawn from the chapter's own `torch.Generator` stay the same) under several variants of",
        "the arithmetic, on each machine listed: PyTorch's CPU kernel path (`avx512`, `avx2`, `default`),",
        "oneDNN capped at AVX (`+onednn-avx`), MKL's compatible code path (`+mkl-compatible`). Each variant",
        "rounds differently, as another machine would, and a training run amplifies the difference. Shift 0",
        "on the native path is what the stored outputs show.",
        "",
        f"{len(runs)} runs, {total / 60:.1f} min of chapter time. A chapter asserts a claim only when it held",
        f"in every run (`failed` 0) with a margin; every chapter has at least {MIN_RUNS} runs.",
        "`margin` is how far the worst run stayed on the right side of the bound, `rel.` that margin over",
        "the bound.",
        "",
        "| chapter | runs | machine: variant (seed shifts) |",
        "| --- | ---: | --- |",
    ]
    for chapter in sorted(where):
        n = sum(len(s) for s in where[chapter].values())
        groups: dict[tuple[str, str], list[str]] = {}  # (machine, seeds) -> variants
        for (m, k), s in sorted(where[chapter].items()):
            groups.setdefault((m, _seeds(s)), []).append(f"`{k}`")
        ran = "; ".join(f"{m}: {', '.join(ks)} × seeds {s}" for (m, s), ks in groups.items())
        lines.append(f"| {chapter[:2]} | {n} | {ran} |")
    lines += ["", "The five tightest claims:", "",
              "| chapter | claim | bound | runs | worst | margin | rel. |",
              "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    for r in tightest(rows):
        lines.append(f"| {r['chapter'][:2]} | {r['claim']} | {r['op']} {_fmt(r['bound'])} | {r['n']} | "
                     f"{_fmt(r['worst'])} | {_fmt(r['margin'])} | {_rel(r)} |")
    lines += [
        "",
        "Every claim:",
        "",
        "| chapter | claim | bound | runs | min | median | max | worst | margin | rel. | failed |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in sorted(rows, key=lambda r: (r["chapter"], r["claim"])):
        lines.append(f"| {r['chapter'][:2]} | {r['claim']} | {r['op']} {_fmt(r['bound'])} | {r['n']} | "
                     f"{_fmt(r['min'])} | {_fmt(r['median'])} | {_fmt(r['max'])} | {_fmt(r['worst'])} | "
                     f"{_fmt(r['margin'])} | {_rel(r)} | {r['failed']} |")
    return "\n".join(lines) + "\n"


def _seeds(seeds: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``0–2, 5``."""
    seeds, parts = sorted(seeds), []
    for s in seeds:
        if parts and s == parts[-1][1] + 1:
            parts[-1][1] = s
        else:
            parts.append([s, s])
    return ", ".join(f"{a}" if a == b else f"{a}–{b}" for a, b in parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chapters", nargs="*", type=Path, help="default: every chapter with a tc.claim")
    parser.add_argument("--seeds", type=int, default=5, help="how many seed shifts (default 5)")
    parser.add_argument("--first-seed", type=int, default=0, help="the first seed shift (default 0)")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS),
                        help="variants of the arithmetic (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="chapters run at once (default 2)")
    parser.add_argument("--execute", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "margins.md")
    args = parser.parse_args(argv)
    if args.execute:
        _execute_in_kernel(args.execute)
        return 0
    paths = [p.resolve() for p in args.chapters] or chapters_with_claims()
    kernels: dict[str, str] = {}
    for name in args.variants:  # one run per variant actually different here: native may equal avx2
        kernels.setdefault(variant_of(name), name)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    jobs = [(p, s, name, kernel) for p in paths for s in seeds for kernel, name in kernels.items()]
    json_out = args.out.with_suffix(".json")
    earlier = json.loads(json_out.read_text("utf-8"))["runs"] if json_out.exists() else []
    runs = []
    with ThreadPoolExecutor(args.jobs) as pool:
        for run in pool.map(lambda job: execute_once(*job), jobs):
            print(f"{run['chapter']} seed {run['seed']} {run['kernel']}: {run['seconds']:.0f} s, "
                  f"{len(run['claims'])} claims", flush=True)
            runs.append(run)
            write(args.out, earlier, runs)  # after every run: an interrupted study keeps what it measured
    failing = [r for r in summarise(runs) if r["failed"]]
    for r in failing:
        print(f"FAILS {r['failed']}/{r['n']}: {r['chapter']}: {r['claim']} ({r['op']} {r['bound']}; "
              f"worst {r['worst']:.4g})")
    return 1 if failing else 0


def write(out: Path, earlier: list[dict], runs: list[dict]) -> None:
    """``out`` and its ``.json``: ``runs`` and the ``earlier`` runs that are still current and not redone."""
    current = {p.stem: code_fingerprint(p) for p in chapters_with_claims()}
    key = lambda r: (r["chapter"], r["seed"], r["kernel"], r["machine"])  # noqa: E731
    new = {key(r) for r in runs}
    kept = [r for r in earlier if current.get(r["chapter"]) == r["code"] and key(r) not in new]
    study = {"runs": sorted(kept + runs, key=lambda r: (r["chapter"], r["machine"], r["kernel"], r["seed"]))}
    out.write_text(markdown(study), encoding="utf-8")
    out.with_suffix(".json").write_text(json.dumps(study, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
