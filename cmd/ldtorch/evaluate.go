// evaluate.go: `ldtorch evaluate`: train fresh models on a distilled artifact (possibly with
// another architecture, optimizer or step count) and report their test accuracy.

package main

import (
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

	"github.com/urfave/cli/v2"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
)

func (e *env) evaluateCommand() *cli.Command {
	ev := func(name string) []string { return []string{envName(name)} }
	return &cli.Command{
		Name:  "evaluate",
		Usage: "train fresh models on distilled labels and report their test accuracy",
		UsageText: "ldtorch evaluate --distilled DIR [--arch resnet] [--optimizer sgd --lr 0.01 --momentum 0.9] [--steps T|auto] [--models M] [--save-models DIR] [--json]\n" +
			"ldtorch evaluate --distilled DIR --protocol ddranking [--arch convnet] [--epochs E] [--models M] [--augment dsa|none] [--checkpoint-every 5m] [--json]",
		Description: "Reads DIR/distilled.npz and DIR/report.json (written by ldtorch distill), trains --models fresh " +
			"models on the distilled images and labels and scores them on the target dataset's test split. " +
			"Defaults come from the artifact's report: architecture, T, batch, seed, data folder. " +
			"--protocol ddranking scores the artifact as the DD-Ranking benchmark's soft-label evaluator does " +
			"(docs/ALGORITHM.md §13): ConvNet-3 models trained for 1000 epochs with SGD and DSA over a learning-rate " +
			"grid, the distilled images with hard and with distilled labels, random real images with a full-data " +
			"model's labels, and the full data; it reports hlr, ior and score and writes DIR/evaluations/ddranking.json. " +
			"Stopped (interrupted, killed), the same command goes on where it was: on the CPU after the last model scored " +
			"(DIR/evaluations/evaluate-partial-*/; not with --save-models), under --protocol ddranking from its last save " +
			"(DIR/evaluations/ddranking-partial-*/, and the full-data model's training beside its cache entry).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "distilled", Usage: "artifact `DIR` written by ldtorch distill (required)", EnvVars: ev("distilled")},
			&cli.StringFlag{Name: "arch", Usage: "`ARCH` of the fresh models: lenet, alexnet, resnet, convnet or torchscript:FILE (default: the artifact's eval arch; ddranking: convnet)", EnvVars: ev("arch")},
			&cli.StringFlag{Name: "recipe", Value: "auto", Usage: "`RECIPE`: standard (the optimizer on random minibatches) or dd (method dd's learnt step sizes in its fixed order); auto: dd for a method dd artifact unless --optimizer, --lr, --momentum, --steps, --batch or --rr is given", EnvVars: ev("recipe")},
			&cli.StringFlag{Name: "protocol", Value: artifact.ProtocolPaper, Usage: "evaluation `PROTOCOL`: paper (the paper's recipe) or ddranking (DD-Ranking's soft-label evaluator and its scores)", EnvVars: ev("protocol")},
			&cli.IntFlag{Name: "epochs", Usage: "ddranking: training `EPOCHS` instead of the recipe's (1000; 200 for the full data), for quick checks", EnvVars: ev("epochs")},
			&cli.StringFlag{Name: "augment", Usage: "ddranking: `AUG`mentation of the training batches, dsa or none (default dsa)", EnvVars: ev("augment")},
			&cli.StringFlag{Name: "cache-dir", Usage: "ddranking: `DIR` keeping the full-data models (default: the data folder's ddranking/)", EnvVars: ev("cache-dir")},
			&cli.DurationFlag{Name: "checkpoint-every", Value: artifact.DDRankingCheckpointEvery, Usage: "ddranking: wall `TIME` between saves of the training under way, so that the same command run again after a stop goes on from there (0: keep nothing)", EnvVars: ev("checkpoint-every")},
			&cli.StringFlag{Name: "optimizer", Value: "adam", Usage: "`OPT`: adam or sgd", EnvVars: ev("optimizer")},
			&cli.Float64Flag{Name: "lr", Usage: "learning `RATE` (default: 0.001 for adam, 0.01 for sgd)", EnvVars: ev("lr")},
			&cli.Float64Flag{Name: "momentum", Usage: "SGD `MOMENTUM` in [0, 1) (sgd only)", EnvVars: ev("momentum")},
			&cli.StringFlag{Name: "steps", Value: "auto", Usage: "training `STEPS` per model, or auto for the artifact's T", EnvVars: ev("steps")},
			&cli.IntFlag{Name: "models", Usage: "`M`, the number of fresh models (default: the artifact's eval_models, else 20; ddranking: 5 runs)", EnvVars: ev("models")},
			&cli.IntFlag{Name: "batch", Usage: "base examples per step (default: the artifact's eval_batch)", EnvVars: ev("batch")},
			&cli.BoolFlag{Name: "rr", Usage: "train the ridge-regression head (default: when the artifact's method is rr; --rr=false to turn off)", EnvVars: ev("rr")},
			&cli.StringFlag{Name: "device", Value: "cpu", Usage: setting("device").Help, EnvVars: ev("device")},
			&cli.IntFlag{Name: "threads", Usage: setting("threads").Help, EnvVars: ev("threads")},
			&cli.BoolFlag{Name: "allow-tf32", Usage: "let float32 products and convolutions on Ampere-or-later GPUs use TF32 (off: results agree with the CPU's)", EnvVars: ev("allow-tf32")},
			&cli.StringFlag{Name: "data-dir", Usage: "`DIR` holding the datasets (default: the artifact's data_dir)", EnvVars: ev("data-dir")},
			&cli.StringFlag{Name: "dataset", Usage: "target `DATASET`, for artifacts without report.json; or imagefolder:PATH, where the run's image folder is now", EnvVars: ev("dataset")},
			&cli.BoolFlag{Name: "allow-unknown-data", Usage: "accept data files whose checksums the registry does not know (as distill --allow-unknown-data; default: the artifact's setting)", EnvVars: ev("allow-unknown-data")},
			&cli.Int64Flag{Name: "seed", Usage: "`SEED` of the models' initialisation and batches (default: the artifact's seed)", EnvVars: ev("seed")},
			&cli.StringFlag{Name: "save-models", Usage: "keep the trained models in `DIR` as model-K.pt (PyTorch state dicts of docs/ARTIFACT.md's modules) with models.json", EnvVars: ev("save-models")},
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print no progress", EnvVars: ev("quiet")},
		},
		Action: e.evaluateAction,
	}
}

// positiveInt reads an int flag that must be in [1, maxIntFlag] when set.
// countArg reads a count given as text (--steps, a list item) and checks it as countFlag
// does; a number beyond int64 is named as given.
func countArg(flag, text string, lo, hi int, why string) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(text, "+"))
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return 0, usageErrorf("--%s: %s", flag, config.CountMessageText(text, int64(lo), int64(hi), why))
		}
		return 0, usageErrorf("--%s: %q is not a whole number", flag, text)
	}
	return n, countFlag(flag, n, lo, hi, why)
}

func (e *env) evaluateAction(c *cli.Context) error {
	if c.Args().Present() {
		return usageErrorf("unexpected argument %q (give the artifact as --distilled DIR)", c.Args().First())
	}
	dir := c.String("distilled")
	if dir == "" {
		return usageErrorf("--distilled DIR is required (the output folder of ldtorch distill)")
	}
	protocol := c.String("protocol")
	if !slices.Contains(artifact.Protocols, protocol) {
		return usageErrorf("--protocol: unknown protocol %q (want %s)", protocol, strings.Join(artifact.Protocols, " or "))
	}
	only := map[string][]string{
		artifact.ProtocolPaper:     {"optimizer", "lr", "momentum", "steps", "batch", "rr", "save-models", "recipe"},
		artifact.ProtocolDDRanking: {"epochs", "augment", "cache-dir", "checkpoint-every"},
	}
	for p, flags := range only {
		for _, f := range flags {
			if p != protocol && c.IsSet(f) {
				return usageErrorf("--%s applies to --protocol %s only", f, p)
			}
		}
	}
	if protocol == artifact.ProtocolDDRanking {
		return e.evaluateDDRanking(c, dir)
	}
	ec := artifact.EvalConfig{Arch: c.String("arch"), Optimizer: strings.ToLower(c.String("optimizer")),
		LR: c.Float64("lr"), Momentum: c.Float64("momentum"), Seed: c.Int64("seed"),
		Device: c.String("device"), Dataset: c.String("dataset"), AllowTF32: c.Bool("allow-tf32"), SaveModels: c.String("save-models")}
	if c.IsSet("save-models") && ec.SaveModels == "" {
		return usageErrorf("--save-models needs a folder")
	}
	switch r := strings.ToLower(c.String("recipe")); r {
	case "auto":
	case artifact.RecipeStandard, artifact.RecipeDD:
		ec.Recipe = r
	default:
		return usageErrorf("--recipe: unknown recipe %q (want auto, standard or dd)", r)
	}
	if c.IsSet("rr") {
		rr := c.Bool("rr")
		ec.RR = &rr
	}
	switch ec.Optimizer {
	case "adam", "sgd":
	default:
		return usageErrorf("--optimizer: unknown optimizer %q (want adam or sgd)", ec.Optimizer)
	}
	switch ec.Arch {
	case "", config.ArchLeNet, config.ArchAlexNet, config.ArchResNet, config.ArchConvNet:
	default:
		if !strings.HasPrefix(ec.Arch, config.TorchScriptPrefix) {
			return usageErrorf("--arch: unknown architecture %q (want lenet, alexnet, resnet, convnet or %sFILE)", ec.Arch, config.TorchScriptPrefix)
		}
	}
	if c.IsSet("lr") && (math.IsNaN(ec.LR) || math.IsInf(ec.LR, 0) || ec.LR <= 0) {
		return usageErrorf("--lr: must be a positive finite number, got %v", ec.LR)
	}
	if c.IsSet("momentum") {
		if ec.Optimizer != "sgd" {
			return usageErrorf("--momentum applies to --optimizer sgd only")
		}
		if math.IsNaN(ec.Momentum) || ec.Momentum < 0 || ec.Momentum >= 1 {
			return usageErrorf("--momentum: must be in [0, 1), got %v", ec.Momentum)
		}
	}
	if s := strings.TrimSpace(c.String("steps")); s != "auto" && s != "" {
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			return usageErrorf("--steps: want a number of steps or auto, got %q", s)
		}
		n, err := countArg("steps", s, 1, config.MaxTrainSteps, config.WhySteps)
		if err != nil {
			return err
		}
		ec.Steps = n
	}
	if !c.IsSet("optimizer") {
		ec.Optimizer = "" // the recipe's (adam for the standard one)
	}
	ec.Models, ec.Batch = c.Int("models"), c.Int("batch")
	if c.IsSet("models") {
		if err := countFlag("models", ec.Models, 1, config.MaxEvalModels, config.WhyModels); err != nil {
			return err
		}
	}
	if c.IsSet("batch") {
		if err := countFlag("batch", ec.Batch, 1, 0, "a batch larger than the base examples is all of them"); err != nil {
			return err
		}
	}
	threads := c.Int("threads")
	if threads != 0 {
		if err := countFlag("threads", threads, 1, config.MaxThreads(), config.WhyThreads); err != nil {
			return err
		}
	}

	art, err := readArtifact(dir)
	if err != nil {
		return err
	}

	// The data and every default come from the artifact (its report, or the defaults for
	// --dataset); the library resolves them and names the setting at fault.
	if ec, err = ec.Resolved(art); err != nil {
		return evaluateError(err, dir, c)
	}
	cfg, err := artifact.EvalDataConfig(art, ec.Dataset)
	if err != nil {
		return evaluateError(err, dir, c)
	}
	if c.IsSet("data-dir") {
		cfg.DataDir = c.String("data-dir")
	}
	if c.Bool("allow-unknown-data") {
		cfg.AllowUnknownData = true
	}
	arch := ec.Arch

	if _, err := checkRuntime(ec.Device); err != nil {
		return err
	}
	if threads <= 0 {
		threads = torch.NumThreads() // re-applied so OpenBLAS's pool matches libtorch's
	}
	if err := torch.SetNumThreads(threads); err != nil {
		return failuref("--threads %d: %v", threads, err)
	}
	td, err := engine.LoadTestData(cfg)
	if err != nil {
		return err
	}
	test := td.Test
	warnDataChanges(e.stderr, art, td.Files, td.Warnings)
	steps := "T"
	if ec.Steps > 0 {
		steps = strconv.Itoa(ec.Steps)
	} else if art.Report != nil {
		steps = strconv.Itoa(art.Report.T)
	}
	pr := newProgress(e.stderr, false, c.Bool("quiet"))
	ec.Progress = pr.evalSteps
	ec.Notes = pr.message
	ec.ProgressDir = filepath.Join(dir, artifact.EvaluationsFolder)
	how := ec.Optimizer + map[bool]string{true: ", RR head"}[*ec.RR]
	if ec.Recipe == artifact.RecipeDD {
		how = "method dd's learnt step sizes, fixed order"
	}
	pr.note("training %d %s models (%s) for %s steps on %d distilled examples; testing on %d %s test images",
		ec.Models, arch, how, steps, art.Shape[0], test.N, cfg.Dataset)
	res, err := artifact.Evaluate(c.Context, art, test, ec)
	if err := evaluationError(c, dir, err); err != nil {
		var ee *exitError
		if dev, _ := torch.ParseDevice(ec.Device); errors.As(err, &ee) && ee.code == exitInterrupted && ec.SaveModels == "" && !dev.IsCUDA() {
			ee.msg = fmt.Sprintf("interrupted; the same command goes on after the last scored model (kept in %s)",
				filepath.Join(dir, artifact.EvaluationsFolder, "evaluate-partial-*"))
		}
		return err
	}
	if c.Bool("json") {
		return printJSON(e.stdout, res)
	}
	rr := ""
	if res.RR {
		rr = ", RR head"
	}
	if res.Recipe == artifact.RecipeDD {
		fmt.Fprintf(e.stdout, "%s: %s, method dd's %d learnt step sizes in its fixed order, %d models\n", dir, res.Arch, res.Steps, len(res.Accuracies))
	} else {
		fmt.Fprintf(e.stdout, "%s: %s%s, %s lr %g, %d steps, %d models\n", dir, res.Arch, rr, res.Optimizer, res.LR, res.Steps, len(res.Accuracies))
	}
	fmt.Fprintf(e.stdout, "test accuracy %.2f%% ± %.2f (population std over %d models)\n", res.Mean, res.Std, len(res.Accuracies))
	if ec.SaveModels != "" {
		fmt.Fprintf(e.stdout, "models saved in %s (model-K.pt, %s)\n", ec.SaveModels, train.ManifestFile)
	}
	if res.Diverged > 0 {
		fmt.Fprintf(e.stdout, "warning: %d of %d models diverged (non-finite parameters; --lr %g) and are left out of the accuracy above\n", res.Diverged, res.Diverged+len(res.Accuracies), res.LR)
	}
	// the same recipe on the same network: a TorchScript file changed since is another one
	if r := art.Report; r != nil && r.T == res.Steps && res.Arch == r.Config.EvalArch && res.ArchSHA256 == r.NetworkSHA256[res.Arch] &&
		((res.Optimizer == "adam" && res.LR == r.Config.EvalLR && r.Config.Method != config.MethodDD) || res.Recipe == artifact.RecipeDD) {
		fmt.Fprintf(e.stdout, "(the distill run's own test models: %.2f%% ± %.2f over %d)\n", r.TestMean, r.TestStd, len(r.TestAccuracies))
	}
	return nil
}

// warnDataChanges warns (on w, also with --quiet) about data read now that differs from
// what the artifact was made from (a file whose checksum changed since), and passes on the
// data's own warnings (unknown checksums accepted).
func warnDataChanges(w io.Writer, art *artifact.Artifact, files map[string]string, warnings []string) {
	for _, msg := range warnings {
		fmt.Fprintf(w, "warning: %s\n", settingWords(msg))
	}
	if art.Report == nil {
		return
	}
	for _, d := range artifact.DataChanges(art.Report, files) {
		fmt.Fprintf(w, "warning: %s\n", d)
	}
}

// settingWords names allow_unknown_data as the flag the data commands share.
func settingWords(msg string) string {
	return strings.ReplaceAll(msg, "allow_unknown_data", "--allow-unknown-data")
}

// evaluateError turns a problem with a setting (*FieldError) into a usage error naming
// its flag (and the flag's value when one was given); an artifact without report.json asks
// for --steps.
func evaluateError(err error, dir string, c *cli.Context) error {
	var fe *config.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	if fe.Field == "steps" && !fileExists(filepath.Join(dir, artifact.ReportFile)) {
		return usageErrorf("--steps: %s has no %s to take T from, so give --steps", dir, artifact.ReportFile)
	}
	if v := c.String(fe.Field); v != "" && c.IsSet(fe.Field) { // string flags: dataset, arch, device
		return usageErrorf("--%s %s: %s", fe.Field, v, fe.Msg)
	}
	return usageErrorf("--%s: %s", fe.Field, fe.Msg)
}

// evaluationError maps the outcome of an evaluation under either protocol to the command's:
// an interrupt (also one the evaluation did not notice), a diverged model, a setting the
// artifact cannot take; nil when it succeeded.
func evaluationError(c *cli.Context, dir string, err error) error {
	if err == nil && c.Context.Err() != nil {
		err = c.Context.Err()
	}
	if err == nil {
		return nil
	}
	if c.Context.Err() != nil {
		return &exitError{code: exitInterrupted, msg: "interrupted"}
	}
	var de *labeldistill.DivergedError
	if errors.As(err, &de) {
		return failuref("%s", divergedMessage(de))
	}
	var fe *config.FieldError
	if errors.As(err, &fe) {
		return evaluateError(err, dir, c)
	}
	var le *atomicfile.LockedError
	if errors.As(err, &le) {
		return usageErrorf("%v; wait for it to end", err)
	}
	return err
}

// printJSON writes v as indented JSON and a new line (the --json output).
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// readArtifact reads --distilled DIR; problems are usage errors naming the flag.
func readArtifact(dir string) (*artifact.Artifact, error) {
	art, err := artifact.Read(dir)
	if err == nil {
		return art, nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		path := filepath.Join(dir, artifact.DistilledFile)
		if pe.Path != "" && filepath.Dir(pe.Path) == filepath.Clean(dir) {
			path = pe.Path // the file of the artifact that could not be read: distilled.pt, report.json
		}
		if _, lerr := os.Lstat(path); lerr == nil { // there, but not readable
			return nil, usageErrorf("--distilled: %s", unreadable(path, err))
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, noArtifactError("--distilled", dir, fmt.Sprintf("has no %s (is it the output folder of ldtorch distill?)", artifact.DistilledFile))
		}
	}
	return nil, usageErrorf("--distilled: %v", err)
}
