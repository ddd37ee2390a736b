//go:build long

package main

// ddranking_long_test.go: the long tests of ddranking_test.go (multi-process, signals, soaks),
// run by scripts/test-long.sh.

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
)

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
