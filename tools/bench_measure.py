"""The measurements of ``tools/bench.py``, one function per kind (the sections' numbers are in its docstring).

Each returns a plain dict of figures; ``tools/bench.py`` chooses the sizes, ``tools/bench_report.py`` writes them up.
"""
from __future__ import annotations

import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch

import transformer_course as tc
from bench_timer import interleaved, seconds_of, synchronize
from common import chapters

PEAK = Path(__file__).with_name("bench_peak.py")  # the attention probe, run in a fresh process per length


# --- decode and training against transformers ---------------------------------------------------

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


def hf_greedy(hf: torch.nn.Module, prompt: torch.Tensor, n: int, cache: bool) -> torch.Tensor:
    """``n`` greedy tokens from ``transformers``' ``generate`` (exactly ``n``: the end token is the last id)."""
    with torch.inference_mode():
        return hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n, min_new_tokens=n,
                           do_sample=False, use_cache=cache, pad_token_id=hf.config.vocab_size - 1)


def bench_decode(config: tc.TransformerConfig, prompt_len: int, new_tokens: int, rounds: int, device: torch.device,
                 uncached: bool = True, also: dict[str, Callable[[], object]] | None = None) -> dict:
    """Tokens/s of both implementations and of the matmul floor; ``uncached=False`` skips the slow no-cache runs.

    ``also``: more functions to time in the same interleaved rounds (their seconds: ``also_seconds``).
    """
    hf, ours = gpt2_pair(config, device)
    prompt = torch.randint(0, config.vocab_size, (1, prompt_len), generator=torch.Generator().manual_seed(1))
    prompt = prompt.to(device)

    outputs: dict[str, torch.Tensor] = {}  # the latest tokens of each implementation

    def run_hf(cache: bool, n: int = new_tokens) -> None:
        outputs[f"transformers {cache}"] = hf_greedy(hf, prompt, n, cache)

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


# --- how the cache pays off with length ----------------------------------------------------------

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


# --- grouped-query attention: a long context, where reading the cache dominates --------------------

def bench_gqa(config: tc.TransformerConfig, kv_heads: list[int], context: int, steps: int, rounds: int,
              device: torch.device) -> dict:
    """Cached decode at position ``context`` for each number of K/V heads (same queries, same body): ms per
    token (``steps`` tokens, rewound each round) and the bytes of the cache each token reads."""
    ids = torch.randint(0, config.vocab_size, (1, context + steps), generator=torch.Generator().manual_seed(3))
    ids = ids.to(device)
    runs, cache_bytes = {}, {}
    for n_kv in kv_heads:
        variant = config.replace(n_kv_heads=n_kv)
        torch.manual_seed(0)
        model = tc.DecoderOnly(variant).eval().to(device)
        cache = tc.KVCache.from_config(variant, batch_size=1, max_len=context + steps, device=device)
        with torch.inference_mode():
            model.next_token_logits(ids[:, :context], cache=cache)  # prefill once
        cache_bytes[n_kv] = cache.nbytes

        def decode(model: tc.DecoderOnly = model, cache: tc.KVCache = cache) -> None:
            with torch.inference_mode():
                for t in range(context, context + steps):
                    model.next_token_logits(ids[:, t : t + 1], cache=cache)
            cache.truncate(context)  # every round decodes the same tokens

        runs[f"n_kv_heads={n_kv}"] = decode
    seconds = interleaved(runs, rounds, device)
    return {"config": {"n_layers": config.n_layers, "n_heads": config.n_heads, "d_model": config.d_model,
                       "vocab_size": config.vocab_size}, "context": context, "steps": steps,
            "ms_per_token": {name: s / steps * 1e3 for name, s in seconds.items()},
            "cache_bytes": {f"n_kv_heads={n}": b for n, b in cache_bytes.items()},
            "weight_bytes": sum(p.numel() * p.element_size() for p in model.parameters())}


# --- the memory-bandwidth bound ------------------------------------------------------------------

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


# --- didactic attention against PyTorch's fused kernel --------------------------------------------

def bench_attention(lengths: list[int], device: torch.device) -> dict:
    """Median time (5 interleaved rounds) and extra peak memory for (1, 12 heads, T, 64), causal: one run of
    ``tools/bench_peak.py`` per T, each a fresh process (why: its docstring)."""
    results = {}
    for T in lengths:
        out = subprocess.run([sys.executable, str(PEAK), str(T), str(device)], capture_output=True, text=True,
                             check=True).stdout
        results[T] = {kind: {"ms": float(ms) * 1e3, "peak_mib": int(peak) / 2**20}
                      for kind, ms, peak in (line.split() for line in out.splitlines())}
    return results


# --- the book --------------------------------------------------------------------------------------

def bench_book() -> dict:
    """Each chapter executed in a fresh kernel (2 threads) from a temporary copy; seconds."""
    import execute_notebooks  # nbclient: loaded only for the book

    times = {}
    env_before = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "2"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for chapter in chapters():
                copy = Path(tmp) / chapter.name
                copy.write_bytes(chapter.read_bytes())
                times[chapter.stem] = execute_notebooks.execute(copy)
    finally:
        if env_before is None:
            os.environ.pop("OMP_NUM_THREADS")
        else:
            os.environ["OMP_NUM_THREADS"] = env_before
    return {"chapters": times, "total": sum(times.values())}
