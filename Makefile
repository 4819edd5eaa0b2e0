# The two commands a newcomer needs:
#   make run    set up .venv, prepare the default model, open the playground on http://127.0.0.1:7860
#   make test   set up .venv with the test tools and run the test suite (CI runs this)
#   make test-all   the same, with the slow end-to-end tests too (marked `slow`)
# Extra arguments: make run ARGS="--max-n 8"   make test PYTEST_ARGS="-k sampler"
.PHONY: run test test-all bench setup setup-test clean

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

run: $(VENV)/.ready-run
	$(PY) app.py $(ARGS)

test: $(VENV)/.ready-test
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

test-all: $(VENV)/.ready-test
	$(PY) -m pytest $(PYTEST_ARGS)

bench: $(VENV)/.ready-test
	$(PY) -m playground.bench $(ARGS)

setup: $(VENV)/.ready-run
setup-test: $(VENV)/.ready-test

# Stamps: the install runs again only when what it installs from has changed.
$(VENV)/.ready-run: scripts/setup.sh requirements.txt
	PYTHON=$(PYTHON) scripts/setup.sh
	touch $@

# One call for both (not .ready-run first): vLLM and its requirements are resolved once, not twice.
$(VENV)/.ready-test: scripts/setup.sh requirements.txt requirements-test.txt
	PYTHON=$(PYTHON) scripts/setup.sh --test
	touch $(VENV)/.ready-run $@

clean:
	rm -rf $(VENV) .pytest_cache artifacts
