# The course's commands. Each one creates .venv and installs what it needs on first use.
#   make book        build the book into _build/html (executes every chapter)
#   make test        ruff, make book, then every test (the fresh build against the stored chapters, package,
#                    checkers, exercise versions, strict Sphinx build, browser), nbval on generic kernels
#   make exercises   write the notebooks Colab and Jupyter open, in plain Markdown: exercises/ (solutions
#                    stubbed) and colab/ (full chapters; the book's Colab button); never overwrites your edits
#   make execute     re-run chapters and store their outputs (after editing a chapter)
#   make bench       performance measurements (5-9 minutes on 2 cores) into bench/results.{md,json}
#   make portability every chapter under nbval on each CPU kernel path x 1/2 threads (docs/portability.md)
#   make margins     training-outcome claims over 5 seeds x 3 kernel paths (docs/margins.md)
#   make pdf         the whole book as one PDF (_build/pdf/book.pdf) from the stored outputs; needs chromium
PYTHON ?= python3
TORCH  ?= torch==2.13.0
TORCH_INDEX ?=
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: book test lint exercises execute bench portability margins pdf setup-cells clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q "$(TORCH)" $(TORCH_INDEX)
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $(STAMP)

book: $(STAMP)
	@start=$$(date +%s); $(BIN)/jupyter-book build --all -W -n --keep-going . && \
	  echo "book built in $$(( $$(date +%s) - start )) s: open _build/html/index.html"

# make test builds the book first, exactly as make book does (every chapter executed, -W), and the tests
# reuse that one fresh execution: tests/test_fresh_build.py compares it with the stored chapters (outputs
# per cell in kind and order, no empty output, one picture per figure label, checked cells equal). Then
# two pytest workers with one thread each (two kernels with two threads each on two cores thrash): the
# exercise versions run twice in one kernel (leftover state), and the rest. Last, nbval runs the chapters
# once more on PyTorch's generic CPU kernels (another machine's summation order).
test: lint book
	OMP_NUM_THREADS=1 TC_REQUIRE_FRESH_BUILD=1 $(BIN)/python -m pytest tests -n 2 --dist loadfile --durations=10
	$(BIN)/python tools/portability.py --only default:1

lint: $(STAMP)
	$(BIN)/ruff check src tools tests

exercises:
	$(PYTHON) tools/make_exercises.py

execute: $(STAMP)
	$(BIN)/python tools/execute_notebooks.py

bench: $(STAMP)
	$(BIN)/python tools/bench.py

portability: $(STAMP)
	$(BIN)/python tools/portability.py

margins: $(STAMP)
	$(BIN)/python tools/margins.py

pdf: $(STAMP)
	$(BIN)/python tools/pdf.py

setup-cells: $(STAMP)
	$(BIN)/python tools/notebook_setup.py

clean:
	rm -rf _build
