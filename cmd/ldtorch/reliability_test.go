// Hostile use, round 2: signals honoured in every phase (the binary, for real signals), one
// run per output folder, --resume DIR alone and extending a finished run, diverged
// evaluation models, and output that cannot be written.

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/rundir"
)

// startedRun is the binary running in the background with its stderr collected.
type startedRun struct {
	cmd    *exec.Cmd
	lines  chan string // stderr, line by line
	log    *bytes.Buffer
	exited chan error
}

func startBinary(t *testing.T, args ...string) *startedRun {
	t.Helper()
	return startCommand(t, binaryCommand(t, []string{"OMP_NUM_THREADS=1"}, args...))
}

// startCommand starts cmd (a binaryCommand) with its stderr read line by line.
func startCommand(t *testing.T, cmd *exec.Cmd) *startedRun {
	t.Helper()
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &startedRun{cmd: cmd, lines: make(chan string, 1000), log: &bytes.Buffer{}, exited: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
		close(r.lines)
		r.exited <- cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	return r
}

// waitFor reads stderr until a line contains sub (fails after limit or at exit).
func (r *startedRun) waitFor(t *testing.T, sub string, limit time.Duration) {
	t.Helper()
	deadline := time.After(limit)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				t.Fatalf("the run ended before printing %q:\n%s", sub, r.log.String())
			}
			r.log.WriteString(l + "\n")
			if strings.Contains(l, sub) {
				return
			}
		case <-deadline:
			t.Fatalf("no %q after %v:\n%s", sub, limit, r.log.String())
		}
	}
}

// exitWithin waits for the process to end within limit and returns its exit code.
func (r *startedRun) exitWithin(t *testing.T, limit time.Duration) int {
	t.Helper()
	deadline := time.After(limit)
	for {
		select {
		case l, ok := <-r.lines:
			if ok {
				r.log.WriteString(l + "\n")
				continue
			}
			r.lines = nil
		case err := <-r.exited:
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					t.Fatalf("killed by %v instead of exiting:\n%s", ws.Signal(), r.log.String())
				}
				return ee.ExitCode()
			}
			if err != nil {
				t.Fatal(err)
			}
			return 0
		case <-deadline:
			t.Fatalf("still running %v after the signal:\n%s", limit, r.log.String())
		}
	}
}

// signalLimit is how long a signalled run may take to exit: the goal is about a second,
// the margin is for a loaded machine.
const signalLimit = 15 * time.Second

func noFile(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err == nil {
		t.Errorf("%s exists", path)
	}
}

// readReport reads OUT/report.json into a map.
func readReport(t *testing.T, out string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestResumeAlone: `distill --resume DIR` alone continues with the checkpoint's settings
// (it used to need every original flag again); more --epochs extends a finished run and is
// recorded; other changes and fewer epochs are refused naming them; --overwrite starts
// over.
func TestResumeAlone(t *testing.T) {
	shared := sharedDatasets(t)
	out := copyTree(t, tinyRun(t))
	art, err := os.ReadFile(filepath.Join(out, "distilled.npz"))
	if err != nil {
		t.Fatal(err)
	}
	// A finished run resumed alone goes straight to the evaluation: the same artifact.
	r := ldtorch(t, nil, "distill", "--resume", out)
	if r.code != 0 {
		t.Fatalf("--resume %s alone: exit %d: %s", out, r.code, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "distilled.npz")); !bytes.Equal(b, art) {
		t.Errorf("a finished run resumed: distilled.npz changed")
	}
	// The checkpoints folder works as well, and --dry-run shows what would run.
	r = ldtorch(t, nil, "distill", "--resume", filepath.Join(out, "checkpoints"), "--dry-run")
	if r.code != 0 || !strings.Contains(r.stdout, `"out": "`+out+`"`) || !strings.Contains(r.stdout, `"method": "rr"`) {
		t.Errorf("--resume DIR/checkpoints --dry-run: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"another label lr", []string{"--label-lr", "0.5"}, []string{"--resume", "label_lr: 0.001 -> 0.5"}},
		{"fewer epochs", []string{"--epochs", "1"}, []string{"--resume", "epochs: 2 -> 1"}},
		{"with --overwrite", []string{"--overwrite"}, []string{"--overwrite", "--resume"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantOneLine(t, ldtorch(t, nil, append([]string{"distill", "--quiet", "--resume", out}, c.args...)...), exitUsage, c.want...)
		})
	}
	// Extending the finished run by an epoch: 8 more meta-steps, the change recorded.
	r = ldtorch(t, nil, "distill", "--resume", out, "--epochs", "3", "--threads", "1", "--quiet")
	if r.code != 0 {
		t.Fatalf("--resume %s --epochs 3: exit %d: %s", out, r.code, r.stderr)
	}
	rep := readReport(t, out)
	if rep["meta_steps"] != 24.0 || rep["epochs"] != 3.0 || !strings.Contains(fmt.Sprint(rep["resume_changes"]), "epochs: 2 -> 3") {
		t.Errorf("extended run: meta_steps %v epochs %v resume_changes %v", rep["meta_steps"], rep["epochs"], rep["resume_changes"])
	}
	// Starting over with --overwrite: the old checkpoints go, the new run's stay.
	r = ldtorch(t, nil, tinyDistill(shared, out, "--quiet", "--seed", "2", "--overwrite")...)
	if r.code != 0 {
		t.Fatalf("--overwrite: exit %d: %s", r.code, r.stderr)
	}
	if rep := readReport(t, out); rep["seed"] != 2.0 || rep["meta_steps"] != 16.0 {
		t.Errorf("after --overwrite: seed %v meta_steps %v", rep["seed"], rep["meta_steps"])
	}
	m, _ := filepath.Glob(filepath.Join(out, "checkpoints", "ckpt-*.npz"))
	for _, p := range m {
		if meta, err := rundir.ReadCheckpointMeta(p); err != nil || !strings.Contains(string(meta), `"seed": 2`) {
			t.Errorf("%s after --overwrite: not the new run's (%v)", p, err)
		}
	}
}

// TestDivergedModels: with --eval-lr 1e30 every evaluation model diverges; the run fails
// naming the flag instead of reporting 9.80 % (one class everywhere) and keeping "best"
// labels chosen on it; evaluate --lr 1e30 likewise.
func TestDivergedModels(t *testing.T) {
	shared := sharedDatasets(t)
	out := filepath.Join(t.TempDir(), "out")
	r := ldtorch(t, nil, tinyDistill(shared, out, "--quiet", "--eval-lr", "1e30")...)
	// Each diverged validation is a warning (shown with --quiet too), then the error.
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	r.stderr = lines[len(lines)-1] + "\n"
	wantOneLine(t, r, exitFailure, "validation", "diverged", "--eval-lr 1e+30")
	for _, l := range lines[:len(lines)-1] {
		if !strings.Contains(l, "warning: the validation model after epoch") {
			t.Errorf("unexpected line %q", l)
		}
	}
	noFile(t, filepath.Join(out, "distilled.npz"))
	noFile(t, filepath.Join(out, "report.json"))
	r = ldtorch(t, nil, "evaluate", "--distilled", tinyRun(t), "--data-dir", shared, "--steps", "20", "--models", "2", "--lr", "1e30", "--quiet")
	wantOneLine(t, r, exitFailure, "diverged", "--lr 1e+30")
}

// fullWriter fails every write like a full disk.
type fullWriter struct{}

func (fullWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// TestOutputWriteFailures: output that cannot be written (a full disk, /dev/full, a closed
// stdout) fails the command with exit 1 instead of exiting 0 with nothing written.
func TestOutputWriteFailures(t *testing.T) {
	shared := sharedDatasets(t)
	for _, args := range [][]string{
		{"version"},
		{"version", "--json"},
		{"data", "list", "--data-dir", shared},
		{"data", "verify", "mnist", "--data-dir", shared},
		{"distill", "--dry-run"},
		{"evaluate", "--distilled", tinyRun(t), "--data-dir", shared, "--steps", "2", "--models", "1", "--quiet", "--json"},
	} {
		var stderr bytes.Buffer
		code := runContext(t.Context(), append([]string{"ldtorch"}, args...), fullWriter{}, &stderr)
		r := result{code: code, stderr: stderr.String()}
		t.Run(strings.Join(args[:min(2, len(args))], " "), func(t *testing.T) { wantOneLine(t, r, exitFailure, "stdout", "no space left") })
	}
	// The binary: /dev/full, and a closed stdout.
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer full.Close()
	cmd := binaryCommand(t, nil, "version")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = full, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitFailure || !strings.Contains(stderr.String(), "stdout") {
		t.Errorf("version > /dev/full: %v, stderr %q; want exit 1 naming stdout", err, stderr.String())
	}
	cmd = binaryCommand(t, nil, "-c", `exec "$0" version --json >&-`, builtBinary(t))
	cmd.Path, cmd.Args = "/bin/sh", append([]string{"sh"}, cmd.Args[1:]...)
	stderr.Reset()
	cmd.Stderr = &stderr
	err = cmd.Run()
	if !errors.As(err, &ee) || ee.ExitCode() != exitFailure || !strings.Contains(stderr.String(), "stdout") {
		t.Errorf("version with stdout closed: %v, stderr %q; want exit 1 naming stdout", err, stderr.String())
	}
}

// TestMessages: the messages of round 2 name the file, flag or variable and what is wrong
// with it: a config file cut short (line and column, not "EOF"), LDTORCH_CONFIG (not
// --config), a symbolic link loop or a link to nothing (not "missing" or "file exists"),
// data verify with nothing to verify (exit 2, not 0), the CLI's flag instead of the Go API's
// LinkFolder; a run that fails on its data leaves no empty checkpoints folder.
func TestMessages(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	symlink := func(target, name string) string {
		p := filepath.Join(dir, name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cut := write("cut.json", "{\"epochs\": 3,\n  \"seed\": 4")
	trailing := write("trailing.json", "{\"epochs\": 3} trailing")
	huge := write("huge.json", "{\"epochs\": 1000000000000}")
	loop := symlink("loop-b", "loop-a")
	symlink("loop-a", "loop-b")
	dangling := symlink(filepath.Join(dir, "nowhere", "x"), "dangling")
	emptyData := t.TempDir()
	loopData := t.TempDir()
	os.Mkdir(filepath.Join(loopData, "mnist"), 0o755)
	os.Symlink(loop, filepath.Join(loopData, "mnist", "train-labels-idx1-ubyte.gz"))
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"config cut short", nil, []string{"distill", "--dry-run", "--config", cut}, []string{"--config", cut, "line 2, column 12", "end of the file"}},
		{"config with text after the object", nil, []string{"distill", "--dry-run", "--config", trailing}, []string{trailing, "line 1, column", "text after the JSON object"}},
		{"config with a huge integer", nil, []string{"distill", "--dry-run", "--config", huge}, []string{"epochs in " + huge, "1000000000000", "out of range"}},
		{"config by variable", []string{"LDTORCH_CONFIG=" + cut}, []string{"distill", "--dry-run"}, []string{"LDTORCH_CONFIG=" + cut, "line 2"}},
		{"config a symlink loop", nil, []string{"distill", "--dry-run", "--config", loop}, []string{"--config", loop, "symbolic link loop"}},
		{"out a dangling symlink", nil, []string{"distill", "--quiet", "--data-dir", emptyData, "--out", dangling}, []string{"--out", dangling, "does not exist"}},
		{"data verify of an empty folder", nil, []string{"data", "verify", "--data-dir", emptyData}, []string{"--data-dir", emptyData, "no datasets"}},
		{"data verify of a missing folder", nil, []string{"data", "verify", "--data-dir", filepath.Join(dir, "none")}, []string{"--data-dir", "none", "no such file"}},
		{"data file a symlink loop", nil, []string{"distill", "--quiet", "--data-dir", loopData, "--out", filepath.Join(dir, "o1")}, []string{"train-labels-idx1-ubyte.gz", "symbolic link loop"}},
		{"missing kmnist", nil, []string{"distill", "--quiet", "--dataset", "kmnist", "--data-dir", emptyData, "--out", filepath.Join(dir, "o2")}, []string{"kmnist", "--from-shared"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := ldtorch(t, c.env, c.args...)
			wantOneLine(t, r, exitUsage, c.want...)
			if strings.Contains(r.stderr, "LinkFolder") || strings.Contains(r.stderr, "Fetch") || strings.Contains(r.stderr, "AllowUnknown") {
				t.Errorf("names a Go API field: %s", r.stderr)
			}
		})
	}
	// A run that fails on its data leaves no empty checkpoints folder behind.
	out := filepath.Join(dir, "o1")
	if _, err := os.Stat(filepath.Join(out, "checkpoints")); err == nil {
		t.Errorf("a failed run left %s", filepath.Join(out, "checkpoints"))
	}
}
