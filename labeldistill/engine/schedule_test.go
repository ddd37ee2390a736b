package engine

import (
	"reflect"
	"testing"
)

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
