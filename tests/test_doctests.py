"""The "Example:" sections of the package's docstrings run and print what they show."""
from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import transformer_course

MODULES = [m.name for m in pkgutil.iter_modules(transformer_course.__path__) if not m.ispkg]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"transformer_course.{name}")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
