package engine

// labels_test.go: the label table of docs/ALGORITHM.md §3: the exact uniform start, the
// clamp-and-renormalise projection (with ldtorch's all-zero-row guard), the first Adam
// steps, and an Adam that survives model resets.

import (
	"math"
	"slices"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
	"github.com/ldtorch/ldtorch/torch"
)

func TestNewLabelsUniform(t *testing.T) {
	tScope(t)
	for _, c := range []int{2, 3, 10, 26, 49, 100} {
		l, err := newLabels(7, c, config.Default(), torch.CPU)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(l.Y.Shape(), []int64{7, int64(c)}) || l.Y.DType() != torch.Float || !l.Y.RequiresGrad() || !l.Y.IsLeaf() {
			t.Errorf("C=%d: table %v %v requires-grad %v leaf %v", c, l.Y.Shape(), l.Y.DType(), l.Y.RequiresGrad(), l.Y.IsLeaf())
		}
		v := tNeed[[]float32](t)(l.Y.Float32s())
		want := float32(1 / float64(c))
		for i, x := range v {
			if x != want {
				t.Fatalf("C=%d: entry %d = %v, want exactly %v", c, i, x, want)
			}
		}
		adam := l.opt
		if adam.StepCount != 0 || adam.Opts.LR != 1e-3 || adam.Opts.Beta1 != 0.9 || adam.Opts.Beta2 != 0.999 || adam.Opts.Eps != 1e-8 {
			t.Errorf("C=%d: label Adam %+v step %d, want lr 1e-3, betas 0.9/0.999, eps 1e-8, step 0", c, adam.Opts, adam.StepCount)
		}
		l.close()
	}
}

func TestProjectRows(t *testing.T) {
	tScope(t)
	third := 1.0 / 3
	cases := []struct {
		name    string
		in, out []float64
	}{
		{"negative clamped", []float64{0.2, -0.1, 0.3}, []float64{0.4, 0, 0.6}},
		{"above one clamped", []float64{1.5, 0.5, 0.5}, []float64{0.5, 0.25, 0.25}},
		{"two above one", []float64{2, 3, 0}, []float64{0.5, 0.5, 0}},
		{"renormalised only", []float64{0.1, 0.1, 0.3}, []float64{0.2, 0.2, 0.6}},
		{"already a distribution", []float64{0.25, 0.25, 0.5}, []float64{0.25, 0.25, 0.5}},
		{"all negative: uniform", []float64{-1, -2, -3}, []float64{third, third, third}},
		{"all zero: uniform", []float64{0, 0, 0}, []float64{third, third, third}},
		{"one-hot kept", []float64{0, 1, 0}, []float64{0, 1, 0}},
		{"one positive left", []float64{-0.5, 0.01, -0.2}, []float64{0, 1, 0}},
	}
	var in, want []float64
	for _, c := range cases {
		in = append(in, c.in...)
		want = append(want, c.out...)
	}
	n := int64(len(cases))
	// float64 table, all cases at once (rows are independent).
	y := tT(t)(torch.FromFloat64(slices.Clone(in), n, 3))
	tOK(t, projectRows(y))
	got := tVals(t, y)
	for i, c := range cases {
		for j := 0; j < 3; j++ {
			g := got[i*3+j]
			if math.IsNaN(g) || math.Abs(g-c.out[j]) > 1e-15 {
				t.Errorf("%s: row %v → %v, want %v", c.name, c.in, got[i*3:i*3+3], c.out)
				break
			}
		}
	}
	// The float32 table of Labels: a leaf that requires grad, projected in place.
	in32 := make([]float32, len(in))
	for i, v := range in {
		in32[i] = float32(v)
	}
	y32 := tT(t)(torch.FromFloat32(in32, n, 3))
	tOK(t, y32.SetRequiresGrad(true))
	tOK(t, projectRows(y32))
	if !y32.IsLeaf() || !y32.RequiresGrad() {
		t.Errorf("ProjectRows changed the table's autograd status")
	}
	got32 := tVals(t, y32)
	if d, _ := maxAbsDiff(got32, want); d > 1e-7 {
		t.Errorf("float32 projection differs from the expected rows by %g", d)
	}
	for i := int64(0); i < n; i++ {
		var s float64
		for j := int64(0); j < 3; j++ {
			s += got32[i*3+j]
		}
		if math.Abs(s-1) > 1e-6 {
			t.Errorf("float32 row %d sums to %v", i, s)
		}
	}
	// Not a table: an error, not a panic.
	for _, shape := range [][]int64{{6}, {2, 3, 1}} {
		bad := tT(t)(torch.Zeros(shape))
		if err := projectRows(bad); err == nil {
			t.Errorf("ProjectRows on shape %v succeeded", shape)
		}
	}
	// Idempotent on its own output.
	again := tT(t)(torch.FromFloat64(slices.Clone(got), n, 3))
	tOK(t, projectRows(again))
	if d, _ := maxAbsDiff(tVals(t, again), got); d > 1e-15 {
		t.Errorf("ProjectRows is not idempotent: %g", d)
	}
}

// TestLabelStepAdam: the label Adam's first step from the uniform table moves each entry
// by −lr·g/(|g| + eps) (≈ −lr·sign g) before the projection; Adam's bias correction gives
// the same update again on a second step with the same gradient.
func TestLabelStepAdam(t *testing.T) {
	tScope(t)
	cfg := config.Default()
	l := tNeed[*labels](t)(newLabels(3, 4, cfg, torch.CPU))
	defer l.close()
	g := []float32{1, -2, 0.5, -0.001, 0, 0, 0, 0, 3, 3, 3, 3}
	gt := tT(t)(torch.FromFloat32(g, 3, 4))
	y := []float64{0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25}
	for step := 1; step <= 2; step++ {
		tOK(t, l.step([]*torch.Tensor{gt}))
		lr := cfg.LabelLR
		for i := 0; i < 3; i++ {
			var sum float64
			row := make([]float64, 4)
			for j := 0; j < 4; j++ {
				gv := float64(g[i*4+j])
				upd := 0.0
				if gv != 0 {
					upd = lr * gv / (math.Abs(gv) + cfg.LabelEps)
				}
				row[j] = min(1, max(0, y[i*4+j]-upd))
				sum += row[j]
			}
			for j := 0; j < 4; j++ {
				y[i*4+j] = row[j] / sum
			}
		}
		got := tVals(t, l.Y)
		if d, _ := maxAbsDiff(got, y); d > 2e-7 {
			t.Errorf("step %d: labels %v, want %v", step, got, y)
		}
	}
	adam := l.opt
	if adam.StepCount != 2 {
		t.Errorf("label Adam step count %d, want 2", adam.StepCount)
	}
	// m = (1 − β1)·g after one step, (1 − β1²)·g after two equal steps.
	m := tVals(t, adam.ExpAvg[0])
	for i := range g {
		if want := 0.19 * float64(g[i]); math.Abs(m[i]-want) > 1e-6*math.Abs(want)+1e-9 {
			t.Fatalf("label Adam first moment[%d] = %v, want %v", i, m[i], want)
		}
	}
}

// TestLabelAdamSurvivesModelResets runs real LD meta-steps with a tiny reset window until
// the model has been reset twice, and checks at every step that the model's Adam restarts
// at each reset while the labels' Adam never does (§3: one Adam for the whole run).
func TestLabelAdamSurvivesModelResets(t *testing.T) {
	tScope(t)
	ds := testkit.CachedMNIST(t, 2000, 200, 200, 20)
	cfg := config.Default()
	cfg.BaseExamples, cfg.InnerBatch, cfg.OuterBatch, cfg.ResetWindow, cfg.Epochs = 20, 10, 64, 2, 1
	cfg.Baselines = []string{}
	cfg = tNeed[config.Config](t)(cfg.Resolved())
	in := tNeed[*Inputs](t)(prepareRun(resolved(t, cfg), ds, nil))
	defer in.close()
	r := tNeed[*Loop](t)(newLoop(in, &parallel{}, nil))
	defer r.close()
	y := r.learnt[0].(*labels)
	labelAdam := y.opt
	modelAdam := r.model.adam()
	order := r.rand.rng.Perm(ds.TargetSet.N)
	resets := 0
	for step := 1; step <= 300 && resets < 2; step++ {
		lo := (step - 1) * 64 % (len(order) - 64)
		before := tVals(t, r.model.params[0])
		tOK(t, r.metaStep(order[lo:lo+64]))
		if labelAdam.StepCount != int64(step) {
			t.Fatalf("step %d: label Adam step count %d, want %d (never reset)", step, labelAdam.StepCount, step)
		}
		m := tVals(t, labelAdam.ExpAvg[0])
		var norm float64
		for _, v := range m {
			norm += math.Abs(v)
		}
		if norm == 0 {
			t.Fatalf("step %d: label Adam first moment is zero", step)
		}
		if n := len(r.tracker.Resets()); n > resets {
			resets = n
			if modelAdam.StepCount != 0 {
				t.Errorf("step %d: a model reset left its Adam at step %d", step, modelAdam.StepCount)
			}
			for i := range modelAdam.ExpAvg {
				for _, v := range append(tVals(t, modelAdam.ExpAvg[i]), tVals(t, modelAdam.ExpAvgSq[i])...) {
					if v != 0 {
						t.Fatalf("step %d: model Adam state not cleared by the reset", step)
					}
				}
			}
			after := tVals(t, r.model.params[0])
			if d, _ := maxAbsDiff(after, before); d == 0 {
				t.Errorf("step %d: reset did not re-initialise the model", step)
			}
			if dev := maxUniformDeviation(t, y.Y, 10); dev == 0 {
				t.Errorf("step %d: labels are uniform after a model reset", step)
			}
		} else if want := int64(r.tracker.StepsSinceReset() + len(r.pending)); modelAdam.StepCount != want {
			// (steps not read yet are steps since the last reset: a reset is always read at once)
			t.Fatalf("step %d: model Adam step %d, want %d (steps since the last reset)", step, modelAdam.StepCount, want)
		}
	}
	if resets < 2 {
		t.Fatalf("no two model resets within 300 steps with window 2 (resets %v)", r.tracker.Resets())
	}
	t.Logf("resets %v after %d steps; label Adam at step %d", r.tracker.Resets(), r.pos.Step, labelAdam.StepCount)
}

// maxUniformDeviation is max |y − 1/C| over the table.
func maxUniformDeviation(tb testing.TB, y *torch.Tensor, classes int) float64 {
	var d float64
	for _, v := range tVals(tb, y) {
		d = max(d, math.Abs(v-1/float64(classes)))
	}
	return d
}
