package engine

// distill_bench_test.go: one epoch of a default-sized run, timed (it was a test that
// asserted nothing; the end-to-end tests check what a run produces):
//
//	go test ./labeldistill -run '^$' -bench DistillOneEpoch -benchtime 1x

import (
	"context"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
)

// BenchmarkDistillOneEpoch runs one epoch (49 meta-steps) of LD and LD RR on MNIST with the
// default settings (N = 100, N_i = 50, N_o = 1024), then the validation and the final test
// of 2 models, and reports seconds per meta-step and per run.
func BenchmarkDistillOneEpoch(b *testing.B) {
	ds := testkit.MNIST(b, 50000, 2000, 2000, 100)
	for _, m := range []string{config.MethodLD, config.MethodRR} {
		b.Run(m, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				cfg := config.Default()
				cfg.Method, cfg.Epochs, cfg.EvalModels, cfg.Baselines = m, 1, 2, []string{}
				res, err := testDistill(context.Background(), cfg, WithData(ds))
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(res.SecondsPerStep, "s/meta-step")
				b.ReportMetric(res.WallSeconds, "s/run")
				b.Logf("%s: %d meta-steps, T %d, validation %.2f %%, test %.2f ± %.2f %%", m, res.MetaSteps, res.T, res.BestValidation.Accuracy, res.TestMean, res.TestStd)
			}
		})
	}
}
