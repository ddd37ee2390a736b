package engine

// together_test.go: runs distilled together (DistillTogether) give each run's result as
// it is alone: bit for bit with the bodies model by model, to float rounding grouped; runs
// that cannot step together are refused, naming the setting.

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// togetherConfigs are three small LD RR runs of one shape that differ in seed and in
// when their model trains (model_training always, never, after-reset).
func togetherConfigs() []config.Config {
	var cs []config.Config
	for i, mt := range []string{config.ModelTrainAlways, config.ModelTrainNever, config.ModelTrainAfterReset} {
		c := testkit.SmallConfig(config.MethodRR)
		c.Seed = int64(101 + i)
		c.ModelTraining = mt
		cs = append(cs, c)
	}
	return cs
}

func distillTogetherForTest(t *testing.T, cs []config.Config, ds *Data, mode nets.BodyMode) ([]*Result, error) {
	t.Helper()
	rs := make([]config.Resolved, len(cs))
	opts := make([]Options, len(cs))
	for i, c := range cs {
		var err error
		if rs[i], err = config.Resolve(c); err != nil {
			t.Fatal(err)
		}
		opts[i] = Options{Start: time.Now(), Dataset: ds}
	}
	return torch.Guard("labeldistill", func() ([]*Result, error) { return DistillTogether(context.Background(), rs, opts, mode) })
}

func TestDistillTogetherIsEachRunAlone(t *testing.T) {
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	cs := togetherConfigs()
	alone := make([]*Result, len(cs))
	for i, c := range cs {
		var err error
		if alone[i], err = testDistill(context.Background(), c, WithData(ds)); err != nil {
			t.Fatal(err)
		}
	}
	if slices.Equal(alone[0].Labels, alone[1].Labels) {
		t.Fatal("runs of different seeds learnt the same labels: the comparison below could not fail")
	}
	together, err := distillTogetherForTest(t, cs, ds, nets.BodyPerModel)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cs {
		a, b := alone[i], together[i]
		if !testkit.SameBits(a.Labels, b.Labels) || !slices.Equal(a.TestAccuracies, b.TestAccuracies) ||
			a.T != b.T || !slices.Equal(a.Resets, b.Resets) || a.MetaSteps != b.MetaSteps {
			t.Errorf("run %d (%s): together T %d resets %v test %v, alone T %d resets %v test %v (labels the same bits: %v)",
				i, cs[i].ModelTraining, b.T, b.Resets, b.TestAccuracies, a.T, a.Resets, a.TestAccuracies, testkit.SameBits(a.Labels, b.Labels))
		}
	}
	grouped, err := distillTogetherForTest(t, cs, ds, nets.BodyGrouped)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cs {
		diff, scale := 0.0, 0.0
		for j, v := range alone[i].Labels {
			diff = math.Max(diff, math.Abs(float64(v-grouped[i].Labels[j])))
			scale = math.Max(scale, math.Abs(float64(v)))
		}
		if diff > 1e-5*scale || alone[i].T != grouped[i].T {
			t.Errorf("run %d grouped: labels differ from the run alone by %.3g (largest label %.3g), T %d against %d",
				i, diff, scale, grouped[i].T, alone[i].T)
		}
		t.Logf("run %d grouped: largest label difference %.3g of %.3g", i, diff, scale)
	}
}

func TestDistillTogetherRefusals(t *testing.T) {
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	for _, tc := range []struct {
		name   string
		change func(*config.Config)
		want   string
	}{
		{"method", func(c *config.Config) { c.Method = config.MethodLD }, "LD RR learning labels only"},
		{"epochs", func(c *config.Config) { c.Epochs = 2 }, "share their epochs"},
		{"outer batch", func(c *config.Config) { c.OuterBatch = 128 }, "share their outer_batch"},
	} {
		cs := togetherConfigs()[:2]
		tc.change(&cs[1])
		_, err := distillTogetherForTest(t, cs, ds, nets.BodyPerModel)
		var re *RunError
		if err == nil || !errors.As(err, &re) || re.Index != 1 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want run 2's error saying %q", tc.name, err, tc.want)
		}
	}
}

// TestDeviceDistillTogether: on a GPU, runs distilled together (grouped bodies, one batched
// solve) against the same runs alone on the GPU. The kernels round differently, and a
// flipped prediction can move a reset, so where the resets agree the labels must agree to
// float rounding, and the runs must take as many meta-steps in any case.
func TestDeviceDistillTogether(t *testing.T) {
	dev := testDevice(t)
	if !dev.IsCUDA() {
		t.Skip("on the CPU: TestDistillTogetherIsEachRunAlone")
	}
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	cs := togetherConfigs()
	for i := range cs {
		cs[i].Device = dev.String()
	}
	together, err := distillTogetherForTest(t, cs, ds, nets.BodyGrouped)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cs {
		alone, err := testDistill(context.Background(), c, WithData(ds))
		if err != nil {
			t.Fatal(err)
		}
		got := together[i]
		if got.MetaSteps != alone.MetaSteps {
			t.Fatalf("run %d: %d meta-steps together, %d alone", i, got.MetaSteps, alone.MetaSteps)
		}
		diff := 0.0
		for j, v := range alone.Labels {
			diff = math.Max(diff, math.Abs(float64(v-got.Labels[j])))
		}
		t.Logf("run %d on %s: largest label difference %.3g; resets %v together, %v alone; test %.2f%% and %.2f%%",
			i, dev, diff, got.Resets, alone.Resets, got.TestMean, alone.TestMean)
		if slices.Equal(got.Resets, alone.Resets) && diff > 1e-3 {
			t.Errorf("run %d: labels differ by %.3g with the same resets", i, diff)
		}
	}
}
