# Every target does its own set-up on a fresh machine: it creates .venv and installs kai into it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean control-plane browser

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The KubeRay + KAI walkthrough (examples/ray-kai, files unchanged), cycle by cycle. README.md shows this
# command and its output; tests/test_readme_demo.py keeps the two the same.
RAY_KAI := examples/ray-kai
demo: $(STAMP)
	@$(BIN)/kai sim $(RAY_KAI)/00-queues.yaml $(RAY_KAI)/node-a10g.yaml --at 1:$(RAY_KAI)/01-raycluster-train.yaml --at 2:$(RAY_KAI)/02-rayservice-inference.yaml --cycles 4

# etcd + Kubernetes 1.20.2 binaries for tests/k8s: built once from Debian's source into
# ~/.cache/kai (~8 min on 2 cores, says so when it starts), then a no-op.
control-plane:
	bash scripts/control-plane/provision.sh

# Headless Chromium (Debian's package) for the HTML report test; apt-installs it when missing.
browser:
	bash scripts/browser/provision.sh --quiet

test: $(STAMP) control-plane browser
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/pytest -n 2

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_allocate.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
