# Srift: `make run` installs and serves on 127.0.0.1:8000 (embedded SQLite); `make test` installs and runs every test.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Every Python dependency, hashed (requirements/lock.txt, generated from pyproject's ranges by `make lock`).
LOCK := requirements/lock.txt
APT_PACKAGES := postgresql chromium chromium-driver iproute2 iperf3 procps wrk
PYTEST_ARGS ?=
WARM_IMPORTS := import srift.cli, srift.api.app, torch, torch._dynamo, numpy, scipy.optimize, xgboost
# The suite runs on parallel workers (pytest-xdist): one per CPU, at most 4. Tests that must not run at once
# share one worker, one after another (--dist loadgroup; tests/conftest.py groups root and browser tests, and
# a module's tests that share a module-scoped fixture). A test past its timeout (pyproject) ends its worker with
# every thread's stack (timeout_method=thread: a hang in C code never sees the signal method's alarm), and the
# run goes on with a fresh worker. PYTEST_PARALLEL= runs the suite in one process.
PYTEST_PARALLEL ?= -n auto --maxprocesses 4 --dist loadgroup -o timeout_method=thread

.PHONY: install lock system-deps run test test-bytecode test-fast lint typecheck bench clean

# The simulator's stage kernel (srift/sim/_stage.c) is compiled at install: a C compiler is fetched when
# missing and apt-get can run; without one the install still works and the simulator runs in pure Python.
$(VENV)/.installed: pyproject.toml setup.py srift/sim/_stage.c $(LOCK)
	@command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing gcc for the simulator's C kernel"; \
	    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q gcc libc6-dev >/dev/null; } \
	      || echo "warning: could not install gcc: the simulator will use its slower pure-Python stage"; \
	  else echo "warning: no C compiler: the simulator will use its slower pure-Python stage"; fi; }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@# --no-compile: Python compiles a module when it is first imported; compiling every file of the lock at
	@# install (torch's thousands) took more than half the install's CPU (137 s of user time against 62 s).
	$(BIN)/python -m pip install -q --no-compile --require-hashes --no-deps -r $(LOCK)
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
	$(BIN)/python -m pip check
	touch $@

# Byte-compile what Srift's commands import (about 15 s, not the lock's every file). Where
# PYTHONDONTWRITEBYTECODE is set (this project's CI machines, many containers) Python never writes these
# caches itself, and every `srift` call would compile torch's modules again: importing them took 12.7 s
# without the caches and 5.0 s with them. A stamp of its own, after the packages': `make test` runs it
# beside lint and mypy, which need the packages, not these caches.
$(VENV)/.warm: $(VENV)/.installed
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -c "$(WARM_IMPORTS)"
	touch $@

install: $(VENV)/.warm

# Regenerate both locks from pyproject's ranges and requirements/constraints.in (uv, from the lock): one
# command, one commit. The existing pins stay unless the inputs force them to move; LOCK_ARGS=--upgrade moves
# every pin to the newest release the ranges allow. `scripts/lock.py --check` (and tests/deploy/test_lock.py)
# says when the locks and pyproject disagree.
LOCK_ARGS ?=
lock: install
	$(BIN)/python scripts/lock.py $(LOCK_ARGS)

# Debian packages the test suite needs: a PostgreSQL server, headless Chromium, iproute2/tc for the testbed,
# wrk (the compiled load generator of benchmarks/load_wrk.py).
system-deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing >/dev/null; \
	fi

run: install
	$(BIN)/srift serve

lint: $(VENV)/.installed
	$(BIN)/ruff check srift tests probes benchmarks migrations
	$(BIN)/ruff format --check srift tests probes benchmarks migrations
	$(BIN)/lint-imports

typecheck: $(VENV)/.installed
	$(BIN)/mypy srift

# The byte-compiling step of install, lint and mypy run at once (single-threaded jobs, about 12 s, 1 s and
# 23 s on a 2-core host, one after another before), then the tests' byte-compiling beside mypy: each job's
# output is printed when it ends.
test: $(VENV)/.installed system-deps
	$(MAKE) -j3 --output-sync=target install lint typecheck test-bytecode
	@url=$$(scripts/pg.sh start) || exit 1; \
	SRIFT_TEST_POSTGRES_URL=$$url $(BIN)/python -m pytest $(PYTEST_PARALLEL) $(PYTEST_ARGS); rc=$$?; \
	scripts/pg.sh stop; exit $$rc

# Compile the test modules and what only they import (hypothesis, schemathesis, moto, ...) by collecting
# every test once, as each parallel worker does. From a fresh clone both workers compiled the same files at
# once: starting `pytest -n 2` took 30 s of wall time against 9 s where they were compiled already. `make
# test` runs this while mypy runs; a test module that does not import fails here, before the run.
test-bytecode: $(VENV)/.warm
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -p no:cacheprovider --collect-only -qq \
	  > $(VENV)/collect.log 2>&1 || { tail -n 60 $(VENV)/collect.log; exit 1; }

# Quick loop while developing: SQLite only, no lint.
test-fast: install
	$(BIN)/python -m pytest -x -q -m "not postgres and not browser and not slow" $(PYTEST_PARALLEL) $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) var .mypy_cache .ruff_cache .pytest_cache build srift/sim/_stage.*.so
