//go:build long

package main

// torchscript_long_test.go: data-parallel runs through a network from a TorchScript file
// (multi-process, run by scripts/test-long.sh).

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
)

// TestParallelTorchScriptMatchesOneRank: LD and LD RR over two ranks (--nproc 2) through
// the exported LeNet (testdata/torchscript/lenet.pt, named by a path relative to the
// working folder, as a user gives it) learn one process's labels within labelTolerance, the
// bound of the built-in LeNet's two-rank test (TestParallelMatchesOneRank), with the same
// meta-steps and resets (oneAndTwoRanks checks both); each rank loads the module itself,
// and the report records the file as given.
func TestParallelTorchScriptMatchesOneRank(t *testing.T) {
	shared := sharedDatasets(t)
	arch := config.TorchScriptPrefix + filepath.Join("..", "..", "testdata", "torchscript", "lenet.pt")
	for _, method := range []string{config.MethodLD, config.MethodRR} {
		t.Run(method, func(t *testing.T) {
			a, b, d, t1, t2 := oneAndTwoRanks(t, shared, filepath.Join(t.TempDir(), "two"),
				"--arch", arch, "--method", method, "--baselines", "none")
			for _, r := range []*artifact.Report{a.Report, b.Report} {
				if r.Config.Arch != arch || r.Config.EvalArch != arch || r.TrainingRecipe.Arch != arch {
					t.Errorf("recorded arch %q, eval_arch %q, training_recipe.arch %q; want %q",
						r.Config.Arch, r.Config.EvalArch, r.TrainingRecipe.Arch, arch)
				}
			}
			ra, rb := a.Report.TestAccuracies, b.Report.TestAccuracies
			if len(ra) != 3 || len(rb) != 3 {
				t.Fatalf("test accuracies %v / %v", ra, rb)
			}
			for i := range ra {
				// the same models from labels equal to ~1e-6: an image or two may flip
				if math.Abs(ra[i]-rb[i]) > 0.5 {
					t.Errorf("test accuracy of model %d: %.2f (1 rank) vs %.2f (2 ranks)", i, ra[i], rb[i])
				}
			}
			t.Logf("max |Δlabel| %.3g after %d meta-steps; test accuracies %v (1 rank) %v (2 ranks); wall %v, %v",
				d, a.Report.MetaSteps, ra, rb, t1.Round(time.Millisecond), t2.Round(time.Millisecond))
		})
	}
}
