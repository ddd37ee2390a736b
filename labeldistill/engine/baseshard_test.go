package engine

// baseshard_test.go: the base batch split over two ranks (baseShard) gives one process's
// gradients, in float64: LD RR's features and θ gradient, LD's inner gradient, θ′ and label
// gradient; and each rank's own part of a gradient is a part, not the whole.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/dist"
)

func TestBaseShardGivesOneProcesssGradient(t *testing.T) {
	if os.Getenv("LDTORCH_SHARD_RANK") != "" {
		g := tJoinRank(t)
		baseShardRank(t, g)
		ldShardRank(t, g)
		return
	}
	if !torch.DistributedAvailable() {
		t.Skip("this libtorch has no c10d collectives")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := dist.Launch(ctx, dist.LaunchOptions{N: 2, Path: os.Args[0],
		Args:   []string{"-test.run=^TestBaseShardGivesOneProcesssGradient$", "-test.count=1", "-test.v"},
		Env:    append(os.Environ(), "LDTORCH_SHARD_RANK=1", "OMP_NUM_THREADS=1"),
		Stdout: os.Stderr, Stderr: os.Stderr, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err) // a rank's failure: its messages are above
	}
}

// baseShardRank is one rank: a float64 LeNet RR learner and a 9-row base batch, the same on
// both ranks (one seed); the feature step's loss differentiated whole, then split.
func baseShardRank(t *testing.T, g *dist.Group) {
	tScope(t)
	T := tT(t)
	const rows, classes = 9, 10
	cfg := config.Default()
	cfg.Method, cfg.InnerBatch = config.MethodRR, rows
	net := tNeed[*nets.Net](t)(nets.New("lenet", 1, 28, 28, classes))
	gen := tNeed[*torch.Generator](t)(torch.NewGenerator(71))
	defer gen.Close()
	l := &learner{net: net, rr: true, specs: net.Body, cfg: cfg}
	l.params = tNeed[[]*torch.Tensor](t)(nets.InitParams(net.Body, gen, torch.CPU, torch.Double))
	defer torch.FreeAll(l.params)
	l.buffers = tNeed[[]*torch.Tensor](t)(nets.NewBuffers(net.Buffers, torch.CPU, torch.Double))
	x := T(torch.Randn([]int64{rows, 1, 28, 28}, gen, torch.WithDType(torch.Double)))
	y := T(torch.Softmax(T(torch.Randn([]int64{rows, classes}, gen, torch.WithDType(torch.Double))), 1))
	// a W kept from earlier steps, so the pseudo-step mixes it in, and s ≠ 1
	l.w = T(torch.Randn([]int64{net.FeatureDim + 1, classes}, gen, torch.WithDType(torch.Double)))
	l.scale = T(torch.Full([]int64{1}, 1.3, torch.WithDType(torch.Double), torch.WithRequiresGrad()))

	// thetaGrad is ∂(soft-CE of s·Z·W against y)/∂θ, W the ridge solve on Z, with z = Z.
	thetaGrad := func(z *torch.Tensor) []*torch.Tensor {
		w, _, err := train.RRWeights(z, y, l.w, cfg)
		if err != nil {
			t.Fatal(err)
		}
		loss := T(torch.SoftCrossEntropy(T(train.RRLogits(z, w, l.scale)), y))
		return tNeed[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{loss}, l.params, torch.GradOpts{}))
	}
	whole := T(l.features(x, true))
	want := thetaGrad(whole)

	p := &parallel{g: g, baseSplit: BaseSplitOn} // LeNet: split only when asked (splitsBase)
	shard := p.baseShard(cfg, net, rows)
	if shard == nil || shard.hi-shard.lo != []int{5, 4}[g.Rank()] {
		t.Fatalf("rank %d: shard %+v, want rows %v", g.Rank(), shard, [][2]int{{0, 5}, {5, 9}}[g.Rank()])
	}
	split := T(tNeed[*featureGather](t)(shard.startFeatures(l, x)).finish())
	if d := relDiff(t, split, whole); d > 1e-12 {
		t.Errorf("rank %d: gathered features differ from one process's by %.3g (relative)", g.Rank(), d)
	}
	got := thetaGrad(split)
	for i := range got {
		if d := relDiff(t, got[i], want[i]); d < 1e-3 {
			t.Errorf("rank %d, %s: the rank's own part of θ's gradient is already the whole (%.3g off): nothing was split", g.Rank(), l.specs[i].Name, d)
		}
	}
	tOK(t, shard.sum(got))
	for i := range got {
		if d := relDiff(t, got[i], want[i]); d > 1e-12 {
			t.Errorf("rank %d, %s: summed gradient differs from one process's by %.3g (relative)", g.Rank(), l.specs[i].Name, d)
		}
	}
	if !t.Failed() {
		fmt.Fprintf(os.Stderr, "rank %d: rows [%d, %d) of %d; features and θ's gradient (%d tensors) agree with one process's within 1e-12\n",
			g.Rank(), shard.lo, shard.hi, rows, len(got))
	}
}

// ldShardRank is one rank: a float64 LeNet classifier, a 9-row base batch with learnt
// labels and a 7-example target batch, the same on both ranks (one seed); LD's meta-step
// (inner gradient, θ′, target loss, label gradient) taken whole, then with the base rows
// split 5/4 and the target examples 4/3, the label gradients combined as the meta-loop does.
func ldShardRank(t *testing.T, g *dist.Group) {
	tScope(t)
	T := tT(t)
	const rows, targets, classes, alpha = 9, 7, 10, 0.05
	cfg := config.Default()
	cfg.Method, cfg.InnerBatch = config.MethodLD, rows
	net := tNeed[*nets.Net](t)(nets.New("lenet", 1, 28, 28, classes))
	gen := tNeed[*torch.Generator](t)(torch.NewGenerator(73))
	defer gen.Close()
	l := &learner{net: net, specs: net.Params(), cfg: cfg}
	l.params = tNeed[[]*torch.Tensor](t)(nets.InitParams(l.specs, gen, torch.CPU, torch.Double))
	defer torch.FreeAll(l.params)
	x := T(torch.Randn([]int64{rows, 1, 28, 28}, gen, torch.WithDType(torch.Double)))
	labels := T(torch.Randn([]int64{rows, classes}, gen, torch.WithDType(torch.Double), torch.WithRequiresGrad()))
	y := T(torch.Softmax(labels, 1))
	xt := T(torch.Randn([]int64{targets, 1, 28, 28}, gen, torch.WithDType(torch.Double)))
	yt := T(torch.FromInt64([]int64{3, 1, 4, 1, 5, 9, 2}, targets))

	// one process: the whole base and target batches
	inner := T(torch.SoftCrossEntropy(T(net.Forward(l.params, nil, x, true)), y))
	wholeG := tNeed[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{inner}, l.params, torch.GradOpts{CreateGraph: true}))
	var c torch.Chain
	wantFast, _, err := innerStep(l, wholeG, nil, alpha, &c)
	tOK(t, err)
	loss := T(torch.CrossEntropyInRange(T(net.Forward(wantFast, nil, xt, true)), yt))
	wantDY := tNeed[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{loss}, []*torch.Tensor{labels}, torch.GradOpts{}))

	// two ranks
	p := &parallel{g: g, baseSplit: BaseSplitOn} // LeNet: split only when asked (splitsBase)
	shard := p.baseShard(cfg, net, rows)
	if shard == nil || !shard.rowParts || shard.hi-shard.lo != []int{5, 4}[g.Rank()] {
		t.Fatalf("rank %d: shard %+v, want rows %v, label rows as parts", g.Rank(), shard, [][2]int{{0, 5}, {5, 9}}[g.Rank()])
	}
	y = T(torch.Softmax(labels, 1)) // its own graph, as each meta-step builds its base batch
	innerPart := T(torch.SoftCrossEntropy(T(net.Forward(l.params, nil, T(shard.rows(x)), true)), T(shard.rows(y))))
	innerPart = T(innerPart.MulScalar(shard.share()))
	partG := tNeed[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{innerPart}, l.params, torch.GradOpts{CreateGraph: true}))
	fast, summed, err := innerStep(l, partG, shard, alpha, &c)
	tOK(t, err)
	tOK(t, c.Err())
	for i := range partG {
		if d := relDiff(t, partG[i], wholeG[i]); d < 1e-3 {
			t.Errorf("rank %d, %s: the rank's part of the inner gradient is already the whole (%.3g off): nothing was split", g.Rank(), l.specs[i].Name, d)
		}
		if d := relDiff(t, summed[i], wholeG[i]); d > 1e-12 {
			t.Errorf("rank %d, %s: summed inner gradient differs from one process's by %.3g (relative)", g.Rank(), l.specs[i].Name, d)
		}
		if d := relDiff(t, fast[i], wantFast[i]); d > 1e-12 {
			t.Errorf("rank %d, %s: θ′ differs from one process's by %.3g (relative)", g.Rank(), l.specs[i].Name, d)
		}
	}
	lo, hi := shardOf(targets, g.Rank(), 2)
	lossPart := T(torch.CrossEntropyInRange(T(net.Forward(fast, nil, T(xt.Narrow(0, int64(lo), int64(hi-lo))), true)),
		T(yt.Narrow(0, int64(lo), int64(hi-lo)))))
	dY, err := shard.labelGradient(lossPart, fast, []*torch.Tensor{labels}, float64(hi-lo)/targets)
	tOK(t, err)
	if d := relDiff(t, dY[0], wantDY[0]); d < 1e-3 {
		t.Errorf("rank %d: the rank's label gradient is already the whole (%.3g off): nothing was split", g.Rank(), d)
	}
	zero := T(torch.Zeros([]int64{}, torch.WithDType(torch.Double)))
	got, _, err := p.combine(dY, lossPart, zero, hi-lo, targets, true)
	tOK(t, err)
	if d := relDiff(t, got[0], wantDY[0]); d > 1e-12 {
		t.Errorf("rank %d: combined label gradient differs from one process's by %.3g (relative)", g.Rank(), d)
	}
	if !t.Failed() {
		fmt.Fprintf(os.Stderr, "rank %d: LD, base rows [%d, %d) of %d, target [%d, %d) of %d; inner gradient, θ′ and label gradient agree with one process's within 1e-12\n",
			g.Rank(), shard.lo, shard.hi, rows, lo, hi, targets)
	}
}

// TestSplitsBaseByNetwork: by default LeNet's base batch stays whole on every rank and the
// larger networks' is split; on and off override that; the names parse back.
func TestSplitsBaseByNetwork(t *testing.T) {
	for _, c := range []struct {
		split BaseSplit
		arch  string
		want  bool
	}{
		{BaseSplitAuto, "lenet", false}, {BaseSplitAuto, "convnet", true}, {BaseSplitAuto, "alexnet", true},
		{BaseSplitOn, "lenet", true}, {BaseSplitOff, "convnet", false}, {BaseSplitOff, "lenet", false},
	} {
		if got := (&parallel{baseSplit: c.split}).splitsBase(&nets.Net{Arch: c.arch}); got != c.want {
			t.Errorf("%s on %s: splits %v, want %v", c.split, c.arch, got, c.want)
		}
	}
	for _, s := range []BaseSplit{BaseSplitAuto, BaseSplitOn, BaseSplitOff} {
		if got, err := ParseBaseSplit(s.String()); err != nil || got != s {
			t.Errorf("ParseBaseSplit(%q) = %v, %v", s.String(), got, err)
		}
	}
	if s, err := ParseBaseSplit(""); err != nil || s != BaseSplitAuto {
		t.Errorf(`ParseBaseSplit("") = %v, %v; want auto`, s, err)
	}
	if _, err := ParseBaseSplit("yes"); err == nil || !strings.Contains(err.Error(), `"yes"`) || !strings.Contains(err.Error(), "auto, on, off") {
		t.Errorf(`ParseBaseSplit("yes"): %v`, err)
	}
}
