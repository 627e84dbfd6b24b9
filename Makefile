# ToolCanary's command surface. Every target only dispatches; the logic lives in services/ and scripts/.
# Parameters: RUN=<run id>  STEP=<checkpoint step>  PASS=<repeat index>  SUITES="<test suites>"
.DEFAULT_GOAL := help
SHELL := /bin/bash
COMPOSE ?= docker compose
RUN ?=
STEP ?=
PASS ?= 1
SUITES ?=

.PHONY: help setup test lint clean up down logs

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

setup: ## build .venvs/<image> for every image extra (reuses unchanged ones)
	python3 scripts/setup_venvs.py

test: setup ## run every service's tests in its own environment
	scripts/run_tests.sh $(SUITES)

lint: setup ## ruff, Compose validation and hadolint
	.venvs/dev/bin/ruff check services tests scripts bench
	.venvs/dev/bin/python -m pytest tests/stack -q

up: ## start the training profile (simulator + trainer) on GPUs
	$(COMPOSE) --profile train up -d

down: ## stop every service of the stack
	$(COMPOSE) --profile train --profile eval --profile analysis down

logs: ## follow the logs of the running services
	$(COMPOSE) --profile train --profile eval logs -f

clean: ## remove the environments and caches (volumes/ is kept)
	rm -rf .venvs build services/*.egg-info
