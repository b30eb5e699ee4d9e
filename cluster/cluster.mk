# The local control plane (real kube-apiserver, kube-controller-manager, kube-scheduler and
# etcd, with kwok faking nodes and pod lifecycle) and the Go tools that run beside it: the
# scheduler-plugins scheduler (gang scheduling), Kueue, helm, Volcano's PodGroup CRD,
# Prometheus with promtool, dashboard-check (Grafana dashboard JSON against the Grafana
# Foundation SDK's schema), Argo CD with kustomize (cluster/argocd.py), and metrics-server
# (cluster/metrics.py).
# Included by the top-level Makefile.
#   make cluster-tools   build every Go tool (a no-op when built; one tool per cache dir)
#   make cluster-up      start the control plane; prints how to use its kubeconfig
#                        (CLUSTER_SCHEDULER=coscheduling: the scheduler-plugins scheduler;
#                        METRICS=1: and the resource metrics API for the HPA: docs/development.md)
#   make cluster-down    stop it (and Kueue) and remove its work directory
#                        (REAL_NODE=1: and one real node, kubelet + containerd: docs/real-node.md)
#   make cluster-status  show whether it is running and where
#   make node-packages   install the real node's Debian packages (containerd, runc, CNI...)
#   make node-import-images IMAGES="ref ..."  copy podman images into the real node
#   make argocd-packages install what Argo CD runs with (redis, git, socat) from Debian
#   make kueue-up        run Kueue (CRDs, webhooks, controller manager) against it
#   make kueue-down      stop Kueue and remove its webhook configurations
#   make peer-tools      build the Go operators kubetrain is compared with (training-operator,
#                        mpi-operator, Kubeflow Trainer v2 with JobSet) for
#                        benchmarks/peers.py; not part of cluster-tools
#
# Versions are pinned in the Go modules under cluster/tools (go.mod is the one place they
# are pinned). Each tool is built into a cache directory of its own outside the
# repository, named after what it is built from, so a fresh clone rebuilds nothing the
# cache holds and changing one pin rebuilds only that tool. Every build shares Go's
# module and build caches (GOMODCACHE, GOCACHE: Go's defaults unless set), so modules
# are downloaded once and a package two tools compile identically is compiled once: the
# tools built on Kubernetes' libraries use the control plane's versions of every module
# they share with it (cluster/go_align.py, docs/development.md).

.PHONY: argocd-packages node-packages node-import-images kueue-crds monitoring-crds cluster-tools peer-tools cluster-tool-dirs cluster-up cluster-down cluster-status kueue-up kueue-down

CLUSTER_KUBE_MODULE := cluster/tools/kubernetes
CLUSTER_KWOK_MODULE := cluster/tools/kwok
SCHEDULER_PLUGINS_MODULE := cluster/tools/scheduler-plugins
KUEUE_MODULE := cluster/tools/kueue
HELM_MODULE := cluster/tools/helm
VOLCANO_MODULE := cluster/tools/volcano
TRAINING_OPERATOR_MODULE := cluster/tools/training-operator
MPI_OPERATOR_MODULE := cluster/tools/mpi-operator
TRAINER_MODULE := cluster/tools/trainer
JOBSET_MODULE := cluster/tools/jobset
PROMETHEUS_MODULE := cluster/tools/prometheus
GRAFANA_MODULE := cluster/tools/grafana
COREDNS_MODULE := cluster/tools/coredns
ARGOCD_MODULE := cluster/tools/argocd
KUSTOMIZE_MODULE := cluster/tools/kustomize
METRICS_SERVER_MODULE := cluster/tools/metrics-server

# The version that follows a module path on a require line of a go.mod.
cluster_mod_version = $(shell awk '$$1 != "//" {for (i = 1; i < NF; i++) if ($$i == "$(1)" && $$(i+1) != "=>") { print $$(i+1); exit }}' $(2)/go.mod)
# The first 12 hex digits of the SHA-256 of a module's go.mod, its go.sum and the files of
# its own commands under cmd/ (sorted by path): every pin of the tool, indirect ones
# included, and the code kubetrain adds (cluster/tools.py computes the same).
cluster_mod_digest = $(shell cd $(1) && cat go.mod go.sum $$(find cmd -type f 2>/dev/null | LC_ALL=C sort) | sha256sum | cut -c1-12)

CLUSTER_K8S_VERSION := $(call cluster_mod_version,k8s.io/kubernetes,$(CLUSTER_KUBE_MODULE))
CLUSTER_ETCD_VERSION := $(call cluster_mod_version,go.etcd.io/etcd/server/v3,$(CLUSTER_KUBE_MODULE))
CLUSTER_KWOK_VERSION := $(call cluster_mod_version,sigs.k8s.io/kwok,$(CLUSTER_KWOK_MODULE))
SCHEDULER_PLUGINS_VERSION := $(call cluster_mod_version,sigs.k8s.io/scheduler-plugins,$(SCHEDULER_PLUGINS_MODULE))
KUEUE_VERSION := $(call cluster_mod_version,sigs.k8s.io/kueue,$(KUEUE_MODULE))
HELM_VERSION := $(call cluster_mod_version,helm.sh/helm/v3,$(HELM_MODULE))
VOLCANO_APIS_VERSION := $(call cluster_mod_version,volcano.sh/apis,$(VOLCANO_MODULE))
CONTROLLER_GEN_VERSION := $(call cluster_mod_version,sigs.k8s.io/controller-tools,$(VOLCANO_MODULE))
TRAINING_OPERATOR_VERSION := $(call cluster_mod_version,github.com/kubeflow/training-operator,$(TRAINING_OPERATOR_MODULE))
MPI_OPERATOR_VERSION := $(call cluster_mod_version,github.com/kubeflow/mpi-operator,$(MPI_OPERATOR_MODULE))
TRAINER_VERSION := $(call cluster_mod_version,github.com/kubeflow/trainer/v2,$(TRAINER_MODULE))
JOBSET_VERSION := $(call cluster_mod_version,sigs.k8s.io/jobset,$(JOBSET_MODULE))
PROMETHEUS_VERSION := $(call cluster_mod_version,github.com/prometheus/prometheus,$(PROMETHEUS_MODULE))
# The Prometheus release of that module version: v0.3XX.Y is Prometheus 3.XX.Y.
PROMETHEUS_RELEASE := $(shell echo $(PROMETHEUS_VERSION) | awk -F. '{ printf "%d.%d.%s", $$2 / 100, $$2 % 100, $$3 }')
GRAFANA_SDK_VERSION := $(call cluster_mod_version,github.com/grafana/grafana-foundation-sdk/go,$(GRAFANA_MODULE))
COREDNS_VERSION := $(call cluster_mod_version,github.com/coredns/coredns,$(COREDNS_MODULE))
ARGOCD_VERSION := $(call cluster_mod_version,github.com/argoproj/argo-cd/v3,$(ARGOCD_MODULE))
KUSTOMIZE_VERSION := $(call cluster_mod_version,sigs.k8s.io/kustomize/kustomize/v5,$(KUSTOMIZE_MODULE))
METRICS_SERVER_VERSION := $(call cluster_mod_version,sigs.k8s.io/metrics-server,$(METRICS_SERVER_MODULE))

KUBETRAIN_CACHE ?= $(HOME)/.cache/kubetrain
CLUSTER_TOOLS_ROOT := $(KUBETRAIN_CACHE)/cluster-tools
# Keep in step with cluster/tools.py, which finds the binaries the same way. The control
# plane's directory keeps the name it always had (versions only), so caches built before
# the other tools existed stay valid.
CLUSTER_TOOLS_DIR := $(CLUSTER_TOOLS_ROOT)/kubernetes-$(CLUSTER_K8S_VERSION)_etcd-$(CLUSTER_ETCD_VERSION)_kwok-$(CLUSTER_KWOK_VERSION)
export KUBETRAIN_CLUSTER_TOOLS_DIR := $(CLUSTER_TOOLS_DIR)
SCHEDULER_PLUGINS_DIR := $(CLUSTER_TOOLS_ROOT)/scheduler-plugins-$(SCHEDULER_PLUGINS_VERSION)-$(call cluster_mod_digest,$(SCHEDULER_PLUGINS_MODULE))
KUEUE_DIR := $(CLUSTER_TOOLS_ROOT)/kueue-$(KUEUE_VERSION)-$(call cluster_mod_digest,$(KUEUE_MODULE))
HELM_DIR := $(CLUSTER_TOOLS_ROOT)/helm-$(HELM_VERSION)-$(call cluster_mod_digest,$(HELM_MODULE))
VOLCANO_DIR := $(CLUSTER_TOOLS_ROOT)/volcano-$(VOLCANO_APIS_VERSION)-$(call cluster_mod_digest,$(VOLCANO_MODULE))
TRAINING_OPERATOR_DIR := $(CLUSTER_TOOLS_ROOT)/training-operator-$(TRAINING_OPERATOR_VERSION)-$(call cluster_mod_digest,$(TRAINING_OPERATOR_MODULE))
MPI_OPERATOR_DIR := $(CLUSTER_TOOLS_ROOT)/mpi-operator-$(MPI_OPERATOR_VERSION)-$(call cluster_mod_digest,$(MPI_OPERATOR_MODULE))
TRAINER_DIR := $(CLUSTER_TOOLS_ROOT)/trainer-$(TRAINER_VERSION)-$(call cluster_mod_digest,$(TRAINER_MODULE))
JOBSET_DIR := $(CLUSTER_TOOLS_ROOT)/jobset-$(JOBSET_VERSION)-$(call cluster_mod_digest,$(JOBSET_MODULE))
PROMETHEUS_DIR := $(CLUSTER_TOOLS_ROOT)/prometheus-$(PROMETHEUS_VERSION)-$(call cluster_mod_digest,$(PROMETHEUS_MODULE))
GRAFANA_DIR := $(CLUSTER_TOOLS_ROOT)/grafana-$(GRAFANA_SDK_VERSION)-$(call cluster_mod_digest,$(GRAFANA_MODULE))
# The real node's binaries (kubelet, kube-proxy, pause) come from the control plane's
# module but live in a directory of their own, named like the other tools', so that a
# control-plane cache built before the node existed stays valid and complete.
NODE_DIR := $(CLUSTER_TOOLS_ROOT)/node-$(CLUSTER_K8S_VERSION)-$(call cluster_mod_digest,$(CLUSTER_KUBE_MODULE))
COREDNS_DIR := $(CLUSTER_TOOLS_ROOT)/coredns-$(COREDNS_VERSION)-$(call cluster_mod_digest,$(COREDNS_MODULE))
ARGOCD_DIR := $(CLUSTER_TOOLS_ROOT)/argocd-$(ARGOCD_VERSION)-$(call cluster_mod_digest,$(ARGOCD_MODULE))
KUSTOMIZE_DIR := $(CLUSTER_TOOLS_ROOT)/kustomize-$(KUSTOMIZE_VERSION)-$(call cluster_mod_digest,$(KUSTOMIZE_MODULE))
METRICS_SERVER_DIR := $(CLUSTER_TOOLS_ROOT)/metrics-server-$(METRICS_SERVER_VERSION)-$(call cluster_mod_digest,$(METRICS_SERVER_MODULE))
TRAINER_E2E_DIR := $(CLUSTER_TOOLS_ROOT)/trainer-e2e-$(TRAINER_VERSION)-$(call cluster_mod_digest,$(TRAINER_MODULE))

CLUSTER_GO_ENV := GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
# No DWARF from the compiler either (the linker's -s -w drops it from every binary anyway):
# about a tenth less compile CPU, measured on helm from an empty build cache (280 CPU-s to
# 250), the same binary size. Go compile is about half the CPU of a cold make test.
# No -trimpath: with it, Go keys a compiled package by the module version the build
# selects, so a tool that replaces a module by the control plane's version (the replace
# blocks of cluster/go_align.py) still compiled it again; without it the key is the
# module's directory, the replacement's, and the control plane's compile is reused
# (helm's client-go, 558 packages: none compiled again, measured).
CLUSTER_GO_FLAGS := -buildvcs=false -gcflags=all=-dwarf=false
CLUSTER_GO_BUILD := go build $(CLUSTER_GO_FLAGS)
# The other tools never change their go.mod or go.sum while building (their digest names
# the cache directory, and cluster/tools.py must find the same one): read-only modules.
TOOL_GO_ENV := GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0

# Shell snippet (run inside a tool module, with Go environment $(1)) that sets $ldflags
# to stamp Kubernetes' version packages as upstream's release builds do: kwokctl reads a
# scheduler's version from `--version`, and the components report it on /version.
cluster_k8s_ldflags = k8s=$(CLUSTER_K8S_VERSION); minor=$${k8s\#v*.}; minor=$${minor%%.*}; major=$${k8s\#v}; major=$${major%%.*}; \
  date=$$($(1) go list -m -f '{{with .Replace}}{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}{{else}}{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' k8s.io/kubernetes); \
  ldflags="-s -w"; \
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do \
    ldflags="$$ldflags -X $$pkg.gitVersion=$$k8s -X $$pkg.gitMajor=$$major -X $$pkg.gitMinor=$$minor"; \
    ldflags="$$ldflags -X $$pkg.gitTreeState=archive -X $$pkg.buildDate=$$date"; \
  done

# Recipe lines shared by every tool: $(1) is its cache dir, $(2) what is built. The tool
# is built into $(1)$(CACHE_PARTIAL) and moved into place only once it is complete and checked.
# (cluster/cache.mk: a private directory per run, published in one rename.)
define cluster_tool_start
@echo "building $(2) into $(1)"
$(call cache_begin,$(1))
@mkdir -p $(call cache_partial,$(1))/bin
endef
define cluster_tool_finish
$(call cache_publish,$(1))
@cd $(1) && find . -type f ! -name .done | sort | sed "s|^\./|  |"
endef

# make test needs the binaries; the top-level Makefile makes test depend on TEST_PREREQS.
TEST_PREREQS += cluster-tools kueue-crds monitoring-crds node-packages argocd-packages

# The CRD files of the pinned Kueue and Prometheus Operator modules, downloaded into the Go
# module cache, nothing built (cluster/tools.py: kueue_module_crds, prometheus_operator_crds).
# The integration tier applies them, and `make test-schemas` copies the schemas the unit
# tier checks against into tests/data/schemas (the Kueue step below copies the same files).
kueue-crds:
	@cd /tmp && go mod download sigs.k8s.io/kueue@$(KUEUE_VERSION)

PROMETHEUS_OPERATOR_VERSION := $(call cluster_mod_version,github.com/prometheus-operator/prometheus-operator,cluster/tools/prometheus-operator)
monitoring-crds:
	@cd /tmp && go mod download github.com/prometheus-operator/prometheus-operator@$(PROMETHEUS_OPERATOR_VERSION)

# Upstream Kubeflow Trainer's own end-to-end suite (test/e2e of the pinned Trainer module,
# Ginkgo), compiled unchanged into a test binary; tests/integration/operator/
# test_upstream_e2e.py runs its specs against kubetrain's operator.
$(TRAINER_E2E_DIR)/.done:
	$(call cluster_tool_start,$(TRAINER_E2E_DIR),Kubeflow Trainer $(TRAINER_VERSION) e2e suite)
	@set -e; start=$$(date +%s); \
	  cd $(TRAINER_MODULE); \
	  $(TOOL_GO_ENV) go test -c $(CLUSTER_GO_FLAGS) -ldflags "-s -w" \
	    -o $(TRAINER_E2E_DIR)$(CACHE_PARTIAL)/bin/trainer-e2e.test github.com/kubeflow/trainer/v2/test/e2e; \
	  echo "built in $$(( $$(date +%s) - start ))s"
	@$(TRAINER_E2E_DIR)$(CACHE_PARTIAL)/bin/trainer-e2e.test -ginkgo.dry-run -ginkgo.no-color 2>&1 | \
	  grep 'Kubeflow Trainer E2E Suite' >/dev/null || \
	  { echo "$(TRAINER_E2E_DIR)$(CACHE_PARTIAL)/bin/trainer-e2e.test is not Trainer's e2e suite" >&2; exit 1; }
	$(call cluster_tool_finish,$(TRAINER_E2E_DIR))


# One step builds every Go tool, one after the other without `make -j` (each go build
# already uses every core; two at once on a small machine only compete for memory). The
# order is the one `make test` wants them in, as it runs the tests beside the build
# (tests/tiers.py): the control plane every cluster test needs; the real node's kubelet
# and CoreDNS, and helm (the node's processes run one at a time, the longest chain of a
# cold run, and the first one's Helm upgrade test needs helm); what the operator's tests
# need next: Trainer's e2e suite and Volcano's CRDs (short builds; the e2e module runs
# among the shared operator's, before the Kueue module: in a cold run it waited 8 minutes
# for Kueue's build when Kueue came first), Kueue, and the Kueue profile
# (scheduler-plugins); Argo CD with kustomize; Prometheus (the operator's last modules
# and the tools tier), dashboard-check and metrics-server.
cluster-tools: $(CLUSTER_TOOLS_DIR)/.done $(NODE_DIR)/.done $(COREDNS_DIR)/.done \
  $(HELM_DIR)/.done $(TRAINER_E2E_DIR)/.done $(VOLCANO_DIR)/.done $(KUEUE_DIR)/.done \
  $(SCHEDULER_PLUGINS_DIR)/.done $(KUSTOMIZE_DIR)/.done $(ARGOCD_DIR)/.done \
  $(PROMETHEUS_DIR)/.done $(GRAFANA_DIR)/.done $(METRICS_SERVER_DIR)/.done

# Where each tool lives (a test checks that cluster/tools.py agrees).
cluster-tool-dirs:
	@echo "control-plane $(CLUSTER_TOOLS_DIR)"
	@echo "scheduler-plugins $(SCHEDULER_PLUGINS_DIR)"
	@echo "kueue $(KUEUE_DIR)"
	@echo "helm $(HELM_DIR)"
	@echo "volcano $(VOLCANO_DIR)"
	@echo "prometheus $(PROMETHEUS_DIR)"
	@echo "grafana $(GRAFANA_DIR)"
	@echo "node $(NODE_DIR)"
	@echo "coredns $(COREDNS_DIR)"
	@echo "argocd $(ARGOCD_DIR)"
	@echo "kustomize $(KUSTOMIZE_DIR)"
	@echo "trainer-e2e $(TRAINER_E2E_DIR)"
	@echo "metrics-server $(METRICS_SERVER_DIR)"
	@echo "training-operator $(TRAINING_OPERATOR_DIR)"
	@echo "mpi-operator $(MPI_OPERATOR_DIR)"
	@echo "trainer $(TRAINER_DIR)"
	@echo "jobset $(JOBSET_DIR)"

# No prerequisites on purpose, here and below: the directory name already carries what
# the tool is built from, and a fresh clone (new file times) must not rebuild the cache.
$(CLUSTER_TOOLS_DIR)/.done:
	@if [ -n "$${K8S_VERSION-}" ] && [ "$(CLUSTER_K8S_VERSION)" != "$${K8S_VERSION}" ]; then \
	  echo "cluster/tools/kubernetes/go.mod pins k8s.io/kubernetes $(CLUSTER_K8S_VERSION)," \
	       "but the Makefile's K8S_VERSION is $${K8S_VERSION}: make them the same" >&2; exit 1; fi
	$(call cluster_tool_start,$(CLUSTER_TOOLS_DIR),Kubernetes $(CLUSTER_K8S_VERSION) + etcd $(CLUSTER_ETCD_VERSION) + kwok $(CLUSTER_KWOK_VERSION) (a cold build takes a while))
	@start=$$(date +%s); \
	  cd $(CLUSTER_KUBE_MODULE); \
	  $(call cluster_k8s_ldflags,$(CLUSTER_GO_ENV)); \
	  $(CLUSTER_GO_ENV) $(CLUSTER_GO_BUILD) -ldflags "$$ldflags" -o $(CLUSTER_TOOLS_DIR)$(CACHE_PARTIAL)/bin/ \
	    k8s.io/kubernetes/cmd/kube-apiserver \
	    k8s.io/kubernetes/cmd/kube-controller-manager \
	    k8s.io/kubernetes/cmd/kube-scheduler \
	    k8s.io/kubernetes/cmd/kubectl \
	    ./cmd/etcd; \
	  cd $(CURDIR)/$(CLUSTER_KWOK_MODULE); \
	  kube=$(CLUSTER_K8S_VERSION); \
	  $(CLUSTER_GO_ENV) $(CLUSTER_GO_BUILD) \
	    -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=$${kube#v}" \
	    -o $(CLUSTER_TOOLS_DIR)$(CACHE_PARTIAL)/bin/ sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl; \
	  echo "built in $$(( $$(date +%s) - start ))s"
	@got=$$($(CLUSTER_TOOLS_DIR)$(CACHE_PARTIAL)/bin/kube-apiserver --version); \
	  if [ "$$got" != "Kubernetes $(CLUSTER_K8S_VERSION)" ]; then \
	    echo "kube-apiserver --version says '$$got', expected 'Kubernetes $(CLUSTER_K8S_VERSION)'" >&2; exit 1; fi
	$(call cluster_tool_finish,$(CLUSTER_TOOLS_DIR))

# The scheduler-plugins kube-scheduler (stamped with the Kubernetes version it is built
# against, as kwokctl needs), its controller (PodGroup and ElasticQuota status), and the
# CRDs of both from the release.
$(SCHEDULER_PLUGINS_DIR)/.done:
	$(call cluster_tool_start,$(SCHEDULER_PLUGINS_DIR),scheduler-plugins $(SCHEDULER_PLUGINS_VERSION) on Kubernetes $(CLUSTER_K8S_VERSION))
	@start=$$(date +%s); \
	  cd $(SCHEDULER_PLUGINS_MODULE); \
	  $(call cluster_k8s_ldflags,$(TOOL_GO_ENV)); \
	  $(TOOL_GO_ENV) $(CLUSTER_GO_BUILD) -ldflags "$$ldflags" \
	    -o $(SCHEDULER_PLUGINS_DIR)$(CACHE_PARTIAL)/bin/kube-scheduler-plugins sigs.k8s.io/scheduler-plugins/cmd/scheduler; \
	  $(TOOL_GO_ENV) $(CLUSTER_GO_BUILD) -ldflags "$$ldflags" \
	    -o $(SCHEDULER_PLUGINS_DIR)$(CACHE_PARTIAL)/bin/scheduler-plugins-controller sigs.k8s.io/scheduler-plugins/cmd/controller; \
	  src=$$($(TOOL_GO_ENV) go list -m -f '{{.Dir}}' sigs.k8s.io/scheduler-plugins); \
	  mkdir -p $(SCHEDULER_PLUGINS_DIR)$(CACHE_PARTIAL)/crds; \
	  install -m 0644 $$src/config/crd/bases/scheduling.x-k8s.io_podgroups.yaml \
	    $$src/config/crd/bases/scheduling.x-k8s.io_elasticquotas.yaml $(SCHEDULER_PLUGINS_DIR)$(CACHE_PARTIAL)/crds/; \
	  echo "built in $$(( $$(date +%s) - start ))s"
	@got=$$($(SCHEDULER_PLUGINS_DIR)$(CACHE_PARTIAL)/bin/kube-scheduler-plugins --version); \
	  if [ "$$got" != "Kubernetes $(CLUSTER_K8S_VERSION)" ]; then \
	    echo "kube-scheduler-plugins --version says '$$got', expected 'Kubernetes $(CLUSTER_K8S_VERSION)'" >&2; exit 1; fi
	$(call cluster_tool_finish,$(SCHEDULER_PLUGINS_DIR))

# The Kueue controller manager, and from the same module its CRDs (with the conversion
# webhook patches) and webhook manifests; from the modules Kueue builds its Kubeflow
# integrations on, the CRDs those integrations watch (JobSet, Trainer v2's TrainJob and
# runtimes), for tests that enable them.
$(KUEUE_DIR)/.done:
	$(call cluster_tool_start,$(KUEUE_DIR),Kueue $(KUEUE_VERSION))
	@start=$$(date +%s); \
	  cd $(KUEUE_MODULE); \
	  date=$$($(TOOL_GO_ENV) go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' sigs.k8s.io/kueue); \
	  $(TOOL_GO_ENV) $(CLUSTER_GO_BUILD) \
	    -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$(KUEUE_VERSION) -X sigs.k8s.io/kueue/pkg/version.BuildDate=$$date" \
	    -o $(KUEUE_DIR)$(CACHE_PARTIAL)/bin/kueue sigs.k8s.io/kueue/cmd/kueue; \
	  src=$$($(TOOL_GO_ENV) go list -m -f '{{.Dir}}' sigs.k8s.io/kueue); \
	  mkdir -p $(KUEUE_DIR)$(CACHE_PARTIAL)/crds/patches $(KUEUE_DIR)$(CACHE_PARTIAL)/webhook $(KUEUE_DIR)$(CACHE_PARTIAL)/crds/deps; \
	  install -m 0644 $$src/config/components/crd/bases/*.yaml $(KUEUE_DIR)$(CACHE_PARTIAL)/crds/; \
	  install -m 0644 $$src/config/components/crd/patches/*.yaml $(KUEUE_DIR)$(CACHE_PARTIAL)/crds/patches/; \
	  install -m 0644 $$src/config/components/crd/kustomization.yaml $(KUEUE_DIR)$(CACHE_PARTIAL)/crds/patches/; \
	  install -m 0644 $$src/config/components/webhook/manifests.yaml \
	    $$src/config/components/webhook/kustomization.yaml $(KUEUE_DIR)$(CACHE_PARTIAL)/webhook/; \
	  install -m 0644 $$src/config/default/kustomization.yaml \
	    $(KUEUE_DIR)$(CACHE_PARTIAL)/webhook/default-kustomization.yaml; \
	  jobset=$$($(TOOL_GO_ENV) go list -m -f '{{.Dir}}' sigs.k8s.io/jobset); \
	  trainer=$$($(TOOL_GO_ENV) go list -m -f '{{.Dir}}' github.com/kubeflow/trainer/v2); \
	  install -m 0644 $$jobset/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml \
	    $$trainer/manifests/base/crds/trainer.kubeflow.org_*.yaml $(KUEUE_DIR)$(CACHE_PARTIAL)/crds/deps/; \
	  echo "built in $$(( $$(date +%s) - start ))s"
	@$(KUEUE_DIR)$(CACHE_PARTIAL)/bin/kueue --help 2>&1 | grep -q -- '-feature-gates' || \
	  { echo "$(KUEUE_DIR)$(CACHE_PARTIAL)/bin/kueue --help does not list -feature-gates: not the Kueue manager?" >&2; exit 1; }
	$(call cluster_tool_finish,$(KUEUE_DIR))

# helm, stamped as upstream's release builds are (version, and the Kubernetes minor of
# its client libraries as the default for .Capabilities.KubeVersion).
$(HELM_DIR)/.done:
	$(call cluster_tool_start,$(HELM_DIR),helm $(HELM_VERSION))
	@start=$$(date +%s); \
	  cd $(HELM_MODULE); \
	  kube=$$($(TOOL_GO_ENV) go list -m -f '{{.Version}}' k8s.io/client-go); kube=$${kube#v0.}; \
	  ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION)"; \
	  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do \
	    ldflags="$$ldflags -X $$pkg.k8sVersionMajor=1 -X $$pkg.k8sVersionMinor=$${kube%%.*}"; \
	  done; \
	  $(TOOL_GO_ENV) $(CLUSTER_GO_BUILD) -ldflags "$$ldflags" \
	    -o $(HELM_DIR)$(CACHE_PARTIAL)/bin/helm helm.sh/helm/v3/cmd/helm; \
	  echo "built in $$(( $$(date +%s) - start ))s"
	@got=$$($(HELM_DIR)$(CACHE_PARTIAL)/bin/helm version --template '{{.Version}}'); \
	  if [ "$$got" != "$(HELM_VERSION)" ]; then \
	    echo "helm version says '$$got', expected '$(HELM_VERSION)'" >&2; exit 1; fi
	$(call cluster_tool_finish,$(HELM_DIR))

# Volcano's scheduling.volcano.sh CRDs (PodGroup, Queue), generated from volcano.sh/apis
# with the controller-gen release and options Volcano's own Makefile uses (see the
# go.mod of cluster/tools/volcano for why they are generated rather than copied).
$(VOLCANO_DIR)/.done:
	$(call cluster_tool_start,$(VOLCANO_DIR),Volcano $(VOLCANO_APIS_VERSION) CRDs with controller-gen $(CONTROLLER_GEN_VERSION))
	@start=$$(date +%s); \
	  cd $(VOLCANO_MODULE); \
	  $(TOOL_GO_ENV) $(CLUSTER_GO_BUILD) \
	    -ldflags "-s -w -X sigs.k8s.io/controller-tools/pkg/version.version=$(CONTROLLER_GEN_VERSION)" \
	    -o $(VOLCANO_DIR)$(CACHE_PARTIAL)/bin/controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen; \
	  $(TOOL_GO_ENV) $(VOLCANO_DIR)$(CACHE_PARTIAL)/bin/controller-gen \
	    crd:crdVersions=v1,generateEmbeddedObjectMeta=true \
	    paths=volcano.sh/apis/pkg/apis/scheduling/v1beta1 \
	    output:crd:artifacts:config=$(VOLCANO_DIR)$(CACHE_PARTIAL)/crds; \
	  echo "built in $$(( $$(date +%s) - start ))s"
	@test -s $(VOLCANO_DIR)$(CACHE_PARTIAL)/crds/scheduling.volcano.sh_podgroups.yaml || \
	  { echo "controller-gen wrote no scheduling.volcano.sh_podgroups.yaml into $(VOLCANO_DIR)$(CACHE_PARTIAL)/crds" >&2; exit 1; }
	$(call cluster_tool_finish,$(VOLCANO_DIR))

# Prometheus and promtool, stamped as upstream's release builds are (promu's ldflags: the
# version, and as the build date the release's time on the module proxy, so a rebuild
# is the same; no revision, which a module download does not carry) and with upstream's
# netgo tag, not its builtinassets tag: the web UI is not in the module (see its go.mod),
# and with remove_all_sd: no service discovery but file and HTTP (its go.mod says why).
$(PROMETHEUS_DIR)/.done:
	$(call cluster_tool_start,$(PROMETHEUS_DIR),Prometheus $(PROMETHEUS_RELEASE) and promtool (a cold build takes a while))
	@start=$$(date +%s); \
	  cd $(PROMETHEUS_MODULE); \
	  date=$$($(TOOL_GO_ENV) go list -m -f '{{.Time.UTC.Format "20060102-15:04:05"}}' github.com/prometheus/prometheus); \
	  pkg=github.com/prometheus/common/version; \
	  $(TOOL_GO_ENV) $(CLUSTER_GO_BUILD) -tags netgo,remove_all_sd \
	    -ldflags "-s -w -X $$pkg.Version=$(PROMETHEUS_RELEASE) -X $$pkg.BuildDate=$$date" \
	    -o $(PROMETHEUS_DIR)$(CACHE_PARTIAL)/bin/ \
	    github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool; \
	  echo "built in $$(( $$(date +%s) - start ))s"
	@for bin in prometheus promtool; do \
	  got=$$($(PROMETHEUS_DIR)$(CACHE_PARTIAL)/bin/$$bin --version 2>&1 | sed -n 1p); \
	  case "$$got" in "$$bin, version $(PROMETHEUS_RELEASE) "*) ;; \
	    *) echo "$$bin --version says '$$got', expected '$$bin, version $(PROMETHEUS_RELEASE) (...)'" >&2; exit 1;; \
	  esac; \
	done
	$(call cluster_tool_finish,$(PROMETHEUS_DIR))

# dashboard-check, kubetrain's own command in the module (see its go.mod): Grafana
# dashboard JSON checked against the Grafana Foundation SDK's schema. Its --version names
# the SDK version it was built with (from the binary's build information).
$(GRAFANA_DIR)/.done:
	$(call cluster_tool_start,$(GRAFANA_DIR),dashboard-check on grafana-foundation-sdk $(GRAFANA_SDK_VERSION))
	@start=$$(date +%s); \
	  cd $(GRAFANA_MODULE); \
	  $(TOOL_GO_ENV) $(CLUSTER_GO_BUILD) -ldflags "-s -w" \
	    -o $(GRAFANA_DIR)$(CACHE_PARTIAL)/bin/dashboard-check ./cmd/dashboard-check; \
	  echo "built in $$(( $$(date +%s) - start ))s"
	@got=$$($(GRAFANA_DIR)$(CACHE_PARTIAL)/bin/dashboard-check --version); \
	  expected="dashboard-check github.com/grafana/grafana-foundation-sdk/go $(GRAFANA_SDK_VERSION)"; \
	  if [ "$$got" != "$$expected" ]; then \
	    echo "dashboard-check --version says '$$got', expected '$$expected'" >&2; exit 1; fi
	$(call cluster_tool_finish,$(GRAFANA_DIR))

# The real node's kubelet and kube-proxy, stamped as the control plane is (the node
# reports its kubelet version), and pause, kubetrain's sandbox program
# (cmd/pause: cluster/node.py packs it as the image registry.k8s.io/pause:3.10).
$(NODE_DIR)/.done:
	$(call cluster_tool_start,$(NODE_DIR),kubelet and kube-proxy $(CLUSTER_K8S_VERSION) and pause (a cold build takes a while))
	@start=$$(date +%s); \
	  cd $(CLUSTER_KUBE_MODULE); \
	  $(call cluster_k8s_ldflags,$(TOOL_GO_ENV)); \
	  $(TOOL_GO_ENV) $(CLUSTER_GO_BUILD) -ldflags "$$ldflags" -o $(NODE_DIR)$(CACHE_PARTIAL)/bin/ \
	    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy; \
	  echo "kubelet and kube-proxy built in $$(( $$(date +%s) - start ))s"; start=$$(date +%s); \
	  $(TOOL_GO_ENV) $(CLUSTER_GO_BUILD) -ldflags "-s -w" -o $(NODE_DIR)$(CACHE_PARTIAL)/bin/pause ./cmd/pause; \
	  echo "pause built in $$(( $$(date +%s) - start ))s"
	@for bin in kubelet kube-proxy; do \
	  got=$$($(NODE_DIR)$(CACHE_PARTIAL)/bin/$$bin --version); \
	  if [ "$$got" != "Kubernetes $(CLUSTER_K8S_VERSION)" ]; then \
	    echo "$$bin --version says '$$got', expected 'Kubernetes $(CLUSTER_K8S_VERSION)'" >&2; exit 1; fi; \
	done
	$(call cluster_tool_finish,$(NODE_DIR))

# CoreDNS, the real node's cluster DNS: kubetrain's cmd/coredns in the module, upstream's
# coremain with only the plugins the node's Corefile uses (see its doc comment).
$(COREDNS_DIR)/.done:
	$(call cluster_tool_start,$(COREDNS_DIR),CoreDNS $(COREDNS_VERSION))
	@start=$$(date +%s); \
	  cd $(COREDNS_MODULE); \
	  $(TOOL_GO_ENV) $(CLUSTER_GO_BUILD) -ldflags "-s -w" \
	    -o $(COREDNS_DIR)$(CACHE_PARTIAL)/bin/coredns ./cmd/coredns; \
	  echo "built in $$(( $$(date +%s) - start ))s"
	@got=$$($(COREDNS_DIR)$(CACHE_PARTIAL)/bin/coredns -version | sed -n 1p); \
	  if [ "$$got" != "CoreDNS-$(COREDNS_VERSION:v%=%)" ]; then \
	    echo "coredns -version says '$$got', expected 'CoreDNS-$(COREDNS_VERSION:v%=%)'" >&2; exit 1; fi
	$(call cluster_tool_finish,$(COREDNS_DIR))

# Argo CD's application controller and repo server, one binary (kubetrain's cmd/argocd in
# the module: the name it is started under picks the component, as in upstream's own
# multicall binary; cluster/argocd.py starts them through links), stamped as upstream's Makefile does (common.version from its VERSION file, the
# release's time on the module proxy as the build date); with the CRDs of Application and
# AppProject and the default configuration ConfigMaps and Secret of that release.
$(ARGOCD_DIR)/.done:
	$(call cluster_tool_start,$(ARGOCD_DIR),Argo CD $(ARGOCD_VERSION) (a cold build takes about 3 min))
	@start=$$(date +%s); \
	  cd $(ARGOCD_MODULE); \
	  $(TOOL_GO_ENV) go mod download github.com/argoproj/argo-cd/v3 || exit 1; \
	  src=$$($(TOOL_GO_ENV) go list -m -f '{{.Dir}}' github.com/argoproj/argo-cd/v3); \
	  test -f "$$src/VERSION" || { echo "Argo CD's module has no VERSION file in '$$src'" >&2; exit 1; }; \
	  date=$$($(TOOL_GO_ENV) go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' github.com/argoproj/argo-cd/v3); \
	  pkg=github.com/argoproj/argo-cd/v3/common; \
	  $(TOOL_GO_ENV) $(CLUSTER_GO_BUILD) \
	    -ldflags "-s -w -X $$pkg.version=$$(cat $$src/VERSION) -X $$pkg.buildDate=$$date" \
	    -o $(ARGOCD_DIR)$(CACHE_PARTIAL)/bin/argocd ./cmd/argocd; \
	  for component in argocd-application-controller argocd-repo-server; do \
	    ln -s argocd $(ARGOCD_DIR)$(CACHE_PARTIAL)/bin/$$component; done; \
	  mkdir -p $(ARGOCD_DIR)$(CACHE_PARTIAL)/manifests/crds $(ARGOCD_DIR)$(CACHE_PARTIAL)/manifests/config; \
	  install -m 0644 $$src/manifests/crds/application-crd.yaml $$src/manifests/crds/appproject-crd.yaml \
	    $(ARGOCD_DIR)$(CACHE_PARTIAL)/manifests/crds/; \
	  install -m 0644 $$src/manifests/base/config/argocd-cm.yaml $$src/manifests/base/config/argocd-secret.yaml \
	    $$src/manifests/base/config/argocd-rbac-cm.yaml $(ARGOCD_DIR)$(CACHE_PARTIAL)/manifests/config/; \
	  echo "built in $$(( $$(date +%s) - start ))s"
	@got=$$($(ARGOCD_DIR)$(CACHE_PARTIAL)/bin/argocd version); \
	  case "$$got" in "argocd: $(ARGOCD_VERSION)+"*) ;; \
	    *) echo "argocd version says '$$got', expected 'argocd: $(ARGOCD_VERSION)+...'" >&2; exit 1;; \
	  esac
	$(call cluster_tool_finish,$(ARGOCD_DIR))

# kustomize, which Argo CD's repo server runs from PATH on each chart folder (a
# kustomization); its version comes from the binary's build information.
$(KUSTOMIZE_DIR)/.done:
	$(call cluster_tool_start,$(KUSTOMIZE_DIR),kustomize $(KUSTOMIZE_VERSION))
	@start=$$(date +%s); \
	  cd $(KUSTOMIZE_MODULE); \
	  $(TOOL_GO_ENV) $(CLUSTER_GO_BUILD) -ldflags "-s -w" \
	    -o $(KUSTOMIZE_DIR)$(CACHE_PARTIAL)/bin/kustomize sigs.k8s.io/kustomize/kustomize/v5; \
	  echo "built in $$(( $$(date +%s) - start ))s"
	@got=$$($(KUSTOMIZE_DIR)$(CACHE_PARTIAL)/bin/kustomize version); \
	  if [ "$$got" != "$(KUSTOMIZE_VERSION)" ]; then \
	    echo "kustomize version says '$$got', expected '$(KUSTOMIZE_VERSION)'" >&2; exit 1; fi
	$(call cluster_tool_finish,$(KUSTOMIZE_DIR))

# metrics-server (the metrics.k8s.io API the HorizontalPodAutoscaler and `kubectl top`
# read), stamped as upstream's Makefile does (client-go's version package: the release
# tag, the commit the module proxy records for it, the release's time on the proxy as the
# build date; kwokctl reads the version from `--version`), with the release's kustomize
# manifests (APIService, Service, RBAC): kwokctl builds them, drops the Deployment and
# points the Service at the binary it runs (cluster/metrics.py).
$(METRICS_SERVER_DIR)/.done:
	$(call cluster_tool_start,$(METRICS_SERVER_DIR),metrics-server $(METRICS_SERVER_VERSION))
	@set -e; start=$$(date +%s); \
	  cd $(METRICS_SERVER_MODULE); \
	  commit=$$($(TOOL_GO_ENV) go mod download -json sigs.k8s.io/metrics-server@$(METRICS_SERVER_VERSION) | \
	    sed -n 's/^[[:space:]]*"Hash": "\([0-9a-f]*\)".*/\1/p'); \
	  date=$$($(TOOL_GO_ENV) go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' sigs.k8s.io/metrics-server); \
	  pkg=k8s.io/client-go/pkg/version; \
	  $(TOOL_GO_ENV) $(CLUSTER_GO_BUILD) \
	    -ldflags "-s -w -X $$pkg.gitVersion=$(METRICS_SERVER_VERSION) -X $$pkg.gitCommit=$$commit -X $$pkg.buildDate=$$date" \
	    -o $(METRICS_SERVER_DIR)$(CACHE_PARTIAL)/bin/metrics-server sigs.k8s.io/metrics-server/cmd/metrics-server; \
	  src=$$($(TOOL_GO_ENV) go list -m -f '{{.Dir}}' sigs.k8s.io/metrics-server); \
	  cp -R $$src/manifests $(METRICS_SERVER_DIR)$(CACHE_PARTIAL)/manifests; \
	  chmod -R u+w $(METRICS_SERVER_DIR)$(CACHE_PARTIAL)/manifests; \
	  echo "built in $$(( $$(date +%s) - start ))s"
	@got=$$($(METRICS_SERVER_DIR)$(CACHE_PARTIAL)/bin/metrics-server --version); \
	  if [ "$$got" != "$(METRICS_SERVER_VERSION)" ]; then \
	    echo "metrics-server --version says '$$got', expected '$(METRICS_SERVER_VERSION)'" >&2; exit 1; fi
	@test -s $(METRICS_SERVER_DIR)$(CACHE_PARTIAL)/manifests/overlays/release/kustomization.yaml || \
	  { echo "metrics-server's module has no manifests/overlays/release in $(METRICS_SERVER_DIR)$(CACHE_PARTIAL)" >&2; exit 1; }
	$(call cluster_tool_finish,$(METRICS_SERVER_DIR))

# Debian packages installed when one is missing: $(1) says what they are for, $(2) lists them.
define debian_install
@missing=$$(for p in $(2); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | \
    grep -q '^install ok installed$$' || echo $$p; done); \
  if [ -n "$$missing" ]; then \
    echo "Installing $(1):" $$missing; \
    $(CLUSTER_SUDO) apt-get update -qq; \
    DEBIAN_FRONTEND=noninteractive $(CLUSTER_SUDO) apt-get install -y -qq --no-install-recommends $$missing </dev/null; \
  fi
endef
CLUSTER_SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
# What the real node runs on (containerd, runc, the CNI plugins, and what kube-proxy and
# the API server forwarder use).
NODE_PACKAGES := containerd runc containernetworking-plugins busybox-static conntrack iptables socat
node-packages:
	$(call debian_install,the real node's Debian packages,$(NODE_PACKAGES))
# What Argo CD runs with beside its own binary: redis (its cache) and git (the repo
# server clones the GitOps repository), and socat (the API server relay into its network
# namespace).
ARGOCD_PACKAGES := redis-server git socat
argocd-packages:
	$(call debian_install,Argo CD's Debian packages,$(ARGOCD_PACKAGES))

# The Go operators kubetrain replaces, for the peer benchmark (benchmarks/peers.py, make
# bench-peers): training-operator's and mpi-operator's modules have a command of their own
# that wires upstream's controllers at upstream's defaults (see their go.mod); Trainer v2
# and JobSet are upstream's own mains, built with upstream's go.mod unchanged (see
# peer_gomod_check). All built the same way as the tools above; the CRDs (and for Trainer
# and JobSet the webhook manifests, configuration and runtimes) come from the same module
# versions. Not part of cluster-tools: only the benchmark needs them.
peer-tools: $(TRAINING_OPERATOR_DIR)/.done $(MPI_OPERATOR_DIR)/.done $(TRAINER_DIR)/.done $(JOBSET_DIR)/.done

# (The --help checks read all of the output, not `grep -q`: the shell runs with pipefail,
# and a binary still writing when grep -q has its match dies of SIGPIPE.)
#
# Shell snippet, run inside a tool module: fail unless the binary $(1) was built from
# module $(2) at version $(3) (its `mod` line: the module of the main package) and every
# other module compiled into it (`go version -m`)
# is required at that very version by $(2)'s own go.mod ("upstream's go.mod unchanged":
# the tool module requires $(2) alone, so minimal version selection picks $(2)'s pins,
# and this proves it for each build).
peer_gomod_check = upstream=$$($(TOOL_GO_ENV) go list -m -f '{{.GoMod}}' $(2)); \
  got=$$(go version -m $(1) | awk '($$1 == "mod" || $$1 == "dep") && $$2 == "$(2)" { print $$3 }'); \
  if [ "$$got" != "$(3)" ]; then \
    echo "$(1) is built from $(2) '$$got', expected $(3)" >&2; exit 1; fi; \
  built=$$(mktemp); pinned=$$(mktemp); \
  go version -m $(1) | awk '$$1 == "dep" && $$2 != "$(2)" { print $$2, $$3 }' | LC_ALL=C sort > $$built; \
  awk '/^require[ \t]*\(/ { r = 1; next } r && /^\)/ { r = 0; next } \
    r && NF >= 2 && $$1 != "//" { print $$1, $$2 } /^require[ \t]+[^(]/ { print $$2, $$3 }' \
    $$upstream | LC_ALL=C sort > $$pinned; \
  differ=$$(LC_ALL=C comm -23 $$built $$pinned); count=$$(wc -l < $$built); rm -f $$built $$pinned; \
  if [ -n "$$differ" ]; then \
    echo "$(1) compiles in modules at versions $(2)'s go.mod ($$upstream) does not require:" >&2; \
    echo "$$differ" >&2; exit 1; fi; \
  echo "$$count modules compiled in, each at the version $(2) $(3)'s go.mod requires"

$(TRAINING_OPERATOR_DIR)/.done:
	$(call cluster_tool_start,$(TRAINING_OPERATOR_DIR),training-operator $(TRAINING_OPERATOR_VERSION))
	@start=$$(date +%s); \
	  cd $(TRAINING_OPERATOR_MODULE); \
	  $(TOOL_GO_ENV) $(CLUSTER_GO_BUILD) -ldflags "-s -w" \
	    -o $(TRAINING_OPERATOR_DIR)$(CACHE_PARTIAL)/bin/training-operator ./cmd/training-operator; \
	  src=$$($(TOOL_GO_ENV) go list -m -f '{{.Dir}}' github.com/kubeflow/training-operator); \
	  mkdir -p $(TRAINING_OPERATOR_DIR)$(CACHE_PARTIAL)/crds; \
	  install -m 0644 $$src/manifests/base/crds/kubeflow.org_*.yaml $(TRAINING_OPERATOR_DIR)$(CACHE_PARTIAL)/crds/; \
	  echo "built in $$(( $$(date +%s) - start ))s"
	@$(TRAINING_OPERATOR_DIR)$(CACHE_PARTIAL)/bin/training-operator --help 2>&1 | grep -- '-enable-scheme' >/dev/null || \
	  { echo "$(TRAINING_OPERATOR_DIR)$(CACHE_PARTIAL)/bin/training-operator --help does not list -enable-scheme" >&2; exit 1; }
	$(call cluster_tool_finish,$(TRAINING_OPERATOR_DIR))

$(MPI_OPERATOR_DIR)/.done:
	$(call cluster_tool_start,$(MPI_OPERATOR_DIR),mpi-operator $(MPI_OPERATOR_VERSION))
	@start=$$(date +%s); \
	  cd $(MPI_OPERATOR_MODULE); \
	  $(TOOL_GO_ENV) $(CLUSTER_GO_BUILD) -ldflags "-s -w" \
	    -o $(MPI_OPERATOR_DIR)$(CACHE_PARTIAL)/bin/mpi-operator ./cmd/mpi-operator; \
	  src=$$($(TOOL_GO_ENV) go list -m -f '{{.Dir}}' github.com/kubeflow/mpi-operator); \
	  mkdir -p $(MPI_OPERATOR_DIR)$(CACHE_PARTIAL)/crds; \
	  install -m 0644 $$src/manifests/base/kubeflow.org_mpijobs.yaml $(MPI_OPERATOR_DIR)$(CACHE_PARTIAL)/crds/; \
	  echo "built in $$(( $$(date +%s) - start ))s"
	@$(MPI_OPERATOR_DIR)$(CACHE_PARTIAL)/bin/mpi-operator --help 2>&1 | grep -- '-kube-api-qps' >/dev/null || \
	  { echo "$(MPI_OPERATOR_DIR)$(CACHE_PARTIAL)/bin/mpi-operator --help does not list -kube-api-qps" >&2; exit 1; }
	$(call cluster_tool_finish,$(MPI_OPERATOR_DIR))

# Kubeflow Trainer v2's controller manager (upstream's main, unstamped as upstream's image
# build is), with from the same module: its CRDs (TrainJob, TrainingRuntime,
# ClusterTrainingRuntime), its webhook manifests and their kustomize patches, its shipped
# configuration (benchmarks/peer_trainer.py starts from it) and its default runtimes.
$(TRAINER_DIR)/.done:
	$(call cluster_tool_start,$(TRAINER_DIR),Kubeflow Trainer $(TRAINER_VERSION) controller manager)
	@set -e; start=$$(date +%s); \
	  cd $(TRAINER_MODULE); \
	  $(TOOL_GO_ENV) $(CLUSTER_GO_BUILD) -ldflags "-s -w" \
	    -o $(TRAINER_DIR)$(CACHE_PARTIAL)/bin/trainer-controller-manager \
	    github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager; \
	  src=$$($(TOOL_GO_ENV) go list -m -f '{{.Dir}}' github.com/kubeflow/trainer/v2); \
	  out=$(TRAINER_DIR)$(CACHE_PARTIAL); \
	  mkdir -p $$out/crds $$out/webhook $$out/config $$out/runtimes; \
	  install -m 0644 $$src/manifests/base/crds/trainer.kubeflow.org_*.yaml $$out/crds/; \
	  install -m 0644 $$src/manifests/base/webhook/manifests.yaml \
	    $$src/manifests/base/webhook/kustomization.yaml $$src/manifests/base/webhook/patch_*.yaml \
	    $$out/webhook/; \
	  install -m 0644 $$src/manifests/base/manager/controller_manager_config.yaml $$out/config/; \
	  install -m 0644 $$src/manifests/base/runtimes/*_distributed.yaml $$out/runtimes/; \
	  echo "built in $$(( $$(date +%s) - start ))s"
	@$(TRAINER_DIR)$(CACHE_PARTIAL)/bin/trainer-controller-manager --help 2>&1 | grep -- '-feature-gates' >/dev/null || \
	  { echo "$(TRAINER_DIR)$(CACHE_PARTIAL)/bin/trainer-controller-manager --help does not list -feature-gates" >&2; exit 1; }
	@cd $(TRAINER_MODULE) && \
	  $(call peer_gomod_check,$(TRAINER_DIR)$(CACHE_PARTIAL)/bin/trainer-controller-manager,github.com/kubeflow/trainer/v2,$(TRAINER_VERSION))
	$(call cluster_tool_finish,$(TRAINER_DIR))

# JobSet's controller manager (upstream's main at the module root), stamped as upstream's
# Makefile does (version and commit: its user agent is jobset/<version> (...) <commit>;
# the commit is the one the module proxy records for the tag; checked by starting it
# with no configuration file, when it logs that and exits), with its CRD, webhook
# manifests and their kustomize patches, and its shipped configuration.
$(JOBSET_DIR)/.done:
	$(call cluster_tool_start,$(JOBSET_DIR),JobSet $(JOBSET_VERSION) controller manager)
	@set -e; start=$$(date +%s); \
	  cd $(JOBSET_MODULE); \
	  commit=$$($(TOOL_GO_ENV) go mod download -json sigs.k8s.io/jobset@$(JOBSET_VERSION) | \
	    sed -n 's/^[[:space:]]*"Hash": "\([0-9a-f]*\)".*/\1/p'); \
	  pkg=sigs.k8s.io/jobset/pkg/version; \
	  $(TOOL_GO_ENV) $(CLUSTER_GO_BUILD) \
	    -ldflags "-s -w -X $$pkg.GitVersion=$(JOBSET_VERSION) -X $$pkg.GitCommit=$$commit" \
	    -o $(JOBSET_DIR)$(CACHE_PARTIAL)/bin/jobset-controller-manager sigs.k8s.io/jobset; \
	  src=$$($(TOOL_GO_ENV) go list -m -f '{{.Dir}}' sigs.k8s.io/jobset); \
	  out=$(JOBSET_DIR)$(CACHE_PARTIAL); \
	  mkdir -p $$out/crds $$out/webhook $$out/config; \
	  install -m 0644 $$src/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml $$out/crds/; \
	  install -m 0644 $$src/config/components/webhook/manifests.yaml \
	    $$src/config/components/webhook/kustomization.yaml \
	    $$src/config/components/webhook/patches/*.yaml $$out/webhook/; \
	  install -m 0644 $$src/config/components/manager/controller_manager_config.yaml $$out/config/; \
	  echo "built in $$(( $$(date +%s) - start ))s"
	@$(JOBSET_DIR)$(CACHE_PARTIAL)/bin/jobset-controller-manager --help 2>&1 | grep -- '-kube-api-qps' >/dev/null || \
	  { echo "$(JOBSET_DIR)$(CACHE_PARTIAL)/bin/jobset-controller-manager --help does not list -kube-api-qps" >&2; exit 1; }
	@kubeconfig=$$(mktemp); \
	  printf '%s\n' 'apiVersion: v1' 'kind: Config' 'current-context: none' \
	    'clusters: [{name: none, cluster: {server: "https://127.0.0.1:1"}}]' \
	    'contexts: [{name: none, context: {cluster: none, user: none}}]' 'users: [{name: none, user: {}}]' \
	    > $$kubeconfig; \
	  got=$$({ $(JOBSET_DIR)$(CACHE_PARTIAL)/bin/jobset-controller-manager --kubeconfig=$$kubeconfig \
	    --config=/nonexistent 2>&1 || true; } | sed -n 's/.*"userAgent": "\([^"]*\)".*/\1/p'); \
	  rm -f $$kubeconfig; \
	  case "$$got" in "jobset/$(JOBSET_VERSION) ("*") "[0-9a-f]*) ;; \
	    *) echo "jobset-controller-manager says its user agent is '$$got'," \
	         "expected 'jobset/$(JOBSET_VERSION) (<os>/<arch>) <commit>'" >&2; exit 1;; \
	  esac
	@cd $(JOBSET_MODULE) && \
	  $(call peer_gomod_check,$(JOBSET_DIR)$(CACHE_PARTIAL)/bin/jobset-controller-manager,sigs.k8s.io/jobset,$(JOBSET_VERSION))
	$(call cluster_tool_finish,$(JOBSET_DIR))

# The demo cluster lives in build/cluster (git-ignored); the tests start their own.
KUBETRAIN_CLUSTER_DIR ?= build/cluster
CLUSTER_CPU_NODES ?= 2
CLUSTER_GPU_NODES ?= 4
CLUSTER_GPUS_PER_NODE ?= 8
# kube (kube-scheduler) or coscheduling (the scheduler-plugins scheduler: gang scheduling).
CLUSTER_SCHEDULER ?= kube
# 1: cluster-up also starts one real node (kubelet + containerd; docs/real-node.md).
REAL_NODE ?= 0
# 1: cluster-up also serves the resource metrics API (metrics-server over kwok's emulated
# pod usage) with HPA settings short enough for a test (cluster/metrics.py).
METRICS ?= 0
CLUSTER_PY := $(BIN)/python

cluster-up: venv cluster-tools $(if $(filter-out 0,$(REAL_NODE)),node-packages)
	$(CLUSTER_PY) -m cluster --workdir $(KUBETRAIN_CLUSTER_DIR) up \
	  --cpu-nodes $(CLUSTER_CPU_NODES) --gpu-nodes $(CLUSTER_GPU_NODES) \
	  --gpus-per-node $(CLUSTER_GPUS_PER_NODE) --scheduler $(CLUSTER_SCHEDULER) \
	  $(if $(filter-out 0,$(REAL_NODE)),--real-node) $(if $(filter-out 0,$(METRICS)),--metrics)

# Copy images from podman's storage (make images) into the real node's containerd:
#   make node-import-images IMAGES="ghcr.io/kubetrain/operator:0.1.0 ..."
node-import-images: venv
	$(CLUSTER_PY) -m cluster --workdir $(KUBETRAIN_CLUSTER_DIR) import-images $(IMAGES)

cluster-down: venv
	$(CLUSTER_PY) -m cluster --workdir $(KUBETRAIN_CLUSTER_DIR) down

cluster-status: venv
	$(CLUSTER_PY) -m cluster --workdir $(KUBETRAIN_CLUSTER_DIR) status

# Kueue against the cluster that cluster-up started (cluster-down stops it too).
kueue-up: venv cluster-tools
	$(CLUSTER_PY) -m cluster --workdir $(KUBETRAIN_CLUSTER_DIR) kueue up

kueue-down: venv
	$(CLUSTER_PY) -m cluster --workdir $(KUBETRAIN_CLUSTER_DIR) kueue down
