"""The margin study: how far every training-outcome claim stays from its bound, over seeds and CPU paths.

    python tools/margins.py                          # every chapter with a tc.claim, 5 seeds, 2 paths
    python tools/margins.py book/05_multi_head.ipynb --seeds 3

A chapter checks a training outcome with ``tc.claim(name, value, op, bound)`` and asserts the result.
This tool executes each such chapter top to bottom in a fresh kernel, once per seed shift
(``TC_SEED_SHIFT``: every ``tc.set_seed`` of the chapter moves to other seeds, so model initialisation and
training order change) and per CPU kernel path (``ATEN_CPU_CAPABILITY``: native, ``avx2`` and
``default``; a path equal to the native one runs once), with ``TC_CLAIMS_LOG`` set so that every claim's
value is recorded. Cells keep running after a failed assert. Each run records the machine and the kernel
path it actually used, and a new run replaces the earlier run of the same chapter, seed and kernel path,
so studies made on different machines add up (e.g. ``avx2`` on an AMD EPYC, ``avx512`` on a Xeon).
It writes ``docs/margins.md`` (min / median / max against the bound) and ``docs/margins.json``.
"""
from __future__ import annotations

import argparse
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from portability import cpu_model, native_capability, supports  # noqa: E402
from transformer_course.utils import _OPS  # noqa: E402  (the comparisons tc.claim makes)

PATHS = ("native", "avx2", "default")
REQUIRED_KERNELS = ("avx2", "default")  # every study has these (any x86-64 machine runs them)


def code_fingerprint(path: Path) -> str:
    """A hash of the chapter's code cells: a study is current while its chapter's code is unchanged."""
    nb = json.loads(path.read_text("utf-8"))
    code = "\n\x00".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    return hashlib.sha256(code.encode("utf-8")).hexdigest()[:16]


def chapters_with_claims() -> list[Path]:
    """The chapters whose code calls ``tc.claim``."""
    return [p for p in sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb")) if "tc.claim(" in p.read_text("utf-8")]


def kernel_of(kernel_path: str) -> str:
    """The kernel path PyTorch actually uses for ``kernel_path`` here (``native`` -> e.g. ``avx512``)."""
    if kernel_path == "native":
        return native_capability().lower()
    return kernel_path if supports(kernel_path) else native_capability().lower()


def execute_once(path: Path, seed: int, kernel_path: str, kernel: str) -> dict:
    """Run ``path`` with seed shift ``seed`` on ``kernel_path`` (which is ``kernel`` here) in a subprocess;
    its claims and time."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "claims.jsonl"
        env = {**os.environ, "TC_SEED_SHIFT": str(seed), "TC_CLAIMS_LOG": str(log), "OMP_NUM_THREADS": "1",
               "TC_DEVICE": "cpu"}
        env.pop("ATEN_CPU_CAPABILITY", None)
        if kernel_path != "native":
            env["ATEN_CPU_CAPABILITY"] = kernel_path
        start = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--execute", str(path)], env=env, check=True)
        seconds = time.perf_counter() - start
        claims = [json.loads(line) for line in log.read_text("utf-8").splitlines()] if log.exists() else []
    return {"chapter": path.stem, "code": code_fingerprint(path), "seed": seed, "kernel": kernel,
            "machine": cpu_model(), "seconds": seconds, "claims": claims}


def _execute_in_kernel(path: Path) -> None:
    """Execute a notebook (errors allowed, outputs discarded): the body of one run."""
    import nbformat

    from kernel_runner import run_all_repeatedly

    for _ in run_all_repeatedly(nbformat.read(path, as_version=4), path.parent, runs=1, cell_timeout=600,
                                allow_errors=True):
        pass


def summarise(runs: list[dict]) -> list[dict]:
    """One row per (chapter, claim): the values over all runs against the bound."""
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
        worst = min(v) if row["op"].startswith(">") else max(v)
        out.append({**row, "n": len(v), "min": min(v), "median": statistics.median(v), "max": max(v),
                    "failed": holds.count(False), "worst": worst})
    return out


def _fmt(x: float) -> str:
    return f"{x:.3g}" if x == 0 or 1e-3 <= abs(x) < 1e4 else f"{x:.1e}"


def markdown(study: dict) -> str:
    """``docs/margins.md`` from the study ``{"seeds", "runs"}`` (each run names its machine and kernel)."""
    runs, seeds = study["runs"], study["seeds"]
    rows = summarise(runs)
    total = sum(r["seconds"] for r in runs)
    where: dict[str, dict[tuple[str, str], int]] = {}
    for r in runs:
        counts = where.setdefault(r["chapter"], {})
        counts[r["kernel"], r["machine"]] = counts.get((r["kernel"], r["machine"]), 0) + 1
    lines = [
        "# Margin study of the training-outcome claims",
        "",
        "Written by `python tools/margins.py` (`make margins`); do not edit by hand. Each chapter that",
        "checks a training outcome with `tc.claim(name, value, op, bound)` was executed top to bottom in a",
        f"fresh kernel for every seed shift 0–{seeds - 1} (`TC_SEED_SHIFT`: every `tc.set_seed` of the",
        "chapter moves to other seeds, so initialisation, dropout and whatever else draws from the global",
        "generator change; task data drawn from the chapter's own `torch.Generator` stay the same)",
        "and every CPU kernel path (`ATEN_CPU_CAPABILITY`) listed below, one thread. Shift 0 is what the",
        "stored outputs show.",
        "",
        f"{len(runs)} runs, {total / 60:.1f} min of chapter time.",
        "`failed` counts runs in which the claim did not hold; a chapter asserts only claims with 0 there.",
        "",
        "| chapter | runs: kernel path (machine) × seeds |",
        "| --- | --- |",
    ]
    for chapter in sorted(where):
        ran = ", ".join(f"`{k}` ({m}) × {n}" for (k, m), n in sorted(where[chapter].items()))
        lines.append(f"| {chapter[:2]} | {ran} |")
    lines += [
        "",
        "| chapter | claim | bound | runs | min | median | max | failed |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in sorted(rows, key=lambda r: (r["chapter"], r["claim"])):
        lines.append(f"| {r['chapter'][:2]} | {r['claim']} | {r['op']} {_fmt(r['bound'])} | {r['n']} | "
                     f"{_fmt(r['min'])} | {_fmt(r['median'])} | {_fmt(r['max'])} | {r['failed']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("chapters", nargs="*", type=Path, help="default: every chapter with a tc.claim")
    parser.add_argument("--seeds", type=int, default=5, help="seed shifts 0..N-1 (default 5)")
    parser.add_argument("--paths", nargs="+", default=list(PATHS), help="kernel paths (default native default)")
    parser.add_argument("--jobs", type=int, default=2, help="chapters run at once (default 2)")
    parser.add_argument("--execute", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "margins.md")
    args = parser.parse_args(argv)
    if args.execute:
        _execute_in_kernel(args.execute)
        return 0
    paths = [p.resolve() for p in args.chapters] or chapters_with_claims()
    kernels: dict[str, str] = {}
    for k in args.paths:  # one run per kernel path actually used: native may equal avx2
        kernels.setdefault(kernel_of(k), k)
    jobs = [(p, s, k, kernel) for p in paths for s in range(args.seeds) for kernel, k in kernels.items()]
    with ThreadPoolExecutor(args.jobs) as pool:
        runs = []
        for run in pool.map(lambda job: execute_once(*job), jobs):
            print(f"{run['chapter']} seed {run['seed']} {run['kernel']}: {run['seconds']:.0f} s, "
                  f"{len(run['claims'])} claims", flush=True)
            runs.append(run)
    json_out = args.out.with_suffix(".json")
    if json_out.exists():  # keep earlier runs (other chapters, kernels, machines) that are still current
        current = {p.stem: code_fingerprint(p) for p in chapters_with_claims()}
        new = {(r["chapter"], r["seed"], r["kernel"]) for r in runs}
        runs = [r for r in json.loads(json_out.read_text("utf-8"))["runs"]
                if current.get(r["chapter"]) == r["code"] and (r["chapter"], r["seed"], r["kernel"]) not in new
                ] + runs
    study = {"seeds": args.seeds, "runs": sorted(runs, key=lambda r: (r["chapter"], r["kernel"], r["seed"]))}
    args.out.write_text(markdown(study), encoding="utf-8")
    json_out.write_text(json.dumps(study, indent=1) + "\n", encoding="utf-8")
    failing = [r for r in summarise(runs) if r["failed"]]
    for r in failing:
        print(f"FAILS {r['failed']}/{r['n']}: {r['chapter']}: {r['claim']} ({r['op']} {r['bound']}; "
              f"worst {r['worst']:.4g})")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
