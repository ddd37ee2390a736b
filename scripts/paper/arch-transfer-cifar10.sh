#!/usr/bin/env bash
# arch-transfer-cifar10.sh [OUT]: the paper's CIFAR-10 architecture-transfer tables (its
# supplementary "Transferability of distilled labels across different architectures", second
# order and RR), 100 base images, seed 1234, SHORTENED for one CPU core: labels learnt through
# AlexCifarNet (LD RR and LD) and through the authors' CIFAR ResNet-18 (LD RR), each evaluated
# on AlexCifarNet, LeNet and ResNet-18 with `ldtorch study arch`, with true labels beside.
#
# Shortened: 10 epochs (440 meta-steps; the paper 400 epochs, 17,600), 4 test models in the
# distillation and 2 per study setting (the paper 20), no baselines in the distillation (the
# study's true-label rows train the same step count T instead of the step search). At one
# thread on a 2-vCPU AMD EPYC (family 25 model 17) a meta-step costs 1.2 s (LD RR through
# AlexCifarNet or ResNet-18) and 2 s (LD); each distillation takes 15-30 minutes and each study
# 15-40 (ResNet-18 models train 440 steps). Run it again to go on: steps whose results exist
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
for run in "rr alexnet ldrr-alexnet" "ld alexnet ld-alexnet" "rr resnet ldrr-resnet"; do
  set -- $run
  dir=$OUT/$3
  if [ ! -f "$dir/report.json" ] && [ -d "$dir/checkpoints" ]; then
    "$LDTORCH" distill --resume "$dir" --threads 1 --data-dir "$DATA" --quiet
  elif [ ! -f "$dir/report.json" ]; then
    "$LDTORCH" distill --dataset cifar10 --method "$1" --arch "$2" --base 100 --epochs 10 \
      --seed 1234 --eval-models 4 --baselines none --threads 1 --data-dir "$DATA" --quiet \
      --out "$dir"
  fi
  if [ ! -f "$dir/studies/arch.json" ]; then
    "$LDTORCH" study arch --distilled "$dir" --archs alexnet,lenet,resnet --models 2 \
      --threads 1 --data-dir "$DATA"
  fi
done
