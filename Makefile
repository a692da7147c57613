# Two commands do all set-up: `make run` (service on embedded defaults) and `make test` (whole suite).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell sha256sum pyproject.toml | cut -c1-16)

.PHONY: run test lint typecheck check system-deps setup migrate clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,eval]'
	rm -f $(VENV)/.installed-*
	touch $@

system-deps:
	@scripts/system-deps

setup: system-deps $(STAMP)

migrate: setup
	DEBUG=$${DEBUG:-1} $(BIN)/python manage.py migrate --noinput

# Web server, Celery worker and beat under honcho: one Ctrl-C stops all three.
run: migrate
	DEBUG=$${DEBUG:-1} $(BIN)/python manage.py bootstrap
	DEBUG=$${DEBUG:-1} $(BIN)/honcho start -f Procfile

test: setup
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy governance planner

check: lint typecheck test

clean:
	rm -rf $(VENV) var
