# longhaul — the two commands: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
BOOTSTRAP := .bootstrap
UV := $(shell command -v uv 2>/dev/null || echo $(BOOTSTRAP)/bin/uv)
VENV := .venv
ARGS ?=

.PHONY: run test durations lint lint-types bench bench-check sync bytecode clean browser sandbox deploy-test

$(BOOTSTRAP)/bin/uv:
	@echo "uv not found on PATH: installing it into $(BOOTSTRAP)/"
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --target $(BOOTSTRAP) uv

# Bytecode compiled once, here: under PYTHONDONTWRITEBYTECODE (set in many shells and CI
# images) no process writes it, so every `longhaul` command, service and test worker compiled
# the whole dependency tree again (about 1 s of CPU per process; `make test` starts hundreds).
# Reading .pyc is unaffected by that variable. The members' sources are compiled on each
# `make test`, which skips what is up to date.
$(VENV)/.synced: Makefile pyproject.toml uv.lock $(wildcard libs/*/pyproject.toml services/*/pyproject.toml) | $(UV)
	$(UV) sync --frozen --compile-bytecode
	@touch $@

sync: $(VENV)/.synced

bytecode: sync
	@$(VENV)/bin/python -m compileall -q -j 0 libs services

# Without a configured model, make run uses scripted:demo: an offline agent that plans, reads
# and writes files in the workdir and delegates to a sub-agent (scripted:auto stays for tests).
run: sync
	LONGHAUL_MODEL="$${LONGHAUL_MODEL:-scripted:demo}" $(VENV)/bin/longhaul up $(ARGS)

# The run-viewer e2e tests drive Debian's chromium through Playwright (no browser download);
# install it when we can (root + apt),
# otherwise those tests skip and say why.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium for the run-viewer browser test"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "chromium install failed: the browser test will be skipped"; \
	  else echo "chromium not found and cannot be installed here: the browser test will be skipped"; fi; }

# bash and the verifier's command check run confined by bubblewrap; install it when we can,
# otherwise the sandbox tests skip and say why (and the executor refuses bash).
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing bubblewrap for the tool sandbox"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null) \
	      || echo "bubblewrap install failed: the sandbox tests will be skipped"; \
	  else echo "bwrap not found and cannot be installed here: the sandbox tests will be skipped"; fi; }

# Whole files per worker, queued in collection order: tests/conftest.py puts the heaviest
# files (tests/slow.py) first; xdist's default reorder would put the fewest-test files last.
PYTEST_XDIST := -n 2 --dist loadfile --no-loadscope-reorder

test: bytecode browser sandbox
	$(VENV)/bin/python -m pytest -q $(PYTEST_XDIST) $(ARGS)

# make test with every test's duration, then each file's total and the 2-worker makespan.
durations: bytecode browser sandbox
	set -o pipefail; $(VENV)/bin/python -m pytest -q $(PYTEST_XDIST) --durations=0 $(ARGS) \
	  | tee .pytest-durations.txt; status=$$?; \
	  $(VENV)/bin/python -m tests.support.durations .pytest-durations.txt; exit $$status

lint: sync
	$(VENV)/bin/ruff check libs services tests bench examples
	$(VENV)/bin/ruff format --check libs services tests bench examples
	$(MAKE) --no-print-directory lint-types

lint-types: sync
	$(VENV)/bin/mypy libs/domain/src libs/core/src libs/llm/src libs/agent/src libs/cli/src libs/client/src services/gateway/src services/planner/src services/executor/src services/verifier/src
	$(VENV)/bin/mypy tests bench examples

# The peers bench (bench/peers/) needs LangGraph: its `peers` dependency group is synced here,
# on top of the dev install, never as part of `make run` or `make test`.
bench: sync
	$(UV) sync --frozen --inexact --group peers
	$(VENV)/bin/python -m bench $(ARGS)

# The shipped deployment for real: builds deploy/Dockerfile, starts docker-compose.yml with
# generated secrets and keys, runs traces (bash, a command check, per-key MCP), kills a NATS node
# and an executor under load, upgrades in place, then down -v. Needs a container engine (fails
# loudly without one); not part of make test. See tests/deploy/__main__.py.
deploy-test: sync
	$(VENV)/bin/python -m tests.deploy $(ARGS)

# Reruns the quick suites; fails on a ratio more than 20 % worse than the one kept in bench/results/.
bench-check: sync
	$(VENV)/bin/python -m bench.check

# kill -9 / SIGSTOP each service of `longhaul up` under load; prints the recovery table.
chaos: sync
	$(VENV)/bin/python -m tests.chaos.suite $(ARGS)

clean:
	rm -rf $(VENV) $(BOOTSTRAP) .longhaul .pytest_cache .mypy_cache .ruff_cache
