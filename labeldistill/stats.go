// Summary statistics for reports: mean ± standard deviation over evaluation models
// (docs/ALGORITHM.md §7, §10) and a moving average for progress logs.

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

// MovingAverage is the mean of the last Window values added (fewer while it fills). The
// zero value with Window 0 averages everything added.
type MovingAverage struct {
	Window int
	values []float64
	next   int
}

// Add appends x (evicting the oldest value once Window values are held) and returns the
// current mean.
func (m *MovingAverage) Add(x float64) float64 {
	if m.Window > 0 && len(m.values) == m.Window {
		m.values[m.next] = x
		m.next = (m.next + 1) % m.Window
	} else {
		m.values = append(m.values, x)
	}
	return m.Mean()
}

// Mean returns the mean of the held values, NaN when there are none.
func (m *MovingAverage) Mean() float64 {
	if len(m.values) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, v := range m.values {
		s += v
	}
	return s / float64(len(m.values))
}

// Len returns the number of values held.
func (m *MovingAverage) Len() int { return len(m.values) }
