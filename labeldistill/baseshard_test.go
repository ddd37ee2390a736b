package labeldistill

// baseshard_test.go: LD RR's base batch split over two ranks (baseShard) gives one process's
// features and θ gradient, in float64, and each rank's own part of that gradient is a part,
// not the whole.

import (
	"context"
	"fmt"
	"os"
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
		baseShardRank(t)
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
func baseShardRank(t *testing.T) {
	g := tJoinRank(t)
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

	p := &parallel{g: g}
	shard := p.baseShard(cfg, true, rows)
	if shard == nil || shard.hi-shard.lo != []int{5, 4}[g.Rank()] {
		t.Fatalf("rank %d: shard %+v, want rows %v", g.Rank(), shard, [][2]int{{0, 5}, {5, 9}}[g.Rank()])
	}
	split := T(shard.features(l, x))
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
