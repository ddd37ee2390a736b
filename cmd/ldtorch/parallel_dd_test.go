// Method dd over two ranks against one process: the same meta-steps from the same state,
// the outer batch split over the ranks. The images and step sizes agree to float rounding
// over the first meta-steps; a rank drawing another network, batch or weight would part
// them by Adam's step (dd_lr, 0.01) at once. (Over many meta-steps of a long unroll the
// rounding grows to differences of the size of the images themselves, as any rounding
// change in one process does: docs/RELIABILITY.md, "Data-parallel runs".)

package main

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/checkpoint"
	"github.com/ldtorch/ldtorch/torch/fileio/npz"
)

// ddParallelArgs is a real-MNIST method dd run: 10 images over T = 3 unrolled steps, outer
// batches of 128 (shards of 64), 2 epochs of 2 meta-steps, a checkpoint at every one.
func ddParallelArgs(shared, out string, extra ...string) []string {
	return append([]string{"distill", "--data-dir", shared, "--dataset", "mnist", "--method", "dd",
		"--base", "10", "--dd-steps", "1", "--dd-epochs", "3", "--outer-batch", "128", "--target-set-size", "256",
		"--epochs", "2", "--validate-every", "1", "--eval-models", "1", "--baselines", "none",
		"--threads", "1", "--checkpoint-every", "1", "--quiet", "--out", out}, extra...)
}

// ddOneAndTwoRanks runs args(out) as one process and as two ranks and returns both folders.
func ddOneAndTwoRanks(t *testing.T, args func(out string) []string) (one, two string) {
	t.Helper()
	dir := t.TempDir()
	one, two = filepath.Join(dir, "one"), filepath.Join(dir, "two")
	if r := runBinary(t, 5*time.Minute, nil, args(one)...); r.code != 0 {
		t.Fatalf("1 rank: exit %d\n%s", r.code, r.stderr)
	}
	if r := runBinary(t, 5*time.Minute, []string{"LDTORCH_DIST_TIMEOUT=60s"}, append(args(two), "--nproc", "2")...); r.code != 0 {
		t.Fatalf("2 ranks: exit %d\n%s", r.code, r.stderr)
	}
	return one, two
}

// ddStepDiff is how far two runs' checkpoints of one meta-step are apart: the images, the
// raw step sizes, and the images' meta-gradient (Adam's first moment) relative to its
// largest value.
type ddStepDiff struct{ images, raw, gradient float64 }

func npzFloats(t *testing.T, a *npz.Array) []float64 {
	t.Helper()
	switch d := a.Data.(type) {
	case []float32:
		out := make([]float64, len(d))
		for i, v := range d {
			out[i] = float64(v)
		}
		return out
	case []float64:
		return d
	}
	t.Fatalf("%s: %s, not floating point", a.Name, a.DType)
	return nil
}

func ddCheckpointDiff(t *testing.T, one, two string, step int) ddStepDiff {
	t.Helper()
	member := func(dir, name string) []float64 {
		f, err := checkpoint.Read(filepath.Join(dir, "checkpoints", checkpoint.Name(step)))
		if err != nil {
			t.Fatal(err)
		}
		a, err := f.Array(name)
		if err != nil {
			t.Fatal(err)
		}
		return npzFloats(t, a)
	}
	apart := func(name string) (d, largest float64) {
		a, b := member(one, name), member(two, name)
		if len(a) != len(b) || len(a) == 0 {
			t.Fatalf("step %d: %s of %d and %d values", step, name, len(a), len(b))
		}
		for i := range a {
			d = math.Max(d, math.Abs(a[i]-b[i]))
			largest = math.Max(largest, math.Abs(a[i]))
		}
		return d, largest
	}
	var s ddStepDiff
	s.images, _ = apart("dd.images")
	s.raw, _ = apart("dd.step_raw")
	g, largest := apart("dd.images.exp_avg")
	s.gradient = g / largest
	return s
}

// historyLosses are the target losses of metrics.jsonl's meta-steps, in order.
func historyLosses(t *testing.T, dir string) []float64 {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line struct {
			Kind string   `json:"kind"`
			Loss *float64 `json:"label_loss"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		if line.Kind == "step" && line.Loss != nil {
			out = append(out, *line.Loss)
		}
	}
	return out
}

func TestParallelDDMatchesOneRank(t *testing.T) {
	shared := sharedDatasets(t)
	one, two := ddOneAndTwoRanks(t, func(out string) []string { return ddParallelArgs(shared, out) })

	// Every meta-step's target loss: one process and the ranks' all-reduced mean (a
	// shard's loss weighted wrongly, or another network, shows here first).
	la, lb := historyLosses(t, one), historyLosses(t, two)
	if len(la) != 4 || len(lb) != 4 {
		t.Fatalf("%d and %d meta-steps in the histories, want 4", len(la), len(lb))
	}
	for i := range la {
		if d := math.Abs(la[i]-lb[i]) / la[i]; d > 1e-5 {
			t.Errorf("meta-step %d: target loss %.9g (1 rank) against %.9g (2 ranks), %.2g apart relatively", i+1, la[i], lb[i], d)
		}
	}
	// The checkpoints kept (the last three): measured 1.1e-6 for the images, 0 for the step
	// sizes, 3e-7 for the gradient on a 2-vCPU AMD EPYC.
	for step := 2; step <= 4; step++ {
		d := ddCheckpointDiff(t, one, two, step)
		t.Logf("meta-step %d: images %.3g, raw step sizes %.3g, gradient %.3g (relative) apart", step, d.images, d.raw, d.gradient)
		if d.images > 1e-4 || d.raw > 1e-5 || d.gradient > 1e-4 {
			t.Errorf("meta-step %d: 2 ranks part from 1 by %.3g in the images, %.3g in the raw step sizes, %.3g in the images' gradient (relative): beyond float rounding", step, d.images, d.raw, d.gradient)
		}
	}
	a, b := readRun(t, one), readRun(t, two)
	if len(a.StepLRs) != 3 || len(b.StepLRs) != 3 {
		t.Fatalf("step sizes %v and %v, want 3 each", a.StepLRs, b.StepLRs)
	}
	if d := maxAbsDiff(a.StepLRs, b.StepLRs); d > 1e-6 {
		t.Errorf("step sizes %v (1 rank) and %v (2 ranks)", a.StepLRs, b.StepLRs)
	}
	if d := maxAbsDiff(a.Images, b.Images); d > 1e-4 {
		t.Errorf("the artifacts' images differ by up to %.3g", d)
	}
	if a.Report.MetaSteps != b.Report.MetaSteps || a.Report.BestValidation.Step != b.Report.BestValidation.Step {
		t.Errorf("meta-steps %d/%d, best validation at step %d/%d", a.Report.MetaSteps, b.Report.MetaSteps, a.Report.BestValidation.Step, b.Report.BestValidation.Step)
	}
}
