package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
)

// sweep_test.go: ldtorch sweep under hostile use: bad grids, one writer per cell, sweeps
// sharing a folder, --jobs.

// TestSweepHostile: the poor cases of sweep made clear, and one writer per cell folder.
func TestSweepHostile(t *testing.T) {
	shared := sharedDatasets(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "sweep")
	grid := tinyGrid(t, tmp, nil)
	sw := func(args ...string) result {
		return hostileRun(t, hostileLimit, append([]string{"sweep", "--data-dir", shared, "--quiet"}, args...)...)
	}

	// Grid files: empty, cut short, labels too long for a folder name.
	empty := filepath.Join(tmp, "empty.json")
	os.WriteFile(empty, nil, 0o644)
	wantOneLine(t, sw("--grid", empty, "--out", dir), exitUsage, "--grid", "the file is empty")
	cut := filepath.Join(tmp, "cut.json")
	os.WriteFile(cut, []byte(`{"rows": [{"label": "a"`), 0o644)
	wantOneLine(t, sw("--grid", cut, "--out", dir), exitUsage, "--grid", "line 1, column 24", "end of the file")
	long := tinyGrid(t, tmp, func(g map[string]any) {
		g["rows"] = []map[string]any{{"label": strings.Repeat("L", 300), "set": map[string]any{"method": "rr"}}}
	})
	wantOneLine(t, sw("--grid", long, "--out", dir), exitUsage, "more than the 255 a file name may have")
	// Operational flags are named as flags; a device this build lacks leaves no folder.
	wantOneLine(t, sw("--grid", grid, "--out", dir, "--threads", "100000"), exitUsage, "--threads: must be between")
	if r := sw("--grid", grid, "--out", dir, "--device", "cuda"); r.code != exitUsage {
		t.Errorf("--device cuda: exit %d: %s", r.code, r.stderr)
	}
	// --summary-only of a folder that holds no sweep (a mistyped --out) is refused.
	wantOneLine(t, sw("--grid", grid, "--out", dir, "--summary-only"), exitUsage, "--out", "holds no sweep")
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("%s created by refused sweeps", dir)
	}

	// A label holding a comma is selected whole.
	if r := sw("--grid", grid, "--out", dir, "--rows", "A, B"); r.code != 0 {
		t.Fatalf("--rows \"A, B\": exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "cells", "a-b__1", "distilled.npz")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cells", "c__1")); err == nil {
		t.Error("row C ran, though only \"A, B\" was selected")
	}

	// A changed grid is refused before grid.json is replaced.
	gridJSON, _ := os.ReadFile(filepath.Join(dir, "grid.json"))
	changed := tinyGrid(t, tmp, func(g map[string]any) { g["config"].(map[string]any)["epochs"] = 2 })
	wantOneLine(t, sw("--grid", changed, "--out", dir), exitUsage, "another grid", "epochs: 1 -> 2")
	if now, _ := os.ReadFile(filepath.Join(dir, "grid.json")); string(now) != string(gridJSON) {
		t.Error("grid.json changed by a refused sweep")
	}

	// A damaged cell is named by --summary-only, not shown as not run with exit 0.
	rep := filepath.Join(dir, "cells", "a-b__1", "report.json")
	good, _ := os.ReadFile(rep)
	os.WriteFile(rep, []byte("garbage"), 0o644)
	wantOneLine(t, sw("--grid", grid, "--out", dir, "--summary-only"), exitFailure, "a-b__1", "report.json", "line 1, column 1")
	os.WriteFile(rep, good, 0o644)

	// An infeasible cell leaves no folder.
	inf := tinyGrid(t, tmp, func(g map[string]any) {
		g["rows"].([]map[string]any)[1]["set"] = map[string]any{"method": "ld", "base_examples": 100000}
	})
	dir2 := filepath.Join(tmp, "sweep2")
	r := sw("--grid", inf, "--out", dir2, "--rows", "C")
	wantOneLine(t, r, exitUsage, "c__1", "base_examples")
	if strings.Contains(r.stderr, "--base") {
		t.Errorf("names a flag sweep does not have: %s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir2, "cells", "c__1")); err == nil {
		t.Error("the failed cell left its folder (an empty checkpoints folder, a lock file)")
	}
}

// TestSweepCellOneWriter: a distill --resume of the cell a running sweep writes is refused
// at once naming the sweep's process (the two used to write the same checkpoints).
func TestSweepCellOneWriter(t *testing.T) {
	shared := sharedDatasets(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "sweep")
	grid := tinyGrid(t, tmp, func(g map[string]any) {
		c := g["config"].(map[string]any)
		c["epochs"], c["checkpoint_every"], c["validate_every"] = 400, 4, 100
	})
	s := startBinary(t, "sweep", "--grid", grid, "--out", dir, "--data-dir", shared, "--rows", "C")
	cell := filepath.Join(dir, "cells", "c__1")
	waitForCheckpoint(t, filepath.Join(cell, "checkpoints"))
	start := time.Now()
	r := hostileRun(t, time.Minute, "distill", "--resume", cell, "--quiet")
	wantOneLine(t, r, exitUsage, "is in use by another run", fmt.Sprintf("ldtorch process %d", s.cmd.Process.Pid))
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("refused after %v", d)
	}
	s.cmd.Process.Signal(os.Interrupt)
	if code := s.exitWithin(t, signalLimit); code != exitInterrupted {
		t.Fatalf("sweep exit %d", code)
	}
	// The interrupt hint repeats the command as given (--rows included).
	if !strings.Contains(s.log.String(), "--rows C") {
		t.Errorf("the hint does not repeat --rows:\n%s", s.log.String())
	}
}

// TestSweepsShareAFolder: two sweeps of one folder split its cells: the second leaves the
// cell the first runs to it, runs the other and says so; the summary written last holds
// every finished cell.
func TestSweepsShareAFolder(t *testing.T) {
	shared := sharedDatasets(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "sweep")
	grid := tinyGrid(t, tmp, func(g map[string]any) {
		g["config"].(map[string]any)["checkpoint_every"] = 4
		g["rows"] = []map[string]any{
			{"label": "slow", "set": map[string]any{"method": "ld", "epochs": 400}},
			{"label": "fast", "set": map[string]any{"method": "rr"}},
		}
	})
	first := startBinary(t, "sweep", "--grid", grid, "--out", dir, "--data-dir", shared)
	waitForCheckpoint(t, filepath.Join(dir, "cells", "slow__1", "checkpoints"))
	// --list names the running cell and its process (where the kernel's lock table shows it).
	if _, seen := atomicfile.HeldBy(filepath.Join(dir, "cells", "slow__1")); seen {
		r := hostileRun(t, hostileLimit, "sweep", "--grid", grid, "--out", dir, "--data-dir", shared, "--list")
		want := fmt.Sprintf("running  cells/slow__1 (ldtorch process %d)", first.cmd.Process.Pid)
		if r.code != 0 || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "new      cells/fast__1") {
			t.Errorf("--list: exit %d, want %q:\n%s%s", r.code, want, r.stdout, r.stderr)
		}
	}
	r := hostileRun(t, hostileLimit, "sweep", "--grid", grid, "--out", dir, "--data-dir", shared)
	for _, want := range []string{"slow / 1: run by another process, left to it", "1 cell(s) run by another process (slow__1)"} {
		if r.code != 0 || !strings.Contains(r.stderr, want) {
			t.Fatalf("second sweep: exit %d, want %q in:\n%s", r.code, want, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "cells", "fast__1", "report.json")); err != nil {
		t.Fatalf("the second sweep did not run the free cell: %v", err)
	}
	first.cmd.Process.Signal(os.Interrupt)
	if code := first.exitWithin(t, signalLimit); code != exitInterrupted {
		t.Fatalf("first sweep: exit %d:\n%s", code, first.log.String())
	}
	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	if err != nil || !strings.Contains(string(md), "1 of 2 cells finished") {
		t.Errorf("the summary the interrupted first sweep wrote lacks the second's cell (%v):\n%s", err, md)
	}
}

// TestSweepJobs: --jobs 2 runs two sweeps of the folder at once, one cell each, their lines
// prefixed, the summary printed once; interrupted, every running cell checkpoints and the
// same command finishes them.
func TestSweepJobs(t *testing.T) {
	t.Parallel() // the built binary in child processes only
	shared := sharedDatasets(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "sweep")
	// Rows A (LD) and B (LD RR), one column: two cells of epochs epochs.
	twoCells := func(epochs, checkpointEvery int) string {
		return tinyGrid(t, tmp, func(g map[string]any) {
			c := g["config"].(map[string]any)
			c["checkpoint_every"], c["epochs"] = checkpointEvery, epochs
			g["rows"] = []map[string]any{{"label": "A", "set": map[string]any{"method": "ld"}}, {"label": "B", "set": map[string]any{"method": "rr"}}}
		})
	}
	grid := twoCells(1, 4)
	wantOneLine(t, hostileRun(t, hostileLimit, "sweep", "--grid", grid, "--out", dir, "--jobs", "0"), exitUsage, "--jobs: must be between")
	wantOneLine(t, hostileRun(t, hostileLimit, "sweep", "--grid", grid, "--out", dir, "--jobs", "2", "--list"), exitUsage, "--jobs", "--list")

	// Interrupted while both cells run (400 epochs each).
	slow := twoCells(400, 4)
	slowDir := filepath.Join(tmp, "slow")
	s := startBinary(t, "sweep", "--grid", slow, "--out", slowDir, "--data-dir", shared, "--jobs", "2")
	waitForCheckpoint(t, filepath.Join(slowDir, "cells", "a__1", "checkpoints"))
	waitForCheckpoint(t, filepath.Join(slowDir, "cells", "b__1", "checkpoints"))
	s.cmd.Process.Signal(os.Interrupt)
	if code := s.exitWithin(t, signalLimit); code != exitInterrupted {
		t.Fatalf("interrupted --jobs 2: exit %d:\n%s", code, s.log.String())
	}
	if !strings.Contains(s.log.String(), "continue with the same command") {
		t.Errorf("no hint to continue:\n%s", s.log.String())
	}

	// The launcher killed (kill -9): its jobs are interrupted by the kernel and checkpoint
	// (only then: checkpoint_every is beyond the run).
	killed := twoCells(400, 100000)
	killedDir := filepath.Join(tmp, "killed")
	k := startBinary(t, "sweep", "--grid", killed, "--out", killedDir, "--data-dir", shared, "--jobs", "2")
	for _, cell := range []string{"a__1", "b__1"} {
		waitForFile(t, filepath.Join(killedDir, "cells", cell, "metrics.jsonl"))
	}
	k.cmd.Process.Kill()
	select {
	case <-k.exited:
	case <-time.After(signalLimit):
		t.Fatal("the launcher outlived kill -9")
	}
	for _, cell := range []string{"a__1", "b__1"} {
		waitForCheckpoint(t, filepath.Join(killedDir, "cells", cell, "checkpoints"))
	}

	// Two quick cells: each job runs one, the summary is printed once.
	// (A binary: the jobs are this program started again, which a test binary is not.)
	r := runBinary(t, 2*time.Minute, nil, "sweep", "--grid", grid, "--out", dir, "--data-dir", shared, "--jobs", "2")
	if r.code != 0 || strings.Count(r.stdout, "2 of 2 cells finished") != 1 {
		t.Fatalf("--jobs 2: exit %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"[job 1] [cell", "[job 2] [cell"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "left to it") || strings.Contains(r.stderr, "run by another process") {
		t.Errorf("jobs speak of each other's cells:\n%s", r.stderr)
	}
}

// TestSweepTogetherCLI: --together is checked, and distils a row's seeds in one process.
func TestSweepTogetherCLI(t *testing.T) {
	shared := sharedDatasets(t)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "sweep")
	grid := tinyGrid(t, tmp, func(g map[string]any) { g["columns"] = map[string]any{"key": "seed", "values": []int{1, 2}} })
	sw := func(args ...string) result {
		return hostileRun(t, hostileLimit, append([]string{"sweep", "--data-dir", shared, "--grid", grid, "--out", dir}, args...)...)
	}
	wantOneLine(t, sw("--together", "0"), exitUsage, "--together: must be between 1 and")
	wantOneLine(t, sw("--together", "65"), exitUsage, "--together: must be between 1 and 64")
	r := sw("--together", "2", "--rows", "A, B")
	if r.code != 0 {
		t.Fatalf("--together 2: exit %d: %s", r.code, r.stderr)
	}
	for _, cell := range []string{"a-b__1", "a-b__2"} {
		if _, err := os.Stat(filepath.Join(dir, "cells", cell, "distilled.npz")); err != nil {
			t.Error(err)
		}
		if !strings.Contains(r.stderr, "starting A, B / "+strings.TrimPrefix(cell, "a-b__")) {
			t.Errorf("no starting line for %s:\n%s", cell, r.stderr)
		}
	}
}
