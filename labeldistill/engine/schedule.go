// Schedules: the baseline step grid and its choice (docs/ALGORITHM.md §8), and the epoch, step
// and validation accounting of the outer loop (§7).

package engine

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
