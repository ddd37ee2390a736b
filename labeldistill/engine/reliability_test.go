package engine

// reliability_test.go: hostile inputs end to end at the library level: bad datasets or
// options make Distill return an error before it trains.

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
)

// TestDistillRejectsBadInputs: malformed datasets, configurations and options return errors
// before any meta-step (Distill never panics).
func TestDistillRejectsBadInputs(t *testing.T) {
	ds := testkit.SmallDataset(t)
	cfg := testkit.SmallConfig(config.MethodLD)
	clone := func(edit func(d *Data)) *Data {
		d := *ds
		edit(&d)
		return &d
	}
	for _, tc := range []struct {
		name string
		cfg  config.Config
		ds   *Data
		want string
	}{
		{"label out of range", cfg, clone(func(d *Data) {
			d.TargetSet.Labels = slices.Clone(d.TargetSet.Labels)
			d.TargetSet.Labels[5] = 10
		}), "outside 0..9"},
		{"images too short", cfg, clone(func(d *Data) { d.Validation.Images = d.Validation.Images[:100] }), "validation split has"},
		{"empty test split", cfg, clone(func(d *Data) { d.Test = data.Split{} }), "test split is empty"},
		{"base count differs", func() config.Config { c := cfg; c.BaseExamples = 30; return c }(), ds, "base_examples"},
		{"bad config", func() config.Config { c := cfg; c.LabelLR = math.NaN(); return c }(), ds, "label_lr"},
		{"one class", cfg, clone(func(d *Data) { d.Classes = 1 }), "at least 2 classes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps := 0
			res, err := testDistill(context.Background(), tc.cfg, WithData(tc.ds), WithProgress(func(Progress) { steps++ }))
			if res != nil || err == nil || !strings.Contains(err.Error(), tc.want) || steps != 0 {
				t.Fatalf("got %v (result %v, %d progress reports), want an error containing %q", err, res != nil, steps, tc.want)
			}
		})
	}
}
