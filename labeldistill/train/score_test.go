package train

import (
	"math"
	"testing"
)

func TestBestSteps(t *testing.T) {
	grid := []int{10, 25, 50, 75, 100}
	cases := []struct {
		errs []float64
		want int
	}{
		{[]float64{50, 40, 30, 35, 31}, 50},
		{[]float64{50, 30, 40, 30, 30}, 25}, // ties: earliest
		{[]float64{math.NaN(), 60, math.NaN(), 20, 20}, 75},
		{[]float64{math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()}, 0},
		{[]float64{10, 10, 10, 10, 10}, 10},
		{[]float64{90, 80, 70, 60, 50}, 100},
	}
	for _, c := range cases {
		if got := BestSteps(grid, c.errs); got != c.want {
			t.Errorf("BestSteps(%v) = %d, want %d", c.errs, got, c.want)
		}
	}
	if got := BestSteps(nil, nil); got != 0 {
		t.Errorf("BestSteps(nil) = %d", got)
	}
	if got := BestSteps(grid, []float64{1}); got != 0 {
		t.Errorf("BestSteps with mismatched lengths = %d, want 0", got)
	}
}
