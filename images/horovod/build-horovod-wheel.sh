#!/usr/bin/env bash
# Builds a Horovod wheel from the PyPI source distribution against the PyTorch already
# installed for PYTHON, and writes it to OUTDIR. Used by the horovod image and by
# `make training-deps` (which caches the wheel outside the repository).
#
#   build-horovod-wheel.sh PYTHON OUTDIR
#
# Horovod 0.28.1 still compiles with C++14, but PyTorch >= 2.1 headers require C++17
# (fixed on Horovod's main branch after the release), so the two CMakeLists that set
# the standard are raised to 17 before building. Framework and transport selection
# comes from the usual HOROVOD_* variables; the defaults below build PyTorch + Gloo,
# plus MPI when an MPI compiler wrapper is on PATH.
#
# HOROVOD_GPU_OPERATIONS=NCCL adds NCCL GPU operations; it needs a CUDA toolkit under
# HOROVOD_CUDA_TOOLKIT (default /usr/local/cuda) and links the NCCL of torch's nvidia-nccl-cu12 wheel
# unless HOROVOD_NCCL_HOME/HOROVOD_NCCL_INCLUDE say otherwise.
#
# A CPU build (no HOROVOD_GPU_OPERATIONS) first asks pip for a ready wheel of this version
# from its configured find-links only (a wheelhouse, never PyPI, which has no Horovod
# wheels): `make images` mounts the wheel `make training-deps` built, for the same torch,
# CPython minor and Debian Open MPI, so the image does not compile Horovod a second time.
# HOROVOD_BUILD_FROM_SOURCE=1 always compiles.
set -euo pipefail

python=${1:?usage: build-horovod-wheel.sh PYTHON OUTDIR}
outdir=${2:?usage: build-horovod-wheel.sh PYTHON OUTDIR}
version=${HOROVOD_VERSION:-0.28.1}

work=$(mktemp -d "${TMPDIR:-/tmp}/horovod-build.XXXXXX")
trap 'rm -rf "$work"' EXIT

if [[ -z "${HOROVOD_GPU_OPERATIONS:-}${HOROVOD_BUILD_FROM_SOURCE:-}" ]] \
  && "$python" -m pip download --quiet --no-deps --no-index --only-binary horovod \
    "horovod==${version}" -d "$work/prebuilt" 2>/dev/null; then
  mkdir -p "$outdir"
  cp "$work"/prebuilt/horovod-"${version}"-*.whl "$outdir"/
  echo "build-horovod-wheel: using the prebuilt wheel from pip's find-links" >&2
  ls "$outdir"/horovod-"${version}"-*.whl
  exit 0
fi

"$python" -m pip download --quiet --no-deps --no-binary horovod \
  "horovod==${version}" -d "$work"
tar -xzf "$work/horovod-${version}.tar.gz" -C "$work"
src="$work/horovod-${version}"

for cmakelists in CMakeLists.txt horovod/torch/CMakeLists.txt; do
  if ! grep -q 'set(CMAKE_CXX_STANDARD 14)' "$src/$cmakelists"; then
    echo "build-horovod-wheel: expected 'set(CMAKE_CXX_STANDARD 14)' in $cmakelists of" \
      "horovod ${version}; the source changed, so check whether the C++17 patch is" \
      "still needed" >&2
    exit 1
  fi
  sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' "$src/$cmakelists"
done

export HOROVOD_WITH_PYTORCH=1
export HOROVOD_WITH_GLOO=1
export HOROVOD_WITHOUT_TENSORFLOW="${HOROVOD_WITHOUT_TENSORFLOW:-1}"
export HOROVOD_WITHOUT_MXNET="${HOROVOD_WITHOUT_MXNET:-1}"
if [[ -z "${HOROVOD_WITH_MPI:-}${HOROVOD_WITHOUT_MPI:-}" ]]; then
  if command -v mpicxx >/dev/null 2>&1; then
    export HOROVOD_WITH_MPI=1
  else
    export HOROVOD_WITHOUT_MPI=1
  fi
fi
if [[ -n "${HOROVOD_GPU_OPERATIONS:-}" ]]; then
  # Only here: torch's CUDA build would make a CPU build look for nvcc under CUDA_HOME.
  cuda=${HOROVOD_CUDA_TOOLKIT:-/usr/local/cuda}
  if [[ ! -x "$cuda/bin/nvcc" ]]; then
    echo "build-horovod-wheel: HOROVOD_GPU_OPERATIONS=${HOROVOD_GPU_OPERATIONS} needs a CUDA" \
      "toolkit, but there is no $cuda/bin/nvcc (set HOROVOD_CUDA_TOOLKIT; the image takes" \
      "the toolkit from the CUDA_TOOLKIT_IMAGE build argument)" >&2
    exit 1
  fi
  export HOROVOD_GPU_OPERATIONS HOROVOD_CUDA_HOME="$cuda" CUDA_HOME="$cuda" PATH="$cuda/bin:$PATH"
  if [[ "$HOROVOD_GPU_OPERATIONS" == NCCL && -z "${HOROVOD_NCCL_HOME:-}${HOROVOD_NCCL_INCLUDE:-}" ]]; then
    # torch's own NCCL (it loads libnccl.so.2 before Horovod does), so both use one library.
    nccl=$("$python" -c 'import importlib.util as u; print(u.find_spec("nvidia.nccl").submodule_search_locations[0])')
    mkdir -p "$work/nccl-lib"
    ln -s "$nccl/lib/libnccl.so.2" "$work/nccl-lib/libnccl.so"
    export HOROVOD_NCCL_INCLUDE="$nccl/include" HOROVOD_NCCL_LIB="$work/nccl-lib" \
      HOROVOD_NCCL_LINK=SHARED
  fi
fi

# setup.py runs `make -j8` unless MAKEFLAGS is set; match the cores we have instead.
export MAKEFLAGS="-j${HOROVOD_BUILD_JOBS:-$(nproc)}"

# The build runs without isolation so CMake can import the installed torch; bdist_wheel
# needs the `wheel` package, put on PYTHONPATH for this build only so the target
# environment is left as it was.
"$python" -m pip install --quiet --target "$work/build-tools" "wheel>=0.40"
export PYTHONPATH="$work/build-tools${PYTHONPATH:+:$PYTHONPATH}"

mkdir -p "$outdir"
"$python" -m pip wheel --no-deps --no-build-isolation --wheel-dir "$outdir" "$src"
ls "$outdir"/horovod-"${version}"-*.whl
