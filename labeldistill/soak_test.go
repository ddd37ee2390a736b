package labeldistill

// soak_test.go: memory stays flat. Resident memory (RSS, /proc/self/statm) is read after a
// warm-up and at the end of a long meta-loop (LD and RR, with model resets and checkpoints),
// and across many Distill calls in one process. BenchmarkSoak runs 10,000 meta-steps for the
// record:
//
//	go test ./labeldistill -run '^$' -bench BenchmarkSoak -benchtime 1x -timeout 2h
//
// (LDTORCH_SOAK_STEPS overrides the 10,000.)

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
)

// rssBytes is the resident set size of this process, after returning the Go heap's free
// memory to the OS (so that garbage not yet collected does not count as growth).
func rssBytes(tb testing.TB) int64 {
	tb.Helper()
	debug.FreeOSMemory()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		tb.Skipf("no /proc/self/statm: %v", err)
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		tb.Fatalf("/proc/self/statm: %q", b)
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		tb.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// soakConfig: the small real-MNIST run of ckptConfig for the given number of meta-steps
// (8 per epoch), validating only at the end, G = 10 (a model reset every 21+ steps).
func soakConfig(method string, steps int) config.Config {
	cfg := testkit.SmallConfig(method)
	cfg.Epochs = (steps + 7) / 8
	cfg.ValidateEvery, cfg.ResetWindow, cfg.EvalModels = cfg.Epochs+1, 10, 1
	return cfg
}

// rssDuring runs one Distill and returns RSS after meta-step warm and after the last one.
func rssDuring(tb testing.TB, cfg config.Config, warm int, opts ...RunOption) (start, end int64, res *Result) {
	tb.Helper()
	total := cfg.Epochs * engine.StepsPerEpoch(testkit.SmallDataset(tb).TargetSet.N, cfg.OuterBatch)
	opts = append(opts, WithData(testkit.SmallDataset(tb)), WithProgress(func(p Progress) {
		if p.Phase != "distill" {
			return
		}
		switch p.Step {
		case warm:
			start = rssBytes(tb)
		case total:
			end = rssBytes(tb)
		}
	}))
	res, err := Distill(context.Background(), cfg, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return start, end, res
}

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

// BenchmarkSoak runs 10,000 meta-steps (LDTORCH_SOAK_STEPS) of LD and RR per iteration and
// reports seconds per meta-step and RSS after step 100 and at the end.
func BenchmarkSoak(b *testing.B) {
	steps := 10000
	if s := os.Getenv("LDTORCH_SOAK_STEPS"); s != "" {
		var err error
		if steps, err = strconv.Atoi(s); err != nil || steps < 200 {
			b.Fatalf("LDTORCH_SOAK_STEPS=%q: want an integer ≥ 200", s)
		}
	}
	testkit.RestoreThreads(b)
	for _, method := range []string{config.MethodLD, config.MethodRR} {
		b.Run(method, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				cfg := soakConfig(method, steps)
				cfg.CheckpointEvery = 500
				start, end, res := rssDuring(b, cfg, 100, WithCheckpointDir(b.TempDir()))
				b.ReportMetric(res.SecondsPerStep, "s/meta-step")
				b.ReportMetric(mib(start), "MiB-RSS-step100")
				b.ReportMetric(mib(end), "MiB-RSS-end")
				b.ReportMetric(100*float64(end-start)/float64(start), "%RSS-growth")
				b.Log(fmt.Sprintf("%s: %d meta-steps, %d resets, RSS %.1f -> %.1f MiB", method, res.MetaSteps, len(res.Resets), mib(start), mib(end)))
			}
		})
	}
}
