# `make demo`, `make lab` and `make test` on a fresh machine (see README.md). They share one .venv,
# grown by extra sets: a stamp file per set, so `make demo` then `make test` upgrades the same venv.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
UV      := $(BIN)/uv
STAMP   := $(VENV)/.installed
CORE_STAMP := $(VENV)/.installed-core
LAB_STAMP  := $(VENV)/.installed-lab
CHROMIUM := /usr/bin/chromium
PYTEST_ARGS ?=
# The TensorFlow build: CUDA (the `gpu` extra) where nvidia-smi lists a GPU, else the CPU build.
EXTRAS  ?= $(shell nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && echo gpu,dev,torch,lab,sweep || echo tf,dev,torch,lab,sweep)
# What the notebooks need: JupyterLab, Dask and Parquet for notebook 09, PyTorch for notebook 10
# (notebook 08 runs without TensorFlow)
LAB_EXTRAS ?= lab,sweep,torch
# The developer's loop, after every change: no notebook, browser, TensorFlow or slow test
CHECK_MARKS := not slow and not notebook and not browser and not tf

.PHONY: install demo test check test-order lab bench browser-deps clean print-extras

# Python writes the bytecode of what it imports (the venv's packages are installed without it:
# compiling all of TensorFlow, PyTorch and JupyterLab up front took longer than the tests' imports)
unexport PYTHONDONTWRITEBYTECODE

# uv installs the packages (decision 101: seconds from its cache; pip took minutes); pip, which
# installs uv, does the work itself where uv cannot be had or fails
$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q uv || echo "make: no uv; pip installs the packages"

# install $(1) into the venv, from the package sources pip is configured with (scripts/uv_args.py)
pip_install = { test -x $(UV) && $(UV) pip install -q --python $(BIN)/python \
	  $$($(BIN)/python scripts/uv_args.py) $(1); } || $(BIN)/python -m pip install -q $(1)

# the core alone: no TensorFlow, PyTorch, CUDA, JupyterLab or Dask (what `workbench demo` needs)
$(CORE_STAMP): pyproject.toml | $(BIN)/python
	$(call pip_install,-e .)
	touch $@

$(LAB_STAMP): pyproject.toml | $(BIN)/python
	$(call pip_install,-e '.[$(LAB_EXTRAS)]')
	touch $@ $(CORE_STAMP)

# everything (`make test`): the frameworks, the test tools, JupyterLab
$(STAMP): pyproject.toml | $(BIN)/python
	$(call pip_install,-e '.[$(EXTRAS)]')
	$(BIN)/python -c "from workbench import samples; from workbench.solvers.pipeline.kernel import \
	  warm_compiled; warm_compiled(samples.diamond())"
	touch $@ $(CORE_STAMP) $(LAB_STAMP)

install: $(STAMP)

print-extras:
	@echo $(EXTRAS)

# Debian's chromium for the real-browser test (Playwright drives it via executable_path).
browser-deps:
	@test -x $(CHROMIUM) || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

demo: $(CORE_STAMP)
	$(BIN)/workbench demo --report reports/demo.html

# The layer rules of docs/architecture.md (pyproject.toml [tool.importlinter]), then every test
# (each notebook executed once, in JupyterLab where chromium is present); the 25 slowest listed.
test: $(STAMP) browser-deps
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m pytest -n 2 --dist loadgroup -q --durations=25 $(PYTEST_ARGS)

# The fast loop (<= 3 min on a quiet 2-core machine): the layer rules, then the tests and
# doctests that need no notebook, browser or TensorFlow and are not slow (marks: pyproject.toml).
check: $(STAMP)
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m pytest -n 2 --dist loadgroup -q --durations=10 -m "$(CHECK_MARKS)" $(PYTEST_ARGS)

# The suite (tests and doctests, as `make test` collects them) with its files in reverse order:
# a test that passes only after (or before) another one, through state a file leaves behind,
# fails here (issue 23; not part of `make test`).
test-order: $(STAMP) browser-deps
	$(BIN)/python -m pytest -p no:randomly -n 2 --dist loadgroup -q $$(for d in widgets \
	  workbench tests; do find $$d -name '*.py' ! -name conftest.py ! -path '*/__pycache__/*' \
	  | LC_ALL=C sort -r; done) $(PYTEST_ARGS)

lab: $(LAB_STAMP)
	$(BIN)/jupyter lab notebooks/

bench: $(STAMP)
	for f in bench/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) reports .pytest_cache
