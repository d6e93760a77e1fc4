"""The course's performance measurements: ``make bench`` (5-9 minutes on 2 CPU cores).

    python tools/bench.py                 # everything; writes bench/results.{json,md}
    python tools/bench.py --quick         # a tiny smoke run (the tests run it), writes to --out
    python tools/bench.py --only decode   # one section: decode, train, cache, gqa, bandwidth, attention, book
    python tools/bench.py --device cuda --out bench/cuda   # the same on a GPU (the book: any device)

Every figure except the book's is the median of interleaved rounds after a warm-up (these machines
are noisy: never compare single runs). Sections:

1. decode: our ``DecoderOnly`` against ``transformers.GPT2LMHeadModel`` with the same random weights,
   fp32, batch 1, greedy, with and without the KV cache; both must produce the same tokens. Twice: in
   GPT-2-small shape, where reading the weights dominates, and in a narrow 4-layer shape, where the
   per-token work around the matrix products does.
2. train: training steps/s (forward, loss, backward, AdamW) of chapter 14's poet model and of
   ``GPT2LMHeadModel`` in the same configuration, same weights, same batch of 32 poems × 80 tokens.
3. cache: time of one decode step at growing positions, cached vs uncached, and total time for
   64 … 512 new tokens on a small model.
4. bandwidth: the machine's memory bandwidth (timed in the decode rounds, under the same load) and
   the bytes read per decoded token give an upper bound on tokens/s; our cached decode as a fraction of it.
5. gqa: cached decode at a long context with 8, 2 and 1 K/V heads (grouped-query, multi-query attention):
   where reading the cache dominates, fewer K/V heads read fewer bytes per token.
6. attention: the didactic and the tiled (online-softmax) attention against ``F.scaled_dot_product_attention``:
   time and peak memory.
7. book: each chapter's execution time (fresh kernel, 2 threads) and the whole book's.
"""
from __future__ import annotations

# Layout: this file is the command and the table of sections (which sizes, which order); the measurements
# are in bench_measure.py, the one timer in bench_timer.py, the attention probe (a fresh process per
# length) in bench_peak.py, and the Markdown report in bench_report.py.
import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable

import torch

import transformer_course as tc
from transformer_course import poet
from transformer_course.poems import load_poems

from bench_measure import (
    bandwidth_kernels,
    bench_attention,
    bench_book,
    bench_cache,
    bench_decode,
    bench_gqa,
    bench_train,
)
from bench_report import machine, markdown  # also reachable as bench.machine, bench.markdown
from common import ROOT


@dataclasses.dataclass(frozen=True)
class Sizes:
    """Every size the sections use: ``FULL`` for ``make bench``, ``QUICK`` for the smoke run (``--quick``)."""

    gpt2: tc.TransformerConfig  # decode, and the bandwidth bound (its weights and cache are what a token reads)
    narrow: tc.TransformerConfig  # the second decode: GPT-2's vocabulary, a narrow body
    small: tc.TransformerConfig  # cache: the model whose steps are timed at growing positions
    prompt: int  # decode: prompt tokens
    new_tokens: int  # decode: tokens generated per run
    rounds: int  # interleaved rounds (decode, cache)
    poet: tc.TransformerConfig | None  # train; None: chapter 14's poet (its vocabulary is read from the corpus)
    poet_batch: int
    train_rounds: int
    cache_lengths: tuple[int, ...]  # cache: totals after this many new tokens
    cache_positions: tuple[int, ...]  # cache: one step timed at each position
    attention_lengths: tuple[int, ...]
    gqa: tc.TransformerConfig  # gqa: the body; n_kv_heads varies
    gqa_kv_heads: tuple[int, ...]
    gqa_context: int  # the position decoding starts at
    gqa_steps: int  # tokens decoded from there per round
    bandwidth_bytes: int  # the buffer the bandwidth kernels read, far larger than the CPU caches
    skipped: tuple[str, ...] = ()  # sections never run at these sizes


_TINY = tc.TransformerConfig(vocab_size=97, d_model=24, n_heads=3, n_layers=2, d_ff=96, max_len=64,
                             activation="gelu_tanh")
QUICK = Sizes(gpt2=_TINY, narrow=_TINY, small=_TINY, prompt=8, new_tokens=8, rounds=1,
              poet=dataclasses.replace(_TINY, activation="gelu", dropout=0.2), poet_batch=2, train_rounds=12,
              cache_lengths=(8, 16), cache_positions=(8, 16), attention_lengths=(32, 64), bandwidth_bytes=2**22,
              gqa=_TINY.replace(positional="rope", n_heads=4, d_model=32), gqa_kv_heads=(4, 2, 1), gqa_context=24,
              gqa_steps=4,
              skipped=("book",))
_GPT2 = tc.TransformerConfig.gpt2_small()
FULL = Sizes(gpt2=_GPT2,
             narrow=tc.TransformerConfig(vocab_size=_GPT2.vocab_size, d_model=256, n_heads=4, n_layers=4, d_ff=1024,
                                         max_len=1024, activation="gelu_tanh"),
             small=tc.TransformerConfig(vocab_size=256, d_model=256, n_heads=4, n_layers=4, d_ff=1024, max_len=1024),
             prompt=32, new_tokens=128, rounds=5, poet=None, poet_batch=32, train_rounds=60,
             cache_lengths=(64, 128, 256, 512), cache_positions=(32, 128, 256, 512),
             attention_lengths=(128, 256, 512, 1024, 2048), bandwidth_bytes=2**30,
             gqa=tc.TransformerConfig(vocab_size=256, d_model=256, n_heads=8, n_layers=4, d_ff=1024, max_len=4160,
                                      positional="rope"), gqa_kv_heads=(8, 2, 1), gqa_context=4096, gqa_steps=32)


@dataclasses.dataclass
class Run:
    """What each section reads and fills: the sizes, the device, the sections asked for, the results so far."""

    sizes: Sizes
    device: torch.device
    asked: set[str]
    results: dict
    read_seconds: dict[str, float] = dataclasses.field(default_factory=dict)  # bandwidth kernels, timed in decode


def run_decode(run: Run) -> None:
    """GPT-2 small, with the bandwidth kernels timed in the same rounds; then the narrow shape (decode only)."""
    s, device = run.sizes, run.device
    kernels = bandwidth_kernels(s.bandwidth_bytes, device)
    for fn in kernels.values():
        fn()  # warm-up
    run.results["decode"] = bench_decode(s.gpt2, s.prompt, s.new_tokens, s.rounds, device, also=kernels)
    run.read_seconds = run.results["decode"].pop("also_seconds")
    del kernels  # frees the buffer
    print(f"decode: {run.results['decode']['tokens_per_s']}", flush=True)
    if "decode" in run.asked:
        run.results["decode_narrow"] = bench_decode(s.narrow, s.prompt, s.new_tokens, s.rounds, device,
                                                    uncached=False)  # the regime, briefly
        print(f"decode, narrow: {run.results['decode_narrow']['tokens_per_s']}", flush=True)


def run_bandwidth(run: Run) -> None:
    """The fastest kernel's read rate over the bytes a decoded token reads: a bound on tokens/s."""
    s, d = run.sizes, run.results["decode"]
    rates = {kind: s.bandwidth_bytes / seconds for kind, seconds in run.read_seconds.items()}
    bw = max(rates.values())
    cache_bytes = tc.kv_cache_bytes(s.gpt2, s.prompt + s.new_tokens // 2)  # the average cache read per token
    per_token = d["weight_bytes"] + cache_bytes
    bound = bw / per_token
    run.results["bandwidth"] = {"bytes_per_s": bw, "bytes_per_s_by_kernel": rates, "bytes_per_token": per_token,
                                "bound_tokens_per_s": bound,
                                "fraction_of_bound": d["tokens_per_s"]["ours cached"] / bound}
    print(f"bandwidth: {bw / 1e9:.1f} GB/s, bound {bound:.1f} tokens/s", flush=True)


def chapter14_poet() -> tc.TransformerConfig:
    vocab = poet.CharVocab("".join(p.text for p in load_poems("train")))  # chapter 14's model and batch
    return tc.TransformerConfig(vocab_size=len(vocab), **poet.POET_SIZE)


def run_train(run: Run) -> None:
    s = run.sizes
    run.results["train"] = bench_train(s.poet or chapter14_poet(), s.poet_batch, s.train_rounds, run.device)
    print(f"train: {run.results['train']['steps_per_s']}", flush=True)


def run_cache(run: Run) -> None:
    s = run.sizes
    run.results["cache"] = bench_cache(s.small, list(s.cache_lengths), list(s.cache_positions), s.rounds, run.device)
    print("cache: done", flush=True)


def run_gqa(run: Run) -> None:
    s = run.sizes
    run.results["gqa"] = bench_gqa(s.gqa, list(s.gqa_kv_heads), s.gqa_context, s.gqa_steps, s.rounds, run.device)
    print(f"gqa: {run.results['gqa']['ms_per_token']}", flush=True)


def run_attention(run: Run) -> None:
    run.results["attention"] = bench_attention(list(run.sizes.attention_lengths), run.device)
    print("attention: done", flush=True)


def run_book(run: Run) -> None:
    run.results["book"] = bench_book()
    print(f"book: {run.results['book']['total']:.1f} s", flush=True)


@dataclasses.dataclass(frozen=True)
class Section:
    name: str  # an --only choice, and the key of its time in section_seconds
    run: Callable[[Run], None]
    also_for: tuple[str, ...] = ()  # sections that need this one's measurements: it runs for them too


# The sections, in the order they run. Bandwidth is timed inside the decode rounds (same load), so
# --only bandwidth runs the GPT-2-small decode too (its time counts as decode's).
SECTIONS = [
    Section("decode", run_decode, also_for=("bandwidth",)),
    Section("bandwidth", run_bandwidth),
    Section("train", run_train),
    Section("cache", run_cache),
    Section("gqa", run_gqa),
    Section("attention", run_attention),
    Section("book", run_book),
]


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in seconds")
    parser.add_argument("--only", choices=["decode", "train", "cache", "gqa", "bandwidth", "attention", "book"],
                        action="append")
    parser.add_argument("--out", type=Path, default=ROOT / "bench")
    parser.add_argument("--device", default="cpu", help="cpu (the default) or cuda")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    device = torch.device(args.device)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    sizes = QUICK if args.quick else FULL
    asked = set(args.only or [section.name for section in SECTIONS]) - set(sizes.skipped)
    run = Run(sizes, device, asked, {"machine": machine(device), "section_seconds": {}})
    for section in SECTIONS:
        if section.name in asked or asked & set(section.also_for):
            started = time.perf_counter()
            section.run(run)
            run.results["section_seconds"][section.name] = time.perf_counter() - started
    results = run.results
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1, default=str) + "\n", encoding="utf-8")
    (args.out / "results.md").write_text(markdown(results) + "\n", encoding="utf-8")
    print(f"wrote {args.out / 'results.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
