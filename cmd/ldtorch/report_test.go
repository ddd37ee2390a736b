// Tests of `ldtorch report`, `distill --report` and `ldtorch gradvar` through the binary.

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDistillReportAndGradvar(t *testing.T) {
	shared := sharedDatasets(t)
	out := filepath.Join(t.TempDir(), "run")
	args := append(resumeArgs(shared, out)[:0:0], resumeArgs(shared, out)...)
	args = append(args, "--epochs", "2", "--method", "rr", "--report")
	r := ldtorch(t, nil, args...)
	if r.code != 0 {
		t.Fatalf("distill --report: exit %d\n%s", r.code, r.stderr)
	}
	html := filepath.Join(out, "report.html")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if last := lines[len(lines)-1]; last != "report: "+html {
		t.Fatalf("the run's last line is %q, want the report's path", last)
	}
	for _, f := range []string{"label_distribution.png", "example_labels.png", "reconstructions.png", "learning_curves.png", "accuracy.png", "gradient_variance.png"} {
		if _, err := os.Stat(filepath.Join(out, "figures", f)); err != nil {
			t.Errorf("missing figure: %v", err)
		}
	}

	r = ldtorch(t, nil, "gradvar", out, "--models", "3", "--batches", "1", "--warmup", "5", "--data-dir", shared)
	if r.code != 0 || !strings.Contains(r.stdout, "LD RR") || !strings.Contains(r.stdout, "gradvar.json") {
		t.Fatalf("gradvar: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = ldtorch(t, nil, "report", out, "--data-dir", shared)
	if r.code != 0 || !strings.Contains(r.stdout, "report: "+html) {
		t.Fatalf("report: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	page, err := os.ReadFile(html)
	if err != nil || !strings.Contains(string(page), "fresh models, each trained 5 steps") {
		t.Fatalf("report.html does not show the gradvar measurement (%v)", err)
	}

	// Bad input: a usage error naming the problem.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"report"}, "want one output folder"},
		{[]string{"report", filepath.Join(out, "missing")}, "is not a folder"},
		{[]string{"report", filepath.Join(out, "figures")}, "holds no distilled.npz"},
		{[]string{"gradvar", out, "--models", "1"}, "--models"},
		{[]string{"gradvar", out, "--labels", "random"}, "--labels"},
	} {
		r := ldtorch(t, nil, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q (want %q)", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

// A signal while report draws: it stops at the next figure with exit 130, report.html not
// written, and says how to draw it whole.
func TestReportInterrupted(t *testing.T) {
	run := copyTree(t, tinyRun(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // as a signal that came while the first figure was drawn
	var stdout, stderr bytes.Buffer
	code := runContext(ctx, []string{"ldtorch", "report", run}, &stdout, &stderr)
	r := result{code, stdout.String(), stderr.String()}
	wantOneLine(t, r, exitInterrupted, "interrupted while drawing the report", filepath.Join(run, "report.html")+" not written", "ldtorch report "+run+" draws it whole")
	noFile(t, filepath.Join(run, "report.html"))
	if r := ldtorch(t, nil, "report", run); r.code != 0 {
		t.Fatalf("report again: exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(run, "report.html")); err != nil {
		t.Error(err)
	}
}

// report of a folder that cannot be written: refused before any figure, naming the folder.
func TestReportOfAReadOnlyFolder(t *testing.T) {
	run := copyTree(t, tinyRun(t))
	r := readOnlyRun(t, run, "report", run)
	wantOneLine(t, r, exitUsage, run+" is not writable, so report.html and figures/ cannot be written")
	noFile(t, filepath.Join(run, "figures"))
}
