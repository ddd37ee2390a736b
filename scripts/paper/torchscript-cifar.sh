#!/usr/bin/env bash
# torchscript-cifar.sh [OUT]: CIFAR-10, 100 base images, LD RR through a network nobody wrote
# in Go (torchvision's ResNet-18 with a CIFAR stem, exported as TorchScript), and the paper's
# cross-architecture check on it: the labels learnt through ResNet-18 evaluated with
# AlexCifarNet, and AlexCifarNet's labels (a distill of the same shape) evaluated on the
# ResNet-18 file. Issue 66; docs/ARCHITECTURE.md ("Networks from TorchScript files").
#
# SHORTENED to run on one CPU core in about an hour (the paper: 400 epochs of 44 meta-steps
# at N_o = 1024, i.e. 17,600 meta-steps, and 20 test models; a ResNet-18 meta-step at
# N_o = 128 takes 3.1 s of CPU here, so the paper's run would take some 15 hours of meta-steps
# alone at that batch):
#   - 128 meta-steps: N_o = 128 target images per meta-step (the paper 1024) over a target
#     set cut to 16,384 images (--target-set-size), one epoch;
#   - no model resets (--reset-window 1000, more than the run's meta-steps), so the fresh
#     models' T is the 128 meta-steps taken;
#   - one validation (after the only epoch), on 1,000 validation images (--validation-size;
#     default 5,000);
#   - 3 fresh test models per distillation and per cross evaluation (the paper 20);
#   - no baselines (their step search trains up to 1,000-step ResNet-18s).
# Both distillations use the same seed, data split and base images (the same flags but
# --arch), so each cross evaluation trains on the other network's labels of the same images.
#
# Time (measured with `ldtorch bench ... --threads 1` on a 2-vCPU AMD EPYC family 25 model 17,
# CPU time of the one libtorch thread): ResNet-18 LD RR meta-step at N_o 128 3.08 s; fresh
# ResNet-18 training step (batch 50) 1.72 s; scoring the 10,000 test images with one ResNet-18
# 96.5 s; AlexCifarNet 0.22 s, 0.108 s and 6.7 s. So: ResNet-18 distill 128 × 3.08 + one
# validation (128 × 1.72 + 10) + 3 test models × (128 × 1.72 + 96.5) ≈ 1,580 s; AlexCifarNet
# distill ≈ 110 s; ResNet-18 labels on AlexCifarNet (3 models) ≈ 65 s; AlexCifarNet labels on
# ResNet-18 (3 models) ≈ 950 s; loading CIFAR-10 (JPEG) in each of the 4 processes and the
# export ≈ 100 s: about 2,800 s of CPU, 47 minutes (more wall time on a shared machine).
#
# Needs: build/ldtorch (scripts/setup.sh), /usr/bin/python3 with torch and torchvision
# (Debian 12: python3-torch, python3-torchvision) for the export, and CIFAR-10 in the data
# folder (../shared/datasets holds its JPEG re-encoding, which ldtorch reads with a warning
# in each report; `ldtorch data fetch cifar10` fetches the binaries). Run it again to go on:
# steps whose results exist are skipped. Results: OUT/summary.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/torchscript-cifar}
LDTORCH=${LDTORCH:-build/ldtorch}
DATA=${DATA_DIR:-../shared/datasets}
PY=${PYTHON:-/usr/bin/python3}
export OMP_NUM_THREADS=1
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd) # absolute: the artifacts record the network file's path as given
NET=$OUT/resnet18.pt

if [ ! -s "$NET" ]; then
  "$PY" scripts/export_torchscript.py --resnet18 --channels 3 --size 32 --classes 10 --seed 0 --out "$NET"
fi

# the shortened LD RR of the header, the same for both networks but --arch
shape=(--data-dir "$DATA" --dataset cifar10 --method rr --base 100 --seed 1234
  --outer-batch 128 --target-set-size 16384 --epochs 1 --validate-every 1
  --reset-window 1000 --validation-size 1000 --eval-models 3 --baselines none
  --threads 1 --report)

distill() { # distill DIR ARCH
  if [ -s "$1/report.json" ]; then
    echo "$1: done"
  elif [ -d "$1/checkpoints" ]; then
    "$LDTORCH" distill --resume "$1" --threads 1
  else
    "$LDTORCH" distill "${shape[@]}" --arch "$2" --out "$1"
  fi
}

evaluate() { # evaluate ARTIFACT ARCH RESULT.json
  if [ -s "$3" ]; then
    echo "$3: done"
  else
    "$LDTORCH" evaluate --distilled "$1" --arch "$2" --models 3 --threads 1 --json >"$3.part"
    mv "$3.part" "$3"
  fi
}

distill "$OUT/resnet18" "torchscript:$NET"
distill "$OUT/alexcifarnet" alexnet
evaluate "$OUT/resnet18" alexnet "$OUT/resnet18-labels-on-alexcifarnet.json"
evaluate "$OUT/alexcifarnet" "torchscript:$NET" "$OUT/alexcifarnet-labels-on-resnet18.json"

"$PY" - "$OUT" <<'EOF'
import json, sys
out = sys.argv[1]
def rep(d):
    return json.load(open(f"{out}/{d}/report.json"))
def ev(f):
    return json.load(open(f"{out}/{f}"))
r, a = rep("resnet18"), rep("alexcifarnet")
ra, ar = ev("resnet18-labels-on-alexcifarnet.json"), ev("alexcifarnet-labels-on-resnet18.json")
cell = lambda m, s, n: f"{m:.2f} ± {s:.2f} % ({n} models)"
lines = [
    "# CIFAR-10, 100 base images, LD RR (shortened: scripts/paper/torchscript-cifar.sh)", "",
    f"{r['meta_steps']} meta-steps, T = {r['steps']}; wall time of the distillations: ResNet-18 "
    f"{r['wall_seconds']:.0f} s, AlexCifarNet {a['wall_seconds']:.0f} s", "",
    "| labels learnt through | tested on ResNet-18 (TorchScript) | tested on AlexCifarNet |",
    "|---|---|---|",
    f"| ResNet-18 (TorchScript) | {cell(r['test_accuracy_mean'], r['test_accuracy_std'], len(r['test_accuracies']))} "
    f"| {cell(ra['test_accuracy_mean'], ra['test_accuracy_std'], len(ra['test_accuracies']))} |",
    f"| AlexCifarNet | {cell(ar['test_accuracy_mean'], ar['test_accuracy_std'], len(ar['test_accuracies']))} "
    f"| {cell(a['test_accuracy_mean'], a['test_accuracy_std'], len(a['test_accuracies']))} |",
]
open(f"{out}/summary.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
