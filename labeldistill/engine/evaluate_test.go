package engine

// evaluate_test.go: training and scoring fresh models (docs/ALGORITHM.md §7): chunked accuracy
// against a direct count, the trainer's probes, determinism and cancellation, that models
// trained on true one-hot labels fit them (LD and RR), and Trainer.Test's seeding.

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// argmaxRows is the arg-max of each row of a (B, C) tensor, computed in Go.
func argmaxRows(t *testing.T, logits *torch.Tensor) []int64 {
	v := tVals(t, logits)
	c := int(logits.Shape()[1])
	out := make([]int64, len(v)/c)
	for i := range out {
		best := 0
		for j := 1; j < c; j++ {
			if v[i*c+j] > v[i*c+best] {
				best = j
			}
		}
		out[i] = int64(best)
	}
	return out
}

func TestAccuracyChunked(t *testing.T) {
	tScope(t)
	ds := testkit.CachedMNIST(t, 5000, 1000, 2000, 20)
	target := tNeed[deviceSplit](t)(upload(&ds.TargetSet, ds.Shape, torch.CPU))
	defer target.free()
	const n, right = 2500, 1234 // more than one chunk of train.EvalChunk
	if n <= train.EvalChunk {
		t.Fatalf("train.EvalChunk %d: the test needs more than one chunk", train.EvalChunk)
	}
	x := tT(t)(target.x.Narrow(0, 0, n))
	net := tNeed[*nets.Net](t)(nets.New("lenet", 1, 28, 28, 10))
	cfg := tNeed[config.Config](t)(config.Default().Resolved())
	for _, rr := range []bool{false, true} {
		gen := tNeed[*torch.Generator](t)(torch.NewGenerator(61))
		l := tNeed[*learner](t)(newLearner(net, rr, cfg, train.AdamSpec(1e-3), gen, torch.CPU))
		gen.Close()
		if rr {
			// A random W, so that RR logits are not all zero.
			rng := tRNG(62)
			w := make([]float32, 85*10)
			for i := range w {
				w[i] = float32(rng.NormFloat64())
			}
			src := tT(t)(torch.FromFloat32(w, 85, 10))
			tOK(t, torch.NoGrad(func() error { return l.w.Copy_(src) }))
		}
		var pred []int64
		tOK(t, torch.NoGrad(func() error {
			logits, err := l.logits(x)
			if err == nil {
				pred = argmaxRows(t, logits)
			}
			return err
		}))
		// Labels that agree with the prediction on exactly `right` examples, spread over
		// both chunks.
		y := make([]int64, n)
		for i := range y {
			y[i] = (pred[i] + 1) % 10
		}
		for k := 0; k < right; k++ {
			i := 2 * k // 1000 even indices of the first chunk, then the second chunk
			if k >= 1000 {
				i = 2000 + (k - 1000)
			}
			y[i] = pred[i]
		}
		correct := 0
		for i := range y {
			if y[i] == pred[i] {
				correct++
			}
		}
		yt := tT(t)(torch.FromInt64(y, n))
		acc, err := accuracySequential(l, x, yt)
		if err != nil {
			t.Fatal(err)
		}
		if want := 100 * float64(correct) / n; math.Abs(acc-want) > 1e-9 || correct != right {
			t.Errorf("rr=%v: accuracy %.10g%%, want %.10g%% (%d of %d)", rr, acc, want, correct, n)
		}
		l.close()
	}
}

// trueTable is the one-hot table of the base examples' classes.
func trueTable(t *testing.T, ds *Data) *torch.Tensor {
	v := make([]float32, ds.Base.N*ds.Classes)
	for i, y := range ds.Base.Labels {
		v[i*ds.Classes+int(y)] = 1
	}
	return tT(t)(torch.FromFloat32(v, int64(ds.Base.N), int64(ds.Classes)))
}

func TestTrainer(t *testing.T) {
	tScope(t)
	ds := testkit.CachedMNIST(t, 5000, 1000, 2000, 20)
	base := tNeed[deviceSplit](t)(upload(&ds.Base, ds.Shape, torch.CPU))
	defer base.free()
	test := tNeed[deviceSplit](t)(upload(&ds.Test, ds.Shape, torch.CPU))
	defer test.free()
	cfg := config.Default()
	cfg.BaseExamples, cfg.InnerBatch = 20, 10
	cfg.Baselines = []string{}
	cfg = tNeed[config.Config](t)(cfg.Resolved())
	net := tNeed[*nets.Net](t)(nets.New("lenet", 1, 28, 28, 10))
	table := trueTable(t, ds)
	ctx := context.Background()
	for _, rr := range []bool{false, true} {
		tr := &train.Trainer{Net: net, RR: rr, Cfg: cfg, Images: base.x, Labels: table, Batch: 10, Opt: train.AdamSpec(1e-3), Device: torch.CPU}
		// Probes run after exactly the listed steps and see the model the sequential oracle
		// has after as many steps (accuracy on 500 test images bit for bit; all parameters
		// bit for bit at the end).
		var probed []int
		var probedAcc, oracleAcc []float64
		px := tT(t)(test.x.Narrow(0, 0, 500))
		py := tT(t)(test.y.Narrow(0, 0, 500))
		l, err := tr.TrainOne(ctx, 120, 5, &train.Probe{At: []int{1, 10, 120}, Fn: func(step int, l *train.Models) error {
			probed = append(probed, step)
			a, err := l.Accuracy(ctx, px, py)
			probedAcc = append(probedAcc, a)
			return err
		}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(probed, []int{1, 10, 120}) {
			t.Errorf("rr=%v: probes after %v, want [1 10 120]", rr, probed)
		}
		oracle, err := trainSequential(ctx, tr, 120, 5, []int{1, 10, 120}, func(step int, l *learner) error {
			a, err := accuracySequential(l, px, py)
			oracleAcc = append(oracleAcc, a)
			return err
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(probedAcc, oracleAcc) {
			t.Errorf("rr=%v: accuracies at the probes %v, the sequential oracle's %v", rr, probedAcc, oracleAcc)
		}
		for i := range oracle.params {
			if !slices.Equal(tVals(t, l.Params[0][i]), tVals(t, oracle.params[i])) {
				t.Errorf("rr=%v: %s after 120 steps differs from the sequential oracle's", rr, l.Specs[i].Name)
			}
		}
		oracle.close()
		// One-hot labels of 20 examples are fitted after 120 steps.
		fit := tNeed[float64](t)(l.Accuracy(ctx, base.x, base.y))
		if fit < 90 {
			t.Errorf("rr=%v: a model trained 120 steps on the 20 true labels fits only %.1f%% of them", rr, fit)
		}
		// Same seed: the same model, bit for bit; another seed: another model.
		l2 := tNeed[*train.Models](t)(tr.TrainOne(ctx, 120, 5, nil))
		l3 := tNeed[*train.Models](t)(tr.TrainOne(ctx, 120, 6, nil))
		for i := range l.Params[0] {
			a, b, c := tVals(t, l.Params[0][i]), tVals(t, l2.Params[0][i]), tVals(t, l3.Params[0][i])
			if !slices.Equal(a, b) {
				t.Errorf("rr=%v: two trainings with seed 5 differ in %s", rr, l.Specs[i].Name)
			}
			if slices.Equal(a, c) {
				t.Errorf("rr=%v: seeds 5 and 6 gave the same %s", rr, l.Specs[i].Name)
			}
		}
		if rr {
			if slices.Equal(tVals(t, l.W[0]), make([]float64, 850)) {
				t.Errorf("RR training left W at zero")
			}
			if !slices.Equal(tVals(t, l.W[0]), tVals(t, l2.W[0])) {
				t.Errorf("two RR trainings with seed 5 differ in W")
			}
		}
		// A probe error stops training and is returned.
		stop := errors.New("stop")
		if _, err := tr.TrainOne(ctx, 20, 5, &train.Probe{At: []int{3}, Fn: func(int, *train.Models) error { return stop }}); !errors.Is(err, stop) {
			t.Errorf("rr=%v: probe error not returned: %v", rr, err)
		}
		// Cancellation is noticed.
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := tr.TrainOne(cctx, 60, 5, nil); !errors.Is(err, context.Canceled) {
			t.Errorf("rr=%v: training under a cancelled context: %v", rr, err)
		}
		// Trainer.Test: model i is a training from train.Seed(seed, purpose, i).
		accs, err := tr.Test(ctx, 30, 3, 9, "check", test.x, test.y)
		if err != nil {
			t.Fatal(err)
		}
		if len(accs) != 3 {
			t.Fatalf("rr=%v: %d accuracies, want 3", rr, len(accs))
		}
		for i, a := range accs {
			li := tNeed[*train.Models](t)(tr.TrainOne(ctx, 30, train.Seed(9, "check", i), nil))
			want := tNeed[float64](t)(li.Accuracy(ctx, test.x, test.y))
			li.Close()
			if a != want || a < 0 || a > 100 {
				t.Errorf("rr=%v: model %d accuracy %v, retrained from its seed %v", rr, i, a, want)
			}
		}
		if accs[0] == accs[1] && accs[1] == accs[2] {
			t.Errorf("rr=%v: three evaluation models with equal accuracy %v: seeds not independent?", rr, accs[0])
		}
		t.Logf("rr=%v: fit %.1f%%, 30-step test accuracies %v", rr, fit, accs)
		l.Close()
		l2.Close()
		l3.Close()
	}
	if a, b := train.Seed(1, "test", 0), train.Seed(1, "test", 1); a == b || train.Seed(1, "test", 0) != a || train.Seed(1, "validation", 0) == a || train.Seed(2, "test", 0) == a {
		t.Errorf("train.Seed does not separate seeds, purposes and indices")
	}
}
