// study.go: `ldtorch study NAME --distilled DIR`: a flexibility study of a distilled
// artifact (steps, optimizer, arch, rr-standard; of a method dd artifact steps, lr, order,
// arch) written to DIR/studies/NAME.json and .png, and printed as a table; `ldtorch study
// flexibility --distilled DIR --versus DD_DIR`: the paper's flexibility figure.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
)

func (e *env) studyCommand() *cli.Command {
	return &cli.Command{
		Name:      "study",
		Usage:     "flexibility study of a distilled artifact: steps, optimizer, arch, rr-standard; lr, order of DD; the flexibility figure",
		ArgsUsage: "NAME",
		UsageText: "ldtorch study steps --distilled DIR [--deltas=-50,0,100 | --steps 195,245,345]\n" +
			"ldtorch study optimizer --distilled DIR [--optimizers adam,sgd] [--lr 0.001,0.01] [--momentum 0,0.9]\n" +
			"ldtorch study arch --distilled DIR [--archs lenet,alexnet,resnet,convnet]\n" +
			"ldtorch study rr-standard --distilled DIR\n" +
			"ldtorch study steps|lr|order|arch --distilled DD_DIR [--steps 10,20,35]\n" +
			"ldtorch study flexibility --distilled DIR --versus DD_DIR",
		Description: "Trains --models fresh models per setting on the artifact's base examples and labels and scores " +
			"them on the target's test split. steps: T + each of --deltas (the paper's −50 … +100) or the --steps " +
			"given; optimizer: Adam and SGD (momentum 0 and 0.9) over a learning-rate grid; arch: each architecture " +
			"that fits the images, trained on the distilled labels and, beside it, on the true labels of the same " +
			"images (within-dataset); rr-standard: LD RR labels training the RR model and a standard model whose " +
			"step count is chosen on the validation split. Writes DIR/studies/NAME.json (every setting with its M " +
			"accuracies and mean ± std) and DIR/studies/NAME.png. On a method dd artifact, steps, lr, order and arch are " +
			"Wang et al.'s sensitivity studies, trained with DD's own recipe (learnt step sizes, fixed order) changed in " +
			"one thing: steps, the first K learnt steps (the others at step size 0) and beyond T further steps at the mean " +
			"step size (default: ⅓, ½, ⅔, ⅚, 1 of T and T+5); lr, the mean step size at every step; order, the images " +
			"shuffled within or across epochs; arch, each architecture that fits. flexibility: the paper's figure, the " +
			"steps, optimizer and arch studies of --distilled (learnt labels) beside the steps, lr, order and arch studies " +
			"of --versus (method dd), written to DIR/studies/flexibility.json and .png; it reuses the studies already in " +
			"the folders (same models and seed) and runs the others.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "distilled", Usage: "artifact `DIR` written by ldtorch distill (required)", Category: catRun},
			&cli.IntFlag{Name: "models", Usage: "`M` fresh models per setting (default: the artifact's eval_models)", Category: catRun},
			&cli.Int64Flag{Name: "seed", Usage: "`SEED` of the models (default: the artifact's seed)", Category: catRun},
			&cli.StringFlag{Name: "deltas", Usage: "steps: comma-separated `DELTAS` added to T (default -50,-20,-10,0,10,20,50,100)", Category: catRun},
			&cli.StringFlag{Name: "steps", Usage: "comma-separated step `COUNTS` (steps: instead of --deltas; other studies: the first one, default T)", Category: catRun},
			&cli.StringFlag{Name: "optimizers", Usage: "optimizer: `LIST` of adam, sgd", Category: catRun},
			&cli.StringFlag{Name: "lr", Usage: "optimizer: comma-separated learning `RATES` (default: a grid per optimiser)", Category: catRun},
			&cli.StringFlag{Name: "momentum", Usage: "optimizer: comma-separated SGD `MOMENTA` (default 0,0.9)", Category: catRun},
			&cli.StringFlag{Name: "archs", Usage: "arch: `LIST` of lenet, alexnet, resnet, convnet and torchscript:FILE (default: those of lenet, alexnet, resnet that fit the images)", Category: catRun},
			&cli.BoolFlag{Name: "allow-unknown-data", Usage: "accept data files whose checksums the registry does not know (as distill --allow-unknown-data; default: the artifact's setting)", Category: catRun},
			&cli.StringFlag{Name: "versus", Usage: "flexibility: the method dd artifact `DD_DIR` beside --distilled", Category: catRun},
			&cli.StringFlag{Name: "dataset", Usage: "imagefolder:`PATH`, where the run's image folder is now (when it moved)", Category: catRun},
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
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if flag == "archs" && strings.HasPrefix(f, config.TorchScriptPrefix) { // a file: its case is its own
			out = append(out, f)
			continue
		}
		if f = strings.ToLower(f); !slices.Contains(known, f) {
			return nil, usageErrorf("--%s: unknown %q (want %s)", flag, f, strings.Join(known, ", "))
		}
		out = append(out, f)
	}
	return out, nil
}

// flexibilityStudy is the name of the flexibility figure's study.
const flexibilityStudy = "flexibility"

// studyFlags are the flags that choose what each study varies; a flag of another study is
// refused rather than silently ignored.
var studyFlags = map[string][]string{
	"deltas":     {study.Steps},
	"steps":      {study.Steps, study.Optimizer, study.Arch, study.RRStandard},
	"optimizers": {study.Optimizer},
	"lr":         {study.Optimizer},
	"momentum":   {study.Optimizer},
	"archs":      {study.Arch},
	"versus":     {flexibilityStudy},
	"dataset":    study.Kinds,
}

// studyFlagNames are studyFlags' keys in the order they are checked.
var studyFlagNames = []string{"deltas", "steps", "optimizers", "lr", "momentum", "archs", "versus", "dataset"}

// studyFlagsApply refuses the flags set that the study kind does not use; the flexibility
// study says where the settings it refuses belong.
func studyFlagsApply(c *cli.Context, kind string) error {
	for _, name := range studyFlagNames {
		kinds := studyFlags[name]
		if !c.IsSet(name) || slices.Contains(kinds, kind) {
			continue
		}
		if kind == flexibilityStudy {
			return usageErrorf("--%s does not apply to study flexibility: it reuses the studies in each folder's studies/ (run ldtorch study NAME with --%s first) and runs the missing ones with their defaults", name, name)
		}
		return usageErrorf("--%s does not apply to the %s study (it is a setting of: %s)", name, kind, strings.Join(kinds, ", "))
	}
	return nil
}

func (e *env) studyAction(c *cli.Context) error {
	kind := c.Args().First()
	kinds := append(slices.Clone(study.Kinds), flexibilityStudy)
	if kind == "" || c.Args().Len() > 1 {
		return usageErrorf("give one study NAME: %s (e.g. ldtorch study steps --distilled DIR)", strings.Join(kinds, ", "))
	}
	if !slices.Contains(kinds, kind) {
		return usageErrorf("unknown study %q (want %s)", kind, strings.Join(kinds, ", "))
	}
	dir := c.String("distilled")
	if dir == "" {
		return usageErrorf("--distilled DIR is required (the output folder of ldtorch distill)")
	}
	if err := studyFlagsApply(c, kind); err != nil {
		return err
	}
	if kind == flexibilityStudy {
		return e.flexibilityAction(c, dir)
	}
	sc, err := studyConfig(c)
	if err != nil {
		return err
	}
	art, err := readStudyArtifact("distilled", dir)
	if err != nil {
		return err
	}
	if (kind == study.LR || kind == study.Order) && art.StepLRs == nil {
		cfg := art.Report.Config
		return usageErrorf("--distilled: %s was distilled with method %s (%s); study %s varies method dd's learnt step sizes and fixed order, so it needs a method dd artifact (ldtorch distill --method dd)",
			dir, cfg.Method, cfg.MethodName(), kind)
	}
	if art.StepLRs != nil && kind != study.Steps && len(sc.Steps) > 0 && slices.Contains(study.DDKinds, kind) {
		return usageErrorf("--steps: the %s study of a method dd artifact trains its %d learnt steps; step counts apply to its steps study", kind, len(art.StepLRs))
	}
	cfg, err := studySettle(c, art)
	if err != nil {
		return err
	}
	sc.Dataset = c.String("dataset")
	unlock, err := lockOut("--distilled", dir)
	if err != nil {
		return err
	}
	defer unlock()
	pr := newProgress(e.stderr, false, c.Bool("quiet"))
	d, err := e.studyData(c, pr, kind, dir, art, cfg)
	if err != nil {
		return err
	}
	st, err := runStudy(c, kind, art, d, sc, pr, cfg, dir)
	if err != nil {
		return err
	}
	jsonPath, pngPath, err := writeStudy(dir, st)
	if err != nil {
		return err
	}
	printStudy(e.stdout, dir, st)
	fmt.Fprintf(e.stdout, "wrote %s and %s\n", jsonPath, pngPath)
	return nil
}

// studyConfig parses the flags of a study.
func studyConfig(c *cli.Context) (study.Config, error) {
	var sc study.Config
	var err error
	if sc.Models = c.Int("models"); c.IsSet("models") {
		if err := countFlag("models", sc.Models, 1, config.MaxEvalModels, config.WhyModels); err != nil {
			return sc, err
		}
	}
	sc.Seed = c.Int64("seed")
	if sc.Deltas, err = parseInts("deltas", c.String("deltas"), -config.MaxTrainSteps, config.MaxTrainSteps, "added to T"); err != nil {
		return sc, err
	}
	if sc.Steps, err = parseInts("steps", c.String("steps"), 1, config.MaxTrainSteps, config.WhySteps); err != nil {
		return sc, err
	}
	if c.IsSet("steps") && c.IsSet("deltas") {
		return sc, usageErrorf("--steps and --deltas both set: give the step counts one way")
	}
	if sc.Optimizers, err = parseNames("optimizers", c.String("optimizers"), []string{"adam", "sgd"}); err != nil {
		return sc, err
	}
	finitePos := func(x float64) bool { return x > 0 && !math.IsInf(x, 0) && !math.IsNaN(x) }
	if sc.LRs, err = parseFloats("lr", c.String("lr"), finitePos, "a positive learning rate"); err != nil {
		return sc, err
	}
	if sc.Momenta, err = parseFloats("momentum", c.String("momentum"), func(x float64) bool { return x >= 0 && x < 1 }, "a momentum in [0, 1)"); err != nil {
		return sc, err
	}
	if len(sc.Momenta) > 0 && len(sc.Optimizers) > 0 && !slices.Contains(sc.Optimizers, "sgd") {
		return sc, usageErrorf("--momentum applies to SGD only, and --optimizers %s leaves it out", strings.Join(sc.Optimizers, ","))
	}
	if sc.Archs, err = parseNames("archs", c.String("archs"), []string{config.ArchLeNet, config.ArchAlexNet, config.ArchResNet, config.ArchConvNet, config.TorchScriptPrefix + "FILE"}); err != nil {
		return sc, err
	}
	// Every setting trains M models: the lists are bounded as the models are.
	for _, l := range []struct {
		flag string
		n    int
	}{{"deltas", len(sc.Deltas)}, {"steps", len(sc.Steps)}, {"lr", len(sc.LRs)}, {"momentum", len(sc.Momenta)}} {
		if err := countFlag(l.flag, l.n, 0, config.MaxStudySettings, config.WhyList); err != nil {
			return sc, err
		}
	}
	return sc, nil
}

// readStudyArtifact reads the artifact a study flag names; it must have its report.
func readStudyArtifact(flag, dir string) (*artifact.Artifact, error) {
	art, err := artifact.Read(dir)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && errors.Is(err, fs.ErrNotExist) {
			return nil, noArtifactError("--"+flag, dir, fmt.Sprintf("has no %s (is it the output folder of ldtorch distill?)", artifact.DistilledFile))
		}
		return nil, usageErrorf("--%s: %v", flag, err)
	}
	if art.Report == nil {
		return nil, usageErrorf("--%s: %s has no %s (a study takes T, the method and the data from it)", flag, dir, artifact.ReportFile)
	}
	return art, nil
}

// studySettle applies the operational flags to the artifact's configuration and sets the
// threads.
func studySettle(c *cli.Context, art *artifact.Artifact) (config.Config, error) {
	// The report's configuration, with --dataset where the run's image folder moved; an
	// image folder that cannot be read is named.
	cfg, err := artifact.EvalDataConfig(art, c.String("dataset"))
	if err != nil {
		return cfg, usageErrorf("--dataset: %s", strings.TrimPrefix(err.Error(), "dataset: "))
	}
	adjust, err := operational(c)
	if err != nil {
		return cfg, err
	}
	adjust(&cfg) // --data-dir, --threads, --device when given; else the artifact's
	if c.Bool("allow-unknown-data") {
		cfg.AllowUnknownData = true
	}
	if _, err := checkRuntime(cfg.Device); err != nil {
		return cfg, err
	}
	threads := cfg.Threads
	if threads <= 0 {
		threads = torch.NumThreads()
	}
	if err := torch.SetNumThreads(threads); err != nil {
		return cfg, failuref("--threads %d: %v", threads, err)
	}
	return cfg, nil
}

// studyData reads the data of a study of the artifact whose settled configuration is cfg.
func (e *env) studyData(c *cli.Context, pr *progress, kind, dir string, art *artifact.Artifact, cfg config.Config) (*study.Data, error) {
	pr.note("study %s of %s: reading %s data", kind, dir, cfg.Dataset)
	d, err := study.LoadData(cfg)
	if err != nil {
		return nil, distillError(err, &valueSource{args: e.args, isSet: c.IsSet})
	}
	warnDataChanges(e.stderr, art, d.Files, d.Warnings)
	return d, nil
}

// runStudy runs one study on the device of cfg (the artifact's settled configuration),
// reporting each setting on pr, and maps its errors to the command's.
func runStudy(c *cli.Context, kind string, art *artifact.Artifact, d *study.Data, sc study.Config, pr *progress, cfg config.Config, dir string) (*study.Study, error) {
	sc.Device = cfg.Device
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
			return nil, &exitError{code: exitInterrupted, msg: "interrupted; nothing was written to " + filepath.Join(dir, "studies")}
		}
		var fe *config.FieldError
		switch {
		case errors.As(err, &fe) && fe.Field == "settings":
			return nil, usageErrorf("too many settings: %s", fe.Msg)
		case errors.As(err, &fe):
			return nil, usageErrorf("--%s: %s", fe.Field, fe.Msg)
		case strings.HasPrefix(err.Error(), "study rr-standard: "):
			return nil, usageErrorf("%s", err.Error())
		}
		for _, k := range []string{"optimizers", "archs", "steps"} {
			if strings.HasPrefix(err.Error(), k+": ") {
				return nil, usageErrorf("--%s", err.Error())
			}
		}
		return nil, failuref("%v", err)
	}
	return st, nil
}

// writeStudy writes a study's JSON and figure into dir/studies.
func writeStudy(dir string, st *study.Study) (jsonPath, pngPath string, err error) {
	jsonName, pngName := study.FileNames(st.Study)
	jsonPath, pngPath = filepath.Join(dir, jsonName), filepath.Join(dir, pngName)
	return jsonPath, pngPath, writeStudyAt(jsonPath, pngPath, st)
}

// writeStudyAt writes st to jsonPath and its figure to pngPath (their folder created).
func writeStudyAt(jsonPath, pngPath string, st *study.Study) error {
	if err := os.MkdirAll(filepath.Dir(jsonPath), 0o755); err != nil {
		return failuref("%v", err)
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return failuref("%v", err)
	}
	if err := atomicfile.WriteFile(jsonPath, append(b, '\n')); err != nil {
		return failuref("%v", err)
	}
	png, err := report.StudyFigure(st)
	if err != nil {
		return failuref("figure: %v", err)
	}
	if err := atomicfile.WriteFile(pngPath, png); err != nil {
		return failuref("%v", err)
	}
	return nil
}

// printStudy prints a study as a table with its notes.
func printStudy(w io.Writer, dir string, st *study.Study) {
	fmt.Fprintf(w, "%s study of %s (%s%s on %s, %d base examples, T = %d, %d models per setting, seed %d)\n\n",
		st.Study, dir, st.MethodName, st.Through(), st.Dataset, st.BaseExamples, st.T, st.Models, st.Seed)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, row := range study.Table(st) {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
	for _, n := range st.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}
