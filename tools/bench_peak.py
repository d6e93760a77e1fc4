"""Time and extra peak memory of the didactic, the tiled (online-softmax) and PyTorch's fused attention at one length.

    python tools/bench_peak.py T DEVICE     # e.g. 1024 cpu; prints "KIND SECONDS PEAK_BYTES", one line per kind

``tools/bench.py`` (the attention section) runs this once per length, each time in a fresh process: a peak
can only be read as growth above what the process held before, and a process that has already run
attention (or anything else big) keeps its freed memory and its old peak, which would hide or inflate
the next one. On CPU (Linux) the peak is read from ``/proc/self/status`` after resetting it through
``/proc/self/clear_refs`` (``ru_maxrss`` could not be reset, and survives ``exec``); on CUDA it is the
allocator's own peak counter.
"""
from __future__ import annotations

import argparse
import sys
from typing import Callable

import torch

import transformer_course as tc
from bench_timer import interleaved, synchronize

ROUNDS = 5  # interleaved timing rounds; the median is printed


def kib(field: str) -> int:
    """``VmRSS`` (now) or ``VmHWM`` (peak) of this process in KiB, from Linux's ``/proc``."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(field))
    return int(line.split()[1])


def extra_peak_bytes(run: Callable[[], object], device: torch.device) -> int:
    """How far memory rose above its level before ``run()`` while it ran."""
    if device.type == "cuda":  # the allocator's own peak counter
        synchronize(device)
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        run()
        synchronize(device)
        return torch.cuda.max_memory_allocated() - before
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # reset the peak to now
    before = kib("VmRSS")
    run()
    return (kib("VmHWM") - before) * 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("length", type=int, help="sequence length T: q, k, v are (1, 12 heads, T, 64)")
    parser.add_argument("device", help="cpu or cuda")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    T, device = args.length, torch.device(args.device)
    q = k = v = torch.randn(1, 12, T, 64, device=device)
    mask = tc.causal_mask(T, device=device)
    kinds = {"sdpa": lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
             "tiled": lambda: tc.tiled_attention(q, k, v, mask=mask),
             "didactic": lambda: tc.scaled_dot_product_attention(q, k, v, mask=mask)}
    peak = {}
    for kind, run in kinds.items():  # the small one first: the didactic one's freed memory cannot hide its peak
        run()  # warm-up: the libraries' one-time buffers are not attention's
        peak[kind] = extra_peak_bytes(run, device)
    seconds = interleaved(kinds, ROUNDS, device, warm_up=False)  # each has just run
    for kind in kinds:
        print(kind, seconds[kind], peak[kind])
    return 0


if __name__ == "__main__":
    sys.exit(main())
