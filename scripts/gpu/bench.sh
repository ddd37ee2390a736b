#!/usr/bin/env bash
# gpu/bench.sh: ldtorch's benchmarks on a CUDA GPU.
#
# Builds the C shim against a CUDA libtorch into build-cuda/ ($Torch_DIR or $LIBTORCH when
# set, else the libtorch inside python3's PyTorch wheel: -DLDTORCH_USE_PYTORCH=ON), puts a
# copy of the ldtorch binary in build-cuda/bin/ with that shim in build-cuda/bin/lib/ (the
# binary's RUNPATH tries $ORIGIN/lib first; docs/ARCHITECTURE.md), checks that libtorch sees
# a GPU, and prints one JSON line of `ldtorch bench --device cuda` per method: meta-step
# times and the final evaluation of --eval-models models sequential against batched
# (grouped convolutions on a GPU), with their largest accuracy difference.
#
# Usage: scripts/gpu/bench.sh [STEPS=50] [DATA_DIR=../shared/datasets] [EVAL_STEPS=300]
# A CUDA wheel's CMake config may need the CUDA toolkit (nvcc on PATH or CUDAToolkit_ROOT).
#
# Status: written on a machine without a GPU (none has been lent to ldtorch's tasks so far),
# so it has not been run yet; the CPU path of every command in it is tested.
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=${1:-50} data=${2:-../shared/datasets} eval_steps=${3:-300}

cmake_args=()
if [ -z "${Torch_DIR:-}" ] && [ -z "${LIBTORCH:-}" ]; then
  cmake_args+=(-DLDTORCH_USE_PYTORCH=ON)
fi
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} # Hopper; silences arch detection
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
cmake -S . -B build-cuda -G Ninja "${cmake_args[@]}" >/dev/null
cmake --build build-cuda
mkdir -p build-cuda/bin/lib
# The link needs some libldtorch_shim.so: build-cuda's (build/ may not exist on a GPU box).
CGO_LDFLAGS="-L$PWD/build-cuda ${CGO_LDFLAGS:-}" go build -o build-cuda/bin/ldtorch ./cmd/ldtorch
cp -fP build-cuda/libldtorch_shim.so* build-cuda/bin/lib/

bin=build-cuda/bin/ldtorch
"$bin" version
if ! "$bin" version --json | grep -q '"cuda_available": true'; then
  echo "gpu/bench.sh: the libtorch in build-cuda sees no CUDA device" >&2
  exit 1
fi
for m in ld rr; do
  "$bin" bench --device cuda --method "$m" --dataset mnist --base 100 --steps "$steps" --warmup 5 \
    --batched-eval-steps "$eval_steps" --data-dir "$data"
done
