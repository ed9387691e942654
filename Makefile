# Two commands on a fresh machine: `make demo` and `make test` (see README.md).
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
CHROMIUM := /usr/bin/chromium
PYTEST_ARGS ?=
# The TensorFlow build: CUDA (the `gpu` extra) where nvidia-smi lists a GPU, else the CPU build.
EXTRAS  ?= $(shell nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && echo gpu,dev,torch || echo tf,dev,torch)

.PHONY: install demo test test-order test-fast lab bench browser-deps clean print-extras

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[$(EXTRAS)]'
	$(BIN)/python -c "from workbench.solvers.pipeline.kernel import warm_compiled; warm_compiled()"
	touch $(STAMP)

install: $(STAMP)

print-extras:
	@echo $(EXTRAS)

# Debian's chromium for the real-browser test (Playwright drives it via executable_path).
browser-deps:
	@test -x $(CHROMIUM) || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

demo: $(STAMP)
	$(BIN)/workbench demo --report reports/demo.html

# The layer rules of docs/architecture.md (pyproject.toml [tool.importlinter]), then every test.
test: $(STAMP) browser-deps
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m pytest -n 2 --dist loadfile -q $(PYTEST_ARGS)

# The suite (tests and doctests, as `make test` collects them) with its files in reverse order:
# a test that passes only after (or before) another one, through state a file leaves behind,
# fails here (issue 23; not part of `make test`).
test-order: $(STAMP) browser-deps
	$(BIN)/python -m pytest -p no:randomly -n 2 --dist loadfile -q $$(for d in widgets \
	  workbench tests; do find $$d -name '*.py' ! -name conftest.py ! -path '*/__pycache__/*' \
	  | LC_ALL=C sort -r; done) $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile -q -m "not slow and not browser and not tf" $(PYTEST_ARGS)

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/

bench: $(STAMP)
	for f in bench/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) reports .pytest_cache
