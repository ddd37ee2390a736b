#!/usr/bin/env bash
# compare.sh: ldtorch against the plain PyTorch mirror of the same meta-iteration
# (scripts/bench/mirror.py), on this machine, interleaved round by round so all see the same
# load. The mirror runs twice per round: as PyTorch runs by default ("mirror"), and with the
# glibc malloc settings that ldtorch's CLI applies to itself ("mirror-tuned", the equally
# tuned comparison). Prints one JSON line per run and a summary of medians and ratios (wall
# and thread-CPU time; CPU time is the robust one on a shared machine).
# Usage: scripts/bench/compare.sh [ROUNDS=3] [STEPS=20] [THREADS=1]   (run scripts/setup.sh --bench first)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3} steps=${2:-20} threads=${3:-1}
data=${LDTORCH_BENCH_DATA:-../shared/datasets}
export OMP_NUM_THREADS=$threads OMP_WAIT_POLICY=passive
# The mirror gets the OpenBLAS kernel set ldtorch chooses for itself (cmd/ldtorch/blas.go):
# where OpenBLAS does not know the CPU it falls back to generic kernels (matrix products several
# times slower), and the two would not run the same code.
core=$(./build/ldtorch version --json | sed -n 's/.*"blas_core": *"\([^"]*\)".*/\1/p')
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -n "$core" ]; then export OPENBLAS_CORETYPE=$core; fi
# The settings cmd/ldtorch/malloc.go applies (ldtorch sets them itself unless LDTORCH_MALLOC=off).
tuned=(MALLOC_ARENA_MAX=1 MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=1073741824 MALLOC_TOP_PAD_=268435456)
out=$(mktemp)
for r in $(seq "$rounds"); do
  for m in ld rr; do
    ./build/ldtorch bench --method "$m" --dataset mnist --base 100 --steps "$steps" --warmup 3 --threads "$threads" --data-dir "$data" | tee -a "$out"
    mirror=(/usr/bin/python3 scripts/bench/mirror.py --method "$m" --steps "$steps" --warmup 3 --threads "$threads" --data-dir "$data/mnist" --json)
    "${mirror[@]}" | tee -a "$out"
    env "${tuned[@]}" "${mirror[@]}" | tee -a "$out"
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def med(impl, m, k):
    v = [r[k] for r in rows if r["impl"] == impl and r["method"] == m and k in r]
    return statistics.median(v) if v else float("nan")
print("\nmethod  metric                   ldtorch     mirror  ratio   mirror-tuned  ratio")
for m in ("ld", "rr"):
    for k in ("meta_step_median_s", "meta_step_cpu_median_s", "eval_step_median_s", "eval_step_cpu_median_s"):
        a, b, c = med("ldtorch", m, k), med("pytorch-mirror", m, k), med("pytorch-mirror-tuned", m, k)
        print(f"{m:6s}  {k:24s} {a:9.4f}  {b:9.4f}  {a/b:5.2f}x  {c:9.4f}     {a/c:5.2f}x")
PY
rm -f "$out"
