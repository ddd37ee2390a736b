package engine

// torchscript_test.go: a network given as a TorchScript file distils like the network
// written in nets: the LeNet that scripts/export_torchscript.py exports (testdata/
// torchscript/lenet.pt, nets' layout and names) gives, from the same seed, the labels of
// nets' LeNet under LD and LD RR; a module with an operator that has no second derivative
// (nodouble_mnist.pt) fails LD with an error naming the file, the operator and method rr,
// and distils under LD RR.

import (
	"context"
	"math"
	"path/filepath"
	"strings"
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

// TestTorchScriptWithoutDoubleBackward: nodouble_mnist.pt runs grid_sample, whose backward
// libtorch cannot differentiate again. On real MNIST, LD's first meta-step fails with an
// error that names the file, the operator and the way out (method rr); LD RR, which
// differentiates the network once, distils through the same module: its 24 meta-steps move
// the labels from the uniform 1/10 towards the base examples' own classes, and fresh
// models trained on them score above chance.
func TestTorchScriptWithoutDoubleBackward(t *testing.T) {
	testkit.RestoreThreads(t)
	file := filepath.Join("..", "..", "testdata", "torchscript", "nodouble_mnist.pt")
	ds := testkit.SmallDataset(t)
	cfg := testkit.SmallConfig(config.MethodLD)
	cfg.CheckpointEvery = -1
	cfg.Arch = config.TorchScriptPrefix + file
	_, err := testDistill(context.Background(), cfg, WithData(ds))
	if err == nil {
		t.Fatal("LD through a module without a double backward: no error")
	}
	for _, want := range []string{"meta-step 1 ", "torchscript " + file + ":", "second derivative",
		"grid_sampler_2d_backward is not implemented", "--method rr"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("LD's error lacks %q:\n%v", want, err)
		}
	}
	t.Log(err)

	dd := cfg
	dd.Method, dd.DDSteps, dd.DDEpochs = config.MethodDD, 2, 1
	_, err = testDistill(context.Background(), dd, WithData(ds))
	if err == nil {
		t.Fatal("method dd through a module without a double backward: no error")
	}
	for _, want := range []string{"torchscript " + file + ":", "method dd needs the second derivative",
		"grid_sampler_2d_backward is not implemented", "--method rr --learn images"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("method dd's error lacks %q:\n%v", want, err)
		}
	}
	t.Log(err)

	cfg.Method = config.MethodRR
	res, err := testDistill(context.Background(), cfg, WithData(ds))
	if err != nil {
		t.Fatalf("LD RR through %s: %v", file, err)
	}
	if res.MetaSteps != 24 || len(res.Labels) != 20*10 {
		t.Fatalf("%d meta-steps, %d label values; want 24 and 200", res.MetaSteps, len(res.Labels))
	}
	moved, agree := 0.0, 0
	for i := range 20 {
		row, best, sum := res.Labels[i*10:(i+1)*10], 0, 0.0
		for c, v := range row {
			if math.IsNaN(float64(v)) || v < 0 {
				t.Fatalf("label %d: %v", i, row)
			}
			sum += float64(v)
			moved = math.Max(moved, math.Abs(float64(v)-0.1))
			if v > row[best] {
				best = c
			}
		}
		if math.Abs(sum-1) > 1e-5 {
			t.Errorf("label %d sums to %v", i, sum)
		}
		if int64(best) == res.BaseClasses[i] {
			agree++
		}
	}
	// measured: moved 0.016, 14 of 20 arg-maxes on the true class (chance 2), test
	// accuracies 41.7 and 40.4 %
	if moved < 1e-3 || agree < 8 {
		t.Errorf("labels moved at most %.3g from 1/10, %d of 20 arg-maxes on the base example's class", moved, agree)
	}
	for i, a := range res.TestAccuracies {
		if !(a > 20) {
			t.Errorf("fresh model %d: %.2f %% on the test images", i, a)
		}
	}
	t.Logf("LD RR: labels moved up to %.3g, %d of 20 arg-maxes on the class, test accuracies %v", moved, agree, res.TestAccuracies)
}
