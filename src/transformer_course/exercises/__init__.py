"""Exercise checkers, one module per chapter (``ch03`` …). Each ``check_*`` prints a one-line Chinese verdict.

A chapter whose checkers are long is a folder (``ch10/``: ``__init__`` lists the exercises, one module per
long checker beside it); the rest is one file. Chapter modules are imported on first use, so
``tc.exercises.ch03`` works without listing them here. Shared: ``_types`` (plain data), ``_rules`` (the
classes of wrong answer every checker looks for), ``_guards`` (one guarded call), ``_verdicts`` (wording),
``_core`` (``Exercise``), ``_stability`` (numerically naive variants several chapters reject).
"""
from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

CHAPTERS = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("ch"))


def __getattr__(name: str) -> ModuleType:
    if name in CHAPTERS:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}; chapters: {', '.join(CHAPTERS)}")


def __dir__() -> list[str]:
    return sorted([*globals(), *CHAPTERS])
