# Two commands matter: `make run` and `make test`. Both work on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_CERTS := certs/dev
PIP := $(BIN)/python -m pip --disable-pip-version-check

PORT ?= 8443
# `make run` records every decision here (git-ignored); `make clean` removes it.
AUDIT_LOG ?= .run/audit.log

.PHONY: run test lint typecheck unit fuzz soak clean policies-configmap

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "gpu-webhook needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[dev]'
	@touch $@

$(DEV_CERTS)/tls.crt: | $(STAMP)
	$(BIN)/gpu-webhook certs generate --out $(DEV_CERTS) --service gpu-webhook --namespace gpu-system --force

# `make run PORT=9443` serves on another port; `make run AUDIT_LOG=FILE` records elsewhere.
run: $(STAMP) $(DEV_CERTS)/tls.crt
	@echo
	@echo "gpu-webhook is starting on https://127.0.0.1:$(PORT) with the policies in policies/."
	@echo "Send a sample review from another terminal:"
	@echo
	@echo "  curl --cacert $(DEV_CERTS)/ca.crt -H 'Content-Type: application/json' \\"
	@echo "       --data @examples/review-gpu-pod.json https://127.0.0.1:$(PORT)/mutate"
	@echo
	@echo "Every decision is recorded in $(AUDIT_LOG). Read the latest (-f follows new ones):"
	@echo
	@echo "  $(BIN)/gpu-webhook audit tail $(AUDIT_LOG)"
	@echo
	$(BIN)/gpu-webhook serve --port $(PORT) --audit-log $(AUDIT_LOG)

test: lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check webhook tests bench fuzz
	$(BIN)/ruff format --check webhook tests bench fuzz
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy --strict

unit: $(STAMP) $(DEV_CERTS)/tls.crt
	$(BIN)/pytest

# After editing policies/security: regenerate the base's policies ConfigMap, which kustomize
# overlays ship (kustomize may not read files outside manifests/). A test fails until it is in sync.
policies-configmap: $(STAMP)
	$(BIN)/python -m webhook.bundle manifests/base/policies-configmap.yaml

# On demand: coverage-guided fuzzing of the review path with atheris.
# FUZZ_TARGET=review (raw bodies) or structured (valid reviews with parts replaced); FUZZ_SECONDS each.
FUZZ_SECONDS ?= 60
FUZZ_TARGET ?= review
fuzz: $(STAMP)
	$(PIP) install --quiet 'atheris>=2.3'
	mkdir -p .fuzz-corpus/$(FUZZ_TARGET) && cp -n fuzz/corpus/* .fuzz-corpus/$(FUZZ_TARGET)/
	$(BIN)/python fuzz/fuzz_$(FUZZ_TARGET).py .fuzz-corpus/$(FUZZ_TARGET) -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048

# On demand: ten minutes of mixed load with policy reloads and certificate rotations (SOAK_SECONDS).
SOAK_SECONDS ?= 600
soak: $(STAMP)
	$(BIN)/python bench/soak.py --seconds $(SOAK_SECONDS)

clean:
	rm -rf $(VENV) $(DEV_CERTS) .run .mypy_cache .ruff_cache .pytest_cache .hypothesis .import_linter_cache
