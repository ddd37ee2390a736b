// Package labeldistill implements label distillation (Bohdal, Yang and Hospedales,
// "Flexible Dataset Distillation: Learn Labels Instead of Images"): it keeps N real base
// images fixed and learns their soft labels so that a model trained from scratch on those
// N (image, label) pairs does well on a target dataset, with the second-order method ("LD",
// one differentiable inner SGD step) or the ridge-regression method ("LD RR"), periodic
// model resets that also estimate how many steps T fresh models should train for, and
// early stopping of the labels on a validation split. Distill runs the distillation and
// Evaluate trains and scores fresh models on distilled (or baseline) labels; Config holds
// every setting. The normative description, with all defaults, is docs/ALGORITHM.md in the
// shared documentation (../shared/docs/ALGORITHM.md from the repository root); the paper is
// ../shared/paper/flexible-dataset-distillation.tex.
//
// Deliberate deviations from the authors' reference code (the "ldtorch:" lines and §9 of
// ALGORITHM.md):
//
//   - Within-dataset base examples are drawn from the target-set part of the train split,
//     never from validation (the reference draws from the whole train split); the chosen
//     indices are recorded.
//   - The authors' ResNet uses batch-norm running statistics at evaluation.
//   - Label renormalisation guards the all-zero row (the reference would produce NaN).
//   - A teacher soft-label baseline is added to the true and smoothed-label baselines.
//   - Labels are validated after the last epoch whatever the epoch count (the reference
//     crashes with fewer than 5 epochs).
//   - Kuzushiji-49 pixels are read correctly (the reference maps p → (256 − p) mod 256).
//   - Evaluation builds no autograd graphs.
//   - In LD only the gradient of the target loss with respect to the labels is computed
//     (the reference also backpropagates into every model parameter and discards it).
//   - Results are written atomically and runs are checkpointed (the reference rewrites its
//     results file non-atomically every epoch and saves no checkpoint).
//
// Smaller choices of this package, documented where they are made: the reset rule compares
// window sums exactly rather than with a drifting running float sum (ResetTracker); the
// baseline step grid is the uniform {10, 25, 50, 75, 100, 150, …} for every N, where the
// reference uses a sparser grid for N > 100 (BaselineStepGrid); the inner batch for N other
// than the paper's 10, 20, 50, ≥ 100 is interpolated (AutoInnerBatch). EMNIST images are used
// as stored (transposed relative to MNIST), like the reference, unless
// Config.EMNISTTranspose is set. Reported standard deviations are population ones (MeanStd).
//
// Speed in a long-lived Go program: the package changes no process-wide setting, but glibc's
// allocator returns the activation memory of every meta-step to the kernel unless the
// process starts with MALLOC_ARENA_MAX=1 MALLOC_MMAP_THRESHOLD_=33554432
// MALLOC_TRIM_THRESHOLD_=1073741824 MALLOC_TOP_PAD_=268435456 in its environment, which
// halves the time of an LD meta-step (the ldtorch command sets them for itself; see its
// malloc.go and docs/BENCHMARKS.md).
package labeldistill
