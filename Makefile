# Quick start: `make run` (set up, run the main job) and `make test` (set up, run every test).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HASH := $(shell cksum pyproject.toml | cut -d' ' -f1)
STAMP_RUN := $(VENV)/.installed-run-$(HASH)
STAMP_TEST := $(VENV)/.installed-test-$(HASH)
# the compiled fleet engine (setup.py) is rebuilt when its sources change
NATIVE_SRC := setup.py simulator/fleet/native.py simulator/fleet/sim.py simulator/fleet/config.py simulator/fleet/itercost.py
# the tests that run both engines: compiled (the install's) and pure Python (SPECAGENT_PURE_PYTHON=1)
ENGINE_TESTS := tests/test_native_engine.py tests/test_fleet_golden.py tests/test_fleet_engine.py tests/test_fleet_core.py \
	tests/test_fleet_cli.py tests/test_costmodel_roofline.py

.PHONY: run test lint scenarios setup bench clean notebooks

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip setuptools wheel >/dev/null

$(STAMP_RUN): pyproject.toml $(NATIVE_SRC) | $(BIN)/python
	$(BIN)/python -m pip install -e .
	touch $@

$(STAMP_TEST): pyproject.toml $(NATIVE_SRC) | $(BIN)/python
	$(BIN)/python -m pip install -e '.[test]'
	touch $@ $(STAMP_RUN)

setup: $(STAMP_RUN)

run: $(STAMP_RUN)
	$(BIN)/specagent predict --report out/predict/report.html

test: $(STAMP_TEST) lint
	bash tools/install-browser.sh
	$(BIN)/python -m pytest -q
	SPECAGENT_PURE_PYTHON=1 $(BIN)/python -m pytest -q $(ENGINE_TESTS)

# ruff (in the [test] and [dev] extras) with the configuration in pyproject.toml; `make test` runs it first
lint: $(STAMP_TEST)
	$(BIN)/ruff check .

# regenerate the shipped default scenario after adding a strategy or a Scenario field (tests/test_scenario.py checks it)
scenarios: $(STAMP_RUN)
	$(BIN)/specagent scenario show > simulator/scenarios/default.toml.tmp
	mv simulator/scenarios/default.toml.tmp simulator/scenarios/default.toml  # atomic: a failed run leaves the old file

# execute the tutorial notebooks and store them with their outputs (tests check they match their code)
notebooks: $(STAMP_TEST)
	bash tools/install-browser.sh
	$(BIN)/python tools/run_notebooks.py

bench: $(STAMP_TEST)
	for f in benchmarks/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info out simulator/*.so simulator/_native_build.json simulator/fleet/*.so simulator/fleet/_native_build.json
