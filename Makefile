# Quick start: `make run` (set up, run the main job) and `make test` (set up, run every test).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HASH := $(shell cksum pyproject.toml | cut -d' ' -f1)
STAMP_RUN := $(VENV)/.installed-run-$(HASH)
STAMP_TEST := $(VENV)/.installed-test-$(HASH)

.PHONY: run test setup bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip setuptools wheel >/dev/null

$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -e .
	touch $@

$(STAMP_TEST): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -e '.[test]'
	touch $@ $(STAMP_RUN)

setup: $(STAMP_RUN)

run: $(STAMP_RUN)
	$(BIN)/specagent predict --report out/predict/report.html

test: $(STAMP_TEST)
	bash tools/install-browser.sh
	$(BIN)/python -m pytest -q

bench: $(STAMP_TEST)
	for f in benchmarks/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info out
