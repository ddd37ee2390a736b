package engine

// torchscript_test.go: a network given as a TorchScript file distils like the network
// written in nets: the LeNet that scripts/export_torchscript.py exports (testdata/
// torchscript/lenet.pt, nets' layout and names) gives, from the same seed, the labels of
// nets' LeNet under LD and LD RR.

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
	"github.com/ldtorch/ldtorch/nets"
)

func TestTorchScriptLeNetDistilsLikeLeNet(t *testing.T) {
	testkit.RestoreThreads(t)
	if config.TorchScriptPrefix != nets.TorchScriptPrefix {
		t.Fatalf("config says %q, nets %q", config.TorchScriptPrefix, nets.TorchScriptPrefix)
	}
	script := config.TorchScriptPrefix + filepath.Join("..", "..", "testdata", "torchscript", "lenet.pt")
	ds := testkit.SmallDataset(t)
	for _, method := range []string{config.MethodLD, config.MethodRR} {
		cfg := testkit.SmallConfig(method)
		cfg.CheckpointEvery = -1
		want, err := testDistill(context.Background(), cfg, WithData(ds))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Arch = script
		got, err := testDistill(context.Background(), cfg, WithData(ds))
		if err != nil {
			t.Fatalf("%s through %s: %v", method, script, err)
		}
		// The same operations in the same order (the module runs on the shim's kernels):
		// equal to float rounding, measured equal bit for bit.
		if d, at := testkit.MaxAbsDiff32(got.Labels, want.Labels); d > 1e-6 {
			t.Errorf("%s: labels differ by %g (element %d) from nets' LeNet", method, d, at)
		}
		if got.Config.Arch != script || got.Config.EvalArch != script {
			t.Errorf("%s: recorded arch %q, eval_arch %q", method, got.Config.Arch, got.Config.EvalArch)
		}
	}
}
