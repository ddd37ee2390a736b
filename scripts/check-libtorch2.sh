#!/usr/bin/env bash
# check-libtorch2.sh: builds the shim against a libtorch 2.x and runs the test suite on it,
# on this Debian 12 machine, whose own libtorch is 1.13. The 2.x is Debian 13's (libtorch 2.6,
# CPU), fetched with apt-get download into third_party/debian13/ (no root, nothing installed):
# its headers and libraries, and for running them the rest of Debian 13's runtime (glibc,
# libstdc++, oneDNN, OpenBLAS, ...), unpacked side by side. GPU machines carry PyTorch 2.x;
# this is how the shim's compatibility with 2.x is checked where none is.
#
#   1. the shim, at C++17 and C++20 with warnings as errors, against libtorch 2.6;
#   2. a copy of the sources (git's files, untracked ones not ignored included) in
#      build-libtorch2/src, with that shim in its build/; the command built from it as
#      build-libtorch2/ldtorch (for timings beside build/ldtorch), then, unless --build-only,
#      `go test ./...` there. Every Go binary is built with Debian 13's dynamic loader as its
#      interpreter and Debian 13's library folders as its rpath, so it and the test binaries
#      it starts load libtorch 2.6 with Debian 13's glibc, while the system's programs the
#      tests start (go, the C compiler, python3) stay as they are.
#
# --cuda does the same with Debian 13's CUDA build of libtorch 2.6 (contrib) and its CUDA 12.4
# toolkit (non-free), about 2.7 GB of packages, in third_party/debian13-cuda/ and
# build-libtorch2-cuda/: the shim built with CUDA support the way a GPU machine builds it
# (PyTorch's CMake files, nvcc), at C++17, and then, where there is no GPU, checked to say so:
# `ldtorch version` and `--device cuda` report CUDA as unavailable, and the whole suite runs
# on the CPU with libtorch_cuda loaded. Debian cannot ship cuDNN (its package downloads it
# from NVIDIA when installed), so a stand-in library of the same name, whose every function
# fails, lets libtorch_cuda load; nothing calls it without a GPU. Not in CI (the download).
#
# Usage: scripts/check-libtorch2.sh [--cuda] [--build-only] [go test flags, e.g. -run TestX ./torch/...]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
repo=$(pwd)
build_only=0 cuda=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-only) build_only=1; shift ;;
    --cuda) cuda=1; shift ;;
    *) break ;;
  esac
done
if [ "$cuda" = 1 ]; then
  deb=$repo/third_party/debian13-cuda out=$repo/build-libtorch2-cuda components="main contrib non-free"
  runtime=(libtorch-cuda-2.6 nvidia-cuda-toolkit libopenblas0-pthread) dev=(libtorch-cuda-dev libgloo-dev)
  stds=(17)
else
  deb=$repo/third_party/debian13 out=$repo/build-libtorch2 components=main
  runtime=(libtorch2.6 libopenblas0-pthread) dev=(libtorch-dev libgloo-dev)
  stds=(17 20)
fi

# unpacked_cuda_toolkit ROOT STANDIN makes the CUDA toolkit unpacked in ROOT usable where it
# lies: Debian's nvcc reads /etc/nvcc.profile, whose paths are absolute, and PyTorch's and
# CMake's CUDA files look for the toolkit's parts in one folder (bin, include, lib64,
# nvvm/libdevice), which Debian spreads over /usr. It also builds the cuDNN stand-in in STANDIN.
unpacked_cuda_toolkit() {
  local root=$1 standin=$2 tk=$1/usr/lib/nvidia-cuda-toolkit lib=$1/usr/lib/x86_64-linux-gnu f
  rm -f "$tk/bin/nvcc.profile"
  # PATH is appended to (=+): the system's compiler, not Debian 13's, stays the host compiler.
  cat >"$tk/bin/nvcc.profile" <<'EOF'
NVVMIR_LIBRARY_DIR = $(_HERE_)/../nvvm/libdevice
PATH =+ :$(_HERE_):$(_HERE_)/../../../bin:
INCLUDES += "-I$(_HERE_)/../include"
LIBRARIES =+ $(_SPACE_) "-L$(_HERE_)/../lib64/stubs" "-L$(_HERE_)/../lib64"
EOF
  for f in ptxas nvlink fatbinary cuobjdump; do ln -sfn "../../../bin/$f" "$tk/bin/$f"; done
  mkdir -p "$tk/nvvm" "$tk/lib64"
  ln -sfn ../libdevice "$tk/nvvm/libdevice"
  ln -sfn ../../include "$tk/include"
  # lib64 holds the CUDA libraries only: a program CMake builds and runs against them must
  # not find Debian 13's C library there.
  for f in "$lib"/libcu* "$lib"/libnv* "$lib"/libnccl* "$lib"/libnpp* "$lib"/stubs; do
    ln -sfn "$f" "$tk/lib64/$(basename "$f")"
  done
  # The stand-in exports, at libcudnn.so.9's symbol version, every cuDNN function libtorch_cuda
  # imports (it binds all at load), each failing with CUDNN_STATUS_NOT_INITIALIZED.
  mkdir -p "$standin"
  {
    echo "/* cuDNN stand-in made by scripts/check-libtorch2.sh --cuda: every function fails. */"
    nm -D --undefined-only "$lib/libtorch_cuda.so.2.6" | awk '{print $2}' | grep '^cudnn' | sed 's/@.*//' | sort -u \
      | sed 's/.*/int &(void) { return 1; }/'
  } >"$standin/cudnn.c"
  echo 'libcudnn.so.9 { global: *; };' >"$standin/cudnn.map"
  cc -shared -fPIC -o "$standin/libcudnn.so.9" -Wl,-soname,libcudnn.so.9 -Wl,--version-script="$standin/cudnn.map" "$standin/cudnn.c"
}

# ---- Debian 13's libtorch and runtime -------------------------------------------------------
root=$deb/root
if [ ! -f "$root/.complete" ]; then
  rm -rf "$deb"
  mkdir -p "$deb/lists/partial" "$deb/cache/archives/partial" "$deb/debs" "$root"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie $components" >"$deb/sources.list"
  apt=(-o "Dir::Etc::SourceList=$deb/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$deb/lists" -o "Dir::Cache=$deb/cache")
  echo "check-libtorch2.sh: fetching Debian 13's package lists"
  apt-get "${apt[@]}" update -qq || { echo "check-libtorch2.sh: apt-get update of Debian 13 (trixie) failed" >&2; exit 1; }
  # The libraries libtorch needs at run time, with glibc and libstdc++ (essential packages
  # such as bash and coreutils are the system's own and not needed).
  mapfile -t pkgs < <(apt-cache "${apt[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
    --no-breaks --no-replaces --no-enhances --no-pre-depends "${runtime[@]}" \
    | grep -v '^[ <]' | grep -vxE 'debconf|perl-base|dpkg|bash|coreutils|base-files|tar|sed|grep|gzip' | sort -u)
  (cd "$deb/debs" && apt-get "${apt[@]}" download -qq "${dev[@]}" "${pkgs[@]}" 2>&1 | grep -v "unsandboxed" >&2 || true)
  n=$(ls "$deb/debs"/*.deb | wc -l)
  [ "$n" -ge $((${#pkgs[@]} + ${#dev[@]})) ] || { echo "check-libtorch2.sh: only $n packages downloaded of $((${#pkgs[@]} + ${#dev[@]}))" >&2; exit 1; }
  for f in "$deb/debs"/*.deb; do
    # The C library's and the compilers' headers (the CUDA toolkit brings GCC along) would
    # shadow the system's for the system's compiler: they are not unpacked.
    case "$(basename "$f")" in libc6-dev_*|linux-libc-dev_*|libcrypt-dev_*|libstdc++-*-dev_*|libgcc-*-dev_*) continue ;; esac
    dpkg-deb -x "$f" "$root"
  done
  if [ "$cuda" = 1 ]; then unpacked_cuda_toolkit "$root" "$deb/cudnn-stand-in"; fi
  touch "$root/.complete"
  echo "check-libtorch2.sh: $n packages unpacked into $root ($(du -sh "$root" | cut -f1))"
fi
lib=$root/usr/lib/x86_64-linux-gnu
loader=$lib/ld-linux-x86-64.so.2
[ -x "$loader" ] || { echo "check-libtorch2.sh: no dynamic loader at $loader" >&2; exit 1; }
torch_dir=$lib/cmake/Torch
# The folders Debian 13's libraries load from: its own, and with --cuda /usr/lib (Gloo's CUDA
# build lies there) and the cuDNN stand-in.
libdirs=("$lib" "$lib/openblas-pthread")
cmake_cuda=()
if [ "$cuda" = 1 ]; then
  libdirs+=("$root/usr/lib" "$deb/cudnn-stand-in")
  tk=$root/usr/lib/nvidia-cuda-toolkit
  cmake_cuda=(-DCUDA_TOOLKIT_ROOT_DIR="$tk" -DCMAKE_CUDA_COMPILER="$tk/bin/nvcc"
    -DCMAKE_CUDA_HOST_COMPILER="$(command -v c++)" -DTORCH_CUDA_ARCH_LIST=9.0)
fi

# ---- 1. the shim ----------------------------------------------------------------------------
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
mkdir -p "$out"
# CMAKE_PREFIX_PATH makes Torch's CMake files find Debian 13's libraries before the system's
# 1.13 of the same names; the shim's rpath (DT_RPATH, which also serves the libraries it
# loads) names Debian 13's folders, so that they load with Debian 13's glibc. Programs are
# the system's: Debian 13's readelf (the CUDA toolkit brings binutils along) would not run
# here, and the shim would lose OpenMP for want of reading libtorch's needs.
for std in "${stds[@]}"; do
  # A CMake cache made otherwise keeps the libraries it found: start afresh then.
  grep -qsF "CMAKE_PREFIX_PATH:UNINITIALIZED=$root/usr" "$out/std$std/CMakeCache.txt" || rm -rf "$out/std$std"
  cmake -S . -B "$out/std$std" -G Ninja -DTorch_DIR="$torch_dir" -DCMAKE_PREFIX_PATH="$root/usr" \
    -DCMAKE_CXX_STANDARD="$std" -DLDTORCH_WERROR=ON -DCMAKE_SHARED_LINKER_FLAGS=-Wl,--disable-new-dtags \
    "-DCMAKE_BUILD_RPATH=$(IFS=';'; echo "${libdirs[*]}")" "${cmake_cuda[@]}" \
    -DLDTORCH_READELF="$(command -v readelf)" \
    >"$out/std$std.configure.log" 2>&1 || { tail -30 "$out/std$std.configure.log" >&2; exit 1; }
  grep -q "ldtorch: libtorch 2\." "$out/std$std.configure.log" \
    || { echo "check-libtorch2.sh: CMake did not take libtorch 2.x ($out/std$std.configure.log)" >&2; exit 1; }
  cmake --build "$out/std$std" >"$out/std$std.build.log" 2>&1 || { grep -E "error|Error" "$out/std$std.build.log" | head -30 >&2; exit 1; }
  readelf -d "$out/std$std/libldtorch_shim.so.1" | grep -q "libc10.so.2\." \
    || { echo "check-libtorch2.sh: the shim links another libc10 than 2.x: $(readelf -d "$out/std$std/libldtorch_shim.so.1" | grep libc10)" >&2; exit 1; }
  if [ "$cuda" = 1 ]; then
    grep -q "ldtorch: CUDA support on" "$out/std$std.configure.log" \
      || { echo "check-libtorch2.sh: CMake did not turn the shim's CUDA support on ($out/std$std.configure.log)" >&2; exit 1; }
    readelf -d "$out/std$std/libldtorch_shim.so.1" | grep -q "libtorch_cuda.so" \
      || { echo "check-libtorch2.sh: the shim does not link libtorch_cuda" >&2; exit 1; }
  fi
  echo "check-libtorch2.sh: shim built against $(grep -o "libtorch 2\.[0-9.]*" "$out/std$std.configure.log" | head -1) at C++$std with -Werror"
done

# ---- 2. the command and the tests -----------------------------------------------------------
src=$out/src
rm -rf "$src"
mkdir -p "$src/build"
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$src"
cp -P "$out"/std17/libldtorch_shim.so* "$out"/std17/libldtorch_atentest.so "$src/build/"
# The tests find the shared datasets at ../shared from the repository's root.
[ -d ../shared ] && ln -sfn "$(cd ../shared && pwd)" "$out/shared"
# Every Go binary (the test binaries and the ldtorch the command's tests build) is linked
# with Debian 13's loader and library folders (DT_RPATH, which covers libtorch's own needs).
rpath=$(IFS=:; echo "${libdirs[*]}")
# The system's linker cannot check Debian 13's libraries against the system's glibc: it
# leaves their symbols to the loader (--allow-shlib-undefined).
export GOFLAGS="'-ldflags=-I=$loader -r=$rpath -extldflags=-Wl,--disable-new-dtags,--allow-shlib-undefined'"
cd "$src"
go build -o "$out/ldtorch" ./cmd/ldtorch
# (Read once: grep -q leaving a pipe early would fail the pipeline under pipefail.)
version=$("$out/ldtorch" version)
sed 's/^/check-libtorch2.sh: /' <<<"$version"
grep -q "^libtorch *2\." <<<"$version" || { echo "check-libtorch2.sh: the test build does not load libtorch 2.x" >&2; exit 1; }
if [ "$cuda" = 1 ]; then
  grep -q "cuda=on" <<<"$version" || { echo "check-libtorch2.sh: the shim in use was built without CUDA" >&2; exit 1; }
  if nvidia-smi -L >/dev/null 2>&1; then
    # The cuDNN stand-in cannot run a GPU's convolutions: there, scripts/gpu/run.sh tests.
    echo "check-libtorch2.sh: a GPU is here: the shim is built; the suite is not run against the cuDNN stand-in (use scripts/gpu/run.sh)"
    exit 0
  else
    # No GPU here: both the report and a command that asks for one must say so.
    grep -q "^CUDA *not available" <<<"$version" || { echo "check-libtorch2.sh: ldtorch version does not say CUDA is unavailable" >&2; exit 1; }
    said=$("$out/ldtorch" bench --device cuda --method rr --dataset mnist --base 10 --steps 1 2>&1) && { echo "check-libtorch2.sh: bench --device cuda ran without a GPU" >&2; exit 1; }
    grep -q "CUDA is not available" <<<"$said" || { echo "check-libtorch2.sh: bench --device cuda without a GPU said: $said" >&2; exit 1; }
    echo "check-libtorch2.sh: without a GPU: $said"
  fi
fi
[ "$build_only" = 1 ] && exit 0
. "$repo/scripts/testenv.sh" "$out/ldtorch"
if [ $# -eq 0 ]; then set -- ./...; fi
go test -count=1 -timeout 25m -p 3 -vet=off "$@"
