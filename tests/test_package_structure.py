"""The package's shape, as a maintainer relies on it: imports form no cycle, the model never depends on its
grader or on matplotlib, ``import transformer_course`` loads neither, and every checker is registered."""
from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import transformer_course
from transformer_course import exercises
from transformer_course.exercises._core import Exercise

PACKAGE = Path(transformer_course.__file__).parent


def import_graph() -> dict[str, set[str]]:
    """``{module: modules of the package it imports}``, from the source: every ``import`` statement, at
    the top or inside a function (a function-level import is still a dependency)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target.startswith("transformer_course"):
                    for alias in node.names:  # ``from . import data``: the submodule itself
                        sub = f"{target}.{alias.name}"
                        deps.add(sub if (PACKAGE.parent / (sub.replace(".", "/") + ".py")).exists()
                                 or (PACKAGE.parent / sub.replace(".", "/")).is_dir() else target)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.startswith("transformer_course"))
        deps.discard(name)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if dep.startswith(node + "."):  # a package's __init__ importing its own submodule is no cycle
                continue
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep]
            if state.get(dep) is None and (found := visit(dep)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if state.get(node) is None and (found := visit(node)):
            return found
    return None


def test_the_package_imports_form_no_cycle():
    graph = import_graph()
    assert len(graph) > 40 and "transformer_course.exercises._core" in graph
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_the_model_depends_neither_on_its_grader_nor_on_plotting():
    graph = import_graph()
    upward = {m: sorted(d for d in deps if d.startswith(("transformer_course.exercises", "transformer_course.viz")))
              for m, deps in graph.items()
              if not m.startswith(("transformer_course.exercises", "transformer_course.viz"))
              and m != "transformer_course"}
    assert not {m: d for m, d in upward.items() if d}


def test_import_transformer_course_loads_no_checker_and_no_matplotlib():
    code = ("import sys, transformer_course as tc; "
            "print(sorted(m for m in sys.modules if m.startswith(('matplotlib', 'transformer_course.exercises', "
            "'transformer_course.viz')))); tc.viz.use_course_style; tc.exercises.ch03.check_attention; "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[]" and out[1] == "True", out  # nothing at import; both load on first use


def test_every_exercise_is_registered_in_its_chapters_list():
    """An ``Exercise`` defined anywhere in the checkers but missing from a chapter's ``EXERCISES`` would
    escape every test of tests/test_exercises.py."""
    registered = {id(e) for ch in exercises.CHAPTERS for e in getattr(exercises, ch).EXERCISES}
    defined = {}
    for info in pkgutil.iter_modules(exercises.__path__):
        module = importlib.import_module(f"{exercises.__name__}.{info.name}")
        defined.update({id(v): f"{info.name}.{k}" for k, v in vars(module).items() if isinstance(v, Exercise)})
    assert len(defined) >= 50
    assert not [name for key, name in defined.items() if key not in registered]


def _code_lines(function) -> int:
    """Lines of a function's body that hold code: no docstring, no comment-only or blank line."""
    import ast
    import inspect
    import textwrap

    source = textwrap.dedent(inspect.getsource(function))
    definition = ast.parse(source).body[0]
    body = definition.body[1:] if isinstance(definition.body[0], ast.Expr) else definition.body
    numbers = {n for node in body for sub in ast.walk(node) if hasattr(sub, "lineno")
               for n in range(sub.lineno, sub.end_lineno + 1)}
    lines = source.splitlines()
    return sum(1 for n in numbers if lines[n - 1].strip() and not lines[n - 1].strip().startswith("#"))


def test_the_stack_forward_fits_a_screen_and_the_block_takes_its_ffn_as_a_part():
    """Issue 33's measures: ``TransformerStack.forward`` was 37 code lines (8 jobs), now named helpers;
    ``TransformerBlock.__init__`` had 13 parameters (5 choosing the FFN), now the FFN is one (``ffn=``)."""
    import inspect

    from transformer_course.block import TransformerBlock
    from transformer_course.models import TransformerStack

    assert _code_lines(TransformerStack.forward) <= 25
    assert len(inspect.signature(TransformerBlock.__init__).parameters) - 1 <= 12  # without self
    assert "ffn" in inspect.signature(TransformerBlock.__init__).parameters
