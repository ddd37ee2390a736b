package report

import (
	"bytes"
	"fmt"
	"image/png"
	"math/rand"
	"slices"
	"testing"
)

// TestLabelBars: up to maxLabelBars classes every class is a bar in class order; over
// more (CIFAR-100), the topLabelBars largest, largest first, each under its own name.
func TestLabelBars(t *testing.T) {
	few := []float32{0.1, 0.5, 0.4}
	vals, names := labelBars(few, []string{"a", "b", "c"})
	if !slices.Equal(names, []string{"a", "b", "c"}) || vals[1] != float64(few[1]) {
		t.Fatalf("3 classes: %v %v", vals, names)
	}
	many := make([]float32, 100)
	all := make([]string, 100)
	for j := range many {
		many[j] = float32((j*37)%100) / 1000 // a permutation of 0 … 0.099
		all[j] = fmt.Sprintf("class%d", j)
	}
	vals, names = labelBars(many, all)
	if len(vals) != topLabelBars || len(names) != topLabelBars {
		t.Fatalf("100 classes: %d bars, %d names", len(vals), len(names))
	}
	for k := range vals {
		j := slices.Index(all, names[k])
		if vals[k] != float64(many[j]) {
			t.Fatalf("bar %d: %v under %s, whose share is %v", k, vals[k], names[k], many[j])
		}
		if want := float64(float32(99-k) / 1000); vals[k] != want {
			t.Fatalf("bar %d: %v, want the %d-th largest %v", k, vals[k], k+1, want)
		}
	}
	for _, c := range []struct{ v, top float64 }{{0.01, 0.05}, {0.05, 0.05}, {0.07, 0.1}, {0.3, 0.5}, {0.51, 1}} {
		if got := barScale(c.v); got != c.top {
			t.Errorf("barScale(%v) = %v, want %v", c.v, got, c.top)
		}
	}
}

// TestLabelFiguresManyClasses: a 10-source, 100-target run (CIFAR-10 → CIFAR-100) gets a
// label-distribution figure turned upright (a row per target class) and readable example labels.
func TestLabelFiguresManyClasses(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	const sources, targets, n = 10, 100, 20
	targetNames, sourceNames := make([]string, targets), make([]string, sources)
	for j := range targetNames {
		targetNames[j] = fmt.Sprintf("target_class_%d", j)
	}
	for s := range sourceNames {
		sourceNames[s] = fmt.Sprintf("source%d", s)
	}
	labels := make([]float32, n*targets)
	baseClasses := make([]int64, n)
	for i := 0; i < n; i++ {
		baseClasses[i] = int64(i % sources)
		sum := float32(0)
		for j := 0; j < targets; j++ {
			labels[i*targets+j] = rng.Float32()
			sum += labels[i*targets+j]
		}
		for j := 0; j < targets; j++ {
			labels[i*targets+j] /= sum
		}
	}
	d, err := MeanLabelPerClass(labels, targets, baseClasses, sources)
	if err != nil {
		t.Fatal(err)
	}
	b, err := labelDistributionFigure(d, targetNames, sourceNames, "test")
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if r := img.Bounds(); r.Dy() < 3*r.Dx() {
		t.Fatalf("label distribution %d×%d pixels: want it turned, a row per target class", r.Dx(), r.Dy())
	}
	pix := make([]float64, n*3*8*8)
	for i := range pix {
		pix[i] = rng.Float64()
	}
	titles := make([]string, 4)
	b, err = exampleLabelsFigure(pix, [4]int64{n, 3, 8, 8}, labels, targets, []int{0, 1, 2, 3}, titles, targetNames)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
}
