// study.go: `ldtorch study NAME --distilled DIR`: a flexibility study of a distilled
// artifact (steps, optimizer, arch, rr-standard) written to DIR/studies/NAME.json and .png,
// and printed as a table.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/report"
	"github.com/ldtorch/ldtorch/labeldistill/study"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/atomicfile"
)

func (e *env) studyCommand() *cli.Command {
	return &cli.Command{
		Name:      "study",
		Usage:     "flexibility study of distilled labels: steps, optimizer, arch or rr-standard",
		ArgsUsage: "NAME",
		UsageText: "ldtorch study steps --distilled DIR [--deltas=-50,0,100 | --steps 195,245,345]\n" +
			"ldtorch study optimizer --distilled DIR [--optimizers adam,sgd] [--lr 0.001,0.01] [--momentum 0,0.9]\n" +
			"ldtorch study arch --distilled DIR [--archs lenet,alexnet,resnet,convnet]\n" +
			"ldtorch study rr-standard --distilled DIR",
		Description: "Trains --models fresh models per setting on the artifact's base examples and labels and scores " +
			"them on the target's test split. steps: T + each of --deltas (the paper's −50 … +100) or the --steps " +
			"given; optimizer: Adam and SGD (momentum 0 and 0.9) over a learning-rate grid; arch: each architecture " +
			"that fits the images, trained on the distilled labels and, beside it, on the true labels of the same " +
			"images (within-dataset); rr-standard: LD RR labels training the RR model and a standard model whose " +
			"step count is chosen on the validation split. Writes DIR/studies/NAME.json (every setting with its M " +
			"accuracies and mean ± std) and DIR/studies/NAME.png.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "distilled", Usage: "artifact `DIR` written by ldtorch distill (required)", Category: catRun},
			&cli.IntFlag{Name: "models", Usage: "`M` fresh models per setting (default: the artifact's eval_models)", Category: catRun},
			&cli.Int64Flag{Name: "seed", Usage: "`SEED` of the models (default: the artifact's seed)", Category: catRun},
			&cli.StringFlag{Name: "deltas", Usage: "steps: comma-separated `DELTAS` added to T (default -50,-20,-10,0,10,20,50,100)", Category: catRun},
			&cli.StringFlag{Name: "steps", Usage: "comma-separated step `COUNTS` (steps: instead of --deltas; other studies: the first one, default T)", Category: catRun},
			&cli.StringFlag{Name: "optimizers", Usage: "optimizer: `LIST` of adam, sgd", Category: catRun},
			&cli.StringFlag{Name: "lr", Usage: "optimizer: comma-separated learning `RATES` (default: a grid per optimiser)", Category: catRun},
			&cli.StringFlag{Name: "momentum", Usage: "optimizer: comma-separated SGD `MOMENTA` (default 0,0.9)", Category: catRun},
			&cli.StringFlag{Name: "archs", Usage: "arch: `LIST` of lenet, alexnet, resnet, convnet (default: those of lenet, alexnet, resnet that fit the images)", Category: catRun},
			&cli.BoolFlag{Name: "allow-unknown-data", Usage: "accept data files whose checksums the registry does not know (as distill --allow-unknown-data; default: the artifact's setting)", Category: catRun},
		}, operationalFlags()...),
		Action: e.studyAction,
	}
}

// parseInts reads a comma-separated list of whole numbers, each in [lo, hi].
func parseInts(flag, text string, lo, hi int, why string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(text, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := countArg(flag, f, lo, hi, why)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func parseFloats(flag, text string, ok func(float64) bool, want string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(text, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		x, err := strconv.ParseFloat(f, 64)
		if err != nil || !ok(x) {
			return nil, usageErrorf("--%s: %q is not %s", flag, f, want)
		}
		out = append(out, x)
	}
	return out, nil
}

func parseNames(flag, text string, known []string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(text, ",") {
		if f = strings.ToLower(strings.TrimSpace(f)); f == "" {
			continue
		}
		if !slices.Contains(known, f) {
			return nil, usageErrorf("--%s: unknown %q (want %s)", flag, f, strings.Join(known, ", "))
		}
		out = append(out, f)
	}
	return out, nil
}

// studyFlags are the flags that choose what each study varies; a flag of another study is
// refused rather than silently ignored.
var studyFlags = map[string][]string{
	"deltas":     {study.Steps},
	"steps":      {study.Steps, study.Optimizer, study.Arch, study.RRStandard},
	"optimizers": {study.Optimizer},
	"lr":         {study.Optimizer},
	"momentum":   {study.Optimizer},
	"archs":      {study.Arch},
}

// studyFlagsApply refuses the flags set that the study kind does not use.
func studyFlagsApply(c *cli.Context, kind string) error {
	for _, name := range []string{"deltas", "steps", "optimizers", "lr", "momentum", "archs"} {
		if kinds := studyFlags[name]; c.IsSet(name) && !slices.Contains(kinds, kind) {
			return usageErrorf("--%s does not apply to the %s study (it is a setting of: %s)", name, kind, strings.Join(kinds, ", "))
		}
	}
	return nil
}

func (e *env) studyAction(c *cli.Context) error {
	kind := c.Args().First()
	if kind == "" || c.Args().Len() > 1 {
		return usageErrorf("give one study NAME: %s (e.g. ldtorch study steps --distilled DIR)", strings.Join(study.Kinds, ", "))
	}
	if !slices.Contains(study.Kinds, kind) {
		return usageErrorf("unknown study %q (want %s)", kind, strings.Join(study.Kinds, ", "))
	}
	dir := c.String("distilled")
	if dir == "" {
		return usageErrorf("--distilled DIR is required (the output folder of ldtorch distill)")
	}
	if err := studyFlagsApply(c, kind); err != nil {
		return err
	}
	var sc study.Config
	var err error
	if sc.Models = c.Int("models"); c.IsSet("models") {
		if err := countFlag("models", sc.Models, 1, config.MaxEvalModels, config.WhyModels); err != nil {
			return err
		}
	}
	sc.Seed = c.Int64("seed")
	if sc.Deltas, err = parseInts("deltas", c.String("deltas"), -config.MaxTrainSteps, config.MaxTrainSteps, "added to T"); err != nil {
		return err
	}
	if sc.Steps, err = parseInts("steps", c.String("steps"), 1, config.MaxTrainSteps, config.WhySteps); err != nil {
		return err
	}
	if c.IsSet("steps") && c.IsSet("deltas") {
		return usageErrorf("--steps and --deltas both set: give the step counts one way")
	}
	if sc.Optimizers, err = parseNames("optimizers", c.String("optimizers"), []string{"adam", "sgd"}); err != nil {
		return err
	}
	finitePos := func(x float64) bool { return x > 0 && !math.IsInf(x, 0) && !math.IsNaN(x) }
	if sc.LRs, err = parseFloats("lr", c.String("lr"), finitePos, "a positive learning rate"); err != nil {
		return err
	}
	if sc.Momenta, err = parseFloats("momentum", c.String("momentum"), func(x float64) bool { return x >= 0 && x < 1 }, "a momentum in [0, 1)"); err != nil {
		return err
	}
	if len(sc.Momenta) > 0 && len(sc.Optimizers) > 0 && !slices.Contains(sc.Optimizers, "sgd") {
		return usageErrorf("--momentum applies to SGD only, and --optimizers %s leaves it out", strings.Join(sc.Optimizers, ","))
	}
	if sc.Archs, err = parseNames("archs", c.String("archs"), []string{config.ArchLeNet, config.ArchAlexNet, config.ArchResNet, config.ArchConvNet}); err != nil {
		return err
	}
	// Every setting trains M models: the lists are bounded as the models are.
	for _, l := range []struct {
		flag string
		n    int
	}{{"deltas", len(sc.Deltas)}, {"steps", len(sc.Steps)}, {"lr", len(sc.LRs)}, {"momentum", len(sc.Momenta)}} {
		if err := countFlag(l.flag, l.n, 0, config.MaxStudySettings, config.WhyList); err != nil {
			return err
		}
	}
	art, err := artifact.Read(dir)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && errors.Is(err, fs.ErrNotExist) {
			return usageErrorf("--distilled: %s has no %s (is it the output folder of ldtorch distill?)", dir, artifact.DistilledFile)
		}
		return usageErrorf("--distilled: %v", err)
	}
	if art.Report == nil {
		return usageErrorf("--distilled: %s has no %s (a study takes T, the method and the data from it)", dir, artifact.ReportFile)
	}
	cfg := art.Report.Config
	adjust, err := operational(c)
	if err != nil {
		return err
	}
	adjust(&cfg) // --data-dir, --threads, --device when given; else the artifact's
	if c.Bool("allow-unknown-data") {
		cfg.AllowUnknownData = true
	}
	sc.Device = cfg.Device
	if _, err := checkRuntime(cfg.Device); err != nil {
		return err
	}
	threads := cfg.Threads
	if threads <= 0 {
		threads = torch.NumThreads()
	}
	if err := torch.SetNumThreads(threads); err != nil {
		return failuref("--threads %d: %v", threads, err)
	}
	unlock, err := lockOut("--distilled", dir)
	if err != nil {
		return err
	}
	defer unlock()
	pr := newProgress(e.stderr, false, c.Bool("quiet"))
	pr.note("study %s of %s: reading %s data", kind, dir, cfg.Dataset)
	d, err := study.LoadData(cfg)
	if err != nil {
		return distillError(err, &valueSource{args: e.args, isSet: c.IsSet})
	}
	warnDataChanges(e.stderr, art, d.Files, d.Warnings)
	last, models := "", sc.Models
	if models == 0 {
		models = cfg.EvalModels
	}
	sc.Progress = func(setting string, done, total int) {
		if setting != last {
			pr.note("%s: training %d models", setting, models)
			last = setting
		}
	}
	ctx := c.Context
	st, err := study.Run(ctx, kind, art, d, sc)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			return &exitError{code: exitInterrupted, msg: "interrupted; nothing was written to " + filepath.Join(dir, "studies")}
		}
		var fe *config.FieldError
		switch {
		case errors.As(err, &fe) && fe.Field == "settings":
			return usageErrorf("too many settings: %s", fe.Msg)
		case errors.As(err, &fe):
			return usageErrorf("--%s: %s", fe.Field, fe.Msg)
		case strings.HasPrefix(err.Error(), "study rr-standard: "):
			return usageErrorf("%s", err.Error())
		}
		for _, k := range []string{"optimizers", "archs"} {
			if strings.HasPrefix(err.Error(), k+": ") {
				return usageErrorf("--%s", err.Error())
			}
		}
		return failuref("%v", err)
	}
	jsonName, pngName := study.FileNames(kind)
	if err := os.MkdirAll(filepath.Join(dir, "studies"), 0o755); err != nil {
		return failuref("%v", err)
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return failuref("%v", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, jsonName), append(b, '\n')); err != nil {
		return failuref("%v", err)
	}
	png, err := report.StudyFigure(st)
	if err != nil {
		return failuref("figure: %v", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, pngName), png); err != nil {
		return failuref("%v", err)
	}
	fmt.Fprintf(e.stdout, "%s study of %s (%s on %s, %d base examples, T = %d, %d models per setting, seed %d)\n\n",
		kind, dir, st.MethodName, st.Dataset, st.BaseExamples, st.T, st.Models, st.Seed)
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 3, ' ', 0)
	for _, row := range study.Table(st) {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
	for _, n := range st.Notes {
		fmt.Fprintf(e.stdout, "note: %s\n", n)
	}
	fmt.Fprintf(e.stdout, "wrote %s and %s\n", filepath.Join(dir, jsonName), filepath.Join(dir, pngName))
	return nil
}
