package engine

// resnet_test.go: distillation through the authors' CIFAR ResNet (BatchNorm: batch
// statistics in the meta-step and fresh models' training, running statistics in
// evaluation), LD and LD RR, on real MNIST images: finite label tables, the BatchNorm
// running statistics in the loop's state, and a checkpoint that resumes bit for bit.

import (
	"context"
	"errors"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
)

func TestDistillResNet(t *testing.T) {
	testkit.RestoreThreads(t)
	ds := testkit.CachedMNIST(t, 256, 200, 200, 10)
	for _, method := range []string{config.MethodLD, config.MethodRR} {
		t.Run(method, func(t *testing.T) {
			cfg := config.Default()
			cfg.Method, cfg.Arch = method, config.ArchResNet
			cfg.BaseExamples, cfg.InnerBatch, cfg.OuterBatch = 10, 10, 64
			cfg.Epochs, cfg.ValidateEvery, cfg.EvalModels, cfg.ResetWindow = 2, 1, 1, 2
			cfg.Baselines, cfg.Threads, cfg.CheckpointEvery = []string{}, 1, -1
			full, err := testDistill(context.Background(), cfg, WithData(ds))
			if err != nil {
				t.Fatal(err)
			}
			checkLabelTable(t, full.Labels, 10, 10)
			if full.Config.EvalArch != config.ArchResNet || full.MetaSteps != 8 {
				t.Fatalf("eval_arch %q, %d meta-steps", full.Config.EvalArch, full.MetaSteps)
			}
			// Cancelled mid-run and resumed: BatchNorm's running statistics come back with
			// the parameters.
			dir := t.TempDir()
			ctx, progress := cancelAt(5, nil)
			if _, err := testDistill(ctx, cfg, WithData(ds), progress, WithCheckpointDir(dir)); !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want context.Canceled", err)
			}
			_, meta, err := readSnapshot(dir + "/ckpt-000000005.npz")
			if err != nil || len(meta.Buffers) == 0 {
				t.Fatalf("checkpoint at 5: %d buffers, %v", len(meta.Buffers), err)
			}
			resumed, err := testDistill(context.Background(), cfg, WithData(ds), WithResume(dir))
			if err != nil {
				t.Fatal(err)
			}
			if !testkit.SameBits(resumed.Labels, full.Labels) || !testkit.SameFloat64Bits(resumed.TestAccuracies, full.TestAccuracies) {
				t.Fatalf("resumed run differs from the uninterrupted one")
			}
		})
	}
}
