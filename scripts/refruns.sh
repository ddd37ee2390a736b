#!/usr/bin/env bash
# refruns.sh: the reference runs that a change meant to keep behaviour must leave unchanged:
# tiny LD and LD RR runs with every baseline, learnt images, method dd, evaluate, a study,
# gradvar, a two-rank run, a sweep cell, and a resume of checkpoints written by another
# binary. Run it with the binary before a change and the binary after, then compare:
#
#   bash scripts/refruns.sh run BINARY OUT [CHECKPOINTS_FROM]
#   bash scripts/refruns.sh compare OUT_A OUT_B
#
# `run` writes OUT/<name>/ for each run; with CHECKPOINTS_FROM (an earlier OUT) it also
# resumes that OUT's interrupted run from its checkpoint into OUT/resumed. `compare` checks
# every distilled.npz and distilled.pt byte for byte, each checkpoint member by member, and
# every JSON file (report, history, phases, studies, gradvar) with the fields that measure
# time or name a folder removed; it prints each difference and exits 1 if there is one. Bit-identical results hold on one CPU kind and BLAS
# with one thread, as here (--threads 1); MNIST comes from ../shared/datasets.
set -euo pipefail
cd "$(dirname "$0")/.."
data=${LDTORCH_REF_DATA:-../shared/datasets}

run() {
  local bin=$1 out=$2 from=${3:-}
  mkdir -p "$out"
  local common=(--dataset mnist --base 20 --epochs 3 --eval-models 2 --seed 7 --threads 1 --data-dir "$data" --quiet)
  "$bin" distill "${common[@]}" --method ld --baselines true,smooth,teacher --teacher-steps 50 --out "$out/ld"
  "$bin" distill "${common[@]}" --method rr --baselines true,smooth,teacher --teacher-steps 50 --out "$out/rr"
  "$bin" distill "${common[@]}" --method rr --learn images --baselines none --out "$out/rr-images"
  "$bin" distill "${common[@]}" --method ld --learn both --baselines none --out "$out/ld-both"
  "$bin" distill --dataset mnist --base 10 --method dd --dd-steps 1 --dd-epochs 2 --epochs 2 --eval-models 2 --seed 7 \
    --baselines none --threads 1 --data-dir "$data" --quiet --out "$out/dd"
  "$bin" evaluate --distilled "$out/rr" --models 2 --threads 1 --data-dir "$data" --quiet > "$out/rr-evaluate.txt"
  "$bin" study steps --distilled "$out/ld" --deltas=-10,0,10 --models 2 --threads 1 --data-dir "$data" --quiet > /dev/null
  "$bin" gradvar "$out/rr" --models 2 --threads 1 --data-dir "$data" --quiet > /dev/null
  "$bin" distill "${common[@]}" --method rr --baselines none --nproc 2 --out "$out/rr-2ranks"
  cat > "$out/grid.json" <<EOF
{"title": "reference cell", "config": {"dataset": "mnist", "epochs": 2, "eval_models": 2, "seed": 7, "baselines": []},
 "rows": [{"label": "LD RR", "set": {"method": "rr"}}],
 "columns": {"key": "base_examples", "values": [10]}}
EOF
  "$bin" sweep --grid "$out/grid.json" --out "$out/sweep" --threads 1 --data-dir "$data" --quiet > /dev/null
  # An interrupted run: stopped by its epoch budget after checkpointing, continued below by
  # the next binary from this checkpoint.
  "$bin" distill "${common[@]}" --method rr --baselines none --checkpoint-every 10 --out "$out/interrupted" \
    --epochs 2
  if [ -n "$from" ]; then
    rm -rf "$out/resumed"
    cp -r "$from/interrupted" "$out/resumed"
    "$bin" distill --resume "$out/resumed" --epochs 3 --threads 1 --data-dir "$data" --quiet
  fi
}

# same A B: whether two files hold the same results. JSON and JSON lines are compared with
# the fields that measure time or name a folder removed; a checkpoint (a sealed .npz) member
# by member, its meta likewise; anything else byte for byte.
same() {
  /usr/bin/python3 - "$1" "$2" "$3" "$4" <<'EOF'
import json, sys, zipfile
ROOTS = [r for r in sys.argv[3:] if r]
TIME = {"wall_seconds", "distill_seconds", "seconds_per_meta_step", "seconds", "duration",
        "written", "out", "artifact", "data_dir", "took", "total_seconds"}
def clean(v):
    if isinstance(v, dict):
        return {k: clean(x) for k, x in v.items() if k not in TIME and not k.endswith("_seconds")}
    if isinstance(v, list):
        return [clean(x) for x in v]
    if isinstance(v, str):
        for r in ROOTS:  # the two folders compared are named in messages and settings
            v = v.replace(r, "<out>")
        return "<path>" if v.startswith("/") else v
    return v
def load(path):
    if path.endswith(".jsonl"):
        return [clean(json.loads(l)) for l in open(path)]
    if path.endswith(".json"):
        return clean(json.load(open(path)))
    if path.endswith(".npz") and "/checkpoints/" in path:
        z = zipfile.ZipFile(path)
        out = {}
        for n in z.namelist():
            b = z.read(n)
            if n == "meta.npy":  # JSON bytes after the .npy header (version 1: its length at 8)
                start = 10 + int.from_bytes(b[8:10], "little")
                b = json.dumps(clean(json.loads(b[start:])), sort_keys=True)
            elif n == "sha256.npy":
                continue  # the seal covers the meta, whose time stamp differs
            out[n] = b
        return out
    return open(path, "rb").read()
sys.exit(0 if load(sys.argv[1]) == load(sys.argv[2]) else 1)
EOF
}

compare() {
  local a=$1 b=$2 bad=0 n=0
  while IFS= read -r f; do
    n=$((n + 1))
    if [ ! -e "$b/$f" ]; then echo "only in $a: $f"; bad=1; continue; fi
    if ! same "$a/$f" "$b/$f" "$(cd "$a" && pwd)" "$(cd "$b" && pwd)"; then echo "differs: $f"; bad=1; fi
  done < <(cd "$a" && find . -type f \( -name '*.npz' -o -name '*.pt' -o -name '*.json' -o -name '*.jsonl' \) \
             ! -path '*/progress/*' ! -name 'grid.json' ! -name 'models.json' | sort)
  echo "compared $n files of $a and $b: $([ $bad = 0 ] && echo identical || echo DIFFERENT)"
  return $bad
}

case "${1:-}" in
  run) shift; run "$@" ;;
  compare) shift; compare "$@" ;;
  *) echo "usage: $0 run BINARY OUT [CHECKPOINTS_FROM] | compare OUT_A OUT_B" >&2; exit 2 ;;
esac
