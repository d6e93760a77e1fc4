"""Guards around one call of the learner's function: the time limit (SIGALRM), the watch on the torch
calls it makes (forbidden functions, tensor indexing, oversized tensors, calls into the course package)
and the checks for side effects (a changed default dtype or grad mode, edited or ``requires_grad`` inputs,
a module argument whose weights, ``requires_grad`` flags or train/eval mode the call changed).
"""
from __future__ import annotations

import copy
import os
import signal
import sys
import threading
import types
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from ._types import Forbidden


@dataclass(frozen=True)
class _Outcome:
    """What one call of a function gave: its ``value``, or the ``error`` it raised; torch ``calls`` made."""

    value: Any = None
    error: BaseException | None = None
    calls: int = 0


# ---- time limit --------------------------------------------------------------------------------

class _Timeout(BaseException):
    """The alarm: a BaseException, so that the learner's ``except Exception`` cannot swallow it."""


@dataclass
class _Timer:
    armed: bool = True
    fired: bool = False


@contextmanager
def _time_limit(seconds: float) -> Iterator[_Timer]:
    """Interrupt an endless loop with SIGALRM where the platform allows it (Unix, main thread).

    The alarm repeats every 0.1 s while armed, and ``timer.fired`` records that it rang: a learner
    who catches even ``BaseException`` and returns is still reported as too slow.
    """
    timer = _Timer()
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield timer
        return

    def _raise(signum: int, frame: Any) -> None:
        if timer.armed:
            timer.fired = True
            raise _Timeout

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.1)
    try:
        yield timer
    finally:
        timer.armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


@dataclass
class _Call:
    """One guarded call of the learner's function: what it returned or raised, and what it disturbed."""

    value: Any = None
    error: BaseException | None = None
    timed_out: bool = False
    grad_changed: bool = False  # it turned grad mode off
    dtype_changed: bool = False  # it changed torch's default dtype


def _call_learner(fn: Callable[..., Any], args: tuple, time_limit_s: float, watch: Any = None) -> _Call:
    """``fn(*args)`` with grad enabled, under the time limit and ``watch``; the default dtype and the caller's
    grad mode are restored. Never raises, except ``KeyboardInterrupt`` (the learner's bugs, ``SystemExit``
    included, come back in ``error``). Shared by ``Exercise`` and the chapter 13 quiz."""
    default_dtype = torch.get_default_dtype()
    call, timer = _Call(), _Timer()
    try:
        with torch.enable_grad(), (watch or _nothing()):
            try:
                with _time_limit(time_limit_s) as timer:
                    call.value = fn(*args)
            finally:
                call.grad_changed = not torch.is_grad_enabled()  # leaving enable_grad restores the caller's mode
    except KeyboardInterrupt:
        raise
    except _Timeout:
        timer.fired = True
    except BaseException as e:  # the learner's bug (SystemExit included), reported kindly
        call.error = e
    finally:
        call.dtype_changed = torch.get_default_dtype() != default_dtype
        torch.set_default_dtype(default_dtype)
    call.timed_out = timer.fired
    return call


# ---- watching what the learner's code calls ---------------------------------------------------

_EXERCISES_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def torch_name(func: Any) -> str:
    """A readable name of a torch function as the learner writes it: ``F.softmax``, ``Tensor.softmax``."""
    qualname = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    module = getattr(func, "__module__", None) or ""
    short = qualname.split(".")[-1]
    if qualname.startswith(("TensorBase.", "Tensor.")):
        return f"Tensor.{short}"
    if qualname.startswith("_VariableFunctionsClass.") or module == "torch":
        return f"torch.{short}"
    if module in ("torch.nn.functional", "torch._C._nn"):
        return f"F.{short}"
    return f"{module}.{qualname}" if module else qualname


def _indexes_with_tensor(index: Any) -> bool:
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(p, (torch.Tensor, list)) for p in parts)


def _numel(out: Any) -> int:
    if isinstance(out, torch.Tensor):
        return out.numel()
    if isinstance(out, (tuple, list)):
        return max((_numel(o) for o in out), default=0)
    return 0


def _repeated_write(func: Any, args: tuple) -> bool:
    """An indexed write whose index names one slot more than once (``x[[0, 0]] = ...``)."""
    if func in (torch.Tensor.__setitem__, torch.Tensor.index_put_, torch.Tensor.index_put) and len(args) > 1:
        index = args[1]
    elif func in (torch.Tensor.index_copy_, torch.Tensor.index_copy) and len(args) > 2:
        index = args[2]
    else:
        return False
    for part in index if isinstance(index, tuple) else (index,):
        if isinstance(part, list) and all(isinstance(i, int) for i in part):
            part = torch.tensor(part)
        if isinstance(part, torch.Tensor) and part.dtype != torch.bool and part.numel() > 1:
            with torch._C.DisableTorchFunction():
                if part.unique().numel() < part.numel():
                    return True
    return False


_TO_PYTHON = (torch.Tensor.tolist, torch.Tensor.numpy, torch.Tensor.unbind, torch.unbind, torch.Tensor.item)


class _Watch(TorchFunctionMode):
    """While the learner's function runs: count the torch calls and keep the first rule broken.

    Torch calls are seen through ``__torch_function__`` (only those the learner's code makes: a torch
    function's own inner calls are not seen); calls into the course package through ``sys.setprofile``.
    """

    def __init__(self, rules: Sequence[Forbidden], args: tuple) -> None:
        super().__init__()
        self.functions = {f: rule for rule in rules for f in rule.functions}
        self.indexing = next((r for r in rules if r.indexing), None)
        self.limits = [(r, r.max_numel(*args)) for r in rules if r.max_numel is not None]
        self.course = next((r for r in rules if r.course), None)
        self.loops = next((r for r in rules if r.loops), None)
        self.unique_writes = next((r for r in rules if r.unique_writes), None)
        with torch._C.DisableTorchFunction():
            self._inputs = {a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)}
        self.calls = 0
        self.broken: tuple[Forbidden, str] | None = None
        self._profile_before: Any = None

    def __enter__(self) -> "_Watch":
        if self.course is not None:
            self._profile_before = sys.getprofile()
            sys.setprofile(self._profile)
        return super().__enter__()

    def __exit__(self, *exc: Any) -> Any:
        try:
            return super().__exit__(*exc)
        finally:
            if self.course is not None:
                sys.setprofile(self._profile_before)

    def _profile(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event != "call" or self.broken is not None:
            return
        path = frame.f_code.co_filename
        if path.startswith(_PACKAGE_DIR) and not path.startswith(_EXERCISES_DIR):
            name = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
            self.broken = (self.course, f"课程包的 {name.replace('.<locals>', '')}")  # type: ignore[arg-type]

    def _loops_in_python(self, func: Any, args: tuple) -> bool:
        """Iterating over a tensor, or turning an input into Python values (a loop that makes no torch calls)."""
        if func is torch.Tensor.__iter__:
            return True
        if func not in _TO_PYTHON or not args or not isinstance(args[0], torch.Tensor):
            return False
        with torch._C.DisableTorchFunction():
            return args[0].untyped_storage().data_ptr() in self._inputs

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        self.calls += 1
        if self.broken is None:
            try:
                rule = self.functions.get(func)
            except TypeError:  # an unhashable callable
                rule = None
            if rule is not None:
                self.broken = (rule, torch_name(func))
            elif self.loops is not None and self._loops_in_python(func, args):
                self.broken = (self.loops, f"{torch_name(func)}：把张量变成 Python 的列表或迭代器，再用 Python 循环")
            elif self.unique_writes is not None and _repeated_write(func, args):
                self.broken = (self.unique_writes, f"{torch_name(func)}，同一个位置在一次写入里出现了不止一次")
            elif (self.indexing is not None and func is torch.Tensor.__getitem__ and len(args) > 1
                  and _indexes_with_tensor(args[1])):
                self.broken = (self.indexing, "张量下标 x[ids]")
        out = func(*args, **(kwargs or {}))
        if self.broken is None:
            for rule, limit in self.limits:
                if _numel(out) > limit:
                    shape = tuple(out.shape) if isinstance(out, torch.Tensor) else "?"
                    self.broken = (rule, f"{torch_name(func)}，得到形状 {shape} 的张量")
                    break
        return out


# ---- side effects ------------------------------------------------------------------------------

def _global_side_effect(grad_changed: bool, dtype_changed: bool, default_dtype: torch.dtype) -> str | None:
    if dtype_changed:
        return (f"你的函数改动了全局的默认 dtype（torch.set_default_dtype），检查器已把它恢复为 {default_dtype}："
                "需要别的精度时，请对单个张量用 .double() 或 dtype= 参数。")
    if grad_changed:
        return ("你的函数关掉了全局的梯度计算（torch.set_grad_enabled(False)，或没有配合 with 使用的 "
                "torch.no_grad()），检查器已把它恢复：请用 with torch.no_grad(): 只包住需要的那几行。")
    return None


def _clone(args: tuple) -> tuple:
    """A private copy of every tensor and module argument: a call can never disturb the case it was given."""
    return tuple(a.detach().clone() if isinstance(a, torch.Tensor) else copy.deepcopy(a) if isinstance(a, nn.Module)
                 else a for a in args)


def _module_change(before: nn.Module, after: nn.Module) -> str | None:
    """What a call changed in a module argument (its copy ``after``): ``None`` when nothing."""
    old, new = dict(before.named_parameters()), dict(after.named_parameters())
    if old.keys() != new.keys():
        return "增删了它的参数"
    if any(old[k].requires_grad != new[k].requires_grad for k in old):
        return "改了参数的 requires_grad（冻结或解冻）"
    if any(new[k].grad is not None for k in new):
        return "在参数上留下了 .grad"
    state, got = before.state_dict(), after.state_dict()
    if state.keys() != got.keys() or any(not _unchanged(state[k], got[k]) for k in state):
        return "改动了权重或缓冲区（原地操作）"
    if any(a.training != b.training for a, b in zip(before.modules(), after.modules())):
        return "切换了 train()/eval() 模式"
    return None


def _unchanged(before: torch.Tensor, after: torch.Tensor) -> bool:
    if not isinstance(after, torch.Tensor) or after.dtype != before.dtype or after.shape != before.shape:
        return False
    with torch.no_grad():
        return torch.equal(before, after) or (before.is_floating_point()
                                               and torch.allclose(before, after, rtol=0.0, atol=0.0, equal_nan=True))


def _call_quietly(fn: Callable[..., Any], args: tuple) -> _Outcome:
    """Run one of the checker's own functions (a typical mistake) on a copy of ``args``."""
    try:
        with torch.enable_grad():
            return _Outcome(fn(*_clone(args)))
    except Exception as e:
        return _Outcome(error=e)
