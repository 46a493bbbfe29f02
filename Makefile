# nplm-edu: `make book` builds the book, `make test` runs every test. `make help` lists the rest.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_FLAGS ?= -q

# The Brown corpus: ../shared/nltk_data on the project's machines and in CI, unless NLTK_DATA is set.
ifeq ($(origin NLTK_DATA), undefined)
  ifneq ($(wildcard ../shared/nltk_data),)
    export NLTK_DATA := $(abspath ../shared/nltk_data)
  endif
endif
# (No MPLBACKEND here: notebooks need the inline backend to store their figures.)
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: help venv book test test-unit test-notebooks test-book notebooks bench browser-check clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 18

$(PY):
	@echo ">> creating the virtual environment in $(VENV)"
	python3 -m venv $(VENV)

$(STAMP): requirements.txt pyproject.toml | $(PY)
	@echo ">> installing requirements into $(VENV)"
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	@touch $(STAMP)

venv: $(STAMP)  ## create .venv and install the requirements (skipped when unchanged)
	@echo ">> environment ready: $(VENV) ($$($(PY) --version))"

book: venv  ## build the book into _build/html, warnings as errors
	@echo ">> building the book into _build/html"
	$(VENV)/bin/jupyter-book build . -W -n --keep-going
	@echo ">> open _build/html/index.html"

test: venv test-unit test-notebooks test-book  ## the whole test suite: unit tests, doctests, notebooks (nbval), book build
	@echo ">> all tests passed"

test-unit: venv  ## pytest over tests/ and the package's doctests
	@echo ">> unit tests and doctests"
	$(PY) -m pytest $(PYTEST_FLAGS) tests nplm_edu --doctest-modules

test-notebooks: venv  ## re-execute every notebook in book/ and compare with its stored outputs (nbval)
	@echo ">> notebooks (nbval): re-executing book/*.ipynb"
	$(PY) -m pytest $(PYTEST_FLAGS) --nbval --nbval-current-env --nbval-cell-timeout=900 \
	  --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:randomly book

test-book: book  ## the book builds with no warnings
	@echo ">> book build check passed"

# Notebooks run with one BLAS thread: the same numbers whatever else the machine is doing, so the
# outputs stored by `make notebooks` match what nbval recomputes in `make test`.
test-unit notebooks test-notebooks: export OPENBLAS_NUM_THREADS := 1
test-unit notebooks test-notebooks: export OMP_NUM_THREADS := 1

notebooks: venv  ## execute every notebook in place and store its outputs (after changing a chapter)
	@for nb in book/*.ipynb; do echo ">> executing $$nb"; \
	  $(VENV)/bin/jupyter execute --inplace --timeout=900 "$$nb" || exit 1; done

bench: venv  ## run the benchmarks (minutes; results printed, not asserted)
	@for b in benchmarks/bench_*.py; do echo ">> $$b"; $(PY) $$b || exit 1; done

browser-check: book  ## open every built page in headless Chromium (needs Debian's chromium)
	$(PY) tests/browser/check_book.py _build/html

clean:  ## remove the built book and caches (keeps .venv)
	rm -rf _build .pytest_cache
