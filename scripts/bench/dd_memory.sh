#!/usr/bin/env bash
# dd_memory.sh: peak memory (maximum resident set size, /usr/bin/time -v) of method dd on
# MNIST against the number of unrolled steps T = dd_steps × dd_epochs, for both backward
# passes: recompute (each step's graph rebuilt in the backward pass) and graph (every step's
# graph kept, as Wang et al.'s code). Each run: N = 100 images, 10 per step, the full
# target set (N_o 1024) cut to 2048 examples (2 meta-steps), one validation, one test model,
# no baselines, one thread; the run's seconds per meta-step come from its report.json.
# Usage: scripts/bench/dd_memory.sh [EPOCHS...]   (dd_epochs values; default 3 15 60)
set -euo pipefail
cd "$(dirname "$0")/../.."
data=${LDTORCH_BENCH_DATA:-../shared/datasets}
epochs=("$@")
[ ${#epochs[@]} -gt 0 ] || epochs=(3 15 60)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { # label, then distill flags
  local label=$1
  shift
  OMP_NUM_THREADS=1 /usr/bin/time -v ./build/ldtorch distill --dataset mnist --data-dir "$data" --base 100 \
    --epochs 1 --target-set-size 2048 --eval-models 1 --baselines none --threads 1 \
    --quiet --overwrite --out "$tmp/out" "$@" >/dev/null 2>"$tmp/time" || { cat "$tmp/time" >&2; return 1; }
  local rss sps
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tmp/time")
  sps=$(python3 -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["seconds_per_meta_step"])' "$tmp/out/report.json")
  printf '%-28s %8.0f MiB   %6s s per meta-step\n' "$label" "$(echo "$rss / 1024" | bc -l)" "$sps"
}
echo "load before: $(uptime)"
run "method ld (no unrolling)" --method ld
for e in "${epochs[@]}"; do
  for b in recompute graph; do
    run "dd T=$((10 * e)) $b" --method dd --dd-epochs "$e" --dd-backward "$b"
  done
done
echo "load after: $(uptime)"
