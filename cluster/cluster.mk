# The local control plane: real kube-apiserver, kube-controller-manager, kube-scheduler
# and etcd, with kwok faking nodes and pod lifecycle. Included by the top-level Makefile.
#   make cluster-tools   build the binaries into $(CLUSTER_TOOLS_DIR) (a no-op when built)
#   make cluster-up      start the control plane; prints how to use its kubeconfig
#   make cluster-down    stop it and remove its work directory
#   make cluster-status  show whether it is running and where
#
# The versions come from the Go modules under cluster/tools (go.mod is the one place
# they are pinned); the binaries are cached outside the repository, keyed by them.

.PHONY: cluster-tools cluster-up cluster-down cluster-status

CLUSTER_KUBE_MODULE := cluster/tools/kubernetes
CLUSTER_KWOK_MODULE := cluster/tools/kwok

# The version that follows a module path on a require line of a go.mod.
cluster_mod_version = $(shell awk '$$1 != "//" {for (i = 1; i < NF; i++) if ($$i == "$(1)" && $$(i+1) != "=>") { print $$(i+1); exit }}' $(2)/go.mod)

CLUSTER_K8S_VERSION := $(call cluster_mod_version,k8s.io/kubernetes,$(CLUSTER_KUBE_MODULE))
CLUSTER_ETCD_VERSION := $(call cluster_mod_version,go.etcd.io/etcd/server/v3,$(CLUSTER_KUBE_MODULE))
CLUSTER_KWOK_VERSION := $(call cluster_mod_version,sigs.k8s.io/kwok,$(CLUSTER_KWOK_MODULE))

KUBETRAIN_CACHE ?= $(HOME)/.cache/kubetrain
# Keep in step with cluster/tools.py, which finds the binaries the same way.
CLUSTER_TOOLS_DIR := $(KUBETRAIN_CACHE)/cluster-tools/kubernetes-$(CLUSTER_K8S_VERSION)_etcd-$(CLUSTER_ETCD_VERSION)_kwok-$(CLUSTER_KWOK_VERSION)
export KUBETRAIN_CLUSTER_TOOLS_DIR := $(CLUSTER_TOOLS_DIR)

CLUSTER_GO_ENV := GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
CLUSTER_GO_BUILD := go build -trimpath -buildvcs=false

# make test needs the binaries; the top-level Makefile makes test depend on TEST_PREREQS.
TEST_PREREQS += cluster-tools

cluster-tools: $(CLUSTER_TOOLS_DIR)/.done

# No prerequisites on purpose: the directory name already carries every version, and a
# fresh clone (new file times) must not rebuild what the cache holds.
$(CLUSTER_TOOLS_DIR)/.done:
	@if [ -n "$${K8S_VERSION-}" ] && [ "$(CLUSTER_K8S_VERSION)" != "$${K8S_VERSION}" ]; then \
	  echo "cluster/tools/kubernetes/go.mod pins k8s.io/kubernetes $(CLUSTER_K8S_VERSION)," \
	       "but the Makefile's K8S_VERSION is $${K8S_VERSION}: make them the same" >&2; exit 1; fi
	@echo "building Kubernetes $(CLUSTER_K8S_VERSION), etcd $(CLUSTER_ETCD_VERSION)," \
	      "kwok $(CLUSTER_KWOK_VERSION) into $(CLUSTER_TOOLS_DIR) (a cold build takes a while)"
	@rm -rf $(CLUSTER_TOOLS_DIR).partial && mkdir -p $(CLUSTER_TOOLS_DIR).partial/bin
	@start=$$(date +%s); \
	  cd $(CLUSTER_KUBE_MODULE); \
	  k8s=$(CLUSTER_K8S_VERSION); minor=$${k8s#v*.}; minor=$${minor%%.*}; major=$${k8s#v}; major=$${major%%.*}; \
	  date=$$($(CLUSTER_GO_ENV) go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes); \
	  ldflags="-s -w"; \
	  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do \
	    ldflags="$$ldflags -X $$pkg.gitVersion=$$k8s -X $$pkg.gitMajor=$$major -X $$pkg.gitMinor=$$minor"; \
	    ldflags="$$ldflags -X $$pkg.gitTreeState=archive -X $$pkg.buildDate=$$date"; \
	  done; \
	  $(CLUSTER_GO_ENV) $(CLUSTER_GO_BUILD) -ldflags "$$ldflags" -o $(CLUSTER_TOOLS_DIR).partial/bin/ \
	    k8s.io/kubernetes/cmd/kube-apiserver \
	    k8s.io/kubernetes/cmd/kube-controller-manager \
	    k8s.io/kubernetes/cmd/kube-scheduler \
	    k8s.io/kubernetes/cmd/kubectl \
	    ./cmd/etcd; \
	  cd $(CURDIR)/$(CLUSTER_KWOK_MODULE); \
	  kube=$(CLUSTER_K8S_VERSION); \
	  $(CLUSTER_GO_ENV) $(CLUSTER_GO_BUILD) \
	    -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=$${kube#v}" \
	    -o $(CLUSTER_TOOLS_DIR).partial/bin/ sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl; \
	  echo "built in $$(( $$(date +%s) - start ))s"
	@got=$$($(CLUSTER_TOOLS_DIR).partial/bin/kube-apiserver --version); \
	  if [ "$$got" != "Kubernetes $(CLUSTER_K8S_VERSION)" ]; then \
	    echo "kube-apiserver --version says '$$got', expected 'Kubernetes $(CLUSTER_K8S_VERSION)'" >&2; exit 1; fi
	@rm -rf $(CLUSTER_TOOLS_DIR) && mv $(CLUSTER_TOOLS_DIR).partial $(CLUSTER_TOOLS_DIR)
	@touch $@
	@ls -1 $(CLUSTER_TOOLS_DIR)/bin | sed 's|^|  |'

# The demo cluster lives in build/cluster (git-ignored); the tests start their own.
KUBETRAIN_CLUSTER_DIR ?= build/cluster
CLUSTER_CPU_NODES ?= 2
CLUSTER_GPU_NODES ?= 4
CLUSTER_GPUS_PER_NODE ?= 8
CLUSTER_PY := $(BIN)/python

cluster-up: venv cluster-tools
	$(CLUSTER_PY) -m cluster --workdir $(KUBETRAIN_CLUSTER_DIR) up \
	  --cpu-nodes $(CLUSTER_CPU_NODES) --gpu-nodes $(CLUSTER_GPU_NODES) \
	  --gpus-per-node $(CLUSTER_GPUS_PER_NODE)

cluster-down: venv
	$(CLUSTER_PY) -m cluster --workdir $(KUBETRAIN_CLUSTER_DIR) down

cluster-status: venv
	$(CLUSTER_PY) -m cluster --workdir $(KUBETRAIN_CLUSTER_DIR) status
