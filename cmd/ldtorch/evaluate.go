// evaluate.go: `ldtorch evaluate`: train fresh models on a distilled artifact (possibly with
// another architecture, optimizer or step count) and report their test accuracy.

package main

import (
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

	"github.com/urfave/cli/v2"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/torch"
)

func (e *env) evaluateCommand() *cli.Command {
	ev := func(name string) []string { return []string{envName(name)} }
	return &cli.Command{
		Name:  "evaluate",
		Usage: "train fresh models on distilled labels and report their test accuracy",
		UsageText: "ldtorch evaluate --distilled DIR [--arch resnet] [--optimizer sgd --lr 0.01 --momentum 0.9] [--steps T|auto] [--models M] [--save-models DIR] [--json]\n" +
			"ldtorch evaluate --distilled DIR --protocol ddranking [--arch convnet] [--epochs E] [--models M] [--augment dsa|none] [--json]",
		Description: "Reads DIR/distilled.npz and DIR/report.json (written by ldtorch distill), trains --models fresh " +
			"models on the distilled images and labels and scores them on the target dataset's test split. " +
			"Defaults come from the artifact's report: architecture, T, batch, seed, data folder. " +
			"--protocol ddranking scores the artifact as the DD-Ranking benchmark's soft-label evaluator does " +
			"(docs/ALGORITHM.md §12): ConvNet-3 models trained for 1000 epochs with SGD and DSA over a learning-rate " +
			"grid, the distilled images with hard and with distilled labels, random real images with a full-data " +
			"model's labels, and the full data; it reports hlr, ior and score and writes DIR/evaluations/ddranking.json.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "distilled", Usage: "artifact `DIR` written by ldtorch distill (required)", EnvVars: ev("distilled")},
			&cli.StringFlag{Name: "protocol", Value: artifact.ProtocolPaper, Usage: "evaluation `PROTOCOL`: paper (the paper's recipe) or ddranking (DD-Ranking's soft-label evaluator and its scores)", EnvVars: ev("protocol")},
			&cli.IntFlag{Name: "epochs", Usage: "ddranking: training `EPOCHS` instead of the recipe's (1000; 200 for the full data), for quick checks", EnvVars: ev("epochs")},
			&cli.StringFlag{Name: "augment", Usage: "ddranking: `AUG`mentation of the training batches, dsa or none (default dsa)", EnvVars: ev("augment")},
			&cli.StringFlag{Name: "cache-dir", Usage: "ddranking: `DIR` keeping the full-data models (default: the data folder's ddranking/)", EnvVars: ev("cache-dir")},
			&cli.StringFlag{Name: "arch", Usage: "`ARCH` of the fresh models: lenet, alexnet, resnet or convnet (default: the artifact's eval arch; ddranking: convnet)", EnvVars: ev("arch")},
			&cli.StringFlag{Name: "optimizer", Value: "adam", Usage: "`OPT`: adam or sgd", EnvVars: ev("optimizer")},
			&cli.Float64Flag{Name: "lr", Usage: "learning `RATE` (default: 0.001 for adam, 0.01 for sgd)", EnvVars: ev("lr")},
			&cli.Float64Flag{Name: "momentum", Usage: "SGD `MOMENTUM` in [0, 1) (sgd only)", EnvVars: ev("momentum")},
			&cli.StringFlag{Name: "steps", Value: "auto", Usage: "training `STEPS` per model, or auto for the artifact's T", EnvVars: ev("steps")},
			&cli.IntFlag{Name: "models", Usage: "`M`, the number of fresh models (default: the artifact's eval_models, else 20; ddranking: 5 runs)", EnvVars: ev("models")},
			&cli.IntFlag{Name: "batch", Usage: "base examples per step (default: the artifact's eval_batch)", EnvVars: ev("batch")},
			&cli.BoolFlag{Name: "rr", Usage: "train the ridge-regression head (default: when the artifact's method is rr; --rr=false to turn off)", EnvVars: ev("rr")},
			&cli.StringFlag{Name: "device", Value: "cpu", Usage: "`DEVICE`: cpu, cuda or cuda:N", EnvVars: ev("device")},
			&cli.IntFlag{Name: "threads", Usage: "libtorch intra-op `THREADS` (0: libtorch's default)", EnvVars: ev("threads")},
			&cli.BoolFlag{Name: "allow-tf32", Usage: "let float32 products and convolutions on Ampere-or-later GPUs use TF32 (off: results agree with the CPU's)", EnvVars: ev("allow-tf32")},
			&cli.StringFlag{Name: "data-dir", Usage: "`DIR` holding the datasets (default: the artifact's data_dir)", EnvVars: ev("data-dir")},
			&cli.StringFlag{Name: "dataset", Usage: "target `DATASET`, only for artifacts without report.json", EnvVars: ev("dataset")},
			&cli.Int64Flag{Name: "seed", Usage: "`SEED` of the models' initialisation and batches (default: the artifact's seed)", EnvVars: ev("seed")},
			&cli.StringFlag{Name: "save-models", Usage: "keep the trained models in `DIR` as model-K.pt (PyTorch state dicts of docs/ARTIFACT.md's modules) with models.json", EnvVars: ev("save-models")},
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print no progress", EnvVars: ev("quiet")},
		},
		Action: e.evaluateAction,
	}
}

// positiveInt reads an int flag that must be in [1, maxIntFlag] when set.
func positiveIntFlag(c *cli.Context, name string) (int, error) {
	v := c.Int(name)
	if c.IsSet(name) && (v < 1 || v > maxIntFlag) {
		return 0, usageErrorf("--%s: must be between 1 and %d, got %d", name, maxIntFlag, v)
	}
	return v, nil
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
		artifact.ProtocolPaper:     {"optimizer", "lr", "momentum", "steps", "batch", "rr", "save-models"},
		artifact.ProtocolDDRanking: {"epochs", "augment", "cache-dir"},
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
		return usageErrorf("--arch: unknown architecture %q (want lenet, alexnet, resnet or convnet)", ec.Arch)
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
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxIntFlag {
			return usageErrorf("--steps: want a positive number of steps or auto, got %q", s)
		}
		ec.Steps = n
	}
	var err error
	if ec.Models, err = positiveIntFlag(c, "models"); err != nil {
		return err
	}
	if ec.Batch, err = positiveIntFlag(c, "batch"); err != nil {
		return err
	}
	threads := c.Int("threads")
	if threads < 0 || threads > config.MaxThreads() {
		return usageErrorf("--threads: must be 0 (libtorch's default) or between 1 and %d, got %d", config.MaxThreads(), threads)
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
	test, err := labeldistill.LoadTestSplit(cfg)
	if err != nil {
		return err
	}
	steps := "T"
	if ec.Steps > 0 {
		steps = strconv.Itoa(ec.Steps)
	} else if art.Report != nil {
		steps = strconv.Itoa(art.Report.T)
	}
	pr := newProgress(e.stderr, false, c.Bool("quiet"))
	ec.Progress = pr.evalSteps
	pr.note("training %d %s models (%s%s) for %s steps on %d distilled examples; testing on %d %s test images",
		ec.Models, arch, ec.Optimizer, map[bool]string{true: ", RR head"}[*ec.RR], steps, art.Shape[0], test.N, cfg.Dataset)
	res, err := artifact.Evaluate(c.Context, art, test, ec)
	if err == nil && c.Context.Err() != nil {
		err = c.Context.Err()
	}
	if err != nil {
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
		return err
	}
	if c.Bool("json") {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s\n", b)
		return nil
	}
	rr := ""
	if res.RR {
		rr = ", RR head"
	}
	fmt.Fprintf(e.stdout, "%s: %s%s, %s lr %g, %d steps, %d models\n", dir, res.Arch, rr, res.Optimizer, res.LR, res.Steps, len(res.Accuracies))
	fmt.Fprintf(e.stdout, "test accuracy %.2f%% ± %.2f (population std over %d models)\n", res.Mean, res.Std, len(res.Accuracies))
	if ec.SaveModels != "" {
		fmt.Fprintf(e.stdout, "models saved in %s (model-K.pt, %s)\n", ec.SaveModels, train.ManifestFile)
	}
	if res.Diverged > 0 {
		fmt.Fprintf(e.stdout, "warning: %d of %d models diverged (non-finite parameters; --lr %g) and are left out of the accuracy above\n", res.Diverged, res.Diverged+len(res.Accuracies), res.LR)
	}
	if r := art.Report; r != nil && r.T == res.Steps && res.Arch == r.Config.EvalArch && res.Optimizer == "adam" && res.LR == r.Config.EvalLR {
		fmt.Fprintf(e.stdout, "(the distill run's own test models: %.2f%% ± %.2f over %d)\n", r.TestMean, r.TestStd, len(r.TestAccuracies))
	}
	return nil
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

// readArtifact reads --distilled DIR; problems are usage errors naming the flag.
func readArtifact(dir string) (*artifact.Artifact, error) {
	art, err := artifact.Read(dir)
	if err == nil {
		return art, nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		path := filepath.Join(dir, artifact.DistilledFile)
		if _, lerr := os.Lstat(path); lerr == nil { // there, but not readable
			return nil, usageErrorf("--distilled: %s", unreadable(path, err))
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, usageErrorf("--distilled: %s has no %s (is it the output folder of ldtorch distill?)", dir, artifact.DistilledFile)
		}
	}
	return nil, usageErrorf("--distilled: %v", err)
}
