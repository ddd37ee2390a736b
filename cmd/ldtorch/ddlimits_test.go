// Method dd's unrolled steps beyond what memory holds, end to end: refused at once naming
// --dd-epochs and --dd-steps, nothing written.

package main

import (
	"path/filepath"
	"testing"
	"time"
)

// TestDDUnrolledStepsBounded: T = --dd-steps × --dd-epochs beyond the bound is refused at
// once naming both flags (a run of 100,000,000 grew to 24 GB until the kernel killed it), as a
// variable too.
func TestDDUnrolledStepsBounded(t *testing.T) {
	shared := sharedDatasets(t)
	out := filepath.Join(t.TempDir(), "out")
	for _, tc := range []struct {
		env  []string
		args []string
		want []string
	}{
		{nil, []string{"--dd-epochs", "100000000", "--dd-steps", "1"}, []string{"--dd-epochs: --dd-steps × --dd-epochs must be between 1 and 10000, got 1 × 100000000"}},
		{nil, []string{"--dd-epochs", "1000000"}, []string{"--dd-epochs", "got 2 × 1000000 = 2000000", "copy of the network's parameters"}},
		{nil, []string{"--dd-steps", "10", "--dd-epochs", "2147483647", "--base", "100"}, []string{"--dd-epochs", "10 × 2147483647 = 21474836470"}},
	} {
		start := time.Now()
		// --dry-run: the settings are checked as a run checks them, and a check that lets
		// them through ends the test at once instead of unrolling the steps.
		r := hostileRunEnv(t, time.Minute, tc.env, tinyImages(shared, out, "dd", append(tc.args, "--dry-run")...)...)
		wantOneLine(t, r, exitUsage, tc.want...)
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%v: refused after %v", tc.args, d)
		}
	}
	r := hostileRunEnv(t, time.Minute, []string{"LDTORCH_DD_EPOCHS=100000000"}, "distill", "--dataset", "mnist", "--method", "dd", "--out", out, "--dry-run")
	wantOneLine(t, r, exitUsage, "LDTORCH_DD_EPOCHS", "--dd-steps × --dd-epochs must be between 1 and 10000, got 10 × 100000000")
	noFile(t, out)
}
