# wai-dispatch: every target sets itself up in .venv on a fresh machine.
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
# Every dependency pinned (`make constraints` writes it from what the venv resolved): the
# installs here and the image's take exactly these versions, never the newest of each `>=`.
PINS    := constraints.txt
# NOT torchvision: the one module CompressAI imports at start-up, empty (shims/torchvision/)
SHIM    := shims/torchvision
# The editable install maps the one import root, wai_dispatch, with a meta path finder, and
# setuptools then prints an information-only note that folders may shadow it. Nothing shadows
# wai_dispatch (its folders are symlinks inside it), so that note is filtered by its text; real
# warnings still show.
PIP_EDITABLE := PYTHONWARNINGS="ignore:Editable installation" $(BIN)/pip install -q -c $(PINS) -e

# `make fuzz`'s HTTP part: examples per hostile test (each sent with five roles' headers) and
# per schemathesis operation and role; the CI suite runs 25 of each. Stateful: scenarios per role
# along the schema's links, of up to STATEFUL_STEPS steps (CI: 6 of up to 8).
HOSTILE_EXAMPLES      ?= 10000
SCHEMATHESIS_EXAMPLES ?= 500
STATEFUL_SCENARIOS    ?= 300
STATEFUL_STEPS        ?= 20

.DEFAULT_GOAL := help
.PHONY: help serve demo test lint typecheck unit bench fuzz ray tools constraints clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.base: $(BIN)/python pyproject.toml $(PINS)
	$(PIP_EDITABLE) .
	@touch $@

$(STAMP): $(BIN)/python pyproject.toml $(PINS) $(wildcard $(SHIM)/*.toml $(SHIM)/torchvision/*.py)
	$(PIP_EDITABLE) '.[test,tools]'
	$(BIN)/pip install -q -c $(PINS) --no-deps 'compressai==1.2.8'
	$(BIN)/pip install -q -c $(PINS) --no-deps --no-build-isolation ./$(SHIM)
	@touch $@ $(VENV)/.base

serve: $(VENV)/.base ## install and start the HTTP service on its defaults (SQLite, bundled sets)
	@echo 'wai-dispatch is $(BIN)/wai-dispatch (or run `. $(BIN)/activate`, then wai-dispatch)' >&2
	$(BIN)/wai-dispatch serve

demo: $(VENV)/.base ## install and decode the bundled sample envelopes (writes out/)
	$(BIN)/wai-dispatch demo -o out
	@echo 'wai-dispatch is $(BIN)/wai-dispatch (or run `. $(BIN)/activate`, then wai-dispatch)' >&2

tools: $(STAMP) ## install the tools extra (torch CPU, CompressAI, coremltools)

lint: $(STAMP) ## ruff lint and format check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP) ## mypy --strict over every package of the wai_dispatch import root
	$(BIN)/mypy --strict -p wai_dispatch

unit: $(STAMP) ## the test suite only
	$(BIN)/python -m pytest -q --durations=25

test: lint typecheck unit ## install, then lint, typecheck and run the whole suite

bench: $(STAMP) ## benchmarks, each printed beside its anchor; then the long corpus runs (every corpus payload through the WGSL kernels, natively and in the page)
	$(BIN)/python -m wai_dispatch.tools.bench all
	WAI_FULL_CORPUS=1 $(BIN)/python -m pytest -q -p no:cacheprovider tests/paths/test_wgsl_corpus.py \
	  tests/page/test_page_webgpu.py::test_corpus_through_the_page_kernels \
	  tests/paths/test_waiops_int8.py::test_every_corpus_payload_is_exact_on_emulated_cpus

.PHONY: image
image: ## build the container image (docker or podman), start it, decode the three samples over HTTP as non-root, stop it (.ci/image; minutes, not in CI)
	.ci/image

fuzz: $(STAMP) ## the long fuzz run (100,000+ cases per target; not in CI)
	WAI_FUZZ_EXAMPLES=100000 $(BIN)/python -m pytest -q -m fuzz -p no:cacheprovider tests
	WAI_FUZZ_EXAMPLES=$(HOSTILE_EXAMPLES) WAI_SCHEMATHESIS_EXAMPLES=$(SCHEMATHESIS_EXAMPLES) \
	  WAI_SCHEMATHESIS_SCENARIOS=$(STATEFUL_SCENARIOS) WAI_SCHEMATHESIS_STEPS=$(STATEFUL_STEPS) \
	  $(BIN)/python -m pytest -q -p no:cacheprovider tests/service/http/test_hostile.py \
	  tests/service/http/test_service_schemathesis.py

$(VENV)/.ray: $(STAMP)
	$(PIP_EDITABLE) '.[test,tools,ray]'
	@touch $@

ray: $(VENV)/.ray ## the ray extra; the Ray Serve tests on a real local cluster, then `bench ray` (minutes; not in CI)
	$(BIN)/python -m pytest -q -m ray -s -p no:cacheprovider tests/service/rayserve
	$(BIN)/python -m wai_dispatch.tools.bench ray

constraints: $(STAMP) ## rewrite constraints.txt from what the venv resolved (after changing pyproject.toml: upgrade in the venv, then run this)
	$(BIN)/python .ci/constraints.py $(PINS)

clean: ## remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis out
