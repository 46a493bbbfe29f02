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

.PHONY: help venv book test test-unit test-long test-notebooks test-book notebooks bench vendor-js browser-check need-chromium clean

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

test: venv test-unit test-long probes test-notebooks test-book  ## the whole test suite: unit tests, doctests, long experiment tests, fault probes, notebooks (nbval), book build
	@echo ">> all tests passed"

test-unit: venv  ## pytest over tests/ and the package's doctests, without the long tests (a few minutes)
	@echo ">> unit tests and doctests"
	$(PY) -m pytest $(PYTEST_FLAGS) tests nplm_edu --doctest-modules

test-long: venv  ## the long experiment tests (marked long; pytest -m long)
	@echo ">> long experiment tests"
	$(PY) -m pytest $(PYTEST_FLAGS) -m long tests

probes: venv  ## replay the fault probes (kill -9, signals, corrupt files, full disk, concurrent runs, bad options): a few minutes
	$(PY) tests/probes/run_probes.py

test-notebooks: venv  ## re-execute every notebook in book/ and compare with its stored outputs (nbval)
	@echo ">> notebooks (nbval): re-executing book/*.ipynb"
	$(PY) -m pytest $(PYTEST_FLAGS) --nbval --nbval-current-env --nbval-cell-timeout=900 \
	  --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:randomly book

test-book: book  ## the book builds with no warnings
	@echo ">> book build check passed"

# Notebooks run with one BLAS thread: the same numbers whatever else the machine is doing, so the
# outputs stored by `make notebooks` match what nbval recomputes in `make test`.
test-unit test-long notebooks test-notebooks: export OPENBLAS_NUM_THREADS := 1
test-unit test-long notebooks test-notebooks: export OMP_NUM_THREADS := 1

notebooks: venv  ## execute every notebook in place and store its outputs (after changing a chapter)
	@for nb in book/*.ipynb; do echo ">> executing $$nb"; \
	  $(VENV)/bin/jupyter execute --inplace --timeout=900 "$$nb" || exit 1; done

bench: venv  ## run the benchmarks (about an hour, most of it bench_scale's 100 million tokens; results printed, not written)
	@for b in benchmarks/bench_*.py; do echo ">> $$b"; $(PY) $$b || exit 1; done

# The browser check serves the scripts the built pages load from CDNs (require.js, the widget manager,
# MathJax) from local copies of their npm packages, at the versions the pages name, so that it sees
# what a reader sees with no network. `make vendor-js` fetches them once (needs npm) into $(VENDOR_JS).
VENDOR_JS ?= .cache/vendor-js
REQUIREJS_VERSION := 2.3.4
HTML_MANAGER_VERSION := 1.0.6
MATHJAX_VERSION := 3.2.2

VENDOR_STAMP := $(VENDOR_JS)/.fetched-$(REQUIREJS_VERSION)-$(HTML_MANAGER_VERSION)-$(MATHJAX_VERSION)

vendor-js: $(VENDOR_STAMP)  ## fetch require.js, the widget manager and MathJax from npm (for browser-check)

$(VENDOR_STAMP):
	@command -v npm >/dev/null || { echo "error: npm not found; install it (apt-get install -y npm)"; exit 2; }
	@echo ">> fetching require.js $(REQUIREJS_VERSION), @jupyter-widgets/html-manager $(HTML_MANAGER_VERSION), MathJax $(MATHJAX_VERSION) into $(VENDOR_JS)"
	@rm -rf $(VENDOR_JS) && mkdir -p $(VENDOR_JS)/npm
	cd $(VENDOR_JS)/npm && npm pack --silent requirejs@$(REQUIREJS_VERSION) \
	  @jupyter-widgets/html-manager@$(HTML_MANAGER_VERSION) mathjax@$(MATHJAX_VERSION) >/dev/null
	tar -xzf $(VENDOR_JS)/npm/requirejs-$(REQUIREJS_VERSION).tgz -O package/require.js > $(VENDOR_JS)/require.min.js
	mkdir -p $(VENDOR_JS)/html-manager && tar -xzf $(VENDOR_JS)/npm/jupyter-widgets-html-manager-$(HTML_MANAGER_VERSION).tgz \
	  -C $(VENDOR_JS)/html-manager --strip-components=1 package/dist
	mkdir -p $(VENDOR_JS)/mathjax && tar -xzf $(VENDOR_JS)/npm/mathjax-$(MATHJAX_VERSION).tgz -C $(VENDOR_JS)/mathjax --strip-components=2 package/es5
	@rm -rf $(VENDOR_JS)/npm
	@printf '{"requirejs": "%s", "html-manager": "%s", "mathjax": "%s"}\n' $(REQUIREJS_VERSION) \
	  $(HTML_MANAGER_VERSION) $(MATHJAX_VERSION) > $(VENDOR_JS)/versions.json
	@touch $@

# Needs Debian's Chromium: `apt-get install -y chromium` (as root). First a self-test (the check must
# fail a few deliberately broken pages, one per rule, and pass a good one), then every page of the
# built book at 1280 px and at 390 px (a phone) with the network cut off; tests/browser/check_book.py
# says what fails. Screenshots of every page at both widths and of every control before and after it
# is moved (mouse and keyboard) go to _build/screenshots/w1280 and w390.
browser-check: need-chromium book vendor-js  ## open every built page in headless Chromium (apt-get install -y chromium); fail on what a reader would see broken
	$(PY) tests/browser/selftest.py
	$(PY) tests/browser/check_book.py _build/html --vendor-js $(VENDOR_JS) --screenshots _build/screenshots

need-chromium:
	@command -v chromium >/dev/null || { echo "error: chromium not found; install Debian's package: apt-get install -y chromium"; exit 2; }

clean:  ## remove the built book and caches (keeps .venv)
	rm -rf _build .pytest_cache
