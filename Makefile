PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit explore browser bench image clean

$(STAMP): pyproject.toml
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) on PATH (Python 3.11)"; exit 1; }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,ray]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/batchsched simulate examples/ml-cluster/scenario.yaml --seeds 8 --report reports/demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks testsupport
	$(BIN)/ruff format --check src tests benchmarks testsupport

typecheck: $(STAMP)
	$(BIN)/mypy --strict src

unit: $(STAMP) browser
	$(BIN)/pytest

# The property tests with new random examples each run (`make test` runs a fixed set).
explore: $(STAMP)
	HYPOTHESIS_EXPLORE=1 $(BIN)/pytest tests/properties

# The browser tests (tests/ui/) drive Debian's Chromium and ChromeDriver: installed here with
# apt-get where it can (as root), else those tests skip saying why.
browser:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 || \
		{ apt-get update -q >/dev/null 2>&1 && \
		  apt-get install -y -q chromium chromium-driver >/dev/null 2>&1; } || \
		echo "make: could not install chromium and chromium-driver: the browser tests skip"; \
	else \
		echo "make: chromium and chromium-driver are missing (apt-get as root installs them):" \
		     "the browser tests skip"; \
	fi

test: lint typecheck unit

WORKLOAD ?=
bench: $(STAMP)
	$(BIN)/python -m benchmarks $(if $(WORKLOAD),--workload $(WORKLOAD))

# The Deployment's image (deploy/kustomization.yaml `images:`), built with the first of
# CONTAINER_TOOLS whose engine answers; push it with `docker push $(IMAGE)` (docs/live.md).
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE ?= batchsched:$(VERSION)
CONTAINER_TOOLS ?= docker podman
image:
	@for tool in $(CONTAINER_TOOLS); do \
		command -v $$tool >/dev/null 2>&1 || continue; \
		if $$tool info >/dev/null 2>&1; then \
			echo "$$tool build -t $(IMAGE) ."; exec $$tool build -t $(IMAGE) .; \
		fi; \
		echo "make image: $$tool is on PATH but its engine does not answer ($$tool info failed)"; \
	done; \
	echo "make image: needs docker or podman with a running engine (tried: $(CONTAINER_TOOLS));"; \
	echo "  or build the Dockerfile elsewhere: docker build -t $(IMAGE) ."; \
	exit 1

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
