// Summary statistics for reports: mean ± standard deviation over evaluation models
// (docs/ALGORITHM.md §7, §10).

package labeldistill

import "math"

// MeanStd returns the mean and the POPULATION standard deviation of xs,
// sqrt(Σ(x − mean)² / n) (divide by n, not n − 1). This is numpy's np.std default
// (ddof = 0), which the reference code and hence the paper's "± std" over 20 models use;
// docs/ALGORITHM.md §10 states the convention. Empty input gives (NaN, NaN); one value gives
// (x, 0). Two passes keep it accurate when the spread is small relative to the mean.
func MeanStd(xs []float64) (mean, std float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	n := float64(len(xs))
	for _, x := range xs {
		mean += x
	}
	mean /= n
	var ss, comp float64
	for _, x := range xs {
		d := x - mean
		ss += d * d
		comp += d
	}
	// Corrected two-pass formula (Chan, Golub & LeVeque): subtract the rounding residue of
	// the mean.
	variance := (ss - comp*comp/n) / n
	if variance < 0 {
		variance = 0
	}
	return mean, math.Sqrt(variance)
}
