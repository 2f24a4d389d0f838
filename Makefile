# Two commands a new user needs: `make demo` and `make test`. Each sets itself up: the demo installs only
# what it runs on (the `cli` extra, a dozen packages); the tests add the development tools on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_STAMP := $(VENV)/.installed-demo
STAMP := $(VENV)/.installed

.PHONY: demo test check lint typecheck pytest docs docs-check setup clean

$(BIN)/python:
	@echo "creating $(VENV) with $(PY)"
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The demo's packages only. pip lists each package as it is collected and installed (its progress).
$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	@echo "installing geppetto with the cli extra into $(VENV) (first run only)"
	$(BIN)/pip install --progress-bar on --disable-pip-version-check -e '.[cli]'
	touch $(DEMO_STAMP)

# Everything the checks need: every extra, the linters, the test tools and the browser test driver.
$(STAMP): pyproject.toml | $(BIN)/python
	@echo "installing geppetto with its development extra into $(VENV) (first run only; about 100 packages)"
	$(BIN)/pip install --progress-bar on --disable-pip-version-check -e '.[dev]'
	touch $(DEMO_STAMP) $(STAMP)

# The LiteLLM proxy that tests/litellm_peer.py runs in front of the simulator, in a virtual environment of its
# own inside .venv: its proxy extra pins rich and websockets below geppetto's. Where it cannot be installed
# the tests through it skip and say why; the next run tries again.
LITELLM := $(VENV)/litellm
LITELLM_STAMP := $(LITELLM)/.installed
LITELLM_REQS := tests/requirements-litellm.txt

$(LITELLM_STAMP): $(LITELLM_REQS) | $(BIN)/python
	@echo "installing the LiteLLM proxy into $(LITELLM) for the tests (first run only)"
	@$(BIN)/python -m venv $(LITELLM) \
	  && $(LITELLM)/bin/pip install --quiet --disable-pip-version-check -r $(LITELLM_REQS) \
	  && touch $@ \
	  || echo "could not install the LiteLLM proxy into $(LITELLM); the tests through it will skip" >&2

setup: $(STAMP) $(LITELLM_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/geppetto demo

LINT_PATHS = $(wildcard src tests bench examples)

lint: $(STAMP)
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)

typecheck: $(STAMP)
	$(BIN)/mypy

# The whole suite, as CI runs it: about 3,000 tests, 15-20 minutes on a 2-core machine (it starts simulators,
# servers, brokers' clients and a browser). Each line of dots ends with how far it has got; the 15 slowest
# tests are listed at the end.
pytest: $(STAMP) $(LITELLM_STAMP)
	@echo "pytest: the whole suite (about 3,000 tests, 15-20 minutes on 2 cores; make check is the quick loop)"
	$(BIN)/pytest -q --durations=15 $(PYTEST_ARGS)

# The inner loop: lint, types and the in-process tests of the library (data model, sessions, tools, costs,
# the engines against the simulator) on two processes (pytest-xdist), leaving out the few long scenarios
# marked slow: under 3 minutes on 2 cores. `make test` runs everything, and is what CI runs.
CHECK_TESTS = tests/core tests/session tests/tools tests/cost tests/responses tests/engines

CHECK_WORKERS ?= 2

check: lint typecheck
	@echo "pytest: the library's in-process tests ($(CHECK_TESTS)) but the slow ones, on $(CHECK_WORKERS) processes; make test runs everything"
	$(BIN)/pytest -q -n $(CHECK_WORKERS) -m "not slow" --durations=5 $(CHECK_TESTS) --ignore=tests/responses/test_litellm_proxy.py $(PYTEST_ARGS)

# The documentation site (mkdocs.yml: the guides in docs/, the README's quick start, the API reference from
# the docstrings). `make docs` serves it while you edit; `make docs-check` builds it with --strict into a
# temporary folder, so a broken link, anchor or reference fails `make test`. Both work offline.
DOCS_ADDR ?= 127.0.0.1:8001
MKDOCS = NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs

docs: $(STAMP)
	$(MKDOCS) serve --dev-addr $(DOCS_ADDR)

docs-check: $(STAMP)
	@site=$$(mktemp -d) && trap 'rm -rf "$$site"' EXIT && $(MKDOCS) build --strict --site-dir "$$site"

test: lint typecheck docs-check pytest

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
