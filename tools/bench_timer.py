"""The benchmark's one timer (``tools/bench.py`` and ``tools/bench_peak.py``): wall seconds of a call, after the
device has finished the work it queued (CUDA and MPS run asynchronously; CPU does not)."""
from __future__ import annotations

import statistics
import time
from typing import Callable

import torch


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
