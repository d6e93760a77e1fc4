"""Decode speed of the package now against the package at an older commit, in one interleaved run.

    python tools/bench_compare.py 7e549b8           # GPT-2 small (cached, uncached), narrow model (cached)
    python tools/bench_compare.py 7e549b8 --quick   # tiny sizes: a smoke run in seconds
    python tools/bench_compare.py 7c9fc78 --book    # the whole book then and now, back to back (~12 min)

The older package is taken from git (``git archive``) into a temporary folder and imported under another
name, so both versions and ``transformers.GPT2LMHeadModel`` decode the same prompt with the same random
weights, round by round, in one process (this machine's speed drifts by ±10 % within minutes and by up to
2x between sessions: separate runs cannot be compared). Sizes, prompt and new tokens are ``make bench``'s.
Prints median tokens/s of each, the ratios ours/transformers for both versions, and whether all three
produced the same tokens; ``--out`` also writes them as JSON.

``--book`` instead executes every chapter of the book as it was at the commit (its chapters, package
and tools, from ``git archive``) and then of this working tree, one after the other: the book's time
depends on the machine far more than on the code (the same commit's book measured 129 s and 360 s on
two days), so only a back-to-back run says whether the book grew.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import torch

import transformer_course as tc

from bench import FULL, QUICK, Sizes
from bench_measure import gpt2_pair, hf_greedy
from bench_timer import interleaved
from common import ROOT


def package_at(commit: str, folder: Path) -> ModuleType:
    """``src/transformer_course`` as it was at ``commit``, imported as ``tc_<commit>`` (its imports are relative)."""
    archive = subprocess.run(["git", "archive", commit, "src/transformer_course"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    name = f"tc_{commit}"
    (folder / "src" / "transformer_course").rename(folder / name)
    spec = importlib.util.spec_from_file_location(name, folder / name / "__init__.py",
                                                  submodule_search_locations=[str(folder / name)])
    package = sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(package)
    return package


def book_at(commit: str, folder: Path) -> dict:
    """Seconds per chapter of the book at ``commit``, run by that commit's own tools in a fresh process."""
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    program = ("import json, sys; sys.argv = ['bench']\n"  # run in its tools/: they import each other
               "try:\n    from bench_measure import bench_book\n"
               "except ImportError:\n    from bench import bench_book\n"
               "print(json.dumps(bench_book()))")
    env = os.environ | {"PYTHONPATH": str(folder / "src")}  # the kernels import that commit's package
    out = subprocess.run([sys.executable, "-c", program], cwd=folder / "tools", env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def compare(old: ModuleType, config: tc.TransformerConfig, sizes: Sizes, modes: tuple[bool, ...],
            device: torch.device) -> dict:
    """Tokens/s of transformers, the old package and this one (cached and/or uncached), interleaved."""
    hf, ours = gpt2_pair(config, device)
    before = old.from_hf_gpt2(hf).eval().to(device)
    prompt = torch.randint(0, config.vocab_size, (1, sizes.prompt), generator=torch.Generator().manual_seed(1))
    prompt = prompt.to(device)
    outputs: dict[str, torch.Tensor] = {}

    def run(who: str, cache: bool, n: int = sizes.new_tokens) -> None:
        key = f"{who} {'cached' if cache else 'uncached'}"
        if who == "transformers":
            outputs[key] = hf_greedy(hf, prompt, n, cache)
        else:
            model, package = (before, old) if who == "before" else (ours, tc)
            outputs[key] = package.generate(model, prompt, n, use_cache=cache, temperature=0.0)

    whos = ("transformers", "before", "now")
    for cache in modes:  # warm-up: weights touched, buffers allocated
        for who in whos:
            run(who, cache, n=8)
    fns = {f"{who} {'cached' if c else 'uncached'}": (lambda who=who, c=c: run(who, c)) for c in modes for who in whos}
    seconds = interleaved(fns, sizes.rounds, device, warm_up=False)
    rate = {name: sizes.new_tokens / s for name, s in seconds.items()}
    labels = ["cached" if c else "uncached" for c in modes]
    return {
        "config": {"n_layers": config.n_layers, "d_model": config.d_model, "vocab_size": config.vocab_size},
        "tokens_per_s": rate,
        "ratio_to_transformers": {f"{who} {label}": rate[f"{who} {label}"] / rate[f"transformers {label}"]
                                  for who in ("before", "now") for label in labels},
        "same_tokens": all(torch.equal(outputs[f"{who} {label}"], outputs[f"transformers {label}"])
                           for who in ("before", "now") for label in labels),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("commit", help="the older commit (any git revision)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--book", action="store_true", help="time the whole book then and now instead")
    parser.add_argument("--out", type=Path, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    if args.book:
        from bench_measure import bench_book

        with tempfile.TemporaryDirectory() as tmp:
            books = {args.commit: book_at(args.commit, Path(tmp)), "now": bench_book()}
        for name, book in books.items():
            chapters = ", ".join(f"{c[:2]} {s:.1f}" for c, s in book["chapters"].items())
            print(f"{name}: {book['total']:.1f} s in all ({chapters})")
        if args.out:
            args.out.write_text(json.dumps(books, indent=1) + "\n")
        return 0
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    device, sizes = torch.device("cpu"), QUICK if args.quick else FULL
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        old = package_at(args.commit, Path(tmp))
        for name, config, modes in (("gpt2", sizes.gpt2, (True, False)), ("narrow", sizes.narrow, (True,))):
            results[name] = r = compare(old, config, sizes, modes, device)
            for key, value in r["tokens_per_s"].items():
                print(f"{name} {key}: {value:.1f} tokens/s", flush=True)
            for key, value in r["ratio_to_transformers"].items():
                print(f"{name} {key} / transformers: {value:.2f}x", flush=True)
            print(f"{name}: same tokens from all three: {r['same_tokens']}", flush=True)
    if args.out:
        args.out.write_text(json.dumps({"before": args.commit, "rounds": sizes.rounds} | results, indent=1) + "\n")
    return 0 if all(r["same_tokens"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
