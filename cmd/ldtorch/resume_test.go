// Tests of `ldtorch distill --resume`: a run killed with SIGKILL after its first checkpoint
// and resumed writes the same distilled.npz, byte for byte, as an uninterrupted run; a
// resume under changed settings is refused as a usage error naming the setting.

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/rundir"
)

// resumeArgs is a small real-MNIST run (6 epochs of 8 meta-steps, checkpoint every 2).
func resumeArgs(shared, out string) []string {
	return []string{"distill", "--data-dir", shared, "--dataset", "mnist", "--method", "ld",
		"--base", "20", "--inner-batch", "10", "--outer-batch", "128", "--target-set-size", "1000",
		"--epochs", "6", "--validate-every", "2", "--reset-window", "3", "--eval-models", "2",
		"--baselines", "none", "--threads", "1", "--checkpoint-every", "2", "--out", out}
}

func testAccuracies(t *testing.T, out string) []float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Accuracies []float64 `json:"test_accuracies"`
		MetaSteps  int       `json:"meta_steps"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.MetaSteps != 48 {
		t.Fatalf("%s: %d meta-steps, want 48", out, rep.MetaSteps)
	}
	return rep.Accuracies
}

func TestResumeAfterKill9(t *testing.T) {
	shared := sharedDatasets(t)
	dir := t.TempDir()
	whole, killed := filepath.Join(dir, "whole"), filepath.Join(dir, "killed")
	if r := ldtorch(t, nil, resumeArgs(shared, whole)...); r.code != 0 {
		t.Fatalf("uninterrupted run: exit %d\n%s", r.code, r.stderr)
	}

	cmd := binaryCommand(t, nil, resumeArgs(shared, killed)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ckpts := filepath.Join(killed, "checkpoints")
	deadline := time.After(3 * time.Minute)
wait:
	for {
		select {
		case err := <-exited:
			t.Fatalf("the run ended (%v) before it could be killed\n%s", err, stderr.String())
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("no checkpoint after 3 minutes\n%s", stderr.String())
		case <-time.After(5 * time.Millisecond):
			if m, _ := filepath.Glob(filepath.Join(ckpts, "ckpt-*.npz")); len(m) > 0 {
				break wait
			}
		}
	}
	cmd.Process.Kill() // SIGKILL
	<-exited
	m, _ := filepath.Glob(filepath.Join(ckpts, "ckpt-*.npz"))
	if _, err := os.Stat(filepath.Join(killed, "distilled.npz")); err == nil {
		t.Fatal("the killed run wrote an artifact")
	}

	r := ldtorch(t, nil, append(resumeArgs(shared, killed), "--resume", killed)...)
	if r.code != 0 {
		t.Fatalf("resumed run: exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "resumed from") {
		t.Errorf("no resume message:\n%s", r.stderr)
	}
	a, err := os.ReadFile(filepath.Join(whole, "distilled.npz"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(killed, "distilled.npz"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("killed after checkpoints %v and resumed: distilled.npz differs from the uninterrupted run's", m)
	}
	if wa, ka := testAccuracies(t, whole), testAccuracies(t, killed); !reflect.DeepEqual(wa, ka) {
		t.Fatalf("test accuracies %v, uninterrupted %v", ka, wa)
	}
	// The history of the killed and resumed run holds every meta-step exactly once.
	recs, err := rundir.ReadHistory(filepath.Join(killed, rundir.HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	for _, r := range recs {
		if r.Kind == rundir.HistoryStep {
			steps = append(steps, r.Step)
		}
	}
	if len(steps) != 48 || steps[0] != 1 || steps[47] != 48 || !slices.IsSorted(steps) {
		t.Fatalf("resumed history: step lines %v, want 1..48 once each", steps)
	}
	t.Logf("killed with checkpoints %v; resumed run identical", m)

	// Changed settings are refused, naming the setting; nothing is written.
	r = ldtorch(t, nil, append(resumeArgs(shared, filepath.Join(dir, "other")), "--label-lr", "0.002", "--resume", killed)...)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--resume") || !strings.Contains(r.stderr, "label_lr: 0.001 -> 0.002") {
		t.Errorf("resume with another label_lr: exit %d: %s", r.code, r.stderr)
	}
	r = ldtorch(t, nil, append(resumeArgs(shared, filepath.Join(dir, "none")), "--resume", filepath.Join(dir, "missing"))...)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--resume") {
		t.Errorf("resume from a missing folder: exit %d: %s", r.code, r.stderr)
	}
}
