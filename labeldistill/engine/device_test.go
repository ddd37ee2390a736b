package engine

// device_test.go: the device-parametrised tests of the algorithm. They run on testDevice
// (the CPU by default, a GPU with LDTORCH_TEST_DEVICE=cuda) and compare with the CPU.

import (
	"context"
	"math"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// TestDeviceDistill runs a tiny LD and LD RR distillation (real MNIST, model resets) on the
// test device and on the CPU. On the CPU the two are the same run and must agree exactly;
// on a GPU the kernels round differently, and a flipped prediction can move a reset, so
// the GPU run must be sound (as many steps, finite labels whose rows sum to 1) and its
// test accuracy near the CPU's.
func TestDeviceDistill(t *testing.T) {
	dev := testDevice(t)
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	for _, method := range []string{config.MethodLD, config.MethodRR} {
		t.Run(method, func(t *testing.T) {
			cfg := testkit.SmallConfig(method)
			cfg.CheckpointEvery, cfg.Epochs = -1, 2
			want, err := testDistill(context.Background(), cfg, WithData(ds))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Device = dev.String()
			got, err := testDistill(context.Background(), cfg, WithData(ds))
			if err != nil {
				t.Fatalf("on %s: %v", dev, err)
			}
			if got.MetaSteps != want.MetaSteps {
				t.Fatalf("%d meta-steps on %s, %d on the CPU", got.MetaSteps, dev, want.MetaSteps)
			}
			classes := ds.Classes
			for i := 0; i < len(got.Labels); i += classes {
				sum := 0.0
				for _, v := range got.Labels[i : i+classes] {
					if math.IsNaN(float64(v)) || v < 0 || v > 1 {
						t.Fatalf("label row %d on %s: %v", i/classes, dev, got.Labels[i:i+classes])
					}
					sum += float64(v)
				}
				if math.Abs(sum-1) > 1e-4 {
					t.Fatalf("label row %d on %s sums to %v", i/classes, dev, sum)
				}
			}
			t.Logf("%s: test accuracy %.2f%% on %s, %.2f%% on the CPU; resets %v and %v", method, got.TestMean, dev, want.TestMean, got.Resets, want.Resets)
			if !dev.IsCUDA() {
				if got.TestMean != want.TestMean || len(got.Labels) != len(want.Labels) {
					t.Fatal("two CPU runs of one configuration differ")
				}
				for i := range got.Labels {
					if got.Labels[i] != want.Labels[i] {
						t.Fatalf("two CPU runs of one configuration differ at label %d", i)
					}
				}
			} else if math.Abs(got.TestMean-want.TestMean) > 10 {
				t.Errorf("test accuracy %.2f%% on %s, %.2f%% on the CPU", got.TestMean, dev, want.TestMean)
			}
		})
	}
}

// TestDeviceBatchedEvaluation: on the test device, the batched evaluation (grouped bodies
// on a GPU, per-model on the CPU) gives each model the accuracy the sequential path gives
// it, to within one test image; LD and RR.
func TestDeviceBatchedEvaluation(t *testing.T) {
	dev := testDevice(t)
	tScope(t)
	oneThread(t)
	for _, rr := range []bool{false, true} {
		bc := batchedCase{arch: "lenet", shape: [3]int64{1, 28, 28}, rr: rr, opt: train.AdamSpec(1e-3), steps: 5, nBase: 30, batch: 10, nTest: 600}
		tr, x, y := randomTrainer(t, bc, torch.Float, 7)
		tr.Device = dev
		tr.Images, tr.Labels = tT(t)(tr.Images.To(dev)), tT(t)(tr.Labels.To(dev))
		x, y = tT(t)(x.To(dev)), tT(t)(y.To(dev))
		ctx := context.Background()
		seq := tNeed[[]float64](t)(evaluateModelsSequential(ctx, tr, bc.steps, 3, 9, "test", x, y))
		bat := tNeed[[]float64](t)(tr.Test(ctx, bc.steps, 3, 9, "test", x, y))
		t.Logf("rr=%v on %s (%v): sequential %v, batched %v", rr, dev, train.Mode(dev), seq, bat)
		for i := range seq {
			if math.Abs(seq[i]-bat[i]) > 100/float64(bc.nTest)+1e-9 {
				t.Errorf("rr=%v model %d on %s: %.4f batched vs %.4f sequential", rr, i, dev, bat[i], seq[i])
			}
			if train.Mode(dev) == nets.BodyPerModel && seq[i] != bat[i] {
				t.Errorf("rr=%v model %d: per-model bodies must give the sequential accuracy exactly", rr, i)
			}
		}
	}
}

// TestDeviceMetaGraph: with LDTORCH_CUDA_GRAPHS=all the meta-step on a GPU is recorded once
// as a CUDA graph and replayed; a tiny LD and LD RR run (model resets included) then takes
// as many meta-steps as the eager one, with labels and test accuracy near its own (the
// GPU's eager meta-loop is not bit-reproducible either: its index gradients add with
// atomics). On the CPU the variable changes nothing: the same run, bit for bit.
func TestDeviceMetaGraph(t *testing.T) {
	dev := testDevice(t)
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	for _, method := range []string{config.MethodLD, config.MethodRR} {
		t.Run(method, func(t *testing.T) {
			cfg := testkit.SmallConfig(method)
			cfg.CheckpointEvery, cfg.Epochs, cfg.Device = -1, 2, dev.String()
			run := func(graphs string) (*Result, int64, int64) {
				if err := torch.SetCUDAGraphs(graphs); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = torch.SetCUDAGraphs("on") })
				c0, r0, _ := train.CUDAGraphStatus()
				res, err := testDistill(context.Background(), cfg, WithData(ds))
				if err != nil {
					t.Fatalf("LDTORCH_CUDA_GRAPHS=%s: %v", graphs, err)
				}
				c1, r1, failed := train.CUDAGraphStatus()
				if failed != nil {
					t.Fatalf("a capture failed: %v", failed)
				}
				return res, c1 - c0, r1 - r0
			}
			eager, _, _ := run("off")
			graphed, captured, replayed := run("all")
			if graphed.MetaSteps != eager.MetaSteps {
				t.Fatalf("%d meta-steps with the graph, %d without", graphed.MetaSteps, eager.MetaSteps)
			}
			worst := 0.0
			for i := range eager.Labels {
				worst = math.Max(worst, math.Abs(float64(graphed.Labels[i]-eager.Labels[i])))
			}
			t.Logf("%s on %s: %d captures, %d replays; labels within %.2e; test %.2f%% and %.2f%% (eager); resets %v and %v",
				method, dev, captured, replayed, worst, graphed.TestMean, eager.TestMean, graphed.Resets, eager.Resets)
			if !dev.IsCUDA() {
				if captured != 0 || worst != 0 || graphed.TestMean != eager.TestMean {
					t.Fatalf("on the CPU LDTORCH_CUDA_GRAPHS=all changed the run (%d captures, labels %.2e apart)", captured, worst)
				}
				return
			}
			// The meta-step's graph, plus one per fresh training.
			if replayed < int64(graphed.MetaSteps-metaGraphWarmup) {
				t.Errorf("%d steps replayed in all, fewer than the %d meta-steps after the warm-up", replayed, graphed.MetaSteps-metaGraphWarmup)
			}
			// The labels kept are those of the best validation: compared where both kept
			// the same epoch's.
			sameEpoch := graphed.BestValidation.Epoch == eager.BestValidation.Epoch
			if (sameEpoch && worst > 0.05) || math.Abs(graphed.TestMean-eager.TestMean) > 5 {
				t.Errorf("labels %.2e apart (kept after epochs %d and %d), test accuracy %.2f%% against %.2f%%",
					worst, graphed.BestValidation.Epoch, eager.BestValidation.Epoch, graphed.TestMean, eager.TestMean)
			}
		})
	}
}
