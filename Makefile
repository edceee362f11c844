# The README's commands. Each creates (or reuses) a virtualenv and installs
# torch==2.13.0 before anything that depends on it, so no dependency can pull another
# torch build (constraints.txt pins it for every later install).
#
#   make demo      ./.venv (editable install + the demo extra): the digits demo and its report
#   make test      the suite against the BUILT WHEEL, as users install it: builds the sdist and
#                  the wheel (the wheel from the sdist), checks their metadata (twine), installs
#                  the wheel into ./.venv-wheel and runs pytest on a copy of tests/ in
#                  build/wheel-tests, where the source tree cannot shadow the installed copy;
#                  tools/wheel_tests.py says how long it takes (about 11 minutes on a quiet
#                  2-core machine), pytest shows a compact progress (-q)
#   make test-dev  the suite against the editable install in ./.venv (quick, for development)
#   make bench     the score benchmarks
#
# Before any rule, tools/python_env.py checks that $(PYTHON) is one torch 2.13.0 supports
# (3.10-3.14) and removes a virtualenv made by another Python (or broken), so it is rebuilt.
PYTHON ?= python3
VENV ?= .venv
WHEEL_VENV ?= .venv-wheel
PY := $(VENV)/bin/python
WPY := $(WHEEL_VENV)/bin/python
PIP := -m pip install -c constraints.txt

ENV_CHECK := $(shell $(PYTHON) tools/python_env.py $(VENV) $(WHEEL_VENV) 2>&1 || echo error)
ifeq ($(word 1,$(ENV_CHECK)),note:)
$(info $(ENV_CHECK))
else ifneq ($(ENV_CHECK),ok)
$(error $(ENV_CHECK))
endif

.PHONY: demo test test-dev bench venv wheel

venv: $(VENV)/.stamp-test

%/.stamp-torch: constraints.txt
	$(PYTHON) -m venv $*
	$*/bin/python -m pip install -q --upgrade pip
	$*/bin/python -m pip install torch==2.13.0
	touch $@

$(VENV)/.stamp-demo: $(VENV)/.stamp-torch pyproject.toml
	$(PY) $(PIP) -e ".[demo]"
	touch $@

$(VENV)/.stamp-test: $(VENV)/.stamp-torch pyproject.toml
	$(PY) $(PIP) -e ".[test]"
	touch $(VENV)/.stamp-demo $@

demo: $(VENV)/.stamp-demo
	$(VENV)/bin/retrieval-metrics demo --output demo-report

test-dev: $(VENV)/.stamp-test
	$(PY) -m pytest

bench: $(VENV)/.stamp-test
	$(PY) benchmarks/bench_scores.py

# -- the wheel, as users get it --------------------------------------------------------------
$(WHEEL_VENV)/.stamp-tools: $(WHEEL_VENV)/.stamp-torch
	$(WPY) $(PIP) -q build twine
	touch $@

# the build's log (hundreds of lines) goes to build/build.log; its end is shown if it fails
wheel: $(WHEEL_VENV)/.stamp-tools
	rm -rf dist build/lib
	mkdir -p build
	@echo "building the sdist and the wheel (log: build/build.log)"
	@$(WPY) -m build --outdir dist . > build/build.log 2>&1 || { tail -n 40 build/build.log; exit 1; }
	$(WPY) -m twine check --strict dist/*

$(WHEEL_VENV)/.stamp-deps: $(WHEEL_VENV)/.stamp-tools pyproject.toml | wheel
	$(WPY) $(PIP) -q "$$(ls dist/*.whl)[test]"
	touch $@

# Microsoft Recommenders' and RecBole's code for their cross-checks, in a folder of its own
# (pip --no-deps --target: neither is a dependency; tests/anchors/recommenders/rec_env.py says why)
REC_SITE := build/rec-anchors-site
$(REC_SITE)/.stamp: tests/anchors/recommenders/rec_env.py | $(WHEEL_VENV)/.stamp-torch
	$(WPY) -c "import sys, pathlib; sys.path.insert(0, '.'); from tests.anchors.recommenders.rec_env import install; \
	install(pathlib.Path('$(REC_SITE)'))"
	touch $@

test: wheel $(WHEEL_VENV)/.stamp-deps $(REC_SITE)/.stamp
	$(WPY) -m pip install -q --force-reinstall --no-deps dist/*.whl
	REC_ANCHORS_SITE="$(CURDIR)/$(REC_SITE)" $(WPY) tools/wheel_tests.py
