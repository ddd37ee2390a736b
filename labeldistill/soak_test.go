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
