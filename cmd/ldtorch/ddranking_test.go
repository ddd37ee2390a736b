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

// TestDDRankingHostileFiles: the full-data cache's parameters replaced by an endless device
// and its entry by a named pipe are a missing entry (trained again and replaced), not an
// out-of-memory crash or a hang; report leaves out an evaluation of another distilled.npz
// with a note, and names a device put in place of one.
func TestDDRankingHostileFiles(t *testing.T) {
	shared := sharedDatasets(t)
	out := tinyRRArtifact(t, shared)
	cache := filepath.Join(t.TempDir(), "cache")
	eval := func() map[string]any {
		t.Helper()
		r := hostileRun(t, 2*time.Minute, "evaluate", "--distilled", out, "--protocol", "ddranking", "--arch", "lenet", "--epochs", "1",
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
	eval()
	npzs, _ := filepath.Glob(filepath.Join(cache, "*.npz"))
	if len(npzs) != 1 {
		t.Fatalf("cache: %v", npzs)
	}
	entry := strings.TrimSuffix(npzs[0], ".npz") + ".json"
	os.Remove(npzs[0])
	if err := os.Symlink("/dev/zero", npzs[0]); err != nil {
		t.Fatal(err)
	}
	if full := eval()["full_data"].(map[string]any); full["cached"] == true {
		t.Errorf("parameters from /dev/zero taken from the cache: %v", full)
	}
	if fi, err := os.Lstat(npzs[0]); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the cache's parameters were not replaced: %v %v", fi, err)
	}
	os.Remove(entry)
	if err := syscall.Mkfifo(entry, 0o644); err != nil {
		t.Fatal(err)
	}
	if full := eval()["full_data"].(map[string]any); full["cached"] == true {
		t.Errorf("an entry from a named pipe taken from the cache: %v", full)
	}

	// report: the evaluation of another artifact's distilled.npz, then a device.
	evalFile := filepath.Join(out, "evaluations", "ddranking.json")
	var res map[string]any
	if err := json.Unmarshal(mustReadFile(t, evalFile), &res); err != nil {
		t.Fatal(err)
	}
	rep := readReport(t, out)
	own := rep["distilled"].(map[string]any)["sha256"].(string)
	if res["distilled_sha256"] != own {
		t.Fatalf("ddranking.json records distilled_sha256 %v, the artifact's is %s", res["distilled_sha256"], own)
	}
	res["distilled_sha256"] = strings.Repeat("ab", 32)
	b, _ := json.Marshal(res)
	if err := os.WriteFile(evalFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r := hostileRun(t, time.Minute, "report", out)
	if r.code != 0 || !strings.Contains(r.stdout, "evaluations/ddranking.json evaluated another distilled.npz (sha256 abababababab, this artifact's "+own[:12]+"): not shown") {
		t.Errorf("report with another artifact's evaluation: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if html := mustReadFile(t, filepath.Join(out, "report.html")); strings.Contains(string(html), "hlr") {
		t.Error("report.html shows another artifact's evaluation")
	}
	os.Remove(evalFile)
	if err := os.Symlink("/dev/zero", evalFile); err != nil {
		t.Fatal(err)
	}
	wantOneLine(t, hostileRun(t, time.Minute, "report", out), exitFailure, evalFile, "a device, not a regular file")
}
