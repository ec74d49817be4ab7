# cubequeue — two commands from a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# `make run` installs only what running needs; `make test` adds the test tool chain.
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed-test
NODE_DIR := tests/node
PG_NODE_DIR := tests/server/pgwire/clients/node
CUBE_API_DIR := tests/node/cube-api
CUBE_API_17_DIR := tests/node/cube-api-17
JDBC_JAR := /usr/share/java/postgresql.jar
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: help install run test quick lint typecheck typecheck-tree pytest node-test system-deps node-deps bench bench-quick docker-smoke hadolint clean
.DEFAULT_GOAL := help

# A bare `make` lists the targets (it installs nothing).
help:
	@echo "cubequeue: make TARGET"
	@echo "  run          install what running needs (from uv.lock) and start the server in memory;"
	@echo "               flags go in ARGS, e.g. make run ARGS='--port 6432 --http-port 3031'"
	@echo "  test         install everything the tests need (venv, npm and Debian packages) and run every test (CI)"
	@echo "  quick        the unit and in-process tests only: no apt, npm or browsers (the fast loop)"
	@echo "  lint         ruff and import-linter;  typecheck: mypy strict"
	@echo "  bench        the benchmarks against PostgreSQL 15, Redis 7 and a bare-Python floor server (bench/RESULTS.md);  bench-quick: a short run"
	@echo "  lock         re-resolve uv.lock after a dependency change in pyproject.toml"
	@echo "  clean        remove the venv, build output and npm packages"

# $(call timed,NAME,COMMAND): run COMMAND and print how long the suite NAME took
# (make test prints one such line per suite).
define timed
@s=$$(date +%s); $(2); rc=$$?; echo "[time] $(1): $$(( $$(date +%s) - s )) s"; exit $$rc
endef

install: $(STAMP)

# Every dependency is installed at the version uv.lock pins (pyproject.toml keeps only lower
# bounds, for library users). uv itself is pinned and lives in its own venv under build/, so
# syncing the project's venv never removes it.
UV_VERSION := 0.13.9
UV := build/uv/bin/uv
SYNC := UV_PROJECT_ENVIRONMENT=$(VENV) $(UV) sync --frozen --quiet --python $(PYTHON)

$(UV):
	$(PYTHON) -m venv build/uv
	build/uv/bin/python -m pip install -q uv==$(UV_VERSION)

$(RUN_STAMP): pyproject.toml uv.lock | $(UV)
	$(SYNC)
	touch $@

$(STAMP): $(RUN_STAMP)
	$(SYNC) --extra test
	touch $@

lock: $(UV)
	$(UV) lock

# ARGS: the server's own flags (`make run ARGS='--port 6432'`); CUBEQUEUE_PORT and
# CUBEQUEUE_HTTP_PORT in the environment do the same.
run: $(RUN_STAMP)
	$(VENV)/bin/cubequeue $(ARGS)

# Debian packages the tests and benchmarks use: psql, the JDBC driver, PostgreSQL and Redis
# (peers for the benchmarks), promtool (checks docs/monitoring's alert rules). Installed only
# when missing, so a warm machine skips apt.
system-deps:
	@need=""; \
	command -v psql >/dev/null || need="$$need postgresql-client"; \
	[ -f $(JDBC_JAR) ] || need="$$need libpostgresql-jdbc-java"; \
	command -v javac >/dev/null || need="$$need default-jdk-headless"; \
	command -v node >/dev/null || need="$$need nodejs"; \
	command -v npm >/dev/null || need="$$need npm"; \
	command -v openssl >/dev/null || need="$$need openssl"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need="$$need postgresql"; \
	[ -x /usr/bin/chromium ] || need="$$need chromium"; \
	command -v promtool >/dev/null || need="$$need prometheus"; \
	if [ -n "$$need" ]; then \
	  echo "installing Debian packages:$$need"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$need; \
	fi

# Cube's QueryQueue bench (bench/cube_queue.py): the 0.35 line here, the 1.7.43 line from tests/node.
BENCH_QQ_DIR := bench/queryqueue
$(BENCH_QQ_DIR)/node_modules/.package-lock.json: $(BENCH_QQ_DIR)/package-lock.json
	npm ci --prefix $(BENCH_QQ_DIR) --ignore-scripts --no-audit --no-fund --loglevel=error

bench-deps: $(BENCH_QQ_DIR)/node_modules/.package-lock.json $(NODE_DIR)/node_modules/.package-lock.json
	@need=""; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need="$$need postgresql"; \
	command -v redis-server >/dev/null || need="$$need redis-server"; \
	command -v pgbench >/dev/null || need="$$need postgresql-contrib"; \
	if [ -n "$$need" ]; then \
	  echo "installing Debian packages:$$need"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$need; \
	fi

lint: install typecheck-tree
	$(call timed,ruff,$(VENV)/bin/ruff check server grammar storage tests bench)
	$(call timed,import-linter,PYTHONPATH=build/typecheck $(VENV)/bin/lint-imports)

# mypy and import-linter cannot follow setuptools' editable import hook, so give them a
# cubequeue/ tree of links.
typecheck-tree:
	@mkdir -p build/typecheck/cubequeue
	@for p in server grammar storage; do ln -sfn ../../../$$p build/typecheck/cubequeue/$$p; done

typecheck: install typecheck-tree
	$(call timed,mypy,$(VENV)/bin/mypy -p cubequeue.server -p cubequeue.grammar -p cubequeue.storage)

test: install system-deps node-deps lint typecheck hadolint pytest node-test docker-smoke

# npm test packages: Cube's own driver and orchestrator (their postinstall fetches native
# binaries from GitHub, hence --ignore-scripts), node-postgres, a real Cube API and the
# QueryQueue bench's packages (its harness test runs the bench for 2 s).
node-deps: $(NODE_DIR)/node_modules/.package-lock.json $(PG_NODE_DIR)/node_modules/.package-lock.json $(CUBE_API_DIR)/node_modules/.package-lock.json $(CUBE_API_17_DIR)/node_modules/.package-lock.json $(BENCH_QQ_DIR)/node_modules/.package-lock.json

# A real Cube API (0.35 line) for tests/node/cube-api; the native binary is not fetched.
$(CUBE_API_DIR)/node_modules/.package-lock.json: $(CUBE_API_DIR)/package-lock.json
	npm ci --prefix $(CUBE_API_DIR) --ignore-scripts --no-audit --no-fund --loglevel=error

# A real Cube API (1.7 line) for tests/node/cube-api-17; the native binary is not fetched.
$(CUBE_API_17_DIR)/node_modules/.package-lock.json: $(CUBE_API_17_DIR)/package-lock.json
	npm ci --prefix $(CUBE_API_17_DIR) --ignore-scripts --no-audit --no-fund --loglevel=error

$(NODE_DIR)/node_modules/.package-lock.json: $(NODE_DIR)/package-lock.json
	npm ci --prefix $(NODE_DIR) --ignore-scripts --no-audit --no-fund --loglevel=error

$(PG_NODE_DIR)/node_modules/.package-lock.json: $(PG_NODE_DIR)/package-lock.json
	npm ci --prefix $(PG_NODE_DIR) --no-audit --no-fund --loglevel=error

# Cube's real QueryQueue and cache driver against the server (node's test runner).
node-test: install system-deps node-deps
	$(call timed,node (Cube's driver and a real Cube API),node --test --test-concurrency=1 $(NODE_DIR)/*.test.cjs $(CUBE_API_DIR)/*.test.cjs $(CUBE_API_17_DIR)/*.test.cjs)
	# the same QueryQueue/cache suites against --store postgresql://… (a throwaway PostgreSQL)
	$(call timed,node over the PostgreSQL store,PYTHONPATH=tests/support $(PY) tests/storage/postgres/frontends/node_suite.py)

hadolint: install
	$(call timed,hadolint,$(VENV)/bin/hadolint Dockerfile)

# The image's install steps in a fresh venv from a built wheel, started as its CMD/ENV would.
docker-smoke: install
	$(call timed,docker-smoke,bash tests/server/ops/docker_smoke.sh)

pytest: install system-deps node-deps
	$(call timed,pytest,$(VENV)/bin/pytest -q)

# The fast loop: unit and in-process tests from the venv alone (no apt, npm or browsers);
# tests/conftest.py lists what is `system`, and long tests mark themselves `slow`.
quick: install
	$(call timed,pytest (quick),$(VENV)/bin/pytest -q -m "not slow and not system")

bench: install bench-deps
	$(PY) -m bench.run
	$(PY) -m bench.stall
	$(PY) -m bench.soak
	$(PY) -m bench.durable
	$(PY) -m bench.pgstore
	$(PY) -m bench.console
	# the failover test at three times make test's load and time (docs/topology.md)
	CUBEQUEUE_FAILOVER_LONG=1 $(VENV)/bin/pytest -q tests/storage/postgres/frontends/test_pgstore_failover.py

bench-quick: install bench-deps
	$(PY) -m bench.run --quick
	$(PY) -m bench.stall --quick
	$(PY) -m bench.soak --quick
	$(PY) -m bench.durable --quick
	$(PY) -m bench.pgstore --quick

clean:
	rm -rf $(VENV) build dist *.egg-info $(NODE_DIR)/node_modules $(PG_NODE_DIR)/node_modules $(CUBE_API_DIR)/node_modules $(CUBE_API_17_DIR)/node_modules
