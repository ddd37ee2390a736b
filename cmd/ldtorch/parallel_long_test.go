//go:build long

package main

// parallel_long_test.go: the long tests of parallel_test.go (multi-process, signals, soaks),
// run by scripts/test-long.sh.

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestParallelMatchesOneRank: LD over two ranks (the outer batch split; LeNet's 10 base rows
// whole on each rank, LDTORCH_BASE_SPLIT's default) learns one process's labels,
// validations, test accuracies and baseline; resumed after a killed rank, it ends as an
// uninterrupted two-rank run.
func TestParallelMatchesOneRank(t *testing.T) {
	shared := sharedDatasets(t)
	two := filepath.Join(t.TempDir(), "two")
	a, b, d, t1, t2 := oneAndTwoRanks(t, shared, two)
	ra, rb := a.Report, b.Report
	if len(ra.Validations) != len(rb.Validations) || ra.BestValidation.Epoch != rb.BestValidation.Epoch ||
		math.Abs(ra.BestValidation.Accuracy-rb.BestValidation.Accuracy) > 0.5 {
		t.Errorf("validations %+v (1 rank) vs %+v (2 ranks, validation split scored in halves)", ra.Validations, rb.Validations)
	}
	if len(ra.TestAccuracies) != 3 || len(rb.TestAccuracies) != 3 {
		t.Fatalf("test accuracies %v / %v", ra.TestAccuracies, rb.TestAccuracies)
	}
	for i := range ra.TestAccuracies {
		// the same models from labels equal to ~1e-6: an image or two may flip
		if math.Abs(ra.TestAccuracies[i]-rb.TestAccuracies[i]) > 0.5 {
			t.Errorf("test accuracy of model %d: %.2f (1 rank) vs %.2f (2 ranks)", i, ra.TestAccuracies[i], rb.TestAccuracies[i])
		}
	}
	ba, bb := ra.Baselines["true"], rb.Baselines["true"]
	if ba.Steps != bb.Steps || !reflect.DeepEqual(ba.Accuracies, bb.Accuracies) {
		t.Errorf("true-label baseline: %d steps %v (1 rank) vs %d steps %v (2 ranks)", ba.Steps, ba.Accuracies, bb.Steps, bb.Accuracies)
	}
	// only rank 0 wrote: one artifact, one set of checkpoints
	if m, _ := filepath.Glob(filepath.Join(two, "checkpoints", "ckpt-*.npz")); len(m) == 0 {
		t.Error("the 2-rank run wrote no checkpoints")
	}
	t.Logf("max |Δlabel| %.3g; test accuracies %v (1 rank) %v (2 ranks); wall %v (1 rank) %v (2 ranks)",
		d, ra.TestAccuracies, rb.TestAccuracies, t1.Round(time.Millisecond), t2.Round(time.Millisecond))
	t.Run("killed rank, then resume", func(t *testing.T) { killedRankThenResume(t, shared, two) })
}

// TestParallelSplitsTheBaseBatch: with LDTORCH_BASE_SPLIT=on, LD RR and LD over two ranks
// split LeNet's base batch too (each rank runs the network on its 5 or 4 of the 9 base rows;
// LD RR gathers their features and sums their parts of θ's gradient, LD sums their parts of
// the inner gradient and of the target loss's gradient with respect to θ′:
// labeldistill's TestBaseShardGivesOneProcesssGradient checks both in float64) and learn
// one process's labels to rounding over 8 meta-steps. Further on, float32 runs drift apart:
// Adam divides each θ gradient by its own scale, so a gradient that is zero to rounding in
// one run and not in the other moves a weight by up to the learning rate (LD RR, 32
// meta-steps: labels 7e-4 apart). The ranks themselves agree bit for bit (the run checks it
// at every validation).
func TestParallelSplitsTheBaseBatch(t *testing.T) {
	shared := sharedDatasets(t)
	for _, method := range []string{"rr", "ld"} {
		t.Run(method, func(t *testing.T) {
			args := []string{"--method", method, "--inner-batch", "9", "--epochs", "2", "--validate-every", "1",
				"--reset-window", "100", "--eval-models", "1", "--baselines", "none"}
			a, _, d, _, _ := oneAndTwoRanksEnv(t, shared, filepath.Join(t.TempDir(), "two"), []string{"LDTORCH_BASE_SPLIT=on"}, args...)
			if a.Report.MetaSteps != 8 {
				t.Errorf("%d meta-steps, want 8", a.Report.MetaSteps)
			}
			t.Logf("max |Δlabel| %.3g after %d meta-steps", d, a.Report.MetaSteps)
		})
	}
}

// A --nproc rank killed by a signal printed nothing: the launcher says so (not "its message
// is above"), after rank 0's own line naming it.
func TestParallelKilledRankReported(t *testing.T) {
	shared := sharedDatasets(t)
	out := filepath.Join(t.TempDir(), "out")
	args := parallelArgs(shared, out, "--nproc", "2")
	for i, a := range args {
		if a == "--epochs" {
			args[i+1] = "100" // runs long enough to be killed
		}
	}
	cmd := binaryCommand(t, []string{"LDTORCH_DIST_TIMEOUT=20s"}, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var rank1 int
	for start := time.Now(); rank1 == 0; time.Sleep(10 * time.Millisecond) {
		if m, _ := filepath.Glob(filepath.Join(out, "checkpoints", "ckpt-*.npz")); len(m) > 0 {
			rank1 = childWithEnv(cmd.Process.Pid, "RANK=1")
		}
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("no checkpoint or no rank 1 after 2 minutes\n%s", stderr.String())
		}
	}
	if err := syscall.Kill(rank1, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatalf("the launcher still runs a minute after rank 1 was killed\n%s", stderr.String())
	}
	var ee *exec.ExitError
	msg := strings.TrimSpace(stderr.String())
	lines := strings.Split(msg, "\n")
	if !errors.As(err, &ee) || ee.ExitCode() != exitFailure || len(lines) != 2 ||
		!strings.Contains(lines[0], "rank 1 stopped responding") || !strings.Contains(lines[1], "rank 1 was killed by signal killed") ||
		strings.Contains(msg, "message is above") {
		t.Errorf("exit %v; want 1, rank 0's line naming rank 1 and the launcher's saying it was killed:\n%s", err, msg)
	}
}

// An interrupted --nproc run checkpoints where it stopped and says how to continue, whether
// Ctrl-C reaches every process (a terminal signals the launcher's whole process group: each
// rank gets SIGINT and then the launcher's SIGTERM), the launcher alone, or the launcher
// one SIGTERM twice (as timeout(1) sends it); the resumed run finishes. A rank interrupted
// alone stops the group as interrupted (exit 130, the resume command). A second interrupt
// kills the ranks at once.
func TestParallelInterrupted(t *testing.T) {
	shared := sharedDatasets(t)
	start := func(t *testing.T, out string) *startedRun {
		args := parallelArgs(shared, out, "--nproc", "2", "--checkpoint-every", "1000")
		for i, a := range args {
			if a == "--epochs" {
				args[i+1] = "200" // runs long enough to be interrupted
			}
		}
		cmd := binaryCommand(t, nil, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a group of its own, as a terminal's job
		r := startCommand(t, cmd)
		t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		// the meta-loop has taken a step once rank 0's history has a line after its first
		// (the start line, written before any meta-step: a signal then may stop the run at 0)
		for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
			if b, _ := os.ReadFile(filepath.Join(out, "metrics.jsonl")); bytes.Count(b, []byte("\n")) > 1 {
				break
			}
			if time.Since(start) > 2*time.Minute {
				t.Fatalf("no history after 2 minutes")
			}
		}
		return r
	}
	wait := func(t *testing.T, r *startedRun) (int, string) {
		code := r.exitWithin(t, signalLimit)
		return code, strings.TrimSpace(r.log.String())
	}
	for _, c := range []struct {
		name, target string
	}{{"Ctrl-C to the process group", "group"}, {"SIGINT to the launcher alone", "launcher"},
		{"SIGTERM twice to the launcher, as timeout(1) sends it", "launcher twice"}, {"SIGTERM to rank 1 alone", "rank 1"}} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			r := start(t, out)
			pid, sig := r.cmd.Process.Pid, syscall.SIGINT
			switch c.target {
			case "group":
				pid = -pid
			case "rank 1": // it stops 5 s later, and rank 0 with it, at a meta-step boundary
				pid, sig = childWithEnv(pid, "RANK=1"), syscall.SIGTERM
			case "launcher twice": // the same signal again is the same interruption
				// timeout(1) sends SIGTERM to the command, then at once to its own process
				// group, the command included: the second one comes while the first is
				// being handled, or after the launcher is gone (ESRCH), never much later.
				sig = syscall.SIGTERM
				if err := syscall.Kill(pid, sig); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Millisecond)
			}
			err := syscall.Kill(pid, sig)
			if c.target == "launcher twice" && err == syscall.ESRCH {
				err = nil // the launcher finished before the second signal: no harm either
			}
			if err != nil || pid == 0 {
				t.Fatal(pid, err)
			}
			code, msg := wait(t, r)
			if c.target == "rank 1" { // rank 0 learns of it in a failed collective: no checkpoint then
				if code != exitInterrupted || !strings.HasPrefix(msg, "ldtorch distill: rank 1 was interrupted after") || strings.Count(msg, "\n") != 0 {
					t.Errorf("exit %d, stderr:\n%s\nwant 130 and one line of rank 0's saying that rank 1 was interrupted", code, msg)
				}
				return
			}
			m := regexp.MustCompile(`interrupted after (\d+) meta-steps; .*continue with: ldtorch distill --resume \S+ --nproc 2`).FindStringSubmatch(msg)
			if code != exitInterrupted || m == nil || strings.Count(msg, "\n") != 0 {
				t.Fatalf("exit %d, stderr:\n%s\nwant 130 and one line of rank 0's naming the meta-step and the resume command", code, msg)
			}
			steps, _ := strconv.Atoi(m[1])
			ckpt := filepath.Join(out, "checkpoints", fmt.Sprintf("ckpt-%09d.npz", steps))
			if _, err := os.Stat(ckpt); err != nil || steps == 0 {
				t.Fatalf("no checkpoint of the interruption (%v):\n%s", err, msg)
			}
			if c.target != "group" {
				return
			}
			res := runBinary(t, 3*time.Minute, nil, "distill", "--resume", out, "--nproc", "2", "--data-dir", shared, "--quiet")
			if res.code != 0 {
				t.Fatalf("resume: exit %d\n%s", res.code, res.stderr)
			}
			if a := readRun(t, out); a.Report.MetaSteps != 800 {
				t.Errorf("resumed run ended at meta-step %d, want 800", a.Report.MetaSteps)
			}
		})
	}
	t.Run("a second interrupt", func(t *testing.T) {
		r := start(t, filepath.Join(t.TempDir(), "out"))
		// two kinds of signal: two SIGINTs sent at once may reach the process as one
		r.cmd.Process.Signal(syscall.SIGINT)
		r.cmd.Process.Signal(syscall.SIGTERM)
		code, msg := wait(t, r)
		if code != exitInterrupted || !strings.Contains(msg, "interrupted twice: the ranks were killed") {
			t.Errorf("exit %d, stderr:\n%s\nwant 130 and the launcher saying it killed the ranks", code, msg)
		}
		if rank := childWithEnv(r.cmd.Process.Pid, "RANK=1"); rank != 0 {
			t.Errorf("rank 1 (pid %d) still runs", rank)
		}
	})
}
