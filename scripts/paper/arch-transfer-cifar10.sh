#!/usr/bin/env bash
# arch-transfer-cifar10.sh [OUT]: the paper's CIFAR-10 architecture-transfer tables (its
# supplementary "Transferability of distilled labels across different architectures", second
# order and RR), 100 base images, seed 1234, SHORTENED for one CPU core: labels learnt through
# AlexCifarNet (LD RR and LD) and through the authors' CIFAR ResNet-18 (LD RR), each evaluated
# on AlexCifarNet, LeNet and ResNet-18 with `ldtorch study arch`, with true labels beside.
#
# Shortened: 10 epochs for LD RR (440 meta-steps; the paper 400 epochs, 17,600) and 30 for LD
# (1,320: LD's learner is still at chance error after 10 epochs), 4 test models in the
# distillation and 2 per study setting (the paper 20), no baselines in the distillation (the
# study's true-label rows train the same step count T instead of the step search). At one
# thread on a 2-vCPU AMD EPYC (family 25 model 17) a meta-step costs 1.2 s (LD RR through
# AlexCifarNet or ResNet-18) and 2.4 s (LD); a distillation takes 15 (LD RR) to 57 minutes (LD)
# and a study 3-40 (ResNet-18 models train T steps). Run it again to go on: steps whose results exist
# are skipped. Results: OUT/<run>/studies/arch.json; the shortened numbers are in
# docs/results/cifar10.md ("Architecture transfer").
#
# Needs: build/ldtorch (scripts/setup.sh) and CIFAR-10 in the data folder (../shared/datasets
# holds its JPEG re-encoding, read with a warning; `ldtorch data fetch cifar10` fetches the
# binaries).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/arch-transfer-cifar10}
LDTORCH=${LDTORCH:-build/ldtorch}
DATA=${DATA:-../shared/datasets}
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
for run in "rr alexnet ldrr-alexnet 10" "ld alexnet ld-alexnet 30" "rr resnet ldrr-resnet 10"; do
  set -- $run
  dir=$OUT/$3
  if grep -q "^  \"epochs\": $4,$" "$dir/report.json" 2>/dev/null; then
    :  # finished at this length
  elif [ -d "$dir/checkpoints" ]; then
    # finishes a cut run; extends a shorter finished one (its studies are then redone)
    "$LDTORCH" distill --resume "$dir" --epochs "$4" --threads 1 --data-dir "$DATA" --quiet
  else
    "$LDTORCH" distill --dataset cifar10 --method "$1" --arch "$2" --base 100 --epochs "$4" \
      --seed 1234 --eval-models 4 --baselines none --threads 1 --data-dir "$DATA" --quiet \
      --out "$dir"
  fi
  if [ ! -f "$dir/studies/arch.json" ]; then
    "$LDTORCH" study arch --distilled "$dir" --archs alexnet,lenet,resnet --models 2 \
      --threads 1 --data-dir "$DATA"
  fi
done
