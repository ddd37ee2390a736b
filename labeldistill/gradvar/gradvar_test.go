package gradvar

import (
	"context"
	"math"
	"reflect"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
)

// gradvar_test.go: the gradient-variance measurement on real MNIST.

// TestMeasureGradVariance: LD and LD RR at one label state give finite, positive
// variances across models, identically when repeated, and refuse a bad label table.
func TestMeasure(t *testing.T) {
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	cfg := testkit.SmallConfig(config.MethodLD)
	g := Options{Methods: []string{config.MethodLD, config.MethodRR}, Models: 4, Batches: 2, Warmup: 5}
	a, err := Measure(context.Background(), g, nil, func() (*engine.Inputs, error) {
		r, err := config.Resolve(cfg)
		if err != nil {
			return nil, err
		}
		return engine.Prepare(r, ds, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Measure(context.Background(), g, nil, func() (*engine.Inputs, error) {
		r, err := config.Resolve(cfg)
		if err != nil {
			return nil, err
		}
		return engine.Prepare(r, ds, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("not repeatable: %+v vs %+v", a, b)
	}
	for _, m := range a {
		v := m.Variance
		if len(m.PerBatch) != 2 || v.Count != 4 || !(v.Variance > 0) || math.IsInf(v.Variance, 0) || !(v.Relative > 0) || v.Relative > 1 {
			t.Fatalf("%s: %+v", m.Name, m)
		}
	}
	t.Logf("uniform labels, 4 models warmed up 5 steps, 2 batches: LD %.3g, LD RR %.3g", a[0].Variance.Variance, a[1].Variance.Variance)
	if _, err := Measure(context.Background(), g, make([]float32, 7), func() (*engine.Inputs, error) {
		r, err := config.Resolve(cfg)
		if err != nil {
			return nil, err
		}
		return engine.Prepare(r, ds, nil)
	}); err == nil {
		t.Fatal("a 7-value label table was accepted")
	}
}
