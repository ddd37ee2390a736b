// Tests of data-parallel `ldtorch distill` over c10d Gloo on 127.0.0.1: two ranks learn the
// labels one process learns (within float tolerance) with the same accuracies; a rank
// killed mid-run makes the other exit non-zero naming it, within the timeout; and a
// two-rank run resumed from its checkpoint ends exactly where an uninterrupted one does.

package main

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/torch/dist"
)

// parallelArgs is a tiny real-MNIST LD run: 4 epochs of 4 meta-steps (outer batch 128,
// shards of 64), checkpoints every 2 meta-steps.
func parallelArgs(shared, out string, extra ...string) []string {
	return append([]string{"distill", "--data-dir", shared, "--dataset", "mnist", "--method", "ld",
		"--base", "20", "--inner-batch", "10", "--outer-batch", "128", "--target-set-size", "512",
		"--epochs", "4", "--validate-every", "2", "--reset-window", "3", "--eval-models", "3",
		"--baselines", "true", "--baseline-max-steps", "20", "--threads", "1", "--checkpoint-every", "2",
		"--quiet", "--out", out}, extra...)
}

// labelTolerance bounds |labels(2 ranks) − labels(1 rank)|. The two runs do the same
// arithmetic except the outer loss's gradient: one process sums the 128 target
// examples' contributions in one order, two ranks sum 64 each and then add the halves,
// so dY differs in its last bits (about 1e-7 relative); Adam turns that into label
// differences of the same relative size, accumulated over the steps.
const labelTolerance = 1e-5

func readRun(t *testing.T, out string) *artifact.Artifact {
	t.Helper()
	a, err := artifact.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if a.Report == nil {
		t.Fatalf("%s: no report.json", out)
	}
	return a
}

func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// oneAndTwoRanks runs parallelArgs(extra) as one process and as two ranks (writing two),
// and checks what every two-rank run must give: one process's labels within
// labelTolerance (d is the largest difference), its meta-steps, T and resets. It returns
// both artifacts and both wall times.
func oneAndTwoRanks(t *testing.T, shared, two string, extra ...string) (a, b *artifact.Artifact, d float64, t1, t2 time.Duration) {
	t.Helper()
	return oneAndTwoRanksEnv(t, shared, two, nil, extra...)
}

// oneAndTwoRanksEnv is oneAndTwoRanks with env added to the two-rank run's environment.
func oneAndTwoRanksEnv(t *testing.T, shared, two string, env []string, extra ...string) (a, b *artifact.Artifact, d float64, t1, t2 time.Duration) {
	t.Helper()
	one := filepath.Join(t.TempDir(), "one")
	start := time.Now()
	if r := runBinary(t, 5*time.Minute, nil, parallelArgs(shared, one, extra...)...); r.code != 0 {
		t.Fatalf("1 rank: exit %d\n%s", r.code, r.stderr)
	}
	t1 = time.Since(start)
	start = time.Now()
	r := runBinary(t, 5*time.Minute, append([]string{"LDTORCH_DIST_TIMEOUT=60s"}, env...), parallelArgs(shared, two, append(extra, "--nproc", "2")...)...)
	if r.code != 0 {
		t.Fatalf("2 ranks: exit %d\n%s", r.code, r.stderr)
	}
	t2 = time.Since(start)
	a, b = readRun(t, one), readRun(t, two)
	if len(a.Labels) != len(b.Labels) || len(a.Labels) == 0 {
		t.Fatalf("label tables of %d and %d values", len(a.Labels), len(b.Labels))
	}
	d = maxAbsDiff(a.Labels, b.Labels)
	if d > labelTolerance {
		t.Errorf("labels differ by up to %.3g, tolerance %.g", d, labelTolerance)
	}
	ra, rb := a.Report, b.Report
	if ra.MetaSteps != rb.MetaSteps || ra.T != rb.T || !reflect.DeepEqual(ra.Resets, rb.Resets) {
		t.Errorf("meta-steps %d/%d, T %d/%d, resets %v/%v (1 rank / 2 ranks)", ra.MetaSteps, rb.MetaSteps, ra.T, rb.T, ra.Resets, rb.Resets)
	}
	return a, b, d, t1, t2
}

// startRank starts one rank the way torchrun does: through the environment.
func startRank(t *testing.T, args []string, rank, world, port int, timeout string, stderr *bytes.Buffer) *exec.Cmd {
	t.Helper()
	cmd := binaryCommand(t, []string{"OMP_NUM_THREADS=1",
		"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + strconv.Itoa(port), "RANK=" + strconv.Itoa(rank),
		"LOCAL_RANK=" + strconv.Itoa(rank), "WORLD_SIZE=" + strconv.Itoa(world), "LDTORCH_DIST_TIMEOUT=" + timeout}, args...)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// killedRankThenResume: two ranks started through the environment (as torchrun starts
// them); rank 1 is killed with SIGKILL after the first checkpoint, and rank 0 must exit
// non-zero within the timeout, naming rank 1. Then the run is resumed with two ranks
// (--nproc 2) and must end with exactly the labels and accuracies of whole, an
// uninterrupted two-rank run.
func killedRankThenResume(t *testing.T, shared, whole string) {
	killed := filepath.Join(t.TempDir(), "killed")

	port, err := dist.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	args := parallelArgs(shared, killed)
	const timeout = 20 * time.Second
	var err0, err1 bytes.Buffer
	r0 := startRank(t, args, 0, 2, port, timeout.String(), &err0)
	r1 := startRank(t, args, 1, 2, port, timeout.String(), &err1)
	exited0 := make(chan error, 1)
	go func() { exited0 <- r0.Wait() }()
	ckpts := filepath.Join(killed, "checkpoints")
	deadline := time.After(3 * time.Minute)
wait:
	for {
		select {
		case err := <-exited0:
			r1.Process.Kill()
			r1.Wait()
			t.Fatalf("rank 0 ended (%v) before rank 1 could be killed\n%s\n%s", err, err0.String(), err1.String())
		case <-deadline:
			r0.Process.Kill()
			r1.Process.Kill()
			t.Fatalf("no checkpoint after 3 minutes\n%s", err0.String())
		case <-time.After(5 * time.Millisecond):
			if m, _ := filepath.Glob(filepath.Join(ckpts, "ckpt-*.npz")); len(m) > 0 {
				break wait
			}
		}
	}
	r1.Process.Kill() // SIGKILL
	killedAt := time.Now()
	r1.Wait()
	select {
	case err := <-exited0:
		took := time.Since(killedAt)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Errorf("rank 0 exited with %v after rank 1 was killed, want a non-zero status", err)
		}
		if !strings.Contains(err0.String(), "rank 1 stopped responding") {
			t.Errorf("rank 0's message does not name rank 1:\n%s", err0.String())
		}
		t.Logf("rank 0 exited %v, %v after rank 1 was killed: %s", err, took.Round(time.Millisecond), strings.TrimSpace(err0.String()))
	case <-time.After(timeout + dist.FailureGrace + 30*time.Second):
		r0.Process.Kill()
		t.Fatalf("rank 0 still running %v after rank 1 was killed\n%s", timeout+dist.FailureGrace+30*time.Second, err0.String())
	}
	if _, err := os.Stat(filepath.Join(killed, artifact.DistilledFile)); err == nil {
		t.Fatal("the failed run wrote an artifact")
	}

	// A resume with another world size is refused (the arithmetic depends on it), naming
	// the one to use, and changes nothing.
	before := snapshot(t, killed)
	if r := runBinary(t, time.Minute, nil, parallelArgs(shared, killed, "--resume", killed)...); r.code == 0 || !strings.Contains(r.stderr, "--nproc 2") {
		t.Errorf("resume of a 2-rank checkpoint by one process: exit %d, want a refusal naming --nproc 2\n%s", r.code, r.stderr)
	}
	sameFiles(t, killed, before)
	// So is one with --nproc 3: its message once (rank 0's), not once per rank, and no
	// launcher line pointing at it.
	r := runBinary(t, time.Minute, nil, parallelArgs(shared, killed, "--nproc", "3", "--resume", killed)...)
	if msg := strings.TrimSpace(r.stderr); r.code != exitUsage || strings.Count(msg, "--nproc 2") != 1 || strings.Contains(msg, "\n") || strings.Contains(msg, "message is above") {
		t.Errorf("--nproc 3 --resume of a 2-rank run: exit %d, want %d and its message once in one line:\n%s", r.code, exitUsage, r.stderr)
	}
	sameFiles(t, killed, before)

	r = runBinary(t, 5*time.Minute, nil, parallelArgs(shared, killed, "--nproc", "2", "--resume", killed)...)
	if r.code != 0 {
		t.Fatalf("resumed 2-rank run: exit %d\n%s", r.code, r.stderr)
	}
	a, b := readRun(t, whole), readRun(t, killed)
	if !reflect.DeepEqual(a.Labels, b.Labels) {
		t.Errorf("resumed 2-rank labels differ from the uninterrupted 2-rank run's by up to %.3g", maxAbsDiff(a.Labels, b.Labels))
	}
	if !reflect.DeepEqual(a.Report.TestAccuracies, b.Report.TestAccuracies) {
		t.Errorf("test accuracies %v (resumed) vs %v", b.Report.TestAccuracies, a.Report.TestAccuracies)
	}
}

// Bad distributed settings are usage errors naming the variable or flag.
func TestParallelUsageErrors(t *testing.T) {
	shared := sharedDatasets(t)
	out := t.TempDir()
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--nproc", "0"}, "--nproc: must be between 1 and"},
		{[]string{"WORLD_SIZE=2", "RANK=0", "MASTER_ADDR=127.0.0.1"}, nil, "MASTER_PORT is not set"},
		{[]string{"WORLD_SIZE=2", "RANK=5", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=1"}, nil, "RANK=5 is outside 0..1"},
		{[]string{"WORLD_SIZE=2", "RANK=0", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=1"}, []string{"--nproc", "3"}, "--nproc 3 but WORLD_SIZE=2"},
		{[]string{"RANK=1", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=1"}, nil, "WORLD_SIZE is not set (RANK=1 is)"},
		{[]string{"WORLD_SIZE=2"}, nil, "RANK is not set (WORLD_SIZE=2 is)"},
		{[]string{"WORLD_SIZE=2", "RANK=1", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=1", "LDTORCH_DIST_TIMEOUT=abc"}, nil, `LDTORCH_DIST_TIMEOUT="abc" is not a positive duration`},
		{[]string{"LDTORCH_DIST_TIMEOUT=0"}, []string{"--nproc", "2"}, `LDTORCH_DIST_TIMEOUT="0" is not a positive duration`},
		{[]string{"LDTORCH_DIST_TIMEOUT=1e99"}, []string{"--nproc", "2"}, `LDTORCH_DIST_TIMEOUT="1e99" is not a positive duration`},
		{[]string{"LDTORCH_DIST_TIMEOUT=-1s"}, []string{"--nproc", "2"}, `LDTORCH_DIST_TIMEOUT="-1s" is not a positive duration`},
		{[]string{"LDTORCH_DIST_SPIN=-2ms"}, []string{"--nproc", "2"}, `LDTORCH_DIST_SPIN="-2ms" is not a duration of 0 or more`},
		{[]string{"WORLD_SIZE=2", "RANK=1", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=1", "LDTORCH_DIST_SPIN=5s"}, nil, `LDTORCH_DIST_SPIN="5s" is longer than the limit of 1s`},
		{[]string{"LDTORCH_BASE_SPLIT=yes"}, []string{"--nproc", "2"}, `LDTORCH_BASE_SPLIT: unknown base split "yes" (known: auto, on, off)`},
		{[]string{"LDTORCH_BASE_SPLIT=ON"}, nil, `LDTORCH_BASE_SPLIT: unknown base split "ON"`},
	} {
		r := ldtorch(t, c.env, parallelArgs(shared, out, c.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v %v: exit %d, stderr %q; want %d and %q", c.env, c.args, r.code, r.stderr, exitUsage, c.want)
		}
	}
}

// childWithEnv is the child process of pid whose environment holds kv (0 if none).
func childWithEnv(pid int, kv string) int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, field := range strings.Fields(string(b)) {
			child, _ := strconv.Atoi(field)
			env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", child))
			for _, e := range strings.Split(string(env), "\x00") {
				if e == kv {
					return child
				}
			}
		}
	}
	return 0
}
