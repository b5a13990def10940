# Every target does its own set-up on a fresh machine: it creates .venv and installs kai into it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean control-plane browser prometheus helm image

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

# etcd + Kubernetes binaries for tests/k8s, built once into ~/.cache/kai (each says so when it
# starts), then a no-op: the current release from the Go module proxy (~15 CPU-minutes cold) and
# the oldest supported, 1.20.2, from Debian's source (~10 CPU-minutes).
control-plane:
	bash scripts/control-plane/provision.sh current
	bash scripts/control-plane/provision.sh oldest

# Helm (for the chart's tests), built once from the Go module proxy into ~/.cache/kai.
helm:
	bash scripts/helm/provision.sh

# kai's container image as an OCI layout in build/oci/kai (tag: the version), from Debian's
# packages and the kai wheel; tests/image builds and runs its own copy.
image: $(STAMP)
	bash scripts/image/build.sh build/oci

# Headless Chromium (Debian's package) for the HTML report test; apt-installs it when missing.
browser:
	bash scripts/browser/provision.sh --quiet

# Prometheus (Debian's package) for the time-based fair share test; apt-installs it when missing.
prometheus:
	bash scripts/prometheus/provision.sh --quiet

# The whole suite on the current Kubernetes release, then tests/k8s again on the oldest supported.
test: $(STAMP) control-plane helm browser prometheus
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/pytest -n 2
	KAI_K8S_VERSION=oldest $(BIN)/pytest -n 2 tests/k8s

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_allocate.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
