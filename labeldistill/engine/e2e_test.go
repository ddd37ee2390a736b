package engine

// e2e_test.go: Distill end to end on real MNIST (small): LD and RR learn labels that train
// better models than the uniform table, with the bookkeeping of docs/ALGORITHM.md §6–§7
// (meta-steps, validation records, the kept labels); cancellation, a base-size mismatch,
// bit-identical reruns, and the baselines of §8.

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
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// e2eConfig is a small run: 20 base examples, N_i 10, N_o 256, 3 epochs validated after
// each, 3 evaluation models, no baselines.
func e2eConfig(method string) config.Config {
	cfg := config.Default()
	cfg.Method = method
	cfg.BaseExamples, cfg.InnerBatch, cfg.OuterBatch = 20, 10, 256
	cfg.Epochs, cfg.ValidateEvery, cfg.EvalModels, cfg.ResetWindow = 3, 1, 3, 20
	cfg.Baselines = []string{}
	return cfg
}

// checkLabelTable: n rows of c probabilities summing to 1, not the uniform table.
func checkLabelTable(t *testing.T, labels []float32, n, c int) {
	t.Helper()
	if len(labels) != n*c {
		t.Fatalf("labels have %d entries, want %d×%d", len(labels), n, c)
	}
	var dev float64
	for r := 0; r < n; r++ {
		var sum float64
		for j := 0; j < c; j++ {
			v := float64(labels[r*c+j])
			if v < 0 || v > 1 || math.IsNaN(v) {
				t.Fatalf("label [%d,%d] = %v outside [0, 1]", r, j, v)
			}
			sum += v
			dev = max(dev, math.Abs(v-1/float64(c)))
		}
		if math.Abs(sum-1) > 1e-5 {
			t.Errorf("label row %d sums to %v", r, sum)
		}
	}
	if dev < 1e-3 {
		t.Errorf("labels are still uniform (max deviation %g)", dev)
	}
}

func TestDistillEndToEnd(t *testing.T) {
	ds := testkit.CachedMNIST(t, 5000, 1000, 2000, 20)
	for _, method := range []string{config.MethodLD, config.MethodRR} {
		t.Run(method, func(t *testing.T) {
			tScope(t)
			cfg := e2eConfig(method)
			start := time.Now()
			res, err := testDistill(context.Background(), cfg, WithData(ds))
			if err != nil {
				t.Fatal(err)
			}
			perEpoch := StepsPerEpoch(5000, 256)
			if perEpoch != 20 {
				t.Errorf("StepsPerEpoch(5000, 256) = %d, want 20 (last batch partial)", perEpoch)
			}
			if res.MetaSteps != cfg.Epochs*perEpoch {
				t.Errorf("MetaSteps = %d, want %d", res.MetaSteps, cfg.Epochs*perEpoch)
			}
			checkLabelTable(t, res.Labels, 20, 10)

			// One validation record per epoch; the kept one is the best, later on ties.
			if len(res.Validations) != cfg.Epochs {
				t.Fatalf("%d validation records, want %d: %+v", len(res.Validations), cfg.Epochs, res.Validations)
			}
			best := -1
			for i, v := range res.Validations {
				if v.Epoch != i+1 || v.Step != (i+1)*perEpoch || v.T < 1 || v.T > v.Step || v.Accuracy < 0 || v.Accuracy > 100 {
					t.Errorf("validation record %d: %+v", i, v)
				}
				if best < 0 || v.Accuracy >= res.Validations[best].Accuracy {
					best = i
				}
			}
			if res.BestValidation != res.Validations[best] {
				t.Errorf("BestValidation %+v, want %+v (max accuracy, later wins ties)", res.BestValidation, res.Validations[best])
			}
			if res.T != res.BestValidation.T {
				t.Errorf("T = %d, the kept validation used %d", res.T, res.BestValidation.T)
			}
			if len(res.TestAccuracies) != cfg.EvalModels {
				t.Fatalf("%d test accuracies, want %d", len(res.TestAccuracies), cfg.EvalModels)
			}
			if m, s := train.MeanStd(res.TestAccuracies); m != res.TestMean || s != res.TestStd {
				t.Errorf("TestMean/Std %v/%v, want %v/%v", res.TestMean, res.TestStd, m, s)
			}

			// Retrain with the same trainer: the kept labels reproduce the reported test
			// accuracies exactly; the uniform table, with the same T and seeds, is chance.
			rc := res.Config
			evalNet := tNeed[*nets.Net](t)(nets.New(rc.EvalArch, 1, 28, 28, 10))
			base := tNeed[deviceSplit](t)(upload(&ds.Base, ds.Shape, torch.CPU))
			defer base.free()
			test := tNeed[deviceSplit](t)(upload(&ds.Test, ds.Shape, torch.CPU))
			defer test.free()
			accs := func(table []float32) []float64 {
				tab := tT(t)(torch.FromFloat32(table, 20, 10))
				tr := &train.Trainer{Net: evalNet, RR: method == config.MethodRR, Cfg: rc, Images: base.x, Labels: tab, Batch: rc.EvalBatch, Opt: train.AdamSpec(rc.EvalLR), Device: torch.CPU}
				a, err := tr.Test(context.Background(), res.T, rc.EvalModels, uint64(rc.Seed), "test", test.x, test.y)
				if err != nil {
					t.Fatal(err)
				}
				return a
			}
			uniform := make([]float32, 200)
			for i := range uniform {
				uniform[i] = 0.1
			}
			distilled, flat := accs(res.Labels), accs(uniform)
			if !slices.Equal(distilled, res.TestAccuracies) {
				t.Errorf("retraining with the kept labels gave %v, Distill reported %v", distilled, res.TestAccuracies)
			}
			mD, _ := train.MeanStd(distilled)
			mU, _ := train.MeanStd(flat)
			t.Logf("%s: T %d, resets %v, validations %+v; test accuracy %.2f%% distilled vs %.2f%% uniform; %.1f s",
				method, res.T, res.Resets, res.Validations, mD, mU, time.Since(start).Seconds())
			if mU > 25 {
				t.Errorf("uniform labels reach %.2f%%: expected about chance (10%%)", mU)
			}
			if mD < mU+15 {
				t.Errorf("distilled labels reach %.2f%%, uniform %.2f%%: want a margin of at least 15 points", mD, mU)
			}
		})
	}
}

func TestDistillCancelled(t *testing.T) {
	ds := testkit.CachedMNIST(t, 5000, 1000, 2000, 20)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	res, err := testDistill(ctx, e2eConfig(config.MethodLD), WithData(ds))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Distill with a cancelled context: %v, want context.Canceled", err)
	}
	if res != nil {
		t.Errorf("a cancelled Distill returned a result")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("a cancelled Distill took %v", el)
	}
}

func TestDistillBaseMismatch(t *testing.T) {
	ds := testkit.CachedMNIST(t, 5000, 1000, 2000, 20)
	for _, n := range []int{10, 30} {
		cfg := e2eConfig(config.MethodLD)
		cfg.BaseExamples = n
		res, err := testDistill(context.Background(), cfg, WithData(ds))
		if err == nil || res != nil {
			t.Fatalf("base_examples %d with a 20-example dataset: err %v", n, err)
		}
		if !strings.Contains(err.Error(), "base_examples") {
			t.Errorf("error %q does not name base_examples", err)
		}
	}
}

// TestDistillDeterministic: on CPU with one thread, the same seed gives bit-identical
// labels, T, resets and accuracies; another seed gives other labels.
func TestDistillDeterministic(t *testing.T) {
	oneThread(t)
	ds := testkit.CachedMNIST(t, 1000, 500, 500, 20)
	for _, method := range []string{config.MethodLD, config.MethodRR} {
		cfg := e2eConfig(method)
		cfg.Epochs, cfg.EvalModels, cfg.ResetWindow, cfg.Threads = 3, 1, 2, 1
		run := func(seed int64) *Result {
			c := cfg
			c.Seed = seed
			res, err := testDistill(context.Background(), c, WithData(ds))
			if err != nil {
				t.Fatalf("%s: %v", method, err)
			}
			return res
		}
		a, b, other := run(7), run(7), run(8)
		if !slices.Equal(a.Labels, b.Labels) {
			t.Errorf("%s: two runs with seed 7 gave different labels", method)
		}
		if a.T != b.T || !slices.Equal(a.Resets, b.Resets) || !slices.Equal(a.Validations, b.Validations) || !slices.Equal(a.TestAccuracies, b.TestAccuracies) {
			t.Errorf("%s: two runs with seed 7 differ: T %d/%d, resets %v/%v, validations %+v/%+v, test %v/%v",
				method, a.T, b.T, a.Resets, b.Resets, a.Validations, b.Validations, a.TestAccuracies, b.TestAccuracies)
		}
		if slices.Equal(a.Labels, other.Labels) {
			t.Errorf("%s: seeds 7 and 8 gave identical labels", method)
		}
		t.Logf("%s: %d steps, resets %v, T %d", method, a.MetaSteps, a.Resets, a.T)
	}
}

// TestBaselines: true and smoothed labels, each with a step search over a reduced grid,
// under LD (plain networks) and RR (keys with the _rr suffix).
func TestBaselines(t *testing.T) {
	ds := testkit.CachedMNIST(t, 5000, 1000, 2000, 20)
	grid := []int{5, 10, 20}
	for _, method := range []string{config.MethodLD, config.MethodRR} {
		cfg := e2eConfig(method)
		cfg.Epochs, cfg.EvalModels = 1, 2
		cfg.Baselines = []string{config.BaselineTrue, config.BaselineSmooth}
		cfg.BaselineSteps = grid
		res, err := testDistill(context.Background(), cfg, WithData(ds))
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		suffix := ""
		if method == config.MethodRR {
			suffix = "_rr"
		}
		if len(res.Baselines) != 2 {
			t.Errorf("%s: baselines %v, want two", method, res.Baselines)
		}
		for _, name := range []string{config.BaselineTrue, config.BaselineSmooth} {
			b, ok := res.Baselines[name+suffix]
			if !ok {
				t.Errorf("%s: no baseline %q in %v", method, name+suffix, res.Baselines)
				continue
			}
			if !slices.Contains(grid, b.Steps) {
				t.Errorf("%s %s: Steps %d not in the grid %v", method, name, b.Steps, grid)
			}
			errs := make([]float64, len(grid))
			for i, s := range grid {
				e, ok := b.ValidationErrors[s]
				if !ok || e < 0 || e > 100 {
					t.Errorf("%s %s: validation error at %d steps: %v (present %v)", method, name, s, e, ok)
				}
				errs[i] = e
			}
			if len(b.ValidationErrors) != len(grid) {
				t.Errorf("%s %s: validation errors at %v, want exactly the grid %v", method, name, b.ValidationErrors, grid)
			}
			if want := train.BestSteps(grid, errs); b.Steps != want {
				t.Errorf("%s %s: Steps %d, the grid's best (earliest on ties) is %d", method, name, b.Steps, want)
			}
			if len(b.Accuracies) != cfg.EvalModels {
				t.Errorf("%s %s: %d accuracies, want %d", method, name, len(b.Accuracies), cfg.EvalModels)
			}
			if m, s := train.MeanStd(b.Accuracies); m != b.Mean || s != b.Std {
				t.Errorf("%s %s: Mean/Std %v/%v, want %v/%v", method, name, b.Mean, b.Std, m, s)
			}
			if b.Mean < 20 {
				t.Errorf("%s %s: %d true-class examples train models to only %.2f%%", method, name, 20, b.Mean)
			}
			t.Logf("%s %s: steps %d, validation errors %v, test %.2f ± %.2f", method, name, b.Steps, b.ValidationErrors, b.Mean, b.Std)
		}
	}
}
