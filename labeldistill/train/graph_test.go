package train

// graph_test.go: fresh models' steps as a CUDA graph against the same steps taken eagerly.

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/devicetest"
)

// TestTrainerCUDAGraph: on a GPU (LDTORCH_TEST_DEVICE=cuda) a training's steps are one
// captured graph, replayed, and the models it trains are those the eager steps
// (LDTORCH_CUDA_GRAPHS=off) train, to rounding (the graph's Adam keeps its step count on the
// device): LD and RR recipes, one model and three together. Off a GPU, and where the
// recipe cannot be replayed (SGD), no graph is made.
func TestTrainerCUDAGraph(t *testing.T) {
	dev := devicetest.Device(t)
	s := torch.NewScope()
	defer s.Close()
	net, cfg := lenetMNIST(t)
	rng := rand.New(rand.NewPCG(5, 6))
	images := randnOn(t, rng, dev, 1, 40, 1, 28, 28)
	labels := must(t)(torch.Softmax(randnOn(t, rng, dev, 2, 40, 10), 1))
	steps := 30
	if !dev.IsCUDA() {
		steps = graphWarmup + 3 // what runs here is the eager path twice: keep it short
	}
	for _, rr := range []bool{false, true} {
		for _, models := range []int{1, 3} {
			tr := &Trainer{Net: net, RR: rr, Cfg: cfg, Images: images, Labels: labels, Batch: 16, Opt: AdamSpec(1e-3), Device: dev}
			seeds := make([]uint64, models)
			for i := range seeds {
				seeds[i] = uint64(100 + i)
			}
			train := func(graphs string) (*Models, int64, int64) {
				if err := torch.SetCUDAGraphs(graphs); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = torch.SetCUDAGraphs("on") })
				c0, r0, _ := CUDAGraphStatus()
				l, err := tr.TrainModels(context.Background(), steps, seeds, Mode(dev), nil)
				if err != nil {
					t.Fatalf("rr %v, %d models, graphs %s: %v", rr, models, graphs, err)
				}
				c1, r1, failed := CUDAGraphStatus()
				if failed != nil {
					t.Fatalf("a capture failed: %v", failed)
				}
				return l, c1 - c0, r1 - r0
			}
			eager, c, r := train("off")
			defer eager.Close()
			if c != 0 || r != 0 {
				t.Errorf("LDTORCH_CUDA_GRAPHS=off: %d captures, %d replays", c, r)
			}
			graphed, c, r := train("on")
			defer graphed.Close()
			wantC, wantR := int64(0), int64(0)
			if dev.IsCUDA() {
				wantC, wantR = 1, int64(steps-graphWarmup)
			}
			if c != wantC || r != wantR {
				t.Errorf("rr %v, %d models on %s: %d captures and %d replays, want %d and %d", rr, models, dev, c, r, wantC, wantR)
			}
			if a, ok := graphed.Opt.(*torch.Adam); !ok || a.StepCount != int64(steps) {
				t.Errorf("rr %v, %d models: the optimiser counts %v steps, want %d", rr, models, graphed.Opt, steps)
			}
			worst := 0.0
			for i := range eager.Params {
				for j := range eager.Params[i] {
					a, err := eager.Params[i][j].Float32s()
					if err != nil {
						t.Fatal(err)
					}
					b, err := graphed.Params[i][j].Float32s()
					if err != nil {
						t.Fatal(err)
					}
					for k := range a {
						worst = math.Max(worst, math.Abs(float64(a[k]-b[k])))
					}
				}
			}
			t.Logf("rr %v, %d models on %s: parameters within %.2e of the eager steps'", rr, models, dev, worst)
			if !(worst <= 1e-3) {
				t.Errorf("rr %v, %d models: parameters %.2e from the eager steps'", rr, models, worst)
			}
		}
	}
	// SGD's first step differs from the others (its buffer starts as the gradient): no graph.
	tr := &Trainer{Net: net, Cfg: cfg, Images: images, Labels: labels, Batch: 16, Opt: OptSpec{Kind: "sgd", LR: 0.01, Momentum: 0.9}, Device: dev}
	c0, _, _ := CUDAGraphStatus()
	l, err := tr.TrainModels(context.Background(), 10, []uint64{1}, Mode(dev), nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if c1, _, _ := CUDAGraphStatus(); c1 != c0 {
		t.Errorf("an SGD training captured a graph")
	}
}
