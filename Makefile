# PopcornBench. Everything runs from ./.venv, which scripts/setup.sh creates.
PY := .venv/bin/python
export PATH := $(CURDIR)/.venv/bin:$(PATH)

.PHONY: help setup demo test test-gpu images validate clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

setup:  ## install into .venv (CPU build of torch where there is no GPU)
	scripts/setup.sh

demo: setup  ## the main job: score every shipped oracle solution (GPU if present, else CPU) and print a table
	$(PY) -m orchestrator demo

test:  ## install test dependencies and services, validate every manifest, run the CPU test suite
	scripts/setup.sh --test
	$(PY) -m orchestrator validate
	$(PY) -m pytest -m "not gpu"

test-gpu: setup  ## the GPU tests (run on a CUDA machine, e.g. through the device tool)
	$(PY) -m pytest -m gpu

images: setup  ## build the sandbox images that changed (python -m orchestrator images build)
	$(PY) -m orchestrator images build

validate: setup  ## check every manifest
	$(PY) -m orchestrator validate

clean:  ## remove caches and the virtual environment
	rm -rf .venv .cache .pytest_cache
