// Schedules: the baseline step grid and its choice (docs/ALGORITHM.md §8), and the epoch, step
// and validation accounting of the outer loop (§7).

package labeldistill

import "math"

// BaselineStepGrid returns the step counts at which the baseline search of docs/ALGORITHM.md §8
// measures validation error while training one model continuously for maxSteps steps:
//
//	10, 25, 50, 75, 100, 150, 200, …  (every 50 from 100 on)  … up to maxSteps,
//
// i.e. {10, 25, 50, 75, 100, 150, …, 1000} for the default maximum 1000 and the same grid
// continued to 1700 when N > 100 (the paper's "every 50 steps up to 1000 steps (or 1700
// steps …)"). Values above maxSteps are dropped; maxSteps itself is appended when it is not
// on the grid, so the longest training is always measured. maxSteps ≤ 0 gives nil.
//
// The reference code uses this grid for N ≤ 100 (its ITER % 50 == 49 or ITER ∈ {9, 24, 74})
// but a sparser, off-by-one grid for N > 100: {10, 25, 75, 101, 201, 301, 501, 701, 1001,
// 1201, 1501, 1701}. ldtorch uses the uniform grid for every N, as docs/ALGORITHM.md states;
// set Config.BaselineSteps to reproduce the reference's.
func BaselineStepGrid(maxSteps int) []int {
	if maxSteps <= 0 {
		return nil
	}
	var grid []int
	for _, s := range []int{10, 25, 50, 75} {
		if s <= maxSteps {
			grid = append(grid, s)
		}
	}
	for s := 100; s <= maxSteps; s += 50 {
		grid = append(grid, s)
	}
	if len(grid) == 0 || grid[len(grid)-1] != maxSteps {
		grid = append(grid, maxSteps)
	}
	return grid
}

// BestSteps returns the grid entry with the lowest validation error, the earliest one on
// ties (docs/ALGORITHM.md §8; the reference keeps a new best only when strictly lower). NaN
// errors never win. It returns 0 when grid is empty or every error is NaN, and panics when
// the slices differ in length.
func BestSteps(grid []int, valErr []float64) int {
	if len(grid) != len(valErr) {
		panic("labeldistill: BestSteps: grid and valErr differ in length")
	}
	best, bestErr := 0, math.Inf(1)
	found := false
	for i, e := range valErr {
		if math.IsNaN(e) {
			continue
		}
		if !found || e < bestErr {
			best, bestErr, found = grid[i], e, true
		}
	}
	return best
}

// StepsPerEpoch is the number of meta-steps in one pass over a target set of
// targetSetSize examples in batches of outerBatch, the last batch partial (docs/ALGORITHM.md §7):
// ceil(targetSetSize / outerBatch), e.g. 49 for MNIST (50000 / 1024) and 44 for CIFAR-10
// (45000 / 1024). It returns 0 when either argument is not positive.
func StepsPerEpoch(targetSetSize, outerBatch int) int {
	if targetSetSize <= 0 || outerBatch <= 0 {
		return 0
	}
	return (targetSetSize + outerBatch - 1) / outerBatch
}

// ValidationDue reports whether the labels are validated after epoch, the 1-based number of
// the epoch just completed out of epochs: after epochs every, 2·every, … (docs/ALGORITHM.md §7)
// and always after the last epoch, whatever the epoch count (§9: the reference crashes when
// fewer than 5 epochs leave it nothing validated). every ≤ 0 validates after the last
// epoch only.
func ValidationDue(epoch, epochs, every int) bool {
	if epoch <= 0 {
		return false
	}
	if epoch == epochs {
		return true
	}
	return every > 0 && epoch%every == 0 && epoch < epochs
}
