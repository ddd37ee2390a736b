package engine

import (
	"math"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/train"
)

func TestMeanStdPopulation(t *testing.T) {
	// Population std of this classic sample is exactly 2; the sample (n−1) std would be
	// 2.138…, so the test tells the conventions apart.
	m, s := train.MeanStd([]float64{2, 4, 4, 4, 5, 5, 7, 9})
	if m != 5 || s != 2 {
		t.Fatalf("train.MeanStd = %v, %v; want 5, 2", m, s)
	}
	m, s = train.MeanStd([]float64{3.5})
	if m != 3.5 || s != 0 {
		t.Fatalf("one value: %v, %v", m, s)
	}
	m, s = train.MeanStd(nil)
	if !math.IsNaN(m) || !math.IsNaN(s) {
		t.Fatalf("empty: %v, %v; want NaN, NaN", m, s)
	}
	// Large offset, small spread: a one-pass E[x²]−E[x]² formula loses this.
	m, s = train.MeanStd([]float64{1e9 + 1, 1e9 + 2, 1e9 + 3})
	if m != 1e9+2 || math.Abs(s-math.Sqrt(2.0/3)) > 1e-6 {
		t.Fatalf("offset: %v, %v; want 1e9+2, %v", m, s, math.Sqrt(2.0/3))
	}
	// Constant input: exactly zero, never NaN from a tiny negative variance.
	xs := make([]float64, 20)
	for i := range xs {
		xs[i] = 87.27
	}
	if m, s = train.MeanStd(xs); s != 0 || math.Abs(m-87.27) > 1e-12 {
		t.Fatalf("constant: %v, %v", m, s)
	}
}
