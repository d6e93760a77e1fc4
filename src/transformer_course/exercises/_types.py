"""The plain data of a checker, with no behaviour: a verdict, a typical mistake, a case, a forbidden
shortcut. A leaf module (nothing of the package below it), so that the machinery (``_core``, ``_guards``)
and every chapter's checkers import it without a cycle.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check: ``passed`` and the one-line Chinese ``message`` (with the fix, if any).

    ``nudge``: what the learner sees the first time this ``kind`` of failure shows (where it goes wrong,
    not yet how to fix it); empty when the message itself only locates the problem.
    """

    passed: bool
    message: str
    nudge: str = ""
    kind: str = ""


@dataclass(frozen=True)
class Mistake:
    """A typical wrong implementation and the hint (with the fix) shown when the learner's output matches it.

    ``nudge``: a question that points at the quantity to look at, without the fix (shown the first time,
    after where the answers differ); empty: a general one.
    """

    hint: str
    fn: Callable[..., Any]
    nudge: str = ""


@dataclass(frozen=True)
class Case:
    """One test input: the positional ``args`` of the learner's function.

    ``atol`` replaces the exercise's tolerance for this case (inputs of large magnitude, where float32
    rounding is larger); ``note`` is added to a mismatch on this case (what the case is there to test).
    """

    args: tuple
    atol: float | None = None
    note: str = ""


@dataclass(frozen=True)
class Forbidden:
    """A shortcut the exercise statement rules out, with the Chinese ``reason`` shown when it is taken.

    functions: torch functions or ``Tensor`` methods the learner's code must not call.
    course: no function of the course package (``tc.*``; the checkers' own helpers excepted).
    indexing: no lookup with a tensor or list as the index (``weight[ids]``).
    loops: the number of torch calls must not depend on the input's size (no Python loop over rows).
    max_numel: no tensor made by a torch call may have more than ``max_numel(*args)`` elements.
    unique_writes: no indexed write (``x[idx] = ...``, ``index_put_``, ``index_copy_``) may name one slot twice:
    which value stays is undefined in PyTorch (and differs on a GPU).
    example: an attempt that takes the shortcut (tried by ``tools/wrong_attempts.py``).
    """

    reason: str
    functions: tuple[Callable[..., Any], ...] = ()
    course: bool = False
    indexing: bool = False
    loops: bool = False
    max_numel: Callable[..., int] | None = None
    unique_writes: bool = False
    example: Callable[..., Any] | None = None
