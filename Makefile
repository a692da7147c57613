# Two commands do all set-up: `make run` (service on embedded defaults) and `make test` (whole suite).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell sha256sum pyproject.toml | cut -c1-16)

.PHONY: run test lint typecheck check system-deps setup env migrate clean messages

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,eval,lmeval]'
	rm -f $(VENV)/.installed-*
	touch $@

system-deps:
	@scripts/system-deps

# Compiled translation catalogs (.mo) are build output, not committed. DEBUG=1: compiling needs no
# secret, and CI (or a first `make test`) has no .env yet. After system-deps (order only: msgfmt is
# one of its packages), which `make -j2` would otherwise run beside it.
messages: $(STAMP) | system-deps
	DEBUG=1 $(BIN)/python manage.py compilemessages --ignore=.venv --ignore=var -v0

setup: system-deps $(STAMP) messages

# .env: a generated SECRET_KEY (kept), DEBUG=1, HOST/PORT; manage.py, celery and honcho read it.
env: setup
	$(BIN)/python -m governance.core.localenv

migrate: env
	$(BIN)/python manage.py migrate --noinput

# Web server, Celery worker and beat under honcho: one Ctrl-C (or SIGTERM to make) stops all three.
# `exec` makes honcho the recipe's process itself, so make's SIGTERM reaches it directly. The start-up
# notes (address, first-start demo passwords, the metrics scrape) wait in the background, honcho their
# parent, and print once the web server and the worker answer: below the services' own start-up lines.
DEMO_PASSWORDS := var/demo-passwords

run: migrate
	$(BIN)/python manage.py bootstrap --passwords-file $(DEMO_PASSWORDS)
	$(BIN)/python -m governance.core.startnotes --passwords-file $(DEMO_PASSWORDS) & exec $(BIN)/honcho start -f Procfile

# Two pytest-xdist workers (the CI machine has 2 cores), each with a test database of its own, and
# alongside them the fault, cluster and browser suites in two processes (scripts/test-suite;
# SERIAL_AFTER=1: after the workers, in one). PYTEST_WORKERS=0: the workers' part in one process.
PYTEST_WORKERS ?= 2

test: setup
	PYTHON=$(BIN)/python PYTEST_WORKERS=$(PYTEST_WORKERS) scripts/test-suite $(PYTEST_ARGS)

# scripts/check-conventions: the project's own rules (vendor branches, the web asking rather than
# comparing statuses and roles, services' transactions, audit reads), each with its exemptions.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python scripts/check-conventions

typecheck: setup
	$(BIN)/mypy governance planner tests

check: lint typecheck test

clean:
	rm -rf $(VENV) var .env
