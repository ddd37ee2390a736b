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

// TestNullable: a diverged model's NaN is null in a progress record and NaN again when read.
func TestNullable(t *testing.T) {
	accs := []float64{97.5, math.NaN(), 0, 100}
	n := Nullable(accs)
	if len(n) != 4 || n[1] != nil || n[0] == nil || *n[0] != 97.5 || *n[2] != 0 || *n[3] != 100 {
		t.Fatalf("Nullable(%v) = %v", accs, n)
	}
	back := FromNullable(n)
	if len(back) != 4 || back[0] != 97.5 || !math.IsNaN(back[1]) || back[2] != 0 || back[3] != 100 {
		t.Fatalf("FromNullable: %v, want %v", back, accs)
	}
	if len(Nullable(nil)) != 0 || len(FromNullable(nil)) != 0 {
		t.Fatal("empty input: want empty output")
	}
}
