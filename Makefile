# Two commands: `make demo` and `make test`. Both create (or reuse) ./.venv and
# install torch==2.13.0 before anything that depends on it, so no dependency can
# pull another torch build (constraints.txt pins it for every later install).
# The demo installs what the demo needs (the package, scikit-learn's digits and
# matplotlib for the report it writes into ./demo-report);
# the tests install the test extra (anchors, hypothesis, pytest) on top.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH := $(VENV)/.stamp-torch
DEMO := $(VENV)/.stamp-demo
TEST := $(VENV)/.stamp-test

.PHONY: demo test bench venv

venv: $(TEST)

$(TORCH): constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install torch==2.13.0
	touch $(TORCH)

$(DEMO): $(TORCH) pyproject.toml
	$(PY) -m pip install -c constraints.txt -e ".[demo]"
	touch $(DEMO)

$(TEST): $(TORCH) pyproject.toml
	$(PY) -m pip install -c constraints.txt -e ".[test]"
	touch $(DEMO) $(TEST)

demo: $(DEMO)
	$(VENV)/bin/retrieval-metrics demo --report demo-report

test: $(TEST)
	$(PY) -m pytest

bench: $(TEST)
	$(PY) benchmarks/bench_scores.py
