//go:build long

package main

// signals_long_test.go: the long tests of reliability_test.go (multi-process, signals, soaks),
// run by scripts/test-long.sh.

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignalsHonoured: SIGHUP during the meta-loop checkpoints and exits 130 (it used to
// kill the run without a checkpoint); meanwhile a second run into the same --out is refused
// naming the folder and the holder's PID; SIGTERM during the final test with T < 50 and
// SIGINT while evaluate scores its models stop within seconds with exit 130 and no
// artifact (both used to be ignored until the end); SIGTERM in the second baseline says the
// finished test and baseline are kept, and the resume takes them without training them.
func TestSignalsHonoured(t *testing.T) {
	shared := sharedDatasets(t)
	t.Run("SIGHUP in the meta-loop, one run per folder", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out")
		r := startBinary(t, tinyDistill(shared, out, "--epochs", "1000", "--validate-every", "1")...)
		r.waitFor(t, "epoch 1/1000", 2*time.Minute)

		second := ldtorch(t, nil, tinyDistill(shared, out, "--quiet")...)
		wantOneLine(t, second, exitUsage, "--out", out, "in use", strconv.Itoa(r.cmd.Process.Pid))

		if err := r.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		if code := r.exitWithin(t, signalLimit); code != exitInterrupted {
			t.Fatalf("after SIGHUP: exit %d, want %d:\n%s", code, exitInterrupted, r.log.String())
		}
		if !strings.Contains(r.log.String(), "--resume "+out) {
			t.Errorf("no --resume hint:\n%s", r.log.String())
		}
		if m, _ := filepath.Glob(filepath.Join(out, "checkpoints", "ckpt-*.npz")); len(m) == 0 {
			t.Errorf("no checkpoint after SIGHUP")
		}
		noFile(t, filepath.Join(out, "distilled.npz"))
		// The lock went with the process: the folder can be resumed at once.
		res := ldtorch(t, nil, "distill", "--resume", out, "--dry-run")
		if res.code != 0 || !strings.Contains(res.stdout, `"epochs": 1000`) {
			t.Errorf("--resume %s --dry-run: exit %d: %s%s", out, res.code, res.stdout, res.stderr)
		}
	})
	t.Run("SIGTERM twice at once, as timeout(1) sends it", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out")
		r := startBinary(t, tinyDistill(shared, out, "--epochs", "1000", "--validate-every", "1")...)
		r.waitFor(t, "epoch 1/1000", 2*time.Minute)
		// timeout(1) signals its command, then its own process group; 10 ms apart here, while
		// the run is still stopping.
		for i := 0; i < 2; i++ {
			if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if code := r.exitWithin(t, signalLimit); code != exitInterrupted {
			t.Fatalf("after SIGTERM twice: exit %d, want %d:\n%s", code, exitInterrupted, r.log.String())
		}
		if m, _ := filepath.Glob(filepath.Join(out, "checkpoints", "ckpt-*.npz")); len(m) == 0 {
			t.Errorf("no checkpoint after SIGTERM twice:\n%s", r.log.String())
		}
	})
	t.Run("SIGTERM in the final test", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out")
		r := startBinary(t, tinyDistill(shared, out, "--epochs", "1", "--eval-models", "400")...)
		r.waitFor(t, "final test: ", 2*time.Minute)
		if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := r.exitWithin(t, signalLimit); code != exitInterrupted {
			t.Fatalf("after SIGTERM: exit %d, want %d:\n%s", code, exitInterrupted, r.log.String())
		}
		noFile(t, filepath.Join(out, "distilled.npz"))
		noFile(t, filepath.Join(out, "report.json"))
		if !strings.Contains(r.log.String(), "--resume "+out) {
			t.Errorf("no --resume hint:\n%s", r.log.String())
		}
	})
	t.Run("SIGTERM in a baseline keeps the finished phases", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out")
		args := tinyDistill(shared, out, "--epochs", "1", "--eval-models", "4", "--baselines", "true,smooth")
		r := startBinary(t, args...)
		r.waitFor(t, "baseline smooth: step search and test models", 2*time.Minute)
		if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := r.exitWithin(t, signalLimit); code != exitInterrupted {
			t.Fatalf("after SIGTERM: exit %d, want %d:\n%s", code, exitInterrupted, r.log.String())
		}
		phases := filepath.Join(out, "checkpoints", "phases.json")
		if !strings.Contains(r.log.String(), "what it finished of the final test and the baselines (each test model as it was scored) is kept in "+phases) {
			t.Errorf("the interruption does not name %s:\n%s", phases, r.log.String())
		}
		res := ldtorch(t, nil, "distill", "--resume", out, "--data-dir", shared)
		if res.code != 0 {
			t.Fatalf("--resume: exit %d: %s", res.code, res.stderr)
		}
		for _, want := range []string{"final test: the 4 test models' accuracies are those finished before the resume (phases.json)",
			"baseline true: the result finished before the resume (phases.json)", "baseline smooth: step search and test models"} {
			if !strings.Contains(res.stderr, want) {
				t.Errorf("the resume does not say %q:\n%s", want, res.stderr)
			}
		}
		if rep := readReport(t, out); len(rep["baselines"].(map[string]any)) != 2 {
			t.Errorf("report.json baselines %v, want true_rr and smooth_rr", rep["baselines"])
		}
	})
	t.Run("SIGINT while evaluate scores", func(t *testing.T) {
		art := tinyRun(t)
		// One training step, then each model scores 10,000 test images (one at a time: the
		// evaluation records each as it is scored), 480 times: the first progress line (after
		// ~10 s) comes while they score, also on a fast CPU. The signal stops the rest, so more
		// models cost nothing.
		r := startBinary(t, "evaluate", "--distilled", art, "--data-dir", shared, "--steps", "1", "--models", "480", "--threads", "1")
		r.waitFor(t, "scoring blocks", 2*time.Minute)
		if err := r.cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		if code := r.exitWithin(t, signalLimit); code != exitInterrupted {
			t.Fatalf("after SIGINT: exit %d, want %d:\n%s", code, exitInterrupted, r.log.String())
		}
		if want := "the same command goes on after the last scored model (kept in " + filepath.Join(art, "evaluations", "evaluate-partial-*") + ")"; !strings.Contains(r.log.String(), want) {
			t.Errorf("the interruption does not say %q:\n%s", want, r.log.String())
		}
	})
}
