# The few commands people type. Each is also spelled out in README.md.
VENV ?= .venv

.PHONY: install up test lint bench clean

install:
	python3 -m venv $(VENV) && $(VENV)/bin/pip install -e '.[test]'

up: install
	$(VENV)/bin/nightshift up

test: install
	$(VENV)/bin/python -m pytest

lint:
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/mypy

clean:
	rm -rf .nightshift
