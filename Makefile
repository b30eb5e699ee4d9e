# kubetrain developer entry points. Everything a fresh clone needs is bootstrapped here:
#   make synth   synthesize the default stack into dist/
#   make test    every test tier, fastest first (tests/tiers.py), stopping at the first
#                that fails: lint beside unit (the venv only), then the set-up (Go tools,
#                control plane binaries, images, training deps) and the tiers needing it
#   make lint    ruff + mypy --strict + the import contract (lint-imports, pyproject.toml)
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMPS := $(VENV)/.stamps
# Caches that outlive a clone live outside the repository, keyed by version.
KUBETRAIN_CACHE ?= $(HOME)/.cache/kubetrain
export KUBETRAIN_CACHE

# The one Kubernetes release kubetrain pins: its OpenAPI shapes the CRDs' pod template
# schema and its control plane runs the integration tests.
K8S_VERSION := v1.34.4
export K8S_VERSION
OPENAPI_DIR := $(KUBETRAIN_CACHE)/openapi/$(K8S_VERSION)
export KUBETRAIN_OPENAPI_DIR := $(OPENAPI_DIR)

# Python caches the bytecode it compiles (__pycache__, ignored by git), whatever the
# calling environment says: a machine that exports PYTHONDONTWRITEBYTECODE=1 has every
# process compile its imports again, and the tests start hundreds that import torch
# (5.1 CPU-s instead of 2.5 each here), cdk8s or the Kubernetes client (2.5 instead of 1.4).
unexport PYTHONDONTWRITEBYTECODE
# mypy's incremental cache outlives the clone (mypy checks each cached module against its
# file's hash, its own version and its options): a fresh clone of a change checks what
# changed, 2.7 CPU seconds here instead of 95 for the whole package, beside the unit tier.
export MYPY_CACHE_DIR := $(KUBETRAIN_CACHE)/mypy

export GOTOOLCHAIN := local
export GOFLAGS := -mod=mod
# jsii (under cdk8s) prints a Node.js end-of-life banner unless told the major version.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := $(shell node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 20)

# The test tiers (tests/tiers.py is their table): `make test-<tier>` runs one.
TEST_TIERS := lint unit tools cluster realnode training faults

.PHONY: help venv synth helm lint test test-setup test-setup-goals _test-setup-go _test-setup-rest $(addprefix test-,$(TEST_TIERS)) test-schemas openapi schemas cdk8s-cli sdk-venv mcp-venv clean

# Component makefiles add their targets and append to TEST_PREREQS (what `make test`
# must build or install first: the control-plane binaries, torch, the Horovod wheel).
TEST_PREREQS :=
include cluster/cache.mk
-include cluster/cluster.mk
-include images/images.mk
-include benchmarks/benchmarks.mk

help:
	@echo "make synth          synthesize the local stack into dist/"
	@echo "make helm           export the local stack as charts/kubetrain/, lint and package it"
	@echo "make test           every test tier, fastest first; stops at the first that fails"
	@$(PYTHON) -m tests.tiers --list | sed 's/^/  /'
	@echo "make test-setup     install and build what the tiers after unit need"
	@echo "make lint           ruff, mypy --strict and the import contract"
	@echo "make demo           local control plane + operator; sample jobs to Succeeded"
	@echo "make demo-kueue     the real Kueue too: two jobs competing for one GPU quota"
	@echo "make demo-argocd    the real Argo CD syncs the local stack from a git repository"
	@echo "make bench          operator scale benchmark (250 jobs, 50 fake GPU nodes)"
	@echo "make bench-peers    kubetrain vs training-operator, mpi-operator, Trainer+JobSet"
	@echo "make bench-scale    operator cost from 150 to 5,000 jobs on 700 fake GPU nodes"
	@echo "make bench-synth    synth CPU against kubectl kustomize of training-operator"
	@echo "make bench-metrics  CPU of one /metrics scrape at 150 to 5,000 cached jobs"
	@echo "make bench-progress progress server: reports/s, latency, CPU per report"
	@echo "make bench-elastic  elastic PyTorchJob: HPA/kubectl scale -> Workers Running or gone"
	@echo "make cluster-up     start the local control plane (cluster-down stops it;"
	@echo "                    CLUSTER_SCHEDULER=coscheduling: gang scheduling)"
	@echo "make kueue-up       run Kueue against it (kueue-down stops it)"
	@echo "make cluster-tools  build the Go tools (control plane, gang scheduler, Kueue, helm,"
	@echo "                    Prometheus and promtool, the Grafana dashboard checker)"
	@echo "make training-deps  torch, Horovod, TensorFlow, Open MPI for the samples"

# uv (from PyPI, pinned) makes the virtualenvs and installs into them: from its cache it
# links a package into a venv in seconds, where pip unpacks torch's 3 GB of wheels again
# in every clone (minutes of a fresh clone's warm `make test`). It lives in a venv of its
# own in the cache, made once per version (a run beside another makes its own and the
# first rename wins). The venvs are seeded with pip, setuptools and wheel: the Horovod
# wheel builds with them.
UV_VERSION := 0.13.8
UV_DIR := $(KUBETRAIN_CACHE)/uv-$(UV_VERSION)
UV := $(UV_DIR)/bin/uv
export UV_PYTHON_DOWNLOADS := never
# The venv's interpreter, by absolute path (uv would otherwise look for one elsewhere).
PYTHON_PATH = $(shell command -v $(PYTHON))
# `$(UV_PIP) <packages>` installs into .venv.
UV_PIP = $(UV) pip install --quiet --python $(BIN)/python

$(UV):
	@mkdir -p $(KUBETRAIN_CACHE)
	@tmp=$$(mktemp -d $(UV_DIR).partial.XXXXXX) && $(PYTHON) -m venv $$tmp \
	  && $$tmp/bin/python -m pip install --quiet "uv==$(UV_VERSION)" \
	  && { mv -T $$tmp $(UV_DIR) 2>/dev/null || rm -rf $$tmp; }
	@test -x $(UV)

$(STAMPS)/venv: pyproject.toml | $(UV)
	@echo "Setting up $(VENV): kubetrain and its dev tools from PyPI (seconds once cached) ..."
	@test -x $(BIN)/python || $(UV) venv --quiet --seed --allow-existing --python $(PYTHON_PATH) $(VENV)
	@mkdir -p $(STAMPS)
	@$(UV_PIP) -e '.[dev]'
	@echo "$(VENV) ready"
	@touch $@

venv: $(STAMPS)/venv

# The pinned Kubernetes OpenAPI v3 documents, fetched through the Go module proxy.
$(OPENAPI_DIR)/.done:
	$(call cache_begin,$(OPENAPI_DIR))
	@dir=$$(cd /tmp && go mod download -json k8s.io/kubernetes@$(K8S_VERSION) | $(PYTHON) -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'); \
	  cp "$$dir"/api/openapi-spec/v3/*.json $(call cache_partial,$(OPENAPI_DIR))/ \
	  && chmod u+w $(call cache_partial,$(OPENAPI_DIR))/*.json
	$(call cache_publish,$(OPENAPI_DIR))
	@echo "Kubernetes $(K8S_VERSION) OpenAPI in $(OPENAPI_DIR)"

openapi: $(OPENAPI_DIR)/.done

# Regenerate the committed pod-template schema from the pinned OpenAPI.
schemas: venv openapi
	$(BIN)/python -m kubetrain.api.k8s_openapi --write

# The real cdk8s CLI (npm), for the test that `cdk8s synth` writes what `kubetrain synth` does.
CDK8S_CLI_VERSION := 2.207.60
CDK8S_CLI_DIR := $(KUBETRAIN_CACHE)/npm/cdk8s-cli-$(CDK8S_CLI_VERSION)
export KUBETRAIN_CDK8S_CLI := $(CDK8S_CLI_DIR)/node_modules/.bin/cdk8s

$(KUBETRAIN_CDK8S_CLI):
	$(call cache_begin,$(CDK8S_CLI_DIR))
	npm install --silent --no-audit --no-fund --prefix $(call cache_partial,$(CDK8S_CLI_DIR)) \
	  cdk8s-cli@$(CDK8S_CLI_VERSION)
	$(call cache_publish,$(CDK8S_CLI_DIR))

cdk8s-cli: $(KUBETRAIN_CDK8S_CLI)
TEST_PREREQS += cdk8s-cli

# A client that pins other versions than the operator's venv has, in a virtualenv of its
# own: $(1) its directory, $(2) its requirements file.
define client_venv
$(1)/.done: $(2) | $$(UV)
	@test -x $(1)/bin/python || $$(UV) venv --quiet --seed --python $$(PYTHON_PATH) $(1)
	$$(UV) pip install --quiet --python $(1)/bin/python -r $(2)
	@touch $$@
endef

# Kubeflow's Python SDKs (v1 kubeflow-training, v2 kubeflow), unmodified: they pin an older
# kubernetes client than the operator's (tests/sdk/).
SDK_VENV := .venv-sdk
export KUBETRAIN_SDK_PYTHON := $(CURDIR)/$(SDK_VENV)/bin/python
$(eval $(call client_venv,$(SDK_VENV),tests/sdk/requirements.txt))
sdk-venv: $(SDK_VENV)/.done
TEST_PREREQS += sdk-venv

# The Kubeflow MCP server (kubeflow-mcp, the client AI agents use for TrainJobs),
# unmodified: it pins an older Kubeflow SDK than tests/sdk/ does (tests/mcp/).
MCP_VENV := .venv-mcp
export KUBETRAIN_MCP_PYTHON := $(CURDIR)/$(MCP_VENV)/bin/python
$(eval $(call client_venv,$(MCP_VENV),tests/mcp/requirements.txt))
mcp-venv: $(MCP_VENV)/.done
TEST_PREREQS += mcp-venv

synth: venv
	@$(BIN)/kubetrain synth local

# The Helm chart of the local stack, from the same constructs as `make synth`; linted and
# packaged (dist/charts/kubetrain-<version>.tgz) by the real helm.
HELM_STACK ?= local
helm: venv $(HELM_DIR)/.done
	$(BIN)/kubetrain helm $(HELM_STACK)
	$(HELM_DIR)/bin/helm lint --strict charts/kubetrain
	$(HELM_DIR)/bin/helm package charts/kubetrain -d dist/charts

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

# The unit tier needs nothing but the venv: manifests are checked against the committed
# schema bundle (tests/data/schemas); tests that need a download or a built tool are in
# the tiers after it, which run `make test-setup` first (tests/tiers.py).
$(addprefix test-,$(TEST_TIERS)): test-%: venv
	$(BIN)/python -m tests.tiers $*

# Re-copy the schema bundle from the pinned sources after a pin moves (a test in the
# integration tier fails while it is stale).
test-schemas: venv openapi kueue-crds monitoring-crds
	$(BIN)/python -m tests.schema_bundle --write

# The tiers after unit set up in two lanes at once: the Go tools (compiling, on every
# core) beside everything else (the venvs, the downloads, Debian packages, the Horovod
# wheel and the images: mostly waiting on the network and the disk). Each lane runs its
# steps in order (-j1: without it a lane inherits the -j2 and runs its own goals at once),
# so two apt-get or two pip runs never overlap; the Go lane's lines start with [go].
TEST_SETUP_REST = venv openapi $(filter-out cluster-tools,$(TEST_PREREQS))

test-setup:
	@$(MAKE) --no-print-directory -j2 _test-setup-go _test-setup-rest

_test-setup-go:
	@$(MAKE) --no-print-directory -j1 cluster-tools 2>&1 | sed -u 's/^/[go] /'

_test-setup-rest:
	@$(MAKE) --no-print-directory -j1 KUBETRAIN_SETUP_FOR_TEST=1 $(TEST_SETUP_REST)

# The set-up's goals besides the Go tools, for `make test`'s runner (tests/tiers.py): it
# runs them one at a time beside the tests, and `make cluster-tools` in a lane of its own.
test-setup-goals:
	@echo $(TEST_SETUP_REST)

# Each tier's processes write a junit file under build/test-results; the run ends with
# the time per tier, process, module and session fixture (where the time goes).
test: venv
	$(BIN)/python -m tests.tiers

clean:
	rm -rf $(VENV) $(SDK_VENV) $(MCP_VENV) dist build/test-results cdk8s.out .mypy_cache .ruff_cache .pytest_cache

