package labeldistill

import (
	"math"
	"reflect"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
)

func TestBaselineStepGrid(t *testing.T) {
	want1000 := []int{10, 25, 50, 75, 100, 150, 200, 250, 300, 350, 400, 450, 500, 550, 600,
		650, 700, 750, 800, 850, 900, 950, 1000}
	if got := config.BaselineStepGrid(1000); !reflect.DeepEqual(got, want1000) {
		t.Errorf("BaselineStepGrid(1000) = %v", got)
	}
	want1700 := append(append([]int(nil), want1000...), 1050, 1100, 1150, 1200, 1250, 1300,
		1350, 1400, 1450, 1500, 1550, 1600, 1650, 1700)
	if got := config.BaselineStepGrid(1700); !reflect.DeepEqual(got, want1700) {
		t.Errorf("BaselineStepGrid(1700) = %v", got)
	}
	for max, want := range map[int][]int{
		0:    nil,
		-5:   nil,
		5:    {5},
		10:   {10},
		60:   {10, 25, 50, 60},
		75:   {10, 25, 50, 75},
		120:  {10, 25, 50, 75, 100, 120},
		1030: append(append([]int(nil), want1000...), 1030),
	} {
		if got := config.BaselineStepGrid(max); !reflect.DeepEqual(got, want) {
			t.Errorf("BaselineStepGrid(%d) = %v, want %v", max, got, want)
		}
	}
	for max := 1; max <= 2000; max++ {
		g := config.BaselineStepGrid(max)
		if g[len(g)-1] != max {
			t.Fatalf("BaselineStepGrid(%d) does not end at %d: %v", max, max, g)
		}
		for i := 1; i < len(g); i++ {
			if g[i] <= g[i-1] {
				t.Fatalf("BaselineStepGrid(%d) not increasing: %v", max, g)
			}
		}
	}
}

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
	defer func() {
		if recover() == nil {
			t.Error("mismatched lengths did not panic")
		}
	}()
	BestSteps(grid, []float64{1})
}

func TestStepsPerEpoch(t *testing.T) {
	for _, c := range []struct{ n, b, want int }{
		{50000, 1024, 49},   // MNIST
		{45000, 1024, 44},   // CIFAR-10
		{209128, 1024, 205}, // K-49
		{1024, 1024, 1},
		{1025, 1024, 2},
		{100, 1024, 1},
		{0, 1024, 0},
		{100, 0, 0},
	} {
		if got := StepsPerEpoch(c.n, c.b); got != c.want {
			t.Errorf("StepsPerEpoch(%d, %d) = %d, want %d", c.n, c.b, got, c.want)
		}
	}
	// Against an explicit batching loop.
	for n := 1; n <= 3000; n += 37 {
		for _, b := range []int{1, 7, 64, 1024} {
			batches := 0
			for start := 0; start < n; start += b {
				batches++
			}
			if got := StepsPerEpoch(n, b); got != batches {
				t.Fatalf("StepsPerEpoch(%d, %d) = %d, want %d", n, b, got, batches)
			}
		}
	}
}

func TestValidationDue(t *testing.T) {
	for _, c := range []struct {
		epochs, every int
		want          []int
	}{
		{12, 5, []int{5, 10, 12}},
		{10, 5, []int{5, 10}},
		{3, 5, []int{3}}, // the reference would validate never (and crash)
		{1, 5, []int{1}},
		{6, 0, []int{6}},
		{4, 1, []int{1, 2, 3, 4}},
		{0, 5, nil},
	} {
		if got := validationEpochs(c.epochs, c.every); !reflect.DeepEqual(got, c.want) {
			t.Errorf("validationEpochs(%d, %d) = %v, want %v", c.epochs, c.every, got, c.want)
		}
	}
	v := validationEpochs(400, 5)
	if len(v) != 80 || v[0] != 5 || v[79] != 400 {
		t.Errorf("400 epochs every 5: %d validations, first %d, last %d", len(v), v[0], v[len(v)-1])
	}
	if ValidationDue(0, 10, 5) || ValidationDue(15, 10, 5) || ValidationDue(-5, 10, 5) {
		t.Error("epochs outside 1..epochs reported due")
	}
}

// validationEpochs lists the 1-based epochs after which ValidationDue is true.
func validationEpochs(epochs, every int) []int {
	var out []int
	for e := 1; e <= epochs; e++ {
		if ValidationDue(e, epochs, every) {
			out = append(out, e)
		}
	}
	return out
}
