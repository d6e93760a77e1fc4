"""Small helpers every chapter uses: device choice, seeding, measured claims, parameter counts, timing."""
from __future__ import annotations

import json
import operator
import os
import random
import statistics
import time
from typing import Callable

import numpy as np
import torch


def get_device() -> torch.device:
    """The best available device: CUDA, then Apple MPS, then CPU.

    Set the environment variable ``TC_DEVICE`` (e.g. ``cpu``) to override.
    """
    forced = os.environ.get("TC_DEVICE")
    if forced:
        return torch.device(forced)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def set_seed(seed: int = 0) -> None:
    """Seed Python, NumPy and torch (all devices) so that a run is repeatable.

    The margin study (``tools/margins.py``) sets ``TC_SEED_SHIFT`` to rerun a chapter with other
    seeds: every seed ``s`` becomes ``s + 1009 * shift``. Unset, ``set_seed(s)`` uses ``s``.
    """
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"seed must be an int, got {type(seed).__name__}")
    seed += 1009 * int(os.environ.get("TC_SEED_SHIFT", "0"))
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def claim(name: str, value: float, op: str, bound: float) -> bool:
    """Whether ``value op bound`` holds, e.g. ``claim("test accuracy", acc, ">", 0.9)``.

    The chapter asserts the result. A training outcome is checked this way so that the margin study
    can see the number behind the verdict: when ``TC_CLAIMS_LOG`` names a file, one JSON line
    ``{"name", "value", "op", "bound"}`` is appended to it.
    """
    if op not in _OPS:
        raise ValueError(f"op must be one of {sorted(_OPS)}, got {op!r}")
    value, bound = float(value), float(bound)
    log = os.environ.get("TC_CLAIMS_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"name": name, "value": value, "op": op, "bound": bound}) + "\n")
    return bool(_OPS[op](value, bound))


def count_params(module: torch.nn.Module, trainable_only: bool = False) -> int:
    """Number of parameters of ``module`` (shared parameters counted once)."""
    if not isinstance(module, torch.nn.Module):
        raise ValueError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


def time_call(fn: Callable[[], object], repeats: int = 5, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` in seconds over ``repeats`` runs after ``warmup`` runs.

    Synchronises CUDA and MPS so that GPU work is included in the measurement.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")

    def sync() -> None:
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        if torch.backends.mps.is_available():
            torch.mps.synchronize()

    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cpu_name() -> str:
    """The CPU's model name (``lscpu``'s "Model name", e.g. ``"AMD EPYC"``), or the platform's description."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        model = ""
    import platform

    return model or platform.processor() or platform.machine()


def machine(device: torch.device | str | None = None) -> str:
    """Where a time was measured, for printing beside it: ``"AMD EPYC, 2 threads"`` or ``"NVIDIA H100"``.

    A printed time belongs to the machine (its model, its thread count, whatever else it was running),
    not to the method; a chapter that prints one names the machine with it.
    """
    device = get_device() if device is None else torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "mps":
        return "Apple GPU (mps)"
    threads = torch.get_num_threads()
    return f"{cpu_name()}, {threads} thread{'s' * (threads != 1)}"


LINEAR_OPS = ("aten.mm", "aten.addmm")  # what Linear layers run on 2-D inputs: the weights' products


def flops_by_op(fn: Callable[[], object]) -> dict[str, int]:
    """FLOPs of ``fn()`` per ATen operator, as PyTorch's ``FlopCounterMode`` counts them (matrix products:
    2 per multiply-add; elementwise work is not counted). Runs under ``torch.no_grad()``, not
    ``inference_mode`` (torch 2.2's counter sees nothing there); works on the ``meta`` device."""
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        fn()
    return {str(op): int(n) for op, n in counter.get_flop_counts().get("Global", {}).items()}


def count_flops(fn: Callable[[], object], ops: tuple[str, ...] | None = None) -> int:
    """Total FLOPs of ``fn()`` (see ``flops_by_op``), or only those of ``ops``, e.g. ``LINEAR_OPS``."""
    return sum(n for op, n in flops_by_op(fn).items() if ops is None or op in ops)
