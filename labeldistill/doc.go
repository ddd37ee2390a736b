// Package labeldistill implements label distillation (Bohdal, Yang and Hospedales,
// "Flexible Dataset Distillation: Learn Labels Instead of Images"): it keeps N real base
// images fixed and learns their soft labels so that a model trained from scratch on those
// N (image, label) pairs does well on a target dataset, with the second-order method ("LD",
// one differentiable inner SGD step) or the ridge-regression method ("LD RR"), periodic
// model resets that also estimate how many steps T fresh models should train for, and
// early stopping of the labels on a validation split. Distill runs the distillation and
// Evaluate trains and scores fresh models on distilled (or baseline) labels; Config holds
// every setting. docs/ALGORITHM.md states the algorithm with every default, lists each
// deliberate deviation from the authors' code (§9) once, and maps each concept of the
// paper to the function implementing it (§11).
//
// Speed in a long-lived Go program: the package changes no process-wide setting, but glibc's
// allocator returns the activation memory of every meta-step to the kernel unless the
// process starts with MALLOC_ARENA_MAX=1 MALLOC_MMAP_THRESHOLD_=33554432
// MALLOC_TRIM_THRESHOLD_=1073741824 MALLOC_TOP_PAD_=268435456 in its environment, which
// halves the time of an LD meta-step (the ldtorch command sets them for itself; see its
// malloc.go and docs/BENCHMARKS.md).
package labeldistill

import "github.com/ldtorch/ldtorch/labeldistill/engine"

// Version is ldtorch's version, recorded in artifacts and histories.
const Version = engine.Version
