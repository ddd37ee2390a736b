package engine

// fresh_bench_test.go: the final evaluation (§7: 20 fresh models, N = 100 base
// examples, batch 50) trained one after another by the sequential oracle
// (evaluateModelsSequential) and together (train.Trainer.Test). Each iteration trains benchModels models for benchSteps steps
// and scores them on benchTest test images (BenchmarkTrain*: training only). Metrics:
// model-steps/s (models × steps per wall-clock second, scoring included) and
// cpu-ms/model-step (process CPU time, steadier than wall time on a loaded machine). Real
// MNIST when ../shared has it, random images otherwise. The benchmarks pin libtorch to one
// thread (as the reference figures of docs/ALGORITHM.md §10; *Threads2: two). Run OpenBLAS
// single-threaded too, or its spinning threads inflate the CPU time:
//
//	OPENBLAS_NUM_THREADS=1 go test ./labeldistill -run '^$' \
//	    -bench '(Evaluate|Train)(Sequential|Batched)$' -benchtime 1x -count 5

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

const (
	benchModels = 20
	benchSteps  = 50
	benchBase   = 100
	benchBatch  = 50
	benchTest   = 1000
)

// benchTrainer is an evaluation trainer for LeNet on MNIST-shaped data with label-smoothed
// one-hot labels (0.9 + 0.01 per class) for the base examples.
func benchTrainer(b *testing.B, rr bool) (tr *train.Trainer, x, y *torch.Tensor) {
	b.Helper()
	s := torch.NewScope()
	b.Cleanup(s.Close)
	var base, test data.Split
	if _, err := os.Stat(filepath.Join("..", "..", "..", "shared", "datasets", "mnist")); err == nil {
		ds := testkit.CachedMNIST(b, 5000, 0, benchTest, benchBase)
		base, test = ds.Base, ds.Test
	} else {
		rng := tRNG(11)
		random := func(n int) data.Split {
			sp := data.Split{Images: make([]float32, n*784), Labels: make([]int64, n), N: n, C: 1, H: 28, W: 28, Classes: 10}
			for i := range sp.Images {
				sp.Images[i] = float32(rng.NormFloat64())
			}
			for i := range sp.Labels {
				sp.Labels[i] = int64(rng.IntN(10))
			}
			return sp
		}
		base, test = random(benchBase), random(benchTest)
	}
	shape := [3]int64{1, 28, 28}
	bd := tNeed[deviceSplit](b)(upload(&base, shape, torch.CPU))
	td := tNeed[deviceSplit](b)(upload(&test, shape, torch.CPU))
	table := make([]float32, benchBase*10)
	for i, c := range base.Labels {
		for k := 0; k < 10; k++ {
			table[i*10+k] = 0.01
		}
		table[i*10+int(c)] = 0.91
	}
	tab := tT(b)(torch.FromFloat32(table, benchBase, 10))
	net := tNeed[*nets.Net](b)(nets.New("lenet", 1, 28, 28, 10))
	cfg := config.Default()
	tr = &train.Trainer{Net: net, RR: rr, Cfg: cfg, Images: bd.x, Labels: tab, Batch: benchBatch, Opt: train.AdamSpec(cfg.EvalLR), Device: torch.CPU}
	return tr, td.x, td.y
}

// cpuSeconds is the process's user + system CPU time: with libtorch on one thread it is a
// steadier measure than wall time on a loaded machine.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return math.NaN()
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// benchEvaluate: how is "sequential" (the oracle), "one" (trainModels one model at a time,
// as validation and the step searches train), "batched" (the device's body mode) or
// "grouped" (nets.BodyGrouped). With trainOnly, each iteration trains the models (trainSequential per
// model, or trainModels) without scoring them.
func benchEvaluate(b *testing.B, threads int, how string, trainOnly bool) {
	prev := torch.NumThreads()
	tOK(b, torch.SetNumThreads(threads))
	b.Cleanup(func() { _ = torch.SetNumThreads(prev) })
	for _, method := range []string{"ld", "rr"} {
		b.Run(method, func(b *testing.B) {
			tr, x, y := benchTrainer(b, method == "rr")
			mode := train.Mode(tr.Device)
			if how == "grouped" {
				mode = nets.BodyGrouped
			}
			ctx := context.Background()
			seeds := make([]uint64, benchModels)
			for i := range seeds {
				seeds[i] = train.Seed(1, "bench", i)
			}
			run := func() (accs []float64, err error) {
				switch {
				case how == "sequential" && !trainOnly:
					return evaluateModelsSequential(ctx, tr, benchSteps, benchModels, 1, "bench", x, y)
				case how == "one" && !trainOnly:
					tr.Together = 1
					defer func() { tr.Together = 0 }()
					return tr.TestMode(ctx, benchSteps, benchModels, 1, "bench", x, y, mode)
				case !trainOnly:
					return tr.TestMode(ctx, benchSteps, benchModels, 1, "bench", x, y, mode)
				case how == "sequential":
					for _, seed := range seeds {
						l, err := trainSequential(ctx, tr, benchSteps, seed, nil, nil, nil)
						if err != nil {
							return nil, err
						}
						l.close()
					}
					return nil, nil
				case how == "one":
					for _, seed := range seeds {
						l, err := tr.TrainOne(ctx, benchSteps, seed, nil)
						if err != nil {
							return nil, err
						}
						l.Close()
					}
					return nil, nil
				}
				l, err := tr.TrainModels(ctx, benchSteps, seeds, mode, nil)
				if err == nil {
					l.Close()
				}
				return nil, err
			}
			b.ResetTimer()
			start, cpu := time.Now(), cpuSeconds()
			var accs []float64
			for i := 0; i < b.N; i++ {
				var err error
				if accs, err = run(); err != nil {
					b.Fatal(err)
				}
			}
			el, cpu := time.Since(start).Seconds(), cpuSeconds()-cpu
			work := float64(benchModels * benchSteps * b.N)
			b.ReportMetric(work/el, "model-steps/s")
			b.ReportMetric(1000*cpu/work, "cpu-ms/model-step")
			if accs != nil {
				mean, _ := train.MeanStd(accs)
				b.ReportMetric(mean, "mean-acc-%")
			}
			if testing.Verbose() {
				b.Logf("%s %s: %d models × %d steps in %.2f s per call (cpu %.2f s); accuracies %.2f", how, method, benchModels, benchSteps, el/float64(b.N), cpu/float64(b.N), accs)
			}
		})
	}
}

func BenchmarkEvaluateSequential(b *testing.B)         { benchEvaluate(b, 1, "sequential", false) }
func BenchmarkEvaluateBatched(b *testing.B)            { benchEvaluate(b, 1, "batched", false) }
func BenchmarkEvaluateBatchedGrouped(b *testing.B)     { benchEvaluate(b, 1, "grouped", false) }
func BenchmarkEvaluateSequentialThreads2(b *testing.B) { benchEvaluate(b, 2, "sequential", false) }
func BenchmarkEvaluateBatchedThreads2(b *testing.B)    { benchEvaluate(b, 2, "batched", false) }
func BenchmarkTrainSequential(b *testing.B)            { benchEvaluate(b, 1, "sequential", true) }
func BenchmarkTrainBatched(b *testing.B)               { benchEvaluate(b, 1, "batched", true) }
func BenchmarkEvaluateOne(b *testing.B)                { benchEvaluate(b, 1, "one", false) }
func BenchmarkTrainOne(b *testing.B)                   { benchEvaluate(b, 1, "one", true) }
