"""The course's performance measurements: ``make bench`` (5-9 minutes on 2 CPU cores).

    python tools/bench.py                 # everything; writes bench/results.{json,md}
    python tools/bench.py --quick         # a tiny smoke run (the tests run it), writes to --out
    python tools/bench.py --only decode   # one section: decode, train, cache, bandwidth, attention, book
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
5. attention: the didactic attention against ``F.scaled_dot_product_attention``: time and peak memory.
6. book: each chapter's execution time (fresh kernel, 2 threads) and the whole book's.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch

import transformer_course as tc
from transformer_course import poet
from transformer_course.poems import load_poems

ROOT = Path(__file__).resolve().parents[1]


def synchronize(device: torch.device) -> None:
    """Wait until the work queued on ``device`` is done (CUDA and MPS run asynchronously; CPU does not)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def seconds_of(fn: Callable[[], object], device: torch.device) -> float:
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def interleaved(fns: dict[str, Callable[[], object]], rounds: int, device: torch.device,
                warm_up: bool = True) -> dict[str, float]:
    """Median seconds of each function over ``rounds`` rounds, run in turn, after one warm-up each
    (``warm_up=False`` when the caller has just run each one)."""
    for fn in fns.values() if warm_up else ():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(seconds_of(fn, device))
    return {name: statistics.median(ts) for name, ts in times.items()}


# --- 1. decode against transformers --------------------------------------------------------------

def gpt2_pair(config: tc.TransformerConfig, device: torch.device, seed: int = 0):
    """A random ``GPT2LMHeadModel`` of ``config``'s shape and our copy of it, both in eval mode on ``device``."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    last = config.vocab_size - 1
    hf = GPT2LMHeadModel(GPT2Config(vocab_size=config.vocab_size, n_positions=config.max_len,
                                    n_embd=config.d_model, n_layer=config.n_layers, n_head=config.n_heads,
                                    bos_token_id=last, eos_token_id=last, attn_implementation="sdpa")).eval()
    return hf.to(device), tc.from_hf_gpt2(hf).eval().to(device)


def bench_train(config: tc.TransformerConfig, batch: int, rounds: int, device: torch.device) -> dict:
    """Training steps/s (forward, loss, backward, AdamW step) of ``DecoderOnly`` and ``GPT2LMHeadModel`` with
    the same configuration (dropout included), the same weights at the start and the same batch."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    p = config.dropout
    hf = GPT2LMHeadModel(GPT2Config(vocab_size=config.vocab_size, n_positions=config.max_len, n_embd=config.d_model,
                                    n_layer=config.n_layers, n_head=config.n_heads, n_inner=config.d_ff,
                                    activation_function="gelu", resid_pdrop=p, embd_pdrop=p, attn_pdrop=p,
                                    bos_token_id=0, eos_token_id=0, attn_implementation="sdpa")).to(device)
    ours = tc.DecoderOnly(config).to(device)
    tc.load_gpt2_state_dict(ours, hf.state_dict())
    g = torch.Generator().manual_seed(0)
    x = torch.randint(config.vocab_size, (batch, config.max_len), generator=g).to(device)
    y = torch.randint(config.vocab_size, (batch, config.max_len), generator=g).to(device)
    with torch.no_grad():  # the same function before any step: same loss in eval mode
        same_loss = abs(tc.lm_loss(hf.eval()(x).logits, y).item() - tc.lm_loss(ours.eval()(x), y).item()) < 1e-4
    hf.train(), ours.train()

    def stepper(model: torch.nn.Module, logits: Callable[[], torch.Tensor]) -> Callable[[], None]:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

        def step() -> None:
            loss = tc.lm_loss(logits(), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        return step
    steps = {"ours": stepper(ours, lambda: ours(x)), "transformers": stepper(hf, lambda: hf(x).logits)}
    for step in steps.values():
        step()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in steps}
    for i in range(rounds):  # one step of each per round, in alternating order; a round's two steps
        for name in sorted(steps, reverse=i % 2 == 1):  # share the machine's state, so their ratio
            times[name].append(seconds_of(steps[name], device))  # is steadier than the times
    ratios = sorted(h / o for o, h in zip(times["ours"], times["transformers"]))
    quartiles = statistics.quantiles(ratios, n=4)
    return {"config": dataclasses.asdict(config), "batch": batch, "same_loss_at_start": same_loss,
            "rounds": rounds, "steps_per_s": {name: 1 / statistics.median(ts) for name, ts in times.items()},
            "ours_over_transformers": statistics.median(ratios),
            "ratio_quartiles": [quartiles[0], quartiles[2]]}


def matmul_floor(model: torch.nn.Module, device: torch.device) -> Callable[[], None]:
    """One decode step reduced to its matrix-vector products: every ``Linear`` of ``model`` (the LM head
    included) applied once to one vector, nothing else. Reading the weights is the whole cost."""
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    inputs = [torch.randn(1, m.in_features, device=device) for m in linears]

    def step() -> None:
        with torch.inference_mode():
            for m, x in zip(linears, inputs):
                torch.nn.functional.linear(x, m.weight, m.bias)
    return step


def bench_decode(config: tc.TransformerConfig, prompt_len: int, new_tokens: int, rounds: int, device: torch.device,
                 uncached: bool = True, also: dict[str, Callable[[], object]] | None = None) -> dict:
    """Tokens/s of both implementations and of the matmul floor; ``uncached=False`` skips the slow no-cache runs.

    ``also``: more functions to time in the same interleaved rounds (their seconds: ``also_seconds``).
    """
    hf, ours = gpt2_pair(config, device)
    prompt = torch.randint(0, config.vocab_size, (1, prompt_len), generator=torch.Generator().manual_seed(1))
    prompt = prompt.to(device)
    pad = config.vocab_size - 1

    outputs: dict[str, torch.Tensor] = {}  # the latest tokens of each implementation

    def run_hf(cache: bool, n: int = new_tokens) -> None:
        with torch.inference_mode():
            outputs[f"transformers {cache}"] = hf.generate(
                prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n, min_new_tokens=n,
                do_sample=False, use_cache=cache, pad_token_id=pad)

    def run_ours(cache: bool, n: int = new_tokens) -> None:
        outputs[f"ours {cache}"] = tc.generate(ours, prompt, n, use_cache=cache, temperature=0.0)

    floor_steps = min(32, new_tokens)  # 32 steps are enough for a per-token time; the section must stay short

    def run_floor() -> None:
        for _ in range(floor_steps):
            floor_step()

    floor_step = matmul_floor(ours, device)
    run_floor()
    modes = (True, False) if uncached else (True,)
    for cache in modes:  # a short warm-up: the weights are touched, the buffers allocated
        run_hf(cache, n=8)
        run_ours(cache, n=8)
    fns = {}
    for cache in modes:
        label = "cached" if cache else "uncached"
        fns[f"ours {label}"] = lambda cache=cache: run_ours(cache)
        fns[f"transformers {label}"] = lambda cache=cache: run_hf(cache)
    fns["matmul floor"] = run_floor
    seconds = interleaved(fns | (also or {}), rounds, device, warm_up=False)
    also_seconds = {name: seconds.pop(name) for name in also or {}}
    same = all(torch.equal(outputs[f"ours {c}"], outputs[f"transformers {c}"]) for c in modes)
    tokens_per_s = {name: (floor_steps if name == "matmul floor" else new_tokens) / s for name, s in seconds.items()}
    return {
        "config": {"n_layers": config.n_layers, "n_heads": config.n_heads, "d_model": config.d_model,
                   "vocab_size": config.vocab_size},
        "prompt_len": prompt_len, "new_tokens": new_tokens, "same_tokens": same,
        "tokens_per_s": tokens_per_s,
        "ratios": {label: tokens_per_s[f"ours {label}"] / tokens_per_s[f"transformers {label}"]
                   for label in ("cached", "uncached") if f"ours {label}" in tokens_per_s},
        "weight_bytes": sum(p.numel() * p.element_size() for p in ours.parameters()),
        "also_seconds": also_seconds,
    }


# --- 2. how the cache pays off with length -------------------------------------------------------

class Stopwatch:
    """Wraps a model for ``tc.generate`` and notes the time of each ``next_token_logits`` call."""

    def __init__(self, model: tc.DecoderOnly, device: torch.device) -> None:
        self.model, self.config, self.device = model, model.config, device
        self.calls: list[float] = []
        self.started = time.perf_counter()

    def parameters(self):
        return self.model.parameters()

    def next_token_logits(self, idx: torch.Tensor, cache: tc.KVCache | None = None) -> torch.Tensor:
        self.calls.append(time.perf_counter())  # call i starts once i tokens have been chosen
        return self.model.next_token_logits(idx, cache=cache)

    def seconds_after_each_token(self) -> list[float]:
        """Seconds from the start until the 1st, 2nd, ... new token was chosen (call now, after the run)."""
        synchronize(self.device)
        return [t - self.started for t in self.calls[1:] + [time.perf_counter()]]


def bench_cache(config: tc.TransformerConfig, lengths: list[int], positions: list[int], rounds: int,
                device: torch.device) -> dict:
    torch.manual_seed(0)
    model = tc.DecoderOnly(config).eval().to(device)
    ids = torch.randint(0, config.vocab_size, (1, max(positions) + 1), generator=torch.Generator().manual_seed(2))
    ids = ids.to(device)

    def step_cached(p: int) -> Callable[[], object]:
        cache = tc.KVCache.from_config(config, batch_size=1, max_len=p + 1, device=device)
        with torch.inference_mode():
            model.next_token_logits(ids[:, :p], cache=cache)  # prefill p tokens once

        def step() -> None:
            with torch.inference_mode():
                model.next_token_logits(ids[:, p : p + 1], cache=cache)
            cache.truncate(p)  # rewind: every round measures the same step
        return step

    def step_uncached(p: int) -> Callable[[], object]:
        def step() -> None:
            with torch.inference_mode():
                model.next_token_logits(ids[:, : p + 1])
        return step

    per_step = {}
    for p in positions:
        t = interleaved({"cached": step_cached(p), "uncached": step_uncached(p)}, rounds, device)
        per_step[p] = {k: v * 1e3 for k, v in t.items()}  # ms
    # Totals: one run of max(lengths) tokens per kind and round; the total for n tokens is read off it
    # when the n-th token has been chosen (a shorter run does exactly the same steps; saves a third).
    prompt, n_max = ids[:, :32], max(lengths)
    elapsed: dict[str, list[list[float]]] = {"cached": [], "uncached": []}
    for _ in range(rounds):  # the per-position steps above warmed both paths
        for kind in elapsed:
            synchronize(device)
            watch = Stopwatch(model, device)
            tc.generate(watch, prompt, n_max, use_cache=kind == "cached", temperature=0.0)
            elapsed[kind].append(watch.seconds_after_each_token())
    totals = {n: {kind: statistics.median(run[n - 1] for run in runs) for kind, runs in elapsed.items()}
              for n in lengths}
    return {"config": {"n_layers": config.n_layers, "n_heads": config.n_heads, "d_model": config.d_model,
                       "vocab_size": config.vocab_size},
            "ms_per_step_at_position": per_step, "total_seconds": totals, "prompt_tokens": prompt.shape[1]}


# --- 3. the memory-bandwidth bound ---------------------------------------------------------------

def bandwidth_kernels(n_bytes: int, device: torch.device) -> dict[str, Callable[[], object]]:
    """Three ways to read a buffer of ``n_bytes``, far larger than the caches.

    The rate depends on the access pattern (one stream, two streams, a matrix-vector product), so the
    bound uses the fastest of them. They are timed in the decode rounds: noisy neighbours then slow
    the decode and the bound alike, and the fraction of the bound stays meaningful.
    """
    buffer = torch.ones(n_bytes // 4, device=device)
    first, second = buffer.chunk(2)  # two halves: two read streams
    rows, vector = buffer.view(-1, 1024), torch.ones(1024, device=device)
    return {"sum": lambda: buffer.sum(), "dot of two halves": lambda: torch.dot(first, second),
            "matrix-vector": lambda: rows @ vector}


# --- 4. didactic attention against PyTorch's fused kernel -----------------------------------------

_PEAK = r"""
import sys, time, torch, transformer_course as tc
torch.set_num_threads(2)
T, device = int(sys.argv[1]), torch.device(sys.argv[2])
q = k = v = torch.randn(1, 12, T, 64, device=device)
mask = tc.causal_mask(T, device=device)
kinds = {"sdpa": lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
         "didactic": lambda: tc.scaled_dot_product_attention(q, k, v, mask=mask)}

def sync():
    if device.type == "cuda":
        torch.cuda.synchronize()

def kib(field):  # VmRSS (now) or VmHWM (peak) of this process, from Linux's /proc
    line = next(l for l in open("/proc/self/status") if l.startswith(field))
    return int(line.split()[1])

def extra_peak_bytes(run):
    if device.type == "cuda":  # the allocator's own peak counter
        sync(); torch.cuda.reset_peak_memory_stats(); before = torch.cuda.memory_allocated()
        run(); sync()
        return torch.cuda.max_memory_allocated() - before
    open("/proc/self/clear_refs", "w").write("5")  # reset the peak to now
    before = kib("VmRSS")
    run()
    return (kib("VmHWM") - before) * 1024

peak = {}
for kind, run in kinds.items():  # the small one first: the didactic one's freed memory cannot hide its peak
    run()  # warm-up: the libraries' one-time buffers are not attention's
    peak[kind] = extra_peak_bytes(run)
times = {kind: [] for kind in kinds}
for _ in range(5):  # interleaved rounds
    for kind, run in kinds.items():
        sync(); s = time.perf_counter(); run(); sync(); times[kind].append(time.perf_counter() - s)
for kind in kinds:
    print(kind, sorted(times[kind])[2], peak[kind])
"""


def bench_attention(lengths: list[int], device: torch.device) -> dict:
    """Median time (5 interleaved rounds) and extra peak memory for (1, 12 heads, T, 64), causal, a fresh process per T
    (CPU on Linux: the peak is read from /proc, which ``ru_maxrss`` would not do: it survives ``exec``;
    CUDA: the allocator's peak)."""
    results = {}
    for T in lengths:
        out = subprocess.run([sys.executable, "-c", _PEAK, str(T), str(device)], capture_output=True, text=True,
                             check=True).stdout
        results[T] = {kind: {"ms": float(ms) * 1e3, "peak_mib": int(peak) / 2**20}
                      for kind, ms, peak in (line.split() for line in out.splitlines())}
    return results


# --- 5. the book -----------------------------------------------------------------------------------

def bench_book() -> dict:
    """Each chapter executed in a fresh kernel (2 threads) from a temporary copy; seconds."""
    sys.path.insert(0, str(ROOT / "tools"))
    import execute_notebooks

    times = {}
    env_before = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "2"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for chapter in sorted((ROOT / "book").glob("[0-9][0-9]_*.ipynb")):
                copy = Path(tmp) / chapter.name
                copy.write_bytes(chapter.read_bytes())
                times[chapter.stem] = execute_notebooks.execute(copy)
    finally:
        if env_before is None:
            os.environ.pop("OMP_NUM_THREADS")
        else:
            os.environ["OMP_NUM_THREADS"] = env_before
    return {"chapters": times, "total": sum(times.values())}


# --- report ----------------------------------------------------------------------------------------

def machine(device: torch.device) -> dict:
    cpu = "unknown"
    if Path("/proc/cpuinfo").exists():
        names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")]
        cpu = names[0] if names else cpu
    return {"cpu": cpu, "cores": os.cpu_count(), "threads": torch.get_num_threads(),
            "python": platform.python_version(), "torch": torch.__version__, "device": device_name(device),
            "book_device": device_name(tc.get_device()), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def device_name(device: torch.device) -> str:
    """``"cpu"``, or the accelerator's name, e.g. ``"cuda: NVIDIA H200"``."""
    return f"cuda: {torch.cuda.get_device_name(device)}" if device.type == "cuda" else device.type


def decode_lines(d: dict) -> list[str]:
    """One decode section of ``results.md``: the table, the ratios, and where each implementation's time goes."""
    c, tps = d["config"], d["tokens_per_s"]
    lines = [f"## Decode: {c['n_layers']} layers, {c['n_heads']} heads, d_model {c['d_model']}, vocabulary "
             f"{c['vocab_size']}; fp32, batch 1, greedy, {d['prompt_len']}-token prompt, {d['new_tokens']} new tokens",
             "", "| implementation | tokens/s |", "| --- | --- |"]
    lines += [f"| {name} | {v:.1f} |" for name, v in tps.items()]
    ms = {name: 1e3 / v for name, v in tps.items()}  # ms per token
    floor, ours, theirs = ms["matmul floor"], ms["ours cached"], ms["transformers cached"]
    target = theirs / 1.3
    budget = (f"which leaves {target - floor:.2f} ms for everything that is not a weight read" if target > floor
              else f"{floor - target:.2f} ms faster than the floor itself")
    ratios = ", ".join(f"{label} {r:.2f}×" for label, r in d["ratios"].items())
    lines += ["", f"ours / transformers: {ratios}; identical tokens: {d['same_tokens']}.", "",
              f"*matmul floor*: each step reduced to its matrix-vector products (every weight matrix times one "
              f"vector, no attention, norms or Python around them): {floor:.2f} ms per token. Per cached token, "
              f"ours spends {ours:.2f} ms, {ours - floor:.2f} ms of it beyond the floor; transformers spends "
              f"{theirs:.2f} ms, {theirs - floor:.2f} ms beyond it. 1.3× transformers would be {target:.2f} ms per "
              f"token, {budget}; even with nothing but the weight reads, the ratio could not exceed "
              f"{theirs / floor:.2f}×.", ""]
    return lines


def markdown(results: dict) -> str:
    m = results["machine"]
    lines = ["# Benchmark results", "", f"Machine: {m['cpu']}, {m['cores']} cores, {m['threads']} torch threads; "
             f"Python {m['python']}, torch {m['torch']}; {m['date']}.", "",
             f"Device: {m['device']} (the book's chapters: {m['book_device']}, what `tc.get_device()` picks)."
             + (" On a GPU: `python tools/bench.py --device cuda --out bench/cuda`." if m["device"] == "cpu" else ""),
             ""]
    for key in ("decode", "decode_narrow"):
        if key in results:
            lines += decode_lines(results[key])
    if "train" in results:
        t, c = results["train"], results["train"]["config"]
        lines += [f"## Training steps: the chapter 14 poet ({c['n_layers']} layers, d_model {c['d_model']}, "
                  f"vocabulary {c['vocab_size']}, dropout {c['dropout']}), batch {t['batch']} × {c['max_len']}", "",
                  "| implementation | steps/s |", "| --- | --- |"]
        lines += [f"| {name} | {v:.2f} |" for name, v in t["steps_per_s"].items()]
        lo, hi = t["ratio_quartiles"]
        lines += ["", f"Ours / transformers: **{t['ours_over_transformers']:.2f}×**, the median of {t['rounds']} "
                  f"rounds' ratios (quartiles {lo:.2f}–{hi:.2f}; forward, loss, backward, AdamW; same weights, "
                  f"same batch; same loss before the first step: {t['same_loss_at_start']}).", ""]
    if "bandwidth" in results:
        b = results["bandwidth"]
        lines += ["## The memory-bandwidth bound", "",
                  "Read bandwidth by kernel, timed in the GPT-2-small decode rounds: "
                  + ", ".join(f"{kind} {rate / 1e9:.1f} GB/s" for kind, rate in b["bytes_per_s_by_kernel"].items())
                  + ".",
                  "",
                  f"At the fastest, {b['bytes_per_s'] / 1e9:.1f} GB/s, and {b['bytes_per_token'] / 1e6:.0f} MB read "
                  f"per decoded token (fp32 weights + the average cache), an fp32 decode can reach at most about "
                  f"{b['bound_tokens_per_s']:.1f} tokens/s here. Our cached decode reaches "
                  f"{b['fraction_of_bound']:.0%} of it.", ""]
    if "cache" in results:
        cc = results["cache"]
        lines += ["## How the cache pays off with length (small model: "
                  f"{cc['config']['n_layers']} layers, d_model {cc['config']['d_model']}, "
                  f"vocabulary {cc['config']['vocab_size']})",
                  "", "| position | ms per step, cached | ms per step, uncached |", "| --- | --- | --- |"]
        lines += [f"| {p} | {v['cached']:.2f} | {v['uncached']:.2f} |"
                  for p, v in cc["ms_per_step_at_position"].items()]
        lines += ["", "| new tokens | total s, cached | total s, uncached | speed-up |", "| --- | --- | --- | --- |"]
        lines += [f"| {n} | {v['cached']:.2f} | {v['uncached']:.2f} | {v['uncached'] / v['cached']:.1f}× |"
                  for n, v in cc["total_seconds"].items()]
        lines += ["", f"Totals: the time until the n-th new token was chosen, in runs of {max(cc['total_seconds'])} "
                  f"new tokens after a {cc['prompt_tokens']}-token prompt (a shorter run does the same steps).", ""]
    if "attention" in results:
        lines += ["## Attention: didactic vs `F.scaled_dot_product_attention` (1 × 12 heads × T × 64, causal)", "",
                  "| T | didactic ms | SDPA ms | didactic extra peak MiB | SDPA extra peak MiB |",
                  "| --- | --- | --- | --- | --- |"]
        lines += [f"| {T} | {r['didactic']['ms']:.2f} | {r['sdpa']['ms']:.2f} | {r['didactic']['peak_mib']:.0f} | "
                  f"{r['sdpa']['peak_mib']:.0f} |" for T, r in results["attention"].items()]
        what = ("the CUDA allocator's peak above what was allocated before" if m["device"].startswith("cuda")
                else "growth of the process's peak resident memory")
        lines += ["", f"Peak: {what} while attention runs (a fresh process per length, SDPA first).", ""]
    if results.get("section_seconds"):
        took = results["section_seconds"]
        lines += ["Time per section: " + ", ".join(f"{name} {s:.0f} s" for name, s in took.items())
                  + f"; {sum(took.values()):.0f} s in all.", ""]
    if "book" in results:
        bk = results["book"]
        lines += ["## The book: execution time per chapter (fresh kernel, 2 threads)", "",
                  "One run of each chapter, not a median: five runs of the book would not fit in ten minutes.", "",
                  "| chapter | seconds |",
                  "| --- | --- |"]
        lines += [f"| {name} | {s:.1f} |" for name, s in bk["chapters"].items()]
        lines += [f"| **whole book** | **{bk['total']:.1f}** |", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in seconds")
    parser.add_argument("--only", choices=["decode", "train", "cache", "bandwidth", "attention", "book"],
                        action="append")
    parser.add_argument("--out", type=Path, default=ROOT / "bench")
    parser.add_argument("--device", default="cpu", help="cpu (the default: the figures issue 8 asks for) or cuda")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    sections = set(args.only or ["decode", "train", "cache", "bandwidth", "attention", "book"])
    if args.quick:
        sections.discard("book")
        gpt2 = tc.TransformerConfig(vocab_size=97, d_model=24, n_heads=3, n_layers=2, d_ff=96, max_len=64,
                                    activation="gelu_tanh")
        small, narrow, prompt, new, rounds = gpt2, gpt2, 8, 8, 1
        poet_config, poet_batch = dataclasses.replace(gpt2, activation="gelu", dropout=0.2), 2
        lengths, positions, attn_lengths, bw_bytes = [8, 16], [8, 16], [32, 64], 2**22
    else:
        gpt2 = tc.TransformerConfig.gpt2_small()
        small = tc.TransformerConfig(vocab_size=256, d_model=256, n_heads=4, n_layers=4, d_ff=1024, max_len=1024)
        narrow = tc.TransformerConfig(vocab_size=gpt2.vocab_size, d_model=256, n_heads=4, n_layers=4, d_ff=1024,
                                      max_len=1024, activation="gelu_tanh")  # GPT-2's vocabulary, a narrow body
        prompt, new, rounds = 32, 128, 5
        vocab = poet.CharVocab("".join(p.text for p in load_poems("train")))  # chapter 14's model and batch
        poet_config, poet_batch = tc.TransformerConfig(vocab_size=len(vocab), **poet.POET_SIZE), 32
        lengths, positions, attn_lengths, bw_bytes = ([64, 128, 256, 512], [32, 128, 256, 512],
                                                      [128, 256, 512, 1024, 2048], 2**30)
    results: dict = {"machine": machine(device), "section_seconds": {}}
    started = time.perf_counter()

    def done(section: str) -> None:
        nonlocal started
        results["section_seconds"][section] = time.perf_counter() - started
        started = time.perf_counter()
    if "decode" in sections or "bandwidth" in sections:
        kernels = bandwidth_kernels(bw_bytes, device)
        for fn in kernels.values():
            fn()  # warm-up
        results["decode"] = bench_decode(gpt2, prompt, new, rounds, device, also=kernels)
        read_seconds = results["decode"].pop("also_seconds")
        del kernels  # frees the buffer
        print(f"decode: {results['decode']['tokens_per_s']}", flush=True)
        if "decode" in sections:
            results["decode_narrow"] = bench_decode(narrow, prompt, new, rounds, device,
                                                    uncached=False)  # the regime, briefly
            print(f"decode, narrow: {results['decode_narrow']['tokens_per_s']}", flush=True)
        done("decode")
    if "bandwidth" in sections:
        rates = {kind: bw_bytes / s for kind, s in read_seconds.items()}
        bw = max(rates.values())
        d = results["decode"]
        cache_bytes = tc.kv_cache_bytes(gpt2, prompt + new // 2)  # the average cache read per token
        per_token = d["weight_bytes"] + cache_bytes
        bound = bw / per_token
        results["bandwidth"] = {"bytes_per_s": bw, "bytes_per_s_by_kernel": rates, "bytes_per_token": per_token,
                                "bound_tokens_per_s": bound,
                                "fraction_of_bound": d["tokens_per_s"]["ours cached"] / bound}
        print(f"bandwidth: {bw / 1e9:.1f} GB/s, bound {bound:.1f} tokens/s", flush=True)
        done("bandwidth")
    if "train" in sections:
        results["train"] = bench_train(poet_config, poet_batch, rounds * 12, device)
        print(f"train: {results['train']['steps_per_s']}", flush=True)
        done("train")
    if "cache" in sections:
        results["cache"] = bench_cache(small, lengths, positions, rounds, device)
        print("cache: done", flush=True)
        done("cache")
    if "attention" in sections:
        results["attention"] = bench_attention(attn_lengths, device)
        print("attention: done", flush=True)
        done("attention")
    if "book" in sections:
        results["book"] = bench_book()
        print(f"book: {results['book']['total']:.1f} s", flush=True)
        done("book")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1, default=str) + "\n", encoding="utf-8")
    (args.out / "results.md").write_text(markdown(results) + "\n", encoding="utf-8")
    print(f"wrote {args.out / 'results.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
