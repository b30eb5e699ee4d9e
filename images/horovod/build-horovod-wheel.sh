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
# plus MPI when an MPI compiler wrapper is on PATH. The image adds
# HOROVOD_GPU_OPERATIONS=NCCL.
set -euo pipefail

python=${1:?usage: build-horovod-wheel.sh PYTHON OUTDIR}
outdir=${2:?usage: build-horovod-wheel.sh PYTHON OUTDIR}
version=${HOROVOD_VERSION:-0.28.1}

work=$(mktemp -d "${TMPDIR:-/tmp}/horovod-build.XXXXXX")
trap 'rm -rf "$work"' EXIT

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
