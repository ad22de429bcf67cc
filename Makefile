PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench clean

$(STAMP): pyproject.toml
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) on PATH (Python 3.11)"; exit 1; }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/batchsched simulate examples/ml-cluster/scenario.yaml --seeds 8 --report reports/demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks testsupport
	$(BIN)/ruff format --check src tests benchmarks testsupport

typecheck: $(STAMP)
	$(BIN)/mypy --strict src

unit: $(STAMP)
	$(BIN)/pytest

test: lint typecheck unit

WORKLOAD ?=
bench: $(STAMP)
	$(BIN)/python -m benchmarks $(if $(WORKLOAD),--workload $(WORKLOAD))

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
