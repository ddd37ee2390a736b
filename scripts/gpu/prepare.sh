#!/usr/bin/env bash
# gpu/prepare.sh: packs what a GPU machine without Go needs into the git-ignored .gpu/
# (at most 60 MiB, checked), for scripts/gpu/run.sh to use there:
#
#   .gpu/bin/ldtorch.xz                 the command (stripped, xz-compressed) and the test
#   .gpu/bin/{torch,nets,nets-augment,labeldistill-engine,labeldistill-train}.test.xz
#                                       binaries (nets-augment: the package nets/augment,
#                                       labeldistill-engine labeldistill/engine, where the
#                                       algorithm's device tests are; labeldistill-train
#                                       labeldistill/train); run.sh
#                                       unpacks them and puts the shim it builds beside
#                                       them in .gpu/bin/lib/ (their RUNPATH looks in
#                                       $ORIGIN/lib first)
#   .gpu/work/<pkg>/                    the test binaries' working folders: what the tests
#   .gpu/work/{testdata,docs,torch/csrc}  read relative to their package (golden fixtures,
#                                         docs/ARTIFACT.md, the shim's sources)
#   .gpu/shared/datasets/<name>/        = ../../shared/datasets from work/<pkg>
#   .gpu/MANIFEST                       what was packed, from which commit, sha256 of each file
#
# Datasets (--datasets, default mnist,cifar10: what the tests, the benchmarks and the MNIST and
# CIFAR-10 protocols read, 30 MB): mnist, cifar10, kmnist and fashion-mnist are copied whole
# (11, 19, 5 and 30 MB). CIFAR-100's shared copy
# (train-first100perclass.bin.gz + test.bin.gz, 54 MB) does not fit beside them, so `cifar100`
# packs a class-balanced subset: the first 40 train and the first 20 test images of every
# class, in file order (4,000 + 2,000 images, about 17 MB), as cifar100/train.bin.gz and
# cifar100/test.bin.gz (the loader's "binary" layout). Their checksums are not in the
# registry: runs on them need --allow-unknown-data, record the files' sha256 and carry the
# loader's warnings ("train set has 4000 images, the binary layout has 50000") in
# report.json; results on it are on a subset and say so (docs/RESULTS.md).
#
# The bundle travels with the source tree (5 MB) and, to continue cut runs on a fresh machine,
# a run.sh --pack archive: its 60 MiB budget (checked below) leaves room for both on a 64 MiB
# transfer only with the default datasets.
#
# Usage: scripts/gpu/prepare.sh [--data-dir DIR (default ../shared/datasets)] [--out DIR (default .gpu)]
#          [--datasets NAME[,NAME...] (mnist, cifar10, cifar100, kmnist, fashion-mnist; default mnist,cifar10)]
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
data=../shared/datasets out=.gpu datasets=mnist,cifar10
while [ $# -gt 0 ]; do
  case "$1" in
    --data-dir) data=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --datasets) datasets=$2; shift 2 ;;
    *) echo "prepare.sh: unknown argument $1 (known: --data-dir DIR, --out DIR, --datasets LIST)" >&2; exit 2 ;;
  esac
done
budget=$((60 * 1024 * 1024))
IFS=, read -ra names <<<"$datasets"
[ "${#names[@]}" -gt 0 ] || { echo "prepare.sh: --datasets is empty" >&2; exit 2; }
for d in "${names[@]}"; do
  case "$d" in
    mnist|cifar10|cifar100|kmnist|fashion-mnist) ;;
    *) echo "prepare.sh: --datasets: unknown dataset $d (mnist, cifar10, cifar100, kmnist, fashion-mnist)" >&2; exit 2 ;;
  esac
  [ -d "$data/$d" ] || { echo "prepare.sh: $data/$d not found (--data-dir; ldtorch data fetch $d)" >&2; exit 1; }
done
command -v go >/dev/null || { echo "prepare.sh: needs Go (it runs where Go is; run.sh does not)" >&2; exit 1; }

# The binaries link the shim in build/ (any libtorch: run.sh rebuilds the shim there).
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
[ -f build/build.ninja ] || cmake -S . -B build -G Ninja >/dev/null
cmake --build build >/dev/null

rm -rf "$out"
mkdir -p "$out/bin" "$out/work" "$out/shared/datasets"
flags=(-trimpath -ldflags=-s\ -w)
go build "${flags[@]}" -o "$out/bin/ldtorch" ./cmd/ldtorch
for pkg in torch nets nets/augment labeldistill/engine labeldistill/train; do
  go test -c "${flags[@]}" -o "$out/bin/${pkg//\//-}.test" "./$pkg"
  mkdir -p "$out/work/$pkg"
done
# Compressed to fit the budget (about a third of their size); run.sh unpacks them with python3's lzma.
xz -9 -f "$out"/bin/*
# What the tests read relative to their package folder.
mkdir -p "$out/work/docs" "$out/work/torch/csrc"
cp -r testdata "$out/work/"
cp docs/ARTIFACT.md "$out/work/docs/" 2>/dev/null || true
cp torch/csrc/*.cc torch/csrc/*.h "$out/work/torch/csrc/"

# Datasets.
for d in "${names[@]}"; do
  [ "$d" = cifar100 ] || cp -rL "$data/$d" "$out/shared/datasets/"
done
chmod -R u+w "$out/shared/datasets"
if [[ ",$datasets," == *,cifar100,* ]]; then
  mkdir -p "$out/shared/datasets/cifar100"
  cp "$data"/cifar100/*.txt "$out/shared/datasets/cifar100/"
  python3 - "$data/cifar100" "$out/shared/datasets/cifar100" <<'PY'
# A class-balanced prefix of each CIFAR-100 binary file: records are 2 label bytes (coarse,
# fine) and 3072 pixel bytes; the first `keep` records of every fine class, in file order.
import gzip, sys
src, dst = sys.argv[1], sys.argv[2]
for name, out, keep in (("train-first100perclass.bin.gz", "train.bin.gz", 40), ("test.bin.gz", "test.bin.gz", 20)):
    raw = gzip.open(f"{src}/{name}", "rb").read()
    rec = 2 + 3072
    assert len(raw) % rec == 0, name
    seen, kept = {}, []
    for i in range(0, len(raw), rec):
        fine = raw[i + 1]
        if seen.get(fine, 0) < keep:
            seen[fine] = seen.get(fine, 0) + 1
            kept.append(raw[i:i + rec])
    assert len(seen) == 100 and all(v == keep for v in seen.values()), (name, len(seen))
    with open(f"{dst}/{out}", "wb") as f:
        f.write(gzip.compress(b"".join(kept), compresslevel=9, mtime=0))
    print(f"prepare.sh: cifar100/{out}: {len(kept)} images ({keep} per class) from {name}")
PY

fi
{
  echo "ldtorch GPU bundle, $(git describe --always --dirty 2>/dev/null || echo unknown), packed $(date -u +%FT%TZ)"
  (cd "$out" && find . -type f ! -name MANIFEST -printf '%P\n' | sort | xargs sha256sum)
} > "$out/MANIFEST"
size=$(du -sb "$out" | cut -f1)
echo "prepare.sh: $out holds $(numfmt --to=iec "$size") (budget 60 MiB):"
du -sh "$out"/bin "$out"/work "$out"/shared/datasets/* | sed 's/^/  /'
if [ "$size" -gt "$budget" ]; then
  echo "prepare.sh: $out is over the 60 MiB budget" >&2
  exit 1
fi
