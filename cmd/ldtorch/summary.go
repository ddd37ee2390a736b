package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/rundir"
	"github.com/ldtorch/ldtorch/labeldistill/train"
)

// summary.go: the summary a finished distillation prints: the distilled labels' accuracy
// beside each baseline's.

// baselineName is how the summary names a baseline key of Result.Baselines.
func baselineName(key string) string {
	base, rr := strings.CutSuffix(key, "_rr")
	name := map[string]string{
		config.BaselineTrue:    "true labels",
		config.BaselineSmooth:  "smoothed labels",
		config.BaselineTeacher: "teacher labels",
	}[base]
	if name == "" {
		name = base
	}
	if rr {
		name += " (RR)"
	}
	return name
}

// baselineKeys lists the result's baselines in the config's order, then any others.
func baselineKeys(res *labeldistill.Result) []string {
	var keys []string
	seen := map[string]bool{}
	for _, b := range res.Config.Baselines {
		for _, k := range []string{b, b + "_rr"} {
			if _, ok := res.Baselines[k]; ok && !seen[k] {
				keys = append(keys, k)
				seen[k] = true
			}
		}
	}
	for k := range res.Baselines {
		if !seen[k] {
			keys = append(keys, k)
		}
	}
	return keys
}

// printSummary prints the run's outcome: distilled labels vs baselines.
func printSummary(w io.Writer, res *labeldistill.Result, out string) {
	cfg := res.Config
	from := ""
	if cfg.IsCrossDataset() {
		from = ", base examples from " + cfg.Source
	}
	fmt.Fprintf(w, "%s on %s%s: %d base examples, seed %d, %s, %s, %s\n",
		cfg.MethodName(), cfg.Dataset, from, cfg.BaseExamples, cfg.Seed, plural(cfg.Epochs, "epoch"),
		plural(res.MetaSteps, "meta-step"), plural(len(res.Resets), "model reset"))
	fmt.Fprintf(w, "best validation %.2f%% after epoch %d; fresh %s models train T = %d steps\n\n",
		res.BestValidation.Accuracy, res.BestValidation.Epoch, cfg.EvalArch, res.T)

	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	column := "labels"
	if cfg.LearnsImages() {
		column = "data" // learnt images, or real ones with baseline labels
	}
	fmt.Fprintf(tw, "%s\ttest accuracy (mean ± std)\tmodels\tsteps\n", column)
	fmt.Fprintf(tw, "distilled (%s)\t%6.2f%% ± %.2f\t%d\t%d\n", cfg.MethodName(), res.TestMean, res.TestStd, len(res.TestAccuracies), res.T)
	keys := baselineKeys(res)
	for _, k := range keys {
		b := res.Baselines[k]
		fmt.Fprintf(tw, "%s\t%6.2f%% ± %.2f\t%d\t%d\n", baselineName(k), b.Mean, b.Std, len(b.Accuracies), b.Steps)
	}
	tw.Flush()
	if res.TestDiverged > 0 {
		fmt.Fprintf(w, "warning: %d of %d distilled-label test models diverged (non-finite parameters; --eval-lr %g) and are left out of the accuracy above\n",
			res.TestDiverged, cfg.EvalModels, cfg.EvalLR)
	}
	for _, k := range keys {
		if d := res.Baselines[k].Diverged; d > 0 {
			fmt.Fprintf(w, "warning: %d of %d %s test models diverged and are left out of its accuracy\n", d, cfg.EvalModels, baselineName(k))
		}
	}
	fmt.Fprintln(w)
	for _, k := range keys {
		b := res.Baselines[k]
		fmt.Fprintf(w, "%s vs %s: %+.2f points\n", cfg.MethodName(), baselineName(k), res.TestMean-b.Mean)
	}
	fmt.Fprintf(w, "std is the population std over the models; wall time %s (meta-steps %s, %.3f s per meta-step)\n",
		elapsedSeconds(res.WallSeconds), elapsedSeconds(res.DistillSeconds), res.SecondsPerStep)
	if captured, replayed, failed := train.CUDAGraphStatus(); failed != nil {
		fmt.Fprintf(w, "CUDA graphs: a capture failed; every step from then on was taken without them (%v)\n", failed)
	} else if captured > 0 {
		fmt.Fprintf(w, "CUDA graphs: %d recorded (one per training of fresh models, and the meta-step's with LDTORCH_CUDA_GRAPHS=all), %s replayed\n",
			captured, plural(int(replayed), "step"))
	}
	fmt.Fprintf(w, "artifact %s (%s, %s, %s, history %s)\n", out, artifact.DistilledFile, artifact.TorchFile, artifact.ReportFile, rundir.HistoryFile)
}

func elapsedSeconds(s float64) string {
	return elapsed(time.Duration(s * float64(time.Second)))
}

// plural formats "1 epoch", "2 epochs".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
