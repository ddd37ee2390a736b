package train

// score.go: scoring models (top-1 errors), the divergence of a model's parameters, and
// statistics over models (mean ± population std, docs/ALGORITHM.md §10; the best step count
// of a search, §8).

import (
	"math"

	"github.com/ldtorch/ldtorch/torch"
)

// WrongCount is the number of wrong top-1 predictions of logits (B, C) against int64
// labels (B), left on the device (an int64 scalar).
func WrongCount(logits, y *torch.Tensor) (*torch.Tensor, error) {
	var c torch.Chain
	wrong := c.T(c.T(c.T(logits.Argmax(1, false)).Ne(y)).Sum())
	return wrong, c.Err()
}

// PercentWrong is the top-1 error (%) of n wrong predictions out of batch.
func PercentWrong(n float64, batch int64) float64 { return 100 * n / float64(batch) }

// KeepFinite drops the accuracies of diverged models (NaN, as Trainer.Test returns them)
// and counts them.
func KeepFinite(accs []float64) (kept []float64, diverged int) {
	kept = make([]float64, 0, len(accs))
	for _, a := range accs {
		if math.IsNaN(a) {
			diverged++
			continue
		}
		kept = append(kept, a)
	}
	return kept, diverged
}

// Nullable is accs as JSON can hold them: a diverged model's NaN becomes null. Progress
// records (a cut phase's, a stopped evaluation's) store scored models this way.
func Nullable(accs []float64) []*float64 {
	out := make([]*float64, len(accs))
	for i, a := range accs {
		if !math.IsNaN(a) {
			out[i] = &a
		}
	}
	return out
}

// FromNullable undoes Nullable: null is NaN (a diverged model).
func FromNullable(accs []*float64) []float64 {
	out := make([]float64, len(accs))
	for i, a := range accs {
		out[i] = math.NaN()
		if a != nil {
			out[i] = *a
		}
	}
	return out
}

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

// BestSteps returns the grid entry with the lowest validation error, the earliest one on
// ties (docs/ALGORITHM.md §8; the reference keeps a new best only when strictly lower). NaN
// errors never win. It returns 0 when grid is empty, every error is NaN, or the slices
// differ in length.
func BestSteps(grid []int, valErr []float64) int {
	if len(grid) != len(valErr) {
		return 0
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

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
