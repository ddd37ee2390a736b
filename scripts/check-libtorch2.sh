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
# Usage: scripts/check-libtorch2.sh [--build-only] [go test flags, e.g. -run TestX ./torch/...]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
repo=$(pwd)
build_only=0
if [ "${1:-}" = --build-only ]; then build_only=1; shift; fi

# ---- Debian 13's libtorch and runtime -------------------------------------------------------
deb=$repo/third_party/debian13
root=$deb/root
if [ ! -f "$root/.complete" ]; then
  rm -rf "$deb"
  mkdir -p "$deb/lists/partial" "$deb/cache/archives/partial" "$deb/debs" "$root"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" >"$deb/sources.list"
  apt=(-o "Dir::Etc::SourceList=$deb/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$deb/lists" -o "Dir::Cache=$deb/cache")
  echo "check-libtorch2.sh: fetching Debian 13's package lists"
  apt-get "${apt[@]}" update -qq || { echo "check-libtorch2.sh: apt-get update of Debian 13 (trixie) failed" >&2; exit 1; }
  # The libraries libtorch needs at run time, with glibc and libstdc++ (essential packages
  # such as bash and coreutils are the system's own and not needed).
  mapfile -t pkgs < <(apt-cache "${apt[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
    --no-breaks --no-replaces --no-enhances --no-pre-depends libtorch2.6 libopenblas0-pthread \
    | grep -v '^[ <]' | grep -vxE 'debconf|perl-base|dpkg|bash|coreutils|base-files|tar|sed|grep|gzip' | sort -u)
  (cd "$deb/debs" && apt-get "${apt[@]}" download -qq libtorch-dev libgloo-dev "${pkgs[@]}" 2>&1 | grep -v "unsandboxed" >&2 || true)
  n=$(ls "$deb/debs"/*.deb | wc -l)
  [ "$n" -ge $((${#pkgs[@]} + 2)) ] || { echo "check-libtorch2.sh: only $n packages downloaded of $((${#pkgs[@]} + 2))" >&2; exit 1; }
  for f in "$deb/debs"/*.deb; do dpkg-deb -x "$f" "$root"; done
  touch "$root/.complete"
  echo "check-libtorch2.sh: $n packages unpacked into $root ($(du -sh "$root" | cut -f1))"
fi
lib=$root/usr/lib/x86_64-linux-gnu
loader=$lib/ld-linux-x86-64.so.2
[ -x "$loader" ] || { echo "check-libtorch2.sh: no dynamic loader at $loader" >&2; exit 1; }
torch_dir=$lib/cmake/Torch

# ---- 1. the shim ----------------------------------------------------------------------------
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
out=$repo/build-libtorch2
mkdir -p "$out"
# CMAKE_PREFIX_PATH makes Torch's CMake files find Debian 13's libraries before the system's
# 1.13 of the same names; the shim's rpath (DT_RPATH, which also serves the libraries it
# loads) names Debian 13's folders, so that they load with Debian 13's glibc.
for std in 17 20; do
  # A CMake cache made otherwise keeps the libraries it found: start afresh then.
  grep -qsF "CMAKE_PREFIX_PATH:UNINITIALIZED=$root/usr" "$out/std$std/CMakeCache.txt" || rm -rf "$out/std$std"
  cmake -S . -B "$out/std$std" -G Ninja -DTorch_DIR="$torch_dir" -DCMAKE_PREFIX_PATH="$root/usr" \
    -DCMAKE_CXX_STANDARD="$std" -DLDTORCH_WERROR=ON -DCMAKE_SHARED_LINKER_FLAGS=-Wl,--disable-new-dtags \
    "-DCMAKE_BUILD_RPATH=$lib;$lib/openblas-pthread" \
    >"$out/std$std.configure.log" 2>&1 || { tail -30 "$out/std$std.configure.log" >&2; exit 1; }
  grep -q "ldtorch: libtorch 2\." "$out/std$std.configure.log" \
    || { echo "check-libtorch2.sh: CMake did not take libtorch 2.x ($out/std$std.configure.log)" >&2; exit 1; }
  cmake --build "$out/std$std" >"$out/std$std.build.log" 2>&1 || { grep -E "error|Error" "$out/std$std.build.log" | head -30 >&2; exit 1; }
  readelf -d "$out/std$std/libldtorch_shim.so.1" | grep -q "libc10.so.2\." \
    || { echo "check-libtorch2.sh: the shim links another libc10 than 2.x: $(readelf -d "$out/std$std/libldtorch_shim.so.1" | grep libc10)" >&2; exit 1; }
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
rpath=$lib:$lib/openblas-pthread
# The system's linker cannot check Debian 13's libraries against the system's glibc: it
# leaves their symbols to the loader (--allow-shlib-undefined).
export GOFLAGS="'-ldflags=-I=$loader -r=$rpath -extldflags=-Wl,--disable-new-dtags,--allow-shlib-undefined'"
cd "$src"
go build -o "$out/ldtorch" ./cmd/ldtorch
"$out/ldtorch" version | sed 's/^/check-libtorch2.sh: /'
"$out/ldtorch" version | grep -q "^libtorch *2\." || { echo "check-libtorch2.sh: the test build does not load libtorch 2.x" >&2; exit 1; }
[ "$build_only" = 1 ] && exit 0
. "$repo/scripts/testenv.sh" "$out/ldtorch"
if [ $# -eq 0 ]; then set -- ./...; fi
go test -count=1 -timeout 25m -p 3 -vet=off "$@"
