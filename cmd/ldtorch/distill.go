// distill.go: `ldtorch distill`: resolve the configuration (flags > LDTORCH_* variables >
// --config file > defaults), check the output folder, run labeldistill.Distill with progress
// on stderr, write the artifact and print a summary of the distilled labels against the
// baselines.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/torch"
)

// runConfigFlags are --config and one flag per Config field (distill and bench).
func runConfigFlags() []cli.Flag {
	def := labeldistill.DefaultConfig()
	flags := []cli.Flag{
		&cli.StringFlag{Name: "config", Usage: "read settings from a JSON `FILE` (keys: the config's json names, e.g. base_examples)", EnvVars: []string{envName("config")}, Category: catRun},
	}
	for _, f := range configFlags() {
		flags = append(flags, f.cliFlag(def))
	}
	return flags
}

func (e *env) distillCommand() *cli.Command {
	flags := append([]cli.Flag{
		&cli.BoolFlag{Name: "dry-run", Usage: "print the resolved configuration as JSON and exit", Category: catRun},
		&cli.StringFlag{Name: "resume", Usage: "continue the run checkpointed in `DIR` (an earlier --out, or its checkpoints folder); give the same settings", Category: catRun},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print no progress", EnvVars: []string{envName("quiet")}, Category: catSystem},
	}, runConfigFlags()...)
	return &cli.Command{
		Name:  "distill",
		Usage: "learn labels for N base examples and evaluate them against baselines",
		UsageText: "ldtorch distill --dataset mnist --method ld --base 100 --epochs 400 --out DIR [flags]\n" +
			"ldtorch distill --config run.json --out DIR",
		Description: "Distils labels (docs/ALGORITHM.md), validates them every --validate-every epochs keeping the best, " +
			"trains --eval-models fresh models on them for the test accuracy, runs the --baselines, and writes " +
			"DIR/distilled.npz and DIR/report.json. Flag values win over LDTORCH_<FLAG> variables, which win over " +
			"--config, which wins over the defaults; 0 / empty values documented as auto are derived from the " +
			"dataset and N.",
		Flags:  flags,
		Action: e.distillAction,
	}
}

// resolveConfig builds the run's configuration from defaults, --config, variables and flags.
func (e *env) resolveConfig(c *cli.Context) (labeldistill.Config, *valueSource, error) {
	src := &valueSource{args: e.args, isSet: c.IsSet, configKeys: map[string]bool{}}
	cfg := labeldistill.DefaultConfig()
	if path := c.String("config"); c.IsSet("config") {
		if path == "" {
			return cfg, src, usageErrorf("--config needs a file name")
		}
		src.configFile = path
		loaded, err := labeldistill.LoadConfigFile(path)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				return cfg, src, usageErrorf("--config: cannot read %s: %v", path, pe.Err)
			}
			return cfg, src, usageErrorf("--config: %v", err)
		}
		cfg = loaded
		if raw, err := os.ReadFile(path); err == nil {
			var keys map[string]json.RawMessage
			if json.Unmarshal(raw, &keys) == nil {
				for k := range keys {
					src.configKeys[k] = true
				}
			}
		}
	}
	if err := applyConfigFlags(c, &cfg); err != nil {
		return cfg, src, err
	}
	// Given base indices say how many base examples there are, unless N is set too.
	if cfg.BaseIndices != nil && !c.IsSet("base") && !src.configKeys["base_examples"] {
		cfg.BaseExamples = len(cfg.BaseIndices)
	}
	// Unless given, read data where `ldtorch data fetch` puts it.
	if !c.IsSet("data-dir") && !src.configKeys["data_dir"] {
		dir, err := data.DataDir("")
		if err != nil {
			return cfg, src, usageErrorf("--data-dir: %v", err)
		}
		cfg.DataDir = dir
	}
	resolved, err := cfg.Resolved()
	if err != nil {
		return cfg, src, configError(err, src)
	}
	return resolved, src, nil
}

// checkWritable creates dir if needed and proves it writable (labeldistill.EnsureWritableDir).
func checkWritable(dir string) error {
	err := labeldistill.EnsureWritableDir(dir)
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return usageErrorf("--out: output folder %s is not writable: %v", dir, err)
}

// checkRuntime verifies the libtorch runtime (the shim's ABI) and the device.
func checkRuntime(device string) (torch.Info, error) {
	info, err := torch.RuntimeInfo()
	if err != nil {
		return info, failuref("%v", err)
	}
	dev, err := torch.ParseDevice(device)
	if err != nil {
		return info, usageErrorf("--device: %v", err)
	}
	if dev.IsCUDA() {
		switch {
		case !info.CUDA:
			return info, usageErrorf("--device %s: CUDA is not available (libtorch %s, %s)", device, info.TorchVersion, info.Build)
		case dev.Index >= info.CUDADevices:
			return info, usageErrorf("--device %s: only %d CUDA device(s) present", device, info.CUDADevices)
		}
	}
	return info, nil
}

func (e *env) distillAction(c *cli.Context) error {
	if c.Args().Present() {
		return usageErrorf("unexpected argument %q (distill takes only flags; see ldtorch distill --help)", c.Args().First())
	}
	cfg, src, err := e.resolveConfig(c)
	if err != nil {
		return err
	}
	if c.Bool("dry-run") {
		b, err := cfg.MarshalIndent()
		if err != nil {
			return err
		}
		_, err = e.stdout.Write(b)
		return err
	}
	if err := checkWritable(cfg.Out); err != nil {
		return err
	}
	replacing := false
	if _, err := os.Stat(filepath.Join(cfg.Out, labeldistill.ReportFile)); err == nil {
		replacing = true
	}
	info, err := checkRuntime(cfg.Device)
	if err != nil {
		return err
	}
	pr := newProgress(e.stderr, e.stderrTTY, c.Bool("quiet"))
	source := ""
	if cfg.IsCrossDataset() {
		source = ", base examples from " + cfg.Source
	}
	pr.note("distilling %s%s: method %s, N=%d, epochs %d, seed %d, %s, libtorch %s; data from %s",
		cfg.Dataset, source, cfg.Method, cfg.BaseExamples, cfg.Epochs, cfg.Seed, cfg.Device, info.TorchVersion, cfg.DataDir)

	if replacing {
		pr.note("%s already holds an artifact: it will be replaced when this run succeeds", cfg.Out)
	}
	ctx := c.Context
	opts := []labeldistill.RunOption{labeldistill.WithProgress(func(p labeldistill.Progress) {
		if p.Phase != "checkpoint" || strings.HasPrefix(p.Message, "warning") { // routine checkpoints stay quiet
			pr.update(p)
		}
	})}
	ckptDir := filepath.Join(cfg.Out, "checkpoints")
	// A fresh run must not mix its checkpoints with an earlier run's: keeping the newest
	// three would delete its own, and its --resume hint would find the other run's.
	if !c.IsSet("resume") && cfg.CheckpointEvery >= 0 {
		if old, _ := filepath.Glob(filepath.Join(ckptDir, "ckpt-*.npz")); len(old) > 0 {
			return usageErrorf("--out: %s already holds %d checkpoint(s) of an earlier run; continue it with --resume %s, or choose another --out", cfg.Out, len(old), cfg.Out)
		}
	}
	if cfg.CheckpointEvery >= 0 {
		opts = append(opts, labeldistill.WithCheckpointDir(ckptDir))
	}
	opts = append(opts, labeldistill.WithHistory(filepath.Join(cfg.Out, labeldistill.HistoryFile)))
	if c.IsSet("resume") {
		if c.String("resume") == "" {
			return usageErrorf("--resume needs a folder")
		}
		opts = append(opts, labeldistill.WithResume(c.String("resume")))
	}
	res, err := labeldistill.Distill(ctx, cfg, opts...)
	pr.done()
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			msg := fmt.Sprintf("interrupted after %d meta-steps; no artifact was written to %s", pr.step, cfg.Out)
			if cfg.CheckpointEvery >= 0 {
				msg += fmt.Sprintf("; continue with --resume %s and the same settings", cfg.Out)
			}
			return &exitError{code: exitInterrupted, msg: msg}
		}
		if rest, ok := strings.CutPrefix(err.Error(), "resume: "); ok {
			return usageErrorf("--resume: %s", rest)
		}
		return distillError(err, src)
	}
	if err := labeldistill.WriteArtifact(cfg.Out, res); err != nil {
		return failuref("%v", err)
	}
	printSummary(e.stdout, res, cfg.Out)
	return nil
}

// distillError classifies an error of Distill: problems with a setting (errors that start
// with a config key, the library's convention) and data problems are usage errors.
func distillError(err error, src *valueSource) error {
	var fe *labeldistill.FieldError
	if errors.As(err, &fe) {
		return configError(err, src)
	}
	if key, rest, ok := keyPrefixed(err.Error()); ok {
		return usageErrorf("%s: %s", src.describe(key), flagWords(rest))
	}
	return err
}

// methodName is how the summary names the distilled labels.
func methodName(m string) string {
	if m == labeldistill.MethodRR {
		return "LD RR"
	}
	return "LD"
}

// baselineName is how the summary names a baseline key of Result.Baselines.
func baselineName(key string) string {
	base, rr := strings.CutSuffix(key, "_rr")
	name := map[string]string{
		labeldistill.BaselineTrue:    "true labels",
		labeldistill.BaselineSmooth:  "smoothed labels",
		labeldistill.BaselineTeacher: "teacher labels",
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
		methodName(cfg.Method), cfg.Dataset, from, cfg.BaseExamples, cfg.Seed, plural(cfg.Epochs, "epoch"),
		plural(res.MetaSteps, "meta-step"), plural(len(res.Resets), "model reset"))
	fmt.Fprintf(w, "best validation %.2f%% after epoch %d; fresh %s models train T = %d steps\n\n",
		res.BestValidation.Accuracy, res.BestValidation.Epoch, cfg.EvalArch, res.T)

	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintf(tw, "labels\ttest accuracy (mean ± std)\tmodels\tsteps\n")
	fmt.Fprintf(tw, "distilled (%s)\t%6.2f%% ± %.2f\t%d\t%d\n", methodName(cfg.Method), res.TestMean, res.TestStd, len(res.TestAccuracies), res.T)
	keys := baselineKeys(res)
	for _, k := range keys {
		b := res.Baselines[k]
		fmt.Fprintf(tw, "%s\t%6.2f%% ± %.2f\t%d\t%d\n", baselineName(k), b.Mean, b.Std, len(b.Accuracies), b.Steps)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, k := range keys {
		b := res.Baselines[k]
		fmt.Fprintf(w, "%s vs %s: %+.2f points\n", methodName(cfg.Method), baselineName(k), res.TestMean-b.Mean)
	}
	fmt.Fprintf(w, "std is the population std over the models; wall time %s (meta-steps %s, %.3f s per meta-step)\n",
		elapsedSeconds(res.WallSeconds), elapsedSeconds(res.DistillSeconds), res.SecondsPerStep)
	fmt.Fprintf(w, "artifact %s (%s, %s)\n", out, labeldistill.DistilledFile, labeldistill.ReportFile)
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
