package main

// ddranking_test.go: `ldtorch evaluate --protocol ddranking` on a tiny artifact of real
// MNIST (one epoch, one run, LeNet): the scores printed as JSON and written to
// evaluations/ddranking.json, the full-data model cached, the same numbers again; a
// setting the artifact rules out is a usage error naming its flag.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/torch/atomicfile"
)

// tinyRRArtifact distils a one-epoch LD RR artifact of 10 MNIST base examples (300 target
// and 300 validation images) for the benchmark protocol's tests and returns its folder.
func tinyRRArtifact(t *testing.T, shared string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "run")
	r := ldtorch(t, nil, "distill", "--data-dir", shared, "--dataset", "mnist", "--method", "rr", "--base", "10",
		"--target-set-size", "300", "--validation-size", "300", "--epochs", "1", "--eval-models", "1",
		"--baselines", "none", "--threads", "1", "--quiet", "--out", out)
	if r.code != 0 {
		t.Fatalf("distill: exit %d\n%s", r.code, r.stderr)
	}
	return out
}

func TestEvaluateDDRanking(t *testing.T) {
	shared := sharedDatasets(t)
	out := tinyRRArtifact(t, shared)
	cache := filepath.Join(t.TempDir(), "cache")
	eval := func() map[string]any {
		t.Helper()
		r := ldtorch(t, nil, "evaluate", "--distilled", out, "--protocol", "ddranking", "--arch", "lenet", "--epochs", "1",
			"--models", "1", "--cache-dir", cache, "--threads", "1", "--quiet", "--json")
		if r.code != 0 {
			t.Fatalf("evaluate --protocol ddranking: exit %d\n%s", r.code, r.stderr)
		}
		var res map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("--json: %v: %q", err, r.stdout)
		}
		return res
	}
	first := eval()
	for _, k := range []string{"hlr", "ior", "score", "runs", "hard_label", "soft_label", "random_soft_label", "full_data", "recipe", "full_data_recipe"} {
		if _, ok := first[k]; !ok {
			t.Errorf("--json lacks %q", k)
		}
	}
	if first["protocol"] != "ddranking" || first["arch"] != "lenet" || !strings.Contains(first["accuracy_unit"].(string), "fraction") {
		t.Errorf("protocol %v, arch %v, unit %v", first["protocol"], first["arch"], first["accuracy_unit"])
	}
	b, err := os.ReadFile(filepath.Join(out, "evaluations", "ddranking.json"))
	if err != nil {
		t.Fatal(err)
	}
	var onDisk map[string]any
	if err := json.Unmarshal(b, &onDisk); err != nil || onDisk["score"] != first["score"] {
		t.Errorf("ddranking.json: score %v (%v), --json printed %v", onDisk["score"], err, first["score"])
	}
	second := eval()
	full := second["full_data"].(map[string]any)
	if full["cached"] != true {
		t.Errorf("second run: the full-data model was not read from the cache: %v", full)
	}
	for _, k := range []string{"hlr", "ior", "score"} {
		if first[k] != second[k] {
			t.Errorf("%s: %v, then %v with the same seed", k, first[k], second[k])
		}
	}
	r := ldtorch(t, nil, "evaluate", "--distilled", out, "--protocol", "ddranking", "--augment", "mixup", "--cache-dir", cache)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--augment") || !strings.Contains(r.stderr, "mixup") {
		t.Errorf("--augment mixup: exit %d: %s", r.code, r.stderr)
	}
	r = ldtorch(t, nil, "evaluate", "--distilled", out, "--protocol", "ddranking", "--arch", "alexnet", "--cache-dir", cache)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--arch alexnet: alexnet takes 32×32 images, got 28×28") {
		t.Errorf("--arch alexnet on MNIST: exit %d: %s", r.code, r.stderr)
	}
}

// SIGINT during the full-data training: exit 130 with a message saying how to go on; the
// same command run again resumes (and says so). A negative --checkpoint-every is a usage
// error, as is the flag under the paper's protocol.
func TestEvaluateDDRankingResumesAfterSIGINT(t *testing.T) {
	shared := sharedDatasets(t)
	out := tinyRRArtifact(t, shared)
	cache := filepath.Join(t.TempDir(), "cache")
	args := []string{"evaluate", "--distilled", out, "--protocol", "ddranking", "--arch", "lenet", "--epochs", "60",
		"--models", "1", "--cache-dir", cache, "--threads", "1", "--checkpoint-every", "1ns"}
	r := startBinary(t, args...)
	r.waitFor(t, "full data: epoch", 2*time.Minute)
	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// Cut in the full-data model's training, which is kept beside its cache entry: the
	// message names both places.
	if code := r.exitWithin(t, signalLimit); code != exitInterrupted || !strings.Contains(r.log.String(), "the same command goes on from the last save") ||
		!strings.Contains(r.log.String(), "the full-data model's in "+cache) {
		t.Fatalf("after SIGINT: exit %d, want %d and how to go on, naming the cache %s:\n%s", code, exitInterrupted, cache, r.log.String())
	}
	noFile(t, filepath.Join(out, "evaluations", "ddranking.json"))
	// The same evaluation running elsewhere holds its progress folder: a usage error.
	partial, _ := filepath.Glob(filepath.Join(out, "evaluations", "ddranking-partial-*"))
	if len(partial) != 1 {
		t.Fatalf("progress folders after SIGINT: %v", partial)
	}
	unlock, err := atomicfile.LockDir(partial[0])
	if err != nil {
		t.Fatal(err)
	}
	busy := ldtorch(t, nil, args...)
	unlock()
	if busy.code != exitUsage || !strings.Contains(busy.stderr, "the same evaluation") || !strings.Contains(busy.stderr, "wait for it to end") {
		t.Errorf("the same evaluation twice at once: exit %d: %s", busy.code, busy.stderr)
	}
	res := ldtorch(t, nil, args...)
	if res.code != 0 || !strings.Contains(res.stderr, "resuming the full-data model from epoch") || !strings.Contains(res.stdout, "resumed:") {
		t.Errorf("run again: exit %d:\n%s%s", res.code, res.stdout, res.stderr)
	}
	if m, _ := filepath.Glob(filepath.Join(out, "evaluations", "ddranking-partial-*")); len(m) != 0 {
		t.Errorf("progress left after the evaluation: %v", m)
	}
	bad := ldtorch(t, nil, "evaluate", "--distilled", out, "--protocol", "ddranking", "--checkpoint-every", "-1s")
	if bad.code != exitUsage || !strings.Contains(bad.stderr, "--checkpoint-every") {
		t.Errorf("--checkpoint-every -1s: exit %d: %s", bad.code, bad.stderr)
	}
	bad = ldtorch(t, nil, "evaluate", "--distilled", out, "--checkpoint-every", "1m")
	if bad.code != exitUsage || !strings.Contains(bad.stderr, "--checkpoint-every applies to --protocol ddranking only") {
		t.Errorf("--checkpoint-every under the paper's protocol: exit %d: %s", bad.code, bad.stderr)
	}
}
