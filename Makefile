# Quick start: `make run` (set up, run the main job) and `make test` (set up, run every test).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: run test setup bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip setuptools wheel >/dev/null
	$(BIN)/python -m pip install -e '.[test]'
	rm -f $(VENV)/.installed-*; touch $@

setup: $(STAMP)

run: $(STAMP)
	$(BIN)/specagent predict

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	for f in benchmarks/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info
