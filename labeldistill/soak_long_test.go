//go:build long

package labeldistill

// soak_long_test.go: the long tests of soak_test.go (multi-process, signals, soaks),
// run by scripts/test-long.sh.

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
)

// TestRSSFlatOverMetaSteps: 200 meta-steps (LD with a checkpoint every 20 steps, and RR);
// RSS after the last step may exceed RSS after step 40 by at most 5 % or 4 MiB.
func TestRSSFlatOverMetaSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("long-running memory test")
	}
	// Beside TestRSSFlatOverDistillCalls, whose work is in a child process. No other test
	// of the package may be parallel: tensor scopes are process-wide.
	t.Parallel()
	testkit.RestoreThreads(t)
	for _, method := range []string{config.MethodLD, config.MethodRR} {
		cfg := soakConfig(method, 200)
		var opts []RunOption
		if method == config.MethodLD {
			cfg.CheckpointEvery = 20
			opts = append(opts, WithCheckpointDir(t.TempDir()))
		}
		start, end, res := rssDuring(t, cfg, 40, opts...)
		growth := end - start
		t.Logf("%s: %d meta-steps, %d resets, RSS %.1f MiB after step 40, %.1f MiB after step %d (%+.2f MiB, %+.2f %%), %.1f ms/step",
			method, res.MetaSteps, len(res.Resets), mib(start), mib(end), res.MetaSteps, mib(growth), 100*float64(growth)/float64(start), 1000*res.SecondsPerStep)
		if growth > max(start/20, 4<<20) {
			t.Fatalf("%s: RSS grew from %.1f MiB to %.1f MiB over %d meta-steps", method, mib(start), mib(end), res.MetaSteps-40)
		}
	}
}

// TestRSSFlatOverDistillCalls: 30 small Distill calls (LD and RR alternating, with
// checkpoints) in one process; RSS after the last may exceed RSS after the 10th by at most
// 8 MiB, while a LeNet leaked with its Adam state by every call (0.74 MB) would add 15 MiB
// over the 20 measured calls. The calls run in a child process (this test binary) with
// glibc's allocator pinned down: one arena (MALLOC_ARENA_MAX=1) and mmap and trim
// thresholds fixed at 128 KiB. By default each OS thread that a call happens to run on gets
// its own malloc arena, which keeps its freed memory, and glibc raises its mmap threshold as
// large blocks are freed and then keeps later large blocks (each call's 13 MB of uploaded
// splits) in its heap: RSS then wanders by ±50 MB and steps up as new threads appear,
// without any memory being live. Pinned, RSS measures live memory.
func TestRSSFlatOverDistillCalls(t *testing.T) {
	const calls, after = 30, 10
	if os.Getenv("LDTORCH_RSS_CHILD") == "1" {
		ds := testkit.SmallDataset(t)
		var mid int64
		for i := 1; i <= calls; i++ {
			method := []string{config.MethodLD, config.MethodRR}[i%2]
			cfg := soakConfig(method, 8)
			cfg.CheckpointEvery = 4
			if _, err := Distill(context.Background(), cfg, WithData(ds), WithCheckpointDir(t.TempDir())); err != nil {
				t.Fatal(err)
			}
			if i == after {
				mid = rssBytes(t)
			}
		}
		end := rssBytes(t)
		t.Logf("RSS %.1f MiB after call %d, %.1f MiB after call %d (%+.2f MiB)", mib(mid), after, mib(end), calls, mib(end-mid))
		if end-mid > 8<<20 {
			t.Fatalf("RSS grew by %.1f MiB over %d Distill calls", mib(end-mid), calls-after)
		}
		return
	}
	if testing.Short() {
		t.Skip("long-running memory test")
	}
	// The calls run in a child process, so this test only waits: in parallel with
	// TestRSSFlatOverMetaSteps (the package's one other parallel test, so the process
	// still does tensor work on one goroutine at a time).
	t.Parallel()
	testkit.SmallDataset(t) // skip here when MNIST is absent
	cmd := exec.Command(os.Args[0], "-test.run=^TestRSSFlatOverDistillCalls$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "LDTORCH_RSS_CHILD=1", "MALLOC_ARENA_MAX=1", "MALLOC_MMAP_THRESHOLD_=131072", "MALLOC_TRIM_THRESHOLD_=131072",
		"MALLOC_TOP_PAD_=131072") // all four set here, whatever the suite runs under
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "MiB") {
			t.Log(strings.TrimSpace(line))
		}
	}
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
