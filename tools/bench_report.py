"""The report of ``tools/bench.py``: ``bench/results.md`` written from the figures in ``bench/results.json``.

``markdown(results)`` is the whole page: a header on the machine, then one part per measured section, in
``PARTS`` order (each part is skipped when its section was not run). Nothing here measures anything,
except ``machine()``, which describes the computer the figures come from.
"""
from __future__ import annotations

import os
import platform
import time
from typing import Callable

import torch

import transformer_course as tc


def machine(device: torch.device) -> dict:
    return {"cpu": tc.utils.cpu_name(), "cores": os.cpu_count(), "threads": torch.get_num_threads(),
            "python": platform.python_version(), "torch": torch.__version__, "device": device_name(device),
            "book_device": device_name(tc.get_device()), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def device_name(device: torch.device) -> str:
    """``"cpu"``, or the accelerator's name, e.g. ``"cuda: NVIDIA H200"``."""
    return f"cuda: {torch.cuda.get_device_name(device)}" if device.type == "cuda" else device.type


def header_lines(m: dict) -> list[str]:
    return ["# Benchmark results", "", f"Machine: {m['cpu']}, {m['cores']} cores, {m['threads']} torch threads; "
            f"Python {m['python']}, torch {m['torch']}; {m['date']}.", "",
            f"Device: {m['device']} (the book's chapters: {m['book_device']}, what `tc.get_device()` picks)."
            + (" On a GPU: `python tools/bench.py --device cuda --out bench/cuda`." if m["device"] == "cpu" else ""),
            ""]


def decode_lines(d: dict, m: dict | None = None) -> list[str]:
    """One decode section of ``results.md``: the table, the ratios, and where each implementation's time goes."""
    c, tps = d["config"], d["tokens_per_s"]
    lines = [f"## Decode: {c['n_layers']} layers, {c['n_heads']} heads, d_model {c['d_model']}, vocabulary "
             f"{c['vocab_size']}; fp32, batch 1, greedy, {d['prompt_len']}-token prompt, {d['new_tokens']} new tokens",
             "", "| implementation | tokens/s |", "| --- | --- |"]
    lines += [f"| {name} | {v:.1f} |" for name, v in tps.items()]
    ms = {name: 1e3 / v for name, v in tps.items()}  # ms per token
    floor, ours, theirs = ms["matmul floor"], ms["ours cached"], ms["transformers cached"]
    ratios = ", ".join(f"{label} {r:.2f}×" for label, r in d["ratios"].items())
    lines += ["", f"ours / transformers: {ratios}; identical tokens: {d['same_tokens']}.", "",
              f"*matmul floor*: each step reduced to its matrix-vector products (every weight matrix times one "
              f"vector, no attention, norms or Python around them): {floor:.2f} ms per token. Per cached token, "
              f"ours spends {ours:.2f} ms, {ours - floor:.2f} ms of it beyond the floor; transformers spends "
              f"{theirs:.2f} ms, {theirs - floor:.2f} ms beyond it. Even with nothing but the weight reads, the "
              f"ratio could not exceed {theirs / floor:.2f}×.", ""]
    return lines


def train_lines(t: dict, m: dict) -> list[str]:
    c = t["config"]
    lines = [f"## Training steps: the chapter 14 poet ({c['n_layers']} layers, d_model {c['d_model']}, "
             f"vocabulary {c['vocab_size']}, dropout {c['dropout']}), batch {t['batch']} × {c['max_len']}", "",
             "| implementation | steps/s |", "| --- | --- |"]
    lines += [f"| {name} | {v:.2f} |" for name, v in t["steps_per_s"].items()]
    lo, hi = t["ratio_quartiles"]
    lines += ["", f"Ours / transformers: **{t['ours_over_transformers']:.2f}×**, the median of {t['rounds']} "
              f"rounds' ratios (quartiles {lo:.2f}–{hi:.2f}; forward, loss, backward, AdamW; same weights, "
              f"same batch; same loss before the first step: {t['same_loss_at_start']}).", ""]
    return lines


def bandwidth_lines(b: dict, m: dict) -> list[str]:
    return ["## The memory-bandwidth bound", "",
            "Read bandwidth by kernel, timed in the GPT-2-small decode rounds: "
            + ", ".join(f"{kind} {rate / 1e9:.1f} GB/s" for kind, rate in b["bytes_per_s_by_kernel"].items())
            + ".",
            "",
            f"At the fastest, {b['bytes_per_s'] / 1e9:.1f} GB/s, and {b['bytes_per_token'] / 1e6:.0f} MB read "
            f"per decoded token (fp32 weights + the average cache), an fp32 decode can reach at most about "
            f"{b['bound_tokens_per_s']:.1f} tokens/s here. Our cached decode reaches "
            f"{b['fraction_of_bound']:.0%} of it.", ""]


def cache_lines(cc: dict, m: dict) -> list[str]:
    lines = ["## How the cache pays off with length (small model: "
             f"{cc['config']['n_layers']} layers, d_model {cc['config']['d_model']}, "
             f"vocabulary {cc['config']['vocab_size']})",
             "", "| position | ms per step, cached | ms per step, uncached |", "| --- | --- | --- |"]
    lines += [f"| {p} | {v['cached']:.2f} | {v['uncached']:.2f} |" for p, v in cc["ms_per_step_at_position"].items()]
    lines += ["", "| new tokens | total s, cached | total s, uncached | speed-up |", "| --- | --- | --- | --- |"]
    lines += [f"| {n} | {v['cached']:.2f} | {v['uncached']:.2f} | {v['uncached'] / v['cached']:.1f}× |"
              for n, v in cc["total_seconds"].items()]
    lines += ["", f"Totals: the time until the n-th new token was chosen, in runs of {max(cc['total_seconds'])} "
              f"new tokens after a {cc['prompt_tokens']}-token prompt (a shorter run does the same steps).", ""]
    return lines


def attention_lines(a: dict, m: dict) -> list[str]:
    kinds = {"didactic": "didactic", "tiled": "tiled (online softmax)", "sdpa": "SDPA"}
    lines = ["## Attention: didactic, tiled and `F.scaled_dot_product_attention` (1 × 12 heads × T × 64, causal)",
             "", "| T | " + " | ".join(f"{name} ms" for name in kinds.values()) + " | "
             + " | ".join(f"{name} extra peak MiB" for name in kinds.values()) + " |",
             "| --- " * (1 + 2 * len(kinds)) + "|"]
    lines += [f"| {T} | " + " | ".join(f"{r[k]['ms']:.2f}" if k in r else "–" for k in kinds) + " | "
              + " | ".join(f"{r[k]['peak_mib']:.0f}" if k in r else "–" for k in kinds) + " |" for T, r in a.items()]
    what = ("the CUDA allocator's peak above what was allocated before" if m["device"].startswith("cuda")
            else "growth of the process's peak resident memory")
    return lines + ["", f"Peak: {what} while attention runs (a fresh process per length, SDPA first; the tiled "
                    "attention reads the keys in blocks of 128).", ""]


def gqa_lines(g: dict, m: dict) -> list[str]:
    c = g["config"]
    lines = [f"## Grouped-query attention: cached decode at position {g['context']} ({c['n_layers']} layers, "
             f"{c['n_heads']} query heads, d_model {c['d_model']})", "",
             "| K/V heads | ms per token | cache MiB read per token | tokens/s |", "| --- | --- | --- | --- |"]
    lines += [f"| {name.split('=')[1]} | {ms:.2f} | {g['cache_bytes'][name] / 2**20:.1f} | {1e3 / ms:.1f} |"
              for name, ms in g["ms_per_token"].items()]
    return lines + ["", f"Weights: {g['weight_bytes'] / 2**20:.1f} MiB, read once per token by every variant; "
                    "the cache shrinks by n_heads / n_kv_heads.", ""]


def section_seconds_lines(took: dict, m: dict) -> list[str]:
    if not took:
        return []
    return ["Time per section: " + ", ".join(f"{name} {s:.0f} s" for name, s in took.items())
            + f"; {sum(took.values()):.0f} s in all.", ""]


def book_lines(bk: dict, m: dict) -> list[str]:
    lines = ["## The book: execution time per chapter (fresh kernel, 2 threads)", "",
             "One run of each chapter, not a median: five runs of the book would not fit in ten minutes.", "",
             "| chapter | seconds |",
             "| --- | --- |"]
    lines += [f"| {name} | {s:.1f} |" for name, s in bk["chapters"].items()]
    return lines + [f"| **whole book** | **{bk['total']:.1f}** |", ""]


# The page's parts in order: (key in the results, its lines from that entry and the machine's description).
PARTS: list[tuple[str, Callable[[dict, dict], list[str]]]] = [
    ("decode", decode_lines), ("decode_narrow", decode_lines), ("train", train_lines),
    ("bandwidth", bandwidth_lines), ("cache", cache_lines), ("gqa", gqa_lines), ("attention", attention_lines),
    ("section_seconds", section_seconds_lines), ("book", book_lines),
]


def markdown(results: dict) -> str:
    m = results["machine"]
    lines = header_lines(m)
    for key, part in PARTS:
        if key in results:
            lines += part(results[key], m)
    return "\n".join(lines)
