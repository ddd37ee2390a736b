package main

// The bench command end to end, and the data diagnosis of unknown CIFAR files.

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBench(t *testing.T) {
	shared := sharedDatasets(t)
	r := ldtorch(t, nil, "bench", "--data-dir", shared, "--base", "20", "--target-set-size", "1000",
		"--outer-batch", "128", "--steps", "3", "--warmup", "1")
	if r.code != 0 {
		t.Fatalf("bench: exit %d: %s", r.code, r.stderr)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || strings.Count(strings.TrimSpace(r.stdout), "\n") != 0 {
		t.Fatalf("bench output is not one JSON line: %v: %q", err, r.stdout)
	}
	if ms, _ := res["meta_step_median_s"].(float64); ms <= 0 || res["steps"] != 3.0 || res["method"] != "ld" {
		t.Errorf("bench: %v", res)
	}
	if _, ok := res["eval_batched_speedup"]; ok {
		t.Errorf("bench without --batched-eval-steps reports an evaluation comparison: %v", res)
	}
	if _, ok := res["op_census"]; ok {
		t.Errorf("bench without --op-census reports a census: %v", res)
	}

	// The operator census: per meta-step and per evaluation step, by operator.
	r = ldtorch(t, nil, "bench", "--data-dir", shared, "--base", "20", "--target-set-size", "1000",
		"--outer-batch", "128", "--steps", "2", "--warmup", "1", "--op-census")
	var census struct {
		Census map[string]struct {
			Calls, Top, Leaf float64
			Ops              []struct {
				Name             string
				Calls, Top, Leaf float64
			}
		} `json:"op_census"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &census) != nil {
		t.Fatalf("bench --op-census: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	for _, step := range []string{"meta_step", "eval_step"} {
		c, ok := census.Census[step]
		linear := 0.0
		for _, o := range c.Ops {
			if o.Name == "aten::linear" {
				linear = o.Top
			}
		}
		// LeNet's three fully connected layers, once per forward pass (LD's meta-step: the
		// inner step's and the target batch's).
		if !ok || c.Top < 20 || c.Leaf < c.Top/2 || c.Calls < c.Top+c.Leaf/2 || (linear != 3 && linear != 6) {
			t.Errorf("bench --op-census: %s: %+v (aten::linear top-level %v per step)", step, c, linear)
		}
	}
	r = ldtorch(t, nil, "bench", "--data-dir", shared, "--base", "20", "--steps", "2", "--warmup", "0", "--op-census")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--op-census") || !strings.Contains(r.stderr, "--warmup") {
		t.Errorf("bench --op-census --warmup 0: exit %d: %s", r.code, r.stderr)
	}

	// Two ranks: rank 0 reports, and every rank ends without an error (the others' last
	// collective fails once rank 0 has left the group after its timed steps).
	r = runBinary(t, 5*time.Minute, []string{"LDTORCH_DIST_TIMEOUT=60s"}, "bench", "--data-dir", shared, "--base", "20",
		"--target-set-size", "1000", "--outer-batch", "128", "--steps", "3", "--warmup", "1", "--threads", "1", "--nproc", "2")
	res = nil
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil {
		t.Fatalf("bench --nproc 2: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	if res["ranks"] != 2.0 || res["steps"] != 3.0 || strings.Contains(r.stderr, "rank 1") {
		t.Errorf("bench --nproc 2: %v\n%s", res, r.stderr)
	}

	// Learnt images: method dd (its own backward pass and recipe) and Our DD RR.
	for _, c := range []struct {
		args             []string
		name, learn, bwd string
	}{
		{[]string{"--method", "dd", "--dd-steps", "2", "--dd-epochs", "2", "--dd-backward", "graph"}, "DD", "images", "graph"},
		{[]string{"--method", "rr", "--learn", "images"}, "Our DD RR", "images", ""},
	} {
		r := ldtorch(t, nil, append([]string{"bench", "--data-dir", shared, "--base", "20", "--target-set-size", "1000",
			"--outer-batch", "128", "--steps", "2", "--warmup", "1", "--threads", "1"}, c.args...)...)
		res = nil
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil {
			t.Fatalf("bench %v: exit %d: %s%s", c.args, r.code, r.stdout, r.stderr)
		}
		bwd, _ := res["dd_backward"].(string)
		if ms, _ := res["meta_step_cpu_median_s"].(float64); ms <= 0 || res["method_name"] != c.name || res["learn"] != c.learn || bwd != c.bwd {
			t.Errorf("bench %v: %v", c.args, res)
		}
		if es, _ := res["eval_step_median_s"].(float64); es <= 0 {
			t.Errorf("bench %v: no evaluation step time: %v", c.args, res)
		}
	}

	// Runs distilled together: each timed step is all K's; LD cannot.
	r = ldtorch(t, nil, "bench", "--data-dir", shared, "--method", "rr", "--base", "20", "--target-set-size", "1000",
		"--outer-batch", "128", "--steps", "2", "--warmup", "1", "--threads", "1", "--together", "3")
	res = nil
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil {
		t.Fatalf("bench --together 3: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	if ms, _ := res["meta_step_median_s"].(float64); ms <= 0 || res["together"] != 3.0 || res["steps"] != 2.0 {
		t.Errorf("bench --together 3: %v", res)
	}
	r = ldtorch(t, nil, "bench", "--data-dir", shared, "--base", "20", "--target-set-size", "1000", "--steps", "1", "--together", "2")
	if r.code == 0 || !strings.Contains(r.stderr, "LD RR learning labels only") {
		t.Errorf("bench --together 2 of LD: exit %d: %s", r.code, r.stderr)
	}

	// The evaluation comparison: both paths train the same models (equal accuracies on CPU).
	r = ldtorch(t, nil, "bench", "--data-dir", shared, "--method", "rr", "--base", "20", "--target-set-size", "1000",
		"--outer-batch", "128", "--steps", "1", "--warmup", "0", "--batched-eval-steps", "5", "--eval-models", "3")
	if r.code != 0 {
		t.Fatalf("bench --batched-eval-steps: exit %d: %s", r.code, r.stderr)
	}
	res = nil
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("bench output is not JSON: %v: %q", err, r.stdout)
	}
	if sp, _ := res["eval_batched_speedup"].(float64); sp <= 0 || res["eval_models"] != 3.0 || res["eval_steps"] != 5.0 ||
		res["eval_batched_max_acc_diff"] != 0.0 || res["eval_batched_mode"] != "per-model" {
		t.Errorf("bench --batched-eval-steps: %v", res)
	}
}

// TestDiagnoseCIFAR: a CIFAR binary file whose checksum is unknown is described by what its
// content shows (the IDX cases are in TestDataCommands).
func TestDiagnoseCIFAR(t *testing.T) {
	dir := t.TempDir()
	record := 2 + 3*32*32 // CIFAR-100: coarse label, fine label, pixels
	write := func(name string, content []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := make([]byte, 3*record)
	for i := 0; i < 3; i++ {
		good[i*record], good[i*record+1] = 1, 42
	}
	outOfRange := append([]byte(nil), good...)
	outOfRange[record+1] = 150
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(good[:len(good)-7])
	zw.Close()
	for _, c := range []struct {
		name, file string
		content    []byte
		want       string
	}{
		{"valid but unknown", "train.bin", good, "a valid CIFAR binary file (3 images) but not the registered one"},
		{"fine label out of range", "test.bin", outOfRange, "record 1: label 150 is out of range [0, 100)"},
		{"cut short, gzipped", "cut.bin.gz", gz.Bytes(), "is not a multiple of the 3074-byte record"},
		{"empty", "empty.bin", nil, "empty file"},
	} {
		if got := diagnose("cifar100", write(c.file, c.content)); !strings.Contains(got, c.want) {
			t.Errorf("%s: diagnose = %q, want %q in it", c.name, got, c.want)
		}
	}
}
